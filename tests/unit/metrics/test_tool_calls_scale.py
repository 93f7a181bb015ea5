"""Tool calls matched in any order through a dict keyed by each call's parsed arguments: linear
in the calls' number (each reference call was compared with every call still free), with the
same pairs as :func:`json_equal` gives."""

import json
import math
import time

import pytest

from localjury.metrics.tool_calls import json_equal, json_key, match_calls
from localjury.records.conversation import FunctionCall

VALUES = [
    1, 1.0, 2, -0.0, 0, True, False, None, "1", "a", 2**60 + 1, float(2**60), math.inf, math.nan,
    [], {}, [1, 2], [2, 1], [1.0, 2.0], {"a": 1}, {"a": 1.0}, {"a": True}, {"a": 1, "b": [None]},
    {"b": [None], "a": 1}, {"a": {"b": [1, {"c": None}]}}, {"a": {"b": [1.0, {"c": None}]}},
]  # fmt: skip


@pytest.mark.parametrize("a", VALUES)
def test_two_values_have_equal_keys_exactly_where_they_are_equal_as_json(a):
    for b in VALUES:
        assert (json_key(a) == json_key(b)) is json_equal(a, b), (a, b)


def calls(*arguments) -> list[FunctionCall]:
    return [FunctionCall(name="f", arguments=json.dumps(a)) for a in arguments]


def test_any_order_matches_each_reference_call_to_the_first_free_equal_call():
    got = match_calls(calls({"x": 1}, {"x": 2}, {"x": 1}, {"x": float("nan")}),
                      calls({"x": 2.0}, {"x": 1.0}, {"x": 3}, {"x": float("nan")}), ordered=False)  # fmt: skip
    assert (got.matched, got.missing, got.unexpected) == (
        2,
        ['f({"x": 1})', 'f({"x": NaN})'],
        ['f({"x": 3})', 'f({"x": NaN})'],
    )


def test_tens_of_thousands_of_calls_match_in_any_order_promptly():
    n = 10_000
    reference = calls(*({"i": i} for i in range(n)))
    made = calls(*({"i": i} for i in reversed(range(n))), *({"j": i} for i in range(n)))
    started = time.perf_counter()
    got = match_calls(reference, made, ordered=False)
    seconds = time.perf_counter() - started
    assert (got.matched, got.missing, len(got.unexpected)) == (n, [], n)
    assert seconds < 120, f"took {seconds:.1f} s"  # a hang guard: 0.9 s linear; each against each (5e7) ~4 min
