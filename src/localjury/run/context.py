"""The run itself, as every stage sees it: settings, metrics and how each is judged, the jury,
the store, and what the passes counted."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from localjury.engines._catalog import split_update
from localjury.metrics.base import Metric
from localjury.metrics.judging import Judging
from localjury.models.registry import ModelSpec
from localjury.run.config import RunConfig
from localjury.run.state import EngineFactory, JuryModel, ModelStats
from localjury.store import GenerationStore

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.run.cluster.session import RaySession


@dataclass
class Run:
    """One evaluate() call: the settings, the jury, the store, and what the passes counted."""

    config: RunConfig
    judgings: list[Judging]
    """How each metric is judged, in the metrics' order (built once per run:
    :func:`~localjury.run.prepare.check_metrics`)."""
    models: list[JuryModel]
    extractor: JuryModel | None
    """The model that extracts statements for composite metrics (None without one)."""
    store: GenerationStore
    factory: EngineFactory
    progress: Progress | None = None
    cluster: RaySession | None = None
    stats: dict[str, ModelStats] = field(init=False)
    lost: dict[tuple[str, str], str] = field(default_factory=dict)
    """(model, record id) -> why that model has nothing for the record: its shard was lost
    on the cluster (kept out of the store, so that a rerun tries again)."""

    def __post_init__(self) -> None:
        self.stats = {m.spec.name: ModelStats(m.spec) for m in self.models}

    @property
    def metrics(self) -> list[Metric]:
        """The metrics judged, in order."""
        return [j.metric for j in self.judgings]

    @property
    def seed(self) -> int:
        return self.config.sampling.seed

    def missing(self, model: str, record_id: str) -> str:
        """Why ``model`` has no generation for the record."""
        return self.lost.get((model, record_id), f"no generation by {model!r} in the judgment store")

    def portable(self, store: GenerationStore, split: bool = False) -> Run:
        """A copy of this run to send to a replica of a sharded run: with ``store`` in place
        of the driver's, without the progress display and the cluster (the driver keeps
        those), and with each model's folder as an absolute path (a replica's
        ``$LOCALJURY_HOME`` may differ). ``split``: the replicas split their model over
        several GPUs, with the settings its engine needs for that
        (:func:`~localjury.engines._catalog.split_update`: vLLM's Ray executor, unless models.yaml
        names another)."""

        def pinned_spec(spec: ModelSpec) -> ModelSpec:
            folder = spec.local_files()
            update: dict[str, Any] = {"path": str(folder.absolute()), "embedded": None} if folder else {}
            if split:
                update |= split_update(spec)
            return spec.model_copy(update=update)

        pinned = {m.spec.name: replace(m, spec=pinned_spec(m.spec)) for m in self.models}
        extractor = pinned[self.extractor.spec.name] if self.extractor is not None else None
        return Run(self.config, self.judgings, list(pinned.values()), extractor, store, self.factory)
