"""The judgment store: cache, resume, chunks, fresh runs, streamed results, manifests."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from localjury import AspectCritic, evaluate
from localjury._hashing import content_hash
from localjury.engines.base import Completion
from localjury.errors import ConfigError, LocaljuryError, StoreError
from localjury.results.manifest import Manifest, manifest_path_for
from localjury.results.record_result import read_results
from localjury.store import JudgmentStore
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
POLITE = AspectCritic("polite", "The response is polite.")
RECORDS = [{"id": f"r{i}", "response": f"answer {i}"} for i in range(5)]


def votes_from_text(model, prompt, j):
    """Deterministic: pass when the record's number is even, whatever the criterion."""
    number = int(prompt.rsplit("answer ", 1)[1].split("\n", 1)[0])
    return judgment(1 if number % 2 == 0 else 0)


def generated(log):
    return [e for e in log if e[0] == "generate"]


def test_a_sample_stored_without_verdict_probabilities_reads_back_without_them(tmp_path):
    store = JudgmentStore(tmp_path / "s.sqlite")
    # A row as stores before verdict probabilities wrote it: [text, tokens, finished].
    store._db.execute("INSERT INTO generations VALUES (?, ?)", ("old", json.dumps({"samples": [["t", 1, True]]})))
    assert store.get_many(["old"]) == {"old": [Completion("t", 1, True, None)]}
    store.close()


@pytest.mark.parametrize("probs", [[float("nan"), 0.5], [float("inf"), 0.0], [1.5, -0.5], ["0.9", 0.1]])
def test_stored_verdict_probabilities_that_are_not_probabilities_read_back_as_none(tmp_path, probs):
    """A store written before engines checked log-probabilities may hold NaN: it never reaches a score."""
    store = JudgmentStore(tmp_path / "s.sqlite")
    row = json.dumps({"samples": [["t", 1, True, probs], ["u", 1, True, [0.25, 0.75]]]})
    store._db.execute("INSERT INTO generations VALUES (?, ?)", ("old", row))
    assert store.get_many(["old"]) == {"old": [Completion("t", 1, True, None), Completion("u", 1, True, (0.25, 0.75))]}
    store.close()


def test_store_round_trip_and_errors(tmp_path):
    store = JudgmentStore(tmp_path / "s.sqlite")
    samples = [Completion("a", 1, True), Completion("b\u00e9", 2, False), Completion("c", 3, True, (0.25,))]
    store.put_many({"k1": samples, "k2": "prompt too long"})
    assert store.get_many(["k1", "k2", "k3"]) == {"k1": samples, "k2": "prompt too long"}
    assert len(store) == 2
    store.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"bad\.sqlite is not usable: not a SQLite.*delete it.*`use_cache=False`"):
        JudgmentStore(bad)


SAMPLE = [Completion('{"reason": "The response gives the year 1989.", "verdict": 1}', 20, True)]
PAGE = 4096  # SQLite's default page size


def filled_store(path, rows=20_000):
    """A closed store of ``rows`` generations: ~4.6 MB, more than SQLite's 2 MB page cache, so
    reading every row after the file changed reads pages from the file again."""
    store = JudgmentStore(path)
    keys = [f"{i:064x}" for i in range(rows)]
    store.put_many(dict.fromkeys(keys, SAMPLE))
    store.close()
    return keys


def corrupt_pages(path, pages):
    with open(path, "r+b") as fh:
        for page in pages:
            fh.seek(page * PAGE)
            fh.write(b"\xff" * PAGE)


def test_a_store_with_a_corrupt_page_is_refused_at_open(tmp_path):
    path = tmp_path / "s.sqlite"
    filled_store(path)
    middle = path.stat().st_size // PAGE // 2
    corrupt_pages(path, [middle])
    with pytest.raises(
        ConfigError, match=r"s\.sqlite is corrupt \(SQLite quick_check: Page \d+: .*\); move it"
    ) as info:
        JudgmentStore(path)
    assert "another file as `cache`, or `use_cache=False`" in str(info.value) and "\n" not in str(info.value)


def test_a_corrupt_store_stops_the_run_before_any_model_loads(tmp_path):
    cache = tmp_path / "c.sqlite"
    filled_store(cache)
    corrupt_pages(cache, [cache.stat().st_size // PAGE // 2])
    log = []
    with pytest.raises(ConfigError, match=r"c\.sqlite is corrupt"):
        evaluate(RECORDS, [DATED], [spec("A")], cache=cache, engine_factory=factory(votes_from_text, log))
    assert log == []


def test_corruption_found_mid_run_is_a_store_error(tmp_path):
    path = tmp_path / "s.sqlite"
    keys = filled_store(path)
    store = JudgmentStore(path)  # intact when opened
    corrupt_pages(path, range(2, path.stat().st_size // PAGE))
    for action in (lambda: store.get_many(keys), lambda: store.put_many({"new": SAMPLE}), lambda: len(store)):
        with pytest.raises(StoreError, match=r"s\.sqlite: database disk image is malformed.*move it aside") as info:
            action()
        assert isinstance(info.value.__cause__, sqlite3.DatabaseError) and info.value.path == path
    store.close()


def test_a_full_disk_is_a_store_error_naming_the_fix(tmp_path):
    store = JudgmentStore(tmp_path / "s.sqlite")
    # SQLite's own page limit fails a write with the error a full disk gives (SQLITE_FULL).
    store._db.execute("PRAGMA max_page_count = 8")
    with pytest.raises(StoreError, match=r"cannot write .*s\.sqlite: database or disk is full; free space") as info:
        store.put_many({f"k{i}": SAMPLE for i in range(2000)})
    assert isinstance(info.value.__cause__, sqlite3.OperationalError) and isinstance(info.value, LocaljuryError)
    store.close()


def test_a_store_locked_past_the_timeout_is_a_store_error(tmp_path):
    path = tmp_path / "s.sqlite"
    store = JudgmentStore(path, timeout=0.05)
    other = sqlite3.connect(path)
    other.execute("BEGIN IMMEDIATE")  # another run holds the write lock
    try:
        with pytest.raises(StoreError, match=r"s\.sqlite: database is locked.*another localjury run"):
            store.put_many({"k": SAMPLE})
        assert store.get_many(["k"]) == {}  # readers are not blocked (WAL)
    finally:
        other.rollback()
        other.close()
    store.put_many({"k": SAMPLE})
    assert len(store) == 1
    store.close()


def test_a_store_path_that_is_a_folder_or_under_a_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"judgment cache .* is a folder; pass a file path as `cache`"):
        JudgmentStore(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match=r"cannot create the folder .*afile of judgment cache"):
        JudgmentStore(tmp_path / "afile" / "s.sqlite")


def test_a_read_only_store_or_folder_is_refused_at_open(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    filled_store(folder / "s.sqlite", rows=10)
    (folder / "s.sqlite").chmod(0o444)
    if os.access(folder / "s.sqlite", os.W_OK):
        pytest.skip("this user writes to read-only files (root with CAP_DAC_OVERRIDE)")
    with pytest.raises(ConfigError, match=r"s\.sqlite is not usable: the file is read-only"):
        JudgmentStore(folder / "s.sqlite")
    folder.chmod(0o555)
    try:
        with pytest.raises(ConfigError, match=r"new\.sqlite is not usable: its folder .*ro is not writable"):
            JudgmentStore(folder / "new.sqlite")
    finally:
        folder.chmod(0o755)


def test_generation_key_depends_on_every_part():
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3, "seed": 0}
    keys = {
        content_hash(**base),
        content_hash(**{**base, "model": "m2"}),
        content_hash(**{**base, "messages": [{"role": "user", "content": "y"}]}),
        content_hash(**{**base, "n": 2}),
        content_hash(**{**base, "seed": 1}),
    }
    assert len(keys) == 5 and content_hash(**base) == content_hash(**dict(reversed(base.items())))


def test_the_same_run_again_generates_nothing_and_loads_no_model(tmp_path):
    cache = tmp_path / "c.sqlite"
    log = []
    first = evaluate(
        RECORDS, [DATED], [spec("A")], strictness=3, cache=cache, engine_factory=factory(votes_from_text, log)
    )
    assert generated(log) == [("generate", "A", 5, 3)]
    log.clear()
    again = evaluate(
        RECORDS, [DATED], [spec("A")], strictness=3, cache=cache, engine_factory=factory(votes_from_text, log)
    )
    assert log == []
    assert [r.model_dump() for r in again.results] == [r.model_dump() for r in first.results]
    (model,) = again.summary.models
    assert (model.judgments, model.cached, model.load_seconds, model.judgments_per_second) == (15, 15, 0.0, None)


def test_changing_one_criterion_rejudges_only_that_criterion(tmp_path):
    cache = tmp_path / "c.sqlite"
    evaluate(RECORDS, [DATED, POLITE], [spec("A")], cache=cache, engine_factory=factory(votes_from_text, []))
    log, calls = [], []
    changed = AspectCritic("polite", "The response is polite and warm.")
    result = evaluate(
        RECORDS, [DATED, changed], [spec("A")], cache=cache, engine_factory=factory(votes_from_text, log, calls)
    )
    assert generated(log) == [("generate", "A", 5, 1)]
    assert all("polite and warm" in p for p in calls[0]["prompts"])
    assert len(result.results) == 10 and result.summary.models[0].cached == 5


def test_fresh_generates_everything_again(tmp_path):
    cache = tmp_path / "c.sqlite"
    evaluate(RECORDS, [DATED], [spec("A")], cache=cache, engine_factory=factory(votes_from_text, []))
    log = []
    evaluate(RECORDS, [DATED], [spec("A")], cache=cache, fresh=True, engine_factory=factory(votes_from_text, log))
    assert generated(log) == [("generate", "A", 5, 1)]


def test_chunks_are_separate_calls_with_the_same_results(tmp_path):
    log = []
    whole = evaluate(RECORDS, [DATED], [spec("A")], use_cache=False, engine_factory=factory(votes_from_text, []))
    chunked = evaluate(
        RECORDS, [DATED], [spec("A")], chunk_size=2, use_cache=False, engine_factory=factory(votes_from_text, log)
    )
    assert generated(log) == [("generate", "A", 2, 1), ("generate", "A", 2, 1), ("generate", "A", 1, 1)]
    assert log[0] == ("load", "A") and log.count(("load", "A")) == 1  # loaded once for all chunks
    assert [r.model_dump() for r in chunked.results] == [r.model_dump() for r in whole.results]


def test_a_run_that_dies_mid_way_resumes_from_its_last_chunk(tmp_path):
    cache = tmp_path / "c.sqlite"
    calls = {"n": 0}

    def dies_on_third_call(model, prompt, j):
        if j == 0:
            calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("killed")
        return votes_from_text(model, prompt, j)

    with pytest.raises(RuntimeError, match="killed"):
        evaluate(
            RECORDS, [DATED], [spec("A")], chunk_size=2, cache=cache, engine_factory=factory(dies_on_third_call, [])
        )
    log = []
    result = evaluate(
        RECORDS, [DATED], [spec("A")], chunk_size=2, cache=cache, engine_factory=factory(votes_from_text, log)
    )
    assert generated(log) == [("generate", "A", 2, 1), ("generate", "A", 1, 1)]  # the chunk that died, then the last
    assert [r.record_id for r in result.results] == [r["id"] for r in RECORDS]
    assert [r.score for r in result.results] == [1.0, 0.0, 1.0, 0.0, 1.0]


def test_out_streams_results_with_summary_and_manifest(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    out = tmp_path / "res" / "results.jsonl"
    result = evaluate(data, [DATED], [spec("A")], out=out, seed=4, engine_factory=factory(votes_from_text, []))
    assert result.results == [] and result.results_path == out
    rows = read_results(out)
    assert [r.record_id for r in rows] == [r["id"] for r in RECORDS] and len(list(result.iter_results())) == 5
    assert json.loads((tmp_path / "res" / "results.summary.json").read_text())["seed"] == 4
    manifest = Manifest.model_validate_json(manifest_path_for(out).read_text())
    assert manifest.seed == 4 and manifest.dataset["sha256"] and manifest.metrics[0]["name"] == "dated"
    assert (manifest.models[0].name == "A" and "torch" in manifest.packages) or "pydantic" in manifest.packages
    assert not list((tmp_path / "res").glob(".*.tmp"))  # no temporary file left behind


def localjury(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", "from localjury.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_cli_refuses_a_corrupt_store_with_exit_2_before_loading_the_model(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")  # never loaded: the store check stops the run first
    (model_dir / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")  # no tensors
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    cache = tmp_path / "c.sqlite"
    filled_store(cache)
    corrupt_pages(cache, [cache.stat().st_size // PAGE // 2])
    proc = localjury(
        "run", str(data), "--aspect", "coherence", "--models", str(model_dir), "--cache", str(cache),
        "--quiet", "--out", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"error: judgment cache {cache} is corrupt (SQLite quick_check: Page")


def test_verify_reports_a_changed_dataset_and_model_file(tmp_path, monkeypatch):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    (model_dir / "model.safetensors").write_bytes(b"weights")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    out = tmp_path / "results.jsonl"
    from localjury.models.registry import ModelSpec

    judge = ModelSpec(name="local", path=str(model_dir))
    evaluate(data, [DATED], [judge], out=out, engine_factory=factory(votes_from_text, []))
    ok = localjury("verify", str(out))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "checks match" in ok.stdout and "differ" not in ok.stdout
    (model_dir / "model.safetensors").write_bytes(b"other weights")
    data.write_text(data.read_text() + json.dumps({"response": "new"}) + "\n")
    bad = localjury("verify", str(out))
    assert bad.returncode == 1
    assert "model local: model.safetensors" in bad.stdout and "dataset" in bad.stdout and "2 differ" in bad.stdout
    missing = localjury("verify", str(tmp_path / "nothing.jsonl"))
    assert missing.returncode == 2 and "no manifest at" in missing.stderr


def test_truncate_policy_cuts_contexts_with_a_visible_mark(tmp_path):
    calls = []
    long_ctx = {"id": "long", "response": "answer 2", "retrieved_contexts": ["fact " * 3000, "short context"]}
    small = spec("A", context_length=1200, max_tokens=100)
    result = evaluate(
        [long_ctx],
        [DATED],
        [small],
        on_overflow="truncate",
        use_cache=False,
        engine_factory=factory(votes_from_text, [], calls),
    )
    (prompt,) = calls[0]["prompts"]
    assert "characters cut by localjury to fit the model's context" in prompt and "short context" in prompt
    assert result.results[0].score == 1.0
    errored = evaluate([long_ctx], [DATED], [small], use_cache=False, engine_factory=factory(votes_from_text, []))
    assert "exceeds context_length 1200" in errored.results[0].models[0].error


def test_unknown_overflow_policy():
    with pytest.raises(ConfigError, match="unknown overflow policy 'drop'"):
        evaluate(RECORDS, [DATED], [spec("A")], on_overflow="drop", engine_factory=factory(votes_from_text, []))


def test_a_stored_value_no_localjury_wrote_is_a_store_error(tmp_path):
    path = tmp_path / "s.sqlite"
    store = JudgmentStore(path)
    store.put_many({"k": "an error"})
    store._db.execute("UPDATE generations SET value = 'not json' WHERE key = 'k'")
    store._db.commit()
    with pytest.raises(StoreError, match=r"holds an unreadable generation .*move it aside or delete it"):
        store.get_many(["k"])
    store.close()


# -- a database that is not a judgment store ----------------------------------------------------
def another_programs_db(path, *statements):
    db = sqlite3.connect(path)
    for statement in statements or ("CREATE TABLE foo (a INTEGER, b TEXT)", "INSERT INTO foo VALUES (1, 'x')"):
        db.execute(statement)
    db.commit()
    db.close()
    return path.read_bytes()


FOREIGN = [
    ("a table of its own", (), "tables: foo"),
    ("its own application_id", ("PRAGMA application_id = 4660",), "application_id 0x1234"),
    ("a generations table of other columns", ("CREATE TABLE generations (id INTEGER PRIMARY KEY, blob BLOB)",),
     "tables: generations"),
    ("our table beside others", ("CREATE TABLE generations (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                                 "CREATE TABLE users (name TEXT)"), "tables: generations, users"),
    ("a view", ("CREATE VIEW v AS SELECT 1",), "tables: v"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "statements", "holds"), FOREIGN, ids=[c[0] for c in FOREIGN])
def test_another_programs_database_is_refused_and_left_as_it_is(tmp_path, case, statements, holds):
    path = tmp_path / "other.db"
    before = another_programs_db(path, *statements)
    with pytest.raises(ConfigError, match=rf"other\.db is not a localjury judgment store: it is another program's "
                       rf"SQLite database \({holds}\), left as it is; pass another file as `cache`"):  # fmt: skip
        JudgmentStore(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal or -shm left either


def test_the_cli_refuses_another_programs_database_as_cache_with_exit_2(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")  # never loaded: the store check stops the run first
    (model_dir / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    other = tmp_path / "app.sqlite"
    before = another_programs_db(other)
    proc = localjury("run", str(data), "--aspect", "coherence", "--models", str(model_dir), "--cache", str(other),
                     "--quiet", "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "is not a localjury judgment store" in proc.stderr and "Traceback" not in proc.stderr
    assert other.read_bytes() == before and not (tmp_path / "r.jsonl").exists()


def test_a_store_an_earlier_localjury_made_is_kept_and_marked(tmp_path):
    path = tmp_path / "old.sqlite"
    another_programs_db(
        path,
        "CREATE TABLE generations (\n    key TEXT PRIMARY KEY,\n    value TEXT NOT NULL\n)",
        """INSERT INTO generations VALUES ('k', '{"error": "an error"}')""",
    )
    store = JudgmentStore(path)
    assert store.get_many(["k"]) == {"k": "an error"}
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == 0x4C4A5259
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.close()


@pytest.mark.parametrize("empty", ["a new path", "an empty file", "an empty database"])
def test_a_new_or_empty_file_becomes_a_marked_store(tmp_path, empty):
    path = tmp_path / "s.sqlite"
    if empty == "an empty file":
        path.write_bytes(b"")
    elif empty == "an empty database":
        another_programs_db(path, "CREATE TABLE t (x)", "DROP TABLE t")
    JudgmentStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == 0x4C4A5259
    db.close()
    JudgmentStore(path).close()  # and opens again as ours


def test_a_store_of_a_newer_localjury_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    JudgmentStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"written by a newer localjury \(store format 2; this one reads up to 1\)"):
        JudgmentStore(path)
    assert path.read_bytes() == before


# -- the files SQLite keeps beside the store are its own, or the store is not opened ------------
@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("kind", ["symbolic link", "hard link"])
def test_a_store_whose_side_file_is_planted_is_refused_and_its_target_untouched(tmp_path, suffix, kind):
    """SQLite writes its write-ahead log and its index through a hard link into the other file
    (a victim's content became WAL frames), and refuses a symbolic link without saying which."""
    cache = tmp_path / "c.sqlite"
    JudgmentStore(cache).close()  # a store that exists: its side files are gone once closed
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n" * 300)
    side = tmp_path / f"c.sqlite{suffix}"
    (side.symlink_to if kind == "symbolic link" else lambda v: os.link(v, side))(victim)
    problem = "is a symbolic link" if kind == "symbolic link" else "has another hard link"
    with pytest.raises(
        ConfigError, match=rf"judgment cache {cache} is not opened: {side}, where SQLite keeps .*{problem}"
    ):
        store = JudgmentStore(cache)
        store.put_many({"k": "prompt too long"})  # (the old code wrote here)
        store.close()
    assert victim.read_text() == "the user's file\n" * 300 and os.path.lexists(side)


@pytest.mark.parametrize("target", ["/dev/null", "link to /dev/null"])
def test_a_cache_that_is_not_a_regular_file_is_refused_before_sqlite_opens_it(tmp_path, target, monkeypatch, capsys):
    """`--cache /dev/null` (as root) created /dev/null-journal before it failed."""
    from tests.fakes import fake_registry, run_args, run_cli

    path = tmp_path / "c.sqlite"
    if target == "/dev/null":
        path = "/dev/null"
    else:
        path.symlink_to("/dev/null")
    there = set(os.listdir("/dev"))
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "response": "x"}) + "\n")
    registry = fake_registry(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, *run_args(data, registry, tmp_path / "r.jsonl", "--cache", path))
    made = set(os.listdir("/dev")) - there
    for name in made:  # (the old code, as root: /dev/null-journal)
        os.unlink(f"/dev/{name}")
    assert code == 2 and f"judgment cache {path} is not a regular file, so it is not opened" in " ".join(err.split())
    assert made == set()
