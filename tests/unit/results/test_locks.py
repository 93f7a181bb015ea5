"""Lock files and leftovers beside the outputs are localjury's only when they are its own: a lock
file planted as a link, a FIFO, another file's hard link or a file with other content is
refused (exit 2, naming it and the fix) and left as it is; links and non-regular files under
our temporary names are not removed."""

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.fakes import run_args, run_cli


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "response": f"answer {i}"}) + "\n" for i in range(3)))
    return path


def lock_of(path):
    return path.with_name(f".{path.name}.localjury.lock")


def plant_lock(case, tmp_path, data, victim):
    out = tmp_path / "o" / "r.jsonl"
    out.parent.mkdir()
    results, summary = lock_of(out), lock_of(out.with_name("r.summary.json"))
    if case == "links to a victim and to the dataset":  # the issue's: both were overwritten
        results.symlink_to("../victim.txt")
        summary.symlink_to(data)
        return out, results, "is a symbolic link"
    if case == "a hard link of the dataset":
        os.link(data, results)
        return out, results, "has 1 other hard link(s)"
    if case == "a file with other content":
        results.write_text("my notes\n")
        return out, results, "holds something other than the `pid N on host` line of a lock"
    if case == "a FIFO":
        os.mkfifo(results)
        return out, results, "is not a regular file"
    if case == "a folder":
        results.mkdir()
        return out, results, "is not a regular file"
    raise AssertionError(case)


LOCK_CASES = ["links to a victim and to the dataset", "a hard link of the dataset", "a file with other content",
              "a FIFO", "a folder"]  # fmt: skip


@pytest.mark.parametrize("case", LOCK_CASES)
def test_a_lock_file_that_is_not_ours_is_refused_and_left_as_it_is(
    tmp_path, data, fake_model, monkeypatch, capsys, case
):
    registry, log = fake_model
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    out, lock, problem = plant_lock(case, tmp_path, data, victim)
    before = {p: p.read_bytes() for p in (victim, data)}
    kind = stat.S_IFMT(os.lstat(lock).st_mode)
    code, _, err = run_cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    err = " ".join(err.split())
    assert code == 2, err
    assert f"the lock file {lock} of the results file {out} {problem}" in err, err
    assert f"remove {lock.name}" in err and "Traceback" not in err
    assert log == []  # refused before any model loaded
    assert {p: p.read_bytes() for p in before} == before
    assert stat.S_IFMT(os.lstat(lock).st_mode) == kind  # left in place
    assert not out.exists()


def test_a_lock_file_left_by_a_killed_run_is_taken_over(tmp_path, data, fake_model, monkeypatch, capsys):
    registry, _ = fake_model
    out = tmp_path / "r.jsonl"
    lock_of(out).write_text("pid 999999 on elsewhere\n")  # not locked: its holder is gone
    code, _, err = run_cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    assert code == 0, err
    assert not lock_of(out).exists()


def dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)


def test_links_and_special_files_under_our_temporary_names_are_not_removed(
    tmp_path, data, fake_model, monkeypatch, capsys
):
    """clean_stale removes only regular files of ours: a link with our name (never one we make)
    stays, and so does a FIFO."""
    from localjury.results._journal import host

    registry, _ = fake_model
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    pid = dead_pid()
    link = tmp_path / f".r.jsonl.localjury.{host()}.{pid}.0123abcd.tmp"
    link.symlink_to(victim)
    fifo = tmp_path / f".r.summary.json.localjury.{host()}.{pid}.0123abcd.old"
    os.mkfifo(fifo)
    stale = tmp_path / f".r.manifest.json.localjury.{host()}.{pid}.0123abcd.tmp"
    stale.write_text("partial")  # a regular file of ours: removed
    code, _, err = run_cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--no-cache"))
    assert code == 0, err
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode) and not stale.exists()
    assert victim.read_text() == "the user's file\n"
