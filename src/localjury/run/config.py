"""Every setting of a run in one frozen object, :class:`RunConfig`, grouped by what it governs.

:func:`localjury.evaluate`, the CLI and ``localjury bench`` build one, the manifest records
it and the replicas of a sharded run receive it. A setting's bounds are its field's
constraints (``Field(ge=1)``, read by the command line too), its other checks its validators, so
a bad value fails when the config is built, before any model loads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError

from localjury._files import localjury_home
from localjury._setting_bounds import Bounded, one_of, read_from
from localjury.errors import ConfigError
from localjury.metrics.base import MAX_STRICTNESS
from localjury.models.registry import ModelSpec
from localjury.run.cluster import RayCluster
from localjury.types import (
    OVERFLOW_POLICIES,
    SCORINGS,
    TIE_BREAKS,
    UNGROUNDED,
    OverflowPolicy,
    Scoring,
    Thinking,
    TieBreak,
    Ungrounded,
)
from localjury.votes.calibration import CalibrationFile, read_calibration

#: Records per chunk: one engine call per chunk per model, one commit to the store.
DEFAULT_CHUNK_SIZE = 1024
#: The largest seed: seeds are from 0 to 2**32 - 1, the range NumPy and scikit-learn take
#: (``localjury calibrate`` shuffles its folds with the judging seed).
MAX_SEED = 2**32 - 1


def default_cache_path() -> Path:
    """``$LOCALJURY_CACHE``, else ``$LOCALJURY_HOME/cache/judgments.sqlite``: shared by every
    run on this machine."""
    if env := os.environ.get("LOCALJURY_CACHE"):
        return Path(env).expanduser()
    return localjury_home() / "cache" / "judgments.sqlite"


class _Group(Bounded):
    """A group of settings. Each field's docstring is its description, and the command line's
    help for its option (:mod:`localjury.cli._settings` derives the options from the fields):
    written once, here, in words that read in both places; so are its bounds, the field's
    constraints."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True)


class SamplingConfig(_Group):
    """How each model samples its judgments and how the samples are voted."""

    seed: int = Field(0, ge=0, le=MAX_SEED)
    """Run seed (0 to 2**32-1): the same command and seed give identical results."""
    strictness: int | None = Field(None, ge=1, le=MAX_STRICTNESS)
    """Samples per model for each judgment (1-64); majority vote. Default: each metric's own (1 unless a
    criteria file says otherwise)."""
    tie_break: Annotated[TieBreak | None, BeforeValidator(one_of("tie-break policy", TIE_BREAKS, optional=True))] = None
    """What an even split of valid votes gives: fail, pass, or abstain (pairwise: response_b, response_a,
    or no preference). Default: each metric's own (fail; for pairwise metrics no preference)."""
    temperature: float | None = Field(None, ge=0.0, allow_inf_nan=False)
    """The models' sampling temperature, a finite number >= 0 (default: each models.yaml entry's)."""
    max_tokens: int | None = Field(None, ge=1)
    """The models' output token budget per sample (default: each models.yaml entry's)."""
    adaptive: bool = False
    """Adaptive strictness: draw k//2+1 samples first, the rest only where those disagree. Same verdicts,
    fewer samples."""
    checklist: bool = False
    """Judge the aspects and criteria together, one verdict each in one JSON object, in one call per record
    and model instead of one call each; each keeps its own results (verdict-first critics: one call each)."""
    scoring: Annotated[Scoring, BeforeValidator(one_of("scoring", SCORINGS))] = "votes"
    """votes: a model's verdict is the majority of its votes, its score 1 or 0. probability: its score is
    its confidence, the mean verdict probability p_pass of its valid samples, and its verdict that above
    the threshold (a model whose engine gives no probabilities is scored by votes)."""
    threshold: float = Field(0.5, ge=0, lt=1)
    """Under probability scoring: the confidence (p_pass) a pass must exceed."""
    calibration: Annotated[CalibrationFile | None, BeforeValidator(read_from(read_calibration))] = None
    """A calibration file from `localjury calibrate` (its path): each model's score of a criterion is its
    calibrated score, its verdict that score above the fitted threshold; every (model, criterion) of the
    run needs a fit."""
    with_reasons: bool = False
    """A model that decides by a judge profile's decision head also draws its usual samples: their votes
    and reasons are reported beside the head's decision (results' head.votes, head.reasons), never counted
    in it."""
    ungrounded: Annotated[Ungrounded, BeforeValidator(one_of("ungrounded policy", UNGROUNDED))] = "flag"
    """A sample whose reason cites a number or a quotation the record does not hold (a criterion judged on
    its own): flag (its vote stands; results list what it cited under models[].ungrounded, the summary
    counts it) or abstain (the sample abstains, saying what it cited)."""


class StoreConfig(_Group):
    """The judgment store: what is in it is not generated again (also how a run resumes)."""

    cache: Path | None = None
    """Judgment store (SQLite); what it holds is not generated again, so a killed run resumes. Default:
    $LOCALJURY_CACHE, else $LOCALJURY_HOME/cache/judgments.sqlite."""
    use_cache: bool = True
    """Reuse and keep judgments in the judgment store; off: a temporary store for this run only (no reuse,
    no resume)."""
    fresh: bool = False
    """Start over: generate everything again, replacing what the store holds."""

    def path(self) -> Path | None:
        """The store's file, or None for a temporary store."""
        if not self.use_cache:
            return None
        return self.cache if self.cache is not None else default_cache_path()


class InputConfig(_Group):
    """How the records are read and fitted to the models."""

    strict_input: bool = False
    """Stop at the first bad record instead of reporting it and going on."""
    on_overflow: Annotated[OverflowPolicy, BeforeValidator(one_of("overflow policy", OVERFLOW_POLICIES))] = "error"
    """A prompt longer than a model's context: error (that model's judgment of the record is an error) or
    truncate (cut a conversation's middle turns, then the retrieved contexts, marking each cut, until it
    fits; results say how many turns were cut)."""
    chunk_size: int = Field(DEFAULT_CHUNK_SIZE, ge=1)
    """Records per chunk: one engine call and one store commit per chunk."""


class JuryConfig(_Group):
    """Which models judge, on which engine."""

    models: list[str | ModelSpec] | None = None
    """The judge models: names from models.yaml, model folders or .gguf files (in Python also specs).
    Default: qwen2.5-coder-1.5b-instruct."""
    registry: Path | None = None
    """The models.yaml to use (default: $LOCALJURY_MODELS, else $LOCALJURY_HOME/models.yaml, else the
    packaged one; a models.yaml in the working directory is read only when named here). Only a registry
    named here may redefine a packaged model's name."""
    engine: str | None = None
    """vllm, transformers or llamacpp for every model (default: each models.yaml entry's engine; auto: vLLM
    where a CUDA device and vLLM are present, else llamacpp for a .gguf path, else transformers); an entry
    with base_url always runs on its server."""
    thinking: Thinking = Field(None, ge=0)
    """Tokens each sample of every model may think in a <think> block before its answer, or off (0) to
    switch thinking off in a chat template that has the switch (Qwen3); default: each models.yaml
    entry's thinking."""

    extractor: str | None = None
    """The jury model that extracts statements for composite metrics (default: the first model)."""
    trust_remote_code: list[str] = Field(default_factory=list)
    """Models that may run the Python code shipped with their weights: each a model of the run whose
    models.yaml entry says trust_remote_code: true. Such an entry not named here is refused before
    anything loads (in Python a spec given as an object is taken as it is)."""


#: The group of each setting, by its keyword name.
GROUPS: dict[str, type[_Group]] = {
    "sampling": SamplingConfig,
    "store": StoreConfig,
    "input": InputConfig,
    "jury": JuryConfig,
}
_GROUP_OF = {field: group for group, cls in GROUPS.items() for field in cls.model_fields}
#: Settings the manifest records elsewhere (seed, models, cache; thinking in each model's
#: settings) or that do not change a result (where the store is, whether it is reused, how bad
#: input is reported, which models may run their own code: a run without that leave stops
#: before it starts).
_NOT_IN_MANIFEST = {
    "seed",
    "models",
    "registry",
    "trust_remote_code",
    "cache",
    "use_cache",
    "fresh",
    "strict_input",
    "thinking",
}


class RunConfig(_Group):
    """Every setting of one run. Build it with keywords (``RunConfig.of(strictness=3)``)
    or by group (``RunConfig(sampling=SamplingConfig(strictness=3))``)."""

    sampling: SamplingConfig = SamplingConfig()
    """Seed, strictness, tie-break, temperature, token budget, adaptive strictness."""
    store: StoreConfig = StoreConfig()
    """The judgment store."""
    input: InputConfig = InputConfig()
    """Reading and fitting the records."""
    jury: JuryConfig = JuryConfig()
    """The models and their engine."""
    cluster: RayCluster | None = None
    """Shard each model's pass over engine replicas on Ray (see :class:`localjury.RayCluster`)."""

    @classmethod
    def of(cls, **settings: Any) -> RunConfig:
        """A config from settings by keyword name (``seed``, ``strictness``, ``cache``...).

        Raises:
            ConfigError: A setting's value is invalid.
            TypeError: An unknown setting.
        """
        return cls().replace(**settings)

    def replace(self, **settings: Any) -> RunConfig:
        """This config with some settings replaced, by keyword name.

        Raises:
            ConfigError: A setting's value is invalid.
            TypeError: An unknown setting.
        """
        by_group: dict[str, dict[str, Any]] = {}
        update: dict[str, Any] = {}
        for name, value in settings.items():
            if name == "cluster":
                update["cluster"] = value
            elif name in _GROUP_OF:
                by_group.setdefault(_GROUP_OF[name], {})[name] = value
            else:
                raise TypeError(f"unknown run setting {name!r}; expected one of: {', '.join(self.flat())}")
        try:
            for group, values in by_group.items():
                current = getattr(self, group)
                update[group] = type(current).model_validate({**dict(current), **values})
            return type(self).model_validate({**dict(self), **update})
        except ValidationError as exc:
            raise ConfigError(f"invalid run setting: {exc}") from None

    def flat(self) -> dict[str, Any]:
        """Every setting by keyword name, as :meth:`of` takes them."""
        out: dict[str, Any] = {}
        for group in GROUPS:
            out.update(dict(getattr(self, group)))
        out["cluster"] = self.cluster
        return out

    def manifest_settings(self, extractor: str | None) -> dict[str, Any]:
        """The run-wide settings as the manifest records them, with the extractor the run
        used (the first model when none was named)."""
        settings = {k: v for k, v in self.flat().items() if k not in _NOT_IN_MANIFEST}
        if not self.sampling.with_reasons:  # recorded where it is asked (manifests without it stay as they were)
            del settings["with_reasons"]
        if self.sampling.ungrounded == "flag":  # the same: recorded where it is not the default
            del settings["ungrounded"]
        settings["extractor"] = extractor
        if self.sampling.calibration is not None:
            cal = self.sampling.calibration
            settings["calibration"] = [
                {"model": c.model, "metric": c.metric, "labels": c.labels, "labels_sha256": c.labels_sha256}
                for c in cal.calibrators
            ]
        dumped = self.model_dump(mode="json", include={"cluster"})["cluster"]
        settings["cluster"] = None if dumped is None else {"backend": "ray", **dumped}
        return settings
