"""Pipeline files are data: `validate` and `plan` execute nothing from them, no file can exhaust
the machine (alias bombs, huge or deep documents, thousands of nodes), duplicate keys are problems,
and every unreadable file is one line with exit 2."""

from __future__ import annotations

import gzip
import pickle
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from raypress.cli import app
from raypress.dag import yaml_lines
from raypress.dag.batch_exec import StreamingOpRunner
from raypress.dag.plan import describe, make_plan
from raypress.dag.validate import PipelineInvalid, load_pipeline
from raypress.operators.general.python_lambda_mapper import CodeNotAllowed, PythonLambdaMapper, PythonLambdaParams

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raypress.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120, **kwargs)


def invoke(*args: str):
    """In-process CLI (faster than a subprocess); stdout and stderr together in ``output``."""
    return CliRunner().invoke(app, list(args))


def lambda_pipeline(tmp_path: Path, lambda_str: str, settings: str = "") -> Path:
    path = tmp_path / "code.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: code
        {settings or "description: no settings"}
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: [in.jsonl]}}
          - id: inv
            op: python_lambda_mapper
            input: src
            with:
              lambda_str: {lambda_str!r}
          - id: out
            op: write_jsonl
            input: inv
            with: {{path: out}}
        """))
    return path


def marker_lambdas(marker: Path) -> list[str]:
    """Code that would create ``marker`` when evaluated: as the whole expression, or in a lambda's
    default argument (evaluated when the lambda is defined, not called)."""
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    return [touch, f"lambda s, *, _={touch}: s"]


# -- 1. code in a pipeline file ---------------------------------------------------------------


@pytest.mark.parametrize("allowed", [False, True])
@pytest.mark.parametrize("which", [0, 1])
def test_validate_and_plan_never_evaluate_the_lambda(tmp_path, allowed, which):
    marker = tmp_path / "MARKER"
    lam = marker_lambdas(marker)[which]
    path = lambda_pipeline(tmp_path, lam, "settings: {allow_code: true}" if allowed else "")
    with pytest.raises(PipelineInvalid) if not (allowed and which == 1) else _no_raise():
        load_pipeline(path)
    for command in ("validate", "plan"):
        proc = cli(command, str(path))
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == (0 if allowed and which == 1 else 2), proc.stderr
    assert not marker.exists(), "validate/plan executed code from the pipeline file"


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_code_op_without_allow_code_is_a_problem_naming_node_line_and_setting(tmp_path):
    path = lambda_pipeline(tmp_path, "lambda s: s")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = info.value.problems
    assert problem.node == "inv" and problem.line == 8  # the `op: python_lambda_mapper` line
    assert "settings.allow_code: true" in problem.message


def test_allow_code_is_a_bool_setting_not_a_parameter(tmp_path):
    path = lambda_pipeline(tmp_path, "lambda s: s", "settings: {allow_code: 'yes'}")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    assert any("allow_code must be true or false" in str(p) for p in info.value.problems)
    path = lambda_pipeline(tmp_path, "lambda s: s", "settings: {allow_code: true}")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path, ["inv.allow_code=true"])
    assert any("run-wide setting" in str(p) for p in info.value.problems)


def test_only_a_lambda_expression_is_accepted(tmp_path):
    for bad in ("1 + 1", "lambda s: (", "print('x')"):
        with pytest.raises(ValueError):
            PythonLambdaParams(lambda_str=bad)


def test_the_grant_reaches_the_op_through_the_runners_revalidation(tmp_path):
    vp = load_pipeline(lambda_pipeline(tmp_path, "lambda s: s", "settings: {allow_code: true}"))
    node = vp.nodes["inv"]
    again = node.op_cls.Params.model_validate(node.params.model_dump(exclude_unset=True))  # as Runner does
    assert again.allow_code is True


def test_the_op_compiles_lazily_and_refuses_without_the_grant(tmp_path):
    marker = tmp_path / "MARKER"
    lam = marker_lambdas(marker)[1]
    op = PythonLambdaMapper(PythonLambdaParams(lambda_str=lam))
    table = pa.table({"id": ["a"], "text": ["x"]})
    with pytest.raises(CodeNotAllowed):
        op.process_batch(table)
    out = StreamingOpRunner(PythonLambdaMapper, PythonLambdaParams(lambda_str=lam), None, "inv")(table)
    assert out.column("_rp_reason").to_pylist() == ["CodeNotAllowed"]  # quarantined, not run
    assert not marker.exists()
    allowed = PythonLambdaMapper(PythonLambdaParams(lambda_str="lambda s: {**s, 'n': 1}", allow_code=True))
    worker = pickle.loads(pickle.dumps(allowed))  # as Ray ships it
    assert worker.fn is None and worker.process_batch(table).column("n").to_pylist() == [1]


# -- 2. documents that would exhaust the machine ------------------------------------------------

BOMB = "\n".join(
    ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
) + "\n"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))


def test_alias_bomb_is_a_quick_one_line_error_under_a_memory_limit(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 600
    start = time.perf_counter()
    proc = cli("validate", str(path), preexec_fn=_limit_memory)
    assert time.perf_counter() - start < 30  # it took 68 s and 5.7 GB before the bound
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "expands to more than" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("text, reason", [
    ("a: &x [1, *x]\n", "recursive alias"),
    ("a: " + "[" * 100_000 + "\n", "nest"),
    ("".join(" " * i + f"k{i}:\n" for i in range(3000)), "nested too deeply"),
])
def test_recursive_and_deep_documents_are_errors(tmp_path, text, reason):
    with pytest.raises(yaml_lines.YamlSyntaxError) as info:
        yaml_lines.load_located(text, "f.yaml")
    assert reason in info.value.message and "\n" not in info.value.message


def test_node_count_is_bounded_even_without_aliases(monkeypatch):
    monkeypatch.setattr(yaml_lines, "MAX_NODES", 1000)
    with pytest.raises(yaml_lines.YamlSyntaxError, match="more than 1,000 YAML nodes"):
        yaml_lines.load_located("[" + "0, " * 2000 + "0]", "f.yaml")
    assert yaml_lines.load_located("[" + "0, " * 900 + "0]", "f.yaml").data[-1] == 0


def test_aliases_within_bounds_still_load_with_lines(tmp_path):
    doc = yaml_lines.load_located("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\nagain: *b\n", "f.yaml")
    assert doc.data["use"] == {"x": 3, "y": 2} and doc.data["again"] == {"x": 1, "y": 2}
    assert doc.duplicates == [] and doc.line(("again", "x")) == 5


# -- 3. thousands of nodes --------------------------------------------------------------------


def chain(n: int) -> str:
    lines = ["name: chain", "nodes:", "  - id: n0", "    op: read_jsonl", "    with: {paths: [in.jsonl]}"]
    for i in range(1, n - 1):
        lines += [f"  - id: n{i}", "    op: clean_email_mapper", f"    input: n{i - 1}"]
    lines += [f"  - id: n{n - 1}", "    op: write_jsonl", f"    input: n{n - 2}", "    with: {path: out}"]
    return "\n".join(lines) + "\n"


def test_2000_node_chain_validates_and_plans_in_seconds(tmp_path):
    """Regression guard: validation was cubic in the node count (`_toposort` rebuilt a set per node
    per round) and took 112 s for this chain; now it is linear and takes well under a second."""
    path = tmp_path / "chain.yaml"
    path.write_text(chain(2000))
    start = time.perf_counter()
    vp = load_pipeline(path)
    rows = describe(make_plan(vp))
    assert time.perf_counter() - start < 5
    assert len(rows) == 2000 and vp.order[0] == "n0" and vp.order[-1] == "n1999"


def test_20000_node_chain_validates(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(chain(20_000))
    start = time.perf_counter()
    vp = load_pipeline(path)
    assert len(vp.order) == 20_000
    assert time.perf_counter() - start < 60  # ~3 s here; generous for a loaded machine


def test_thousands_of_bad_inputs_are_reported_quickly(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(chain(2000).replace("input: n", "input: m"))
    start = time.perf_counter()
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    assert len(info.value.problems) == 1999 and time.perf_counter() - start < 5


def test_order_is_by_rounds_in_declaration_order_and_a_long_cycle_is_found(tmp_path):
    path = tmp_path / "order.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - {id: late, op: clean_email_mapper, input: mid}
          - {id: b, op: read_jsonl, with: {paths: [b.jsonl]}}
          - {id: mid, op: clean_email_mapper, input: [a, b]}
          - {id: a, op: read_jsonl, with: {paths: [a.jsonl]}}
          - {id: side, op: clean_email_mapper, input: a}
          - {id: out, op: write_jsonl, input: [late, side], with: {path: out}}
        """))
    assert load_pipeline(path).order == ["b", "a", "mid", "side", "late", "out"]
    ring = ["nodes:"] + [f"  - {{id: r{i}, op: clean_email_mapper, input: r{(i - 1) % 3000}}}" for i in range(3000)]
    path.write_text("\n".join(ring) + "\n")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = [p for p in info.value.problems if "cycle" in p.message]
    assert problem.message.count("->") == 3000


# -- 4. duplicate keys ------------------------------------------------------------------------


def test_duplicate_keys_at_any_depth_are_all_reported_with_both_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text(textwrap.dedent("""\
        name: dup
        settings:
          seed: 1
          seed: 2
        nodes:
          - id: src
            op: read_jsonl
            with: {paths: [a.jsonl]}
            with: {paths: [b.jsonl]}
          - id: out
            op: write_jsonl
            input: src
            with:
              path: out
              path: out2
        name: again
        """))
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    found = {(p.line, p.message) for p in info.value.problems}
    assert {(4, "duplicate key 'seed' (first at line 3)"), (9, "duplicate key 'with' (first at line 8)"),
            (15, "duplicate key 'path' (first at line 14)"), (16, "duplicate key 'name' (first at line 1)")} <= found


# -- 5. files that are not pipelines ----------------------------------------------------------


def _write(tmp_path: Path, name: str, content: bytes | None) -> Path:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


FILES = {
    "random.yaml": (bytes(range(128, 256)) * 20, "not UTF-8"),
    "image.png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "not a text file"),
    "data.yaml.gz": (gzip.compress(b"name: x\n"), "not"),
    "nul.yaml": (b"name: x\nnodes: []\x00\n", "NUL"),
    "control.yaml": (b"name: x\n\x01nodes: []\n", "control character"),
    "huge.yaml": (b"# " + b"x" * (9 * 2**20) + b"\n", "larger than 8 MiB"),
    "empty.yaml": (b"", "empty"),
    "comments.yaml": (b"# nothing here\n\n", "empty"),
    "syntax.yaml": (b"name: x\nnodes: [\n", "YAML syntax error"),
    "badvalue.yaml": (b"name: x\nwhen: 2020-13-01\n", "month must be in 1..12"),
    "adir": (None, "is a directory"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_an_unreadable_file_is_one_line_and_exit_2(tmp_path, name):
    content, reason = FILES[name]
    path = _write(tmp_path, name, content)
    result = invoke("validate", str(path))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and str(path) in lines[0] and reason in lines[0], result.output
    assert "Traceback" not in result.output and isinstance(result.exception, (SystemExit, type(None)))


def test_missing_and_unpermitted_files_are_one_line(tmp_path, monkeypatch):
    result = invoke("plan", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2 and "No such file" in result.output
    assert len(result.output.strip().splitlines()) == 1
    path = _write(tmp_path, "secret.yaml", b"name: x\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(yaml_lines, "open", denied, raising=False)  # root reads any file: simulate
    result = invoke("validate", str(path))
    assert result.exit_code == 2 and "Permission denied" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_plan_and_run_refuse_a_binary_file_before_anything_starts(tmp_path):
    path = _write(tmp_path, "image.png", FILES["image.png"][0])
    for command in ("plan", "run"):
        proc = cli(command, str(path))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and str(path) in proc.stderr
