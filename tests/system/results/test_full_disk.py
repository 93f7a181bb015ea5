"""A disk that fills up while a run writes its results (a 64 KiB tmpfs in a mount namespace):
the previous results, summary and manifest stay whole, no temporary file is left, and the
error says the judgments are kept in the store (the write failure itself, without a namespace:
tests/unit/results/test_outputs.py)."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tests import ROOT
from tests.fakes import run_args

# a mount namespace
pytestmark = [pytest.mark.system, pytest.mark.usefixtures("private_home")]


def unshare_mount_works():
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


FULL_DISK = """
import json, sys
sys.path.insert(0, {root!r})
from tests.fakes import factory, judgment
import localjury.run.generate
localjury.run.generate.load_engine = factory(lambda m, p, j: judgment(1, "x" * 150), [])
from localjury.cli import main
main()
"""


@pytest.mark.skipif(not unshare_mount_works(), reason="needs root and mount namespaces (unshare -m) for a small tmpfs")
def test_a_full_disk_leaves_the_previous_files_whole_and_keeps_the_judgments(tmp_path, fake_model):
    registry, _ = fake_model
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({"id": f"r{i}", "response": f"answer {i}"}) + "\n" for i in range(200)))
    disk, cache = tmp_path / "disk", tmp_path / "c.sqlite"
    disk.mkdir()
    program = tmp_path / "full_disk.py"
    program.write_text(FULL_DISK.format(root=str(ROOT)))
    args = run_args(big, registry, disk / "r.jsonl", "--cache", cache)
    # A 64 KiB disk: the old results fit (written first, small), the new ones (200 records) do not.
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {disk} && "
        f"printf 'old\\n' > {disk}/r.jsonl && printf 'old\\n' > {disk}/r.summary.json && "
        f"printf 'old\\n' > {disk}/r.manifest.json && "
        f'{sys.executable} {program} {shlex.join(map(str, args))}; echo "exit=$?"; ls -a {disk}; cat {disk}/r.jsonl'
    )
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    listing = proc.stdout.split()
    assert "exit=1" in listing, proc.stdout + proc.stderr
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
    assert "judgments generated before this are kept in the judgment store" in proc.stderr
    assert sorted(n for n in listing if n.startswith("r.")) == ["r.jsonl", "r.manifest.json", "r.summary.json"]
    assert not [n for n in listing if n.endswith(".tmp")]  # no temporary file left
    assert listing[-1] == "old"  # the previous results, whole
