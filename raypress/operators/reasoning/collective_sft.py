"""``collective_sft``: fine-tune every policy on the search output (Mulberry's collective SFT), or,
as its compute-matched control, on more of its own original corpus.

Mulberry trains each π_k on the collective reasoning paths; here each policy of the Model continues
training from its weights on the SFT records of ``comcts_search`` rows (correct paths, and
reflective paths when ``include_reflection``) mixed with fresh examples of its own original corpus
(``original_ratio`` per record: without them a small search corpus makes the policy forget).
``mode: control`` trains the same policies for the same steps, batch, learning rate and number of
examples on the original corpus alone, so "CoMCTS data helps" is measured against "more training
helps". The loss is on the solution only; ``train_moe_lm`` trains, on Ray Train workers.

Where the original corpus comes from, per policy:

- input ``corpus`` (a text Dataset, column ``corpus_text_key``): the model's own training text, e.g.
  what ``train_moe_lm`` trained a plain LM on. When given it is the original corpus of EVERY policy
  trained, a ``train_policies`` set's recorded mixes included (it overrides them). Its examples are
  plain LM text: an empty prompt, the loss on every token, as in pre-training. A seeded sample of
  documents (the smallest hashes of seed + text, so the sample does not depend on how the Dataset
  is split) is cut, with the policy's tokenizer, into windows as long as a search record is on
  average (prompt + solution tokens, within the training context), so an original example costs
  what a record costs; one window per document, then a second per document, ... as needed.
- otherwise the policy's recorded ``train_policies`` mix, redrawn from input ``tasks`` (fresh draws).
- a policy with neither (a plain LM without ``corpus``) fails the node before anything trains,
  unless no original data is needed (mode comcts with ``original_ratio`` 0).

Output: for a ``train_policies`` (policy-set) Model, a policy-set Model (one fine-tuned directory
per policy), each with its actual steps. For a single plain Model (a ``train_moe_lm`` output), the
fine-tuned model itself (weights, tokenizer, ``raypress_model.json`` with an ``sft`` entry), in
``models/<node>/<the input's directory name>``: ``serve_llm`` and ``moe_cap_benchmark`` load it as
any Model dir (a policy-set manifest has no weights), and ``evaluate_reasoning`` names its single
policy as before the fine-tuning, so its before/after answers pair up in ``reasoning_report``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact
from raypress.models.bpe_tokenizer import BPETokenizer, load_tokenizer
from raypress.models.moe_checkpoint import from_hf_dict
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.policies.model_set import KIND, policy_dirs
from raypress.operators.registry import register
from raypress.operators.shared.moe_lm_trainer import MoELMTrainer, TrainMoELMParams, train_workers
from raypress.schema import ArtifactType

CONTEXT = 256  # tokens per training block (capped by the policy's own context)
CHARS_PER_TOKEN_BOUND = 4  # a byte-level BPE with split digits never packs more characters per token
MIN_WINDOW_TOKENS = 16  # a corpus window is never cut shorter (a whole short document may be)
SPAN_WINDOWS = 4  # longest-window's worth of text read per sampled document (more when documents are few)


class CollectiveSFTParams(Params):
    policies: list[str] | None = Field(None, description="policies to fine-tune (default: every policy of the Model)")
    mode: Literal["comcts", "control"] = Field("comcts", description="comcts: search records + original data; "
                                               "control: the same number of examples, original data only")
    runs: list[str] | None = Field(None, description="search runs whose records are used (default: every comcts run)")
    include_reflection: bool = Field(True, description="also train on reflective paths")
    original_ratio: float = Field(1.0, ge=0.0, description="original-corpus examples mixed in per search record")
    corpus_text_key: str = Field("text", description="column of the `corpus` input holding the text (input "
                                 "`corpus`: the model's own training text, the original corpus of every policy)")
    repeat: int = Field(4, ge=1, description="copies of each example (a small corpus needs several passes)")
    batch_size: int = Field(16, ge=1)
    lr: float = Field(1e-3, gt=0)
    max_steps: int = Field(500, ge=1, description="the steps every policy trains (the compute both modes match)")
    max_minutes: float = Field(15.0, gt=0, description="safety stop; the actual steps are reported (a cut "
                                                       "run is no longer compute-matched)")
    use_gpu: bool | None = Field(None, description="a GPU per Ray Train worker (None: where the cluster has one per worker)")
    num_workers: int = Field(2, ge=0, description="Ray Train workers; 0: local mode (no actors to start)")
    parallel: int = Field(1, ge=1, description="policies trained at the same time (needs num_workers >= 1 if > 1)")
    seed: int = Field(0, description="the training seed, the order of the examples and the corpus sample")


def sft_texts(rows: list[dict], include_reflection: bool) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Training examples ``(prompt, response)`` from the rows' SFT records, and how many of each kind."""
    texts, kinds = [], {"correct": 0, "reflective": 0}
    for row in rows:
        for record in json.loads(row.get("sft") or "[]"):
            if record["kind"] == "reflective" and not include_reflection:
                continue
            user, assistant = record["messages"][0]["content"], record["messages"][1]["content"]
            texts.append((user, assistant))
            kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
    return texts, kinds


def sft_record_ids(rows: list[dict]) -> set[str]:
    """Task ids of every SFT record in ``rows`` (what the leakage check compares)."""
    return {record["task_id"] for row in rows for record in json.loads(row.get("sft") or "[]")}


def mixed_corpus(records: list[tuple[str, str]], original: list[tuple[str, str]], mode: str,
                 ratio: float) -> list[tuple[str, str]]:
    """The examples one policy trains on: ``records`` + ``round(len(records)·ratio)`` original ones
    (comcts), or that many original ones alone (control): both modes see the same number."""
    n_original = round(len(records) * ratio)
    need = n_original + (len(records) if mode == "control" else 0)
    if len(original) < need:
        raise ValueError(f"{need} original examples needed, {len(original)} given")
    return original[:need] if mode == "control" else list(records) + original[:n_original]


def trainer_params(p: CollectiveSFTParams, init_from: str) -> TrainMoELMParams:
    """The training of one policy: identical in both modes but for the data (the step count, batch,
    learning rate and seed are the compute the control matches)."""
    return TrainMoELMParams(init_from=init_from, prompt_key="prompt", context_length=CONTEXT, batch_size=p.batch_size,
                            lr=p.lr, warmup_steps=10, max_steps=p.max_steps, max_minutes=p.max_minutes,
                            num_workers=p.num_workers, use_gpu=p.use_gpu, seed=p.seed)


def repeats(p: CollectiveSFTParams, examples: list[tuple[str, str]]) -> int:
    """Copies of the corpus so that it fills a batch on every worker at least ``p.repeat`` times."""
    chars_needed = max(p.num_workers, 1) * p.batch_size * CONTEXT * CHARS_PER_TOKEN_BOUND
    return max(p.repeat, -(-chars_needed // max(1, sum(len(q) + len(a) for q, a in examples))))


# ---------------------------------------------------------------------------------------------
# the original corpus of a plain LM: windows of its own training text


def doc_key(text: str, seed: int) -> int:
    """A document's rank in the seeded sample (the smallest keys are drawn): a hash of the seed and
    the text, so the sample is the same however the Dataset is split into blocks."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{text}".encode(), digest_size=8).digest(), "big")


_SPACE = re.compile(r"\s")


def text_span(text: str, key: int, span: int) -> str:
    """At most ``span`` characters of ``text``, from a ``key``-chosen place (after a space when one
    is near): a long filing is not carried to the driver whole, nor always from its head."""
    if len(text) <= span:
        return text
    start = key % (len(text) - span + 1)
    if start:
        space = _SPACE.search(text, start, start + 200)
        start = space.end() if space else start
    return text[start : start + span]


def sample_batch(table: pa.Table, text_key: str, seed: int, cutoff: int, span: int) -> pa.Table:
    """The batch's non-blank documents whose key is under ``cutoff``: ``key`` and ``text`` (its span)."""
    keys, texts = [], []
    for text in table.column(text_key).to_pylist():
        if not text or not text.strip():
            continue
        key = doc_key(text, seed)
        if key < cutoff:
            keys.append(key)
            texts.append(text_span(text, key, span))
    return pa.table({"key": pa.array(keys, pa.uint64()), "text": pa.array(texts, pa.large_string())})


def sample_documents(ds: Any, text_key: str, n: int, seed: int) -> list[str]:
    """The ``n`` non-blank documents of ``ds`` with the smallest seeded keys (all, when it has fewer),
    each cut to a span that holds enough windows. Only a small hash-chosen share of the corpus
    reaches the driver: the key cutoff keeps about 2·n rows, and is raised until n are kept."""
    total = max(ds.count(), 1)
    windows_per_doc = max(SPAN_WINDOWS, 2 * -(-n // total))
    span = windows_per_doc * CONTEXT * CHARS_PER_TOKEN_BOUND  # at least that many windows of CONTEXT tokens
    fraction = min(1.0, 2 * n / total)
    while True:
        cutoff = 2**64 if fraction >= 1.0 else int(fraction * 2**64)
        rows = ds.select_columns([text_key]).map_batches(
            sample_batch, batch_format="pyarrow",
            fn_kwargs={"text_key": text_key, "seed": seed, "cutoff": cutoff, "span": span}).take_all()
        if len(rows) >= n or fraction >= 1.0:
            break
        fraction = min(1.0, fraction * 4)
    rows.sort(key=lambda r: (r["key"], r["text"]))
    return [r["text"] for r in rows[:n]]


def cut_pieces(text: str, starts: list[int], size: int) -> list[str]:
    """``text`` cut at token boundaries (``starts``: each token's first character) into pieces of
    ``size`` tokens; a shorter document is one piece, the last piece of a longer one is kept when it
    has at least half that; blank pieces are dropped."""
    if len(starts) <= size:
        return [text] if text.strip() else []
    bounds = list(range(0, len(starts), size))
    if len(starts) - bounds[-1] < size / 2:
        ends = [starts[b] for b in bounds[1:]]
    else:
        ends = [starts[b] for b in bounds[1:]] + [len(text)]
    pieces = [text[starts[b] : end] for b, end in zip(bounds, ends)]
    return [piece for piece in pieces if piece.strip()]


def corpus_windows(docs: list[str], tokenizer: BPETokenizer, size: int, n: int, seed: int) -> list[str]:
    """``n`` windows of about ``size`` tokens from ``docs`` (in sample order): a seeded choice among
    each document's pieces, one per document, then a second per document, ... (fewer than ``n``
    when the documents run out)."""
    rng = random.Random(seed)
    pools = []
    for doc, encoding in zip(docs, tokenizer.tokenizer.encode_batch(docs, add_special_tokens=False)):
        pieces = cut_pieces(doc, [start for start, _ in encoding.offsets], size)
        rng.shuffle(pieces)
        pools.append(pieces)
    windows: list[str] = []
    for depth in range(max(map(len, pools), default=0)):
        for pieces in pools:
            if depth < len(pieces):
                windows.append(pieces[depth])
                if len(windows) == n:
                    return windows
    return windows


def window_tokens(records: list[tuple[str, str]], tokenizer: BPETokenizer, block: int) -> int:
    """Window length that makes an original example cost what a search record does: the records'
    mean prompt + solution tokens (tokenised apart, as the trainer does), within
    [MIN_WINDOW_TOKENS, block - 1] (the EOS the trainer appends takes the last place)."""
    prompts = tokenizer.encode_batch([q for q, _ in records])
    solutions = tokenizer.encode_batch([a for _, a in records])
    mean = round(sum(len(q) + len(a) for q, a in zip(prompts, solutions)) / max(len(records), 1))
    return max(min(MIN_WINDOW_TOKENS, block - 1), min(mean, block - 1))


def corpus_examples(docs: list[str], model_dir: str, records: list[tuple[str, str]], n: int,
                    seed: int) -> tuple[list[tuple[str, str]], int]:
    """``n`` (or fewer, when ``docs`` run out) plain-LM examples ``("", window)`` for the policy in
    ``model_dir`` (its tokenizer and context), and the window length in tokens. The empty prompt
    makes the trainer learn every token of the window (``pack_batch``: no prompt tokens to mask)."""
    tokenizer = load_tokenizer(model_dir)
    block = min(CONTEXT, from_hf_dict(json.loads((Path(model_dir) / "config.json").read_text())).max_position_embeddings)
    size = window_tokens(records, tokenizer, block)
    return [("", window) for window in corpus_windows(docs, tokenizer, size, n, seed)], size


@register("collective_sft", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning",
                                     "reasoning_gym": "reasoning"})
class CollectiveSFT(Stage[CollectiveSFTParams]):
    """Fine-tune every policy on comcts_search's SFT records mixed with its own data (or, mode control, its own data only) -> Model.

    Inputs: ``data`` (comcts_search rows), ``model`` (a ``train_policies`` policy set, or a single
    plain LM such as a ``train_moe_lm`` Model), and the original data: ``corpus`` (the model's own
    training text; used for every policy when given) or ``tasks`` (the questions a policy set's
    recorded mixes are redrawn from). Output: a policy set for a policy set, the fine-tuned model
    itself for a single Model (loadable by ``serve_llm``, ``moe_cap_benchmark``, ``evaluate_reasoning``)."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return train_workers(params.num_workers, params.use_gpu, len(params.policies) if params.policies else 1)

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL,
                                                 "tasks": ArtifactType.DATASET, "corpus": ArtifactType.DATASET}
    # `tasks`: the policies' training questions (a recorded mix's original corpus is drawn from them);
    # `corpus`: the model's own training text (its original corpus; overrides recorded mixes)
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"tasks", "corpus"})
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        import ray.data

        p = self.params
        model = inputs["model"]
        dirs = policy_dirs(model)  # type: ignore[arg-type]
        names = p.policies or list(dirs)
        unknown = sorted(set(names) - set(dirs))
        if unknown:
            raise ValueError(f"node {ctx.node_id!r}: unknown policies {unknown}; the Model has {sorted(dirs)}")
        rows = inputs["data"].ds.select_columns(["run", "method", "sft"]).take_all()  # type: ignore[union-attr]
        rows = [r for r in rows if (r["run"] in p.runs if p.runs is not None else r["method"] == "comcts")]
        records, kinds = sft_texts(rows, p.include_reflection)
        if not records:
            raise ValueError(f"node {ctx.node_id!r}: no SFT records in the selected runs (nothing was solved)")
        config = model.config or ModelArtifact.load(model.path).config  # type: ignore[union-attr]
        single = config.get("kind") != KIND
        specs = {} if single else config.get("policies", {})
        originals = self._originals(inputs, names, dirs, specs, records, ctx)

        def train(name: str) -> ModelArtifact:
            examples = mixed_corpus(records, originals[name][0], p.mode, p.original_ratio)
            random.Random(p.seed).shuffle(examples)
            from_search = len(records) if p.mode == "comcts" else 0
            ctx.event("sft_corpus", policy=name, mode=p.mode, examples=len(examples), records=len(records),
                      search_examples=from_search, original_examples=len(examples) - from_search,
                      **originals[name][1], **kinds)
            corpus = ray.data.from_items([{"prompt": q, "text": a} for q, a in examples * repeats(p, examples)])
            sub = dataclasses.replace(ctx, node_id=f"{ctx.node_id}-{name}")
            trainer = MoELMTrainer(trainer_params(p, dirs[name]))
            return trainer.run({"data": DatasetArtifact(corpus)}, sub)

        with ThreadPoolExecutor(max_workers=p.parallel if p.num_workers > 0 else 1) as pool:
            artifacts = list(pool.map(train, names))
        trained = {}
        for name, artifact in zip(names, artifacts):
            steps = int(artifact.config.get("training", {}).get("steps", 0))
            trained[name] = {**specs.get(name, {}), "path": artifact.path,
                             "sft": {"mode": p.mode, "steps": steps, "max_steps": p.max_steps,
                                     "records": kinds, "include_reflection": p.include_reflection,
                                     "original_ratio": p.original_ratio, "original": originals[name][1]}}
            if steps < p.max_steps:
                ctx.event("sft_cut_short", policy=name, steps=steps, max_steps=p.max_steps,
                          note="max_minutes stopped it: not compute-matched")
        sft = {"mode": p.mode, "records": kinds, "steps": {n: t["sft"]["steps"] for n, t in trained.items()}}
        if single:
            return self._single_output(names[0], artifacts[0], model.path, {**trained[names[0]]["sft"], **sft}, ctx)  # type: ignore[union-attr]
        out = ModelArtifact(str(Path(ctx.path("models", ctx.node_id))),
                            config={"kind": KIND, "policies": trained, "order": names, "sft": sft})
        out.save_manifest()
        return out

    def _originals(self, inputs: dict[str, Artifact], names: list[str], dirs: dict[str, str],
                   specs: dict[str, Any], records: list[tuple[str, str]],
                   ctx: RunContext) -> dict[str, tuple[list[tuple[str, str]], dict[str, Any]]]:
        """Per policy: its original examples (enough for either mode: the comcts mode takes the
        first of the control's) and what they are; every failure before anything trains."""
        from raypress.operators.reasoning.tasks.rows import task_from_row
        from raypress.operators.reasoning.train_policies import PolicySpec, policy_corpus

        p = self.params
        if not (p.mode == "control" or p.original_ratio > 0):
            return {name: ([], {"original_source": None}) for name in names}
        need = round(len(records) * p.original_ratio) + len(records)
        if "corpus" not in inputs:
            plain = [name for name in names if name not in specs]
            if plain:
                raise ValueError(f"node {ctx.node_id!r}: mode {p.mode!r} with original_ratio {p.original_ratio} "
                                 f"needs original data, and policy {plain} has no recorded training mix (a plain "
                                 "LM): give its training text as input `corpus` (or use original_ratio 0, mode comcts)")
            if "tasks" not in inputs:
                raise ValueError(f"node {ctx.node_id!r}: mode {p.mode!r} with original_ratio {p.original_ratio} needs "
                                 "the policies' training questions as input `tasks` (or their training text as "
                                 "input `corpus`)")
            tasks = [task_from_row(r) for r in inputs["tasks"].ds.take_all()]  # type: ignore[union-attr]
            out = {}
            for name in names:
                info = specs[name]
                spec = PolicySpec(**{**info["spec"], "seed": info["spec"]["seed"] + 7919})  # fresh draws of its mix
                out[name] = (policy_corpus(spec, tasks, need, float(info.get("judge_rate", 0.0))),
                             {"original_source": "mix"})
            return out
        ds = inputs["corpus"].ds  # type: ignore[union-attr]
        if p.corpus_text_key not in ds.columns():
            raise ValueError(f"node {ctx.node_id!r}: input `corpus` has no column {p.corpus_text_key!r} "
                             f"(corpus_text_key); it has {ds.columns()}")
        docs = sample_documents(ds, p.corpus_text_key, need, p.seed)
        out = {}
        for name in names:
            examples, size = corpus_examples(docs, dirs[name], records, need, p.seed)
            if len(examples) < need:
                raise ValueError(f"node {ctx.node_id!r}: input `corpus` is too small: {need} original examples "
                                 f"needed ({len(records)} search records, original_ratio {p.original_ratio}, "
                                 f"both modes), {len(examples)} windows of {size} tokens found in its "
                                 f"{len(docs)} non-blank documents")
            out[name] = (examples, {"original_source": "corpus", "window_tokens": size, "documents": len(docs)})
            ctx.event("sft_original", policy=name, source="corpus", documents=len(docs), windows=len(examples),
                      window_tokens=size)
        return out

    def _single_output(self, name: str, artifact: ModelArtifact, base: str, sft: dict[str, Any],
                       ctx: RunContext) -> ModelArtifact:
        """The fine-tuned model itself as the node's Model, in ``models/<node>/<name>``: a Model dir
        every consumer loads, whose single policy keeps the input's name (``policy_dirs`` names a
        single Model by its directory)."""
        home = Path(ctx.path("models", ctx.node_id))
        shutil.rmtree(home, ignore_errors=True)  # this node's own folder: an earlier output
        home.mkdir(parents=True)
        shutil.move(artifact.path, home / name)
        out = ModelArtifact(str(home / name), config={**artifact.config, "sft": {**sft, "base_model": base}})
        out.save_manifest()
        return out
