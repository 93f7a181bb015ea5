"""No network at run time: the real default judge in a network namespace with no interface
(``unshare -n``), or with every socket call refused where the machine allows no namespace."""

import shutil
import subprocess
import sys

import pytest

from tests.cli_process import cli, finish, rows

# a namespace
pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.usefixtures("engines_loaded_once")]


def test_the_network_guard_catches_a_connection():
    code, _, err = finish(cli("--probe", guarded=True))
    assert code != 0 and "tried to open a network connection" in err


def test_a_run_needs_no_network(default_judge, tmp_path):
    """The default judge (a GGUF on the llamacpp engine) loads and judges with no network: in a
    network namespace with no interface at all where the machine allows one, else with every
    socket call refused in the process (the guard itself: the test above)."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "user_input": "When?", "response": "In 1989."}\n')
    out = tmp_path / "r.jsonl"
    args = ["run", str(data), "--aspect", "coherence", "--no-cache", "--quiet", "--out", str(out)]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        proc = subprocess.run(
            ["unshare", "-n", sys.executable, "-m", "localjury.cli", *args], capture_output=True, text=True, timeout=900
        )
        code, err = proc.returncode, proc.stderr
    else:
        code, _, err = finish(cli(*args, guarded=True))
    assert code == 0, err
    (row,) = rows(out)
    assert row["error"] is None and row["models"][0]["votes"][0] in (0, 1, None)
