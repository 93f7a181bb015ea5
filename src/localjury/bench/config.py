"""The settings of a run against labels, one frozen object per command: :class:`BenchConfig`
(``localjury bench``), :class:`CalibrateConfig` (``calibrate``) and :class:`AlignConfig`
(``align``). Each holds the run's own settings (:class:`~localjury.run.config.RunConfig`:
models, seed, registry, store, cluster) beside what it adds, and each field's docstring is its
description and the command line's help for its option (:mod:`localjury.cli._settings`
derives the options from the fields): a new setting is one field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from localjury.errors import ConfigError
from localjury.metrics.aligned import DEFAULT_SHOTS
from localjury.metrics.base import MAX_STRICTNESS
from localjury.models.registry import registry_path
from localjury.run.config import MAX_SEED, RunConfig
from localjury.run.prepare import store_files

#: How a bench judges: pairs in both orders, each response on its own, or as the data suggests.
BenchMode = Literal["auto", "pairwise", "pointwise"]


class _Labelled(BaseModel):
    """What every run against labels has: the sample of the labels it judges, and the run."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True)
    _what = "bench"
    """The command, as error messages name it."""

    limit: int | None = Field(None, ge=1)
    """Judge at most N labelled records (pairs kept whole)."""
    sample_seed: int = Field(0, ge=0, le=MAX_SEED)
    """Seed of the --limit sample."""
    run: RunConfig = RunConfig()
    """The run's settings: models, seed, registry, judgment store, cluster."""

    @classmethod
    def of(cls, **settings: Any) -> Self:
        """A config from settings by keyword name: this class's own fields, and any setting of
        :meth:`RunConfig.of <localjury.run.config.RunConfig.of>` for its run.

        Raises:
            ConfigError: A setting's value is invalid.
            TypeError: An unknown setting.
        """
        return cls().replace(**settings)

    def inputs(self, data: str | Path, what: str) -> dict[str, Path | None]:
        """What the command reads and no output of it may overwrite, by what they are: the
        labelled records (``data``, named ``what``), models.yaml and the judgment store with
        its journals."""
        registry = registry_path(self.run.jury.registry)
        return {what: Path(data), "models.yaml": registry, **store_files(self.run.store.path())}

    def replace(self, **settings: Any) -> Self:
        """This config with some settings replaced, by keyword name (see :meth:`of`).

        Raises:
            ConfigError: A setting's value is invalid.
            TypeError: An unknown setting.
        """
        fields = [name for name in type(self).model_fields if name != "run"]
        own = {k: settings.pop(k) for k in list(settings) if k in fields}
        try:
            run = self.run.replace(**settings) if settings else self.run
        except TypeError as exc:
            raise TypeError(f"{exc}; or one of {self._what}'s: {', '.join(fields)}") from None
        try:
            return type(self).model_validate({**dict(self), **own, "run": run})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e['input']!r})" for e in exc.errors()
            )
            raise ConfigError(f"invalid {self._what} setting: {problems}") from None


class BenchConfig(_Labelled):
    """Every setting of a bench (:func:`localjury.bench.run.run_bench`). Build it with keywords:
    ``BenchConfig.of(metric="coherence", strictness=3, limit=100, models=["qwen2.5-coder-1.5b-instruct"])``."""

    metric: str | None = None
    """What to judge: an aspect, NAME="criterion", faithfulness or factual_accuracy (default: the format's own)."""
    strictness: int = Field(1, ge=1, le=MAX_STRICTNESS)
    """Samples per model."""
    sample_seed: int = Field(0, ge=0, le=MAX_SEED)
    """Seed of the --limit sample, of the bootstrap of the confidence intervals and of --aligned's folds."""
    verdict_first: bool = False
    """Ask for the verdict before the reason (compare with the default)."""
    evidence: bool = False
    """Ask for quoted evidence first, each quote an exact span of the judged text (compare with the default)."""
    mode: BenchMode = "auto"
    """pairwise: judge each pair in both orders (as LLMBar does); pointwise: each response on its own; auto:
    pairwise for sets of pairs (llmbar; jsonl with response_a/response_b)."""
    aligned: int | None = Field(None, ge=2)
    """Also judge each record shown its nearest labeled records (as `run --profile` does) from the other of K
    folds (a pair, or the records of one input, in one fold), reported beside the zero-shot judges."""
    shots: int = Field(DEFAULT_SHOTS, ge=1, le=32)
    """With --aligned: labeled examples per prompt."""
    checklist: list[str] = []
    """Another criterion (an aspect or NAME="criterion"; repeatable) to judge with the bench's, once in one
    checklist call per record and once one call per criterion (each from a temporary store), reporting their
    agreement, κ against the labels and the tokens and seconds saved."""

    def replace(self, **settings: Any) -> Self:
        """As :meth:`_Labelled.replace`; an unknown ``mode`` is named with the modes there are.

        Raises:
            ConfigError: A setting's value is invalid.
            TypeError: An unknown setting.
        """
        mode = settings.get("mode")
        if mode is not None and mode not in get_args(BenchMode):
            raise ConfigError(f"unknown bench mode {mode!r}; expected one of: {', '.join(get_args(BenchMode))}")
        return super().replace(**settings)


class CalibrateConfig(_Labelled):
    """Every setting of a calibration (:func:`localjury.bench.calibrate.calibrate`)."""

    _what = "calibrate"

    metric: str | None = None
    """What the labels judge: an aspect or NAME="criterion" (default: the format's own)."""
    strictness: int = Field(3, ge=1, le=MAX_STRICTNESS)
    """Samples per model."""
    folds: int = Field(5, ge=2)
    """Folds of the held-out evaluation."""


class AlignConfig(_Labelled):
    """Every setting of an alignment (:func:`localjury.bench.align.build_profile`); the judge's
    criterion, strictness and answer shape are its metric's."""

    _what = "align"

    shots: int = Field(DEFAULT_SHOTS, ge=0, le=32)
    """Labeled examples shown per prompt, balanced by label."""
    calibrate: bool = True
    """Fit each model's threshold on its graded scores of the labeled records, measured on held-out folds
    (without: no model loads, the profile is scored by votes)."""
    folds: int = Field(5, ge=2)
    """Folds of the held-out evaluation (unless --no-calibrate), and of the decision heads' cross-validation."""
    heads: bool = True
    """Also fit decision heads on each model's hidden states (transformers and llamacpp engines), and keep one
    where it beats prompting by cross-validated kappa (needs 40 labels, 10 of each)."""
    mode: BenchMode = "auto"
    """pairwise: the labels are preference pairs (gold 1: response_a is the better one), fitted as preference
    heads (needs 20 pairs); pointwise: each record labeled on its own; auto: pairwise for a jsonl file of pairs."""
