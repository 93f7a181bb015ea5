"""Every exception localjury raises, under one root.

A message names a run setting as it is spelled in Python, between backticks (`cache`,
`use_cache=False`): the CLI prints its own flag in its place (``localjury.cli.FLAGS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from localjury.types import Completion


class LocaljuryError(Exception):
    """Root of every error localjury raises on purpose."""


class ConfigError(LocaljuryError):
    """A setting, option or models.yaml entry is invalid or inconsistent."""


class MetricError(ConfigError, ValueError):
    """A metric declared wrong (no name, a bad strictness, an output model without a verdict).

    Also a ``ValueError``, which metric constructors raised before.
    """


class UnknownNameError(ConfigError, KeyError):
    """A name that is not among the known ones (a predefined aspect). Also a ``KeyError``,
    which ``AspectCritic.predefined`` raised before; reads as its message, unquoted."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModelNotAvailableError(ConfigError):
    """A model is named correctly but its weights are not on this machine."""


class MissingDependencyError(LocaljuryError):
    """An optional package needed for the requested feature is not installed."""


class StoreError(LocaljuryError):
    """The judgment store failed while a run read or wrote it (a disk full, a lock held past
    the timeout, a read-only file, corruption found mid-run).

    Attributes:
        path: The store's SQLite file.
    """

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (partial(type(self), path=self.path), (str(self),))


#: Where a commit that failed part way left an output set: the previous files back in place,
#: the new files all in place, or some of each (its journal left for the next command).
Outcome = Literal["previous", "new", "mixed"]


class CommitError(LocaljuryError):
    """Files written together could not all be renamed into place (the file system failed
    part way through the commit).

    Attributes:
        outcome: What is on disk now (see :data:`Outcome`).
        journal: The commit's journal; it still exists when ``outcome`` is ``"mixed"``, and the
            next command writing the files, or ``localjury verify``, settles the set from it.
    """

    def __init__(self, message: str, *, outcome: Outcome, journal: Path) -> None:
        super().__init__(message)
        self.outcome: Outcome = outcome
        self.journal = journal

    def __reduce__(self) -> tuple[Any, ...]:
        return (partial(type(self), outcome=self.outcome, journal=self.journal), (str(self),))


class EngineError(LocaljuryError):
    """An inference engine failed while loading a model or generating.

    Attributes:
        engine: The engine's name, e.g. ``"transformers"``.
        model: The judge model's name in models.yaml.
        completed: The samples of the prompts of the failed call that were generated before
            it failed, by prompt (an engine whose requests finish one by one, such as the
            server engine, fills it; the run stores them before it stops).
    """

    def __init__(
        self, message: str, *, engine: str, model: str, completed: Mapping[str, list[Completion]] | None = None
    ) -> None:
        super().__init__(f"{engine} engine, model {model!r}: {message}")
        self.message = message
        self.engine = engine
        self.model = model
        self.completed: dict[str, list[Completion]] = dict(completed or {})

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments: pickled by hand, so that an error raised on a Ray replica
        # reaches the driver as itself.
        return (
            partial(type(self), engine=self.engine, model=self.model, completed=self.completed),
            (self.message,),
        )


class RecordError(LocaljuryError):
    """One input record is unusable; the others are still judged.

    Attributes:
        record_id: The record's id (given, or derived from its content or position).
        field: The offending field, or ``None`` when the whole record is unreadable.
        location: Where the record sits in its file, e.g. ``"line 7"``.
        reason: What is wrong, without the location prefix.
    """

    def __init__(self, reason: str, *, record_id: str, field: str | None = None, location: str | None = None) -> None:
        where = f"record {record_id!r}"
        if location:
            where += f" ({location})"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {reason}")
        self.record_id = record_id
        self.field = field
        self.location = location
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            partial(type(self), record_id=self.record_id, field=self.field, location=self.location),
            (self.reason,),
        )
