"""The LLM server's OpenAPI document is its contract: ``schemathesis run --checks all`` against a live
server (real HTTP, a real tiny engine) finds nothing, and the document lists what the server answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

KEY = "contract-key"
SETTINGS = Path(__file__).resolve().parents[1] / "contract" / "llm_api.toml"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    engine = Engine.from_pretrained(tiny_model_dir, max_batch_size=8, max_len=96, max_queue=32)
    with serve_in_thread(create_app(engine, "tiny", api_key=KEY, max_request_bytes=64 * 1024)) as srv:
        yield srv
    engine.stop()


@pytest.fixture(scope="module")
def spec(server) -> dict:
    return httpx.get(f"{server.url}/openapi.json").json()


def test_schemathesis_finds_nothing(server, tmp_path):
    """Every check schemathesis has (status codes, content types, headers, schemas of bodies and
    of each SSE event, schema-valid data accepted, invalid data refused, auth not ignored, 405 with
    ``Allow``), on generated requests to every route. The seed is fixed so a failure reproduces."""
    st = Path(sys.executable).with_name("st")
    if not st.exists():
        pytest.skip("schemathesis is not installed (the dev extra has it)")
    command = [str(st), "--config-file", str(SETTINGS), "run", f"{server.url}/openapi.json",
               "--checks", "all", "-H", f"Authorization: Bearer {KEY}", "--max-examples", "40",
               "--seed", "20261206", "--request-timeout", "60", "--no-color"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "No issues found" in result.stdout


def test_every_status_the_generation_routes_answer_is_documented(spec):
    for path in ("/v1/completions", "/v1/chat/completions"):
        operation = spec["paths"][path]["post"]
        assert {"200", "400", "401", "404", "405", "413", "500", "503"} <= set(operation["responses"])
        assert "422" not in operation["responses"]  # FastAPI's default; the server answers 400
        assert operation["security"] == [{"bearer": []}]
        assert "Retry-After" in operation["responses"]["503"]["headers"]
        assert "Allow" in operation["responses"]["405"]["headers"]
        assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
        error = operation["responses"]["400"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorResponse"}
    assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_metrics_and_health_are_documented_open(spec):
    metrics = spec["paths"]["/metrics"]["get"]
    assert "security" not in metrics and "401" not in metrics["responses"]
    assert "text/plain" in metrics["responses"]["200"]["content"]
    assert "security" not in spec["paths"]["/health"]["get"]
    assert "Retry-After" in spec["paths"]["/health"]["get"]["responses"]["503"]["headers"]


def test_405_names_the_allowed_methods(server):
    response = httpx.delete(f"{server.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 405 and response.headers["allow"] == "GET"
    assert response.json()["error"]["message"] == "Method Not Allowed"


@pytest.mark.parametrize("body, param", [
    ({"model": "tiny", "prompt": "hi", "stop": ""}, "stop"),  # the engine refused it with a 500
    ({"model": "tiny", "prompt": "hi", "stop_token_ids": [-3]}, "stop_token_ids.0"),  # a 500 too
    ({"model": "tiny", "prompt": [-5, 3]}, None),  # decoded for echo before the engine's check: a 500
    ({"model": "tiny", "prompt": [10**9]}, "prompt"),  # past the vocabulary
])
def test_what_schemathesis_found_is_a_400_naming_the_field(server, body, param):
    response = httpx.post(f"{server.url}/v1/completions", content=json.dumps(body),
                          headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    if param is not None:
        assert error["param"] == param or param in error["message"], error


def test_a_missing_body_is_named(server):
    response = httpx.post(f"{server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400
    assert "needs a JSON body" in response.json()["error"]["message"]
