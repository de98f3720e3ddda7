"""Data-Juicer recipes validate unchanged: every global key accepted (honoured, or a one-line
notice), "did you mean" only for close names of the same kind, unavailable ops named as such."""

from __future__ import annotations

import textwrap

import pyarrow as pa
import pytest

from raypress.dag import dj_compat
from raypress.dag.spec import read_spec
from raypress.dag.validate import PipelineInvalid, load_pipeline
from raypress.operators.general.drop_columns import DropColumns, DropColumnsParams
from raypress.operators.registry import known_names
from raypress.suggest import did_you_mean, did_you_mean_op

# The global keys of Data-Juicer's config.py / config_all.yaml at c07c2d7 (every add_argument but
# the per-op `process` list), as a user's recipe may write them.
DJ_GLOBAL_KEYS = {
    "project_name": "demo", "executor_type": "ray", "dataset": None, "generated_dataset_config": None,
    "validators": [], "work_dir": "./outputs", "export_type": "jsonl", "export_shard_size": 0,
    "export_in_parallel": False, "export_extra_args": {}, "keep_stats_in_res_ds": False,
    "keep_hashes_in_res_ds": False, "np": 4, "text_keys": "text", "image_key": "images",
    "image_bytes_key": "image_bytes", "image_special_token": "<__dj__image>", "audio_key": "audios",
    "audio_special_token": "<__dj__audio>", "video_key": "videos", "video_special_token": "<__dj__video>",
    "eoc_special_token": "<|__dj__eoc|>", "suffixes": [], "turbo": False, "skip_op_error": True,
    "use_cache": True, "ds_cache_dir": None, "cache_compress": None, "open_monitor": True,
    "use_checkpoint": False, "temp_dir": None, "open_tracer": True, "op_list_to_trace": [], "trace_num": 10,
    "open_insight_mining": False, "op_list_to_mine": [], "op_fusion": False, "fusion_strategy": "probe",
    "adaptive_batch_size": False, "percentiles": [0.25, 0.5, 0.75], "export_original_dataset": False,
    "save_stats_in_one_file": False, "ray_address": "auto", "custom_operator_paths": [], "debug": False,
    "hpo_config": None, "data_probe_algo": "uniform", "data_probe_ratio": 1.0, "auto": False, "auto_num": 1000,
}


def recipe(tmp_path, head: str, process: str = "  - words_num_filter:\n      min_num: 2\n", name="r.yaml"):
    (tmp_path / "in.jsonl").write_text('{"text": "a b c"}\n')
    path = tmp_path / name
    path.write_text(f"dataset_path: {tmp_path}/in.jsonl\nexport_path: {tmp_path}/out/result.jsonl\n"
                    + textwrap.dedent(head) + "process:\n" + process)
    return path


def problems_of(path) -> list[str]:
    with pytest.raises(PipelineInvalid) as exc:
        load_pipeline(path)
    return [str(p) for p in exc.value.problems]


def test_every_data_juicer_global_key_is_accepted(tmp_path, capsys):
    import yaml

    head = yaml.safe_dump({k: v for k, v in DJ_GLOBAL_KEYS.items() if k != "dataset"}, sort_keys=False)
    vp = load_pipeline(recipe(tmp_path, head))
    assert set(DJ_GLOBAL_KEYS) <= set(dj_compat.GLOBAL_KEYS)
    err = capsys.readouterr().err
    assert "`open_tracer`: raypress writes every dropped row" in err  # one line per key, not an error
    assert "`use_cache`:" in err and "--run-dir" in err
    assert "`op_fusion`" not in err  # false: nothing to say
    assert vp.spec.settings["keep_rejects"] is True  # open_tracer: true -> rejects/
    assert vp.spec.settings["np"] == 4
    assert vp.spec.ray_address is None  # "auto": raypress's own default


def test_notice_lines_name_file_and_line(tmp_path, capsys):
    load_pipeline(recipe(tmp_path, "op_fusion: true\nfusion_strategy: greedy\n"))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]
    assert len(lines) == 2
    assert lines[0].startswith(f"note: {tmp_path}/r.yaml:3 `op_fusion`: Ray Data fuses")


def test_a_misspelled_global_key_still_gets_did_you_mean(tmp_path):
    (msg,) = problems_of(recipe(tmp_path, "open_tracr: true\n"))
    assert "unknown top-level key (did you mean 'open_tracer'?)" in msg
    (msg,) = problems_of(recipe(tmp_path, "keep_stats_in_res: true\n"))
    assert "did you mean 'keep_stats_in_res_ds'?" in msg


@pytest.mark.parametrize("head, expected", [
    ("executor_type: local\n", "executor_type must be 'default' or 'ray'"),
    ("export_shard_size: -1\n", "export_shard_size must be an integer >= 0"),
    ("keep_stats_in_res_ds: maybe\n", "keep_stats_in_res_ds must be true or false"),
    ("text_keys: 3\n", "text_keys must be a column name"),
    ("export_type: lance\n", "raypress exports jsonl, json, parquet"),
    ("use_cache: 1\n", "use_cache must be true or false"),
])
def test_bad_values_of_honoured_keys_are_problems(tmp_path, head, expected):
    assert any(expected in p for p in problems_of(recipe(tmp_path, head))), expected


def test_executor_type_default_and_ray_both_validate(tmp_path):
    """Both run on Ray: the same plan either way; anything else is a problem naming the key."""
    vps = [load_pipeline(recipe(tmp_path, f"executor_type: {value}\n")) for value in ("default", "ray")]
    plans = [[(nid, vp.nodes[nid].op_cls.name) for nid in vp.order] for vp in vps]
    assert plans[0] == plans[1] and any(op == "words_num_filter" for _, op in plans[0])
    assert any("executor_type must be 'default' or 'ray'" in p for p in
               problems_of(recipe(tmp_path, "executor_type: spark\n")))


def test_text_keys_is_every_recipe_ops_default_text_key(tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text('{"content": "a b c"}\n')
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(f"""\
        dataset_path: {tmp_path}/in.jsonl
        text_keys: [content, title]
        process:
          - words_num_filter: {{min_num: 2}}
          - clean_email_mapper:
          - alphanumeric_filter: {{text_key: title}}
        """))
    vp = load_pipeline(path)
    assert vp.nodes["words_num_filter"].params.text_key == "content"
    assert vp.nodes["clean_email_mapper"].params.text_key == "content"
    assert vp.nodes["alphanumeric_filter"].params.text_key == "title"  # an op's own text_key wins
    assert "`text_keys`: raypress's text ops read one column each: 'content'" in capsys.readouterr().err


def test_keep_stats_in_res_ds_false_drops_stats_before_the_export(tmp_path):
    spec = read_spec(recipe(tmp_path, ""))
    assert [(n.id, n.op) for n in spec.nodes] == [("dataset", "read_jsonl"), ("words_num_filter", "words_num_filter"),
                                                  ("drop_stats", "drop_columns"), ("export", "write_jsonl")]
    assert spec.nodes[2].params == {"columns": ["stats"]} and spec.nodes[3].input == "drop_stats"
    kept = read_spec(recipe(tmp_path, "keep_stats_in_res_ds: true\n"))
    assert [n.op for n in kept.nodes] == ["read_jsonl", "words_num_filter", "write_jsonl"]


def test_drop_columns_removes_present_columns_and_never_the_id():
    op = DropColumns(DropColumnsParams(columns=["stats", "absent", "id"]))
    table = pa.table({"id": ["a"], "text": ["x"], "stats": [{"n": 1}]})
    assert op.process_batch(table).column_names == ["id", "text"]
    assert op.columns_dropped() == ("stats", "absent")
    with pytest.raises(ValueError):
        DropColumnsParams(columns=[])


def test_export_shard_size_writes_a_folder_of_parts(tmp_path, capsys):
    spec = read_spec(recipe(tmp_path, "export_shard_size: 1000000\n"))
    assert spec.nodes[-1].params == {"path": f"{tmp_path}/out/result"}
    assert "export_shard_size" in spec.notices[0]
    assert read_spec(recipe(tmp_path, "export_shard_size: 0\n")).nodes[-1].params == {
        "path": f"{tmp_path}/out/result.jsonl"}


def test_export_type_picks_the_writer(tmp_path):
    assert read_spec(recipe(tmp_path, "export_type: parquet\n")).nodes[-1].op == "write_parquet"


def test_suffixes_read_the_files_below_a_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = tmp_path / "r.yaml"
    path.write_text(f"dataset_path: {data}\nsuffixes: [jsonl]\nprocess:\n  - clean_email_mapper:\n")
    node = read_spec(path).nodes[0]
    assert (node.op, node.params) == ("read_jsonl", {"paths": [f"{data}/**/*.jsonl"]})
    path.write_text(f"dataset_path: {data}\nsuffixes: [jsonl, parquet]\nprocess:\n  - clean_email_mapper:\n")
    assert any("one kind of file" in str(p) for p in read_spec(path).problems)


def test_one_local_dataset_config_is_the_dataset_path(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("dataset:\n  configs:\n    - type: local\n      path: in.jsonl\nprocess:\n  - clean_email_mapper:\n")
    node = read_spec(path).nodes[0]
    assert (node.op, node.params) == ("read_jsonl", {"paths": ["in.jsonl"]})
    path.write_text("dataset:\n  configs:\n    - {type: remote, source: modelscope, path: a/b}\n"
                    "process:\n  - clean_email_mapper:\n")
    assert any("needs network access" in str(p) for p in read_spec(path).problems)


def test_a_hugging_face_hub_dataset_is_read_from_the_local_cache(tmp_path, monkeypatch):
    """Data-Juicer's `type: remote, source: huggingface` (demo/process-huggingface.yaml) validates and
    reads the local datasets cache offline; a dataset that is not there is one clear line at run time."""
    from raypress.operators.base import RunContext
    from raypress.operators.io.read_hf_dataset import ReadHfDataset, ReadHfDatasetParams

    path = tmp_path / "r.yaml"
    path.write_text("dataset:\n  configs:\n    - {type: remote, source: huggingface, path: a/b, name: q, "
                    "split: train}\nprocess:\n  - clean_email_mapper:\n")
    spec = read_spec(path)
    assert not spec.problems
    assert (spec.nodes[0].op, spec.nodes[0].params) == ("read_hf_dataset",
                                                        {"hub_id": "a/b", "hub_config": "q", "split": "train"})
    assert spec.nodes[1].input == "dataset"  # no "missing input" for the first op
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants as hub

    # a process that imported them online (they read the switches once, at import): before, the
    # Hub was asked with retries for ~20 s before the missing dataset was said
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    with pytest.raises(FileNotFoundError, match=r"'a/b' \(configuration 'q'\), split 'train', is not in the local "
                                                r"datasets cache .* raypress never downloads") as info:
        ReadHfDataset(ReadHfDatasetParams(**spec.nodes[0].params))._load(RunContext(str(tmp_path), "dataset"))
    assert "OfflineModeIsEnabled" in str(info.value)  # refused offline, not after the Hub's retries
    assert f"cache ({datasets.config.HF_DATASETS_CACHE})" in str(info.value)  # the folder it looked in
    with pytest.raises(ValueError, match="exactly one of"):
        ReadHfDatasetParams(hub_id="a/b", path=str(tmp_path))


def test_ray_address_naming_a_cluster_is_kept(tmp_path):
    assert read_spec(recipe(tmp_path, "ray_address: ray://head:10001\n")).ray_address == "ray://head:10001"


def test_did_you_mean_for_ops_only_suggests_close_names_of_the_same_kind():
    ops = ["pii_mapper", "hash_split_filter", "language_id_filter", "words_num_filter", "clean_email_mapper",
           "document_deduplicator", "read_jsonl"]
    assert did_you_mean("fix_unicode_mapper", ops) != ""  # what the plain matcher said
    assert did_you_mean("perplexity_filter", ops) != ""
    assert did_you_mean_op("fix_unicode_mapper", ops) == ""
    assert did_you_mean_op("perplexity_filter", ops) == ""
    assert did_you_mean_op("word_num_filter", ops) == " (did you mean 'words_num_filter'?)"
    assert did_you_mean_op("words_num_mapper", ops) == ""  # a mapper is never meant as a filter
    assert did_you_mean_op("document_deduplicatr", ops) == " (did you mean 'document_deduplicator'?)"
    assert did_you_mean_op("read_jsnol", ops) == " (did you mean 'read_jsonl'?)"


def test_unavailable_data_juicer_ops_are_named_not_taken_for_typos(tmp_path):
    process = ("  - video_captioning_from_frames_mapper:\n      hf_img2seq: Salesforce/blip2-opt-2.7b\n"
               "  - image_diffusion_mapper:\n  - words_num_filtr:\n")
    msgs = problems_of(recipe(tmp_path, "", process))
    assert len(msgs) == 3
    assert msgs[0].endswith("'video_captioning_from_frames_mapper' is a Data-Juicer op not available in raypress "
                            "(needs video decoding and vision models)")
    assert "image_diffusion_mapper' is a Data-Juicer op not available in raypress (needs a downloaded vision" in msgs[1]
    assert "unknown op 'words_num_filtr' (did you mean 'words_num_filter'?)" in msgs[2]


def test_no_op_raypress_offers_is_listed_as_unavailable():
    assert not set(dj_compat.UNAVAILABLE) & set(known_names())


def test_a_json_export_path_is_one_json_lines_file(tmp_path):
    from raypress.operators.io.write_jsonl import WriteJsonl, WriteJsonlParams

    path = tmp_path / "r.yaml"
    path.write_text(f"dataset_path: in.jsonl\nexport_path: {tmp_path}/out/result.json\nprocess:\n  - clean_email_mapper:\n")
    assert read_spec(path).nodes[-1].op == "write_jsonl"
    assert WriteJsonl(WriteJsonlParams(path=str(tmp_path / "out" / "result.json"))).single_file()
    assert not WriteJsonl(WriteJsonlParams(path=str(tmp_path / "out"))).single_file()


def test_exponent_numbers_in_op_params_are_numbers_as_in_data_juicer(tmp_path):
    spec = read_spec(recipe(tmp_path, "", "  - words_num_filter:\n      min_num: 1e1\n      max_num: 2e5\n"
                                          "  - clean_email_mapper:\n      repl: 3e2x\n"))
    assert spec.nodes[1].params == {"min_num": 10, "max_num": 200000}
    assert spec.nodes[2].params == {"repl": "3e2x"}


def test_notices_print_once_per_run_not_again_in_the_supervised_child(tmp_path, capsys):
    """`raypress run` resolves the recipe in the supervisor (notices printed once); its child runs
    the resolved file, which holds no Data-Juicer keys, so it has nothing to note."""
    from raypress.dag.resolve import resolve_pipeline

    recipe = tmp_path / "r.yaml"
    (tmp_path / "in.jsonl").write_text('{"text": "a b c"}\n')  # a run's input must exist
    recipe.write_text(f"dataset_path: {tmp_path / 'in.jsonl'}\nexport_path: out.jsonl\nopen_tracer: true\n"
                      "process:\n  - words_num_filter: {min_num: 3}\n")
    resolved = resolve_pipeline(recipe, run_dir=str(tmp_path / "run"))
    assert capsys.readouterr().err.count("note:") == 1
    resolve_pipeline(resolved.write())
    assert "note:" not in capsys.readouterr().err


def test_a_recipe_takes_its_top_level_keys_from_set_as_data_juicers_command_line_does(tmp_path):
    """`dj-process --config r.yaml --dataset_path X`: `raypress run r.yaml --set dataset_path=X`."""
    path = tmp_path / "r.yaml"
    path.write_text("dataset_path: /path/to/your/dataset\nexport_path: /path/to/out.jsonl\nnp: 50\n"
                    "process:\n  - clean_email_mapper:\n")
    spec = read_spec(path, ["dataset_path=data/in.jsonl", "export_path=out/o.parquet", "np=2",
                            "clean_email_mapper.text_key=body"])
    assert not spec.problems
    by_id = {n.id: n for n in spec.nodes}
    assert (by_id["dataset"].op, by_id["dataset"].params) == ("read_jsonl", {"paths": ["data/in.jsonl"]})
    assert (by_id["export"].op, by_id["export"].params) == ("write_parquet", {"path": "out/o.parquet"})
    assert spec.settings["np"] == 2 and by_id["clean_email_mapper"].params == {"text_key": "body"}
    # a dataset_path given replaces the recipe's `dataset:` sources
    path.write_text("dataset:\n  configs:\n    - {type: remote, source: modelscope, path: a/b}\n"
                    "process:\n  - clean_email_mapper:\n")
    spec = read_spec(path, ["dataset_path=in.jsonl"])
    assert not spec.problems and spec.nodes[0].params == {"paths": ["in.jsonl"]}
    assert any("dataset_path=" in p.message for p in read_spec(path, ["no_such_key=1"]).problems)
