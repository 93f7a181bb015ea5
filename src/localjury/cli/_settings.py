"""The settings as command-line options, derived from the config objects' fields (a run's,
:mod:`localjury.run.config`; a bench's, a calibration's and an alignment's,
:mod:`localjury.bench.config`; a Ray cluster's, :class:`~localjury.run.cluster.RayCluster`): an
option's name, type, default, bounds and help come from its field, written once there (the
bounds as the field's constraints, :mod:`localjury._setting_bounds`). What only a command line has is
said here, per setting, and only where it differs from what the field gives: a short name, a
path's symlink-loop check, and the few options whose value is not the setting's (``--no-cache``,
``--no-calibrate``, the comma-separated ``--models``, a calibration file's path, ``--cluster``).

A command takes the settings it names with :func:`takes_settings`: typer sees one option per
setting beside the command's own, and the command receives them as a dict, keyword
arguments of :meth:`~localjury.run.config.RunConfig.of` (or the bench config's ``of``). The
cluster's options are the command's own parameters (:data:`ClusterOpt` and the three beside
it), read into a cluster by :func:`cluster_of`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from localjury._setting_bounds import Bounds
from localjury.cli._common import checked_path, cli_words
from localjury.errors import ConfigError
from localjury.run.cluster import RayCluster
from localjury.run.config import GROUPS, RunConfig


def _names(text: str | None) -> list[str] | None:
    """``--models``' comma-separated names; None where none is given."""
    return [name.strip() for name in (text or "").split(",") if name.strip()] or None


@dataclass(frozen=True)
class Face:
    """What the command line adds to a setting (each part: None where the field's own serves)."""

    flag: str | None = None
    """The option's name (default: ``--`` and the setting's name with dashes)."""
    short: str | None = None
    """A one-letter name."""
    kind: Any = None
    """The option's type, where the setting's is not one a command line reads."""
    default: Any = inspect.Parameter.empty
    """The option's default, where it is not the setting's."""
    to_setting: Callable[[Any], Any] | None = None
    """The setting's value from the option's (default: the same value)."""
    help: str | None = None
    """The help, where the field's description does not read right on a command line."""
    metavar: str | None = None


#: Each setting's face on the command line, where it has more than its field gives.
FACES: dict[str, Face] = {
    "strictness": Face(short="-k"),
    "calibration": Face(kind=Path | None),
    "use_cache": Face(
        flag="--no-cache",
        default=False,
        to_setting=lambda no_cache: not no_cache,
        help="Use a temporary judgment store for this run only (no reuse, no resume).",
    ),
    "models": Face(
        short="-m",
        kind=str | None,
        to_setting=_names,
        help="Comma-separated judge models: names from models.yaml, model folders or .gguf files. "
        "Default: qwen2.5-coder-1.5b-instruct.",
    ),
    "trust_remote_code": Face(metavar="NAME"),
    "calibrate": Face(
        flag="--no-calibrate",
        default=False,
        to_setting=lambda no_calibrate: not no_calibrate,
        help="Fit no thresholds (no model loads, unless --evidence or heads): the profile's judges are scored "
        "by votes.",
    ),
    "heads": Face(
        flag="--no-heads",
        default=False,
        to_setting=lambda no_heads: not no_heads,
        help="Fit no decision heads (with 40 labels or more, 10 of each, align fits a head on each model's hidden "
        "states and keeps it where it beats prompting by cross-validated kappa).",
    ),
    "cluster": Face(
        kind=str | None,
        help="ray: shard each model's pass over a pool of engine replicas on Ray (needs the ray extra); "
        "same results, store and files as a local run.",
    ),
    "cpus_per_replica": Face(flag="--replica-cpus"),
    "thinking": Face(kind=str | None, metavar="TOKENS|off"),
}


def _fields(source: type[BaseModel] | None = None) -> dict[str, FieldInfo]:
    """The settings of ``source`` (a config class: its own fields, not its ``run``), or of a
    run (:data:`~localjury.run.config.GROUPS`) by default."""
    if source is not None:
        return {name: field for name, field in source.model_fields.items() if name != "run"}
    return {name: field for group in GROUPS.values() for name, field in group.model_fields.items()}


def _flag(name: str) -> str:
    """The option of the setting ``name``: its face's flag, else ``--`` and its name with dashes."""
    return FACES.get(name, Face()).flag or "--" + name.replace("_", "-")


def _plain(annotation: Any) -> Any:
    """The type typer reads for a field's type: a Literal's choices are a string (the config
    checks them, naming the choices); any other type as it is (``models`` has its own kind)."""
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        return str
    if args and any(get_origin(a) is Literal for a in args):  # Literal[...] | None
        return str | None
    return annotation


def help_text(description: str) -> str:
    """A field's description as one line of help: reStructuredText roles and literals as plain text."""
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], description)
    return " ".join(text.replace("``", "`").split())


def option(name: str, source: type[BaseModel] | None = None, lead: str = "") -> inspect.Parameter:
    """The setting ``name`` (of ``source``, see :func:`_fields`) as a typer option parameter
    (named after its flag), its help after ``lead``; typer checks and shows the range the field's
    constraints give (``Field(ge=1, le=64)``) too."""
    field = _fields(source)[name]
    face = FACES.get(name, Face())
    bounds = Bounds.of(field)
    # typer states closed ranges only: a field with an open bound (the threshold's < 1) is left
    # to the config's check, so that the help never shows half of its range.
    closed = bounds.gt is None and bounds.lt is None
    flag = _flag(name)
    kind = face.kind if face.kind is not None else _plain(field.annotation)
    is_path = Path in (kind, *get_args(kind))
    text = face.help or cli_words(help_text(field.description or ""))
    if lead and text[1:2].islower():  # "Engine replicas" reads "engine replicas" after the lead, "CPU cores" as it is
        text = text[:1].lower() + text[1:]
    info = typer.Option(
        *(d for d in (flag, face.short) if d),
        help=lead + text,
        min=bounds.ge if closed else None,
        max=bounds.le if closed else None,
        metavar=face.metavar,
        callback=checked_path if is_path else None,
    )
    default = (
        face.default if face.default is not inspect.Parameter.empty else field.get_default(call_default_factory=True)
    )
    return inspect.Parameter(
        flag.lstrip("-").replace("-", "_"),
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, info],
    )


def takes_settings(
    names: Sequence[str], source: type[BaseModel] | None = None, into: str = "settings"
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command that takes the settings ``names`` (of ``source``, by default a run's) as
    options: typer sees the command's own parameters and then one option per setting; the
    command gets them as its parameter ``into``, a dict by their keyword names (in
    :meth:`~localjury.run.config.RunConfig.of`, or ``source``'s ``of``). Stacked, each adds its
    own."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != into]
        added = {name: option(name, source) for name in names}

        def call(**values: Any) -> Any:
            settings = {}
            for name, param in added.items():
                value = values.pop(param.name)
                face = FACES.get(name, Face())
                settings[name] = face.to_setting(value) if face.to_setting is not None else value
            return command(**values, **{into: settings})

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + list(added.values())
        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in params}
        call.__name__, call.__qualname__, call.__doc__ = command.__name__, command.__qualname__, command.__doc__
        call.__module__ = command.__module__
        return call

    return wrap


def own_settings(source: type[BaseModel]) -> tuple[str, ...]:
    """Every setting a config class adds to its run's (``bench``'s, ``calibrate``'s, ``align``'s)."""
    return tuple(_fields(source))


#: The settings every command that loads models takes (``bench``, ``calibrate``, ``align``; ``run`` takes more).
JURY_SETTINGS = ("models", "seed", "registry", "trust_remote_code", "use_cache", "thinking")

#: ``--registry`` for the commands that take no other setting (``models``, ``doctor``).
RegistryOpt = option("registry").annotation

#: ``--cluster ray`` and the options beside it, each a field of :class:`~localjury.run.cluster.RayCluster`
#: (``run`` and ``bench`` take them).
ClusterOpt = option("cluster", RunConfig).annotation
AddressOpt = option("address", RayCluster, lead="With --cluster ray: ").annotation
ReplicasOpt = option("replicas", RayCluster, lead="With --cluster ray: ").annotation
ReplicaCpusOpt = option("cpus_per_replica", RayCluster, lead="With --cluster ray: ").annotation


def cluster_of(name: str | None, **settings: Any) -> RayCluster | None:
    """The cluster ``--cluster`` (``name``) and the options beside it (``settings``, by their
    field names) describe; None for a local run.

    Raises:
        ConfigError: An option beside ``--cluster`` without it, or a cluster other than ray.
    """
    if name is None:
        given = [_flag(setting) for setting, value in settings.items() if value]
        if given:
            raise ConfigError(f"{', '.join(given)} only apply with --cluster ray")
        return None
    if name != "ray":
        raise ConfigError(f"unknown cluster {name!r}; expected: ray")
    return RayCluster(**settings)
