"""`localjury verify` reads only the files of its own set, and each no further than the manifest
says it held: a manifest's paths are data. A summary at /proc/self/pagemap hung it; a
dataset at / walked the file system. Each such file is a check that differs, saying why it
was not read; a manifest that is not a regular file is refused (exit 2)."""

import json
import os
import subprocess
import sys

import pytest

from tests.fakes import run_args, run_cli


def bounded():
    """In the child: 60 s of CPU and 4 GiB of address space. Bounds on work, not timings: a
    verify that reads what it should takes a second, one that reads /proc/self/pagemap or
    walks / is stopped by them instead of running for hours."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def verify(*args):
    code = "from localjury.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "verify", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=bounded, timeout=600, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    return proc.returncode, proc.stdout, " ".join(proc.stderr.split())


@pytest.fixture
def run(tmp_path, fake_model, monkeypatch, capsys):
    """A finished run's results (and its manifest beside them), and a function that edits the manifest."""
    registry, _ = fake_model
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "response": f"answer {i}"}) + "\n" for i in range(3)))
    out = tmp_path / "o" / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, *run_args(data, registry, out, "--no-cache"))
    assert code == 0, err
    manifest = out.parent / "r.manifest.json"

    def edit(change):
        body = json.loads(manifest.read_text())
        change(body)
        manifest.write_text(json.dumps(body))

    return out, edit


def summary_at(path, size=None):
    def change(body):
        body["summary"]["path"] = str(path)
        if size is not None:
            body["summary"]["size"] = size

    return change


def dataset_at(path, size=None):
    def change(body):
        body["dataset"]["path"] = str(path)
        if size is not None:
            body["dataset"]["size"] = size

    return change


def gguf_file(name):
    def change(body):
        body["models"][0]["settings"]["engine"] = "llamacpp"
        body["models"][0]["files"] = {name: "ab" * 32}

    return change


def saved_dataset_with_links(tmp_path):
    """A datasets folder (its state.json) whose data file and subfolder are links out of it."""
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "state.json").write_text("{}")
    (folder / "data-00000-of-00001.arrow").symlink_to("/proc/self/pagemap")
    (folder / "everything").symlink_to("/")
    return folder


def fifo_summary(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    return summary_at(tmp_path / "fifo")


PAGEMAP = "/proc/self/pagemap"
UNREADABLE = "cannot be read (Invalid argument)"  # pagemap is read 8 bytes at a time
CASES = [
    ("summary at pagemap", lambda t: summary_at(PAGEMAP), f"summary {PAGEMAP}", "size 0, was"),
    ("summary at pagemap, size 0", lambda t: summary_at(PAGEMAP, 0), f"summary {PAGEMAP}", UNREADABLE),
    ("dataset at /", lambda t: dataset_at("/"), "dataset /", "a folder that is not a Hugging Face datasets folder"),
    ("dataset folder with links out", lambda t: dataset_at(saved_dataset_with_links(t), 2), "dataset", "…"),
    ("summary is a FIFO", fifo_summary, "summary", "not a regular file (a FIFO)"),
    ("a GGUF file at pagemap", lambda t: gguf_file(PAGEMAP), f"model fake: {PAGEMAP}", UNREADABLE),
]


@pytest.mark.parametrize(("case", "change", "check", "found"), CASES, ids=[c[0] for c in CASES])
def test_verify_reads_no_file_further_than_the_manifest_says(tmp_path, run, case, change, check, found):
    out, edit = run
    edit(change(tmp_path))
    code, stdout, err = verify(out)
    assert code == 1, (code, stdout, err)
    line = next(line for line in stdout.splitlines() if line.startswith(check))
    assert " NO " in line and found in line, line


@pytest.mark.parametrize("kind", ["FIFO", "device"])
def test_a_manifest_that_is_not_a_regular_file_is_refused(tmp_path, run, kind):
    out, _ = run
    manifest = tmp_path / "m.json"
    if kind == "FIFO":
        os.mkfifo(manifest)
    else:
        manifest = "/dev/zero"
    code, _, err = verify(out, "--manifest", manifest)
    assert code == 2 and f"{manifest} is not a regular file" in err, err


def test_a_manifest_past_the_size_of_any_manifest_is_refused(tmp_path, run):
    out, _ = run
    manifest = tmp_path / "m.json"
    with manifest.open("wb") as fh:
        fh.truncate(17 * 1024 * 1024)  # sparse: no disk used
    code, _, err = verify(out, "--manifest", manifest)
    assert code == 2 and "is over the 16,777,216-byte bound on a manifest; it is not read" in err, err
