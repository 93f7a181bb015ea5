import pytest


@pytest.fixture(autouse=True)
def private_judgment_store(tmp_path, monkeypatch):
    """Every test gets its own judgment store: no test is served another run's generations
    (the embedded models stay where $LOCALJURY_HOME has them)."""
    monkeypatch.setenv("LOCALJURY_CACHE", str(tmp_path / "judgments.sqlite"))
