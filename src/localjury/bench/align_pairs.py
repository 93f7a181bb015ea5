"""A judge profile from preference pairs (``localjury align`` on pairs): a local reward model.

The labels are pairs (``response_a``, ``response_b``, gold 1 where ``response_a`` is the better
one). Each model first judges every pair as the prompted pairwise judge does, in both orders
(:class:`~localjury.metrics.pairwise.PairwiseCritic`: its pick, the ``pairwise votes`` way);
then it is loaded once more to read the hidden states of each response on its own (the
criterion's zero-shot yes/no prompt about that response), and a preference head per layer, and
one on all of them, is scored by cross-validation over the pairs
(:func:`fit_model_preference`) beside a head on the responses'
lengths alone. A head wins as a yes/no head does: the lower end of its kappa's interval above the
prompted judge's kappa. The profile (``pairwise: true``) holds the winning heads; a run with it
decides those models' pairs by their heads (:mod:`localjury.metrics.preference_critic`) and asks
the others the pairwise question.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._hashing import file_sha256
from localjury._version import __version__
from localjury.bench import stats
from localjury.bench.config import AlignConfig
from localjury.bench.decision_ways import (
    SURFACE,
    Fitted,
    binding_of,
    decide,
    decision_heads,
    layers_of,
    pooling_of,
    read_poolings,
    scored_way,
    surface_features,
    way_name,
)
from localjury.bench.formats import BenchItem, load
from localjury.bench.sampling import check_unique_ids, sample
from localjury.errors import ConfigError
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.pairwise import PairwiseCritic
from localjury.metrics.preference_critic import side
from localjury.metrics.profile import JudgeProfile, ProfileCriterion
from localjury.models.registry import ModelSpec
from localjury.records.record import parse_record
from localjury.results._outputs import OutputSet
from localjury.run import EngineFactory, RunResult, evaluate
from localjury.types import Pooling
from localjury.votes.decision_report import DecisionWay
from localjury.votes.preference import cross_validated_preference, fit_preference

if TYPE_CHECKING:
    import numpy as np
    from rich.progress import Progress

    from localjury.engines.base import Engine


def build_preference_profile(
    data: str | Path,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    align: AlignConfig,
    *,
    judge: AspectCritic,
    fmt: str = "jsonl",
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
) -> JudgeProfile:
    """Build a pairwise judge profile from labeled preference pairs and write it to ``out``
    (YAML), for :func:`~localjury.bench.align.build_profile` (``align``: its settings, resolved
    there; ``shots`` and ``calibrate`` do not apply: a pairwise profile shows no examples and
    fits no threshold).

    Raises:
        ConfigError: Bad labels (naming the file, the pair and the field), ``judge`` quoting its
            evidence, ``heads`` off (a pairwise profile is its heads), an output path refused or
            being written by another process.
    """
    out = Path(out)
    if judge.evidence:
        raise ConfigError("--evidence quotes a yes/no judge's evidence; labeled pairs are decided by preference heads")
    if not align.heads:
        raise ConfigError("a profile of labeled pairs holds its preference heads: --no-heads would leave it nothing")
    run_config = align.run.replace(strictness=judge.strictness)
    seed = run_config.sampling.seed
    with OutputSet({"judge profile": out}, align.inputs(data, "labels")) as files:
        items = sample(load(data, fmt, pairwise=True, metric=judge.name), align.limit, align.sample_seed)
        check_unique_ids(items, data)
        if refused := next((it.error for it in items if it.error is not None), None):
            raise ConfigError(f"{refused}; fix or remove the line (every labeled pair trains the heads)")
        names = [m if isinstance(m, str) else m.name for m in models]
        profile = JudgeProfile(
            localjury_version=__version__,
            criterion=ProfileCriterion(name=judge.name, definition=judge.definition),
            strictness=judge.strictness,
            models=names,
            labels=str(Path(data).resolve()),
            labels_sha256=file_sha256(Path(data)),
            pairwise=True,
        )
        few = too_few_pairs(len(items))
        if few is not None:
            decided: dict[str, Any] = {"decisions": [{"model": n, "winner": "pairwise votes", "why": few}
                                                     for n in names]}  # fmt: skip
        else:
            pairwise = PairwiseCritic(judge.name, judge.definition, strictness=judge.strictness)
            asked = evaluate([it.record for it in items], [pairwise], config=run_config, progress=progress,
                             engine_factory=engine_factory, output_set=files)  # fmt: skip
            decided, _ = decision_heads(
                run_config,
                engine_factory,
                partial(_prompted, items, asked, judge.name, seed),
                partial(fit_model_preference, judge=judge, items=items, folds=align.folds, seed=seed),
            )
        # As the file holds them, so that the result equals what is read back.
        profile = JudgeProfile.model_validate({**profile.model_dump(mode="json"), **decided})
        files.file(out, profile.dump_yaml())
        files.commit()
    return profile


#: Fewer labeled pairs than this fit no preference head (their 40 responses, as a yes/no head needs 40 labels).
MIN_PAIRS = 20


def too_few_pairs(pairs: int) -> str | None:
    """Why these labeled pairs are too few to fit a preference head, or None."""
    return f"{pairs} labeled pairs: a preference head needs {MIN_PAIRS}" if pairs < MIN_PAIRS else None


def pairwise_way(a_better: Sequence[int], picks: Sequence[int | None], seed: int) -> DecisionWay:
    """The prompted pairwise judge's way, ``pairwise votes``: its pick of each pair (1:
    ``response_a``; None: no pick) against the labels, pairs without a pick left out."""
    return _pair_way("pairwise votes", a_better, picks, None, seed)


def preference_ways(
    a: np.ndarray, b: np.ndarray, layers: Sequence[int], a_better: Sequence[int], pairs: Sequence[str],
    folds: int, seed: int, pooling: Pooling = "last",
) -> list[DecisionWay]:  # fmt: skip
    """Each layer's preference head and, for two layers or more, the head on all of them (states
    ``(pairs, layers, hidden)`` of each pair's two responses, read where ``pooling`` says), each by
    cross-validation over the pairs (:func:`~localjury.votes.preference.cross_validated_preference`)."""
    ways = []
    for j, layer in enumerate(layers):
        p = cross_validated_preference(a[:, j], b[:, j], a_better, pairs, folds=folds, seed=seed)
        ways.append(_pair_way(way_name([layer], pooling), a_better, [int(q >= 0.5) for q in p], p, seed))
    if len(layers) > 1:
        flat_a, flat_b = a.reshape(len(a), -1), b.reshape(len(b), -1)
        p = cross_validated_preference(flat_a, flat_b, a_better, pairs, folds=folds, seed=seed, reduce=True)
        ways.append(_pair_way(way_name(layers, pooling), a_better, [int(q >= 0.5) for q in p], p, seed))
    return ways


def surface_preference_way(
    items: Sequence[BenchItem], a_better: Sequence[int], pairs: Sequence[str], folds: int, seed: int
) -> DecisionWay:
    """The length-only baseline of pairs: a preference head on the two responses' lengths."""
    a, b = surface_features(items, "response_a"), surface_features(items, "response_b")
    p = cross_validated_preference(a, b, a_better, pairs, folds=folds, seed=seed)
    return _pair_way(SURFACE, a_better, [int(q >= 0.5) for q in p], p, seed)


def _pair_way(
    name: str, a_better: Sequence[int], picks: Sequence[int | None], p: Sequence[float] | None, seed: int
) -> DecisionWay:
    c = stats.classification(a_better, picks, seed=seed)
    auroc = stats.probabilistic(a_better, p, seed=seed)["auroc"] if p is not None else None
    way = scored_way(name, c, auroc, c["decided"])
    return way.model_copy(update={"accuracy": c["accuracy"]})


def fit_model_preference(
    engine: Engine,
    prompting: list[DecisionWay],
    *,
    judge: AspectCritic,
    items: Sequence[BenchItem],
    folds: int,
    seed: int,
) -> Fitted:
    """One model's comparison on labeled pairs (``items``: pairwise records, gold 1 where
    ``response_a`` is the better) and, where a preference head wins, the head fitted on every
    pair: each response read on its own (:func:`~localjury.metrics.preference_critic.side`)."""
    a_better = [int(it.gold) for it in items]  # type: ignore[arg-type]
    pairs = [str(it.record["id"]) for it in items]
    records = [parse_record(it.record) for it in items]
    a, layers = read_poolings(engine, judge, [side(r, "response_a") for r in records])
    b, _ = read_poolings(engine, judge, [side(r, "response_b") for r in records], layers)
    heads = [way for pooling in b for way in preference_ways(a[pooling], b[pooling], layers, a_better, pairs, folds,
                                                             seed, pooling)]  # fmt: skip
    length = surface_preference_way(items, a_better, pairs, folds, seed)
    report = decide(engine.spec.name, prompting, heads, length, "the length of the two responses")
    won = layers_of(report.winner)
    if won is None:
        return report, None, None
    pooling, take = pooling_of(report.winner), [layers.index(i) for i in won]
    flat_a, flat_b = (x[pooling][:, take].reshape(len(items), -1) for x in (a, b))
    binding = binding_of(engine.spec, judge.definition)
    return report, fit_preference(flat_a, flat_b, a_better, pairs, won, binding, seed, pooling), None


def _prompted(items: Sequence[BenchItem], run: RunResult, metric: str, seed: int, model: str) -> list[DecisionWay]:
    """The prompted pairwise judge's way for ``model``: its pick of each pair in the run (the
    majority of its votes over both orders; an even split or no valid vote, no pick)."""
    picks: dict[str, int | None] = {}
    for result in run.iter_results():
        judgment = next((j for j in result.models if j.model == model), None) if result.metric == metric else None
        if judgment is not None:
            picks[result.record_id] = judgment.verdict
    if not picks:
        return []
    a_better = [int(it.gold) for it in items]  # type: ignore[arg-type]
    return [pairwise_way(a_better, [picks.get(str(it.record["id"])) for it in items], seed)]
