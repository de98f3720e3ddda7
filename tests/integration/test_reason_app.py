"""The ``reason`` Serve app: two policy deployments (tiny random LMs: they write garbage) behind the
search ingress. A question gets a full search result; the garbage is counted as failed calls;
bad requests get 400s and the app keeps serving."""

from __future__ import annotations

import pytest

from moe_fixtures import save_tiny_model_dir

httpx = pytest.importorskip("httpx")
pytest.importorskip("reasoning_gym")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_reason_app_searches_and_validates(ray_session, tmp_path):
    from ray import serve

    from raypress.operators.reasoning.tasks.catalog import make_tasks
    from raypress.serving.llm_deployment import start_serve
    from raypress.serving.reason_app import build_reason_app
    from raypress.serving.uvicorn_thread import free_port

    dirs = {name: str(save_tiny_model_dir(tmp_path / name, seed=i)) for i, name in enumerate(["a", "b"])}
    port = free_port()
    start_serve("127.0.0.1", port)
    app = build_reason_app({"policies": dirs, "search": {"budget": 4, "max_tokens": 8}, "num_cpus_per_policy": 0.25})
    serve.run(app, name="reason", route_prefix="/reason")
    url = f"http://127.0.0.1:{port}/reason"
    try:
        task = make_tasks("chain_arithmetic", 1, seed=1)[0]
        body = {"family": task.family, "question": task.question, "metadata": task.metadata, "answer": task.answer}
        out = httpx.post(f"{url}/v1/reason", json=body, timeout=120)
        assert out.status_code == 200, out.text
        result = out.json()
        assert result["verified"] is True and result["solved"] is False  # random weights never answer
        assert result["policy_calls"] == 4 and sum(result["failures"].values()) == 4
        assert httpx.get(f"{url}/v1/policies").json()["policies"] == ["a", "b"]
        bad_family = httpx.post(f"{url}/v1/reason", json={**body, "family": "chess"})
        assert bad_family.status_code == 400 and bad_family.json()["error"]["param"] == "family"
        missing = httpx.post(f"{url}/v1/reason", json={"family": task.family})
        assert missing.status_code == 400 and missing.json()["error"]["param"] == "question"
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
    finally:
        serve.delete("reason")
        serve.shutdown()
