"""What a run says of itself: its summary (per metric and per model, what it cost; each
metric's figures summed over its results by :class:`MetricFigures`), the summary file beside
the results, and what a dry run plans (printed as tables by :mod:`localjury.results.tables`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from localjury.results.record_result import RecordResult, StackedDecision

if TYPE_CHECKING:
    from localjury.votes.stacking import StackedJury


class StackedSummary(BaseModel):
    """A judge profile's stacked jury over the run (:mod:`localjury.votes.stacking`): its members'
    probabilities combined by weights ``align`` learned from labels, reported beside the metric's
    mean score, which it does not change."""

    members: list[str]
    """The models it weighs."""
    labels: int
    """The labeled records its weights were learned from."""
    scored: int
    """Records it gave a probability (every member decided)."""
    missing: int
    """Records it gave none: a member abstained or was not in the run."""
    pass_rate: float | None
    """Share of those whose stacked probability is at least 0.5."""
    agreement: float | None
    """Share of those with a jury score too where its verdict is the jury's (score above 0.5)."""


class MetricSummary(BaseModel):
    """Aggregate of one metric over the dataset."""

    metric: str
    kind: str = "judge"
    """``judge`` (one verdict per record), ``composite`` (verdicts per statement),
    ``pairwise`` (a preference between two responses, asked in both orders), ``rubric`` (a
    score on a scale, normalised to 0..1) or ``tool_calls`` (computed from the record, no judge)."""
    definition: str
    """The criterion, or what the metric measures."""
    strictness: int
    tie_break: str
    records: int
    """Records judged (bad records excluded)."""
    scored: int
    """Records with a non-null final score."""
    mean_score: float | None
    """Mean final score over the scored records."""
    pass_rate: float | None
    """Share of scored records whose final score is above 0.5 (a strict jury majority; for
    a pairwise metric, the share where the jury prefers response_a)."""
    position_consistency: float | None = None
    """Pairwise metrics: over every (record, model) with a majority in both orders, the share
    whose two majorities agree once order-corrected; null for other metrics."""
    records_cut: int = 0
    """Records whose conversation had middle turns cut to fit a judge's context
    (``on_overflow="truncate"``; each result's ``turns_cut`` says how many)."""
    turns_cut: int = 0
    """The results' ``turns_cut`` summed: conversation turns cut to fit a judge's context."""
    stacked: StackedSummary | None = Field(None, exclude_if=lambda value: value is None)
    """A judge profile's stacked jury, beside the mean; left out without one."""


@dataclass
class MetricFigures:
    """One metric's figures, summed over its results as a run streams them out."""

    records: int = 0
    scored: int = 0
    total: float = 0.0
    passed: int = 0
    paired: int = 0
    """Pairwise metrics: (record, model) judgments with a majority in both orders."""
    consistent: int = 0
    """Of those, the ones whose two majorities agree once order-corrected."""
    records_cut: int = 0
    """Records whose conversation had turns cut to fit a judge's context."""
    turns_cut: int = 0
    """The turns cut, over those records."""
    stacked: int = 0
    """Records a stacked jury gave a probability."""
    stacked_missing: int = 0
    """Records it gave none (a member abstained or was not in the run)."""
    stacked_passed: int = 0
    stacked_compared: int = 0
    """Of the stacked records, those with a jury score; ``stacked_agreed``: of those, the same verdict."""
    stacked_agreed: int = 0

    def add(self, result: RecordResult, passed: bool | None) -> None:
        """Count one of the metric's results (a record's error counts nowhere); ``passed``:
        whether its score is a pass (:func:`~localjury.votes.voting.passes`)."""
        if result.error is not None:
            return
        self.records += 1
        if result.score is not None:
            self.scored += 1
            self.total += result.score
            self.passed += bool(passed)
        if result.turns_cut:
            self.records_cut += 1
            self.turns_cut += result.turns_cut
        for j in result.models:
            if j.position_consistent is not None:
                self.paired += 1
                self.consistent += j.position_consistent
        if result.stacked is not None:
            self._add_stacked(result.stacked, passed)

    def _add_stacked(self, stacked: StackedDecision, passed: bool | None) -> None:
        if stacked.verdict is None:
            self.stacked_missing += 1
            return
        self.stacked += 1
        self.stacked_passed += stacked.verdict
        if passed is not None:
            self.stacked_compared += 1
            self.stacked_agreed += stacked.verdict == int(passed)

    def summary(
        self, metric: str, kind: str, definition: str, strictness: int, tie_break: str, stack: StackedJury | None = None
    ) -> MetricSummary:
        """The metric's line of the run summary (``stack``: a judge profile's stacked jury)."""
        stacked = None
        if stack is not None:
            stacked = StackedSummary(
                members=stack.members,
                labels=stack.labels,
                scored=self.stacked,
                missing=self.stacked_missing,
                pass_rate=self.stacked_passed / self.stacked if self.stacked else None,
                agreement=self.stacked_agreed / self.stacked_compared if self.stacked_compared else None,
            )
        return MetricSummary(
            metric=metric,
            kind=kind,
            definition=definition,
            strictness=strictness,
            tie_break=tie_break,
            records=self.records,
            scored=self.scored,
            mean_score=self.total / self.scored if self.scored else None,
            pass_rate=self.passed / self.scored if self.scored else None,
            position_consistency=self.consistent / self.paired if self.paired else None,
            records_cut=self.records_cut,
            turns_cut=self.turns_cut,
            stacked=stacked,
        )


class ModelSummary(BaseModel):
    """Aggregate of one judge model over the run."""

    model: str
    path: str
    engine: str
    judgments: int
    """Samples the results are built from (records x metrics x k; statement extraction and
    prompts over the context excluded), generated in this run or found in the store."""
    cached: int = 0
    """Of those, samples found in the judgment store (not generated again)."""
    abstentions: int
    """Samples that did not parse, were cut off, or could not be run."""
    ungrounded: int = 0
    """Samples whose reason cites a number or quotation the record does not hold (under the run's
    ``ungrounded: abstain``, also counted as abstentions)."""
    abstained_verdicts: int
    """(record, metric) pairs where the model gave no verdict or score."""
    pass_rate: float | None
    """Share of this model's verdicts on single-step metrics that are PASS."""
    load_seconds: float
    """Seconds loading the model (a sharded run: the slowest replica's load)."""
    generate_seconds: float
    """Seconds generating (a sharded run: the pool's wall-clock, less the slowest load)."""
    judgments_per_second: float | None
    """Samples generated in this run per second of generation (of all replicas together,
    in a sharded run)."""
    output_tokens: int
    """Output tokens generated in this run."""
    output_tokens_per_second: float | None
    prompt_tokens: int = 0
    """Tokens of the prompts generated in this run, as the engine encoded them: each prompt once
    per engine call (its k samples share it); prompts answered from the judgment store are not
    counted."""
    prompt_tokens_reused: int = 0
    """Of those, tokens the engine did not compute because it reused their KV cache: the prefix
    that every prompt of an engine call shares (instruction, examples), prefilled once by the
    transformers and llamacpp engines; vLLM's prefix-cache hits."""
    samples_saved: int = 0
    """Samples adaptive strictness did not need to draw."""
    replicas: int = 1
    """Engine replicas the model ran on (more than 1 in a sharded run, ``--cluster ray``)."""
    lost_records: int = 0
    """Records this model could not judge because its replica's process died on every try at
    their shard (a sharded run); their results carry the error, a rerun tries them again."""


class Summary(BaseModel):
    """What a run did, for the summary file and the printed table."""

    localjury_version: str
    dataset: str | None
    records: int
    """Records read, bad ones included."""
    record_errors: int
    """Records that could not be judged (each has an error line per criterion)."""
    seed: int
    temperature: float | None
    """CLI/API override of the models' temperature, if any."""
    max_tokens: int | None
    """CLI/API override of the models' max_tokens, if any."""
    metrics: list[MetricSummary]
    models: list[ModelSummary]
    extractor: str | None = None
    """The model that extracted statements for the composite metrics, if any ran."""
    started_at: str
    seconds: float


class ModelEstimate(BaseModel):
    """What a dry run measured of one model on a short sample, and the time it extrapolates."""

    prompts: int
    """Prompts generated for the measurement: the first ones the run would generate."""
    judgments: int
    """Samples they drew."""
    load_seconds: float
    """Seconds loading the model."""
    warmup_seconds: float = 0.0
    """Seconds of a warm-up call before the measurement (one output token of the first prompt,
    not stored): the one-time costs, such as building the schema's constraint index, that the
    run pays once too."""
    generate_seconds: float
    """Seconds generating the sample: its first prompt alone, then the others together."""
    judgments_per_second: float
    """Samples drawn per second of generation, on the sample."""
    output_tokens_per_judgment: float
    """Output tokens per sample, on the sample."""
    batch_seconds: float = 0.0
    """Seconds of an engine batch that do not grow with its prompts, fitted on the sample's two
    calls (a small batch decoding on a CPU costs nearly as much as one prompt)."""
    prompt_seconds: float = 0.0
    """Seconds each prompt of a batch adds (its k samples), fitted on the sample's two calls."""
    seconds: float
    """Estimated seconds of this model's part of the run that follows the dry run: its load and
    warm-up (when anything is left to generate), and its remaining prompts in engine batches of
    its ``batch_size``, each ``batch_seconds + prompt_seconds x prompts``. Verifications that
    await their statement extraction are not in it."""


class ModelPlan(BaseModel):
    """One model's part of a planned run (``localjury run --dry-run``)."""

    model: str
    """The model's name in models.yaml."""
    engine: str
    """The engine it would run on."""
    records: int
    """Records it has prompts for (generated or found in the judgment store)."""
    prompts: int
    """Prompts it would generate: those the judgment store lacks (each once)."""
    judgments: int
    """Samples those prompts draw (k each; under adaptive strictness the first k // 2 + 1)."""
    cached: int
    """Samples already in the judgment store (cache hits): the run reads them, generates none."""
    prompt_tokens: int
    """Tokens of the prompts it would generate, counted with the model's tokenizer."""
    over_context: int = 0
    """Prompts longer than the model's context: each is an error for its record, not generated."""
    awaiting_extraction: int = 0
    """(record, composite metric) pairs whose statement extraction is not in the store yet: their
    verification prompts depend on it and are counted (and estimated) only by a dry run once
    the extractions are stored; none of the counts above holds them."""
    adaptive_more: int = 0
    """Adaptive strictness: at most this many more samples, drawn where the first samples (not
    in the store yet) are not unanimous; not in the counts above."""
    estimate: ModelEstimate | None = None
    """The measured sample and the estimated time (null without an estimate, or with nothing
    to generate)."""


class RunPlan(BaseModel):
    """What ``localjury run --dry-run`` (:func:`localjury.dry_run`) found: the run, planned."""

    dataset: str | None
    """The dataset's path (null for records given in Python)."""
    records: int
    """Records read, bad ones included."""
    record_errors: int
    """Records that could not be judged."""
    store: str | None
    """The judgment store looked up (null: a temporary store, empty)."""
    estimate_prompts: int
    """Prompts per model the estimate generated at most (0: no estimate)."""
    kept: bool = False
    """What the estimate generated is kept in the judgment store: the run that follows reads
    it instead of generating it again."""
    models: list[ModelPlan]
    """Each model's part, in the order the run would run them (the extractor first)."""
    seconds: float | None = None
    """Estimated seconds of the run that follows: the models' estimates, one after another."""


def summary_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.summary.json``."""
    return results_path.with_name(results_path.stem + ".summary.json")
