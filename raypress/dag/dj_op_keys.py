"""Data-Juicer's per-op runtime keys: what its ``OP`` and ``Filter`` base classes take on every op.

Why: Data-Juicer's users, tests and recipes put ``batch_size``, ``num_proc``, ``accelerator``,
``text_key``, ... on any op (``words_num_filter: {min_num: 5, batch_size: 2}``), because its base
class reads them from ``**kwargs``.  A raypress op named like a Data-Juicer op (``DJ_OP_NAMES``,
every op registered in ``data_juicer/ops`` at c07c2d7) accepts them all: mapped where raypress has
the same knob (``NodeRuntime``: the node's batch, concurrency and resources, a filter's range
rule), accepted with a one-line notice where it means nothing here.  A key the op's own ``Params``
declares (``text_key``, ``image_key`` on image ops, ...) stays an op parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raypress.operators.base import Filter, Operator, RangeRule, Resources

# Every op name Data-Juicer registers (data_juicer/ops/**, OP_NAME / register_module at c07c2d7).
DJ_OP_NAMES = frozenset((
    "alphanumeric_filter", "audio_add_gaussian_noise_mapper", "audio_duration_filter", "audio_ffmpeg_wrapped_mapper",
    "audio_nmf_snr_filter", "audio_size_filter", "average_line_length_filter", "calibrate_qa_mapper",
    "calibrate_query_mapper", "calibrate_response_mapper", "character_repetition_filter", "chinese_convert_mapper",
    "clean_copyright_mapper", "clean_email_mapper", "clean_html_mapper", "clean_ip_mapper", "clean_links_mapper",
    "detect_character_attributes_mapper", "detect_character_locations_mapper", "detect_main_character_mapper",
    "dialog_intent_detection_mapper", "dialog_sentiment_detection_mapper", "dialog_sentiment_intensity_mapper",
    "dialog_topic_detection_mapper", "document_deduplicator", "document_minhash_deduplicator",
    "document_simhash_deduplicator", "download_file_mapper", "entity_attribute_aggregator", "expand_macro_mapper",
    "extract_entity_attribute_mapper", "extract_entity_relation_mapper", "extract_event_mapper",
    "extract_keyword_mapper", "extract_nickname_mapper", "extract_support_text_mapper",
    "extract_tables_from_html_mapper", "fix_unicode_mapper", "flagged_words_filter",
    "frequency_specified_field_selector", "general_field_filter", "general_fused_op",
    "generate_qa_from_examples_mapper", "generate_qa_from_text_mapper", "human_preference_annotation_mapper",
    "image_aesthetics_filter", "image_aspect_ratio_filter", "image_blur_mapper",
    "image_captioning_from_gpt4v_mapper", "image_captioning_mapper", "image_deduplicator",
    "image_detection_yolo_mapper", "image_diffusion_mapper", "image_face_blur_mapper", "image_face_count_filter",
    "image_face_ratio_filter", "image_nsfw_filter", "image_pair_similarity_filter", "image_remove_background_mapper",
    "image_segment_mapper", "image_shape_filter", "image_size_filter", "image_tagging_mapper",
    "image_text_matching_filter", "image_text_similarity_filter", "image_watermark_filter",
    "imgdiff_difference_area_generator_mapper", "imgdiff_difference_caption_generator_mapper",
    "in_context_influence_filter", "instruction_following_difficulty_filter", "key_value_grouper",
    "language_id_score_filter", "llm_analysis_filter", "llm_difficulty_score_filter", "llm_perplexity_filter",
    "llm_quality_score_filter", "llm_task_relevance_filter", "maximum_line_length_filter", "meta_tags_aggregator",
    "mllm_mapper", "most_relevant_entities_aggregator", "naive_grouper", "naive_reverse_grouper",
    "nested_aggregator", "nlpaug_en_mapper", "nlpcda_zh_mapper", "optimize_prompt_mapper", "optimize_qa_mapper",
    "optimize_query_mapper", "optimize_response_mapper", "pair_preference_mapper", "perplexity_filter",
    "phrase_grounding_recall_filter", "punctuation_normalization_mapper", "python_file_mapper",
    "python_lambda_mapper", "query_intent_detection_mapper", "query_sentiment_detection_mapper",
    "query_topic_detection_mapper", "random_selector", "range_specified_field_selector",
    "ray_bts_minhash_deduplicator", "ray_document_deduplicator", "ray_image_deduplicator", "ray_video_deduplicator",
    "relation_identity_mapper", "remove_bibliography_mapper", "remove_comments_mapper", "remove_header_mapper",
    "remove_long_words_mapper", "remove_non_chinese_character_mapper", "remove_repeat_sentences_mapper",
    "remove_specific_chars_mapper", "remove_table_text_mapper", "remove_words_with_incorrect_substrings_mapper",
    "replace_content_mapper", "sdxl_prompt2prompt_mapper", "sentence_augmentation_mapper", "sentence_split_mapper",
    "special_characters_filter", "specified_field_filter", "specified_numeric_field_filter", "stopwords_filter",
    "suffix_filter", "tags_specified_field_selector", "text_action_filter", "text_chunk_mapper",
    "text_embd_similarity_filter", "text_entity_dependency_filter", "text_length_filter",
    "text_pair_similarity_filter", "token_num_filter", "topk_specified_field_selector", "video_aesthetics_filter",
    "video_aspect_ratio_filter", "video_captioning_from_frames_mapper", "video_captioning_from_video_mapper",
    "video_deduplicator", "video_duration_filter", "video_extract_frames_mapper", "video_face_blur_mapper",
    "video_ffmpeg_wrapped_mapper", "video_frames_text_similarity_filter", "video_motion_score_filter",
    "video_motion_score_raft_filter", "video_nsfw_filter", "video_ocr_area_ratio_filter",
    "video_remove_watermark_mapper", "video_resize_aspect_ratio_mapper", "video_resize_resolution_mapper",
    "video_resolution_filter", "video_split_by_duration_mapper", "video_split_by_key_frame_mapper",
    "video_split_by_scene_mapper", "video_tagging_from_audio_mapper", "video_tagging_from_frames_filter",
    "video_tagging_from_frames_mapper", "video_watermark_filter", "whitespace_normalization_mapper",
    "word_repetition_filter", "words_num_filter",))

_GB = 1024 ** 3
_COLUMN = "raypress's {op} reads no such column (its own parameters name what it reads)"
_TOKEN = "raypress keeps images and chunks in their own columns, not as special tokens"

# Keys of Data-Juicer's OP base class that mean nothing here, with what raypress does instead.
NOTICES: dict[str, str] = {
    "work_dir": "outputs of each step live in the run directory (`raypress run --run-dir`)",
    "skip_op_error": "a row whose op raises is quarantined (quarantine/<node>/); the run fails only past "
                     "`settings.max_error_ratio`",
    "turbo": "raypress always processes Arrow batches",
    "index_key": "every row keeps its `id` column",
    "stats_export_path": "stats stay on the rows (`keep_stats_in_res_ds`); `raypress analyze` reports them",
    **{key: _COLUMN for key in ("image_key", "audio_key", "video_key", "image_bytes_key", "system_key",
                                "instruction_key", "prompt_key", "query_key", "response_key", "history_key",
                                "text_key")},
    **{key: _TOKEN for key in ("image_special_token", "audio_special_token", "video_special_token",
                               "eoc_special_token")},
}
MAPPED = ("batch_size", "num_proc", "cpu_required", "gpu_required", "mem_required", "accelerator")
RANGE_KEYS = ("min_closed_interval", "max_closed_interval", "reversed_range")
RUNTIME_KEYS = frozenset(NOTICES) | frozenset(MAPPED) | frozenset(RANGE_KEYS)


@dataclass(frozen=True)
class NodeRuntime:
    """What a node's Data-Juicer runtime keys set: None keeps the op's own value."""

    batch_size: int | None = None  # rows per call of the op (Data-Juicer's batch_size)
    num_proc: int | None = None  # tasks (or actors) at once for this op: its own `np`
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: int | None = None  # bytes
    range_rule: RangeRule | None = None
    keys: dict[str, Any] = field(default_factory=dict)  # the keys as written (a resolved file keeps them)

    def resources(self, declared: Resources) -> Resources:
        """The op's declared resources with this node's overrides."""
        changes = {k: v for k, v in (("num_cpus", self.num_cpus), ("num_gpus", self.num_gpus),
                                     ("memory", self.memory)) if v is not None}
        return declared.model_copy(update=changes) if changes else declared


NO_RUNTIME = NodeRuntime()


@dataclass
class SplitKeys:
    params: dict[str, Any]  # what the op's Params validate
    runtime: NodeRuntime
    notices: dict[str, str] = field(default_factory=dict)  # key -> what raypress does instead
    problems: dict[str, str] = field(default_factory=dict)  # key -> why its value is refused


def split_runtime_keys(op_cls: type[Operator], params: dict[str, Any]) -> SplitKeys:
    """``params`` as written on a node of ``op_cls`` -> the op's own params and the node runtime
    the Data-Juicer keys set (only for a Data-Juicer-named op; other ops get ``params`` back)."""
    own = op_cls.Params.model_fields
    if op_cls.name not in DJ_OP_NAMES or not any(k in RUNTIME_KEYS and k not in own for k in params):
        return SplitKeys(params, NO_RUNTIME)
    kept = {k: v for k, v in params.items() if k not in RUNTIME_KEYS or k in own}
    keys = {k: v for k, v in params.items() if k not in kept}
    out = SplitKeys(kept, NO_RUNTIME)
    values: dict[str, Any] = {}
    for key, value in keys.items():
        try:
            mapped = _mapped(op_cls, key, value, out)
        except ValueError as exc:
            out.problems[key] = str(exc)
            continue
        if mapped is not None:
            values[key] = mapped
        elif key in NOTICES:
            out.notices[key] = NOTICES[key].format(op=op_cls.name)
    rule = _range_rule(op_cls, keys, out)
    out.runtime = NodeRuntime(batch_size=values.get("batch_size"), num_proc=values.get("num_proc"),
                              num_cpus=values.get("cpu_required"), num_gpus=values.get("gpu_required"),
                              memory=values.get("mem_required"), range_rule=rule, keys=keys)
    return out


def _mapped(op_cls: type[Operator], key: str, value: Any, out: SplitKeys) -> Any:
    """The runtime value of a mapped key (None: nothing to set), ValueError for a bad value."""
    if key == "batch_size":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"batch_size must be a positive integer (got {value!r})")
        if op_cls.batch_size is None:  # a global op or a stage: it has no batches
            out.notices[key] = f"raypress's {op_cls.name} is a {op_cls.kind.value} that sees the whole dataset"
            return None
        return value
    if key == "num_proc":
        if value is None or value == -1:  # Data-Juicer's "automatic"
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"num_proc must be a positive integer or -1 for automatic (got {value!r})")
        if op_cls.batch_size is None:
            out.notices[key] = f"raypress's {op_cls.name} plans its own tasks (a {op_cls.kind.value})"
            return None
        return value
    if key in ("cpu_required", "gpu_required"):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{key} must be a non-negative number (got {value!r})")
        return float(value)
    if key == "mem_required":
        return _bytes(value)
    if key == "accelerator":
        if value not in (None, "cpu", "cuda", "gpu"):
            raise ValueError(f"accelerator must be 'cpu' or 'cuda' (got {value!r})")
        if value in ("cuda", "gpu") and not op_cls.resources.num_gpus:
            out.notices[key] = f"raypress's {op_cls.name} runs on CPU (it has no GPU path)"
        elif value == "cpu" and op_cls.resources.num_gpus:
            out.notices[key] = f"raypress's {op_cls.name} asks Ray for a GPU (set gpu_required: 0 to run it on CPU)"
        return None
    return None


def _bytes(value: Any) -> int | None:
    """Data-Juicer's mem_required: a number of GB, or a size string ('512MB', '2GB', '1GiB')."""
    if value is None or value == 0:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value * _GB)
    if isinstance(value, str):
        text = value.strip().upper().removesuffix("B").removesuffix("I")
        units = {"K": 1024, "M": 1024 ** 2, "G": _GB, "T": 1024 ** 4}
        scale = units.get(text[-1:], None)
        number = text[:-1] if scale else text
        try:
            amount = float(number)
        except ValueError:
            amount = -1.0
        if amount > 0:
            return int(amount * (scale or 1))
    raise ValueError(f"mem_required must be a number of GB or a size like '2GB' (got {value!r})")


def _range_rule(op_cls: type[Operator], keys: dict[str, Any], out: SplitKeys) -> RangeRule | None:
    """Data-Juicer's Filter range keys as a rule; a problem where the op cannot honour them."""
    given = {k: keys[k] for k in RANGE_KEYS if k in keys}
    if not given:
        return None
    for key, value in given.items():
        if not isinstance(value, bool):
            out.problems[key] = f"{key} must be true or false (got {value!r})"
    if out.problems.keys() & given.keys():
        return None
    rule = RangeRule.of(given.get("min_closed_interval", True), given.get("max_closed_interval", True),
                        given.get("reversed_range", False))
    if rule == RangeRule():
        return None
    if not (issubclass(op_cls, Filter) and op_cls.honours_range_rule):
        key = next(k for k in RANGE_KEYS if k in given and given[k] != (k != "reversed_range"))
        if not issubclass(op_cls, Filter):
            out.problems[key] = f"{key} is a filter's key; {op_cls.name} is a {op_cls.kind.value}"
        else:
            out.problems[key] = (f"raypress's {op_cls.name} keeps rows by more than one [min, max] range, so "
                                 f"{key} has no single meaning here; leave it out")
        return None
    return rule
