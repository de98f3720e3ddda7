"""Data-Juicer's specified_field_filter, general_field_filter and python_file_mapper.

Each op's own Data-Juicer test cases (tests/ops/filter/test_specified_field_filter.py,
test_general_field_filter.py, tests/ops/mapper/test_python_file_mapper.py at c07c2d7) with their
data and expected rows, then cases on real files of this machine (/usr/share/doc), and what raypress
adds: conditions and function files are parsed, never run, at validation; a condition outside
Data-Juicer's grammar is a parameter error; the user's file runs only with `settings.allow_code`.
"""

from __future__ import annotations

import datetime
import gzip
import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.dag.batch_exec import StreamingOpRunner
from raypress.dag.validate import PipelineInvalid, load_pipeline
from raypress.operators.base import OpKind
from raypress.operators.general.general_field_filter import STAT, GeneralFieldFilter, parse_condition
from raypress.operators.general.python_file_mapper import PythonFileMapper, check_function_file
from raypress.operators.general.python_lambda_mapper import CodeNotAllowed
from raypress.operators.general.specified_field_filter import SpecifiedFieldFilter
from raypress.operators.registry import get_op
from raypress.schema import KIND_COL, NODE_COL, REASON_COL

DOC = Path("/usr/share/doc")


def run(cls, rows: list[dict] | pa.Table, **params) -> tuple[list[dict], list[dict]]:
    """(kept rows without the runner's columns, dropped or quarantined rows) of one op over ``rows``."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    out = StreamingOpRunner(cls, cls.Params(**params), None, "node")(table).to_pylist()
    kept = [{k: v for k, v in r.items() if not k.startswith("_rp_") and k != "stats"} for r in out
            if r[NODE_COL] is None]
    return kept, [r for r in out if r[NODE_COL] is not None]


def texts(rows: list[dict]) -> list[str]:
    return [r["text"] for r in rows]


# -- specified_field_filter ----------------------------------------------------------------------------


def test_specified_field_filter_is_registered_with_data_juicers_params():
    assert get_op("specified_field_filter") is SpecifiedFieldFilter and SpecifiedFieldFilter.kind is OpKind.FILTER
    assert SpecifiedFieldFilter.Params(field_key="meta.suffix").target_value == []
    with pytest.raises(ValidationError):  # Data-Juicer's default "" fails on its first row
        SpecifiedFieldFilter.Params()
    assert SpecifiedFieldFilter(SpecifiedFieldFilter.Params(field_key="meta.path.test")).columns_read() == ("meta",)


DJ_ROWS = [
    {"text": "Today is Sun", "meta": {"suffix": ".pdf", "star": 50}},
    {"text": "a v s e c s f e f g a a a  ", "meta": {"suffix": ".docx", "star": 6}},
    {"text": "中文也是一个字算一个长度", "meta": {"suffix": ".txt", "star": 100}},
    {"text": "，。、„”“«»１」「《》´∶：？！", "meta": {"suffix": "", "star": 12.51}},
    {"text": "dasdasdasdasdasdasdasd", "meta": {"suffix": None}},
]


def test_data_juicer_case():
    kept, dropped = run(SpecifiedFieldFilter, DJ_ROWS, field_key="meta.suffix", target_value=[".pdf", ".txt"])
    assert texts(kept) == ["Today is Sun", "中文也是一个字算一个长度"]
    assert {r[REASON_COL] for r in dropped} == {"meta.suffix not in target_value"}


def test_data_juicer_list_case():
    tests = [["txt", "json"], ["pdf", "txt", "xbs"], ["docx", "", "html"], ["json"], ["pdf", "txt", "json", "docx"]]
    rows = [{"text": r["text"], "meta": {"path": {"test": t}}} for r, t in zip(DJ_ROWS, tests)]
    kept, _ = run(SpecifiedFieldFilter, rows, field_key="meta.path.test", target_value=["pdf", "txt", "json"])
    assert texts(kept) == ["Today is Sun", "，。、„”“«»１」「《》´∶：？！"]


def test_empty_target_keeps_every_row_and_null_is_a_value():
    kept, _ = run(SpecifiedFieldFilter, DJ_ROWS, field_key="meta.suffix")
    assert len(kept) == 5
    kept, _ = run(SpecifiedFieldFilter, DJ_ROWS, field_key="meta.suffix", target_value=[None, ""])
    assert texts(kept) == ["，。、„”“«»１」「《》´∶：？！", "dasdasdasdasdasdasdasd"]
    kept, _ = run(SpecifiedFieldFilter, [{"text": "n", "n": 1}, {"text": "t", "n": 2}], field_key="n",
                  target_value=[1.0, 3])  # Python's `in`: 1 == 1.0
    assert texts(kept) == ["n"]


def test_missing_field_drops_with_a_reason():
    rows = [{"text": "a", "meta": {"suffix": ".pdf"}}, {"text": "b", "meta": None}]
    table = pa.Table.from_pylist(rows)
    op = SpecifiedFieldFilter(SpecifiedFieldFilter.Params(field_key="meta.suffix", target_value=[".pdf"]))
    stats = op.compute_stats(table)
    assert stats == {"meta.suffix": [".pdf", None], "meta.suffix_missing": [False, True]}
    assert op.drop_reasons(stats) == [None, "meta.suffix missing"]
    nope = SpecifiedFieldFilter(SpecifiedFieldFilter.Params(field_key="nope"))
    assert nope.drop_reasons(nope.compute_stats(table)) == ["nope missing", "nope missing"]


def test_a_column_named_with_dots_wins_over_the_path():
    table = pa.table({"text": ["x"], "meta.lang": ["en"], "meta": [{"lang": "fr"}]})
    kept, _ = run(SpecifiedFieldFilter, table, field_key="meta.lang", target_value=["en"])
    assert len(kept) == 1


def doc_files(limit: int = 60) -> list[Path]:
    if not DOC.is_dir():
        pytest.skip("no /usr/share/doc on this machine")
    files = sorted(p for p in DOC.glob("*/*") if p.is_file() and not p.is_symlink())[:limit]
    if len(files) < 10:
        pytest.skip("too few files under /usr/share/doc")
    return files


def read_text(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def test_real_doc_files_by_suffix():
    """Files of /usr/share/doc as Data-Juicer rows (text + meta.suffix, as its text readers record
    it): keeping .gz and '' suffixes keeps exactly the files with those suffixes."""
    files = doc_files()
    rows = [{"text": read_text(p)[:300], "meta": {"suffix": p.suffix, "package": p.parent.name}} for p in files]
    kept, dropped = run(SpecifiedFieldFilter, rows, field_key="meta.suffix", target_value=[".gz", ""])
    assert [r["meta"]["suffix"] in (".gz", "") for r in rows].count(True) == len(kept)
    assert all(r["meta"]["suffix"] in (".gz", "") for r in kept)
    assert len(kept) + len(dropped) == len(rows)


# -- general_field_filter ------------------------------------------------------------------------------


def test_general_field_filter_is_registered_and_parses_without_running():
    assert get_op("general_field_filter") is GeneralFieldFilter and GeneralFieldFilter.kind is OpKind.FILTER
    assert GeneralFieldFilter.Params().filter_condition == ""
    assert not GeneralFieldFilter.takes_code  # nothing in the condition is ever executed


@pytest.mark.parametrize("condition, rows, expected", [
    ("10 < num < 20",  # test_simple_comparison
     [{"text": "sample1", "num": 5}, {"text": "sample2", "num": 15}, {"text": "sample3", "num": 25}], ["sample2"]),
    ("num < 10 and flag == True",  # test_logical_and
     [{"text": "sample1", "num": 5, "flag": True}, {"text": "sample2", "num": 15, "flag": False},
      {"text": "sample3", "num": 25, "flag": True}], ["sample1"]),
    ("num < 10 or num > 20",  # test_logical_or
     [{"text": "sample1", "num": 5}, {"text": "sample2", "num": 15}, {"text": "sample3", "num": 25}],
     ["sample1", "sample3"]),
    ("num <= 5",  # test_field_missing
     [{"text": "sample1", "num": 5}, {"text": "sample2"}, {"text": "sample3", "num": 25}], ["sample1"]),
    ("__dj__meta__.a == 2",  # test_nested_field
     [{"text": f"sample{a}", "__dj__meta__": {"a": a}} for a in (1, 2, 3)], ["sample2"]),
    ("10 < num < 20 and __dj__meta__.a == 2",  # test_combined_conditions
     [{"text": f"sample{a}", "num": n, "__dj__meta__": {"a": a}} for a, n in ((1, 5), (2, 15), (3, 25))],
     ["sample2"]),
    ("",  # test_empty_condition
     [{"text": "sample1", "num": 5}, {"text": "sample2", "num": 15}], ["sample1", "sample2"]),
    ("(num < 10 or num > 20) and flag == True and text!='sample3'",  # test_complex_condition
     [{"text": "sample1", "num": 5, "flag": True}, {"text": "sample2", "num": 15, "flag": False},
      {"text": "sample3", "num": 25, "flag": True}, {"text": "sample4", "num": 30, "flag": False}], ["sample1"]),
])
def test_data_juicer_cases(condition, rows, expected):
    kept, dropped = run(GeneralFieldFilter, rows, filter_condition=condition)
    assert texts(kept) == expected
    assert {r[REASON_COL] for r in dropped} <= {"filter_condition false"}


@pytest.mark.parametrize("condition", [
    "invalid syntax",  # Data-Juicer's test_invalid_condition
    "len(text) > 3", "__import__('os').system('true')", "num + 1 > 2", "text[0] == 'a'", "not flag",
    "num in [1, 2]", "num is None", "(lambda: 1)() == 1", "[x for x in text]", "num > 1 if flag else 0",
])
def test_conditions_outside_the_grammar_are_parameter_errors(condition):
    with pytest.raises(ValidationError):
        GeneralFieldFilter.Params(filter_condition=condition)


def test_additions_negative_numbers_spaces_and_raypress_columns():
    assert parse_condition("  num > -5  ") is not None
    kept, _ = run(GeneralFieldFilter, [{"text": "a", "num": -7}, {"text": "b", "num": -3}],
                  filter_condition=" num > -5 ")
    assert texts(kept) == ["b"]
    rows = [{"text": "a", "meta": {"lang": "en"}, "stats": {"text_len": 10.0}},
            {"text": "b", "meta": {"lang": "fr"}, "stats": {"text_len": 50.0}}]
    kept, _ = run(GeneralFieldFilter, rows, filter_condition="__dj__meta__.lang == 'en' or __dj__stats__.text_len > 40")
    assert texts(kept) == ["a", "b"]
    kept, _ = run(GeneralFieldFilter, rows, filter_condition="meta.lang == 'fr' and stats.text_len > 40")
    assert texts(kept) == ["b"]


def test_attributes_reach_data_never_dunders_or_methods():
    ts = [datetime.datetime(2023, 5, 1), datetime.datetime(2024, 5, 1)]
    rows = pa.table({"text": ["old", "new"], "ts": pa.array(ts, pa.timestamp("us"))})
    kept, _ = run(GeneralFieldFilter, rows, filter_condition="ts.year >= 2024")
    assert texts(kept) == ["new"]
    for condition in ("text.__class__ != 1", "text.upper != 1", "text.__len__ != 1"):
        kept, _ = run(GeneralFieldFilter, rows, filter_condition=condition)
        assert kept == []  # None on one side: false


def test_an_unorderable_comparison_quarantines_its_row_only():
    kept, bad = run(GeneralFieldFilter, [{"text": "a", "v": "x"}, {"text": "b", "v": "y"}, {"text": "c", "v": "z"}],
                    filter_condition="v > 'x'")
    assert texts(kept) == ["b", "c"]
    rows = pa.table({"text": ["a", "b"], "v": pa.array([{"n": 1}, {"n": 2}])})
    kept, bad = run(GeneralFieldFilter, rows, filter_condition="v > 1")
    assert kept == [] and {r[KIND_COL] for r in bad} == {"error"} and {r[REASON_COL] for r in bad} == {"TypeError"}


def test_a_carried_verdict_is_kept_as_in_data_juicer():
    """Data-Juicer computes a stat only where a row lacks it, so a second general_field_filter keeps
    the first one's verdict (the runner carries stats for every Data-Juicer filter)."""
    rows = [{"text": "a", "num": 5}, {"text": "b", "num": 15}]
    first = StreamingOpRunner(GeneralFieldFilter, GeneralFieldFilter.Params(filter_condition="num > 0"), None, "f1")
    second = StreamingOpRunner(GeneralFieldFilter, GeneralFieldFilter.Params(filter_condition="num > 10"), None, "f2")
    out = second(first(pa.Table.from_pylist(rows))).to_pylist()
    assert [(r["text"], r[NODE_COL], r["stats"][STAT]) for r in out] == [("a", None, True), ("b", None, True)]
    alone = second(pa.Table.from_pylist(rows)).to_pylist()
    assert [(r["text"], r[NODE_COL]) for r in alone] == [("a", "f2"), ("b", None)]


def test_specified_field_filter_judges_a_value_its_numeric_sibling_carried():
    from raypress.operators.general.specified_numeric_field_filter import SpecifiedNumericFieldFilter

    rows = pa.Table.from_pylist([{"text": "a", "meta": {"star": 50}}, {"text": "b", "meta": {"star": 6}}])
    numeric = StreamingOpRunner(SpecifiedNumericFieldFilter, SpecifiedNumericFieldFilter.Params(
        field_key="meta.star", min_value=0), None, "num")
    kept, _ = run(SpecifiedFieldFilter, numeric(rows), field_key="meta.star", target_value=[50])
    assert texts(kept) == ["a"]


def test_real_doc_files_by_their_numbers():
    """Real texts with numbers Data-Juicer's stats would hold: the condition keeps exactly the rows
    Python's own comparison keeps."""
    rows = []
    for p in doc_files():
        text = read_text(p)
        rows.append({"text": text[:200], "lines": text.count("\n"), "__dj__stats__": {"size": float(len(text))},
                     "__dj__meta__": {"package": p.parent.name, "suffix": p.suffix}})
    kept, _ = run(GeneralFieldFilter, rows, filter_condition=(
        "20 <= lines < 5000 and __dj__stats__.size > 1000 and __dj__meta__.suffix != '.gz' or "
        "__dj__meta__.package == 'python3'"))
    expected = [r["text"] for r in rows if (20 <= r["lines"] < 5000 and r["__dj__stats__"]["size"] > 1000
                                            and r["__dj__meta__"]["suffix"] != ".gz")
                or r["__dj__meta__"]["package"] == "python3"]
    assert texts(kept) == expected and 0 < len(expected) < len(rows)


# -- python_file_mapper --------------------------------------------------------------------------------


def code_file(tmp_path: Path, source: str, name: str = "udf.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def mapper(file_path: str, function_name: str = "process_single", batched: bool = False, allow_code: bool = True):
    return PythonFileMapper(PythonFileMapper.Params(file_path=file_path, function_name=function_name,
                                                    batched=batched, allow_code=allow_code))


def test_python_file_mapper_is_registered_and_takes_code():
    assert get_op("python_file_mapper") is PythonFileMapper and PythonFileMapper.kind is OpKind.MAPPER
    assert PythonFileMapper.takes_code
    p = PythonFileMapper.Params()
    assert (p.file_path, p.function_name, p.batched, p.allow_code) == ("", "process_single", False, False)


def test_data_juicer_function_execution_and_import(tmp_path):
    plain = code_file(tmp_path, """
        def process_data(sample):
            return {'result': sample['value'] + 10}
        """)
    assert mapper(plain, "process_data").process_batch(pa.table({"value": [5]})).to_pylist() == [{"result": 15}]
    with_import = code_file(tmp_path, """
        import numpy as np
        def process_data(sample):
            return {'result': np.sum([sample['value'], 10])}
        """, "with_import.py")
    assert mapper(with_import, "process_data").process_batch(pa.table({"value": [5]})).to_pylist() == [{"result": 15}]


def test_data_juicer_batched_function(tmp_path):
    """Data-Juicer's case returns two rows for one; the op computes it, and raypress's runner (1:1
    mappers) quarantines the batch's row instead of adding a row."""
    path = code_file(tmp_path, """
        def process_data(samples):
            return {'result': samples['value'] + [10]}
        """)
    op = mapper(path, "process_data", batched=True)
    assert op.process_batch(pa.table({"value": [5]})).to_pydict() == {"result": [5, 10]}
    params = PythonFileMapper.Params(file_path=path, function_name="process_data", batched=True, allow_code=True)
    (row,) = StreamingOpRunner(PythonFileMapper, params, None, "udf")(pa.table({"value": [5]})).to_pylist()
    assert row[KIND_COL] == "error" and row[REASON_COL] == "RuntimeError"
    same_rows = code_file(tmp_path, """
        def process_data(samples):
            return {'result': [v * 2 for v in samples['value']]}
        """, "same_rows.py")
    assert mapper(same_rows, "process_data", batched=True).process_batch(
        pa.table({"value": [1, 2, 3]})).column("result").to_pylist() == [2, 4, 6]


@pytest.mark.parametrize("source, name, function, message", [
    (None, "non_existent.py", "process_data", "does not exist"),  # test_file_not_found
    ("This is a text file.", "notes.txt", "some_function", "is not a Python file"),  # test_file_not_python_extension
    ("def existing_function(sample):\n    return sample\n", "f.py", "non_existing_function", "not found"),
    ("x = 42", "x.py", "x", "not callable"),  # test_function_not_callable
    ("def multi_arg_function(arg1, arg2):\n    return arg1 + arg2\n", "m.py", "multi_arg_function",
     "must take exactly one argument"),  # test_function_mutiple_arguments
    ("def f(sample, extra=1):\n    return sample\n", "d.py", "f", "must take exactly one argument"),
    ("f = lambda: {}\n", "l.py", "f", "must take exactly one argument"),
    ("def f(sample):\n    return (\n", "s.py", "f", "is not valid Python"),
])
def test_data_juicer_load_errors_are_parameter_errors_found_without_importing(tmp_path, source, name, function,
                                                                              message):
    path, marker = tmp_path / name, tmp_path / "RAN"
    if source is not None:  # a file that would leave a marker if it were imported
        path.write_text(f"open({str(marker)!r}, 'w').close()\n" + source)
    with pytest.raises(ValidationError, match=message):
        PythonFileMapper.Params(file_path=str(path), function_name=function)
    assert not marker.exists()


def test_data_juicer_invalid_return_type_quarantines_the_row(tmp_path):
    path = code_file(tmp_path, """
        def invalid_function(sample):
            return sample['value'] + 5
        """)
    with pytest.raises(ValueError, match="Function must return a dictionary, got int instead."):
        mapper(path, "invalid_function").process_batch(pa.table({"value": [5]}))
    params = PythonFileMapper.Params(file_path=path, function_name="invalid_function", allow_code=True)
    (row,) = StreamingOpRunner(PythonFileMapper, params, None, "udf")(pa.table({"value": [5]})).to_pylist()
    assert row[KIND_COL] == "error" and "got int instead" in row["_rp_detail"]


def test_names_bound_other_ways_are_left_to_the_loader(tmp_path):
    path = code_file(tmp_path, """
        import functools
        from json import loads as process_json
        def _add(sample, n):
            return {**sample, 'n': n}
        process_single = functools.partial(_add, n=1)
        try:
            from os import fspath as other
        except ImportError:
            other = None
        """)
    for name in ("process_single", "process_json", "other", "functools"):
        check_function_file(path, name)
    with pytest.raises(ValueError, match="not found"):
        check_function_file(path, "_missing")


def test_nothing_runs_without_the_grant_and_the_identity_needs_no_file(tmp_path):
    marker = tmp_path / "RAN"
    path = code_file(tmp_path, f"""
        open({str(marker)!r}, 'w').close()
        def process_single(sample):
            return {{**sample, 'seen': True}}
        """)
    op = mapper(path, allow_code=False)
    with pytest.raises(CodeNotAllowed):
        op.process_batch(pa.table({"text": ["a"]}))
    assert not marker.exists()
    assert mapper(path).process_batch(pa.table({"text": ["a"]})).to_pylist() == [{"text": "a", "seen": True}]
    assert marker.exists()
    table = pa.table({"text": ["a", "b"]})
    assert mapper("").process_batch(table) is table


def test_the_op_pickles_without_its_loaded_function(tmp_path):
    import pickle

    op = mapper(code_file(tmp_path, "def process_single(s):\n    return {**s, 'k': 1}\n"))
    op.process_batch(pa.table({"text": ["a"]}))
    again = pickle.loads(pickle.dumps(op))
    assert again.func is None and again.process_batch(pa.table({"text": ["b"]})).to_pylist() == [{"text": "b", "k": 1}]


def recipe(tmp_path: Path, process: str, settings: str = "") -> Path:
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps({"text": t, "num": n}) for t, n in (("a", 5), ("b", 15))) + "\n")
    path = tmp_path / "recipe.yaml"
    path.write_text(f"dataset_path: {data}\nexport_path: {tmp_path / 'out.jsonl'}\n{settings}process:\n{process}")
    return path


def test_one_op_data_juicer_recipes_validate(tmp_path):
    udf = code_file(tmp_path, "def process_single(sample):\n    return sample\n")
    for process in ("  - specified_field_filter: {field_key: meta.suffix, target_value: ['.pdf', '.txt']}\n",
                    "  - general_field_filter: {filter_condition: \"10 < num <= 30 and text != 'nothing here'\"}\n"):
        assert load_pipeline(recipe(tmp_path, process)).nodes
    code = f"  - python_file_mapper: {{file_path: {udf}, function_name: process_single}}\n"
    vp = load_pipeline(recipe(tmp_path, code, "settings: {allow_code: true}\n"))
    assert vp.nodes["python_file_mapper"].params.allow_code is True
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(recipe(tmp_path, code))
    assert any("settings.allow_code: true" in p.message for p in info.value.problems)
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(recipe(tmp_path, "  - general_field_filter: {filter_condition: 'len(text) > 1'}\n"))
    assert any("unsupported expression" in p.message for p in info.value.problems)
