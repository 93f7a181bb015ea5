import tempfile

import pytest


@pytest.fixture(autouse=True)
def _private_home(private_home):
    """Each unit test gets its own $LOCALJURY_HOME, so no judgment store is shared
    (tests/conftest.py's ``private_home``)."""


@pytest.fixture(autouse=True)
def _private_temp_dir(tmp_path_factory, monkeypatch):
    """Each unit test's temporary files go to its own folder (``tempfile`` in this process,
    ``$TMPDIR`` in the commands it starts): a run without a judgment store that fails keeps its
    temporary one for a resume, as it says, and the tests that make runs fail would otherwise
    leave those in the machine's temporary folder. (Beside ``tmp_path``, whose contents some
    tests list.)"""
    tmp = tmp_path_factory.mktemp("tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
