"""One output set per path under races and failures: a second command writing the same files
is refused while the first holds them; a commit that fails or is killed part way leaves a
whole previous set or a whole new set, says which, and the next command or `verify` settles
it by the rule in localjury.results._commit."""

import errno
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import localjury.run.generate
from localjury import AspectCritic, evaluate
from localjury.cli import main
from localjury.errors import CommitError, ConfigError
from localjury.results import _outputs
from localjury.results._outputs import OutputSet
from tests import ROOT
from tests.fakes import factory, fake_registry, judgment, run_args, spec

NAMES = ("r.jsonl", "r.summary.json", "r.manifest.json")


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "response": f"answer {i}"}) + "\n" for i in range(4)))
    return path


@pytest.fixture
def registry(tmp_path):
    return fake_registry(tmp_path)


def verdicts(verdict, monkeypatch):
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda m, p, j: judgment(verdict), []))


def cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["localjury", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (0 if code is None else code), captured.out, " ".join(captured.err.split())


def snapshot(folder):
    """Every file of the folder, by name (localjury's hidden files included)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def scores(results):
    return [json.loads(line)["score"] for line in results.read_text().splitlines()]


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if ".localjury." in p.name)


# -- a second writer of the same files ----------------------------------------------------------
SLOW_WRITER = """
import pathlib, sys, time
sys.path.insert(0, {root!r})
from tests.fakes import factory, judgment
import localjury.run.generate
go = pathlib.Path({go!r})
def waits(m, p, j):
    pathlib.Path({started!r}).touch()  # judging: well past the checks of its files
    while not go.exists():
        time.sleep(0.05)
    return judgment(0)
localjury.run.generate.load_engine = factory(waits, [])
from localjury.cli import main
main()
"""


def test_a_second_run_writing_the_same_files_fails_at_once_and_the_first_set_is_whole(
    tmp_path, data, registry, monkeypatch, capsys
):
    out = tmp_path / "o" / "r.jsonl"
    program = tmp_path / "slow.py"
    go, started = tmp_path / "go", tmp_path / "started"
    program.write_text(SLOW_WRITER.format(root=str(ROOT), go=str(go), started=str(started)))
    first = subprocess.Popen(
        [sys.executable, str(program), *map(str, run_args(data, registry, out, "--no-cache"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            if first.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the first run never started judging")  # its stderr: below, once it ended
            time.sleep(0.1)
        verdicts(1, monkeypatch)
        code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
        assert code == 2, err
        assert f"the results file {out} is being written by another localjury process (pid {first.pid} on" in err
        # Another results file, but the same summary: refused too (each file is locked).
        other = run_args(data, registry, tmp_path / "o" / "q.jsonl", "--summary", out.parent / "r.summary.json")
        code, _, err = cli(monkeypatch, capsys, *other, "--no-cache")
        assert code == 2 and f"pid {first.pid}" in err and "r.summary.json" in err
        assert not (tmp_path / "o" / "q.jsonl").exists()
    finally:
        go.touch()
        _, stderr = first.communicate(timeout=120)
        print(stderr)
    assert first.returncode == 0, stderr
    assert scores(out) == [0.0] * 4  # the first run's results, with its summary and manifest
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 0 and "differ" not in stdout
    assert leftovers(out.parent) == []  # its lock files went with it


def test_a_held_set_refuses_another_writer_in_the_same_process_and_is_free_after(tmp_path):
    target = tmp_path / "cal.json"
    errors = []
    with OutputSet({"calibration file": target}) as files:

        def second():
            try:
                OutputSet({"calibration file": target}).open()
            except ConfigError as exc:
                errors.append(str(exc))

        thread = threading.Thread(target=second)
        thread.start()
        thread.join()
        files.file(target, "first\n")
        files.commit()
    (error,) = errors
    assert f"the calibration file {target} is being written by another localjury process (pid {os.getpid()} on" in error
    assert target.read_text() == "first\n"
    with OutputSet({"calibration file": target}) as files:  # released: the next writer gets it
        files.file(target, "second\n")
        files.commit()
    assert target.read_text() == "second\n" and leftovers(tmp_path) == []


def test_a_lone_file_is_replaced_in_one_rename_never_missing(tmp_path, monkeypatch):
    target = tmp_path / "cal.json"
    target.write_text("old\n")
    seen = []
    real_replace, real_unlink = os.replace, Path.unlink

    def replace(src, dst):
        seen.append(target.exists())
        real_replace(src, dst)
        seen.append(target.exists())

    def unlink(self, missing_ok=False):
        seen.append(self != target)
        real_unlink(self, missing_ok=missing_ok)

    with OutputSet({"calibration file": target}) as files:
        files.file(target, "new\n")
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(Path, "unlink", unlink)
        files.commit()
    assert seen and all(seen) and target.read_text() == "new\n"


def test_a_lock_file_its_holder_removed_is_not_taken_twice(tmp_path):
    """A writer that opened the lock file just before its holder removed it must not then
    hold the removed file while a third writer holds the new one."""
    target = tmp_path / "r.jsonl"
    fd = _outputs.lock("results file", target)
    stale = os.open(_outputs.lock_path(target), os.O_RDWR)  # opened before the holder lets go
    _outputs.unlock(fd, target)
    third = _outputs.lock("results file", target)  # creates and holds a new lock file
    import fcntl

    fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the removed file's lock is free...
    os.close(stale)
    with pytest.raises(ConfigError, match="being written by another localjury process"):
        _outputs.lock("results file", target)  # ...but the path's lock is the third writer's
    _outputs.unlock(third, target)


# -- a rename failing part way ------------------------------------------------------------------
def failing_replace(monkeypatch, nth, *, once):
    """os.replace failing with EIO on the nth rename onto one of the set's files (and on every
    later one unless ``once``), as a disk going bad would."""
    real = os.replace
    count = {"n": 0}

    def replace(src, dst):
        if Path(dst).name in NAMES:
            count["n"] += 1
            if count["n"] == nth or (not once and count["n"] > nth):
                raise OSError(errno.EIO, os.strerror(errno.EIO), str(src), None, str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return real


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_rename_failing_part_way_puts_the_previous_set_back_and_says_so(
    tmp_path, data, registry, monkeypatch, capsys, nth
):
    out = tmp_path / "o" / "r.jsonl"
    verdicts(1, monkeypatch)
    assert cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))[0] == 0
    before = snapshot(out.parent)
    verdicts(0, monkeypatch)
    real_replace = failing_replace(monkeypatch, nth, once=True)
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    assert code == 1 and "Traceback" not in err
    failed = NAMES[nth - 1]
    assert f"committing {', '.join(NAMES)} failed part way (Input/output error renaming {failed})" in err
    assert "the previous files are back in place (r.jsonl, r.summary.json, r.manifest.json)" in err
    assert "none of this command's files was written" in err and "no results file was written" in err
    assert snapshot(out.parent) == before  # byte for byte, and nothing of ours left beside it
    monkeypatch.setattr(os, "replace", real_replace)  # (not undo(): this test's LOCALJURY_HOME stays)
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 0 and "differ" not in stdout


def test_a_failed_commit_of_new_files_removes_them_again(tmp_path):
    folder = tmp_path / "o"
    outputs = {n: folder / n for n in NAMES}
    real = os.replace

    def fails_on_the_manifest(src, dst):
        if Path(dst).name == "r.manifest.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(src), None, str(dst))
        real(src, dst)

    back = r"previous files are back in place \(there were none\)"
    with pytest.raises(CommitError, match=back) as info, OutputSet(outputs) as files:
        for path in outputs.values():
            files.file(path, "new\n")
        os.replace = fails_on_the_manifest
        try:
            files.commit()
        finally:
            os.replace = real
    assert info.value.outcome == "previous"
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_commit_that_cannot_be_undone_says_which_files_are_which_and_verify_completes_it(
    tmp_path, data, registry, monkeypatch, capsys, nth
):
    out = tmp_path / "o" / "r.jsonl"
    verdicts(1, monkeypatch)
    assert cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))[0] == 0
    verdicts(0, monkeypatch)
    real_replace = failing_replace(monkeypatch, nth, once=False)  # undoing it fails too
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    assert code == 1, err
    new, previous = NAMES[: nth - 1], NAMES[nth - 1 : 2]
    journal = out.parent / ".r.manifest.json.localjury.commit"
    assert "and undoing it failed too (Input/output error)" in err
    assert (f"new: {', '.join(new)};" in err) == bool(new)
    assert (f"previous: {', '.join(previous)};" in err) == bool(previous)
    assert "missing: r.manifest.json" in err  # a reader that does not go through localjury sees no manifest
    assert f"The journal {journal} lists the rest" in err and "`localjury verify`" in err
    assert "no results file was written" not in err  # some were
    assert journal.is_file() and not (out.parent / "r.manifest.json").exists()

    monkeypatch.setattr(os, "replace", real_replace)  # (not undo(): this test's LOCALJURY_HOME stays)
    code, stdout, err = cli(monkeypatch, capsys, "verify", out)
    assert "completed a commit cut short" in err and f"{', '.join(NAMES)} are the files it wrote" in err
    assert code == 0 and "differ" not in stdout  # the whole new set
    assert scores(out) == [0.0] * 4 and leftovers(out.parent) == []


# -- a commit killed part way -------------------------------------------------------------------
KILLED = """
import os, sys
sys.path.insert(0, {root!r})
from tests.fakes import factory, judgment
import localjury.run.generate
localjury.run.generate.load_engine = factory(lambda m, p, j: judgment(0), [])
real, count = os.replace, [0]
def dies(src, dst):
    if os.path.basename(dst) in {names!r}:
        count[0] += 1
        if count[0] == {nth}:
            os._exit(9)
    real(src, dst)
os.replace = dies
from localjury.cli import main
main()
"""


def killed_mid_commit(tmp_path, data, registry, out, nth):
    program = tmp_path / "killed.py"
    program.write_text(KILLED.format(root=str(ROOT), names=NAMES, nth=nth))
    args = shlex.join(map(str, run_args(data, registry, out, "--no-cache")))
    proc = subprocess.run(f"{sys.executable} {program} {args}", shell=True, capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_commit_killed_part_way_is_completed_by_verify(tmp_path, data, registry, monkeypatch, capsys, nth):
    out = tmp_path / "o" / "r.jsonl"
    verdicts(1, monkeypatch)
    assert cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))[0] == 0
    killed_mid_commit(tmp_path, data, registry, out, nth)
    assert not (out.parent / "r.manifest.json").exists()  # no manifest while the set is half new
    code, stdout, err = cli(monkeypatch, capsys, "verify", out)
    assert "completed a commit cut short" in err
    assert code == 0 and "differ" not in stdout
    assert scores(out) == [0.0] * 4 and leftovers(out.parent) == []


def test_a_commit_killed_part_way_whose_new_file_is_lost_is_undone(tmp_path, data, registry, monkeypatch, capsys):
    out = tmp_path / "o" / "r.jsonl"
    verdicts(1, monkeypatch)
    assert cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))[0] == 0
    before = {n: (out.parent / n).read_bytes() for n in NAMES}
    killed_mid_commit(tmp_path, data, registry, out, 2)  # r.jsonl renamed, then killed
    (pending,) = out.parent.glob(".r.summary.json.localjury.*.tmp")
    pending.unlink()  # the new summary is gone: the new set cannot be completed
    code, stdout, err = cli(monkeypatch, capsys, "verify", out)
    assert "undid a commit cut short" in err and "are the previous files" in err
    assert code == 0 and "differ" not in stdout
    assert {n: (out.parent / n).read_bytes() for n in NAMES} == before and leftovers(out.parent) == []


def test_the_next_run_settles_a_commit_killed_part_way_before_it_writes(
    tmp_path, data, registry, monkeypatch, capsys, caplog
):
    out = tmp_path / "o" / "r.jsonl"
    killed_mid_commit(tmp_path, data, registry, out, 3)  # no previous set: two new files in place
    assert not (out.parent / "r.manifest.json").exists()
    verdicts(1, monkeypatch)
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    assert code == 0, err
    assert any("completed a commit cut short" in r.getMessage() for r in caplog.records)
    assert scores(out) == [1.0] * 4 and leftovers(out.parent) == []
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 0 and "differ" not in stdout


def test_verify_leaves_a_commit_under_way_to_its_writer(tmp_path):
    from localjury.results._journal import Entry, commit_key, journal_bytes, journal_path

    target = tmp_path / "r.manifest.json"
    target.write_text("new\n")
    journal = journal_path(target)
    entry = Entry(path=str(target), tmp=None, backup=None, new=None, old=None)
    journal.write_bytes(journal_bytes(journal, [entry], commit_key(create=True)))
    held = _outputs.lock("manifest", target)  # its writer, mid-commit
    with pytest.raises(ConfigError, match=f"the file {target} is being written by another localjury process"):
        _outputs.settle_pending([target])
    assert journal.exists() and target.exists()
    _outputs.unlock(held, target)
    (done,) = _outputs.settle_pending([target])
    assert f"completed a commit cut short (by process {os.getpid()} on" in done and not journal.exists()


def test_an_unreadable_journal_is_refused_naming_it_and_left_alone(tmp_path):
    target = tmp_path / "cal.json"
    journal = tmp_path / ".cal.json.localjury.commit"
    journal.write_text("{not json")
    with pytest.raises(ConfigError, match=r"\.cal\.json\.localjury\.commit is not one localjury can prove it wrote"):
        OutputSet({"calibration file": target}).open()
    assert journal.read_text() == "{not json" and leftovers(tmp_path) == [journal.name]


def test_the_library_refuses_an_output_set_and_out_together(tmp_path, data):
    with OutputSet({"report": tmp_path / "x.md"}) as files, pytest.raises(ConfigError, match="not both"):
        evaluate(data, [AspectCritic("dated", "A year.")], [spec("A")], out=tmp_path / "r.jsonl", output_set=files,
                 engine_factory=factory(lambda m, p, j: judgment(1), []))  # fmt: skip
