"""A jury that weighs its members, in ``localjury align``: the members' probabilities combined by
a logistic regression learned from the labels (:mod:`localjury.votes.stacking`), compared with the
mean a run takes on the same records by grouped cross-validation, and kept only where it wins.

Each member's numbers are those the profile's run will give, each held out from what judges it:

- a member decided by its head (``align`` kept one): the head's probability of each record from a
  head fitted on the other folds (:func:`~localjury.bench.decision_ways.fit_model_heads`); its score
  in the mean, that probability's verdict;
- another member: its judging shown label-aligned examples of other groups only (the calibration
  run), its confidence (else its share of passing votes) as its probability; its score in the
  mean, that confidence through a threshold fitted on the other folds, as ``align``'s held-out
  calibration figures score it (:func:`localjury.votes.calibration.cross_validated`).

The mean is the run's: the mean of the members' scores, passing above 0.5. The stack, by the same
grouped folds as the heads: a record's probability from a stack fitted on the other folds. It wins
where the lower end of its kappa's interval is above the mean's kappa (the rule a head wins by).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from localjury.bench import stats
from localjury.bench._judge import graded
from localjury.bench.decision_ways import scored_way, too_few
from localjury.bench.formats import BenchItem
from localjury.bench.sampling import unit
from localjury.errors import ConfigError
from localjury.results.record_result import ModelJudgment
from localjury.run import RunResult
from localjury.votes.calibration import cross_validated as calibrated_held_out
from localjury.votes.decision_report import DecisionWay
from localjury.votes.heads import cross_validated
from localjury.votes.stacking import MEAN, STACKED, JuryDecision, features, fit_stack
from localjury.votes.voting import final_score, passes


def jury_decision(
    items: Sequence[BenchItem],
    members: Sequence[str],
    aligned: RunResult | None,
    heads: Mapping[str, list[float]],
    metric: str,
    folds: int,
    seed: int,
) -> JuryDecision | None:
    """The jury's decision for a yes/no profile of these ``members`` (None for one member):
    ``aligned``, the calibration run (None: not made, and nothing is compared); ``heads``: each
    head member's held-out probabilities, in the order of ``items``."""
    if len(members) < 2:
        return None
    if aligned is None:
        return _kept_mean("not compared: a stacked jury learns from the calibration run (align without --no-calibrate)")
    judged = {r.record_id: {j.model: j for j in r.models} for r in aligned.iter_results() if r.metric == metric}
    gold = [int(it.gold) for it in items]  # type: ignore[arg-type]
    probability: dict[str, list[float | None]] = {
        m: list(heads[m]) if m in heads else [graded(_of(judged, it, m), False) for it in items] for m in members
    }
    scores = {m: _scores(probability[m], gold, m in heads, folds, seed) for m in members}
    rows = [i for i in range(len(items)) if all(probability[m][i] is not None for m in members)]
    few = too_few([gold[i] for i in rows])
    if few is not None:
        return _kept_mean(f"not compared: {few} where every member decided", len(items) - len(rows))
    import numpy as np

    y, groups = [gold[i] for i in rows], [unit(items[i]) for i in rows]
    x = np.array([[probability[m][i] for m in members] for i in rows], dtype=float)
    mean = [final_score([scores[m][i] for m in members]) for i in rows]
    stacked = cross_validated(features(x), y, groups, folds=folds, seed=seed)
    ways = [_way(MEAN, y, [int(bool(passes(s))) for s in mean], mean, seed),
            _way(STACKED, y, [int(p >= 0.5) for p in stacked], stacked, seed)]  # fmt: skip
    by_mean, by_stack = ways
    low = by_stack.kappa_ci[0] if by_stack.kappa_ci is not None else None
    bar = by_mean.kappa if by_mean.kappa is not None else 0.0
    ways.sort(key=lambda w: w.kappa if w.kappa is not None else float("-inf"), reverse=True)
    left_out = len(items) - len(rows)
    if low is None or low <= bar:
        why = f"kept the mean: the stack's kappa {_k(by_stack.kappa)} has an interval from {_k(low)}, not above " \
              f"the mean's {bar:.3f}"  # fmt: skip
        return JuryDecision(ways=ways, winner=MEAN, why=why, left_out=left_out)
    stack = fit_stack(x, y, groups, members, seed)
    why = f"{STACKED}: kappa {_k(by_stack.kappa)}, interval from {low:.3f}, above the mean's {bar:.3f}"
    return JuryDecision(ways=ways, winner=STACKED, why=why, left_out=left_out, stack=stack)


def _of(judged: Mapping[str, Mapping[str, ModelJudgment]], it: BenchItem, model: str) -> ModelJudgment | None:
    return judged.get(it.id, {}).get(model)


def _scores(probability: list[float | None], gold: list[int], head: bool, folds: int, seed: int) -> list[float | None]:
    """A member's score of each record in the mean, held out: a head's verdict, or a prompted member's
    confidence through a threshold fitted on the other folds (None where it abstained)."""
    if head:
        return [None if p is None else float(p >= 0.5) for p in probability]
    known = [i for i, p in enumerate(probability) if p is not None]
    try:
        _, held = calibrated_held_out([probability[i] for i in known], [gold[i] for i in known], folds=folds, seed=seed)  # type: ignore[misc]
    except ConfigError:  # too few of a label where it decided: its probability as it is
        return probability
    out: list[float | None] = [None] * len(probability)
    for i, (c, _threshold) in zip(known, held, strict=True):
        out[i] = c
    return out


def _way(name: str, gold: list[int], verdicts: list[int], p: Sequence[float | None], seed: int) -> DecisionWay:
    c = stats.classification(gold, verdicts, seed=seed)
    return scored_way(name, c, stats.probabilistic(gold, list(p), seed=seed)["auroc"], len(gold))


def _kept_mean(why: str, left_out: int = 0) -> JuryDecision:
    return JuryDecision(ways=[], winner=MEAN, why=why, left_out=left_out)


def _k(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"
