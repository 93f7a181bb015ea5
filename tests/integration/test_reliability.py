"""Reliability on the real embedded model: SIGKILL and resume, corrupt weights, Ctrl-C (no network:
tests/system/test_no_network.py)."""

import json
import os
import shutil
import signal
import sqlite3
import time

import pytest
from typer.testing import CliRunner

from localjury import AspectCritic, evaluate
from localjury.cli import app
from localjury.engines import load_engine
from localjury.errors import EngineError, ModelNotAvailableError
from localjury.models.registry import ModelSpec
from tests import ROOT
from tests.cli_process import cli, finish, rows

pytestmark = pytest.mark.slow

DATA = ROOT / "benchmarks" / "data" / "dated_answers.jsonl"
DATED = "The response must include a specific date or year."


def rerun(*args):
    """The command again, in this process (typer's runner): what a rerun is tested for is the
    store and files the interrupted process left, and here it shares the module's load of
    SmolLM2 (tests/conftest.py) instead of starting a second interpreter. Its exit code, stdout
    and stderr."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def wait_for_commits(proc, cache, at_least, timeout=600):
    """Poll the judgment store (read-only) until the running CLI has committed ``at_least``
    generations, or it ended; return how many it had committed."""
    deadline = time.monotonic() + timeout
    committed = 0
    while time.monotonic() < deadline and proc.poll() is None and committed < at_least:
        if cache.exists():
            with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
                try:
                    committed = db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
                except sqlite3.OperationalError:
                    committed = 0
        if committed < at_least:
            time.sleep(0.2)
    return committed


def test_a_run_killed_with_sigkill_resumes_and_gives_the_uninterrupted_results(smollm, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(DATA.read_text().splitlines(keepends=True)[:12]))
    cache, out = tmp_path / "store.sqlite", tmp_path / "results.jsonl"
    args = [
        "run", str(data), "--criterion", f"dated={DATED}",
        "--models", "smollm2-135m-instruct", "--engine", "llamacpp", "--chunk-size", "3", "--seed", "2", "--quiet",
    ]  # fmt: skip
    proc = cli(*args, "--cache", str(cache), "--out", str(out))
    committed = wait_for_commits(proc, cache, 3)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert committed >= 3 and not out.exists()  # no half-written results file

    code, _, err = rerun(*args, "--cache", str(cache), "--out", str(out))
    assert code == 0, err
    resumed = rows(out)
    summary = json.loads((tmp_path / "results.summary.json").read_text())
    assert summary["models"][0]["cached"] >= 3 and summary["models"][0]["judgments"] == 12
    assert [r["record_id"] for r in resumed] == [json.loads(line)["id"] for line in data.read_text().splitlines()]

    # Samples are seeded per (seed, prompt, sample): resuming cannot change a verdict. An
    # uninterrupted run of the first 6 records (the first 3 or more stored before the kill, in
    # chunks of 3: the rest judged after it), the same settings through the Python API, gives the
    # same votes.
    first6 = tmp_path / "first6.jsonl"
    first6.write_text("".join(data.read_text().splitlines(keepends=True)[:6]))
    clean = evaluate(
        first6, [AspectCritic("dated", DATED)], ["smollm2-135m-instruct"],
        engine="llamacpp", chunk_size=3, seed=2, use_cache=False,
    )  # fmt: skip
    assert [(r["record_id"], r["models"][0]["votes"]) for r in resumed[:6]] == [
        (r.record_id, r.models[0].votes) for r in clean.iter_results()
    ]


def test_corrupt_weights_give_a_clear_error(smollm, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(smollm.local_dir(), folder, ignore=shutil.ignore_patterns("*.safetensors"))
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    # A damaged file is caught by its header before anything loads: a config error (exit 2).
    with pytest.raises(
        ModelNotAvailableError, match=r"model 'broken': weights file .*model\.safetensors is not a safetensors file"
    ):
        load_engine(ModelSpec(name="broken", path=str(folder)))
    # A whole file the backend still refuses (an unknown dtype) is the engine's error.
    header = b'{"w": {"dtype": "XX", "shape": [8], "data_offsets": [0, 8]}}'
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    with pytest.raises(EngineError, match=r"transformers engine, model 'broken': cannot load the model from"):
        load_engine(ModelSpec(name="broken", path=str(folder)))


def test_ctrl_c_keeps_what_was_judged_says_so_and_the_rerun_resumes(smollm, tmp_path):
    data = tmp_path / "d.jsonl"
    # 4 chunks, interrupted after the first (as the SIGKILL test above): room for the signal to
    # land before the run could end.
    data.write_text("".join(DATA.read_text().splitlines(keepends=True)[:12]))
    cache, out = tmp_path / "store.sqlite", tmp_path / "results.jsonl"
    args = [
        "run", str(data), "--criterion", f"dated={DATED}",
        "--models", "smollm2-135m-instruct", "--engine", "llamacpp", "--chunk-size", "3", "--seed", "2", "--quiet",
        "--cache", str(cache), "--out", str(out),
    ]  # fmt: skip
    # Ctrl-C reaches the run even where the suite itself ignores SIGINT (started in the
    # background by a non-interactive shell), which the child would inherit.
    proc = cli(*args, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for_commits(proc, cache, 3)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == 130, err
    # One line says it (after any notice the engine gave at load, such as llama.cpp running
    # without its repacked kernels on an AMX machine), and no traceback.
    assert any(line.startswith("interrupted") for line in err.splitlines()) and "Traceback" not in err, err
    assert "judgments generated before this are kept in the judgment store" in err
    assert "the same command resumes from there" in err
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))

    code, _, err = rerun(*args)
    assert code == 0, err
    summary = json.loads((tmp_path / "results.summary.json").read_text())
    assert summary["models"][0]["cached"] >= 3 and summary["models"][0]["judgments"] == 12
