"""A setting's bounds are its field's constraints; a value out of them is a ConfigError in words
(the messages users read from `RunConfig.of` and `RayCluster` are in tests/unit/run/test_config.py
and tests/system/run/cluster/test_scripted.py)."""

from typing import ClassVar

import pytest
from pydantic import Field, ValidationError

from localjury._setting_bounds import Bounded, Bounds
from localjury.errors import ConfigError


class Knobs(Bounded):
    _setting_prefix: ClassVar[str] = "knob "

    both: int = Field(1, ge=1, le=9)
    half_open: float = Field(0.5, ge=0, lt=1)
    low: int | None = Field(None, ge=2)
    high: float = Field(0.0, le=3.5)
    finite: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    word: str = "x"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"both": 0}, "knob both must be from 1 to 9, got 0"),
        ({"both": 10}, "knob both must be from 1 to 9, got 10"),
        ({"half_open": 1.0}, r"knob half_open must be from 0 up to \(not including\) 1, got 1.0"),
        ({"half_open": float("nan")}, r"knob half_open must be from 0 up to \(not including\) 1, got nan"),
        ({"low": 1}, "knob low must be >= 2, got 1"),
        ({"high": 4.0}, "knob high must be <= 3.5, got 4.0"),
        ({"finite": float("inf")}, "knob finite must be a finite number >= 0, got inf"),
        ({"finite": -1.0}, "knob finite must be a finite number >= 0, got -1.0"),
    ],
)
def test_a_value_out_of_bounds_is_a_config_error_in_words(settings, message):
    with pytest.raises(ConfigError, match=message):
        Knobs(**settings)


def test_other_invalid_values_stay_validation_errors():
    with pytest.raises(ValidationError):
        Knobs(both="many")
    with pytest.raises(ValidationError):
        Knobs(word=3)
    assert Knobs(low=None, both=9).both == 9


def test_the_bounds_are_read_from_the_field():
    assert Bounds.of(Knobs.model_fields["both"]) == Bounds(ge=1, le=9)
    assert Bounds.of(Knobs.model_fields["finite"]) == Bounds(ge=0.0, finite=True)
    assert Bounds.of(Knobs.model_fields["word"]) == Bounds()
