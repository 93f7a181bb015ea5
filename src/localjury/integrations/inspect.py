"""localjury as an inspect_ai scorer: a local jury judges each sample of an inspect ``Task``.

Needs the ``inspect`` extra (``pip install 'localjury[inspect]'``)::

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate
    from localjury.integrations.inspect import localjury_scorer

    task = Task(
        dataset=[Sample(input="When did the Berlin Wall fall?", target="9 November 1989")],
        solver=generate(),
        scorer=localjury_scorer({"dated": "The response must include a specific date or year."}),
    )
    eval(task, model="openai/gpt-4o-mini")

Each sample is a record as :mod:`localjury.records.inspect_log` reads it from a log (its messages,
tool calls included; its final output; its target as the reference), judged on every
criterion by every model of the jury, ``strictness`` samples each, and voted as
``localjury run`` votes. The :class:`~inspect_ai.scorer.Score`:

- ``value``: ``{criterion: jury score}``, from 0 to 1 (the mean of the models' verdicts),
  NaN where every model abstained or the sample could not be judged (inspect counts it
  unscored, and ``reason`` is ``"grader_failed"`` or ``"scoring_failed"``);
- ``explanation``: per criterion, the verdict and each model's votes, abstentions and reasons;
- ``metadata``: per criterion, ``score``, ``passed``, ``error`` and ``models`` (each model's
  ``votes``, ``reasons``, ``abstentions``, ``verdict``, ``score``): a judge output that does
  not parse is an abstention there (a null vote), never a 0.

Samples that reach scoring while a batch is being judged wait and are judged together in the
next batch (one engine call for them all); one batch runs at a time, so samples scored
concurrently share the engines safely. The engines load on the first batch and stay loaded
until the scorer is garbage collected (inside a ``keep_loaded()`` block, that block keeps them).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from localjury.errors import ConfigError, MissingDependencyError, RecordError

try:
    import anyio
    from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
    from inspect_ai.solver import TaskState
except ImportError:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "localjury.integrations.inspect needs the inspect_ai package: pip install 'localjury[inspect]'"
    ) from None

from localjury.engines.pool import Pool
from localjury.records.conversation import Scope
from localjury.records.inspect_log import state_record
from localjury.records.record import Record
from localjury.votes.voting import passes

if TYPE_CHECKING:
    from localjury.metrics import Metric
    from localjury.results.record_result import RecordResult

Criteria = str | Mapping[str, str] | Sequence[str]


def build_metrics(criteria: Criteria, scope: Scope) -> list[Metric]:
    """The criteria as metrics: ``{name: statement}``; a predefined aspect's name or a list of
    them; or one yes/no statement (named ``criterion``).

    Raises:
        ConfigError: No criterion, or a name in a list that is not a predefined aspect.
    """
    from localjury.metrics import PREDEFINED_ASPECTS, AspectCritic

    metrics: list[Metric]
    if isinstance(criteria, Mapping):
        metrics = [AspectCritic(name, text, scope=scope) for name, text in criteria.items()]
    elif isinstance(criteria, str):
        if criteria in PREDEFINED_ASPECTS:
            metrics = [AspectCritic(criteria, PREDEFINED_ASPECTS[criteria], scope=scope)]
        else:
            metrics = [AspectCritic("criterion", criteria, scope=scope)]
    else:
        unknown = [c for c in criteria if c not in PREDEFINED_ASPECTS]
        if unknown:
            raise ConfigError(
                f"criteria {unknown} are not predefined aspects (one of: {', '.join(PREDEFINED_ASPECTS)}); "
                'give your own criteria as {"name": "the yes/no statement"}'
            )
        metrics = [AspectCritic(c, PREDEFINED_ASPECTS[c], scope=scope) for c in criteria]
    if not metrics:
        raise ConfigError("localjury_scorer needs at least one criterion")
    return metrics


@dataclass
class _Slot:
    """One sample waiting for its batch."""

    record: Record
    results: list[RecordResult] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class Jury:
    """Judges records in batches: what :func:`localjury_scorer`'s scorer calls.

    Args:
        metrics: The criteria.
        models: The jury: names from models.yaml (None: the default judge).
        settings: Further :func:`localjury.evaluate` settings.
    """

    metrics: list[Metric]
    models: list[str] | None
    settings: dict[str, Any]
    batches: list[int] = field(default_factory=list)
    """The size of each batch judged, in order."""
    _pending: list[_Slot] = field(default_factory=list)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock)
    _run_lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: Pool = field(default_factory=Pool)

    def __post_init__(self) -> None:
        weakref.finalize(self, self._pool.close)

    async def judge(self, record: Record) -> list[RecordResult]:
        """The results of ``record`` on every metric, judged with the records waiting beside it."""
        slot = _Slot(record)
        with self._pending_lock:
            self._pending.append(slot)
        await anyio.to_thread.run_sync(self._drain, slot)
        if slot.error is not None:
            raise slot.error
        assert slot.results is not None
        return slot.results

    def _drain(self, slot: _Slot) -> None:
        """Judge every waiting record, unless the batch before this one judged ``slot``."""
        with self._run_lock:
            if slot.done:
                return
            with self._pending_lock:
                batch, self._pending = self._pending, []
            try:
                by_id = self._evaluate([s.record for s in batch])
                for i, s in enumerate(batch):
                    s.results = by_id[i]
            except BaseException as exc:
                for s in batch:
                    s.error = exc
            for s in batch:
                s.done = True

    def _evaluate(self, records: list[Record]) -> list[list[RecordResult]]:
        from localjury.run import evaluate

        # Ids key the results: two samples of one id (two tasks sharing the scorer) get their own.
        ids = [f"{r.id}#{i}" for i, r in enumerate(records)]
        batch = [r.model_copy(update={"id": rid}) for r, rid in zip(records, ids, strict=True)]
        self.batches.append(len(batch))
        with self._pool.active():
            run = evaluate(batch, self.metrics, self.models, **self.settings)
        grouped: dict[str, list[RecordResult]] = {rid: [] for rid in ids}
        for result in run.results:
            grouped[result.record_id].append(result)
        return [grouped[rid] for rid in ids]

    def close(self) -> None:
        """Close the engines this jury keeps loaded."""
        self._pool.close()


def _explain(name: str, result: RecordResult) -> str:
    if result.error is not None:
        return f"{name}: not judged: {result.error}"
    head = (
        "NO VERDICT (every model abstained)"
        if result.score is None
        else (f"{'PASS' if passes(result.score) else 'FAIL'} (score {result.score:g})")
    )
    lines = [f"{name}: {head}"]
    for m in result.models:
        note = f"{m.abstentions} of {len(m.votes)} samples abstained (no parsable verdict)" if m.abstentions else ""
        lines.append(f"  {m.model}: verdict {m.verdict}, votes {m.votes}" + (f"; {note}" if note else ""))
        lines.extend(f"    - {reason}" for reason in m.reasons if reason)
        if m.error:
            lines.append(f"    error: {m.error}")
    return "\n".join(lines)


def to_score(results: Sequence[RecordResult]) -> Score:
    """The inspect ``Score`` of one sample's results, one per criterion (see the module's docstring)."""
    value: dict[str, float] = {}
    metadata: dict[str, Any] = {}
    reason = None
    for r in results:
        value[r.metric] = math.nan if r.score is None else r.score
        metadata[r.metric] = {
            "score": r.score,
            "passed": None if r.score is None else bool(passes(r.score)),
            "error": r.error,
            "models": [m.model_dump(mode="json", include={"model", "votes", "reasons", "abstentions", "verdict",
                                                          "score", "error"}) for m in r.models],
        }  # fmt: skip
        if r.error is not None:
            reason = "scoring_failed"
        elif r.score is None and reason is None:
            reason = "grader_failed"
    explanation = "\n".join(_explain(r.metric, r) for r in results)
    return Score(value=value, explanation=explanation, reason=reason, metadata=metadata)  # type: ignore[arg-type]


@scorer(metrics={"*": [mean(), stderr()]}, name="localjury")
def localjury_scorer(
    criteria: Criteria,
    models: Sequence[str] | None = None,
    *,
    strictness: int = 3,
    seed: int = 0,
    scope: Scope = "last_turn",
    **settings: Any,
) -> Scorer:
    """A scorer that judges each sample with a local jury of open-weight models.

    Args:
        criteria: ``{"name": "a yes/no statement"}``; a predefined aspect's name
            (``"conciseness"``) or a list of them; or one statement (named ``criterion``).
        models: The jury: names from models.yaml (default: the default judge).
        strictness: Samples per model for each judgment (their majority is its verdict).
        seed: The seed: the same samples judge the same way on the same machine.
        scope: ``"last_turn"`` judges the last assistant turn, the turns before it as its
            context; ``"conversation"`` judges the whole conversation.
        **settings: Further :func:`localjury.evaluate` settings (``registry``, ``cache``,
            ``use_cache``, ``tie_break``, ``temperature``, ...).

    Returns:
        The scorer: its ``Score`` per sample is described in :mod:`localjury.integrations.inspect`.

    Raises:
        ConfigError: No criterion, or an unknown predefined aspect (when the task is built);
            an unknown model or a bad setting is raised by the first sample scored.
    """
    jury = Jury(build_metrics(criteria, scope), list(models) if models else None,
                {"strictness": strictness, "seed": seed, **settings})  # fmt: skip

    async def score(state: TaskState, target: Target) -> Score:
        try:
            record = state_record(
                f"{state.sample_id}-epoch{state.epoch}",
                state.messages,
                state.output.completion if state.output is not None else "",
                list(target),
                location=f"sample {state.sample_id!r} epoch {state.epoch}",
            )
        except RecordError as exc:  # nothing to judge: unscored, saying why
            value = {m.name: math.nan for m in jury.metrics}
            return Score(value=value, explanation=str(exc), reason="scoring_failed")  # type: ignore[arg-type]
        return to_score(await jury.judge(record))

    score.jury = jury  # type: ignore[attr-defined]
    return score
