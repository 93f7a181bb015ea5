"""Benchmark judge models against human labels: ``localjury bench``.

Needs the ``bench`` extra (scikit-learn, scipy, statsmodels, matplotlib).
"""

from __future__ import annotations

from importlib.util import find_spec

from localjury.errors import MissingDependencyError

NEEDS = ("sklearn", "scipy", "statsmodels", "matplotlib")


def require() -> None:
    """Raise MissingDependencyError naming the extra when a bench dependency is missing."""
    missing = [name for name in NEEDS if find_spec(name) is None]
    if missing:
        raise MissingDependencyError(f"localjury bench needs {', '.join(missing)}: pip install 'localjury[bench]'")
