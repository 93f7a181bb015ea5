"""Judge profiles: a criterion aligned to a user's labels, as one YAML file.

``localjury align`` writes one; ``localjury run --profile FILE`` (``evaluate(profile=...)``)
judges with it. A profile holds the criterion's wording, the labeled records that serve as
per-record demonstrations (see :mod:`localjury.metrics.aligned`), how many are shown and how
they are chosen, the thresholds fitted on the same labels (optional) and the models they were
fitted for. Its hash (the SHA-256 of its content, whatever the YAML's layout) is recorded in
the run's manifest; the demonstrations a prompt shows are part of that prompt, so the
judgment store keys every generation by them. A pairwise profile (``align`` on labeled pairs)
holds preference heads instead of examples (:mod:`localjury.metrics.preference_critic`); a graded
profile (``align --rubric`` on scored records) a rubric's levels and graded heads
(:mod:`localjury.metrics.graded_critic`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from localjury._files import read_yaml
from localjury._hashing import content_hash
from localjury.errors import ConfigError
from localjury.metrics._text_bounds import SpecText, SpecTexts
from localjury.metrics.aligned import DEFAULT_SHOTS, AlignedCritic, Demonstration, Selector, Similarity
from localjury.metrics.base import MAX_STRICTNESS, REASON_MAX_CHARS, Metric
from localjury.metrics.evidence import MAX_QUOTES, QuoteText
from localjury.metrics.graded_critic import EXPECTED, GradedCritic
from localjury.metrics.head_critic import HeadCritic, head_models
from localjury.metrics.preference_critic import PreferenceCritic
from localjury.metrics.rubric import MAX_LEVELS, Rubric
from localjury.records.record import Record
from localjury.votes.calibration import Calibrator
from localjury.votes.decision_report import DecisionReport
from localjury.votes.heads import DecisionHead
from localjury.votes.stacking import JuryDecision


class LabeledExample(BaseModel):
    """One labeled record of the pool: the fields the judge sees, and the gold verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    """The record's id: a record with this id is never shown itself as an example."""
    response: SpecText = Field(min_length=1)
    """The judged output."""
    user_input: SpecText | None = None
    """The prompt or question the response answers."""
    retrieved_contexts: SpecTexts | None = None
    """Passages the system retrieved (together bounded as one text)."""
    reference: SpecText | None = None
    """A reference answer."""
    gold: Literal[0, 1]
    """1 when the response meets the criterion, 0 when it does not."""
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS)
    """Why (optional): shown as the example's reason; without one, a sentence saying a reviewer labeled it."""
    pair: str | None = None
    """The pair or group it belongs to, as the labels gave it."""
    evidence: list[QuoteText] | None = Field(default=None, max_length=MAX_QUOTES)
    """Quotes of the response (each an exact span of it), shown as the example's evidence when
    the profile quotes (``evidence: true``); an empty list says it holds nothing that bears on
    the criterion."""

    @model_validator(mode="after")
    def _quotes_in_response(self) -> LabeledExample:
        for i, quote in enumerate(self.evidence or ()):
            if quote not in self.response:
                raise ValueError(f"evidence[{i}] {quote[:60]!r} is not a span of the response")
        return self

    def demonstration(self) -> Demonstration:
        """The example as the selector takes it."""
        fields = self.model_dump(include={"id", "response", "user_input", "retrieved_contexts", "reference"})
        quotes = None if self.evidence is None else tuple(self.evidence)
        return Demonstration(Record(**fields), self.gold, self.reason, self.pair, quotes)


class ProfileCriterion(BaseModel):
    """The criterion a profile judges."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: SpecText = Field(min_length=1)
    """The metric name written in results."""
    definition: SpecText = Field(min_length=1)
    """The yes/no statement about the response."""


class ProfileRubric(BaseModel):
    """The scale of a graded profile's rubric (``align --rubric``): the criterion is what is graded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    levels: list[SpecText] = Field(min_length=2, max_length=MAX_LEVELS)
    """The description of each level, from 1 up."""
    needs_reference: bool = False
    """A record must carry a reference answer."""
    threshold: float = Field(default=0.5, ge=0, le=1)
    """The normalised score (0..1) a model's score must reach to pass."""

    def metric(self, name: str, criterion: str, **options: Any) -> Rubric:
        """The rubric it describes (``options``: :class:`~localjury.metrics.rubric.Rubric`'s)."""
        return Rubric(name, criterion, self.levels, needs_reference=self.needs_reference, threshold=self.threshold,
                      **options)  # fmt: skip


class JudgeProfile(BaseModel):
    """A judge profile file (YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    version: Literal[1] = 1
    """The file format's version."""
    localjury_version: str = ""
    """The localjury that wrote it."""
    criterion: ProfileCriterion
    """What is judged."""
    verdict_first: bool = False
    """Ask for the verdict before the reason."""
    evidence: bool = False
    """Ask for quoted evidence first (as ``run --evidence``); only the examples that carry their
    own quotes (``evidence``) are shown."""
    shots: int = Field(default=DEFAULT_SHOTS, ge=0, le=32)
    """Demonstrations per prompt, balanced by label."""
    similarity: Similarity = "tfidf-cosine"
    """How the demonstrations are chosen: TF-IDF cosine similarity over user input and response."""
    strictness: int = Field(default=1, ge=1, le=MAX_STRICTNESS)
    """Samples per model (a run's strictness overrides it)."""
    models: list[str] = []
    """The judge models it was fitted for; a run that names none uses these."""
    labels: str = ""
    """The labeled records it was built from."""
    labels_sha256: str = ""
    """Their file's SHA-256."""
    examples: list[LabeledExample] = []
    """The labeled pool."""
    calibrators: list[Calibrator] = []
    """Thresholds fitted on the labels with the demonstrations, one per model; none: scored by votes."""
    decisions: list[DecisionReport] = []
    """Per model, every way of deciding that ``align`` compared by cross-validation, and the winner."""
    heads: list[DecisionHead] = []
    """The decision heads that won, at most one per model: those models decide by their head
    (:mod:`~localjury.metrics.head_critic`), the others by prompting."""
    jury: JuryDecision | None = Field(default=None, exclude_if=lambda value: value is None)
    """How the models' judgments are best combined, where ``align`` compared it (a yes/no profile of
    two models or more): the mean a run takes, or a stacked jury learned from the labels, which a run
    reports beside each record's score (:mod:`~localjury.votes.stacking`). Left out otherwise."""
    rubric: ProfileRubric | None = Field(default=None, exclude_if=lambda value: value is None)
    """A graded profile (``align --rubric`` on scored records): the criterion is a rubric's, graded on
    these levels; its heads are graded heads (:mod:`~localjury.metrics.graded_critic`), and it holds
    no examples and no thresholds. Left out for a yes/no or pairwise criterion."""
    pairwise: bool = Field(default=False, exclude_if=lambda value: not value)
    """The criterion compares two responses (``align`` on preference pairs): its heads are
    preference heads (:mod:`~localjury.metrics.preference_critic`), and it holds no examples and no
    thresholds. Left out for a yes/no criterion."""

    @field_validator("examples")
    @classmethod
    def _unique_ids(cls, value: list[LabeledExample]) -> list[LabeledExample]:
        counts = Counter(e.id for e in value)
        dupes = sorted(i for i, n in counts.items() if n > 1)
        if dupes:
            raise ValueError(f"example ids must be unique; repeated: {', '.join(dupes[:5])}")
        return value

    @model_validator(mode="after")
    def _heads(self) -> JudgeProfile:
        models = [h.binding.model for h in self.heads]
        if len(set(models)) < len(models):
            raise ValueError(f"one decision head per model; {models} has a model twice")
        wrong = [h.binding.criterion for h in self.heads if h.binding.criterion != self.bound_to]
        if wrong:
            raise ValueError(f"a decision head was fitted for another criterion: {wrong[0][:60]!r}")
        levels = len(self.rubric.levels) if self.rubric is not None else None
        if self.pairwise and levels:
            raise ValueError("a profile is pairwise or graded (a rubric), not both")
        profile, kind = ("graded", "graded heads") if levels else ("pairwise", "preference heads") if self.pairwise \
            else ("yes/no", "yes/no heads")  # fmt: skip
        if any(h.preference != self.pairwise or h.levels != levels for h in self.heads):
            raise ValueError(f"a {profile} profile holds {kind} only" + (f" (of {levels} levels)" if levels else ""))
        if (self.pairwise or levels) and (self.examples or self.calibrators or self.jury):
            raise ValueError(f"a {profile} profile holds its {kind}, no examples, calibrators or jury")
        stack = self.jury.stack if self.jury is not None else None
        if stack is not None and not set(stack.members) <= set(self.models):
            raise ValueError(f"the stacked jury's members {stack.members} are not all the profile's models")
        return self

    @property
    def bound_to(self) -> str:
        """The wording its heads are bound to: the criterion's, or a graded profile's rubric as the
        judge reads it (the criterion and its levels)."""
        if self.rubric is None:
            return self.criterion.definition
        return self.rubric.metric(self.criterion.name, self.criterion.definition).rubric_text()

    @model_validator(mode="after")
    def _quoting(self) -> JudgeProfile:
        if self.evidence and self.verdict_first:
            raise ValueError("evidence is quoted before the verdict, not with verdict_first")
        if self.evidence and self.examples and all(e.evidence is None for e in self.examples):
            raise ValueError("evidence: true, but no example carries its quotes (examples[].evidence)")
        return self

    def sha256(self) -> str:
        """The profile's hash: of its content, not of its file's layout."""
        return content_hash(profile=self.model_dump(mode="json"))

    def metric(
        self,
        *,
        strictness: int | None = None,
        path: str | Path | None = None,
        folds: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> AlignedCritic | PreferenceCritic | GradedCritic:
        """The metric that judges with this profile (``strictness`` overrides the profile's;
        ``path``: the file it was read from, for the manifest; ``folds``: record id -> fold, a
        record shown examples of other folds only; ``name``: another metric name than the
        criterion's). A yes/no profile gives :meth:`aligned_metric`; a pairwise profile a
        :class:`~localjury.metrics.preference_critic.PreferenceCritic`: its models decide by their
        preference heads, the others by the pairwise question in both orders; a graded profile a
        :class:`~localjury.metrics.graded_critic.GradedCritic`: its models decide by their graded
        heads, the others by the rubric's prompt."""
        if self.rubric is not None:
            rubric = self.rubric.metric(name or self.criterion.name, self.criterion.definition)
            expected = [d.model for d in self.decisions if d.winner == EXPECTED]
            return GradedCritic(rubric.name, rubric.criterion, rubric.levels, heads=head_models(self.heads),
                                expected=expected, profile=self._described(path),
                                strictness=strictness or self.strictness, needs_reference=rubric.needs_reference,
                                threshold=rubric.threshold)  # fmt: skip
        if not self.pairwise:
            return self.aligned_metric(strictness=strictness, path=path, folds=folds, name=name)
        return PreferenceCritic(name or self.criterion.name, self.criterion.definition, heads=head_models(self.heads),
                                profile=self._described(path), strictness=strictness or self.strictness)  # fmt: skip

    def aligned_metric(
        self,
        *,
        strictness: int | None = None,
        path: str | Path | None = None,
        folds: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> AlignedCritic:
        """A yes/no profile's metric (the arguments are :meth:`metric`'s): an
        :class:`~localjury.metrics.aligned.AlignedCritic` shown the profile's examples; with
        decision heads, a :class:`~localjury.metrics.head_critic.HeadCritic`: its models decide
        by their heads."""
        name = name or self.criterion.name
        critic: Any = AlignedCritic
        if self.heads:
            critic = partial(HeadCritic, heads=head_models(self.heads))
        return critic(  # type: ignore[no-any-return]
            name,
            self.criterion.definition,
            selector=Selector([e.demonstration() for e in self.examples], self.shots, folds=folds),
            calibrators=[c.model_copy(update={"metric": name}) for c in self.calibrators],
            stack=self.jury.stack if self.jury is not None else None,
            profile={**self._described(path), "examples": len(self.examples), "shots": self.shots},
            strictness=strictness or self.strictness,
            verdict_first=self.verdict_first,
            evidence=self.evidence,
        )

    def _described(self, path: str | Path | None) -> dict[str, Any]:
        """The profile as a run's manifest records it: its file, where it was read from one, and hash."""
        return {**({"path": str(path)} if path is not None else {}), "sha256": self.sha256()}

    def dump_yaml(self) -> str:
        """The profile as its YAML file holds it."""
        return yaml.safe_dump(self.model_dump(mode="json", exclude_none=True), sort_keys=False, allow_unicode=True)


def load_profile(path: str | Path) -> JudgeProfile:
    """Read and check a judge profile file.

    Raises:
        ConfigError: The file is missing, unreadable, not YAML, or does not fit the format
            (naming the file and the field, e.g. ``examples.3.gold``).
    """
    data: Any = read_yaml(Path(path), "judge profile")
    if not isinstance(data, dict):
        raise ConfigError(f"judge profile {path}: expected a mapping (version, criterion, examples, ...)")
    try:
        return JudgeProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"judge profile {path}: {where}: {first['msg']}") from None


def with_profile(
    profile: str | Path | JudgeProfile, metrics: Sequence[Metric], inputs: Mapping[str, str | Path] | None
) -> tuple[list[Metric], dict[str, str | Path], list[str]]:
    """A run's metrics with the profile's added, its inputs with the profile's file (no
    output may overwrite it), and the profile's models.

    Raises:
        ConfigError: See :func:`load_profile`.
    """
    path = None if isinstance(profile, JudgeProfile) else Path(profile)
    loaded = profile if isinstance(profile, JudgeProfile) else load_profile(profile)
    files = dict(inputs or {})
    if path is not None:
        files["judge profile"] = path
    return [*metrics, loaded.metric(path=path)], files, list(loaded.models)
