"""Engines by name. A backend is imported only when asked for.

Adding an engine: one module under ``localjury.engines`` and one line in ``_ENGINES``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from localjury.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from localjury.engines.base import Engine
    from localjury.registry import ModelSpec

#: name -> (module, class, what to install when its imports are missing)
_ENGINES: dict[str, tuple[str, str, str]] = {
    "transformers": (
        "localjury.engines.transformers",
        "TransformersEngine",
        "pip install localjury  (torch, transformers and outlines are core dependencies)",
    ),
}


def engine_names() -> list[str]:
    """Names of the engines localjury knows."""
    return list(_ENGINES)


def load_engine(spec: ModelSpec, engine: str | None = None) -> Engine:
    """Load ``spec``'s model into the named engine (default: the one models.yaml names).

    Raises:
        ConfigError: Unknown engine name.
        MissingDependencyError: The engine's packages are not installed.
    """
    name = engine or spec.engine
    if name not in _ENGINES:
        raise ConfigError(f"unknown engine {name!r} for model {spec.name!r}; expected one of: {', '.join(_ENGINES)}")
    module_name, cls_name, install = _ENGINES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingDependencyError(f"the {name} engine needs {exc.name!r}: {install}") from exc
    cls = getattr(module, cls_name)
    return cls(spec)  # type: ignore[no-any-return]
