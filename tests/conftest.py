import os

import pytest

# `engine: auto` takes the fixed rule in the tests (subprocesses inherit it): which engine a test
# exercises must not depend on which one measures fastest on the machine that runs it. The
# measured choice has tests of its own (tests/unit/test_engine_choice.py).
os.environ["LOCALJURY_AUTO_ENGINE"] = "rule"


@pytest.fixture(autouse=True)
def private_judgment_store(tmp_path, monkeypatch):
    """Every test gets its own judgment store: no test is served another run's generations
    (the embedded models stay where $LOCALJURY_HOME has them)."""
    monkeypatch.setenv("LOCALJURY_CACHE", str(tmp_path / "judgments.sqlite"))
