"""`localjury show` reads a results file one bounded line at a time, as a regular file only:
`show /dev/zero` ran out of memory, a FIFO hung it, a 1.5 GB line aborted it, and a line that
was not a result printed a pydantic dump. Each is now one error naming the file and the line;
the judgments a reader can reach are shown beside it."""

import json
import os
import subprocess
import sys

import pytest

from localjury.errors import ConfigError
from localjury.results import record_result
from localjury.results.record_result import ModelJudgment, Quote, RecordResult, read_results
from localjury.run.result import RunResult
from tests.fakes import run_cli


def row(record_id: str, quote: str | None = None) -> str:
    """A results line of record ``record_id`` (with one quote of its response, if given)."""
    evidence = [[Quote(text=quote, field="response", start=0, end=len(quote))]] if quote else None
    model = ModelJudgment(model="fake", votes=[1], reasons=["ok"], abstentions=0, verdict=1, score=1.0,
                          evidence=evidence)  # fmt: skip
    result = RecordResult(record_id=record_id, metric="dated", score=1.0, error=None, models=[model])
    return result.model_dump_json() + "\n"


def bounded():
    """In the child: 60 s of CPU and 4 GiB of address space, so that a show that reads without
    bound is stopped instead of filling the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def show_child(*args, timeout=60):
    """`localjury show` in a child process; a hang fails the test (TimeoutExpired)."""
    code = "from localjury.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "show", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=bounded, timeout=timeout, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    return proc.returncode, proc.stdout, " ".join(proc.stderr.split())


def show(monkeypatch, capsys, *args):
    code, stdout, err = run_cli(monkeypatch, capsys, "show", *args)
    return code, stdout, " ".join(err.split())


@pytest.mark.parametrize("kind", ["FIFO", "/dev/zero", "folder"])
def test_show_refuses_what_is_not_a_regular_file_at_once(tmp_path, kind):
    path = {"FIFO": tmp_path / "r.jsonl", "/dev/zero": "/dev/zero", "folder": tmp_path}[kind]
    if kind == "FIFO":
        os.mkfifo(path)
    code, _, err = show_child(path, timeout=30)
    words = "is a folder, not a results file" if kind == "folder" else "is not a regular file"
    assert code == 2 and f"{path} {words}" in err and "Traceback" not in err, err


def test_a_line_over_the_bound_is_refused_by_its_number_after_the_rows_before_it(tmp_path, monkeypatch, capsys):
    """The tester's 1.5 GB line (SIGABRT) at a smaller bound: read past, never held whole; the
    real bound's case takes a GiB of memory and seconds, too much for a unit test."""
    monkeypatch.setattr(record_result, "MAX_RESULT_LINE_BYTES", 4096)
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1") + json.dumps({"record_id": "x" * 10_000}) + "\n" + row("r3"))
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 2 and f"{path}, line 2: 10,017 bytes, over the 4,096-byte bound on a line" in err, err
    assert "the reading stopped there" in err and "r1 · dated" in stdout and "r3" not in stdout


NOT_RESULTS = [
    ("a list", "[1, 2]", "a JSON array, not an object"),
    ("a number", "3", "a JSON number, not an object"),
    ("null", "null", "JSON null, not an object"),
    ("missing fields", '{"record_id": "r2"}', "metric: Field required; 3 more problems"),
    ("a wrong type", row("r2").replace('"votes":[1]', '"votes":"yes"'), "models.0.votes: Input should be a valid list"),
    ("an unknown field", row("r2").replace('{"record_id"', '{"extra": 1, "record_id"'), "extra: Extra inputs"),
    (
        "a lone surrogate",
        row("r2").replace('"r2"', '"\\ud800"'),
        "record_id: not valid Unicode (a lone surrogate, \\ud800)",
    ),
    (
        "a surrogate as a key",
        row("r2").replace('{"record_id"', '{"\\udc80": 1, "record_id"'),
        "the line: a key that is not valid Unicode",
    ),
]


@pytest.mark.parametrize(("case", "line", "why"), NOT_RESULTS, ids=[c[0] for c in NOT_RESULTS])
def test_a_line_that_is_not_a_result_is_named_and_the_others_are_shown(tmp_path, monkeypatch, capsys, case, line, why):
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1") + line.rstrip("\n") + "\n" + row("r3"))
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 2 and f"{path}, line 2 is not a result (" in err and why in err, err
    assert "ValidationError" not in err and "unexpected" not in err and "input_value" not in err, err
    assert "r1 · dated" in stdout and "r3 · dated" in stdout, stdout
    assert "; 2 judgments of the other lines are shown; check that the file is one that" in err


def test_every_line_that_is_not_a_result_is_counted(tmp_path, monkeypatch, capsys):
    """The dataset given in place of the results: the first line named, the others counted."""
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "response": "a"}) + "\n" for i in range(5)))
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 2 and f"{path}, line 1 is not a result (" in err and "(nor are 4 more lines)" in err, err
    assert "no judgment matches" in stdout


UNREADABLE = [
    ("nested 10^5 deep", "[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
    ("not JSON", '{"record_id": ', "not valid JSON"),
    ("not UTF-8", '{"record_id": "\udcff"}', "not valid UTF-8"),
    ("a 5000-digit number", '{"score": ' + "9" * 5000 + "}", "not readable as JSON"),
]


@pytest.mark.parametrize(("case", "line", "why"), UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_a_line_that_cannot_be_read_stops_the_reading_there(tmp_path, monkeypatch, capsys, case, line, why):
    path = tmp_path / "r.jsonl"
    path.write_bytes(row("r1").encode() + line.encode("utf-8", "surrogateescape") + b"\n" + row("r3").encode())
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 2 and f"{path}, line 2: " in err and why in err and "the reading stopped there" in err, err
    assert "r1 · dated" in stdout and "r3" not in stdout and "Traceback" not in err


def test_a_first_line_that_cannot_be_read_is_the_error(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("not json\n" + row("r2"))
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 2 and f"{path}, line 1: not valid JSON" in err and "stopped" not in err, err
    assert stdout == ""


def test_read_results_raises_at_a_line_that_is_not_a_result(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1") + "\n" + "[]\n")
    with pytest.raises(ConfigError, match=r", line 3 is not a result \(a JSON array, not an object\); check that"):
        list(read_results(path))
    result = RunResult(results=[], summary=None, results_path=path)  # type: ignore[arg-type]
    rows = result.iter_results()
    assert next(rows).record_id == "r1"
    with pytest.raises(ConfigError, match="line 3 is not a result"):
        next(rows)


def test_a_missing_record_is_named_only_when_the_file_read_whole(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1"))
    code, _, err = show(monkeypatch, capsys, path, "--record", "r9")
    assert code == 2 and f"no record 'r9' in {path}" in err, err
    path.write_text(row("r1") + "[]\n")
    code, _, err = show(monkeypatch, capsys, path, "--record", "r9")
    assert code == 2 and "line 2 is not a result" in err and "no record" not in err, err


def test_data_that_is_a_fifo_is_refused_at_once(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1", quote="In 1999"))
    os.mkfifo(tmp_path / "d.jsonl")
    code, _, err = show_child(path, "--data", tmp_path / "d.jsonl", timeout=30)
    assert code == 2 and f"{tmp_path / 'd.jsonl'} is not a regular file (a FIFO)" in err, err


def test_data_is_read_only_for_the_quotes(tmp_path, monkeypatch, capsys):
    path, data = tmp_path / "r.jsonl", tmp_path / "d.jsonl"
    path.write_text(row("r1", quote="In 1999") + row("r2"))
    data.write_text(json.dumps({"id": "r1", "response": "In 1999 it rained."}) + "\n")
    code, stdout, err = show(monkeypatch, capsys, path, "--data", data)
    assert code == 0 and "response:" in stdout and "In 1999 it rained." in stdout, (stdout, err)
    os.mkfifo(tmp_path / "fifo.jsonl")  # no quote to place: the data is not opened
    code, stdout, err = show(monkeypatch, capsys, path, "--record", "r2", "--data", tmp_path / "fifo.jsonl")
    assert code == 0 and "r2 · dated" in stdout, err


def test_a_manifest_beside_that_cannot_be_read_is_said_and_the_judgments_shown(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text(row("r1", quote="In 1999"))
    os.mkfifo(tmp_path / "r.manifest.json")
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 0 and "r1 · dated" in stdout and "quoted at characters 0-7" in stdout, (stdout, err)
    assert f"{tmp_path / 'r.manifest.json'} is not a regular file (a FIFO)" in err
    assert "the quotes are shown without their texts (pass --data to show them)" in err
    path.write_text(row("r1"))  # no quote to place: the manifest is not read
    code, stdout, err = show(monkeypatch, capsys, path)
    assert code == 0 and "r1 · dated" in stdout and err == "", err
