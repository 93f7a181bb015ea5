"""The run settings' options are derived from the config's fields: every field is an option of
`run` with the field's description as its help, and what the options say reaches the run's
RunConfig as the same settings given in Python would."""

import typing

import pytest
import typer

import localjury.run
from localjury.cli import app
from localjury.cli._settings import FACES, help_text, option
from localjury.errors import ConfigError
from localjury.run.config import GROUPS, RunConfig
from tests.fakes import run_cli


def run_options() -> dict[str, typing.Any]:
    """`run`'s options by their first flag: the typer ParameterInfo of each."""
    command = next(c for c in app.registered_commands if c.callback.__name__ == "run")
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
    assert info.help == ((face.help if face else None) or help_text(field.description))
    assert field.description and len(field.description.split()) >= 5  # a help a user can act on


def test_a_fields_rst_reads_as_plain_text():
    assert help_text("See :class:`~localjury.metrics.checklist.Checklist` and ``seed``.\n  More.") == (
        "See Checklist and `seed`. More."
    )
    assert option("use_cache").name == "no_cache" and option("use_cache").default is False


def test_the_options_reach_the_runs_config(monkeypatch, capsys, tmp_path):
    seen = {}

    def evaluate(data, metrics, *, config, **kw):
        seen["config"] = config
        raise ConfigError("seen")

    monkeypatch.setattr(localjury.run, "evaluate", evaluate)
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    args = ["run", data, "-c", "d=Dated.", "--models", "a, b", "-k", "3", "--seed", "7", "--no-cache", "--adaptive",
            "--tie-break", "pass", "--on-overflow", "truncate", "--chunk-size", "5", "--temperature", ".5"]  # fmt: skip
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "seen" in err
    expected = RunConfig.of(models=["a", "b"], strictness=3, seed=7, use_cache=False, tie_break="pass",
                            on_overflow="truncate", chunk_size=5, adaptive=True, temperature=0.5)  # fmt: skip
    assert seen["config"] == expected
