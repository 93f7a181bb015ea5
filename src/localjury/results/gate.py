"""The CI gate: a run fails when a metric's pass rate is under a bar.

``localjury run ... --fail-under faithfulness=0.9 --fail-under mentions_date=80%`` judges as
usual, writes every output, then checks each bar against the summary's pass rate (the share
of the metric's scored records whose final score passes, as in the summary) and exits with
:data:`GATE_EXIT` when one is missed, listing the records that failed it. A metric no record
could be scored on misses its bar: a gate never passes on nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from localjury.errors import ConfigError
from localjury.results.record_result import RecordResult
from localjury.results.summary import Summary
from localjury.votes.voting import passes

#: The exit code of a run that wrote its results but missed a ``--fail-under`` bar: distinct
#: from 1 (an error), 2 (a configuration error) and 130 (interrupted).
GATE_EXIT = 3


@dataclass(frozen=True)
class Gate:
    """A bar: the least pass rate (0 to 1) a metric must reach."""

    metric: str
    rate: float

    @classmethod
    def parse(cls, text: str) -> Gate:
        """Read ``METRIC=RATE``, the rate a fraction (``0.8``) or a percentage (``80%``).

        Raises:
            ConfigError: Not of that form, or the rate is not a number from 0 to 1 (0% to 100%).
        """
        metric, _, value = (part.strip() for part in text.rpartition("="))
        if not metric or not value:
            raise ConfigError(f"--fail-under {text!r}: give METRIC=RATE, e.g. faithfulness=0.9 or faithfulness=90%")
        percent = value.endswith("%")
        try:
            rate = float(value.removesuffix("%"))
        except ValueError:
            raise ConfigError(f"--fail-under {text!r}: the rate {value!r} is not a number") from None
        if percent:
            rate /= 100
        if not math.isfinite(rate) or not 0 <= rate <= 1:
            raise ConfigError(f"--fail-under {text!r}: the rate must be from 0 to 1 (or 0% to 100%)")
        return cls(metric, rate)


def check_names(gates: Sequence[Gate], metrics: Iterable[str]) -> None:
    """Refuse, before anything loads, a bar on a metric the run does not judge (a typo would
    otherwise pass the gate silently) or two bars on one metric.

    Raises:
        ConfigError: Naming the metric and the run's metrics.
    """
    names = list(metrics)
    seen: set[str] = set()
    for gate in gates:
        if gate.metric not in names:
            raise ConfigError(
                f"--fail-under names the metric {gate.metric!r}, which this run does not judge "
                f"(its metrics: {', '.join(names)})"
            )
        if gate.metric in seen:
            raise ConfigError(f"--fail-under gives the metric {gate.metric!r} two bars; give one")
        seen.add(gate.metric)


@dataclass
class GateOutcome:
    """How one metric fared against its bar."""

    gate: Gate
    rate: float | None
    """The metric's pass rate; None when no record was scored."""
    scored: int
    failed: list[str] = field(default_factory=list)
    """The ids of the scored records whose final score did not pass, in results order."""
    unscored: list[str] = field(default_factory=list)
    """The ids of the records every model abstained on, or that were bad."""

    @property
    def met(self) -> bool:
        """Whether the bar is met (a metric with no scored record never meets one)."""
        return self.rate is not None and self.rate >= self.gate.rate


def check(gates: Sequence[Gate], summary: Summary, results: Iterable[RecordResult]) -> list[GateOutcome]:
    """Each bar against the summary's pass rate, with the records that failed it.

    Args:
        gates: The bars (their metrics checked with :func:`check_names`).
        summary: The run's summary: its pass rate is the figure checked.
        results: The run's results (read once, streamed), for the failing records' ids.
    """
    by_metric = {g.metric: GateOutcome(g, None, 0) for g in gates}
    for m in summary.metrics:
        if m.metric in by_metric:
            by_metric[m.metric].rate = m.pass_rate
            by_metric[m.metric].scored = m.scored
    for r in results:
        outcome = by_metric.get(r.metric)
        if outcome is None:
            continue
        verdict = passes(r.score, r.rubric.threshold if r.rubric else None) if r.error is None else None
        if verdict is None:
            outcome.unscored.append(r.record_id)
        elif not verdict:
            outcome.failed.append(r.record_id)
    return list(by_metric.values())


def describe(outcome: GateOutcome, *, show: int = 20) -> str:
    """One line for a bar: met or missed, the rate, and (when missed) the failing records."""
    g = outcome.gate
    if outcome.rate is None:
        text = f"{g.metric}: no record was scored (bar {g.rate:.1%}): the gate fails"
    else:
        word = "meets" if outcome.met else "is under"
        text = f"{g.metric}: pass rate {outcome.rate:.1%} of {outcome.scored} {word} the bar {g.rate:.1%}"
    if not outcome.met:
        for label, ids in (("failed", outcome.failed), ("not scored", outcome.unscored)):
            if ids:
                listed = ", ".join(ids[:show]) + (f", and {len(ids) - show} more" if len(ids) > show else "")
                text += f"; {label}: {listed}"
    return text
