"""`localjury verify` on a manifest that names hostile files: a file of the kernel, a 64 GiB
sparse file (no size is recorded for a model's files, so their size cannot be checked before
hashing), a FIFO, a device, one file under many names, or half a million model files. Each is a
check that differs, saying why the file was not read, or the manifest is refused; none makes
verify hang or read what is not on a disk."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localjury import _hashing
from localjury._hashing import MAX_HOLE_BYTES, found_sha256, stable_sha256
from localjury.errors import ConfigError
from localjury.results import verify as verify_module
from localjury.results.verify import MAX_CHECKS, read_manifest
from tests.unit.results import test_manifest_verify


def bounded():
    """In the child: 20 s of CPU (hashing 64 GiB takes minutes) and 4 GiB of address space."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def verify(*args, timeout=60):
    """`localjury verify` in a child process; a hang fails the test (TimeoutExpired)."""
    code = "from localjury.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "verify", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=bounded, timeout=timeout, env={**os.environ, "COLUMNS": "250"})  # fmt: skip
    return proc.returncode, proc.stdout, " ".join(proc.stderr.split())


#: A finished run's results (its manifest beside them), and a function that edits the manifest.
finished = test_manifest_verify.run


def model_files(*names, digest="ab" * 32):
    """The manifest's first model, loaded as a GGUF model: its files are the ``names`` given."""

    def change(body):
        body["models"][0]["settings"]["engine"] = "llamacpp"
        body["models"][0]["files"] = dict.fromkeys(map(str, names), digest)

    return change


def sparse(tmp_path, size=64 << 30):
    path = tmp_path / "sparse.gguf"
    with path.open("wb") as fh:
        fh.truncate(size)  # no disk used
    return path


def kernel_file():
    """A regular file of the kernel that says it holds bytes: /proc/kcore (128 TiB, readable by
    root on a host), else a sysfs attribute (4096)."""
    for path in [Path("/proc/kcore"), *sorted(Path("/sys/kernel/mm").glob("*/*"))]:
        try:
            st = path.stat()
        except OSError:
            continue
        if path.is_file() and st.st_size > 0:
            return path
    pytest.skip("no file of the kernel with a size here")


def fifo(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    return tmp_path / "fifo"


CASES = [
    ("a file of the kernel", lambda t: kernel_file(), "a file of the kernel"),
    ("a 64 GiB sparse file", sparse, "a sparse file: 68,719,476,736 of its 68,719,476,736 bytes are holes"),
    ("a FIFO", fifo, "not a regular file (a FIFO): not read"),
    ("/dev/zero", lambda t: "/dev/zero", "not a regular file (a device): not read"),
    ("a NUL byte", lambda t: "a\0b", "not a valid path (it holds a NUL byte)"),
]


@pytest.mark.parametrize(("case", "make", "found"), CASES, ids=[c[0] for c in CASES])
def test_a_model_file_not_on_a_disk_is_not_read(tmp_path, finished, case, make, found):
    out, edit = finished
    name = make(tmp_path)
    edit(model_files(name))
    code, stdout, err = verify(out, timeout=60)
    assert code == 1, (code, stdout, err)
    line = next(line for line in stdout.splitlines() if line.startswith("model fake:"))
    assert " NO " in line and found in line, line


def test_a_sparse_dataset_of_the_recorded_size_is_not_read(tmp_path, finished):
    """A manifest that knows a sparse file's size (/var/log/lastlog: 292 bytes a user id)."""
    out, edit = finished
    path = sparse(tmp_path)

    def change(body):
        body["dataset"].update(path=str(path), size=64 << 30)

    edit(change)
    code, stdout, err = verify(out)
    line = next(line for line in stdout.splitlines() if line.startswith("dataset"))
    assert code == 1 and " NO " in line and "a sparse file" in line, (stdout, err)


def test_half_a_million_model_files_are_refused_before_any_is_read(tmp_path, finished):
    out, edit = finished
    edit(model_files(*(f"f{i}" for i in range(500_000)), digest="x"))  # 6 MB: under the bound on a manifest
    code, _, err = verify(out)
    assert code == 2 and "r.manifest.json asks for 500,0" in err and f"over the {MAX_CHECKS:,} that verify makes" in err
    assert "nothing is read" in err and "check where this one comes from" in err, err


def test_the_bound_on_checks_is_the_one_the_help_states():
    from localjury.cli.verify import verify as command

    assert f"more than {MAX_CHECKS:,} checks" in " ".join((command.__doc__ or "").split())


def test_a_model_folder_of_more_files_than_the_bound_is_not_read(tmp_path, finished, monkeypatch):
    out, _ = finished
    path = out.parent / "r.manifest.json"
    manifest = read_manifest(path)
    model = manifest.models[0].model_copy(update={"files": {}})
    for i in range(3):  # beside its config.json and model.safetensors
        (Path(model.path) / f"model-{i}.safetensors").write_bytes(b"x")
    manifest = manifest.model_copy(update={"packages": dict(list(manifest.packages.items())[:2]), "models": [model]})
    monkeypatch.setattr(verify_module, "MAX_CHECKS", 4)  # 2 packages, 1 model, 0 model files: 3 asked
    checks = verify_module.verify(manifest, path, out)
    (check,) = [c for c in checks if c.what.startswith("model")]
    assert not check.ok and check.found == "5 files, over the 4 verify checks: not read", check
    monkeypatch.setattr(verify_module, "MAX_CHECKS", 2)
    with pytest.raises(ConfigError, match=r"r.manifest.json asks for 3 checks \(2 packages, 1 models, 0 model files\)"):
        verify_module.verify(manifest, path, out)


def test_one_file_under_many_names_is_read_once(tmp_path):
    path = tmp_path / "weights.gguf"
    path.write_bytes(os.urandom(1 << 16))
    seen: dict = {}
    digest = found_sha256(path, seen=seen)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest() and list(seen.values()) == [digest]
    (key,) = seen
    seen[key] = "remembered"  # not read again: the file's identity is known
    assert found_sha256(tmp_path / "." / "weights.gguf", seen=seen) == "remembered"


def test_a_dense_file_and_a_small_hole_are_read(tmp_path):
    """Holes up to MAX_HOLE_BYTES, or under half a file, are read: a file is refused only when
    it is mostly what no disk holds."""
    small = sparse(tmp_path, MAX_HOLE_BYTES)
    assert stable_sha256(small, on_disk=True) == hashlib.sha256(bytes(MAX_HOLE_BYTES)).hexdigest()
    dense = tmp_path / "dense.bin"
    dense.write_bytes(os.urandom(1 << 20))
    assert stable_sha256(dense, on_disk=True) == hashlib.sha256(dense.read_bytes()).hexdigest()
    fd = os.open(small, os.O_RDONLY)
    try:
        assert _hashing._data_bytes(fd, MAX_HOLE_BYTES) in (0, MAX_HOLE_BYTES)  # 0 where SEEK_HOLE tells
    finally:
        os.close(fd)


@pytest.fixture
def silent_server():
    """A local port that accepts connections and never answers: the URL of its API."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    threading.Thread(target=lambda: accepted.extend(server.accept() for _ in range(8)), daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    server.close()


def served(url, name="s"):
    from localjury.engines.server.client import ServedModel
    from localjury.models.identity import ModelRecord

    settings = {"base_url": url, "engine": "server", "server": {"request_timeout": 1e6, "connect_timeout": 1e6}}
    return ModelRecord(name=name, path=url, sha256="x", files={}, settings=settings,
                       served=ServedModel(base_url=url, model="m"))  # fmt: skip


def test_a_server_is_waited_for_no_longer_than_verify_says(silent_server, monkeypatch):
    """The manifest's entry asks to wait 11 days for an answer; verify waits SERVER_TIMEOUT."""
    import threading

    monkeypatch.setattr(verify_module, "SERVER_TIMEOUT", 1.0)
    checks = []
    asking = threading.Thread(target=lambda: checks.append(verify_module._check_served(served(silent_server))))
    asking.daemon = True  # should it wait on, the test fails instead of waiting with it
    asking.start()
    asking.join(15)
    (check,) = checks
    assert not check.ok and check.found.startswith("not checked: ") and "no answer from the server" in check.found


def test_servers_past_the_bound_are_not_asked(monkeypatch):
    monkeypatch.setattr(verify_module, "MAX_SERVED", 1)
    check = verify_module._check_served(served("http://127.0.0.1:9/v1"), asked=1)
    assert not check.ok and check.found == "not checked: the manifest names more than 1 models on servers"


def test_a_name_of_megabytes_is_printed_cut(tmp_path):
    """A 4 MB file name took 30 s to lay out in the table; a cell is cut past any path's length."""
    import io

    from localjury._terminal import SafeConsole
    from localjury.cli.verify import MAX_CELL, print_checks
    from localjury.results.verify import Check

    console = SafeConsole(file=io.StringIO(), width=200)
    name = "model fake: " + "a" * 4_000_000
    print_checks([Check(what=name, ok=False, expected="b" * 4_000_000, found="file missing")], tmp_path, console)
    shown = console.file.getvalue()
    assert len(shown) < 20 * MAX_CELL and "(4,000,012 characters)" in " ".join(shown.split())
