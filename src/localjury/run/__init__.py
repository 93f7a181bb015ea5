"""A run, one object whose stages are modules: settings (:mod:`.config`), the metrics settled
and everything checked before any model loads (:mod:`.prepare`, the jury: :mod:`.jury`),
requests (:mod:`.plan`, each metric's judging, :mod:`localjury.metrics.judging`), the passes
(:mod:`.generate`; :mod:`.cluster.sharded` on Ray), results (:mod:`.assemble`), summary,
manifest and files (:mod:`.result`); the run's values are in :mod:`.context`. :func:`evaluate`
(:mod:`.pipeline`, its :class:`~localjury.run.pipeline.Run`) runs them in order;
:func:`dry_run` (:mod:`.dry`) makes the same passes with an engine that answers nothing."""

from localjury.run.config import RunConfig
from localjury.run.context import EngineFactory
from localjury.run.dry import dry_run
from localjury.run.pipeline import evaluate
from localjury.run.result import RunResult

__all__ = ["EngineFactory", "RunConfig", "RunResult", "dry_run", "evaluate"]
