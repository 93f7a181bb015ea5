"""A setting's bounds, declared once, as its field's constraints (``Field(ge=1, le=64)``): the
model checks them, the command line reads them for its options' ranges
(:mod:`localjury.cli._settings`), and a value out of them is a :class:`ConfigError` in the words
users read (``strictness must be from 1 to 64, got 0``), from :class:`Bounded`, the one place
that words pydantic's errors so. A setting whose value is one of a few names, or a file's
path read into what it holds, says so with :func:`one_of` and :func:`read_from`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic.fields import FieldInfo

from localjury.errors import ConfigError

#: pydantic's error types for a value outside its field's constraints.
_OUT_OF_BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})


def _number(bound: float) -> str:
    """A bound as a message writes it: ``0``, not ``0.0``."""
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


@dataclass(frozen=True)
class Bounds:
    """A field's numeric constraints (each None where the field states none)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = False
    """Whether infinities and NaN are refused (``allow_inf_nan=False``)."""

    @classmethod
    def of(cls, field: FieldInfo) -> Bounds:
        """The constraints ``field`` declares."""
        found: dict[str, Any] = {}
        for constraint in field.metadata:
            for name in ("ge", "gt", "le", "lt"):
                if getattr(constraint, name, None) is not None:
                    found[name] = getattr(constraint, name)
            if getattr(constraint, "allow_inf_nan", None) is False:
                found["finite"] = True
        return cls(**found)

    def words(self) -> str:
        """What a value must be: ``from 1 to 64``, ``from 0 up to (not including) 1``, ``>= 1``,
        ``a finite number >= 0``."""
        if self.ge is not None and self.le is not None:
            text = f"from {_number(self.ge)} to {_number(self.le)}"
        elif self.ge is not None and self.lt is not None:
            text = f"from {_number(self.ge)} up to (not including) {_number(self.lt)}"
        else:
            parts = [
                f"{sign} {_number(bound)}"
                for sign, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
                if bound is not None
            ]
            text = " and ".join(parts)
        return " ".join(part for part in ("a finite number" if self.finite else "", text) if part)


class Bounded(BaseModel):
    """A model whose out-of-bounds values are :class:`ConfigError` s naming the setting, its
    bounds and the value given; other invalid values stay pydantic's ``ValidationError``."""

    _setting_prefix: ClassVar[str] = ""
    """What a message says before a setting's name (``cluster `` for a cluster's)."""

    @model_validator(mode="wrap")
    @classmethod
    def _bounds_in_words(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        try:
            return handler(data)
        except ValidationError as exc:
            for error in exc.errors():
                name = error["loc"][0] if error["loc"] else None
                if error["type"] in _OUT_OF_BOUNDS and name in cls.model_fields:
                    words = Bounds.of(cls.model_fields[str(name)]).words()
                    raise ConfigError(f"{cls._setting_prefix}{name} must be {words}, got {error['input']}") from None
            raise


def one_of(what: str, choices: Collection[str], *, optional: bool = False) -> Callable[[object], object]:
    """A setting's check that its value is one of ``choices`` (``optional``: or None), else a
    :class:`ConfigError` naming them: ``unknown scoring 'x'; expected one of: votes, probability``.
    For a field's ``BeforeValidator``."""

    def check(value: object) -> object:
        if not (value in choices or (optional and value is None)):
            raise ConfigError(f"unknown {what} {value!r}; expected one of: {', '.join(choices)}")
        return value

    return check


def read_from(read: Callable[[Path], object]) -> Callable[[object], object]:
    """A setting given as a file's path, read with ``read`` into what it holds (its errors
    naming the file); any other value as it is. For a field's ``BeforeValidator``."""

    def check(value: object) -> object:
        return read(Path(value)) if isinstance(value, str | Path) else value

    return check
