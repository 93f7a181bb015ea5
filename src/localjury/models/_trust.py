"""The trust model in code: which registry may give a packaged model's name other settings,
and which models may run the Python code shipped with their weights.

Record files, data folders and whatever sits beside them (a ``models.yaml`` in the working
directory included) may come from someone else: localjury never reads a registry from there
unless it is named, and nothing in them runs code. The command line (and the Python code
that calls localjury), ``$LOCALJURY_MODELS``, ``$LOCALJURY_HOME/models.yaml`` and the
packaged registry are trusted to say which models judge. Even they cannot run a model's own
code: that needs the run to name the model (``--trust-remote-code NAME``). docs/resume-and-trust.md's
"Trust model" lists each rule with its test.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from localjury.errors import ConfigError

#: (registry file, model name) pairs already announced on stderr in this process.
_announced: set[tuple[str, str]] = set()


class Entry(Protocol):
    """What the trust rules read of a models.yaml entry (a :class:`~localjury.models.registry.ModelSpec`;
    a protocol, so that the registry, which applies them, is not imported here)."""

    @property
    def name(self) -> str: ...
    @property
    def trust_remote_code(self) -> bool: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def location(self) -> str: ...
    def model_dump(self, *, exclude: set[str] | None = None) -> dict[str, Any]: ...


def _settings(spec: Entry) -> dict[str, Any]:
    """What decides how a model judges: every field but its free-text description."""
    return spec.model_dump(exclude={"description"})


def check_shadowing(path: Path, named: bool, specs: Mapping[str, Entry], packaged: Mapping[str, Entry]) -> None:
    """Refuse an entry that gives a packaged model's name other settings, unless the caller
    named its registry; then say so once on stderr.

    A packaged model's name on the command line means the packaged model: only a registry the
    command line names (``--registry``, or ``registry=`` in code) may make it mean another.

    Args:
        path: The registry file.
        named: Whether the caller named it (rather than ``$LOCALJURY_MODELS`` or
            ``$LOCALJURY_HOME/models.yaml`` choosing it).
        specs: Its entries.
        packaged: The packaged registry's entries.

    Raises:
        ConfigError: ``named`` is false and an entry redefines a packaged model.
    """
    for name, spec in specs.items():
        base = packaged.get(name)
        if base is None or _settings(spec) == _settings(base):
            continue
        mine, theirs = _settings(spec), _settings(base)
        changed = ", ".join(sorted(k for k in mine if mine[k] != theirs[k]))
        if not named:
            raise ConfigError(
                f"{path.absolute()} redefines the packaged model {name!r} (its {changed} differ): a packaged "
                "model's name means the packaged model unless the command line names the file that redefines it; "
                "rename the entry, or name the file with `registry`"
            )
        if (str(path), name) not in _announced:
            _announced.add((str(path), name))
            print(
                f"localjury: {name!r} is the entry of {path.absolute()} here, not the packaged model (its {changed} "
                "differ)",
                file=sys.stderr,
            )


def check_remote_code(specs: Sequence[Entry], sources: Mapping[str, str], allowed: Sequence[str]) -> None:
    """Refuse a model whose registry entry asks to run the code shipped with its weights unless
    the run names it in ``allowed``, and a name in ``allowed`` that no model of the run answers.

    Args:
        specs: The jury.
        sources: The registry file of each model looked up by name. A spec given as an object
            is the calling code's own and is taken as it is.
        allowed: The models the run lets run their own code (``--trust-remote-code``).

    Raises:
        ConfigError: Naming the model, its registry and the flag that allows it; or the name
            in ``allowed`` that is no model of the run asking for remote code.
    """
    asking = [s.name for s in specs if s.trust_remote_code]
    for name in allowed:
        if name not in asking:
            jury = ", ".join(s.name for s in specs)
            raise ConfigError(
                f"`trust_remote_code` names {name!r}, which is no model of this run whose models.yaml entry says "
                f"trust_remote_code: true (the run's models: {jury}); drop it"
            )
    for spec in specs:
        if spec.trust_remote_code and spec.name in sources and spec.name not in allowed:
            where = spec.base_url or Path(spec.location).absolute()
            raise ConfigError(
                f"model {spec.name!r} asks to run the Python code shipped with its weights (trust_remote_code: true "
                f"in {Path(sources[spec.name]).absolute()}); localjury runs such code only for a model the run names: "
                f"pass `trust_remote_code` {spec.name} if you trust the files in {where}"
            )
