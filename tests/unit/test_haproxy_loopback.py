"""The wrapper that keeps Serve's HAProxy ingress on loopback: it rewrites the every-interface binds
of the config Serve hands haproxy (its Prometheus exporter and stats page) and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

from raypress.dag import haproxy_loopback as hl

CONFIG = """frontend prometheus
    bind :9101
    mode http
frontend http_frontend
    bind 127.0.0.1:8000
listen stats
  bind *:8404
  stats enable
backend b
    server s1 0.0.0.0:30000 check
"""


def test_the_wrapper_binds_every_interface_listener_on_loopback_and_passes_the_rest(tmp_path: Path):
    fake = tmp_path / "haproxy"  # prints the config it is given, then its other arguments
    fake.write_text('#!/bin/bash\nwhile [ $# -gt 0 ]; do\n  if [ "$1" = -f ]; then cat "$2"; shift 2; '
                    'else echo "arg $1"; shift; fi\ndone\n')
    fake.chmod(0o755)
    wrapper = hl.install_wrapper(str(fake), tmp_path / "bin")
    config = tmp_path / "haproxy.cfg"
    config.write_text(CONFIG)
    out = subprocess.run([str(wrapper), "-db", "-f", str(config), "-sf", "123"], capture_output=True, text=True,
                         check=True).stdout
    assert "bind 127.0.0.1:9101" in out and "bind 127.0.0.1:8404" in out
    assert "bind 127.0.0.1:8000" in out and "server s1 0.0.0.0:30000 check" in out  # explicit hosts stay
    assert "arg -db" in out and "arg -sf" in out and "arg 123" in out
    assert config.read_text() == CONFIG  # Serve's own file untouched (it reloads from it)
    assert hl.install_wrapper(str(fake), tmp_path / "bin") == wrapper  # written once per content


def test_the_wrapper_is_named_only_where_the_ingress_is_asked_for_and_no_binary_is(monkeypatch, tmp_path):
    monkeypatch.setattr(hl, "haproxy_binary", lambda: "/usr/sbin/haproxy")
    monkeypatch.setattr(hl.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.delenv(hl.HA_PROXY_ENV, raising=False)
    monkeypatch.delenv(hl.BINARY_ENV, raising=False)
    assert hl.keep_on_loopback() is None  # not asked for
    monkeypatch.setenv(hl.HA_PROXY_ENV, "1")
    monkeypatch.setenv(hl.BINARY_ENV, "/opt/my/haproxy")
    assert hl.keep_on_loopback() is None  # an operator's own binary stays
    monkeypatch.delenv(hl.BINARY_ENV)
    path = hl.keep_on_loopback()
    assert path is not None and hl.os.environ[hl.BINARY_ENV] == path
    assert "exec /usr/sbin/haproxy " in Path(path).read_text()


def test_settings_serve_ingress_asks_the_embedded_ray_for_haproxy_where_it_can(monkeypatch):
    monkeypatch.delenv(hl.HA_PROXY_ENV, raising=False)
    monkeypatch.setattr(hl, "haproxy_binary", lambda: None)
    assert hl.choose_ingress("proxy") == "proxy" and hl.choose_ingress("auto") == "proxy"
    try:
        hl.choose_ingress("haproxy")
    except RuntimeError as exc:
        assert "apt-get install haproxy" in str(exc)
    else:
        raise AssertionError("haproxy without the binary must fail")
    assert hl.HA_PROXY_ENV not in hl.os.environ
    monkeypatch.setattr(hl, "haproxy_binary", lambda: "/usr/sbin/haproxy")
    assert hl.choose_ingress("proxy") == "proxy" and hl.HA_PROXY_ENV not in hl.os.environ
    assert hl.choose_ingress("auto") == "haproxy" and hl.os.environ[hl.HA_PROXY_ENV] == "1"
    assert hl.choose_ingress("proxy") == "haproxy"  # the caller's (here: auto's) variable still counts


def test_a_bad_or_unavailable_serve_ingress_is_a_problem_on_its_line(tmp_path, monkeypatch):
    import pytest

    from raypress.dag import validate

    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    pipeline = tmp_path / "p.yaml"

    def problems(value: str) -> list:
        pipeline.write_text(f"settings:\n  serve_ingress: {value}\nnodes:\n"
                            f"  - {{id: a, op: read_jsonl, with: {{paths: ['{tmp_path / 'in.jsonl'}']}}}}\n")
        with pytest.raises(validate.PipelineInvalid) as info:
            validate.load_pipeline(pipeline)
        return [p for p in info.value.problems if p.key == "settings.serve_ingress"]

    bad = problems("nginx")
    assert len(bad) == 1 and bad[0].line == 2 and "'proxy', 'haproxy', 'auto'" in bad[0].message
    monkeypatch.setattr(validate, "haproxy_binary", lambda: None)
    missing = problems("haproxy")
    assert len(missing) == 1 and "apt-get install haproxy" in missing[0].message


def test_the_embedded_ray_drains_replicas_behind_haproxy_for_2_s_not_30(monkeypatch):
    """Ray holds a stopping replica open 30 s for a load balancer in front of the replicas; the
    embedded Ray's only one is Serve's own HAProxy, so raypress shortens it unless told otherwise."""
    monkeypatch.delenv(hl.DRAIN_ENV, raising=False)
    monkeypatch.delenv(hl.HA_PROXY_ENV, raising=False)
    assert not hl.short_drain_when_embedded() and hl.DRAIN_ENV not in hl.os.environ  # Serve's proxy: no drain
    monkeypatch.setenv(hl.HA_PROXY_ENV, "1")
    assert hl.short_drain_when_embedded() and hl.os.environ[hl.DRAIN_ENV] == "2"
    monkeypatch.setenv(hl.DRAIN_ENV, "45")  # an operator's value stands
    assert not hl.short_drain_when_embedded() and hl.os.environ[hl.DRAIN_ENV] == "45"
