"""The LLM ops without a server: Data-Juicer's prompts built from its own test samples, its answers
parsed (the examples its prompt templates teach the model), the parameters checked before a run,
the endpoint found, and the client's retries and counts against ``httpx.MockTransport`` answers."""

from __future__ import annotations

import json
import pickle

import httpx
import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.artifacts import ReportArtifact
from raypress.dag.batch_exec import StreamingOpRunner
from raypress.operators.llm.api.client import Backoff, ChatClient, ChatRequestFailed, retry_after_seconds
from raypress.operators.llm.api.text import split_text_by_punctuation
from raypress.operators.registry import get_op
from raypress.schema import DETAIL_COL, KIND_COL, REASON_COL

BASE = {"base_url": "http://llm.test/v1"}


def op(name: str, **params):
    cls = get_op(name)
    return cls(cls.Params(**{"model_params": BASE, **params}))


def answering(*answers, usage=(10, 5), seen=None):
    """A MockTransport answering the chat route with ``answers`` in turn (an int: that status)."""
    turns = iter(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        answer = next(turns)
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": {"message": f"status {answer}"}})
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": answer}}],
                                         "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})

    return httpx.MockTransport(handle)


def with_transport(operator, transport, delays=None):
    operator.client.transport = transport
    operator.client.sleep = (delays.append if delays is not None else (lambda s: None))
    return operator


# ---- prompts (Data-Juicer's test samples) --------------------------------------------------------

LI_REFERENCE = "# 角色语言风格\n1. 下面是李莲花的问答样例，你必须贴合他的语言风格：\n\n问题：你是谁？\n李莲花：在下李莲花，不才略有一点神医之名，有礼。"


def test_calibrate_qa_messages_are_data_juicers():
    messages = op("calibrate_qa_mapper").build_messages({"text": LI_REFERENCE, "query": "你还喜欢乔婉娩吗？",
                                                          "response": "不喜欢。"})
    assert messages[0] == {"role": "system", "content": "请根据提供的【参考信息】对【问题】和【回答】进行校准，使其更加详细、准确。\n"
                                                        "按照以下格式输出：\n【问题】\n校准后的问题\n【回答】\n校准后的回答"}
    assert messages[1] == {"role": "user", "content": f"【参考信息】\n{LI_REFERENCE}\n【问题】\n你还喜欢乔婉娩吗？\n【回答】\n不喜欢。"}


def test_prompt_templates_fill_the_text_in():
    text = "蒙古国的首都是乌兰巴托（Ulaanbaatar）\n冰岛的首都是雷克雅未克（Reykjavik）\n"
    assert op("generate_qa_from_text_mapper").build_messages({"text": text}) == [{"role": "user", "content": text}]
    keyword = op("extract_keyword_mapper").build_messages({"text": "△芩婆走到中间，看着众人。"})[0]["content"]
    assert keyword.endswith("Text:\n```\n△芩婆走到中间，看着众人。\n```\n######################\nOutput:\n")
    assert '("content_keywords" "power dynamics, ideological conflict, discovery, rebellion")<|COMPLETE|>' in keyword
    relation = op("extract_entity_relation_mapper").build_messages({"text": "x"})[0]["content"]
    assert "Entity_types: [organization, person, geo, event]\nText:\n```\nx\n```" in relation
    assert '("entity"<|>"Alex"<|>"person"<|>' in relation and "{" not in relation
    pref = op("pair_preference_mapper").build_messages({"query": "q", "response": "r"})[1]["content"]
    assert pref == "【参考信息】\n\n\n以下是原始问答对：\n【问题】\nq\n【回答】\nr"  # no text column: empty reference
    relation_id = op("relation_identity_mapper", source_entity="李莲花", target_entity="方多病")
    assert relation_id.build_messages({"text": "t"})[0]["content"].endswith("而不是李莲花是方多病的什么关系")
    augment = op("sentence_augmentation_mapper", task_sentence="Rewrite it.", text_key_second="text2")
    assert augment.build_messages({"text": "A cat."})[1]["content"] == 'Here is a sentence: "A cat.". Rewrite it.'
    assert augment.request_fields() == {"max_tokens": 256, "temperature": 0.2}


# ---- parsing (the answers Data-Juicer's prompts and docstrings show) -----------------------------

def test_generate_qa_parses_human_assistant_turns():
    answer = ("蒙古国的首都是乌兰巴托（Ulaanbaatar）\n冰岛的首都是雷克雅未克（Reykjavik）\n"
              "Human: 请问蒙古国的首都是哪里？\nAssistant: 你好，根据提供的信息，蒙古国的首都是乌兰巴托（Ulaanbaatar）。\n"
              "Human: 冰岛的首都是哪里呢？\nAssistant: 冰岛的首都是雷克雅未克（Reykjavik）。\n")
    mapper = op("generate_qa_from_text_mapper")
    pairs = mapper.parse_output(answer)
    assert pairs == [("请问蒙古国的首都是哪里？", "你好，根据提供的信息，蒙古国的首都是乌兰巴托（Ulaanbaatar）。"),
                     ("冰岛的首都是哪里呢？", "冰岛的首都是雷克雅未克（Reykjavik）。")]
    assert op("generate_qa_from_text_mapper", max_num=1).parse_output(answer) == pairs[:1]
    assert mapper.parse_output("no turns here") is None
    out = mapper.row_outputs({}, pairs)
    assert (out["query"], out["response"]) == pairs[0] and len(out["qa_pairs"]) == 2


def test_keywords_split_at_punctuation():
    mapper = op("extract_keyword_mapper")
    assert mapper.parse_output('("content_keywords" "power dynamics, ideological conflict, discovery, rebellion")'
                               "<|COMPLETE|>") == ["power dynamics", "ideological conflict", "discovery", "rebellion"]
    assert mapper.parse_output('("content_keywords" "任务演变, 决策制定, 积极参与, 宇宙意义")') == \
        ["任务演变", "决策制定", "积极参与", "宇宙意义"]
    assert mapper.parse_output("keywords: none") is None
    assert split_text_by_punctuation("。，") == ["。，"]  # nothing between the marks: the text itself


def test_entities_and_relations_from_lightrags_example():
    mapper = op("extract_entity_relation_mapper")
    example = mapper.prompt_template.split("Example 1:")[1].split("Output:\n")[1].split("#####")[0]
    answer = example.format(tuple_delimiter="<|>", record_delimiter="##", completion_delimiter="<|COMPLETE|>")
    entities, relations = mapper.parse_output(answer + answer)  # repeats dropped, order kept
    assert [e["entity_name"] for e in entities] == ["Alex", "Taylor", "Jordan", "Cruz", "The Device"]
    assert entities[0]["entity_type"] == "person" and entities[0]["entity_entity_description"].startswith("Alex is")
    assert len(relations) == 5 and relations[0] == {
        "relation_source_entity": "Alex", "relation_target_entity": "Taylor",
        "relation_description": "Alex is affected by Taylor's authoritarian certainty and observes changes in "
                                "Taylor's attitude towards the device.",
        "relation_keywords": ["power dynamics", "perspective shift"], "relation_strength": 7.0}
    assert mapper.parse_output('("relationship"<|>"a"<|>"b"<|>"c"<|>"d"<|>9)') is None  # no entity


def test_events_nicknames_relations_and_attributes():
    events = op("extract_event_mapper").parse_output(
        "### 情节1：\n- **情节描述**： 李莲花回忆起兄长。\n- **相关人物**：李莲花，李相显\n"
        "### 情节2：\n- **情节描述**： 封磬跪倒。\n- **相关人物**：封磬\n")
    assert events == (["李莲花回忆起兄长。", "封磬跪倒。"], [["李莲花", "李相显"], ["封磬"]])
    nick = op("extract_nickname_mapper").parse_output(
        "### 称呼方式1\n- **说话人**：李莲花\n- **被称呼人**：方多病\n- **李莲花对方多病的昵称**：方小宝\n"
        "### 称呼方式2\n- **说话人**：方多病\n- **被称呼人**：李莲花\n- **笛飞声对李莲花的昵称**：李兄\n"  # contradicts itself
        "### 称呼方式3\n- **说话人**：笛飞声\n- **被称呼人**：李莲花\n- **笛飞声对李莲花的昵称**：李莲花\n")  # a name
    assert nick == [{"relation_source_entity": "李莲花", "relation_target_entity": "方多病", "relation_description": "方小宝",
                     "relation_keywords": ["nickname"], "relation_strength": None}]
    relation = op("relation_identity_mapper", source_entity="李莲花", target_entity="方多病")
    assert relation.parse_output("分析推理：两人一起查案。\n所以方多病是李莲花的：挚友") == "挚友"
    assert relation.parse_output("挚友") is None
    attribute = op("extract_entity_attribute_mapper", query_entities=["李莲花"], query_attributes=["语言风格"])
    assert attribute.parse_output("# 李莲花\n## 语言风格：\n温和。\n### 代表性示例摘录1：\n```\n在下李莲花，有礼。\n```\n",
                                  "语言风格") == ("温和。", ["在下李莲花，有礼。"])
    assert attribute.parse_output("## 语言风格：\n温和。", "语言风格") is None  # no example: not an answer


def test_qa_rewrites_keep_what_the_answer_leaves_out():
    calibrate = op("calibrate_qa_mapper")
    assert calibrate.parse_output("【问题】\n你是谁？\n【回答】\n在下李莲花。") == ("你是谁？", "在下李莲花。")
    assert calibrate.parse_output("好的。【问题】\n你是谁？\n【回答】\n在下。") is None  # re.match: at the start
    assert op("optimize_qa_mapper").parse_output("好的。\n【问题】\n你是谁？\n【回答】\n在下\n李莲花。") == \
        ("你是谁？", "在下\n李莲花。")
    assert op("calibrate_query_mapper").parse_output("  新问题 ") == ("新问题", None)
    assert op("optimize_response_mapper").parse_output(" \n") is None
    assert calibrate.row_outputs({}, ("", "a")) == {"response": "a"}
    prefer = op("pair_preference_mapper")
    assert prefer.parse_output("【回答】\n喜欢。\n【原因】\n立场相反。") == ("喜欢。", "立场相反。")
    assert prefer.parse_output("【回答】\n喜欢。") is None


# ---- parameters and endpoint ---------------------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    ({"model_params": {"api_key": "sk-1"}}, "never written in a pipeline"),
    ({"model_params": {"default_headers": {"Authorization": "Bearer x"}}}, "credential header"),
    ({"model_params": {"base_url": "localhost:8000"}}, r"http\(s\) URL"),
    ({"model_params": {"max_retry": 2}}, "unknown model_params"),
    ({"api_endpoint": "/embeddings"}, "chat"),
    ({"api_endpoint": "chat/completions"}, "starts with '/'"),
    ({"output_pattern": "【问题】(.*"}, "not a regular expression"),
    ({"sampling_params": {"stream": True}}, "stream"),
    ({"sampling_params": {"messages": []}}, "the op sends them"),
    ({"try_num": 0}, "greater than 0"),
])
def test_params_refused_before_a_run(params, message):
    with pytest.raises(ValidationError, match=message):
        get_op("calibrate_qa_mapper").Params(**params)


def test_params_data_juicer_recipes_write():
    params = get_op("optimize_qa_mapper").Params(model_params=None, sampling_params={"max_new_tokens": 200},
                                                 is_hf_model=True, enable_vllm=False)
    assert params.sampling_params == {"max_tokens": 200} and params.model_params == {}


def test_endpoint_from_env_params_or_a_serve_llm_report(monkeypatch):
    cls = get_op("calibrate_qa_mapper")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="set model_params.base_url .* export OPENAI_BASE_URL, or give the node an "
                                         "`endpoint` input"):
        cls(cls.Params())
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    client = cls(cls.Params()).client
    assert (client.url, client.model, client.api_key) == ("http://env.test/v1/chat/completions", "gpt-4o", "sk-env")
    assert "sk-env" not in repr(client)
    assert cls(cls.Params(api_endpoint="https://x.test/compatible-mode/v1/chat/completions")).client.url == \
        "https://x.test/compatible-mode/v1/chat/completions"
    report = ReportArtifact("r.json", {"base_url": "http://127.0.0.1:8123/v1", "model": "served", "api_key_env": None})
    served = cls(cls.Params(), {"endpoint": report}).client
    assert (served.url, served.model) == ("http://127.0.0.1:8123/v1/chat/completions", "served")
    with pytest.raises(ValueError, match="api_model is 'other' but the `endpoint` input serves 'served'"):
        cls(cls.Params(api_model="other"), {"endpoint": report})
    with pytest.raises(ValueError, match="give one"):
        cls(cls.Params(model_params=BASE), {"endpoint": report})
    keyed = ReportArtifact("r.json", {"base_url": "http://h.test/v1", "model": "m", "api_key_env": "RP_TEST_KEY"})
    monkeypatch.delenv("RP_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match=r"requires the key in \$RP_TEST_KEY"):
        cls(cls.Params(), {"endpoint": keyed})
    with pytest.raises(ValueError, match=r"api_key_env names \$RP_NO_SUCH_KEY"):
        cls(cls.Params(api_key_env="RP_NO_SUCH_KEY"))


# ---- the client ----------------------------------------------------------------------------------

def test_client_retries_429_and_5xx_with_backoff_then_counts_usage():
    delays: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        turn = len(seen)
        seen.append(request)
        if turn == 0:
            return httpx.Response(429, headers={"Retry-After": "2"}, json={"error": {"message": "slow down"}})
        if turn == 1:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}],
                                         "usage": {"prompt_tokens": 7, "completion_tokens": 3}})

    seen: list[httpx.Request] = []
    client = ChatClient("http://llm.test/v1/chat/completions", "m", api_key="sk-1", sleep=delays.append, seed=0,
                        transport=httpx.MockTransport(handle))
    assert client.chat([{"role": "user", "content": "x"}], temperature=0).text == "hi"
    assert delays[0] == 2.0 and 0.75 <= delays[1] <= 1.0  # Retry-After honoured; then 0.5 s * 2 less jitter
    assert seen[0].headers["authorization"] == "Bearer sk-1"
    assert json.loads(seen[2].content) == {"model": "m", "messages": [{"role": "user", "content": "x"}],
                                           "temperature": 0}
    assert client.counts.take() == {"requests": 3, "retries": 2, "request_errors": 2, "parse_failures": 0,
                                    "prompt_tokens": 7, "completion_tokens": 3}
    assert client.counts.peek()["requests"] == 0  # taken


def test_client_gives_up_after_max_retries_and_never_retries_a_4xx():
    client = ChatClient("http://llm.test/v1/chat/completions", "m", max_retries=1, sleep=lambda s: None,
                        transport=answering(500, 500))
    with pytest.raises(ChatRequestFailed, match="HTTP 500.*after 2 tries") as error:
        client.chat([])
    assert error.value.transient
    client = ChatClient("http://llm.test/v1/chat/completions", "m", transport=answering(400))
    with pytest.raises(ChatRequestFailed, match="HTTP 400") as error:
        client.chat([])
    assert not error.value.transient and client.counts.peek()["requests"] == 1

    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    client = ChatClient("http://llm.test/v1/chat/completions", "m", max_retries=2, sleep=lambda s: None,
                        transport=httpx.MockTransport(refuse))
    with pytest.raises(ChatRequestFailed, match="ConnectError"):
        client.chat([])
    assert client.counts.peek() == {"requests": 3, "retries": 2, "request_errors": 3, "parse_failures": 0,
                                   "prompt_tokens": 0, "completion_tokens": 0}


def test_backoff_and_retry_after_forms():
    rng = __import__("random").Random(0)
    assert Backoff().delay(10, None, rng) <= 8.0 and Backoff().delay(0, 120.0, rng) <= 0.5  # too long a wish: ours
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after_seconds(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), now=1445412470) == 10
    assert retry_after_seconds(httpx.Headers({"retry-after": "soon"})) is None


def test_client_asks_the_server_for_its_model_when_none_is_named():
    def handle(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "first"}, {"id": "second"}]})
        return httpx.Response(200, json={"model": json.loads(request.content)["model"],
                                         "choices": [{"message": {"content": "ok"}}]})

    client = ChatClient("http://llm.test/v1/chat/completions", None, models_url="http://llm.test/v1/models",
                        transport=httpx.MockTransport(handle))
    assert client.chat([]).text == "ok" and client.model == "first"


# ---- a batch through the runner's wrapper --------------------------------------------------------

def test_a_batch_quarantines_unparseable_rows_with_the_raw_answer_and_asks_each_row_once():
    seen: list[dict] = []
    rows = pa.table({"id": ["a", "b", "c"], "text": ["ta", "tb", "tc"], "query": ["qa", "qb", "qc"],
                     "response": ["ra", "rb", "rc"]})
    by_text = {"ta": "【问题】\nQA\n【回答】\nRA", "tb": "I will not.", "tc": "【问题】\nQC\n【回答】\nRC"}

    def handle(request):
        body = json.loads(request.content)
        seen.append(body)
        text = body["messages"][1]["content"].split("\n")[1]
        return httpx.Response(200, json={"choices": [{"message": {"content": by_text[text]}}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 4}})

    runner = StreamingOpRunner(get_op("calibrate_qa_mapper"),
                               get_op("calibrate_qa_mapper").Params(model_params=BASE, try_num=2, concurrency=3),
                               None, "calibrate")
    with_transport(runner.op, httpx.MockTransport(handle))
    out = runner(rows).to_pylist()
    by_id = {r["id"]: r for r in out}
    assert (by_id["a"]["query"], by_id["a"]["response"], by_id["a"][KIND_COL]) == ("QA", "RA", None)
    assert (by_id["c"]["query"], by_id["c"]["response"]) == ("QC", "RC")
    assert by_id["b"][KIND_COL] == "error" and by_id["b"][REASON_COL] == "UnparseableResponse"
    assert "after 2 request(s); last raw response: 'I will not.'" in by_id["b"][DETAIL_COL]
    assert by_id["b"]["query"] == "qb"  # the row as it came
    assert len(seen) == 4  # a and c once, b twice (try_num): the row-by-row retry asked nobody again
    assert runner.op.batch_counts(pa.table({})) == {"requests": 4, "retries": 0, "request_errors": 0,
                                                     "parse_failures": 2, "prompt_tokens": 40, "completion_tokens": 16}
    assert runner.op.batch_counts(pa.table({})) is None  # reported once


def test_a_long_raw_answer_is_cut_in_the_detail():
    mapper = with_transport(op("calibrate_query_mapper", try_num=1), answering("x" * 5000, ""))
    mapper.parse_output = lambda raw: None
    with pytest.raises(ValueError, match=r"\(5000 characters in all\)") as error:
        mapper.process_batch(pa.table({"text": ["t"], "query": ["q"], "response": ["r"]}))
    assert len(str(error.value)) < 1800


def test_meta_fields_merge_and_done_rows_are_not_asked_again():
    seen: list[dict] = []
    mapper = with_transport(op("extract_keyword_mapper"), answering('("content_keywords" "a, b")', seen=seen))
    meta = pa.array([{"keyword": None, "source": "x"}, {"keyword": ["kept"], "source": "y"}],
                    pa.struct([("keyword", pa.list_(pa.string())), ("source", pa.string())]))
    out = mapper.process_batch(pa.table({"text": ["t1", "t2"], "meta": meta}))
    assert out.column("meta").to_pylist() == [{"keyword": ["a", "b"], "source": "x"}, {"keyword": ["kept"], "source": "y"}]
    assert len(seen) == 1  # row 2 had its keywords (Data-Juicer's "generated already")
    dropped = with_transport(op("extract_keyword_mapper", drop_text=True), answering('("content_keywords" "c")'))
    out = dropped.process_batch(pa.table({"id": ["1"], "text": ["t"]}))
    assert out.column_names == ["id", "meta"] and dropped.columns_dropped() == ("text",)


def test_an_op_pickles_for_ray_tasks_and_warns_on_suspect_counts():
    mapper = op("calibrate_qa_mapper")
    mapper.client.counts.add(requests=2)
    again = pickle.loads(pickle.dumps(mapper))
    assert again.client.counts.peek()["requests"] == 2 and again.client._http is None
    warnings = get_op("calibrate_qa_mapper").count_warnings(None, {"requests": 4, "request_errors": 1,
                                                                   "parse_failures": 3})
    assert any("none of the 3 answers parsed" in w for w in warnings)
    assert any("no token usage" in w for w in warnings)


# ---- the LLM filters -----------------------------------------------------------------------------

def example_response(prompt: str) -> str:
    """The JSON answer a Data-Juicer judging prompt shows the model ("Example Response:\\njson\\n{...}")."""
    return prompt.split("Example Response:")[1].split("json", 1)[1].strip()


@pytest.mark.parametrize("name, score", [("llm_analysis_filter", 0.8), ("llm_quality_score_filter", 0.6),
                                          ("llm_difficulty_score_filter", None)])
def test_judging_filters_score_their_prompts_example(name, score):
    judge = op(name)
    answer = example_response(judge.system_prompt)
    if score is None:  # the difficulty prompt's example: its own five dimensions
        score = sum(json.loads(answer)["dimension_scores"].values()) / 5 / 5
    parsed = judge.parse_output("Here is my judgement:\n" + answer + "\nDone.")
    assert parsed[0] == pytest.approx(score) and parsed[1] == json.loads(answer)
    assert judge.parse_output("no json") is None
    assert judge.parse_output('{"dimension_scores": {"clarity": 4}}') is None  # a required dimension missing
    assert judge.parse_output('{"rationale": "none"}') == (None, {"rationale": "none"})  # no score: kept


def test_a_judging_filter_drops_out_of_range_rows_and_keeps_carried_scores():
    scores = iter([1, 5])

    def handle(request):
        s = next(scores)
        content = json.dumps({"dimension_scores": dict.fromkeys(["clarity", "relevance", "usefulness", "fluency"], s)})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    cls = get_op("llm_analysis_filter")
    runner = StreamingOpRunner(cls, cls.Params(model_params=BASE, min_score=0.5, concurrency=1), None, "judge")
    with_transport(runner.op, httpx.MockTransport(handle))
    none = {"llm_analysis_score": None, "llm_analysis_record": None}
    stats = pa.array([none, none, {"llm_analysis_score": 0.1, "llm_analysis_record": "{}"}],
                     pa.struct([("llm_analysis_score", pa.float64()), ("llm_analysis_record", pa.string())]))
    out = runner(pa.table({"id": ["low", "high", "carried"], "text": ["a", "b", "c"], "stats": stats})).to_pylist()
    by_id = {r["id"]: r for r in out}
    assert by_id["low"][REASON_COL] == "llm_analysis_score < min" and by_id["low"]["stats"]["llm_analysis_score"] == 0.2
    assert by_id["high"][KIND_COL] is None and json.loads(by_id["high"]["stats"]["llm_analysis_record"]) == \
        {"dimension_scores": dict.fromkeys(["clarity", "relevance", "usefulness", "fluency"], 5)}
    assert by_id["carried"][REASON_COL] == "llm_analysis_score < min"  # its own score, not asked again
    assert runner.op.batch_counts(pa.table({}))["requests"] == 2


# ---- in a pipeline file --------------------------------------------------------------------------

DAG = """\
name: llm-dag
nodes:
  - id: texts
    op: read_jsonl
    with: {{paths: ["{rows}"]}}
  - id: model
    op: train_moe_lm
    input: texts
  - id: endpoint
    op: serve_llm
    input: {{model: model}}
  - id: qa
    op: calibrate_qa_mapper
    input: {{data: texts, endpoint: {endpoint}}}
    with: {{try_num: 2, sampling_params: {{temperature: 0}}}}
  - id: keywords
    op: extract_keyword_mapper
    input: qa
    with: {{model_params: {model_params}}}
"""


def test_a_dag_feeds_a_serve_llm_endpoint_to_an_llm_op(tmp_path):
    from raypress.dag.validate import PipelineInvalid, load_pipeline

    (tmp_path / "rows.jsonl").write_text('{"text": "t", "query": "q", "response": "r"}\n')
    path = tmp_path / "dag.yaml"
    path.write_text(DAG.format(rows=tmp_path / "rows.jsonl", endpoint="endpoint",
                               model_params='{base_url: "http://127.0.0.1:8000/v1"}'))
    vp = load_pipeline(path)
    assert vp.nodes["qa"].slots == {"data": ["texts"], "endpoint": ["endpoint"]}
    assert vp.nodes["keywords"].op_cls.columns_written(get_op("extract_keyword_mapper")(vp.nodes["keywords"].params)) \
        == ("meta",)
    path.write_text(DAG.format(rows=tmp_path / "rows.jsonl", endpoint="texts", model_params="{api_key: sk-secret}"))
    with pytest.raises(PipelineInvalid) as exc:
        load_pipeline(path)
    problems = [str(p) for p in exc.value.problems]
    assert any("input 'texts' gives a Dataset but 'endpoint' needs a Report" in p for p in problems)
    assert any("dag.yaml:19 node 'keywords' key 'model_params'" in p and "never written in a pipeline" in p
               for p in problems)
    assert not any("sk-secret" in p for p in problems)  # not echoed either


def test_data_juicers_own_test_configurations_validate_as_a_recipe(tmp_path):
    """The op arguments of Data-Juicer's tests (tests/ops/mapper/test_*.py at c07c2d7), in a recipe's
    process list with its per-op base keys."""
    import yaml

    from raypress.dag.validate import load_pipeline

    (tmp_path / "in.jsonl").write_text('{"text": "t", "query": "q", "response": "r"}\n')
    process = [
        {"calibrate_qa_mapper": {"api_model": "qwen2.5-72b-instruct", "response_path": "choices.0.message.content",
                                 "api_endpoint": "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"}},
        {"generate_qa_from_text_mapper": {"enable_vllm": False, "sampling_params": {"max_new_tokens": 200},
                                          "max_num": 1, "num_proc": 1}},
        {"optimize_qa_mapper": {"api_or_hf_model": "qwen2.5-72b-instruct", "is_hf_model": False}},
        {"extract_entity_relation_mapper": {"api_model": "qwen2.5-72b-instruct", "entity_types": ["人物", "地点"]}},
        {"relation_identity_mapper": {"api_model": "qwen2.5-72b-instruct", "source_entity": "李莲花",
                                      "target_entity": "方多病", "output_key": "role_relation"}},
        {"extract_entity_attribute_mapper": {"api_model": "qwen2.5-72b-instruct", "query_entities": ["李莲花"],
                                             "query_attributes": ["语言风格", "角色性格"]}},
        {"llm_quality_score_filter": {"api_or_hf_model": "qwen2.5-72b-instruct", "min_score": 0.6,
                                      "max_closed_interval": False}},
    ]
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "o.jsonl"),
                                    "np": 2, "process": process}, allow_unicode=True))
    nodes = load_pipeline(path).nodes
    ops = [n.op_cls.name for n in nodes.values()]
    assert all(next(iter(step)) in ops for step in process)


def test_task_relevance_puts_the_task_ahead_of_the_row_and_keeps_from_min_score():
    judge = op("llm_task_relevance_filter", task_desc="Solve grade-school math.", n_shot=1,
               valid_dataset=[{"text": "2 + 3 = ?"}, {"text": "not shown"}])
    user = judge.build_messages({"text": "A GIMP brush."})[1]["content"]
    assert user == ("# Task Description\nSolve grade-school math.\n\n# Validation Data\n'''\n**Text**\n2 + 3 = ?\n'''\n\n"
                    "# Data\n'''\n**Text**\nA GIMP brush.\n'''\n\n# Response\njson\n")
    score, record = judge.parse_output(example_response(judge.system_prompt))
    assert score == pytest.approx((2 + 4 + 2 + 2 + 2) / 5 / 5) and record["flags"] == ["topical_mismatch"]
    assert judge.drop_reasons({"llm_task_relevance": [0.48, 1.0, None]}) == ["llm_task_relevance < min", None, None]
    with pytest.raises(ValidationError, match="give the task"):
        get_op("llm_task_relevance_filter").Params()


def test_entity_relation_gleans_missed_entities_in_more_turns():
    first = '("entity"<|>"Alex"<|>"person"<|>"a lead")##'
    more = '("entity"<|>"Taylor"<|>"person"<|>"a rival")##("relationship"<|>"Alex"<|>"Taylor"<|>"rivals"<|>"conflict"<|>6)'
    seen: list[dict] = []
    mapper = with_transport(op("extract_entity_relation_mapper", max_gleaning=2),
                            answering(first, more, ' "No" ', seen=seen))
    out = mapper.process_batch(pa.table({"text": ["Alex and Taylor."]})).column("meta").to_pylist()[0]
    assert [e["entity_name"] for e in out["entity"]] == ["Alex", "Taylor"]
    assert out["relation"][0]["relation_strength"] == 6.0 and out["relation"][0]["relation_keywords"] == ["conflict"]
    assert [m["role"] for m in seen[1]["messages"]] == ["user", "assistant", "user"]  # the gleaning turn
    assert seen[1]["messages"][2]["content"].startswith("MANY entities were missed")
    assert seen[2]["messages"][-1]["content"].startswith("It appears some entities may have still been missed")
    assert len(seen) == 3  # "No": no second gleaning turn


def test_support_text_per_summary_falls_back_to_the_summary_on_an_empty_answer():
    mapper = with_transport(op("extract_support_text_mapper", try_num=1), answering("  passage A ", "  "))
    meta = pa.array([{"event_description": ["event A", "event B"]}, {"event_description": None}],
                    pa.struct([("event_description", pa.list_(pa.string()))]))
    out = mapper.process_batch(pa.table({"text": ["t", "u"], "meta": meta})).column("meta").to_pylist()
    assert out[0]["support_text"] == ["passage A", "event B"]  # Data-Juicer: the summary when nothing came back
    assert out[1]["support_text"] is None  # no summary: the row as it was
