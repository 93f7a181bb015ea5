"""A commit journal planted beside what `localjury bench` and `localjury calibrate` write is refused
as `run` refuses one (tests/unit/results/test_journal.py): before any model loads, with an error
naming the journal and the rule it fails, and it and every file it names (the user's files
elsewhere, the labels, the previous outputs) left byte for byte as they were."""

import json
from importlib.util import find_spec

import pytest

import localjury.run.generate
from localjury.bench import NEEDS
from tests.fakes import GOLD, factory, gold_of, judgment, run_cli
from tests.unit.results import test_journal
from tests.unit.results.test_journal import CASES, PROVE, entry, ident, signed, tree

pytestmark = pytest.mark.skipif(
    any(find_spec(name) is None for name in NEEDS), reason="bench and calibrate need the bench extra"
)

METRIC = 'correct="The answer is right."'
victims = test_journal.victims  # the user's two files outside the sent folder
#: Each command, and the output a journal is planted for: bench's predictions (one of its set)
#: and metrics.json (its set's anchor, whose name its own journal takes), calibrate's file.
PLANTS = [("bench", "predictions.jsonl"), ("bench", "metrics.json"), ("calibrate", "cal.json")]


@pytest.fixture
def sent(tmp_path):
    """A folder someone sent: labelled records, and a bench's or calibration's earlier outputs."""
    folder = tmp_path / "sent"
    folder.mkdir()
    rows = [{"id": f"r{i}", "response": f"answer {i} gold {g}", "gold": g} for i, g in enumerate(GOLD)]
    (folder / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def command(name, sent, registry):
    """``localjury bench`` (writing into ``sent``) or ``localjury calibrate`` (``sent/cal.json``) of the labels."""
    out = ["--format", "jsonl", "--out", sent] if name == "bench" else ["--out", sent / "cal.json"]
    return [name, sent / "d.jsonl", *out, "--metric", METRIC, "--models", "fake", "--registry", registry,
            "--no-cache", "--quiet"]  # fmt: skip


def planted(case, sent, victims, anchor):
    """The journal a sender plants for the output ``anchor`` of ``sent``, by case (as
    test_journal.planted plants one for a run's results): (its name, its content)."""
    one, two = victims
    elsewhere = [entry(one, backup=two, old=ident(one)), entry(sent / anchor)]
    own = f".{anchor}.localjury.commit"
    if case == "unsigned, naming files elsewhere":
        return ".innocent.localjury.commit", json.dumps(
            {"localjury_commit": 1, "pid": 1, "host": "x", "files": elsewhere}
        )
    if case == "a made-up signature":
        body = {"localjury_commit": 2, "pid": 1, "host": "x", "files": elsewhere, "mac": "0" * 64}
        return ".innocent.localjury.commit", json.dumps(body)
    if case == "a signature that is not hex":
        body = {"localjury_commit": 2, "pid": 1, "host": "x", "files": elsewhere, "mac": "é" * 64}
        return ".innocent.localjury.commit", json.dumps(body)
    if case == "signed with another user's key":
        return ".innocent.localjury.commit", signed(elsewhere, bytes(range(32)))
    from localjury.results._journal import commit_key

    key = commit_key(create=True)  # as if the key leaked: the rules of its own set still hold
    if case == "signed, naming a file through ..":
        files = [entry("../user/notes.txt", backup="../user/.bashrc", old=ident(one)), entry(anchor)]
        return own, signed(files, key)
    if case == "signed, with the dataset as a backup":
        return own, signed([entry(anchor, backup="d.jsonl", old=ident(sent / "d.jsonl"))], key)
    raise AssertionError(case)


@pytest.mark.parametrize(("case", "reason"), CASES, ids=[c for c, _ in CASES])
@pytest.mark.parametrize(("name", "anchor"), PLANTS, ids=[f"{n}:{a}" for n, a in PLANTS])
def test_a_planted_journal_stops_bench_and_calibrate_and_nothing_it_names_is_touched(
    sent, victims, fake_model, monkeypatch, capsys, name, anchor, case, reason
):
    registry, log = fake_model
    (sent / anchor).write_text(f"the previous {anchor}\n")
    journal, content = planted(case, sent, victims, anchor)
    (sent / journal).write_text(content)
    before = tree(sent, victims[0].parent)
    code, _, err = run_cli(monkeypatch, capsys, *command(name, sent, registry))
    err = " ".join(err.split())
    assert code == 2, err
    assert f"the commit journal {sent / journal} {PROVE}" in err and "Traceback" not in err
    assert f"for these files: {reason}" in err
    assert "no file it names was touched" in err and "move it aside" in err
    assert log == []  # refused before any model loaded
    assert tree(sent, victims[0].parent) == before  # the journal too: reported, never removed


@pytest.mark.parametrize("name", ["bench", "calibrate"])
def test_without_the_planted_journal_the_same_command_writes_its_files(sent, fake_model, monkeypatch, capsys, name):
    """The control: the refusals above are the journal's doing, and these commands would have
    written over the files they leave untouched."""
    registry, _ = fake_model
    log: list = []
    # Right on the first and third sample, wrong on the second: calibrate has scores to fit.
    votes = factory(lambda m, p, j: judgment(gold_of(p) if j != 1 else 1 - gold_of(p)), log)
    monkeypatch.setattr(localjury.run.generate, "load_engine", votes)
    code, _, err = run_cli(monkeypatch, capsys, *command(name, sent, registry))
    assert code == 0, err
    assert log[0] == ("load", "fake")
    written = ["predictions.jsonl", "metrics.json", "report.md", "report.html"] if name == "bench" else ["cal.json"]
    assert all((sent / f).is_file() for f in written)
    assert not list(sent.glob(".*.localjury.*"))
