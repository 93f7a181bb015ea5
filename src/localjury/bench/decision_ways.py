"""Decision heads in ``localjury align``: read each judge's hidden states on the labeled records,
fit a head per layer by grouped cross-validation, and compare it with the ways of prompting the
same judge on the same records; a head is kept only where it wins beyond its interval.

The ways compared, each scored by Cohen's kappa against the labels (95% bootstrap interval):

- ``zero-shot votes``: the judge's majority vote, asked the criterion alone;
- ``zero-shot calibrated``: its verdict probability (or vote share) through a threshold fitted
  on the other folds (:func:`localjury.bench.calibrate._fit`);
- ``aligned votes`` and ``aligned calibrated``: the same, shown label-aligned examples of other
  groups (only where the profile is calibrated: ``--calibrate``);
- ``head layer N``: the head on block N's output at the prompt's last token, each record's
  probability from a head fitted on the other folds, folds grouped so that no pair, group or
  user input (:func:`localjury.bench.sampling.unit`) is on both sides, and the head's C chosen
  inside the training folds only;
- ``head layers A+B+C``: the head on those blocks' outputs one after another, reduced by PCA or
  by the regularisation alone (chosen with C inside the training folds);
- ``head layer N over the response`` (and on several blocks): the same heads on the blocks'
  outputs averaged over the response's tokens, where the engine reads them (llama.cpp,
  transformers);
- ``head layer N after the reason`` (and on several blocks): the same heads on the state where the
  judge, having written its reason (one greedy answer to the zero-shot prompt), is about to write
  its verdict; a run with such a head generates that answer and keeps its reason;
- ``length only``: the same head on the record's surface alone (:func:`surface_features`: the
  response's length in words and characters, the input's in words), never a winner: a baseline.

The best head wins when the lower end of its kappa's interval is above the best prompting
way's kappa; otherwise the profile keeps prompting and says why. The report warns that a head's
gain could come from length where the length-only kappa reaches that lower end, or where its own
interval clears the best prompting way as a head's must to win.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from localjury.bench import stats
from localjury.bench.formats import BenchItem
from localjury.engines import load_engine, model_identity, resolve_engine
from localjury.engines.base import GenerateCall
from localjury.errors import ConfigError
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.neutralise import Neutraliser
from localjury.metrics.rubric import Rubric
from localjury.models._tokenizer_files import tokenizer_markers
from localjury.models.registry import ModelSpec
from localjury.records.record import Record, parse_record
from localjury.run import EngineFactory, RunConfig
from localjury.run.jury import resolve_models
from localjury.types import Pooling, Sampling
from localjury.votes.calibration import Calibrator
from localjury.votes.decision_report import DecisionReport, DecisionWay
from localjury.votes.heads import (
    AFTER_REASON,
    OVER_RESPONSE,
    DecisionHead,
    HeadBinding,
    cross_validated,
    fit_head,
    reading_suffix,
)

if TYPE_CHECKING:
    import numpy as np

    from localjury.engines.base import Engine

#: One model's comparison (:func:`fit_model_heads`): its report, its winning head (None where prompting
#: won) and that head's probabilities of the labeled records by cross-validation (None where not given).
Fitted = tuple[DecisionReport, DecisionHead | None, list[float] | None]

#: The baseline a head is compared with: a head on the record's lengths, not its states.
SURFACE = "length only"

#: Fewer labels than this (or fewer than MIN_PER_LABEL of a label) fit no head: its
#: cross-validated kappa would be noise.
MIN_LABELS = 40
MIN_PER_LABEL = 10


def default_layers(blocks: int) -> list[int]:
    """The blocks a head is fitted on: a quarter, half and three quarters of the way, and the last."""
    return sorted({blocks // 4, blocks // 2, (3 * blocks) // 4, blocks - 1})


def too_few(gold: Sequence[int]) -> str | None:
    """Why these labels are too few to fit a head, or None."""
    counts = {g: sum(x == g for x in gold) for g in (0, 1)}
    if len(gold) < MIN_LABELS or min(counts.values()) < MIN_PER_LABEL:
        return (
            f"{len(gold)} labels ({counts[1]} pass, {counts[0]} fail): a decision head needs {MIN_LABELS}, "
            f"{MIN_PER_LABEL} of each"
        )
    return None


def binding_of(spec: ModelSpec, criterion: str) -> HeadBinding:
    """What a head fitted on this model's hidden states, for this criterion, is bound to."""
    return HeadBinding(
        model=spec.name,
        weights_sha256=model_identity(spec),
        engine=spec.engine,
        prompt_format=spec.prompt_format,
        criterion=criterion,
    )


def read_states(
    engine: Engine,
    judge: AspectCritic | Rubric,
    records: Sequence[Record],
    layers: Sequence[int] | None = None,
    pooling: Pooling = "last",
) -> tuple[np.ndarray, list[int]]:
    """The hidden states of ``engine``'s model on each record's zero-shot prompt (the judge's
    criterion alone, the record's text neutralised as a run does), at its last token or averaged
    over its response (``pooling``), at ``layers`` (default: :func:`default_layers`); and the layers."""
    layers = list(layers) if layers is not None else default_layers(engine.block_count())  # type: ignore[attr-defined]
    return engine.hidden_states(zero_shot_prompts(engine, judge, records), layers, pooling), layers  # type: ignore[attr-defined]


def zero_shot_prompts(engine: Engine, judge: AspectCritic | Rubric, records: Sequence[Record]) -> list[str]:
    """Each record's zero-shot prompt as ``engine`` takes it, the record's text neutralised as a run does."""
    neutralise = Neutraliser(tokenizer_markers(engine.spec.tokenizer_dir()))
    return [engine.format_prompt(judge.messages(record, neutralise)) for record in records]


def read_after_reason(
    engine: Engine, judge: AspectCritic, records: Sequence[Record], layers: Sequence[int], seed: int
) -> np.ndarray:
    """The hidden states at ``layers`` where the judge, having written its reason on each record's
    zero-shot prompt (one greedy answer in the model's token budget), is about to write its verdict
    (:meth:`~localjury.engines.base.BatchEngine.states_after_reason`)."""
    sampling = Sampling(0.0, 1.0, engine.spec.max_tokens, seed)
    call = GenerateCall(zero_shot_prompts(engine, judge, records), 1, sampling, judge.json_schema())
    return engine.states_after_reason(call, layers)[1]  # type: ignore[attr-defined]


def read_poolings(
    engine: Engine, judge: AspectCritic | Rubric, records: Sequence[Record], layers: Sequence[int] | None = None
) -> tuple[dict[Pooling, np.ndarray], list[int]]:
    """:func:`read_states` at the prompts' last token and, where the engine pools (not vLLM),
    over their responses, in one prefill a record where the engine reads both at once
    (:meth:`~localjury.engines.base.BatchEngine.pooled_states`): pooling -> states; and the layers."""
    layers = list(layers) if layers is not None else default_layers(engine.block_count())  # type: ignore[attr-defined]
    prompts = zero_shot_prompts(engine, judge, records)
    try:
        # The response first: an engine that pools no response says so before it reads anything.
        both = engine.pooled_states(prompts, layers, ("response", "last"))  # type: ignore[attr-defined]
    except ConfigError:  # an engine that reads the last token's states only, or a record without a response
        return {"last": engine.hidden_states(prompts, layers)}, layers  # type: ignore[attr-defined]
    return {"last": both["last"], "response": both["response"]}, layers


def head_ways(
    states: np.ndarray,
    layers: Sequence[int],
    gold: Sequence[int],
    groups: Sequence[str],
    folds: int,
    seed: int,
    pooling: Pooling = "last",
    after_reason: bool = False,
) -> list[DecisionWay]:
    """Each layer's head and, for two layers or more, the head on all of them, each scored by
    grouped cross-validation (``pooling``, ``after_reason``: where ``states`` were read, for the ways' names)."""
    ways = [_head_way(way_name([layer], pooling, after_reason), states[:, j], gold, groups, folds, seed)
            for j, layer in enumerate(layers)]  # fmt: skip
    if len(layers) > 1:
        together = states.reshape(len(states), -1)
        name = way_name(layers, pooling, after_reason)
        ways.append(_head_way(name, together, gold, groups, folds, seed, reduce=True))
    return ways


def way_name(layers: Sequence[int], pooling: Pooling = "last", after_reason: bool = False) -> str:
    """A head's way: ``head layer 7``, or ``head layers 3+7+27`` for a head on several blocks,
    with where it reads them after it (:func:`~localjury.votes.heads.reading_suffix`)."""
    blocks = f"head layer {layers[0]}" if len(layers) == 1 else "head layers " + "+".join(str(i) for i in layers)
    return blocks + reading_suffix(pooling, after_reason)


def layers_of(way: str) -> list[int] | None:
    """The blocks of a head's way (:func:`way_name`), or None for another way."""
    way = way.removesuffix(OVER_RESPONSE).removesuffix(AFTER_REASON)
    for prefix in ("head layer ", "head layers "):
        if way.startswith(prefix) and way[len(prefix) :].replace("+", "").isdigit():
            return [int(i) for i in way[len(prefix) :].split("+")]
    return None


def pooling_of(way: str) -> Pooling:
    """Where a head's way (:func:`way_name`) reads the states."""
    return "response" if way.endswith(OVER_RESPONSE) else "last"


def after_reason_of(way: str) -> bool:
    """Whether a head's way (:func:`way_name`) reads the states after the judge's reason."""
    return way.endswith(AFTER_REASON)


def _head_way(
    name: str,
    x: np.ndarray,
    gold: Sequence[int],
    groups: Sequence[str],
    folds: int,
    seed: int,
    *,
    reduce: bool = False,
) -> DecisionWay:
    """A head on ``x``, scored by grouped cross-validation: kappa of its 0.5 cut, and AUROC;
    ``reduce``: its PCA chosen inside the training folds too."""
    p = cross_validated(x, gold, groups, folds=folds, seed=seed, reduce=reduce)
    c = stats.classification(gold, [int(q >= 0.5) for q in p], seed=seed)
    return scored_way(name, c, stats.probabilistic(gold, p, seed=seed)["auroc"], len(gold))


def surface_features(items: Sequence[BenchItem], response: str = "response") -> np.ndarray:
    """What a head could learn without reading the criterion, one row per record: the response's
    length in words and in characters and the input's in words, each as log(1 + n); ``response``:
    the field that holds the response (a pair's ``response_a`` or ``response_b``)."""
    import numpy as np

    rows = []
    for it in items:
        answer, question = str(it.record.get(response) or ""), str(it.record.get("user_input") or "")
        rows.append([len(answer.split()), len(answer), len(question.split())])
    return np.log1p(np.asarray(rows, dtype=float).reshape(len(rows), 3))


def surface_way(
    items: Sequence[BenchItem], gold: Sequence[int], groups: Sequence[str], folds: int, seed: int
) -> DecisionWay:
    """The length-only baseline, on the same grouped folds as the heads."""
    return _head_way(SURFACE, surface_features(items), gold, groups, folds, seed)


def prompt_ways(fits: dict[str, Calibrator | None]) -> list[DecisionWay]:
    """The prompting ways from calibration fits' held-out figures (``fits``: a prefix such as
    ``zero-shot`` -> the model's fit on that run; None where that run was not made)."""
    ways = []
    for prefix, fit in fits.items():
        if fit is None or not fit.held_out:
            continue
        held = fit.held_out
        for kind, key in (("votes", "uncalibrated"), ("calibrated", "calibrated")):
            f = held[key]
            auroc = f.get("auroc") if kind == "calibrated" else None
            ways.append(scored_way(f"{prefix} {kind}", f, auroc, held["records"]))
    return ways


def scored_way(name: str, figures: dict[str, Any], auroc: float | None, records: int) -> DecisionWay:
    ci = figures.get("kappa_ci")
    return DecisionWay(
        way=name,
        kappa=figures.get("kappa"),
        kappa_ci=list(ci) if ci is not None else None,
        auroc=auroc,
        records=records,
    )


def decide(
    model: str,
    prompting: list[DecisionWay],
    heads: list[DecisionWay],
    baseline: DecisionWay | None = None,
    length: str = "the record's length",
    by: Literal["kappa", "spearman"] = "kappa",
) -> DecisionReport:
    """The winner among the ways: the best head where its interval's lower end is above the best
    prompting way's figure (``by``: its kappa, or of graded labels its Spearman's rho; one with none,
    having decided nothing, counts as chance: 0), else the best prompting way. ``baseline`` (the
    length-only way) is listed, never chosen; where it could explain the best head (:func:`_artifact`),
    the report warns, naming what the baseline reads as ``length``."""

    def figure(w: DecisionWay) -> float:
        value = getattr(w, by)
        return value if value is not None else float("-inf")

    listed = [*prompting, *heads, *([baseline] if baseline is not None else [])]
    ways = sorted(listed, key=figure, reverse=True)
    best_prompt = max(prompting, key=figure, default=None)
    best_head = max(heads, key=figure, default=None)
    default = best_prompt.way if best_prompt else "zero-shot votes"
    if best_prompt is None:
        bar, label = float("-inf"), "no prompting way"
    elif getattr(best_prompt, by) is None:  # it decided nothing, or one label only: no better than chance
        bar, label = 0.0, f"{best_prompt.way} ({by} undefined, taken as chance: 0)"
    else:
        bar, label = figure(best_prompt), f"{best_prompt.way} ({by} {figure(best_prompt):.3f})"
    interval = getattr(best_head, f"{by}_ci") if best_head is not None else None
    if best_head is None or interval is None:
        return DecisionReport(model=model, ways=ways, winner=default, why="no head could be scored")
    low = interval[0]
    artifact = _artifact(baseline, best_head.way, low, bar, label, length, by)
    if low > bar:
        why = f"{best_head.way}: {by} {figure(best_head):.3f}, interval from {low:.3f}, above {label}"
        return DecisionReport(model=model, ways=ways, winner=best_head.way, why=why, artifact=artifact)
    why = (
        f"kept prompting: the best head, {best_head.way} ({by} {figure(best_head):.3f}), has an interval from "
        f"{low:.3f}, not above {label}"
    )
    return DecisionReport(model=model, ways=ways, winner=default, why=why, artifact=artifact)


def _artifact(
    baseline: DecisionWay | None, head: str, low: float, bar: float, label: str, length: str, by: str = "kappa"
) -> str | None:
    """The warning where the length-only baseline could explain a head: its figure (``by``) reaches
    the head's interval, or its own interval clears the best prompting way as a head must to win."""
    value, interval = (getattr(baseline, by), getattr(baseline, f"{by}_ci")) if baseline is not None else (None, None)
    if value is None:
        return None
    alone = f"{length} alone ({SURFACE}: {by} {value:.3f}"
    if value >= low:
        return f"{alone}) reaches {head}'s interval (from {low:.3f}): its gain could come from length"
    if interval is not None and interval[0] > bar:
        return (
            f"{alone}, interval from {interval[0]:.3f}) is above {label}, as a head must be to win: "
            "a head's gain over prompting could come from length"
        )
    return None


def fit_model_heads(
    engine: Engine,
    prompting: list[DecisionWay],
    *,
    judge: AspectCritic,
    items: Sequence[BenchItem],
    groups: Sequence[str],
    folds: int,
    seed: int,
) -> Fitted:
    """One model's comparison and, where a head wins, the head fitted on every labeled record and
    its probabilities by grouped cross-validation (each record's from a head fitted on the other folds)."""
    gold = [int(it.gold) for it in items]  # type: ignore[arg-type]
    records = [parse_record(it.record) for it in items]
    poolings, layers = read_poolings(engine, judge, records)
    read = {(pooling, False): states for pooling, states in poolings.items()}
    read["last", True] = read_after_reason(engine, judge, records, layers, seed)
    heads = [way for (pooling, after), states in read.items()
             for way in head_ways(states, layers, gold, groups, folds, seed, pooling, after)]  # fmt: skip
    report = decide(engine.spec.name, prompting, heads, surface_way(items, gold, groups, folds, seed))
    won = layers_of(report.winner)
    if won is None:
        return report, None, None
    reading = pooling_of(report.winner), after_reason_of(report.winner)
    x = read[reading][:, [layers.index(i) for i in won]].reshape(len(gold), -1)
    head = fit_head(x, gold, groups, won, binding_of(engine.spec, judge.definition), seed, *reading)
    # The winner's way again, as the comparison scored it (the same folds and seed): a stacked jury reads it.
    return report, head, cross_validated(x, gold, groups, folds=folds, seed=seed, reduce=len(won) > 1)


def decision_heads(
    config: RunConfig,
    engine_factory: EngineFactory | None,
    prompting: Callable[[str], list[DecisionWay]],
    fit: Callable[[Engine, list[DecisionWay]], Fitted],
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Each model's decision report and its winning head, as the profile file holds them: the
    model loaded once more to read its hidden states (a prefill a labeled response and way of
    reading it; after the reason, a greedy answer in the run's token budget first), its
    prompting ways (``prompting``: by the model's name) compared with its heads by ``fit``
    (:func:`~localjury.bench.decision_ways.fit_model_heads`, or
    :func:`~localjury.bench.decision_ways.fit_model_preference`). A model whose engine gives no
    hidden states keeps prompting, and says so. Also each winning head's held-out probabilities
    of the labeled records, by its model's name (where ``fit`` gives them)."""
    jury = config.jury
    reports, heads, held_out = [], [], {}
    for spec in resolve_models(jury.models, jury.registry, jury.trust_remote_code):
        budget = config.sampling.max_tokens or spec.max_tokens  # a head after the reason reads a run's answer
        spec = spec.model_copy(update={"engine": resolve_engine(spec, jury.engine), "max_tokens": budget})
        ways = prompting(spec.name)
        engine = (engine_factory or load_engine)(spec)
        try:
            if not hasattr(engine, "hidden_states"):  # an Engine of the protocol's own, not a BatchEngine
                raise ConfigError(f"model {spec.name!r}: its engine gives no hidden states")
            report, head, p = fit(engine, ways)
        except ConfigError as exc:  # an engine without hidden states
            report, head, p = decide(spec.name, ways, []).model_copy(update={"why": str(exc)}), None, None
        finally:
            engine.close()
        reports.append(report.model_dump(mode="json"))
        if head is not None:
            heads.append(head.model_dump(mode="json"))
        if p is not None:
            held_out[spec.name] = p
    return {"decisions": reports, "heads": heads}, held_out
