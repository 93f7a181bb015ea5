"""What a run writes: outputs that would overwrite an input or each other are refused before
any model loads; results, summary and manifest are committed together; the manifest holds
their SHA-256 and `verify` checks them; failures and interrupts leave no mess and say what
the judgment store kept."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import localjury.errors
import localjury.results._commit
import localjury.run.context
import localjury.run.generate
import localjury.store
from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError
from localjury.results.manifest import Manifest
from tests.fakes import CRITERION, factory, judgment, run_args, run_cli, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [{"id": f"r{i}", "response": f"answer {i}"} for i in range(4)]


def yes(model, prompt, j):
    return judgment(1)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return path


cli = run_cli  # the CLI in this process: (exit code, stdout, stderr)


# -- outputs that clash with inputs or each other -----------------------------------------------
CLASHES = [
    ("out is the dataset", lambda t, d: ["--out", d], "would overwrite the dataset"),
    ("out is the store", lambda t, d: ["--out", t / "c.sqlite", "--cache", t / "c.sqlite"], "judgment store"),
    ("out is the store's WAL", lambda t, d: ["--out", t / "c.sqlite-wal", "--cache", t / "c.sqlite"], "wal file"),
    ("summary is the results", lambda t, d: ["--out", t / "r.jsonl", "--summary", t / "r.jsonl"], "the same file"),
    ("summary is the dataset", lambda t, d: ["--out", t / "r.jsonl", "--summary", d], "would overwrite the dataset"),
    ("manifest is the dataset", lambda t, d: ["--out", t / "d.jsonl.x"], None),  # set up below
    ("out is models.yaml", lambda t, d: ["--out", t / "models.yaml"], "models.yaml"),
    ("out is the criteria file", lambda t, d: ["--out", t / "crit.yaml", "--criteria", t / "crit.yaml"], "criteria"),
    ("out is inside the model folder", lambda t, d: ["--out", t / "model" / "config.json"], "folder of model"),
    ("out is a symlink to the dataset", lambda t, d: ["--out", t / "link.jsonl"], "would overwrite the dataset"),
    ("out is a hard link of the dataset", lambda t, d: ["--out", t / "hard.jsonl"], "would overwrite the dataset"),
    ("out is a folder", lambda t, d: ["--out", t], "is a folder"),
    ("out's folder is a file", lambda t, d: ["--out", d / "r.jsonl"], "cannot write the results file"),
]


@pytest.mark.parametrize(("case", "args", "message"), CLASHES, ids=[c[0] for c in CLASHES])
def test_an_output_that_would_overwrite_an_input_or_another_output_is_refused_before_loading(
    tmp_path, data, fake_model, monkeypatch, capsys, case, args, message
):
    registry, log = fake_model
    (tmp_path / "crit.yaml").write_text("polite: The response is polite.\n")
    (tmp_path / "link.jsonl").symlink_to(data)
    os.link(data, tmp_path / "hard.jsonl")
    extra = [str(a) for a in args(tmp_path, data)]
    if case == "manifest is the dataset":  # results r.jsonl -> manifest r.manifest.json
        data = tmp_path / "r.manifest.json"
        data.write_text(json.dumps(RECORDS))
        extra, message = ["--out", str(tmp_path / "r.jsonl")], "manifest"
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()}
    args_ = ["run", data, "--criterion", CRITERION, "--models", "fake", "--registry", registry, "--quiet", *extra]
    code, _, err = cli(monkeypatch, capsys, *args_)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert log == []  # no model was loaded
    after = {p: p.read_bytes() for p in before}
    assert after == before  # nothing was overwritten


def test_the_library_refuses_the_same_clashes(tmp_path, data):
    with pytest.raises(ConfigError, match="would overwrite the dataset"):
        evaluate(data, [DATED], [spec("A")], out=data, engine_factory=factory(yes, []))
    with pytest.raises(ConfigError, match="the same file"):
        evaluate(data, [DATED], [spec("A")], out=tmp_path / "r.jsonl", summary=tmp_path / "r.jsonl",
                 engine_factory=factory(yes, []))  # fmt: skip
    result = evaluate(data, [DATED], [spec("A")], use_cache=False, engine_factory=factory(yes, []))
    with pytest.raises(ConfigError, match="would overwrite the dataset"):
        result.write(data)


def test_an_unwritable_output_folder_is_refused_before_loading(tmp_path, data, fake_model, monkeypatch, capsys):
    registry, log = fake_model
    # /proc is read-only for everyone, root included (a chmod'ed folder is not, for root).
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, "/proc/localjury-test/r.jsonl"))
    assert code == 2 and "cannot write the results file /proc/localjury-test/r.jsonl" in err
    assert log == []


# -- committing the three files together ----------------------------------------------------------
def test_results_summary_and_manifest_are_committed_together(tmp_path, monkeypatch):
    from localjury.results._outputs import OutputSet

    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("r.jsonl", "r.summary.json", "r.manifest.json"):
        (folder / name).write_text("old\n")
    seen = []
    real_replace = os.replace

    def watching_replace(src, dst):
        real_replace(src, dst)
        state = {p.name: p.read_text() == "old\n" for p in folder.iterdir() if not p.name.startswith(".")}
        seen.append(state)

    names = ("r.jsonl", "r.summary.json", "r.manifest.json")
    with OutputSet({n: folder / n for n in names}) as files:
        monkeypatch.setattr(os, "replace", watching_replace)
        results = files.file(folder / "r.jsonl")
        results.write("new\n")
        files.file(folder / "r.summary.json", "new\n")
        files.file(folder / "r.manifest.json", "new\n")
        files.commit()
    for state in seen:
        new_files = [n for n, old in state.items() if not old]
        # a reader never finds new files beside the old manifest
        assert not (new_files and state.get("r.manifest.json") is True), state
    assert all(p.read_text() == "new\n" for p in folder.iterdir())
    assert not list(folder.glob(".*"))


def test_a_failure_before_the_commit_leaves_the_old_files_and_no_temporary_file(tmp_path):
    from localjury.results._outputs import OutputSet

    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "r.jsonl").write_text("old\n")
    with pytest.raises(OSError, match="disk full"), OutputSet({"results": folder / "r.jsonl"}) as files:
        staged = files.file(folder / "r.jsonl")
        staged.write("new\n")
        staged._fh.close()  # a close that fails (as with ENOSPC on flush) must not keep the file

        def failing_close():
            raise OSError(28, "disk full")

        staged.close = failing_close
        files.commit()
    assert [p.name for p in folder.iterdir()] == ["r.jsonl"] and (folder / "r.jsonl").read_text() == "old\n"


def test_a_full_disk_rerun_generates_nothing(tmp_path, data, fake_model, monkeypatch, capsys):
    """What a run judged before a failing write is in the store: the rerun loads no model."""
    registry, log = fake_model
    cache = tmp_path / "c.sqlite"
    real_write = localjury.results._commit.StagedFile.write

    def full(self, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(localjury.results._commit.StagedFile, "write", full)
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--cache", cache))
    assert code == 1 and "No space left on device" in err and "kept in the judgment store" in err
    assert not list(tmp_path.glob("*.jsonl.*")) and not list(tmp_path.glob(".r.*"))
    monkeypatch.setattr(localjury.results._commit.StagedFile, "write", real_write)
    loads = len(log)
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--cache", cache))
    assert code == 0, err
    assert len(log) == loads  # no model loaded: every judgment came from the store


def test_output_files_follow_the_umask(tmp_path, data):
    for umask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        old = os.umask(umask)
        try:
            out = tmp_path / f"u{umask:o}" / "r.jsonl"
            evaluate(data, [DATED], [spec("A")], out=out, use_cache=False, engine_factory=factory(yes, []))
        finally:
            os.umask(old)
        for path in out.parent.iterdir():
            assert path.stat().st_mode & 0o777 == mode, (path, oct(path.stat().st_mode))


def test_temporary_files_left_by_a_killed_run_are_cleaned_up(tmp_path, data):
    out = tmp_path / "r.jsonl"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    from localjury.results._journal import host
    from localjury.results._outputs import clean_stale

    stale = tmp_path / f".r.jsonl.localjury.{host()}.{pid}.0123abcd.tmp"
    stale_summary = tmp_path / f".r.summary.json.localjury.{host()}.{pid}.0123abcd.tmp"
    stale_backup = tmp_path / f".r.manifest.json.localjury.{host()}.{pid}.0123abcd.old"
    live = tmp_path / f".r.jsonl.localjury.{host()}.{os.getppid()}.0123abcd.tmp"  # a run still going
    other_host = tmp_path / f".r.jsonl.localjury.elsewhere.{pid}.0123abcd.tmp"  # cannot tell whether it runs
    for p in (stale, stale_summary, stale_backup, live, other_host):
        p.write_text("partial")
    evaluate(data, [DATED], [spec("A")], out=out, use_cache=False, engine_factory=factory(yes, []))
    assert not stale.exists() and not stale_summary.exists() and not stale_backup.exists()
    assert live.exists() and other_host.exists()
    assert clean_stale(out) == []


FOREIGN_TMP = [
    ".r.jsonl.backup.tmp",  # a user's own
    ".r.jsonl.k3j4h5_x.tmp",  # tempfile's names, as earlier versions used
    ".r.jsonl.{host}.{pid}.0123abcd.tmp",  # our old names without the marker: another program's look-alike
    ".r.jsonl.localjury.lock.tmp",
    ".r.jsonl.localjury.{host}.{pid}.0123ABCD.tmp",  # not our random part
]


@pytest.mark.parametrize("name", FOREIGN_TMP)
def test_temporary_files_localjury_never_wrote_are_left_alone(tmp_path, data, name):
    from localjury.results._journal import host

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    foreign = tmp_path / name.format(host=host(), pid=int(dead.stdout))
    foreign.write_text("someone's data")
    os.utime(foreign, (1, 1))  # hours old: earlier versions removed any such file this old
    evaluate(data, [DATED], [spec("A")], out=tmp_path / "r.jsonl", use_cache=False, engine_factory=factory(yes, []))
    assert foreign.read_text() == "someone's data"


# -- the manifest vouches for the results --------------------------------------------------------
def test_verify_checks_the_results_and_the_summary(tmp_path, data, fake_model, monkeypatch, capsys):
    registry, _ = fake_model
    out = tmp_path / "o" / "r.jsonl"
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, out))
    assert code == 0, err
    manifest = Manifest.model_validate_json((tmp_path / "o" / "r.manifest.json").read_text())
    assert manifest.results is not None and manifest.results.path == "r.jsonl"
    assert manifest.summary is not None and manifest.summary.path == "r.summary.json"
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 0 and "differ" not in stdout

    original = out.read_text()
    out.write_text(original.replace('"score":1.0', '"score":0.0', 1))  # a hand-edited score
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 1 and "results" in stdout and "1 differ" in stdout
    out.write_text(original)
    summary = tmp_path / "o" / "r.summary.json"
    kept = summary.read_text()
    summary.write_text(kept.replace('"seed": 0', '"seed": 1'))
    code, stdout, _ = cli(monkeypatch, capsys, "verify", out)
    assert code == 1 and "summary" in stdout and "1 differ" in stdout
    summary.write_text(kept)

    moved = tmp_path / "moved"
    shutil.move(tmp_path / "o", moved)  # files named beside the manifest: the folder can move
    code, stdout, _ = cli(monkeypatch, capsys, "verify", moved / "r.jsonl")
    assert code == 0 and "differ" not in stdout


def test_a_custom_summary_path_is_the_one_written_and_vouched_for(tmp_path, data):
    out, summary = tmp_path / "a" / "r.jsonl", tmp_path / "b" / "s.json"
    result = evaluate(data, [DATED], [spec("A")], out=out, summary=summary, use_cache=False,
                      engine_factory=factory(yes, []))  # fmt: skip
    assert summary.is_file() and not (tmp_path / "a" / "r.summary.json").exists()
    assert result.manifest.summary.path == str(summary.resolve())


def test_the_dataset_is_hashed_before_it_is_read_and_a_change_during_the_run_fails_it(tmp_path, data):
    import hashlib

    before = hashlib.sha256(data.read_bytes()).hexdigest()

    def edits_the_dataset(model, prompt, j):
        with data.open("a") as fh:
            fh.write(json.dumps({"id": f"late{j}", "response": "added while judging"}) + "\n")
        return judgment(1)

    out = tmp_path / "r.jsonl"
    with pytest.raises(ConfigError, match="changed while this run read it"):
        evaluate(data, [DATED], [spec("A")], out=out, use_cache=False, engine_factory=factory(edits_the_dataset, []))
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    result = evaluate(data, [DATED], [spec("A")], out=out, use_cache=False, engine_factory=factory(yes, []))
    assert result.manifest.dataset["sha256"] == before


# -- errors and interrupts say what was kept -------------------------------------------------------
def fails_on_second_chunk():
    """A judge that answers its first two samples, then crashes."""
    calls = {"n": 0}

    def respond(model, prompt, j):
        calls["n"] += 1
        if calls["n"] > 2:
            raise RuntimeError("engine crashed")
        return judgment(1)

    return respond


def test_an_error_mid_run_says_what_the_store_kept(tmp_path, data):
    cache = tmp_path / "c.sqlite"
    with pytest.raises(RuntimeError, match="engine crashed") as info:
        evaluate(data, [DATED], [spec("A")], cache=cache, chunk_size=2, out=tmp_path / "r.jsonl",
                 engine_factory=factory(fails_on_second_chunk(), []))  # fmt: skip
    (note,) = info.value.__notes__
    assert f"the 2 judgments generated before this are kept in the judgment store {cache}" in note


def test_a_fresh_run_cut_short_says_the_same_command_generates_its_judgments_again(tmp_path, data):
    """`fresh` generates every prompt again, those its cut-short run kept too: the note says
    so, and what a run without `fresh` would do, instead of promising a resume."""
    with pytest.raises(RuntimeError, match="engine crashed") as info:
        evaluate(data, [DATED], [spec("A")], cache=tmp_path / "c.sqlite", fresh=True, chunk_size=2,
                 out=tmp_path / "r.jsonl", engine_factory=factory(fails_on_second_chunk(), []))  # fmt: skip
    (note,) = info.value.__notes__
    assert "the 2 judgments generated before this are kept" in note and "resumes" not in note
    assert "the same command generates them again (`fresh`); without `fresh` it keeps them" in note


class FullStore(localjury.store.JudgmentStore):
    """A judgment store on a disk that fills up after ``room`` writes: SQLite's own page
    limit fails the next write with the error a full disk gives (SQLITE_FULL)."""

    room = 0

    def __init__(self, path, **kw):
        super().__init__(path, **kw)
        self.writes = 0
        self._fill()

    def _fill(self):
        if self.writes >= self.room:
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            self._db.execute(f"PRAGMA max_page_count = {pages}")

    def put_many(self, items):
        super().put_many(items)
        self.writes += 1
        self._fill()


@pytest.mark.parametrize(("room", "said"), [
    (0, "none of the 2 judgments generated before this could be stored in the judgment store {cache}; "
        "no results file was written; the same command generates them again"),
    (1, "of the 4 judgments generated before this, 2 are kept in the judgment store {cache} and 2 could not be "
        "stored; no results file was written; the same command resumes"),
])  # fmt: skip
def test_a_store_write_that_fails_says_what_the_store_kept(tmp_path, data, monkeypatch, room, said):
    """Kept means committed: the judgments of a chunk whose write failed are not counted."""
    cache = tmp_path / "c.sqlite"
    monkeypatch.setattr(FullStore, "room", room)
    monkeypatch.setattr(localjury.run.context, "JudgmentStore", FullStore)
    long = factory(lambda m, p, j: judgment(1, "x" * 5000), [])  # each over a page: the full disk shows at once
    with pytest.raises(localjury.errors.StoreError, match="database or disk is full") as info:
        evaluate(data, [DATED], [spec("A")], cache=cache, chunk_size=2, out=tmp_path / "r.jsonl", engine_factory=long)
    (note,) = info.value.__notes__
    assert said.format(cache=cache) in note
    # The real store again (not undo(): this test's LOCALJURY_HOME stays).
    monkeypatch.setattr(localjury.run.context, "JudgmentStore", localjury.store.JudgmentStore)
    log: list = []
    evaluate(data, [DATED], [spec("A")], cache=cache, chunk_size=2, engine_factory=factory(yes, log))
    assert len([e for e in log if e[0] == "generate"]) == 2 - room  # what was said kept is not generated again


def test_a_no_cache_run_that_fails_keeps_its_temporary_store(tmp_path, data):
    def fails_late(model, prompt, j):
        if "answer 3" in prompt:
            raise RuntimeError("boom")
        return judgment(1)

    with pytest.raises(RuntimeError) as info:
        evaluate(data, [DATED], [spec("A")], use_cache=False, chunk_size=2, engine_factory=factory(fails_late, []))
    (note,) = info.value.__notes__
    store = Path(note.split("temporary store ")[1].split(";")[0])
    assert store.is_file()
    log: list = []
    evaluate(data, [DATED], [spec("A")], cache=store, chunk_size=2, engine_factory=factory(yes, log))
    assert [e for e in log if e[0] == "generate"] == [("generate", "A", 2, 1)]  # only the chunk that failed
    shutil.rmtree(store.parent)


def test_ctrl_c_says_what_was_kept_and_how_to_resume(tmp_path, data, fake_model, monkeypatch, capsys):
    registry, _ = fake_model
    calls = {"n": 0}

    def interrupted(model, prompt, j):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return judgment(1)

    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(interrupted, []))
    cache = tmp_path / "c.sqlite"
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--cache", cache,
                                                      "--chunk-size", "2"))  # fmt: skip
    assert code == 130
    assert err.startswith("interrupted")
    assert f"the 2 judgments generated before this are kept in the judgment store {cache}" in " ".join(err.split())
    assert "the same command resumes" in " ".join(err.split())


def test_an_unexpected_error_is_one_line_with_exit_1(tmp_path, data, fake_model, monkeypatch, capsys):
    registry, _ = fake_model

    def broken(model, prompt, j):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(broken, []))
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--no-cache"))
    assert code == 1
    assert "Traceback" not in err
    first = " ".join(err.split("\n")[0:2])
    assert "unexpected ZeroDivisionError: division by zero" in first and "--debug" in " ".join(err.split())
    assert "no judgment was generated before this" in " ".join(err.split())


# -- what reaches the terminal is what the data says ----------------------------------------------
HOSTILE_IDS = ["[/oops]", "[link=https://example.com]click[/link]", "[bold]x", ":thumbs_up:", "a\x1b[2Jb"]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_record_ids_and_paths_print_as_they_are(tmp_path, fake_model, monkeypatch, capsys, hostile):
    registry, _ = fake_model
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": hostile, "user_input": "no response"}) + "\n")
    code, _, err = cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--strict-input"))
    assert code == 1
    assert f"record {hostile!r} (d.jsonl line 1)" in err  # the id as the data has it (repr escapes ESC)
    assert "\x1b" not in err and "MarkupError" not in err

    missing = tmp_path / f"no{hostile.replace('/', '_')}.jsonl"
    code, _, err = cli(monkeypatch, capsys, *run_args(missing, registry, tmp_path / "r.jsonl"))
    assert code == 2 and "\x1b" not in err
    assert str(missing).replace("\x1b", "\\x1b") in err


@pytest.mark.parametrize("where", ["out", "summary", "folder above out", "dataset"])
def test_a_symbolic_link_loop_is_a_config_error_in_the_python_api_too(tmp_path, data, where):
    """The command line checks each path option as it parses it; evaluate() and every output
    set check theirs before anything loads (Path.resolve raised a bare RuntimeError)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    loop = tmp_path / "a"
    paths = {"out": tmp_path / "r.jsonl", "summary": None}
    records = data
    if where == "out":
        paths["out"] = loop
    elif where == "summary":
        paths["summary"] = loop
    elif where == "folder above out":
        paths["out"] = loop / "r.jsonl"
    else:
        records = loop
    loaded: list = []
    with pytest.raises(ConfigError, match=r"leads into a loop of symbolic links"):
        evaluate(records, [DATED], [spec("A")], use_cache=False, engine_factory=factory(yes, loaded), **paths)
    assert loaded == []
