"""The purify HTTP app over a tiny untrained bridge, through FastAPI's TestClient (no Ray)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from fastapi.testclient import TestClient  # noqa: E402
from PIL import Image  # noqa: E402

from raypress.models.bridge_unet import BridgeUNet, BridgeUNetConfig, save_bridge  # noqa: E402
from raypress.models.ddbm import VEBridge, sampler_nfe  # noqa: E402
from raypress.image_codecs import encode_png  # noqa: E402
from raypress.inference.purifier import Purifier  # noqa: E402
from raypress.serving.purify_app import PurifyAppArgs, create_purify_app  # noqa: E402

TINY = dict(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, attention=False, norm_groups=4)


def _save_tiny(directory, objective: str) -> str:
    torch.manual_seed(0)
    net = BridgeUNet(BridgeUNetConfig(**TINY))
    with torch.no_grad():  # an untrained net outputs 0 (zero-initialised last conv): give it a signal
        net.out_conv.weight.normal_(0, 0.05)
    save_bridge(net, {"objective": objective, "bridge": VEBridge().to_dict()}, directory)
    return str(directory)


@pytest.fixture(scope="module")
def bridge_dir(tmp_path_factory) -> str:
    return _save_tiny(tmp_path_factory.mktemp("bridge"), "bridge")


@pytest.fixture(scope="module")
def client(bridge_dir) -> TestClient:
    return TestClient(create_purify_app(bridge_dir))


def _png(size=(28, 28), seed=0) -> bytes:
    return encode_png(np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _decode(text: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(text))))


def test_good_request_returns_same_size_pngs(client):
    r = client.post("/v1/purify", json={"images": [_b64(_png(seed=1)), _b64(_png(seed=2))], "steps": 2, "seed": 7})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["images"]) == 2 and body["nfe"] == sampler_nfe(2, 0.33) and body["seed"] == 7
    assert body["objective"] == "bridge" and body["steps"] == 2
    for text in body["images"]:
        out = _decode(text)
        assert out.shape == (28, 28) and out.dtype == np.uint8
    again = client.post("/v1/purify", json={"images": [_b64(_png(seed=1)), _b64(_png(seed=2))], "steps": 2, "seed": 7})
    assert again.json()["images"] == body["images"]  # a seed fixes the sampler's noise


def test_sampler_changes_the_image_and_defaults_apply(client):
    src = _png(seed=3)
    r = client.post("/v1/purify", json={"images": [f"data:image/png;base64,{_b64(src)}"], "churn_step_ratio": 0.0,
                                        "steps": 1})
    assert r.status_code == 200, r.text
    assert r.json()["nfe"] == sampler_nfe(1, 0.0) and isinstance(r.json()["seed"], int)
    assert not np.array_equal(_decode(r.json()["images"][0]), _decode(_b64(src)))


def test_bad_base64_is_400_naming_the_index(client):
    r = client.post("/v1/purify", json={"images": [_b64(_png()), "not base64 !!"]})
    assert r.status_code == 400
    assert "images[1]" in r.json()["error"]["message"] and "base64" in r.json()["error"]["message"]


def test_wrong_size_and_corrupt_image_are_400_naming_the_index(client):
    r = client.post("/v1/purify", json={"images": [_b64(_png()), _b64(_png()), _b64(_png((32, 32)))]})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert message.startswith("images[2]: ") and "32x32" in message and "28x28" in message
    r = client.post("/v1/purify", json={"images": [_b64(b"definitely not a png")]})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("images[0]: cannot decode image")


def test_unknown_field_and_bad_values_are_400(client):
    r = client.post("/v1/purify", json={"images": [_b64(_png())], "temperature": 1.0})
    assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]
    r = client.post("/v1/purify", json={"images": []})
    assert r.status_code == 400 and "images" in r.json()["error"]["message"]
    r = client.post("/v1/purify", json={"images": [_b64(_png())], "churn_step_ratio": 1.5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "churn_step_ratio"
    r = client.post("/v1/purify", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_server_still_answers_after_errors(client):
    assert client.post("/v1/purify", json={"images": ["%%%"]}).status_code == 400
    assert client.post("/v1/purify", json={"nope": 1}).status_code == 400
    health = client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    r = client.post("/v1/purify", json={"images": [_b64(_png())], "steps": 1})
    assert r.status_code == 200 and len(r.json()["images"]) == 1


def test_raw_and_multipart_bodies_take_options_from_the_query(client):
    r = client.post("/v1/purify?steps=1&seed=3", content=_png(), headers={"content-type": "image/png"})
    assert r.status_code == 200, r.text
    assert r.json()["seed"] == 3 and _decode(r.json()["images"][0]).shape == (28, 28)
    r = client.post("/v1/purify?steps=1&seed=3", files={"image": ("x.png", _png(), "image/png")})
    assert r.status_code == 200, r.text
    assert r.json()["seed"] == 3 and len(r.json()["images"]) == 1
    r = client.post("/v1/purify?steps=0", content=_png(), headers={"content-type": "image/png"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "steps"
    r = client.post("/v1/purify", content=_png((14, 14)), headers={"content-type": "image/png"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("images[0]: image is 14x14")
    r = client.post("/v1/purify", content=b"hello", headers={"content-type": "text/plain"})
    assert r.status_code == 415


def test_model_route_reports_the_config(client):
    info = client.get("/v1/model").json()
    assert info["objective"] == "bridge" and info["image_size"] == [28, 28] and info["channels"] == 1
    assert info["config"]["kind"] == "bridgepure_ddbm" and info["defaults"]["steps"] == 10


def test_one_step_model_uses_one_network_call(tmp_path):
    client = TestClient(create_purify_app(_save_tiny(tmp_path / "one", "one_step")))
    r = client.post("/v1/purify", json={"images": [_b64(_png())], "steps": 40})
    assert r.status_code == 200, r.text
    assert r.json()["nfe"] == 1 and r.json()["objective"] == "one_step"


def test_limits_and_bearer_token(bridge_dir):
    args = PurifyAppArgs(model=bridge_dir, max_images=2, api_key="sesame", model_name="bp")
    client = TestClient(create_purify_app(Purifier(bridge_dir), args))
    assert client.get("/health").status_code == 200  # probes need no token
    assert client.post("/v1/purify", json={"images": [_b64(_png())]}).status_code == 401
    auth = {"authorization": "Bearer sesame"}
    r = client.post("/v1/purify", json={"images": [_b64(_png())] * 3}, headers=auth)
    assert r.status_code == 400 and "at most 2" in r.json()["error"]["message"]
    r = client.post("/v1/purify", json={"images": [_b64(_png())], "steps": 1}, headers=auth)
    assert r.status_code == 200 and r.json()["model"] == "bp"


def test_app_args_refuse_a_directory_without_a_model(tmp_path):
    with pytest.raises(ValueError, match="not a model directory"):
        PurifyAppArgs(model=str(tmp_path))
    (tmp_path / "config.json").write_text('{"kind": "image_classifier"}')
    with pytest.raises(ValueError, match="kind 'image_classifier'"):
        create_purify_app(str(tmp_path))
