"""Data-Juicer's meta keys (``data_juicer.utils.constant.MetaKeys``) that its LLM ops write, and the
Arrow types raypress gives them in the ``meta`` struct column (fixed, so batches concatenate)."""

from __future__ import annotations

import pyarrow as pa

KEYWORD = "keyword"
ENTITY = "entity"
ENTITY_NAME = "entity_name"
ENTITY_TYPE = "entity_type"
ENTITY_DESCRIPTION = "entity_entity_description"
RELATION = "relation"
SOURCE_ENTITY = "relation_source_entity"
TARGET_ENTITY = "relation_target_entity"
RELATION_DESCRIPTION = "relation_description"
RELATION_KEYWORDS = "relation_keywords"
RELATION_STRENGTH = "relation_strength"
EVENT_DESCRIPTION = "event_description"
RELEVANT_CHARACTERS = "relevant_characters"
NICKNAME = "nickname"
SUPPORT_TEXT = "support_text"
ROLE_RELATION = "role_relation"
MAIN_ENTITIES = "main_entities"
ATTRIBUTES = "attributes"
ATTRIBUTE_DESCRIPTIONS = "attribute_descriptions"
ATTRIBUTE_SUPPORT_TEXTS = "attribute_support_texts"

STRINGS = pa.list_(pa.string())
ENTITY_TYPE_ARROW = pa.struct([(ENTITY_NAME, pa.string()), (ENTITY_TYPE, pa.string()),
                               (ENTITY_DESCRIPTION, pa.string())])
RELATION_TYPE_ARROW = pa.struct([(SOURCE_ENTITY, pa.string()), (TARGET_ENTITY, pa.string()),
                                 (RELATION_DESCRIPTION, pa.string()), (RELATION_KEYWORDS, STRINGS),
                                 (RELATION_STRENGTH, pa.float64())])
