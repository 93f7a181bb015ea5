"""A judge profile from graded labels (``localjury align --rubric``): a rubric's score learned
from a user's scores.

The labels are records scored on the rubric's scale (``score``, 1..N; a mean of raters' scores
allowed: :func:`~localjury.bench.formats.load_scored`). Each model first grades every record as
the rubric does (its prompt, ``strictness`` samples): its ``prompted score`` (the mean of its
sampled scores) and, where its engine gives the levels' probabilities, its ``prompted expected
score``. Then it is loaded once more to read the rubric prompt's hidden states, and a graded head
per layer (a ridge regression, :mod:`localjury.votes.graded`), and one on all of them, is scored
by grouped cross-validation beside a head on the record's lengths alone. Every way is measured by
Spearman's rho against the scores (and the quadratically weighted kappa of its rounded scores);
a head wins as a yes/no head does, the lower end of its rho's interval above the best prompted
way's rho. The profile (``rubric:``) holds the winning heads; a run with it decides those models'
scores by their heads (:mod:`localjury.metrics.graded_critic`) and asks the others the rubric.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjury._hashing import file_sha256
from localjury._version import __version__
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
    surface_features,
    way_name,
)
from localjury.bench.formats import BenchItem, load_scored
from localjury.bench.sampling import check_unique_ids, sample, unit
from localjury.bench.scales import scale_agreement
from localjury.errors import ConfigError
from localjury.metrics.graded_critic import EXPECTED, PROMPTED
from localjury.metrics.profile import JudgeProfile, ProfileCriterion, ProfileRubric
from localjury.metrics.rubric import Rubric, aggregate
from localjury.models.registry import ModelSpec
from localjury.records.record import parse_record
from localjury.results._outputs import OutputSet
from localjury.run import EngineFactory, RunResult, evaluate
from localjury.types import Pooling
from localjury.votes.decision_report import DecisionWay
from localjury.votes.graded import cross_validated_graded, fit_graded

if TYPE_CHECKING:
    import numpy as np
    from rich.progress import Progress

    from localjury.engines.base import Engine

#: Fewer scored records than this fit no graded head (as a yes/no head needs 40 labels).
MIN_SCORED = 40


def build_graded_profile(
    data: str | Path,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    align: AlignConfig,
    *,
    rubric: Rubric,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
) -> JudgeProfile:
    """Build a graded judge profile from records scored on ``rubric``'s scale and write it to
    ``out`` (YAML), for :func:`~localjury.bench.align.build_profile` (``align``: its settings,
    resolved there; ``shots`` and ``calibrate`` do not apply: a graded profile shows no examples
    and fits no threshold).

    Raises:
        ConfigError: Bad labels (naming the file, the line and the field), ``heads`` off (a graded
            profile is its heads), an output path refused or being written by another process.
    """
    out = Path(out)
    if not align.heads:
        raise ConfigError("a graded profile holds its graded heads: --no-heads would leave it nothing")
    run_config = align.run.replace(strictness=rubric.strictness)
    seed = run_config.sampling.seed
    with OutputSet({"judge profile": out}, align.inputs(data, "labels")) as files:
        items = sample(load_scored(data, rubric.n, metric=rubric.name), align.limit, align.sample_seed)
        check_unique_ids(items, data)
        if refused := next((it.error for it in items if it.error is not None), None):
            raise ConfigError(f"{refused}; fix or remove the line (every scored record trains the heads)")
        names = [m if isinstance(m, str) else m.name for m in models]
        profile = JudgeProfile(
            localjury_version=__version__,
            criterion=ProfileCriterion(name=rubric.name, definition=rubric.criterion),
            strictness=rubric.strictness,
            models=names,
            labels=str(Path(data).resolve()),
            labels_sha256=file_sha256(Path(data)),
            rubric=ProfileRubric(
                levels=list(rubric.levels), needs_reference=rubric.needs_reference, threshold=rubric.threshold
            ),
        )
        few = too_few_scores([it.gold for it in items])
        if few is not None:
            decided: dict[str, Any] = {"decisions": [{"model": n, "winner": PROMPTED, "why": few} for n in names]}
        else:
            asked = evaluate([it.record for it in items], [rubric], config=run_config, progress=progress,
                             engine_factory=engine_factory, output_set=files)  # fmt: skip
            decided, _ = decision_heads(
                run_config,
                engine_factory,
                partial(_prompted, items, asked, rubric.name, seed),
                partial(fit_model_graded, rubric=rubric, items=items, folds=align.folds, seed=seed),
            )
        # As the file holds them, so that the result equals what is read back.
        profile = JudgeProfile.model_validate({**profile.model_dump(mode="json"), **decided})
        files.file(out, profile.dump_yaml())
        files.commit()
    return profile


def too_few_scores(levels: Sequence[int]) -> str | None:
    """Why these scored records (``levels``: each score rounded) are too few to fit a graded head, or None."""
    if len(levels) >= MIN_SCORED and len(set(levels)) >= 2:
        return None
    return f"{len(levels)} scored records on {len(set(levels))} levels: a graded head needs {MIN_SCORED}, on 2 levels"


def graded_way(name: str, items: Sequence[BenchItem], predicted: Sequence[float | None], seed: int) -> DecisionWay:
    """A way scored against the records' scores: Spearman's rho of ``predicted`` (None: no score)
    and the quadratically weighted kappa of it rounded, each with its interval
    (:func:`~localjury.bench.scales.scale_agreement`, against the scores rounded half up)."""
    f = scale_agreement([it.gold for it in items], predicted, seed=seed)
    return DecisionWay(way=name, kappa=f["quadratic_kappa"], kappa_ci=f["quadratic_kappa_ci"], spearman=f["spearman"],
                       spearman_ci=f["spearman_ci"], records=f["scored"])  # fmt: skip


def head_ways(
    states: np.ndarray, layers: Sequence[int], items: Sequence[BenchItem], folds: int, seed: int, levels: int,
    pooling: Pooling = "last",
) -> list[DecisionWay]:  # fmt: skip
    """Each layer's graded head and, for two layers or more, the head on all of them, each scored
    by grouped cross-validation (:func:`~localjury.votes.graded.cross_validated_graded`)."""
    scores, groups = [float(it.score or 0) for it in items], [unit(it) for it in items]
    xs = [([layer], states[:, j]) for j, layer in enumerate(layers)]
    if len(layers) > 1:
        xs.append((list(layers), states.reshape(len(states), -1)))
    ways = []
    for blocks, x in xs:
        predicted = cross_validated_graded(x, scores, groups, folds=folds, seed=seed, levels=levels)
        ways.append(graded_way(way_name(blocks, pooling), items, predicted, seed))
    return ways


def fit_model_graded(
    engine: Engine,
    prompting: list[DecisionWay],
    *,
    rubric: Rubric,
    items: Sequence[BenchItem],
    folds: int,
    seed: int,
) -> Fitted:
    """One model's comparison on scored records and, where a graded head wins, the head fitted on
    every record: the rubric prompt's states at its last token and, where the engine pools, over
    its response (:func:`~localjury.bench.decision_ways.read_poolings`)."""
    scores, groups = [float(it.score or 0) for it in items], [unit(it) for it in items]
    poolings, layers = read_poolings(engine, rubric, [parse_record(it.record) for it in items])
    heads = [way for pooling, states in poolings.items()
             for way in head_ways(states, layers, items, folds, seed, rubric.n, pooling)]  # fmt: skip
    length = cross_validated_graded(surface_features(items), scores, groups, folds=folds, seed=seed, levels=rubric.n)
    report = decide(engine.spec.name, prompting, heads, graded_way(SURFACE, items, length, seed), by="spearman")
    won = layers_of(report.winner)
    if won is None:
        return report, None, None
    pooling = pooling_of(report.winner)
    x = poolings[pooling][:, [layers.index(i) for i in won]].reshape(len(items), -1)
    binding = binding_of(engine.spec, rubric.rubric_text())
    return report, fit_graded(x, scores, groups, won, binding, rubric.n, seed, pooling), None


def _prompted(items: Sequence[BenchItem], run: RunResult, metric: str, seed: int, model: str) -> list[DecisionWay]:
    """The prompted rubric's ways for ``model``: the mean of its sampled scores of each record and,
    where its engine gave the levels' probabilities, its expected score (records it abstained on left out)."""
    sampled: dict[str, float | None] = {}
    expected: dict[str, float | None] = {}
    for result in run.iter_results():
        judgment = next((j for j in result.models if j.model == model), None) if result.metric == metric else None
        if judgment is not None:
            sampled[result.record_id] = aggregate(judgment.scores or [])
            expected[result.record_id] = aggregate(judgment.expected or [])
    if not sampled:
        return []
    ways = [graded_way(PROMPTED, items, [sampled.get(it.id) for it in items], seed)]
    if any(v is not None for v in expected.values()):
        ways.append(graded_way(EXPECTED, items, [expected.get(it.id) for it in items], seed))
    return ways
