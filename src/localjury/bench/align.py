"""Label-aligned judges: build a judge profile from labeled records (``localjury align``) and
measure one by cross-validation beside the zero-shot judge (``localjury bench --aligned K``).

A profile's examples are the labeled records; each record to judge is shown its nearest ones
(:mod:`localjury.metrics.aligned`). Wherever labeled records are themselves judged with such
examples (to fit the profile's thresholds, or in a bench), each is put in a fold with the
records that share its pair, group or user input, and is shown examples from the other folds
only: no record ever sees itself or its pair as an example.

A judge that quotes its evidence (``evidence``) is shown examples that quote theirs. Labels
seldom carry gold quotes, so they are bootstrapped, as DSPy's ``BootstrapFewShot`` does its
demonstrations: the judge first judges every labeled record zero-shot with quoted evidence,
and each record's first sample whose vote agrees with its gold label (the models in the run's
order) lends the example its quotes and its reason (a label's own reason wins); a record no
sample got right is not shown. Its own zero-shot judging never sees any example, so no record's
examples carry anything of that record.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from localjury._hashing import file_sha256
from localjury._version import __version__
from localjury.bench._judge import is_pairwise
from localjury.bench.align_graded import build_graded_profile
from localjury.bench.align_jury import jury_decision
from localjury.bench.align_pairs import build_preference_profile
from localjury.bench.calibrate import _fit
from localjury.bench.config import AlignConfig
from localjury.bench.decision_ways import decision_heads, fit_model_heads, prompt_ways, too_few
from localjury.bench.formats import BenchItem, load
from localjury.bench.sampling import check_unique_ids, sample, unit
from localjury.errors import ConfigError
from localjury.metrics.aligned import DEFAULT_SHOTS, AlignedCritic
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.base import Metric
from localjury.metrics.profile import JudgeProfile, LabeledExample, ProfileCriterion
from localjury.metrics.rubric import Rubric
from localjury.models.registry import ModelSpec
from localjury.records.conversation import not_unicode
from localjury.records.record import parse_record
from localjury.results._outputs import OutputSet
from localjury.run import EngineFactory, RunConfig, RunResult, evaluate
from localjury.votes.calibration import Calibrator

if TYPE_CHECKING:
    from rich.progress import Progress

#: What bench calls an aligned judge's row, after the model's name.
ALIGNED = " (aligned)"
_FIELDS = ("user_input", "response", "retrieved_contexts", "reference")


def folds_of(items: Sequence[BenchItem], folds: int | None, seed: int = 0) -> dict[str, int]:
    """Record id -> fold: the units (:func:`unit`) shuffled with ``seed`` and dealt round the
    ``folds`` folds; ``None``: one fold a unit (each record sees every other unit's records)."""
    units = list(dict.fromkeys(unit(it) for it in items))
    random.Random(seed).shuffle(units)
    fold = {u: i if folds is None else i % folds for i, u in enumerate(units)}
    return {it.id: fold[unit(it)] for it in items}


#: A labeled record's bootstrapped answer: its quotes of the response and the reason beside them.
Trace = tuple[list[str], str]


def traces_of(items: Sequence[BenchItem], run: RunResult, metric: str) -> dict[str, Trace]:
    """Record id -> the quotes and reason of its first sample (models in the run's order) that
    voted its gold label under ``metric``, a criterion judged with quoted evidence; a record no
    sample got right has none."""
    gold = {it.id: it.gold for it in items}
    traces: dict[str, Trace] = {}
    for result in run.iter_results():
        if result.metric != metric or result.record_id not in gold:
            continue
        for judgment in result.models:
            found = next(
                (
                    ([q.text for q in quotes if q.field == "response"], reason)
                    for vote, reason, quotes in zip(
                        judgment.votes, judgment.reasons, judgment.evidence or (), strict=False
                    )
                    if vote == gold[result.record_id] and reason is not None and quotes is not None
                ),
                None,
            )
            if found is not None:
                traces[result.record_id] = found
                break
    return traces


def examples_of(
    items: Sequence[BenchItem], where: str | Path, traces: dict[str, Trace] | None = None
) -> list[LabeledExample]:
    """The labeled records as a profile's examples (a row the labels reader refused, see
    :attr:`~localjury.bench.formats.BenchItem.error`, is none); ``traces``: each record's
    bootstrapped quotes and reason (see :func:`traces_of`), a record without one given no quotes.

    Raises:
        ConfigError: A record without a response, or a text that is not valid Unicode (naming
            the file, the record and the field); ``traces`` given, and empty (no example could
            quote).
    """
    if traces is not None and not traces:
        raise ConfigError(f"{where}: no labeled record has a sample that voted its gold label, to quote as an example")
    examples = []
    for it in items:
        if it.error is not None:
            continue
        rec = it.record
        fields = {f: rec[f] for f in _FIELDS if rec.get(f) not in (None, "", [])}
        if isinstance(fields.get("retrieved_contexts"), str):
            fields["retrieved_contexts"] = [fields["retrieved_contexts"]]
        reason = rec.get("reason")
        reason = reason if isinstance(reason, str) and reason.strip() else None
        quotes, traced = (traces or {}).get(str(rec["id"]), (None, None))
        _check_unicode(where, rec, {"id": str(rec["id"]), **fields, "reason": reason})
        try:
            examples.append(
                LabeledExample(
                    id=str(rec["id"]),
                    gold=it.gold,  # type: ignore[arg-type]
                    pair=it.pair or it.group,
                    reason=reason or traced,
                    evidence=quotes,
                    **fields,
                )
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"{where}: record {rec['id']!r}, field {field!r}: {first['msg']}") from None
    return examples


def _check_unicode(where: str | Path, rec: dict[str, Any], fields: dict[str, Any]) -> None:
    """Raise unless every text of a labeled record's example (a field, a context, its reason) is
    valid Unicode: each goes into the profile and, from there, into judges' prompts."""
    for name, value in fields.items():
        for i, text in enumerate(value if isinstance(value, list) else [value]):
            why = not_unicode(text) if isinstance(text, str) else None
            if why is not None:
                field = f"{name}[{i}]" if isinstance(value, list) else name
                raise ConfigError(f"{where}: record {rec['id']!r}, field {field!r}: {why}")


def aligned_judge(
    items: Sequence[BenchItem],
    judge: Metric,
    folds: int | None,
    shots: int = DEFAULT_SHOTS,
    seed: int = 0,
    traces: dict[str, Trace] | None = None,
) -> AlignedCritic:
    """``judge``'s criterion as an aligned metric over these labeled records, each shown
    examples from the other folds only (``folds``: ``None``, every other unit); a judge that
    quotes its evidence is shown the examples with ``traces`` (see :func:`traces_of`).

    Raises:
        ConfigError: ``judge`` is not a criterion (an Aspect Critic); it quotes and no record
            has a trace (see :func:`examples_of`).
    """
    if type(judge) is not AspectCritic:
        raise ConfigError(
            f"metric {judge.name!r} is not a yes/no criterion: label-aligned examples need one (a criterion or an "
            "aspect, judged pointwise)"
        )
    evidence = judge.evidence
    profile = JudgeProfile(
        criterion=ProfileCriterion(name=judge.name, definition=judge.definition),
        verdict_first=judge.verdict_first,
        evidence=evidence,
        shots=shots,
        strictness=judge.strictness,
        examples=examples_of(items, "labels", (traces or {}) if evidence else None),
    )
    return profile.aligned_metric(folds=folds_of(items, folds, seed), name=judge.name + "_aligned")


def add_aligned(
    figures: dict[str, Any],
    rows: list[dict[str, Any]],
    aligned: tuple[dict[str, Any], list[dict[str, Any]]],
    metric: AlignedCritic,
    items: Sequence[BenchItem],
) -> None:
    """Put the aligned judges' figures and predictions beside the zero-shot ones, each under
    its judge's name with :data:`ALIGNED` after it, and each record's demonstrations (ids)."""
    more, more_rows = aligned
    for name, entry in more["judges"].items():
        figures["judges"][name + ALIGNED] = entry
    for row, extra, it in zip(rows, more_rows, items, strict=True):
        row["models"].update({m + ALIGNED: v for m, v in extra["models"].items()})
        if "jury_prediction" in extra:
            row["jury_prediction" + ALIGNED] = extra["jury_prediction"]
        shown = [] if it.error else metric.demonstrations(parse_record(it.record))
        row["demonstrations"] = [d.record.id for d in shown]


def yes_no_heads(
    items: Sequence[BenchItem],
    judge: AspectCritic,
    zero_fits: Sequence[Calibrator],
    aligned_fits: Sequence[Calibrator],
    config: RunConfig,
    folds: int,
    seed: int,
    engine_factory: EngineFactory | None,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """:func:`decision_heads` for a yes/no criterion: each model's heads against its zero-shot
    (and aligned) judging, from the calibration fits of those runs; and each winning head's
    held-out probabilities."""
    zero, aligned = {f.model: f for f in zero_fits}, {f.model: f for f in aligned_fits}
    groups = [unit(it) for it in items]
    return decision_heads(
        config,
        engine_factory,
        lambda model: prompt_ways({"zero-shot": zero.get(model), "aligned": aligned.get(model)}),
        partial(fit_model_heads, judge=judge, items=items, groups=groups, folds=folds, seed=seed),
    )


def build_profile(
    data: str | Path,
    models: Sequence[str | ModelSpec],
    out: str | Path,
    config: AlignConfig | None = None,
    *,
    judge: AspectCritic | Rubric,
    fmt: str = "jsonl",
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    **settings: Any,
) -> JudgeProfile:
    """Build a judge profile from labeled records and write it to ``out`` (YAML). The settings
    (:class:`~localjury.bench.config.AlignConfig`: shots, calibrate, folds, sample, and the
    run's own) are ``config``'s, with ``settings`` replacing them by name.

    Its examples are the labeled records, ``shots`` of them shown per prompt; a ``judge`` that
    quotes its evidence first judges them zero-shot, each example quoting as its first sample
    that voted its gold label did (see :func:`traces_of`; one that none did is kept unquoted,
    and not shown). With
    ``calibrate``, each model judges every labeled record (``judge.strictness`` samples),
    shown examples of the other pairs, groups or inputs only, and a threshold is fitted on
    its graded scores (as ``localjury calibrate`` fits one, with ``folds`` held-out folds
    measuring it); without, no model loads and the profile is scored by votes.

    Labeled pairs (``mode``: ``pairwise``, or under ``auto`` a jsonl file of pairs) build a
    pairwise profile of preference heads instead (:mod:`localjury.bench.align_pairs`); a rubric
    as the ``judge`` and records scored on its scale, a graded profile of graded heads
    (:mod:`localjury.bench.align_graded`).

    Raises:
        ConfigError: Bad labels, a record without a response, fewer than 2 records of a
            label (with ``calibrate``), an output path refused or being written by another process.
    """
    align = (config or AlignConfig()).replace(models=list(models), **settings)
    if isinstance(judge, Rubric):
        if fmt != "jsonl":
            raise ConfigError(f"a rubric is aligned to a jsonl file of scored records (a score field), not {fmt!r}")
        return build_graded_profile(data, models, out, align, rubric=judge, progress=progress,
                                    engine_factory=engine_factory)  # fmt: skip
    if align.mode == "pairwise" or (align.mode == "auto" and fmt == "jsonl" and is_pairwise("auto", fmt, data)):
        return build_preference_profile(data, models, out, align, judge=judge, fmt=fmt, progress=progress,
                                        engine_factory=engine_factory)  # fmt: skip
    out = Path(out)
    if align.run.sampling.strictness not in (None, judge.strictness):
        raise ConfigError(
            f"strictness is the judge's: build it with AspectCritic(..., strictness={align.run.sampling.strictness}) "
            f"(it has {judge.strictness})"
        )
    run_config = align.run.replace(strictness=judge.strictness)
    seed = run_config.sampling.seed
    with OutputSet({"judge profile": out}, align.inputs(data, "labels")) as files:
        items = sample(load(data, fmt, metric=judge.name), align.limit, align.sample_seed)
        check_unique_ids(items, data)
        if refused := next((it.error for it in items if it.error is not None), None):
            # Every labeled record is an example of the profile: none is left out in silence.
            raise ConfigError(f"{refused}; fix or remove the line (a profile's examples are all the labeled records)")
        names = [m if isinstance(m, str) else m.name for m in models]
        traces = zero = None
        no_heads = too_few([int(it.gold) for it in items]) if align.heads else "not asked (--no-heads)"  # type: ignore[arg-type]
        if judge.evidence or no_heads is None:  # the zero-shot judge: quotes to bootstrap, votes to beat
            zero = evaluate([it.record for it in items], [judge], config=run_config, progress=progress,
                            engine_factory=engine_factory, output_set=files)  # fmt: skip
        if judge.evidence and zero is not None:  # each example's quotes, bootstrapped from the zero-shot samples
            traces = traces_of(items, zero, judge.name)
        profile = JudgeProfile(
            localjury_version=__version__,
            criterion=ProfileCriterion(name=judge.name, definition=judge.definition),
            verdict_first=judge.verdict_first,
            evidence=judge.evidence,
            shots=align.shots,
            strictness=judge.strictness,
            models=names,
            labels=str(Path(data).resolve()),
            labels_sha256=file_sha256(Path(data)),
            examples=examples_of(items, data, traces),
        )
        fits: list[Calibrator] = []
        run = None
        if align.calibrate:
            metric = profile.aligned_metric(folds=folds_of(items, None, seed))
            run = evaluate([it.record for it in items], [metric], config=run_config, progress=progress,
                           engine_factory=engine_factory, output_set=files)  # fmt: skip
            fits = [_fit(m.model, items, run, judge.name, data, align.folds, seed) for m in run.summary.models]
        decided: dict[str, Any] = {}
        held_out: dict[str, list[float]] = {}
        if zero is not None and no_heads is None:
            zero_fits = [_fit(m.model, items, zero, judge.name, data, align.folds, seed) for m in zero.summary.models]
            decided, held_out = yes_no_heads(items, judge, zero_fits, fits, run_config, align.folds, seed,
                                             engine_factory)  # fmt: skip
        elif align.heads:
            decided = {"decisions": [{"model": n, "winner": "prompting", "why": no_heads} for n in names]}
        jury = jury_decision(items, names, run, held_out, judge.name, align.folds, seed)
        if jury is not None:
            decided["jury"] = jury.model_dump(mode="json")
        if fits or decided:
            # As the file holds them (held-out CIs as lists), so that the result equals what is read back.
            profile = JudgeProfile.model_validate({**profile.model_dump(mode="json"), **decided, "calibrators":
                                                   [f.model_dump(mode="json") for f in fits]})  # fmt: skip
        files.file(out, profile.dump_yaml())
        files.commit()
    return profile
