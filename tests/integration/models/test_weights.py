"""Damaged weights of the real embedded model: refused before anything loads, as a config error."""

import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def truncated_copy(spec, folder, keep):
    """The model's folder with its model.safetensors cut after ``keep`` bytes (what an
    interrupted copy or download leaves); returns the full file's size."""
    source = spec.local_dir() / "model.safetensors"
    shutil.copytree(spec.local_dir(), folder, ignore=shutil.ignore_patterns("*.safetensors"))
    with open(source, "rb") as src, open(folder / "model.safetensors", "wb") as dst:
        dst.write(src.read(keep))
    return source.stat().st_size


@pytest.mark.parametrize("named_by", ["path", "registry"])
def test_truncated_weights_stop_the_cli_with_exit_2_naming_the_file(smollm, tmp_path, named_by):
    folder = tmp_path / "broken"
    full = truncated_copy(smollm, folder, keep=1 << 20)
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "user_input": "When?", "response": "In 1989."}\n')
    out = tmp_path / "r.jsonl"
    if named_by == "registry":
        (tmp_path / "models.yaml").write_text(f"models:\n  broken:\n    path: {folder}\n")
        models = ["--models", "broken", "--registry", str(tmp_path / "models.yaml")]
    else:
        models = ["--models", str(folder)]
    proc = subprocess.run(
        [sys.executable, "-c", "from localjury.cli import main; main()", "run", str(data),
         "--criterion", "x=The response is polite.", *models, "--no-cache", "--quiet", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: model 'broken': weights file {folder / 'model.safetensors'} is truncated: {1 << 20:,} bytes, "
        f"the header says {full:,}; copy or download the model's weights into that folder again"
    ]
    assert not out.exists()
