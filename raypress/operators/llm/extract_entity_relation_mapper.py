"""``extract_entity_relation_mapper``: Data-Juicer's knowledge-graph extraction (LightRAG's prompt
and gleaning), asked of an OpenAI-compatible endpoint; entities and relations go to the ``meta``
struct (``entity_key``, ``relation_key``)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field, NonNegativeInt

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import LLMMapper
from raypress.operators.llm.api.params import ApiParams, api_model_field
from raypress.operators.llm.api.text import dedupe, is_float, remove_outer_quotes, split_text_by_punctuation
from raypress.operators.registry import register

# Data-Juicer's prompt, modified there from LightRAG (https://github.com/HKUDS/LightRAG)
PROMPT_TEMPLATE = """-Goal-
Given a text document that is potentially relevant to this activity and a list of entity types, identify all entities of those types from the text and all relationships among the identified entities.

-Steps-
1. Identify all entities. For each identified entity, extract the following information:
- entity_name: Name of the entity
- entity_type: One of the following types: [{entity_types}]
- entity_description: Comprehensive description of the entity's attributes and activities
Format each entity as ("entity"{tuple_delimiter}<entity_name>{tuple_delimiter}<entity_type>{tuple_delimiter}<entity_description>

2. From the entities identified in step 1, identify all pairs of (source_entity, target_entity) that are *clearly related* to each other.
For each pair of related entities, extract the following information:
- source_entity: name of the source entity, as identified in step 1
- target_entity: name of the target entity, as identified in step 1
- relationship_description: explanation as to why you think the source entity and the target entity are related to each other
- relationship_strength: a numeric score indicating strength of the relationship between the source entity and target entity
- relationship_keywords: one or more high-level key words that summarize the overarching nature of the relationship, focusing on concepts or themes rather than specific details
Format each relationship as ("relationship"{tuple_delimiter}<source_entity>{tuple_delimiter}<target_entity>{tuple_delimiter}<relationship_description>{tuple_delimiter}<relationship_keywords>{tuple_delimiter}<relationship_strength>)

3. Return output in the language of the given text as a single list of all the entities and relationships identified in steps 1 and 2. Use **{record_delimiter}** as the list delimiter.

4. When finished, output {completion_delimiter}

######################
-Examples-
######################
Example 1:

Entity_types: [person, technology, mission, organization, location]
Text:
```
while Alex clenched his jaw, the buzz of frustration dull against the backdrop of Taylor's authoritarian certainty. It was this competitive undercurrent that kept him alert, the sense that his and Jordan's shared commitment to discovery was an unspoken rebellion against Cruz's narrowing vision of control and order.

Then Taylor did something unexpected. They paused beside Jordan and, for a moment, observed the device with something akin to reverence. “If this tech can be understood..." Taylor said, their voice quieter, "It could change the game for us. For all of us.”

The underlying dismissal earlier seemed to falter, replaced by a glimpse of reluctant respect for the gravity of what lay in their hands. Jordan looked up, and for a fleeting heartbeat, their eyes locked with Taylor's, a wordless clash of wills softening into an uneasy truce.

It was a small transformation, barely perceptible, but one that Alex noted with an inward nod. They had all been brought here by different paths
```
################
Output:
("entity"{tuple_delimiter}"Alex"{tuple_delimiter}"person"{tuple_delimiter}"Alex is a character who experiences frustration and is observant of the dynamics among other characters."){record_delimiter}
("entity"{tuple_delimiter}"Taylor"{tuple_delimiter}"person"{tuple_delimiter}"Taylor is portrayed with authoritarian certainty and shows a moment of reverence towards a device, indicating a change in perspective."){record_delimiter}
("entity"{tuple_delimiter}"Jordan"{tuple_delimiter}"person"{tuple_delimiter}"Jordan shares a commitment to discovery and has a significant interaction with Taylor regarding a device."){record_delimiter}
("entity"{tuple_delimiter}"Cruz"{tuple_delimiter}"person"{tuple_delimiter}"Cruz is associated with a vision of control and order, influencing the dynamics among other characters."){record_delimiter}
("entity"{tuple_delimiter}"The Device"{tuple_delimiter}"technology"{tuple_delimiter}"The Device is central to the story, with potential game-changing implications, and is reversed by Taylor."){record_delimiter}
("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Taylor"{tuple_delimiter}"Alex is affected by Taylor's authoritarian certainty and observes changes in Taylor's attitude towards the device."{tuple_delimiter}"power dynamics, perspective shift"{tuple_delimiter}7){record_delimiter}
("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Jordan"{tuple_delimiter}"Alex and Jordan share a commitment to discovery, which contrasts with Cruz's vision."{tuple_delimiter}"shared goals, rebellion"{tuple_delimiter}6){record_delimiter}
("relationship"{tuple_delimiter}"Taylor"{tuple_delimiter}"Jordan"{tuple_delimiter}"Taylor and Jordan interact directly regarding the device, leading to a moment of mutual respect and an uneasy truce."{tuple_delimiter}"conflict resolution, mutual respect"{tuple_delimiter}8){record_delimiter}
("relationship"{tuple_delimiter}"Jordan"{tuple_delimiter}"Cruz"{tuple_delimiter}"Jordan's commitment to discovery is in rebellion against Cruz's vision of control and order."{tuple_delimiter}"ideological conflict, rebellion"{tuple_delimiter}5){record_delimiter}
("relationship"{tuple_delimiter}"Taylor"{tuple_delimiter}"The Device"{tuple_delimiter}"Taylor shows reverence towards the device, indicating its importance and potential impact."{tuple_delimiter}"reverence, technological significance"{tuple_delimiter}9){record_delimiter}
#############################
Example 2:

Entity_types: [人物, 技术, 任务, 组织, 地点]
Text:
```
他们不再是单纯的执行者；他们已成为某个超越星辰与条纹的领域的信息守护者。这一使命的提升不能被规则和既定协议所束缚——它需要一种新的视角，一种新的决心。

随着与华盛顿的通讯在背景中嗡嗡作响，对话中的紧张情绪通过嘟嘟声和静电噪音贯穿始终。团队站立着，一股不祥的气息笼罩着他们。显然，他们在接下来几个小时内做出的决定可能会重新定义人类在宇宙中的位置，或者将他们置于无知和潜在危险之中。

随着与星辰的联系变得更加牢固，小组开始处理逐渐成形的警告，从被动接受者转变为积极参与者。梅瑟后来的直觉占据了上风——团队的任务已经演变，不再仅仅是观察和报告，而是互动和准备。一场蜕变已经开始，而“杜尔塞行动”则以他们大胆的新频率震动，这种基调不是由世俗设定的
```
#############
Output:
("entity"{tuple_delimiter}"华盛顿"{tuple_delimiter}"地点"{tuple_delimiter}"华盛顿是正在接收通讯的地方，表明其在决策过程中的重要性。"){record_delimiter}
("entity"{tuple_delimiter}"杜尔塞行动"{tuple_delimiter}"任务"{tuple_delimiter}"杜尔塞行动被描述为一项已演变为互动和准备的任务，显示出目标和活动的重大转变。"){record_delimiter}
("entity"{tuple_delimiter}"团队"{tuple_delimiter}"组织"{tuple_delimiter}"团队被描绘成一群从被动观察者转变为积极参与者的人，展示了他们角色的动态变化。"){record_delimiter}
("relationship"{tuple_delimiter}"团队"{tuple_delimiter}"华盛顿"{tuple_delimiter}"团队收到来自华盛顿的通讯，这影响了他们的决策过程。"{tuple_delimiter}"决策、外部影响"{tuple_delimiter}7){record_delimiter}
("relationship"{tuple_delimiter}"团队"{tuple_delimiter}"杜尔塞行动"{tuple_delimiter}"团队直接参与杜尔塞行动，执行其演变后的目标和活动。"{tuple_delimiter}"任务演变、积极参与"{tuple_delimiter}9){completion_delimiter}
#############################
Example 3:

Entity_types: [person, role, technology, organization, event, location, concept]
Text:
```
their voice slicing through the buzz of activity. "Control may be an illusion when facing an intelligence that literally writes its own rules," they stated stoically, casting a watchful eye over the flurry of data.

"It's like it's learning to communicate," offered Sam Rivera from a nearby interface, their youthful energy boding a mix of awe and anxiety. "This gives talking to strangers' a whole new meaning."

Alex surveyed his team—each face a study in concentration, determination, and not a small measure of trepidation. "This might well be our first contact," he acknowledged, "And we need to be ready for whatever answers back."

Together, they stood on the edge of the unknown, forging humanity's response to a message from the heavens. The ensuing silence was palpable—a collective introspection about their role in this grand cosmic play, one that could rewrite human history.

The encrypted dialogue continued to unfold, its intricate patterns showing an almost uncanny anticipation
```
#############
Output:
("entity"{tuple_delimiter}"Sam Rivera"{tuple_delimiter}"person"{tuple_delimiter}"Sam Rivera is a member of a team working on communicating with an unknown intelligence, showing a mix of awe and anxiety."){record_delimiter}
("entity"{tuple_delimiter}"Alex"{tuple_delimiter}"person"{tuple_delimiter}"Alex is the leader of a team attempting first contact with an unknown intelligence, acknowledging the significance of their task."){record_delimiter}
("entity"{tuple_delimiter}"Control"{tuple_delimiter}"concept"{tuple_delimiter}"Control refers to the ability to manage or govern, which is challenged by an intelligence that writes its own rules."){record_delimiter}
("entity"{tuple_delimiter}"Intelligence"{tuple_delimiter}"concept"{tuple_delimiter}"Intelligence here refers to an unknown entity capable of writing its own rules and learning to communicate."){record_delimiter}
("entity"{tuple_delimiter}"First Contact"{tuple_delimiter}"event"{tuple_delimiter}"First Contact is the potential initial communication between humanity and an unknown intelligence."){record_delimiter}
("entity"{tuple_delimiter}"Humanity's Response"{tuple_delimiter}"event"{tuple_delimiter}"Humanity's Response is the collective action taken by Alex's team in response to a message from an unknown intelligence."){record_delimiter}
("relationship"{tuple_delimiter}"Sam Rivera"{tuple_delimiter}"Intelligence"{tuple_delimiter}"Sam Rivera is directly involved in the process of learning to communicate with the unknown intelligence."{tuple_delimiter}"communication, learning process"{tuple_delimiter}9){record_delimiter}
("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"First Contact"{tuple_delimiter}"Alex leads the team that might be making the First Contact with the unknown intelligence."{tuple_delimiter}"leadership, exploration"{tuple_delimiter}10){record_delimiter}
("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Humanity's Response"{tuple_delimiter}"Alex and his team are the key figures in Humanity's Response to the unknown intelligence."{tuple_delimiter}"collective action, cosmic significance"{tuple_delimiter}8){record_delimiter}
("relationship"{tuple_delimiter}"Control"{tuple_delimiter}"Intelligence"{tuple_delimiter}"The concept of Control is challenged by the Intelligence that writes its own rules."{tuple_delimiter}"power dynamics, autonomy"{tuple_delimiter}7){record_delimiter}
#############################
-Real Data-
######################
Entity_types: [{entity_types}]
Text:
```
{input_text}
```
######################
Output:
"""


class ExtractEntityRelationParams(ApiParams):
    api_model: str | None = api_model_field()
    entity_types: list[str] | None = Field(None, description="entity types asked for (default: organization, "
                                           "person, geo, event)")
    entity_key: str = Field(mk.ENTITY, description="meta field for the entities")
    relation_key: str = Field(mk.RELATION, description="meta field for the relations")
    prompt_template: str | None = Field(None, description="the prompt, with {entity_types}, {input_text} and the "
                                        "three delimiters")
    tuple_delimiter: str | None = Field(None, description="between a record's items (default <|>)")
    record_delimiter: str | None = Field(None, description="between records (default ##)")
    completion_delimiter: str | None = Field(None, description="what the model writes when done (default <|COMPLETE|>)")
    max_gleaning: NonNegativeInt = Field(1, description="extra turns asking for missed entities")
    continue_prompt: str | None = Field(None, description="the gleaning turn's message (default: Data-Juicer's)")
    if_loop_prompt: str | None = Field(None, description="asks whether to glean again (default: Data-Juicer's)")
    entity_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) of an entity record")
    relation_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) of a relation record")
    drop_text: bool = Field(False, description="remove the text column from the output")

    PATTERN_FLAGS = re.VERBOSE | re.DOTALL


@register("extract_entity_relation_mapper")
class ExtractEntityRelationMapper(LLMMapper[ExtractEntityRelationParams]):
    """Extract entities (name, type, description) and their relations (source, target, description,
    keywords, strength) from each text with an LLM into meta.entity / meta.relation (LightRAG's prompt)."""

    DEFAULT_PROMPT_TEMPLATE = PROMPT_TEMPLATE
    DEFAULT_CONTINUE_PROMPT = (
        "MANY entities were missed in the last extraction.  Add them below using the same format:\n"
    )
    DEFAULT_IF_LOOP_PROMPT = ("It appears some entities may have still been missed.  Answer YES | NO if there are "
                              "still entities that need to be added.\n")
    DEFAULT_ENTITY_TYPES = ["organization", "person", "geo", "event"]
    DEFAULT_TUPLE_DELIMITER = "<|>"
    DEFAULT_RECORD_DELIMITER = "##"
    DEFAULT_COMPLETION_DELIMITER = "<|COMPLETE|>"
    DEFAULT_ENTITY_PATTERN = r'\("entity"(.*?)\)'
    DEFAULT_RELATION_PATTERN = r'\("relationship"(.*?)\)'

    def __init__(self, params: ExtractEntityRelationParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.expected = f"at least one entity record matching {self.entity_pattern.pattern!r} with 3 items"

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.entity_key: pa.list_(mk.ENTITY_TYPE_ARROW),
                self.params.relation_key: pa.list_(mk.RELATION_TYPE_ARROW)}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        prompt = self.prompt_template.format(
            tuple_delimiter=self.tuple_delimiter, record_delimiter=self.record_delimiter,
            completion_delimiter=self.completion_delimiter, entity_types=", ".join(self.entity_types),
            input_text=row[self.params.text_key])
        return [{"role": "user", "content": prompt}]

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        done = self.present_meta(row)
        if done is not None:
            return done
        return self.row_outputs(row, self.ask(self.build_messages(row), self.parse_output, send=self.glean))

    def glean(self, messages: list[dict[str, str]]) -> str:
        """LightRAG's extraction: the first answer, then up to ``max_gleaning`` turns asking for
        what was missed (between them, whether anything still is); the answers joined."""
        result = self.chat(messages)
        history = messages + [{"role": "assistant", "content": result}]
        for turn in range(self.params.max_gleaning):
            asked = history + [{"role": "user", "content": self.continue_prompt}]
            more = self.chat(asked)
            history = asked + [{"role": "assistant", "content": more}]
            result += more
            if turn == self.params.max_gleaning - 1:
                break
            again = self.chat(history + [{"role": "user", "content": self.if_loop_prompt}])
            if again.strip().strip('"').strip("'").lower() != "yes":
                break
        return result

    def _items(self, record: str) -> tuple[str, ...]:
        items = [remove_outer_quotes(item.strip()) for item in record.split(self.tuple_delimiter)]
        return tuple(item.strip() for item in items if item.strip())

    def parse_output(self, raw: str) -> tuple[list[dict], list[dict]] | None:
        """(entities, relations), repeats dropped in the answer's order; None without an entity."""
        entities = dedupe([e for e in map(self._items, self.entity_pattern.findall(raw)) if len(e) == 3])
        relations = dedupe([r for r in map(self._items, self.relation_pattern.findall(raw))
                            if len(r) == 5 and is_float(r[4])])
        if not entities:
            return None
        return ([{mk.ENTITY_NAME: e[0], mk.ENTITY_TYPE: e[1], mk.ENTITY_DESCRIPTION: e[2]} for e in entities],
                [{mk.SOURCE_ENTITY: r[0], mk.TARGET_ENTITY: r[1], mk.RELATION_DESCRIPTION: r[2],
                  mk.RELATION_KEYWORDS: split_text_by_punctuation(r[3]), mk.RELATION_STRENGTH: float(r[4])}
                 for r in relations])

    def row_outputs(self, row: dict[str, Any], parsed: tuple[list[dict], list[dict]]) -> dict[str, Any]:
        return {self.params.entity_key: parsed[0], self.params.relation_key: parsed[1]}
