"""The server engine's answer reader fuzzed: whatever the body of an HTTP 200 answer (any JSON,
a well-formed chat completion with one field replaced by any JSON value, numbers that JSON does
not have), reading it gives samples whose verdict probabilities are finite probabilities, or
an EngineError that names the server; never another exception."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury.engines.server.answers import Answers
from localjury.errors import EngineError
from tests.unit.engines.server.test_server import SCHEMA, completion_choice

URL = "http://127.0.0.1:9/v1"
ANSWERS = Answers(URL, "server", "served")

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def valid_answer(verdicts: list[int]) -> dict[str, Any]:
    choices = [completion_choice(j, v, f"sample {j}", p_one=0.3) for j, v in enumerate(verdicts)]
    return {"id": "x", "object": "chat.completion", "choices": choices, "usage": {"completion_tokens": 9}}


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value, the value itself included."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += paths(value, (*prefix, i))
    return out


@st.composite
def mutated_answers(draw: st.DrawFn) -> Any:
    """A well-formed answer with the value at one of its paths replaced by any JSON value."""
    answer = valid_answer(draw(st.lists(st.sampled_from([0, 1]), min_size=1, max_size=3)))
    path = draw(st.sampled_from(paths(answer)))
    value = draw(json_values)
    if not path:
        return value
    node = answer
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return answer


def read(body: bytes):
    return ANSWERS.completions(httpx2.Response(200, content=body), SCHEMA, "json_schema")  # type: ignore[arg-type]


def check(body: bytes) -> None:
    try:
        samples = read(body)
    except EngineError as exc:
        assert f"the server at {URL} " in exc.message
        return
    assert samples
    for sample in samples:
        assert isinstance(sample.text, str) and sample.n_tokens >= 0
        for p in sample.verdict_probs or ():
            assert math.isfinite(p) and 0.0 <= p <= 1.0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_answers())
def test_an_answer_with_any_field_replaced_is_samples_or_the_server_s_error(answer):
    check(json.dumps(answer, allow_nan=True).encode())


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_is_samples_or_the_server_s_error(value):
    check(json.dumps(value, allow_nan=True).encode())


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_the_server_s_error(body):
    check(body)


def test_a_well_formed_answer_reads_as_before():
    samples = read(json.dumps(valid_answer([1, 0])).encode())
    assert [json.loads(s.text)["verdict"] for s in samples] == [1, 0]
    assert [s.verdict_probs for s in samples] == [(0.3,), (0.3,)]
    assert all(s.finished and s.n_tokens == 3 for s in samples)
