"""A run killed (SIGKILL) or interrupted (SIGINT) part way and run again with other flags gives
exactly what an uninterrupted run with the new flags gives: the same results file, the same
generations in the judgment store. It reuses what the first run committed wherever the new
flags would generate the same thing (another chunk size or tie-break), never where they would
not (another seed, strictness, temperature, criterion text, --fresh), and loses none of it.

The judge is a scripted engine that draws like a seeded one (:class:`Sampler`): each sample a
function of everything that decides it, so that a generation made under other flags has other
votes and reasons, and mixing one in changes the results. The first run is a subprocess that
signals itself at its third engine call (of three: two chunks committed); every other run is
in-process."""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

import localjury.run.generate
from localjury.engines.base import Completion
from tests import ROOT
from tests.fakes import ScriptedEngine, fake_registry, judgment, run_cli

CRITERIA = {
    "dated": "The response must include a specific date or year.",
    "polite": "The response is polite.",
}
#: Strictness 2, so that ties happen (a --tie-break that is ignored shows); 6 records in 3 chunks.
BASE = {"--strictness": "2", "--seed": "1", "--chunk-size": "2"}
RECORDS = 6
SALT = "weights"
STORE = "store/j.sqlite"


class Sampler(ScriptedEngine):
    """Draws each sample from its prompt, the run's seed, its index, temperature, top-p and token
    budget (and ``salt``: the weights), as a seeded engine does; at engine call ``die_at`` it
    sends itself ``sig``."""

    def __init__(self, spec, log, salt=SALT, die_at=None, sig=None):
        super().__init__(spec, None, log)
        self.salt, self.die_at, self.sig, self.count = salt, die_at, sig, 0

    def generate(self, call):
        self.count += 1
        if self.count == self.die_at:
            os.kill(os.getpid(), self.sig)
            time.sleep(30)  # SIGINT raises KeyboardInterrupt here; SIGKILL never returns
        self.log.append(("generate", self.spec.name, len(call.prompts), call.n))
        s = call.sampling
        out = [[self._draw(p, s, s.first_sample + j) for j in range(call.n)] for p in call.prompts]
        if call.progress:
            call.progress(len(call.prompts))
        return out

    def _draw(self, prompt, s, index):
        parts = [self.salt, prompt, s.seed, index, s.temperature, s.top_p, s.max_tokens]
        digest = hashlib.sha256(repr(parts).encode()).hexdigest()
        text = judgment(int(digest[0], 16) % 2, f"sample {digest[:12]}")
        return Completion(text=text, n_tokens=len(text) // 4, finished=True)


def sampler(log, salt=SALT, die_at=None, sig=None):
    return lambda spec, files=None: Sampler(spec, log, salt, die_at, sig)


def dying_at_rename(names, nth):
    """Kill this process (SIGKILL) at the ``nth`` rename onto one of ``names``: a commit cut short."""
    real, count = os.replace, [0]

    def dies(src, dst):
        if os.path.basename(dst) in names:
            count[0] += 1
            if count[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)

    os.replace = dies


KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, {root!r})
# As at a terminal, whatever SIGINT disposition the suite inherited.
signal.signal(signal.SIGINT, signal.default_int_handler)
import localjury.run.generate
from tests.unit.run.test_resume_changed_flags import dying_at_rename, sampler
localjury.run.generate.load_engine = sampler([], die_at={die_at}, sig={sig})
if {renames!r}:
    dying_at_rename({renames!r}, {nth})
from localjury.cli import main
main()
"""


def killed_run(folder, args, *, die_at=None, sig=signal.SIGKILL, renames=(), nth=0, env=None):
    program = folder / "killed.py"
    program.write_text(KILLED_RUN.format(root=str(ROOT), die_at=die_at, sig=int(sig), renames=tuple(renames), nth=nth))
    return subprocess.run(
        [sys.executable, str(program), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )


def command(data, registry, out, cache, flags=None, criteria=None):
    """``localjury run`` with ``BASE`` updated by ``flags`` (a value None: the flag given alone)."""
    options = []
    for flag, value in (BASE | (flags or {})).items():
        options += [flag] if value is None else [flag, value]
    named = [a for name, text in (criteria or CRITERIA).items() for a in ("--criterion", f"{name}={text}")]
    return ["run", data, *named, "--models", "fake", "--registry", registry, "--quiet", "--out", out,
            "--cache", cache, *options]  # fmt: skip


def judged(monkeypatch, capsys, args, salt=SALT):
    """Run ``args`` in-process with the sampler; return the engine's log."""
    log = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", sampler(log, salt))
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    return log


def stored(path):
    """The judgment store's generations, key -> value (read from a copy: the original's WAL stays as it is)."""
    scratch = path.parent / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    copy = copy_store(path, scratch)
    with closing(sqlite3.connect(copy)) as db:
        rows = dict(db.execute("SELECT key, value FROM generations"))
    shutil.rmtree(scratch)
    return rows


def copy_store(path, folder):
    """The store and its -wal and -shm files, as a killed process left them, copied into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in path.parent.glob(path.name + "*"):
        shutil.copy2(f, folder / f.name)
    return folder / path.name


def prompts(log):
    return sum(e[2] for e in log if e[0] == "generate")


@dataclass(frozen=True)
class Killed:
    data: Path
    registry: Path
    folder: Path
    """Where the killed run wrote: its judgment store and whatever it left beside its results
    (copy it before use)."""
    rows: dict
    """What it committed."""

    def resumed_in(self, tmp_path):
        """A copy of the killed run's folder, to resume in: (its store, its results file)."""
        folder = tmp_path / "resumed"
        shutil.copytree(self.folder, folder)
        return folder / STORE, folder / "r.jsonl"


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory):
    """The run with ``BASE`` flags, killed (SIGKILL) and interrupted (SIGINT) at its third
    engine call: its first two chunks committed, no file written."""
    root = tmp_path_factory.mktemp("first")
    data = root / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "response": f"In {1990 + i} we met."}) + "\n"
                            for i in range(RECORDS)))  # fmt: skip
    registry = fake_registry(root)
    env = os.environ | {"LOCALJURY_HOME": str(root / "home")}
    runs = {}
    for sig in (signal.SIGKILL, signal.SIGINT):
        folder = root / sig.name
        folder.mkdir()
        store, out = folder / STORE, folder / "r.jsonl"
        started = time.perf_counter()
        proc = killed_run(folder, command(data, registry, out, store), die_at=3, sig=sig, env=env)
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL, proc.stderr
        else:
            lines, err = proc.stderr.splitlines(), " ".join(proc.stderr.split())
            assert proc.returncode == 130 and any(line.startswith("interrupted") for line in lines), proc.stderr
            assert "the 16 judgments generated before this are kept in the judgment store" in err, err
            assert "the same command resumes from there" in err and "Traceback" not in err, err
        assert time.perf_counter() - started < 60  # the signal ended it, not the sleep
        assert not out.exists() and not list(folder.glob(".*.tmp"))
        rows = stored(store)
        # Two chunks of 2 records x 2 criteria, one request of 2 samples each.
        assert len(rows) == 8 and all(len(json.loads(v)["samples"]) == 2 for v in rows.values())
        runs[sig.name] = Killed(data, registry, folder, rows)
    return runs


#: (flags changed, criteria, prompts the resumed run must generate: the first run committed 8 of 12)
CHANGES = {
    "another chunk size": ({"--chunk-size": "3"}, CRITERIA, 4),
    "tie-break pass": ({"--tie-break": "pass"}, CRITERIA, 4),
    "tie-break abstain": ({"--tie-break": "abstain"}, CRITERIA, 4),
    "another seed": ({"--seed": "2"}, CRITERIA, 12),
    "another strictness": ({"--strictness": "3"}, CRITERIA, 12),
    "another temperature": ({"--temperature": "0.9"}, CRITERIA, 12),
    "one criterion changed": ({}, CRITERIA | {"polite": "The response is polite and warm."}, 6 + 2),
    "one criterion added": ({}, CRITERIA | {"brief": "The response is one sentence."}, 6 + 4),
    "fresh": ({"--fresh": None}, CRITERIA, 12),
    "seed, chunk size and tie-break": ({"--seed": "3", "--chunk-size": "4", "--tie-break": "pass"}, CRITERIA, 12),
}


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("change", CHANGES)
def test_a_resumed_run_with_changed_flags_gives_the_uninterrupted_runs_results_and_store(
    first_runs, tmp_path, monkeypatch, capsys, sig, change
):
    first = first_runs[sig]
    flags, criteria, to_generate = CHANGES[change]
    store, out = first.resumed_in(tmp_path)
    log = judged(monkeypatch, capsys, command(first.data, first.registry, out, store, flags, criteria))

    clean_store, clean_out = tmp_path / "clean" / "j.sqlite", tmp_path / "clean" / "r.jsonl"
    clean_log = judged(
        monkeypatch, capsys, command(first.data, first.registry, clean_out, clean_store, flags, criteria)
    )
    assert prompts(clean_log) == len(criteria) * RECORDS
    assert out.read_bytes() == clean_out.read_bytes() and not list(out.parent.glob(".*.tmp"))
    # Generated only what it lacked: what the first run committed, where the new flags ask for it, is reused.
    assert prompts(log) == to_generate
    now, clean = stored(store), stored(clean_store)
    assert clean.items() <= now.items()  # every generation the results come from, as an uninterrupted run made it
    assert first.rows.items() <= now.items()  # and nothing the first run committed is lost
    if "tie-break" in change:  # the data has ties: the tie-break decides verdicts here
        votes = [m["votes"] for line in out.read_text().splitlines() for m in json.loads(line)["models"]]
        assert [1, 0] in votes or [0, 1] in votes


def test_a_resumed_fresh_run_regenerates_what_the_first_run_committed(first_runs, tmp_path, monkeypatch, capsys):
    """--fresh after a kill, with an engine that now draws otherwise (its weights' build changed in
    a way their identity does not show): nothing of the first run's is in the results, and each
    generation it committed is replaced in the store."""
    first = first_runs["SIGKILL"]
    store, out = first.resumed_in(tmp_path)
    log = judged(
        monkeypatch, capsys, command(first.data, first.registry, out, store, {"--fresh": None}), salt="rebuilt"
    )
    clean_store, clean_out = tmp_path / "clean" / "j.sqlite", tmp_path / "clean" / "r.jsonl"
    judged(monkeypatch, capsys, command(first.data, first.registry, clean_out, clean_store), salt="rebuilt")
    assert prompts(log) == 12 and out.read_bytes() == clean_out.read_bytes()
    now = stored(store)
    assert now == stored(clean_store) and first.rows.keys() <= now.keys()
    assert all(now[k] != v for k, v in first.rows.items())  # each replaced: the old draws are gone
    # The same command without --fresh now loads no model and gives the same results.
    again = tmp_path / "again" / "r.jsonl"
    assert judged(monkeypatch, capsys, command(first.data, first.registry, again, store), salt="unused") == []
    assert again.read_bytes() == out.read_bytes()


def test_a_commit_killed_part_way_then_a_run_with_other_flags_commits_only_the_new_set(
    first_runs, tmp_path, monkeypatch, capsys
):
    """Killed between the renames of the results and the summary; the next run, with another seed,
    settles the old commit first, then writes a whole set of its own: results, summary and
    manifest of the new flags, which `verify` accepts."""
    first = first_runs["SIGKILL"]
    store, out = tmp_path / "j.sqlite", tmp_path / "o" / "r.jsonl"
    names = ("r.jsonl", "r.summary.json", "r.manifest.json")
    proc = killed_run(tmp_path, command(first.data, first.registry, out, store), renames=names, nth=2)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert list(out.parent.glob(".*.localjury.commit")) and not (out.parent / "r.manifest.json").exists()
    old_results = out.read_bytes()

    log = judged(monkeypatch, capsys, command(first.data, first.registry, out, store, {"--seed": "2"}))
    clean_out = tmp_path / "clean" / "r.jsonl"
    judged(monkeypatch, capsys, command(first.data, first.registry, clean_out, tmp_path / "clean.sqlite",
                                        {"--seed": "2"}))  # fmt: skip
    assert prompts(log) == 12 and out.read_bytes() == clean_out.read_bytes() != old_results
    summary = json.loads((out.parent / "r.summary.json").read_text())
    manifest = json.loads((out.parent / "r.manifest.json").read_text())
    assert summary["seed"] == 2 and manifest["seed"] == 2
    assert [p.name for p in out.parent.iterdir() if ".localjury." in p.name] == []
    code, stdout, err = run_cli(monkeypatch, capsys, "verify", out)
    assert code == 0 and "differ" not in stdout and "cut short" not in err, stdout + err
