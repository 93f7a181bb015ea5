"""The jury: the models' specs as the run uses them, checked before anything loads: against the
run's settings, a thinking budget against each model's context, and a decision head against its
model's shape, read from the model's config (a Hugging Face folder's config.json, a GGUF file's
metadata) without loading it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localjury.engines import quotes_refusal, resolve_engine
from localjury.engines._catalog import loads, sample_key
from localjury.engines.server.client import served_model
from localjury.errors import ConfigError
from localjury.metrics.head_critic import DecidedByHeads
from localjury.metrics.protocol import Judging
from localjury.models._shape import model_shape
from localjury.models._tokenizer_files import tokenizer_markers
from localjury.models._trust import check_remote_code
from localjury.models.identity import ModelRecord, record_of
from localjury.models.registry import DEFAULT_MODEL, ModelFiles, ModelSpec, load_registry, registry_path
from localjury.run.config import RunConfig
from localjury.run.context import JuryModel

if TYPE_CHECKING:
    from localjury.run.cluster.session import RaySession

#: The fewest tokens a thinking budget must leave a prompt in a model's context: a judge prompt's
#: instruction alone takes more (a budget that leaves less makes every record an error).
MIN_PROMPT_TOKENS = 64


def resolve_models(
    models: Sequence[str | ModelSpec] | None,
    registry: str | Path | None = None,
    trust_remote_code: Sequence[str] = (),
) -> list[ModelSpec]:
    """The specs of a jury: names looked up in the registry (a model folder's path gives an
    ad-hoc spec), specs taken as they are; no name: the default judge.

    Args:
        models: Model names or specs.
        registry: The models.yaml to read (default: see :mod:`localjury.models.registry`).
        trust_remote_code: The models that may run the Python code shipped with their weights.

    Raises:
        ConfigError: An unknown name; a registry entry with ``trust_remote_code: true`` that
            ``trust_remote_code`` does not name, or a name there that is no such model of
            the jury (see :func:`localjury.models._trust.check_remote_code`).
    """
    reg = None
    specs: list[ModelSpec] = []
    sources: dict[str, str] = {}
    for m in list(models) if models else [DEFAULT_MODEL]:
        if isinstance(m, ModelSpec):
            specs.append(m)
            continue
        reg = reg or load_registry(registry)
        specs.append(reg.get(m))
        sources[specs[-1].name] = reg.source
    check_remote_code(specs, sources, trust_remote_code)
    return specs


def jury_specs(
    judgings: Sequence[Judging], config: RunConfig, specs: Sequence[ModelSpec], session: RaySession | None
) -> list[ModelSpec]:
    """The jury's ``specs``, each with the engine it runs on, checked against the settings.

    Raises:
        ConfigError: A model named twice, sampling at temperature 0 with a
            strictness above 1, an extractor not in the jury, a calibration without a fit
            for a (model, judge metric) of the run, a metric asking for quoted evidence
            of a model whose engine cannot constrain quotes, a thinking budget that leaves a
            prompt no room in its model's context, or a decision head whose weights or layer
            do not fit its model's config.
    """
    jury = config.jury
    seen = [s.name for s in specs]
    if len(set(seen)) != len(seen):
        raise ConfigError(f"a model is named twice in the jury: {', '.join(seen)}")
    if jury.thinking is not None:
        specs = [spec.model_copy(update={"thinking": jury.thinking}) for spec in specs]
    # Before the engines are resolved: `auto` may time each engine on the model (minutes, once).
    for spec in specs:
        _check_thinking(spec, spec.max_tokens if config.sampling.max_tokens is None else config.sampling.max_tokens)
    _check_heads(specs, judgings, jury.engine)
    resolve = session.resolve_engine if session is not None else resolve_engine
    specs = [spec.model_copy(update={"engine": resolve(spec, jury.engine)}) for spec in specs]
    k = max(j.k for j in judgings)
    for spec in specs:
        temp = spec.temperature if config.sampling.temperature is None else config.sampling.temperature
        if temp <= 0 and k > 1:
            raise ConfigError(
                f"model {spec.name!r} samples at temperature {temp}: strictness above 1 needs a temperature "
                "above 0 (set `temperature`, or temperature in models.yaml)"
            )
    if config.sampling.calibration is not None:
        # A judge profile's metric (an AlignedCritic) carries its own fits.
        judged = [j.metric.name for j in judgings if j.kind == "judge" and not j.metric.calibrators]
        config.sampling.calibration.require(seen, judged, "given")
    if jury.extractor is not None and jury.extractor not in seen:
        raise ConfigError(f"extractor {jury.extractor!r} is not in the jury; expected one of: {', '.join(seen)}")
    quoting = [j.metric.name for j in judgings if j.metric.quote_from]
    for spec in specs if quoting else ():
        refusal = quotes_refusal(spec.engine, spec)
        if refusal is not None:
            raise ConfigError(f"model {spec.name!r}, metric {quoting[0]!r}: {refusal}")
    return specs


def _check_thinking(spec: ModelSpec, max_tokens: int) -> None:
    """Refuse a thinking budget that leaves a sample's prompt no room in the model's context:
    every record would be an error ("exceeds its context") after the model loads."""
    if not spec.thinking:
        return
    output = spec.output_tokens(max_tokens)
    if output + MIN_PROMPT_TOKENS > spec.context_length:
        raise ConfigError(
            f"model {spec.name!r}: a thinking budget of {spec.thinking:,} tokens, with max_tokens {max_tokens:,} "
            f"and {output - max_tokens - spec.thinking} for the close, takes {output:,} of its context_length "
            f"{spec.context_length:,} and leaves fewer than {MIN_PROMPT_TOKENS} tokens for a prompt: lower the "
            "thinking budget (--thinking, or thinking in models.yaml) or max_tokens, or raise context_length"
        )


def _check_heads(specs: Sequence[ModelSpec], judgings: Sequence[Judging], engine: str | None) -> None:
    """Refuse a decision head whose weights or layer do not fit its model, read from the
    model's config (config.json, or the GGUF's metadata) without loading it. The files are
    those of the engine the run names (``engine``, else the entry's); for ``auto``, of the
    engine the head was fitted on (another engine is refused by the head's binding)."""
    for judging in judgings:
        metric = judging.metric
        if not isinstance(metric, DecidedByHeads):
            continue
        for spec in specs:
            head = metric.heads.get(spec.name)
            if head is None:
                continue
            named = "server" if spec.is_served else engine or spec.engine
            shape = model_shape(spec, loads(head.binding.engine if named == "auto" else named))
            if shape is not None:
                head.check_shape(shape, model=spec.name, source=metric.head_source)


@dataclass(frozen=True)
class Jury:
    """The jury as a run uses it, resolved once before any record is read."""

    specs: list[ModelSpec]
    """Each model's spec, with the engine it runs on (a model on a server: pinned to the model id
    its judgments are stored under)."""
    models: list[JuryModel]
    extractor: JuryModel | None
    """The model that extracts statements for composite metrics (None without one)."""
    records: list[ModelRecord]
    """Each model as the manifest records it (its files hashed), in the jury's order."""
    files: dict[str, Path | None]
    """The files of the jury no output may overwrite, by what they are: models.yaml and each
    model's folder."""


def resolve_jury(
    judgings: Sequence[Judging],
    config: RunConfig,
    specs: Sequence[ModelSpec],
    session: RaySession | None,
    *,
    require: bool = True,
) -> Jury:
    """The jury as the run uses it, resolved once and in the order of the stages it reads:
    ``specs`` (the registry's, read when the run was settled) checked against the settings and
    each given its engine (:func:`jury_specs`), then each model's files (``require``: there
    and whole, else refused naming the fix; hashed: its identity, or what its server reports)
    and its tokenizer's markers, which record text is kept from (a model on a server has no
    tokenizer files here: the generic chat markers only). ``require=False``: an engine factory
    stands in for the engines.

    Raises:
        ConfigError, ModelNotAvailableError: See :func:`jury_specs`; a model's files missing.
        EngineError: A model's server does not answer.
    """
    specs = jury_specs(judgings, config, specs, session)
    # What each engine loads and adds to its samples' key; what each server serves (a model on
    # a server loads no files).
    kinds = {spec.name: loads(spec.engine) for spec in specs}
    keys = {spec.name: sample_key(spec) for spec in specs}
    served = {spec.name: served_model(spec) for spec in specs if kinds[spec.name] is None}
    # Then each model's files, once, and its tokenizer's markers.
    files: dict[str, Path | None] = {"models.yaml": registry_path(config.jury.registry)}
    markers: dict[str, tuple[str, ...]] = {}
    checked: dict[str, ModelFiles] = {}
    for spec in specs:
        files[f"folder of model {spec.name!r}"] = spec.local_files()
        if spec.is_served:
            markers[spec.name] = ()
            continue
        if require:  # fail before loading anything, naming the fix
            checked[spec.name] = spec.require(kinds[spec.name] or "hf")
        # Read from the checked files: a bare .gguf path's tokenizer is converted by require.
        markers[spec.name] = tuple(tokenizer_markers(checked[spec.name].tokenizer if require else spec.tokenizer_dir()))
    records = [record_of(spec, kinds[spec.name], served.get(spec.name)) for spec in specs]
    pinned = [(rec.pin(spec), spec.output_tokens(0), spec.location) for spec, rec in zip(specs, records, strict=True)]
    sampling = config.sampling
    jury = [
        JuryModel(
            spec=pin,
            identity=rec.sha256 or f"unhashed:{spec.name}:{rec.path}",
            temperature=spec.temperature if sampling.temperature is None else sampling.temperature,
            top_p=spec.top_p,
            max_tokens=spec.max_tokens if sampling.max_tokens is None else sampling.max_tokens,
            engine_key=keys[spec.name],
            markers=markers[spec.name],
            thinking_room=room,
            location=location,
            files=checked.get(spec.name),
        )
        for spec, rec, (pin, room, location) in zip(specs, records, pinned, strict=True)
    ]
    extractor = None
    if any(j.extracts for j in judgings):
        extractor = next(m for m in jury if m.spec.name == (config.jury.extractor or specs[0].name))
    return Jury([m.spec for m in jury], jury, extractor, records, files)
