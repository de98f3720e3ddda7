"""``extract_keyword_mapper``: Data-Juicer's keyword extraction (LightRAG's prompt), asked of an
OpenAI-compatible endpoint; the keywords go to the ``meta`` struct (``keyword_key``)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api.meta_keys import KEYWORD, STRINGS
from raypress.operators.llm.api.ops import LLMMapper
from raypress.operators.llm.api.params import ApiParams, api_model_field
from raypress.operators.llm.api.text import split_text_by_punctuation
from raypress.operators.registry import register

# Data-Juicer's prompt, modified there from LightRAG (https://github.com/HKUDS/LightRAG)
PROMPT_TEMPLATE = """-Goal-
Given a text document that is potentially relevant to this activity and a list of entity types, identify all entities of those types from the text and all relationships among the identified entities.

-Steps-
1. Identify high-level key words that summarize the main concepts, themes, or topics of the entire text. These should capture the overarching ideas present in the document.
Format the content-level key words as ("content_keywords" <high_level_keywords>)

3. Return output in the language of the given text.

4. When finished, output {completion_delimiter}

######################
-Examples-
######################
Example 1:

Text:
```
while Alex clenched his jaw, the buzz of frustration dull against the backdrop of Taylor's authoritarian certainty. It was this competitive undercurrent that kept him alert, the sense that his and Jordan's shared commitment to discovery was an unspoken rebellion against Cruz's narrowing vision of control and order.

Then Taylor did something unexpected. They paused beside Jordan and, for a moment, observed the device with something akin to reverence. “If this tech can be understood..." Taylor said, their voice quieter, "It could change the game for us. For all of us.”

The underlying dismissal earlier seemed to falter, replaced by a glimpse of reluctant respect for the gravity of what lay in their hands. Jordan looked up, and for a fleeting heartbeat, their eyes locked with Taylor's, a wordless clash of wills softening into an uneasy truce.

It was a small transformation, barely perceptible, but one that Alex noted with an inward nod. They had all been brought here by different paths
```
################
Output:
("content_keywords" "power dynamics, ideological conflict, discovery, rebellion"){completion_delimiter}
#############################
Example 2:

Text:
```
他们不再是单纯的执行者；他们已成为某个超越星辰与条纹的领域的信息守护者。这一使命的提升不能被规则和既定协议所束缚——它需要一种新的视角，一种新的决心。

随着与华盛顿的通讯在背景中嗡嗡作响，对话中的紧张情绪通过嘟嘟声和静电噪音贯穿始终。团队站立着，一股不祥的气息笼罩着他们。显然，他们在接下来几个小时内做出的决定可能会重新定义人类在宇宙中的位置，或者将他们置于无知和潜在危险之中。

随着与星辰的联系变得更加牢固，小组开始处理逐渐成形的警告，从被动接受者转变为积极参与者。梅瑟后来的直觉占据了上风——团队的任务已经演变，不再仅仅是观察和报告，而是互动和准备。一场蜕变已经开始，而“杜尔塞行动”则以他们大胆的新频率震动，这种基调不是由世俗设定的
```
#############
Output:
("content_keywords" "任务演变, 决策制定, 积极参与, 宇宙意义"){completion_delimiter}
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
("content_keywords" "first contact, control, communication, cosmic significance"){completion_delimiter}
-Real Data-
######################
Text:
```
{input_text}
```
######################
Output:
"""


class ExtractKeywordParams(ApiParams):
    api_model: str | None = api_model_field()
    keyword_key: str = Field(KEYWORD, description="meta field for the keywords")
    prompt_template: str | None = Field(None, description="the prompt, with {input_text} and {completion_delimiter}")
    completion_delimiter: str | None = Field(None, description="what the model writes when done (default <|COMPLETE|>)")
    output_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) found in the answer; "
                                       "each match's group is split at punctuation into keywords")
    drop_text: bool = Field(False, description="remove the text column from the output")

    PATTERN_FLAGS = re.VERBOSE | re.DOTALL


@register("extract_keyword_mapper")
class ExtractKeywordMapper(LLMMapper[ExtractKeywordParams]):
    """Extract high-level keywords of each text with an LLM into meta.keyword (Data-Juicer's
    LightRAG prompt; ("content_keywords" ...) records, split at punctuation)."""

    DEFAULT_PROMPT_TEMPLATE = PROMPT_TEMPLATE
    DEFAULT_COMPLETION_DELIMITER = "<|COMPLETE|>"
    DEFAULT_OUTPUT_PATTERN = r'\("content_keywords"(.*?)\)'

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.keyword_key: STRINGS}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        prompt = self.prompt_template.format(completion_delimiter=self.completion_delimiter,
                                             input_text=row[self.params.text_key])
        return [{"role": "user", "content": prompt}]

    def parse_output(self, raw: str) -> list[str] | None:
        keywords = [k for record in self.output_pattern.findall(raw) for k in split_text_by_punctuation(record)]
        return keywords or None

    def row_outputs(self, row: dict[str, Any], parsed: list[str]) -> dict[str, Any]:
        return {self.params.keyword_key: parsed}
