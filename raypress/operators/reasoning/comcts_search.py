"""``comcts_search``: Collective MCTS (and its baselines at equal budget) over every input question.

Why one stage for all methods: the comparison is only fair when every method sees the same
questions, the same policies (the same actors, so the same weights and batching) and the same
budget accounting; each entry of ``runs`` is one method over one list of policies.

Policies, by name, from three places (a name may come from one only):
- local LMs from a ``train_policies`` Model (the ``policies`` input; one Ray actor each, continuous
  batching inside), named as that Model names them;
- models served in the same run: the ``endpoints`` input, one ``serve_llm`` Report or a list of
  them (``input: {data: tasks, policies: policies, endpoints: [served]}``); each is a policy called
  over HTTP (``/v1/completions``) named by the model the Report serves (serve_llm's ``model_name``,
  by default its node id), with the bearer key from the variable the Report names;
- OpenAI-compatible endpoints known before the run (the ``endpoints`` param: name, base_url, model).
A run names them in ``policies:`` and ``judges: ["policy:<name>"]`` alike.
Questions are searched concurrently (``concurrency`` in flight) on the driver's event loop: the
search itself is cheap bookkeeping; the model calls it awaits are batched in the actors.

Calls, counted on both sides (``policies/call_counts.py``): per policy, the model calls the search
sent (``calls.<policy>``, whatever their outcome) and those that got no answer
(``failed_calls.<policy>``: an error reply, a timeout, a raise), and for every HTTP policy the
requests its server answered for this search (``served_requests.<policy>``: every call sends the
OpenAI ``user`` field naming this search, and the server's Prometheus ``/metrics`` counts answered
requests per ``user``, read before and after), so another client of the endpoint meanwhile does
not count. They go to the node's ledger entry (``counts``)
and to one ``policy_calls`` event; a server whose ``/metrics`` cannot be read gives a
``served_count_unavailable`` event instead of its count, never a failed search.

Judges: by default a run's own policies judge every candidate collectively (Mulberry: R is the mean
of their verdicts; each judging is one model call of the budget); "exact" (the family checker,
free) is the oracle-judge ablation. Runs with model judges also count, per step, how the judges
agree with the exact checker (``judge_audit``: it labels afterwards and never steers the search).
``@best`` is chosen by direct accuracy on the ``dev`` questions, never on the questions reported.

Output rows (one per run × question): the run, the method and policies, the question and answer,
solved / rounds / calls / tokens / failures, the whole tree, the best path, whether the solved
path holds a step the exact checker calls wrong, the reflective path, and SFT records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.search.judges import ExactStepJudge, ModelJudge
from raypress.operators.reasoning.policies.backends import OpenAIPolicy, start_local_policies, stop_local_policies
from raypress.operators.reasoning.policies.call_counts import CallCounts, ServedBy
from raypress.operators.reasoning.policies.model_set import policy_dirs
from raypress.operators.reasoning.tasks.rows import task_from_row
from raypress.operators.reasoning.search.types import Judge, Policy, Task
from raypress.operators.registry import register
from raypress.operators.shared.served_endpoint import ServedEndpoint, served_endpoint, server_root
from raypress.schema import ArtifactType

BEST = "@best"  # in a run's policy list: the policy with the best direct accuracy on the `dev` questions
COLLECTIVE = "collective"


class RunSpec(BaseModel):
    """One method over one list of policies (repeat a name for copies of one model)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    method: Literal["comcts", "direct", "independent", "best_of_n"]
    policies: list[str] = Field(min_length=1)
    judges: list[str] = Field(default_factory=lambda: [COLLECTIVE],
                              description='"collective" (every distinct policy of the run judges: Mulberry), '
                                          '"policy:<name>" (one model judging) and/or "exact" (the family\'s '
                                          'exact checker: the oracle-judge ablation, free)')


class EndpointSpec(BaseModel):
    """An OpenAI-compatible endpoint known before the run (one served in the run: the `endpoints` input)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the policy's name in `runs`")
    base_url: str = Field(description='the OpenAI routes, e.g. "http://host:8000/v1"')
    model: str = Field(description="the id sent as `model`")
    api_key_env: str | None = Field(None, description="environment variable holding the bearer key")


class SearchStageParams(Params):
    runs: list[RunSpec] = Field(min_length=1, description=(
        "{name, method, policies, judges}: policies by name, from the `policies` input (local), the `endpoints` "
        "input (served in the run, named by their model) or the `endpoints` param"))
    endpoints: list[EndpointSpec] = Field(default_factory=list, description=(
        "HTTP policies known before the run, by name; an endpoint served in the same run is the "
        "`endpoints` input instead (a serve_llm node or a list of them: policies named by their model)"))
    search: dict[str, Any] = Field(default_factory=dict, description="SearchParams: temperature, threshold, c, "
                                                                     "budget, max_tokens, ...")
    reflection_phrase: str = "The previous step is wrong, let's rethink it."
    limit: int | None = Field(None, ge=1, description="most questions searched")
    concurrency: int = Field(256, ge=1, description="questions searched at once")
    actor_cpus: float = Field(0.5, ge=0, description="CPUs reserved by each local policy actor")
    max_batch_size: int = Field(64, ge=1, description="sequences each policy actor decodes at once")
    timeout_s: float = Field(120.0, gt=0, description="per model call")
    seed: int | None = None


@register("comcts_search", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning",
                                     "reasoning_gym": "reasoning"})
class ComctsSearch(Stage[SearchStageParams]):
    """Collective MCTS and its baselines (direct, independent sampling, single-model, copies) over every question -> result rows."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return f"a policy actor per local policy × cpu={params.actor_cpus:g}"

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "policies": ArtifactType.MODEL,
                                                 "dev": ArtifactType.DATASET, "endpoints": ArtifactType.REPORT}
    # `dev`: questions on which `@best` is chosen (never the questions the table is computed on);
    # without it `@best` falls back to the `direct` runs on the searched questions (flagged in the event).
    # `endpoints`: serve_llm Reports (one node or a list), each one HTTP policy named by its model
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"policies", "dev", "endpoints"})
    list_inputs: ClassVar[frozenset[str]] = frozenset({"endpoints"})
    output: ClassVar[ArtifactType] = ArtifactType.DATASET
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> DatasetArtifact:
        import pyarrow as pa
        import pyarrow.parquet as pq
        import ray.data

        p = self.params
        rows = inputs["data"].ds.take_all() if p.limit is None else inputs["data"].ds.take(p.limit)  # type: ignore[union-attr]
        tasks = [task_from_row(r) for r in rows]
        dev = [task_from_row(r) for r in inputs["dev"].ds.take_all()] if "dev" in inputs else None  # type: ignore[union-attr]
        local = policy_dirs(inputs["policies"]) if isinstance(inputs.get("policies"), ModelArtifact) else {}  # type: ignore[arg-type]
        served = self._served(inputs.get("endpoints"), local, ctx.node_id)
        self._check_names(local, ctx.node_id, served)
        keys = {name: _served_key(e, name, ctx.node_id) for name, e in served.items()}  # before any actor starts
        http: dict[str, Policy] = {}
        servers: dict[str, ServedBy] = {}  # where each HTTP policy's server counts what it answered
        # the `user` every HTTP call sends: the server counts this search's calls apart from any other
        # client's (a benchmark on the same endpoint meanwhile)
        client = f"raypress:{ctx.node_id}:{os.getpid()}:{time.time_ns()}"
        for endpoint in p.endpoints:
            key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
            http[endpoint.name] = OpenAIPolicy(endpoint.name, endpoint.base_url, endpoint.model, key, p.timeout_s,
                                               user=client)
            servers[endpoint.name] = ServedBy(server_root(endpoint.base_url) + "/metrics", endpoint.model, client)
        for name, e in served.items():
            http[name] = OpenAIPolicy(name, e.base_url, e.model, keys[name], p.timeout_s, user=client)
            servers[name] = ServedBy(e.metrics_url, e.model, client)
        actors = start_local_policies(local, p.actor_cpus, p.max_batch_size, p.timeout_s) if local else {}
        counts = CallCounts({**actors, **http}, servers)
        try:
            counts.start(ctx)
            results = asyncio.run(self._all_runs(tasks, dict(counts.policies), ctx, dev))
        finally:
            stop_local_policies(actors)
            counts.report(ctx)  # what was sent also when the search failed
        out_dir = Path(ctx.path("nodes", ctx.node_id, "results"))
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("*.parquet"):
            old.unlink()
        pq.write_table(pa.Table.from_pylist(results), out_dir / "part-0.parquet")
        return DatasetArtifact(ray.data.read_parquet(str(out_dir)), path=str(out_dir), rows=len(results))

    def _served(self, reports: Any, local: dict[str, str], node_id: str) -> dict[str, ServedEndpoint]:
        """The ``endpoints`` input (one serve_llm Report or a list) by policy name (the model served);
        ValueError naming the node for any other artifact and for a name taken twice."""
        if reports is None:
            return {}
        served: dict[str, ServedEndpoint] = {}
        static = {e.name for e in self.params.endpoints}
        for report in reports if isinstance(reports, (list, tuple)) else [reports]:
            endpoint = served_endpoint(f"comcts_search node {node_id!r}", report, "endpoints")
            name = endpoint.model
            where = ("a local policy of the `policies` input" if name in local else
                     "an `endpoints` param entry" if name in static else
                     "another `endpoints` input" if name in served else None)
            if where is not None:
                raise ValueError(f"node {node_id!r}: the `endpoints` input serving {name!r} ({endpoint.base_url}) "
                                 f"takes the policy name {name!r} of {where}; give the serve_llm node another "
                                 "`model_name`")
            served[name] = endpoint
        return served

    def _check_names(self, local: dict[str, str], node_id: str, served: dict[str, ServedEndpoint] | None = None) -> None:
        p = self.params
        known = set(local) | {e.name for e in p.endpoints} | set(served or {})
        for run in p.runs:
            wanted = [n for n in run.policies if n != BEST]
            wanted += [j.split(":", 1)[1] for j in run.judges if j.startswith("policy:")]
            unknown = sorted(set(wanted) - known)
            if unknown:
                raise ValueError(f"node {node_id!r}, run {run.name!r}: unknown policies {unknown}; "
                                 f"known: {sorted(known)}")
            bad = [j for j in run.judges if j not in ("exact", COLLECTIVE) and not j.startswith("policy:")]
            if bad:
                raise ValueError(f"node {node_id!r}, run {run.name!r}: judges must be 'collective', 'exact' or "
                                 f"'policy:<name>', got {bad}")

    async def _all_runs(self, tasks: list[Task], policies: dict[str, Policy], ctx: RunContext,
                        dev: list[Task] | None = None) -> list[dict[str, Any]]:
        p = self.params
        rows: list[dict[str, Any]] = []
        direct_accuracy: dict[str, float] = {}
        dev_accuracy: dict[str, float] | None = None
        try:
            if dev is not None and any(BEST in run.policies for run in p.runs):
                dev_accuracy = await self._dev_accuracy(dev, policies)
                ctx.event("best_on_dev", questions=len(dev), accuracy=dev_accuracy,
                          best=self._resolve(BEST, dev_accuracy, "dev"))
            for run in p.runs:
                chooser = dev_accuracy if dev_accuracy is not None else direct_accuracy
                names = [self._resolve(n, chooser, run.name) for n in run.policies]
                if BEST in run.policies and dev_accuracy is None:
                    ctx.event("best_not_on_dev", run=run.name, note="@best chosen on the searched questions' "
                              "direct runs: give a `dev` input to choose it apart from them")
                started = time.perf_counter()
                run_rows = await self._one_run(run, names, tasks, policies)
                solved = sum(r["solved"] for r in run_rows)
                if run.method == "direct" and len(set(names)) == 1:
                    direct_accuracy[names[0]] = solved / max(len(run_rows), 1)
                ctx.event("search_run", run=run.name, method=run.method, policies=names, questions=len(run_rows),
                          solved=solved, seconds=round(time.perf_counter() - started, 2),
                          calls=sum(r["calls"] for r in run_rows))
                rows += run_rows
        finally:
            for policy in policies.values():
                close = getattr(policy, "aclose", None)
                if close is not None:
                    await close()
        return rows

    async def _dev_accuracy(self, dev: list[Task], policies: dict[str, Policy]) -> dict[str, float]:
        """Greedy direct accuracy of every policy on the dev questions (what `@best` is chosen by)."""
        from raypress.operators.reasoning.search import comcts as core
        from raypress.operators.reasoning.tasks.catalog import get_family

        gate = asyncio.Semaphore(self.params.concurrency)
        params = core.SearchParams(**self.params.search)

        async def one(policy: Policy, task: Task) -> bool:
            async with gate:
                return (await core.direct(task, get_family(task.family), policy, params)).solved

        accuracy = {}
        for name, policy in policies.items():
            outcomes = await asyncio.gather(*(one(policy, t) for t in dev))
            accuracy[name] = sum(outcomes) / max(len(outcomes), 1)
        return accuracy

    @staticmethod
    def _resolve(name: str, direct_accuracy: dict[str, float], run: str) -> str:
        if name != BEST:
            return name
        if not direct_accuracy:
            raise ValueError(f"run {run!r} names {BEST} but no single-policy `direct` run came before it")
        return max(direct_accuracy, key=lambda n: (direct_accuracy[n], -list(direct_accuracy).index(n)))

    async def _one_run(self, run: RunSpec, names: list[str], tasks: list[Task],
                       policies: dict[str, Policy]) -> list[dict[str, Any]]:
        from raypress.operators.reasoning.search import comcts as core
        from raypress.operators.reasoning.search.reflection import reflective_path, sft_records
        from raypress.operators.reasoning.tasks.catalog import get_family

        p = self.params
        seed = p.seed if p.seed is not None else 0
        gate = asyncio.Semaphore(p.concurrency)
        # copies of one model are separate policy objects (called separately) over the same backend
        members = [_Renamed(policies[n], f"{n}#{i}") if names.count(n) > 1 else policies[n]
                   for i, n in enumerate(names)]

        async def one(index: int, task: Task) -> dict[str, Any]:
            family = get_family(task.family)
            judges = _judges(run.judges, family, policies, names)
            params = core.SearchParams(**{**p.search, "seed": seed * 1_000_003 + index})
            audit = core.JudgeAudit(params.threshold) if any(j != "exact" for j in run.judges) else None
            async with gate:
                if run.method == "direct":
                    result = await core.direct(task, family, members[0], params)
                elif run.method == "independent":
                    result = await core.independent_sampling(task, family, members, params)
                elif run.method == "best_of_n":
                    result = await core.best_of_n(task, family, members, judges, params, run.name, audit)
                else:
                    result = await core.comcts(task, family, members, judges, params, method=run.name, audit=audit)
            reflective = None
            if result.solved and result.tree is not None and result.best_path is not None:
                reflective = reflective_path(result.tree, result.best_path.node_ids, p.reflection_phrase,
                                             random.Random(params.seed), params.c, threshold=params.threshold)
            row = result.to_row()
            row.update(run=run.name, method=run.method, policies=json.dumps(names), family=task.family,
                       question=task.question, answer=task.answer, judges=json.dumps(run.judges),
                       judge_audit=json.dumps(audit.counts if audit is not None and run.method in ("comcts", "best_of_n")
                                              else {}),
                       reflective_path=json.dumps(dataclasses.asdict(reflective)) if reflective else None,
                       sft=json.dumps(sft_records(task, family, result, reflective)))
            return row

        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))


def _served_key(endpoint: ServedEndpoint, name: str, node_id: str) -> str | None:
    """The bearer key of a served endpoint, from the variable its Report names (on this machine)."""
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise ValueError(f"node {node_id!r}: the `endpoints` input serving {name!r} requires the key in "
                         f"${endpoint.api_key_env}, which is not set here")
    return key


class _Renamed:
    """The same backend under another name (K copies of one model are K policies of the search)."""

    def __init__(self, policy: Policy, name: str) -> None:
        self.policy = policy
        self.name = name

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> Any:
        return await self.policy.complete(prompt, max_tokens, temperature, seed)


def _judges(specs: Sequence[str], family: Any, policies: dict[str, Policy], run_policies: Sequence[str] = ()) -> list[Judge]:
    """The run's judges; "collective" is one model judge per distinct policy of the run (copies of one
    greedy model would write the same verdicts, so they judge once)."""
    judges: list[Judge] = []
    for spec in specs:
        if spec == "exact":
            judges.append(ExactStepJudge(family))
        elif spec == COLLECTIVE:
            judges += [ModelJudge(policies[n], family) for n in dict.fromkeys(run_policies)]
        else:
            judges.append(ModelJudge(policies[spec.split(":", 1)[1]], family))
    return judges
