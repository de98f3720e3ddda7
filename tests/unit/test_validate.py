"""`raypress validate`: every mistake in a pipeline is reported at once, each with file:line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from raypress.dag.validate import PipelineInvalid, load_pipeline

BAD = textwrap.dedent("""\
    name: broken
    setings: {seed: 1}
    nodes:
      - id: src
        op: read_jsonl
        with: {paths: [data.jsonl]}
      - id: clean
        op: clean_email_mapper
        input: src
      - id: words
        op: words_num_filtr
        input: clean
      - id: alnum
        op: alphanumeric_filter
        input: cleen
        with:
          min_ratio: lots
      - id: lines
        op: maximum_line_length_filter
        input: clean
        with:
          max_lenn: 10
      - id: clean
        op: whitespace_normalization_mapper
        input: src
      - id: a
        op: clean_links_mapper
        input: b
      - id: b
        op: clean_links_mapper
        input: a
      - id: clf
        op: train_quality_classifier
        input: src
        with: {label_key: label}
      - id: wrong_type
        op: clean_email_mapper
        input: clf
      - id: out
        op: write_parquet
        input: lines
        with: {path: out}
    """)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    count = 0
    for i, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            count += 1
            if count == nth:
                return i
    raise AssertionError(needle)


@pytest.fixture()
def bad_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return path


def test_all_problems_reported_with_lines(bad_file):
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(bad_file)
    problems = info.value.problems
    text = "\n".join(str(p) for p in problems)
    f = str(bad_file)

    def has(line: int, *fragments: str) -> bool:
        return any(p.line == line and p.file == f and all(x in str(p) for x in fragments) for p in problems)

    assert has(line_of(BAD, "setings"), "unknown top-level key", "did you mean 'settings'"), text
    assert has(line_of(BAD, "words_num_filtr"), "unknown op", "did you mean 'words_num_filter'"), text
    assert has(line_of(BAD, "input: cleen"), "'cleen' is not a node", "did you mean 'clean'"), text
    assert has(line_of(BAD, "min_ratio: lots"), "alnum", "min_ratio"), text
    assert has(line_of(BAD, "max_lenn"), "unknown parameter", "did you mean 'max_len'"), text
    assert has(line_of(BAD, "- id: clean", 2), "duplicate node id", f"line {line_of(BAD, '- id: clean')}"), text
    assert any("cycle" in str(p) and "a -> b -> a" in str(p) or "b -> a -> b" in str(p) for p in problems), text
    assert has(line_of(BAD, "input: clf"), "gives a Model", "needs a Dataset"), text
    assert len(problems) >= 8


def test_yaml_syntax_error_has_line(tmp_path):
    path = tmp_path / "syntax.yaml"
    path.write_text("name: x\nnodes:\n  - id: a\n    op: [unclosed\n  - id: b\n")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = info.value.problems
    assert problem.line is not None and 4 <= problem.line <= 6
    assert "YAML syntax error" in problem.message


def test_unknown_column_is_an_error(tmp_path):
    path = tmp_path / "cols.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - id: src
            op: read_package_metadata
          - id: f
            op: text_length_filter
            input: src
            with:
              text_key: body
        """))
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = info.value.problems
    assert problem.line == 8 and "reads column 'body'" in problem.message


def test_set_override_parsed_as_yaml_and_checked(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - id: src
            op: read_jsonl
            with: {paths: [a.jsonl]}
          - id: words
            op: words_num_filter
            input: src
        """))
    vp = load_pipeline(path, ["words.min_num=3", "src.paths=[b.jsonl, c.jsonl]"])
    assert vp.nodes["words"].params.min_num == 3
    assert vp.nodes["src"].params.paths == ["b.jsonl", "c.jsonl"]
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path, ["wrods.min_num=3", "words.min_num=many"])
    text = "\n".join(map(str, info.value.problems))
    assert "no node 'wrods'" in text and "did you mean 'words'" in text
    assert "min_num" in text


def test_set_override_with_a_glob_sets_every_matching_node(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - id: src
            op: read_jsonl
            with: {paths: [a.jsonl]}
          - id: words_a
            op: words_num_filter
            input: src
          - id: words_b
            op: words_num_filter
            input: words_a
        """))
    vp = load_pipeline(path, ["words_*.min_num=7"])
    assert vp.nodes["words_a"].params.min_num == 7 and vp.nodes["words_b"].params.min_num == 7
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path, ["nothing_*.min_num=7", "words_?.min_num=many"])
    text = "\n".join(map(str, info.value.problems))
    assert "no node matches 'nothing_*'" in text and "min_num" in text


def test_data_juicer_process_shorthand(tmp_path):
    path = tmp_path / "dj.yaml"
    path.write_text(textwrap.dedent("""\
        project_name: dj-recipe
        dataset_path: data/in.jsonl
        export_path: out/result.jsonl
        np: 2
        process:
          - clean_email_mapper:
          - words_num_filter:
              min_num: 5
          - words_num_filter:
              max_num: 1000
        """))
    vp = load_pipeline(path)
    assert vp.spec.name == "dj-recipe"
    assert vp.order == ["dataset", "clean_email_mapper", "words_num_filter", "words_num_filter_2", "drop_stats",
                        "export"]  # drop_stats: Data-Juicer's keep_stats_in_res_ds defaults to false
    assert vp.nodes["dataset"].op_cls.name == "read_jsonl"
    assert vp.nodes["export"].op_cls.name == "write_jsonl"
    assert vp.nodes["words_num_filter"].params.min_num == 5
    assert vp.spec.settings["np"] == 2


def test_validate_cli_exits_nonzero_and_prints_all(bad_file):
    proc = subprocess.run([sys.executable, "-m", "raypress.cli", "validate", str(bad_file)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"{bad_file}:{line_of(BAD, 'words_num_filtr')}" in proc.stderr
    assert f"{bad_file}:{line_of(BAD, 'max_lenn')}" in proc.stderr


def test_a_column_dropped_upstream_cannot_be_read(tmp_path):
    """html_to_interleaved drops the raw html (unless keep_html): a later read of it is an error."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "nodes:\n"
        "  - {id: pages, op: read_warc, with: {paths: [a.warc.gz]}}\n"
        "  - {id: extract, op: html_to_interleaved, input: pages}\n"
        "  - {id: again, op: html_to_interleaved, input: extract}\n"
    )
    with pytest.raises(PipelineInvalid) as err:
        load_pipeline(path)
    assert "'again'" in str(err.value) and "reads column 'html'" in str(err.value)
    path.write_text(path.read_text().replace("input: pages}", "input: pages, with: {keep_html: true}}"))
    load_pipeline(path)


@pytest.mark.parametrize("key, bad, message, good", [
    ("in_memory_mb", -1, "in_memory_mb must be a number >= 0 (got -1)", 0),
    ("concurrent_steps", 0, "concurrent_steps must be an integer >= 1 (got 0)", 3),
    ("rows_per_block", 0, "rows_per_block must be 'auto' or an integer >= 1 (got 0)", 64),
    ("rows_per_block", "many", "rows_per_block must be 'auto' or an integer >= 1 (got 'many')", "auto"),
    ("stateful_ops", "pool", "stateful_ops must be 'tasks' or 'actors' (got 'pool')", "actors"),
])
def test_numeric_settings_are_checked(tmp_path, key, bad, message, good):
    path = tmp_path / "p.yaml"
    node = "nodes:\n  - {id: src, op: read_jsonl, with: {paths: [a.jsonl]}}\n"
    path.write_text(f"settings: {{{key}: {bad}}}\n" + node)
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = info.value.problems
    assert problem.line == 1 and message in problem.message
    path.write_text(f"settings: {{{key}: {good}}}\n" + node)
    assert load_pipeline(path).spec.settings[key] == good


def test_settings_from_set(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("nodes:\n  - {id: src, op: read_jsonl, with: {paths: [a.jsonl]}}\n")
    assert load_pipeline(path, ["settings.concurrent_steps=3"]).spec.settings["concurrent_steps"] == 3
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path, ["settings.concurent_steps=2", "settings.seed=x"])
    text = "\n".join(map(str, info.value.problems))
    assert "unknown setting" in text and "did you mean 'concurrent_steps'" in text and "seed" in text


def test_a_node_with_bad_parameters_blames_nothing_below_it(tmp_path):
    """Issue 32 case 7: a reader or filter whose `with:` is wrong is the one problem; the nodes below
    it were told "reads column 'text', which no upstream node provides (available: id)"."""
    path = tmp_path / "cascade.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - {id: src, op: read_jsonl, with: {pahts: [in.jsonl]}}
          - {id: ws, op: whitespace_normalization_mapper, input: src}
          - {id: wn, op: words_num_filter, input: ws, with: {min_num: x}}
          - {id: sp, op: special_characters_filter, input: wn}
          - {id: out, op: write_jsonl, input: sp, with: {path: out}}
        """))
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    problems = info.value.problems
    assert {p.node for p in problems} == {"src", "wn"}, [str(p) for p in problems]
    assert not any("reads column" in p.message for p in problems)


@pytest.mark.parametrize("node_id", ["../escape", "a/b", ".hidden", "x" * 201])
def test_a_node_id_that_cannot_name_its_folders_is_refused_at_its_line(tmp_path, node_id):
    p = tmp_path / "p.yaml"
    p.write_text(textwrap.dedent(f"""\
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: [x.jsonl]}}
          - id: "{node_id}"
            op: words_num_filter
            input: src
        """))
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(str(p))
    (problem,) = [q for q in info.value.problems if q.key == "id"]
    assert problem.line == 5 and "names the node's folders" in problem.message
