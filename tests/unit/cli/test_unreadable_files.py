"""A file that says it is regular but cannot be read (``/proc/self/mem``: ``stat`` says regular,
every read at its start fails with EIO) is a configuration error naming the file and the
option, exit 2, wherever a path is given: each option of the command line, and each reader of
the library (a dataset, a calibration file, a YAML file)."""

import os
from pathlib import Path

import pytest

from localjury import AspectCritic, evaluate
from localjury._files import read_yaml
from localjury.errors import ConfigError
from localjury.records.readers import iter_records
from localjury.votes.calibration import load_calibration
from tests.fakes import factory, fake_registry, judgment, run_cli

MEM = Path("/proc/self/mem")


def _unreadable() -> bool:
    try:
        fd = os.open(MEM, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.pread(fd, 1, 0)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


pytestmark = pytest.mark.skipif(not _unreadable(), reason="needs /proc/self/mem, whose reads at offset 0 fail")


@pytest.mark.parametrize("option", ["DATA", "--calibration", "--criteria", "--profile", "--rubrics", "--registry"])
def test_every_path_option_refuses_a_file_it_cannot_read_with_exit_2(tmp_path, monkeypatch, capsys, option):
    registry = fake_registry(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "response": "x"}\n')
    given = {"--registry": registry, option: MEM}
    args = ["run", MEM if option == "DATA" else data, "--criterion", "dated=The response includes a year."]
    args += ["--models", "fake", "--quiet", "--out", tmp_path / "out.jsonl"]
    args += [x for flag, path in given.items() if flag != "DATA" for x in (flag, path)]
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2, err
    assert f"cannot read {option} /proc/self/mem: Input/output error; it opens but its content cannot be read" in err
    assert "free space" not in err and "unexpected" not in err


def test_the_library_s_readers_refuse_it_naming_what_it_is():
    with pytest.raises(ConfigError, match=r"cannot read calibration file /proc/self/mem: Input/output error"):
        load_calibration(MEM)
    with pytest.raises(ConfigError, match=r"cannot read criteria file /proc/self/mem: Input/output error"):
        read_yaml(MEM, "criteria file")


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet", ".eval"])
def test_a_dataset_of_any_format_that_cannot_be_read_is_a_config_error(tmp_path, suffix):
    path = tmp_path / f"d{suffix}"
    path.symlink_to(MEM)  # a dataset's name, the special file's content
    what = "inspect_ai eval log" if suffix == ".eval" else "dataset file"
    with pytest.raises(ConfigError, match=rf"cannot read {what} .*d{suffix}: Input/output error"):
        list(iter_records(path))


def test_evaluate_refuses_the_dataset_before_it_hashes_it_or_loads_a_model(tmp_path):
    log = []
    with pytest.raises(ConfigError, match=r"cannot read dataset file /proc/self/mem: Input/output error"):
        evaluate(
            MEM,
            [AspectCritic("dated", "The response includes a year.")],
            ["fake"],
            engine_factory=factory(lambda m, p, j: judgment(1), log),
            registry=fake_registry(tmp_path),
            out=tmp_path / "out.jsonl",
        )
    assert log == []  # no engine was made
