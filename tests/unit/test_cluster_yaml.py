"""cluster.yaml must pass the same checks `ray up` runs, and stay in step with pyproject.toml."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load((REPO / "cluster.yaml").read_text())


def ray_up_checks(config: dict) -> dict:
    """What `ray up` does before launching anything: merge provider defaults, then validate."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_passes_rays_schema(cluster):
    prepared = ray_up_checks(cluster)
    assert prepared["cluster_name"] == "raypress"
    assert prepared["provider"]["type"] == "aws"


def test_cluster_has_head_cpu_and_gpu_worker_types(cluster):
    types = cluster["available_node_types"]
    head = cluster["head_node_type"]
    assert types[head]["resources"].get("CPU") == 0, "the head should not run tasks"
    workers = {name: t for name, t in types.items() if name != head}
    assert any(t["resources"].get("GPU", 0) >= 1 for t in workers.values())
    assert any(t["resources"].get("GPU", 0) == 0 for t in workers.values())
    assert sum(t.get("max_workers", 0) for t in workers.values()) >= cluster["max_workers"]


def test_cluster_mounts_and_installs_this_repo(cluster):
    mounted = cluster["file_mounts"]["~/raypress"]
    for needed in ("pipelines", "raypress", "pyproject.toml"):
        assert (REPO / mounted / needed).exists(), f"{needed} is not under the mounted {mounted}"
    install = " ".join(cluster["setup_commands"])
    match = re.search(r"pip install [^\n]*-e \"\$HOME/raypress\[([\w,-]+)\]\"", install)
    assert match, install
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(match[1].split(",")) <= set(extras), "setup_commands names an extra pyproject lacks"


def test_cluster_images_match_the_pinned_ray(cluster):
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    ray_pin = next(p for p in pins if p.startswith("ray["))
    major_minor = re.search(r"==(\d+\.\d+)", ray_pin)[1]
    images = [cluster["docker"]["image"]] + [
        t["docker"]["worker_image"] for t in cluster["available_node_types"].values() if "docker" in t
    ]
    for image in images:
        assert image.startswith(f"rayproject/ray:{major_minor}."), image


@pytest.mark.parametrize(
    "breakage",
    [
        lambda c: c.update(head_start_ray_command=c.pop("head_start_ray_commands")),
        lambda c: c["available_node_types"]["gpu_worker"].update(min_worker=0),
        lambda c: c["available_node_types"]["gpu_worker"]["resources"].update(GPU="one"),
        lambda c: c["docker"].update(imagee=c["docker"]["image"]),
    ],
    ids=["misspelled-top-key", "misspelled-node-key", "non-integer-resource", "misspelled-docker-key"],
)
def test_broken_copies_fail_validation(cluster, breakage):
    broken = copy.deepcopy(cluster)
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError):
        ray_up_checks(broken)


def test_unknown_head_node_type_fails_validation(cluster):
    broken = copy.deepcopy(cluster)
    broken["head_node_type"] = "hed"
    with pytest.raises(ValueError, match="head_node_type"):
        ray_up_checks(broken)
