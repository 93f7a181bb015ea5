"""Where :func:`evaluate` and :class:`RunResult` lived before the run became the
:mod:`localjury.run` package; kept so that imports from here go on working."""

from localjury.run import EngineFactory, RunConfig, RunResult, evaluate

__all__ = ["EngineFactory", "RunConfig", "RunResult", "evaluate"]
