import pytest


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    """Each unit test gets its own $LOCALJURY_HOME, so no judgment store is shared."""
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
