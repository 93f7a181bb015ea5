"""The settings' options are derived from the configs' fields: every field of a run is an option
of `run`, every field a bench, a calibration or an alignment adds is an option of `bench`,
`calibrate` or `align`, each with its field's description as its help and its field's bounds;
the cluster's options are a RayCluster's fields; and what the options say reaches the command's
config as the same settings given in Python would."""

import typing

import pytest
import typer

import localjury.run.pipeline
import localjury.run.prepare
from localjury._setting_bounds import Bounds
from localjury.bench.config import AlignConfig, BenchConfig, CalibrateConfig
from localjury.cli import app
from localjury.cli._common import cli_words
from localjury.cli._settings import FACES, help_text, option
from localjury.errors import ConfigError
from localjury.run.cluster import RayCluster
from localjury.run.config import GROUPS, RunConfig
from tests.fakes import run_cli


def run_options(name: str = "run") -> dict[str, typing.Any]:
    """A command's options by their first flag: the typer ParameterInfo of each."""
    command = next(c for c in app.registered_commands if c.callback.__name__ == name)
    found = {}
    for hint in typing.get_type_hints(command.callback, include_extras=True).values():
        for extra in typing.get_args(hint)[1:]:
            if isinstance(extra, typer.models.OptionInfo):
                decls = [d for d in (extra.default, *(extra.param_decls or ())) if isinstance(d, str)]
                found[decls[0]] = extra
    return found


@pytest.mark.parametrize("name", [n for g in GROUPS.values() for n in g.model_fields])
def test_every_setting_is_an_option_of_run_with_its_fields_help(name):
    field = next(g.model_fields[name] for g in GROUPS.values() if name in g.model_fields)
    flag = FACES[name].flag if name in FACES and FACES[name].flag else "--" + name.replace("_", "-")
    info = run_options()[flag]
    face = FACES.get(name)
    assert info.help == ((face.help if face else None) or cli_words(help_text(field.description)))
    assert field.description and len(field.description.split()) >= 5  # a help a user can act on
    bounds = Bounds.of(field)
    closed = bounds.gt is None and bounds.lt is None  # typer shows no half range (threshold's < 1)
    assert (info.min, info.max) == ((bounds.ge, bounds.le) if closed else (None, None))


def test_the_bounds_are_declared_once_as_field_constraints():
    assert (run_options()["--strictness"].min, run_options()["--strictness"].max) == (1, 64)
    assert (run_options()["--seed"].min, run_options()["--seed"].max) == (0, 2**32 - 1)
    assert not [name for name, face in FACES.items() if hasattr(face, "min") or hasattr(face, "max")]


@pytest.mark.parametrize(("name", "flag"), [("address", "--address"), ("replicas", "--replicas"),
                                            ("cpus_per_replica", "--replica-cpus")])  # fmt: skip
@pytest.mark.parametrize("command", ["run", "bench"])
def test_the_cluster_options_are_a_ray_clusters_fields(command, name, flag):
    field = RayCluster.model_fields[name]
    info = run_options(command)[flag]
    text = cli_words(help_text(field.description))
    assert info.help.startswith("With --cluster ray: ") and info.help.lower().endswith(text.lower())
    assert "`" + "replicas`" not in info.help and "cpus_per_replica" not in info.help  # the flags, named as flags
    assert (info.min, info.max) == (Bounds.of(field).ge, None)
    assert run_options(command)["--cluster"].help.startswith("ray: shard each model's pass")


def test_a_fields_rst_reads_as_plain_text():
    assert help_text("See :class:`~localjury.metrics.checklist.Checklist` and ``seed``.\n  More.") == (
        "See Checklist and `seed`. More."
    )
    assert option("use_cache").name == "no_cache" and option("use_cache").default is False


def test_the_options_reach_the_runs_config(monkeypatch, capsys, tmp_path):
    seen = {}

    def evaluate(run):
        seen["config"] = run.settled.config
        raise ConfigError("seen")

    monkeypatch.setattr(localjury.run.pipeline.Run, "evaluate", evaluate)
    monkeypatch.setattr(localjury.run.prepare, "jury_of", lambda config: [])  # models a and b are in no registry
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    args = ["run", data, "-c", "d=Dated.", "--models", "a, b", "-k", "3", "--seed", "7", "--no-cache", "--adaptive",
            "--tie-break", "pass", "--on-overflow", "truncate", "--chunk-size", "5", "--temperature", ".5",
            "--ungrounded", "abstain"]  # fmt: skip
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "seen" in err
    expected = RunConfig.of(models=["a", "b"], strictness=3, seed=7, use_cache=False, tie_break="pass",
                            on_overflow="truncate", chunk_size=5, adaptive=True, temperature=0.5,
                            ungrounded="abstain")  # fmt: skip
    assert seen["config"] == expected


CONFIGS = {"bench": BenchConfig, "calibrate": CalibrateConfig, "align": AlignConfig}


@pytest.mark.parametrize(
    ("command", "name"), [(c, n) for c, cls in CONFIGS.items() for n in cls.model_fields if n != "run"]
)
def test_every_setting_a_bench_config_adds_is_an_option_of_its_command(command, name):
    field = CONFIGS[command].model_fields[name]
    face = FACES.get(name)
    flag = face.flag if face and face.flag else "--" + name.replace("_", "-")
    info = run_options(command)[flag]
    assert info.help == ((face.help if face else None) or help_text(field.description))
    bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "le") if getattr(m, k, None) is not None}
    assert (info.min, info.max) == (bounds.get("ge"), bounds.get("le"))


def test_the_bench_options_reach_the_bench_config(monkeypatch, capsys, tmp_path):
    seen = {}

    def run_bench(data, fmt, models, out, config, **kw):
        seen["config"] = config
        raise ConfigError("seen")

    monkeypatch.setattr("localjury.bench.run.run_bench", run_bench)
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    args = ["bench", data, "-f", "jsonl", "-o", tmp_path / "o", "--metric", "coherence", "-k", "3",
            "--limit", "9", "--sample-seed", "4", "--seed", "7", "--no-cache", "--aligned", "3", "--shots", "2",
            "--mode", "pointwise", "--checklist", "conciseness", "--evidence", "--ungrounded", "abstain"]  # fmt: skip
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "seen" in err
    expected = BenchConfig.of(
        metric="coherence", strictness=3, limit=9, sample_seed=4, seed=7, use_cache=False, aligned=3, shots=2,
        mode="pointwise", checklist=["conciseness"], evidence=True, ungrounded="abstain",
    )  # fmt: skip
    assert seen["config"] == expected


def test_a_bench_config_takes_its_settings_and_its_runs_by_name():
    config = BenchConfig.of(strictness=2, limit=5, seed=9, use_cache=False)
    assert (config.strictness, config.limit, config.run.sampling.seed, config.run.store.use_cache) == (2, 5, 9, False)
    assert config.replace(limit=6).run == config.run
    with pytest.raises(ConfigError, match="limit"):
        BenchConfig.of(limit=0)
    with pytest.raises(ConfigError, match="unknown bench mode 'both'"):
        BenchConfig.of(mode="both")
    with pytest.raises(TypeError, match="unknown run setting 'shot'"):
        BenchConfig.of(shot=3)
    assert CalibrateConfig.of(folds=3).strictness == 3 and AlignConfig.of(calibrate=False).calibrate is False
