import pytest


@pytest.fixture(autouse=True)
def _private_home(private_home):
    """Each unit test gets its own $LOCALJURY_HOME, so no judgment store is shared
    (tests/conftest.py's ``private_home``)."""
