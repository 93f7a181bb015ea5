"""A run, one stage per module: settings (:mod:`.config`), requests (:mod:`.plan`, each
metric's judging, :mod:`localjury.metrics.judging`), model passes (:mod:`.generate`;
:mod:`.sharded` on Ray), results (:mod:`.assemble`), summary (:mod:`.summary`), and
:func:`evaluate` (:mod:`.pipeline`), which runs them in order; :func:`dry_run` (:mod:`.dry`)
plans a run without running it."""

from localjury.run.config import RunConfig
from localjury.run.dry import dry_run
from localjury.run.pipeline import evaluate
from localjury.run.result import RunResult
from localjury.run.state import EngineFactory

__all__ = ["EngineFactory", "RunConfig", "RunResult", "dry_run", "evaluate"]
