"""The server engine is bounded whatever its server does: a total deadline per request
(``server.request_timeout``), a cap on each answer's size, answers read through a model of
the OpenAI chat completion (shape, indices, finite log-probabilities), all of it ending in an
error that names the server's URL and the rule. The servers here misbehave on purpose (see
test_server.py's FakeServer); none of the bounds is checked by a clock: a trickle is cut off
long before it would have ended, a body well before it is all sent."""

from __future__ import annotations

import gzip
import json
import math
import time
from typing import Any

import pytest

from localjury import AspectCritic, evaluate
from localjury.engines.server.client import served_model
from localjury.engines.server.server import ServerEngine
from localjury.errors import ConfigError, EngineError
from tests.unit.engines.server.test_server import RECORDS, FakeServer, ask, completion_choice, seeded_answer, served

#: Bytes a trickling server means to send, one every TRICKLE_EVERY seconds (30 s in all): the
#: request must end with its deadline's error long before.
TRICKLE_BYTES = 600
TRICKLE_EVERY = 0.05


def trickle(head: bytes, slow: bytes, sent: list[int]):
    """An answer that sends ``head`` at once, then ``slow`` one byte at a time, counting them."""

    def write(handler: Any) -> None:
        handler.wfile.write(head)
        for i in range(len(slow)):
            time.sleep(TRICKLE_EVERY)
            try:
                handler.wfile.write(slow[i : i + 1])
            except OSError:  # the client hung up
                return
            sent.append(i)
        handler.close_connection = True

    return write


def silent(head: bytes):
    """An answer that sends ``head`` and then nothing, never closing (until the client does)."""

    def write(handler: Any) -> None:
        handler.wfile.write(head)
        handler.rfile.read(1)  # returns once the client closes its end

    return write


STATUS = b"HTTP/1.1 200 OK\r\n"
HEADERS = STATUS + f"Content-Type: application/json\r\nContent-Length: {TRICKLE_BYTES}\r\n\r\n".encode()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda sent: trickle(HEADERS, b" " * TRICKLE_BYTES, sent), id="body-trickled"),
        pytest.param(lambda sent: trickle(STATUS, b"X-Slow: " + b"a" * TRICKLE_BYTES, sent), id="headers-trickled"),
        pytest.param(lambda sent: silent(HEADERS), id="silent-after-headers"),
        pytest.param(lambda sent: silent(b""), id="silent"),
    ],
)
def test_a_request_ends_by_its_deadline_whatever_the_server_sends(answer):
    sent: list[int] = []
    with FakeServer(chat=lambda body: (200, answer(sent))) as fake:
        engine = ServerEngine(served(fake.url, request_timeout=1, retries=0))
        late = (
            rf"no answer from the server at {fake.url} to POST /chat/completions after 1 tries .*"
            r"\(no whole answer within server\.request_timeout, 1 s\); if its answers take longer, raise "
            r"server\.request_timeout"
        )
        with pytest.raises(EngineError, match=late):
            ask(engine)
        engine.close()
    assert len(sent) < TRICKLE_BYTES  # cut off, not waited out


def test_the_model_list_is_bounded_by_the_deadline_too():
    sent: list[int] = []
    with FakeServer() as fake:
        fake.models = []  # replaced below: GET /v1/models trickles
        handler_answer = trickle(HEADERS, b" " * TRICKLE_BYTES, sent)

        def do_get(handler: Any) -> None:
            handler_answer(handler)

        fake.httpd.RequestHandlerClass.do_GET = do_get  # type: ignore[method-assign,assignment]
        with pytest.raises(EngineError, match=r"to GET /models after 1 tries .*server\.request_timeout, 1 s"):
            served_model(served(fake.url, request_timeout=1, retries=0))
    assert len(sent) < TRICKLE_BYTES


# -- the size of an answer --------------------------------------------------------------------


def announced(size: int):
    """An answer whose headers announce ``size`` bytes, of which it sends a few."""

    def write(handler: Any) -> None:
        handler.wfile.write(STATUS + f"Content-Length: {size}\r\n\r\n".encode() + b'{"choices": [')
        handler.close_connection = True

    return write


def streamed(total: int, sent: list[int], encoding: str | None = None):
    """A chunked answer of ``total`` bytes of JSON-looking junk, without a Content-Length."""

    def write(handler: Any) -> None:
        extra = f"Content-Encoding: {encoding}\r\n" if encoding else ""
        handler.wfile.write(STATUS + f"Transfer-Encoding: chunked\r\n{extra}\r\n".encode())
        piece = b" " * (64 << 10)
        try:
            for _ in range(total // len(piece)):
                handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                sent.append(len(piece))
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            return
        handler.close_connection = True

    return write


def test_an_answer_announced_over_the_cap_is_refused_before_its_body_is_read():
    with FakeServer(chat=lambda body: (200, announced(1_500_000_000))) as fake:
        engine = ServerEngine(served(fake.url, retries=0))
        over = (
            rf"the answer of the server at {fake.url} to POST /v1/chat/completions announced 1,500,000,000 bytes, "
            r"over its size cap, and was not read further; its size cap is 1,114,112 bytes \(64 KiB \+ 16 KiB "
            r"per token of 1 x 64 tokens with log-probabilities, at most 256 MiB\)"
        )
        with pytest.raises(EngineError, match=over):
            ask(engine)
        engine.close()


def test_a_body_past_the_cap_is_cut_off_as_it_comes():
    sent: list[int] = []
    total = 64 << 20
    with FakeServer(chat=lambda body: (200, streamed(total, sent))) as fake:
        engine = ServerEngine(served(fake.url, retries=0))
        with pytest.raises(
            EngineError,
            match=r"passed its size cap \(.* bytes had come\), and was not read further; its size cap is 1,114,112",
        ):
            ask(engine)
        engine.close()
    assert sum(sent) < total // 2  # it stopped reading: the server could not send the rest


def test_a_compressed_answer_is_refused_as_its_size_cannot_be_bounded():
    bomb = gzip.compress(b" " * (8 << 20))

    def gzipped(handler: Any) -> None:
        head = f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n".encode()
        handler.wfile.write(STATUS + head + bomb)

    with FakeServer(chat=lambda body: (200, gzipped)) as fake:
        engine = ServerEngine(served(fake.url, retries=0))
        with pytest.raises(EngineError, match=r"came compressed \(Content-Encoding 'gzip'\) although localjury asks"):
            ask(engine)
        engine.close()
    assert all(b.get("stream") is None for b in fake.chats())


def test_a_model_list_over_its_cap_is_refused():
    models = [{"id": f"model-{i:06d}" + "x" * 400, "owned_by": "vllm"} for i in range(12_000)]
    with (
        FakeServer(models=models) as fake,
        pytest.raises(
            EngineError,
            match=rf"server at {fake.url} to GET /v1/models announced .*its size cap is 4,194,304 bytes",
        ),
    ):
        served_model(served(fake.url, retries=0))


def test_the_cap_grows_with_what_was_asked():
    from localjury.engines.server.answers import ANSWER_CEILING, answer_cap

    assert answer_cap(1, 64, True).size == (64 << 10) + 64 * (16 << 10)
    assert answer_cap(3, 512, False).size == (64 << 10) + 3 * 512 * (1 << 10)
    assert answer_cap(64, 32768, True).size == ANSWER_CEILING


# -- log-probabilities -------------------------------------------------------------------------


def with_logprob(value: Any, where: str = "top"):
    """Answers whose verdict step holds ``value`` as a log-probability (of an alternative, or
    of the step itself)."""

    def chat(body: dict[str, Any]) -> tuple[int, Any]:
        status, answer = seeded_answer(body)
        step = answer["choices"][0]["logprobs"]["content"][1]
        if where == "top":
            step["top_logprobs"][0]["logprob"] = value
        else:
            step["logprob"] = value
        return status, json.dumps(answer, allow_nan=True)

    return chat


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (math.nan, "top"),
        (math.inf, "top"),
        (-math.inf, "top"),
        (0.5, "top"),
        (math.nan, "step"),
        ("-0.1", "top"),
        (None, "top"),
        (True, "top"),
    ],
)
def test_log_probabilities_that_are_not_finite_numbers_at_most_0_are_the_request_s_error(tmp_path, value, where):
    metric = [AspectCritic("dated", "d")]
    with FakeServer(chat=with_logprob(value, where)) as fake:
        spec = served(fake.url, retries=0)
        broken = rf"the server at {fake.url} answered with log-probabilities that"
        with pytest.raises(EngineError, match=broken) as info:
            evaluate(RECORDS[:1], metric, [spec], scoring="probability", cache=tmp_path / "store.db")
        assert "choices.0.logprobs.content.1." in str(info.value) and "server.logprobs: false" in str(info.value)
        # Nothing of that answer was kept: a good server is asked again, and its numbers are used.
        fake.chat = seeded_answer
        result = evaluate(RECORDS[:1], metric, [spec], scoring="probability", cache=tmp_path / "store.db")
    (judgment,) = result.results[0].models
    assert result.summary.models[0].cached == 0
    assert judgment.p_pass == pytest.approx([0.8]) and judgment.score == pytest.approx(0.8)


# -- the shape of an answer --------------------------------------------------------------------


def two_choices(first: Any, second: Any):
    """Answers of two choices with these indices."""

    def chat(body: dict[str, Any]) -> tuple[int, Any]:
        choices = [completion_choice(j, 1, f"sample {j}") for j in range(2)]
        choices[0]["index"], choices[1]["index"] = first, second
        return 200, {"choices": choices, "usage": {"completion_tokens": 6}}

    return chat


@pytest.mark.parametrize(
    "indices",
    [("0", 1), (None, 1), (True, 1), (0.0, 1), (-1, 0), (0, 0), (0, 5), ({}, 1)],
    ids=repr,
)
def test_choice_indices_must_be_each_of_0_to_n_minus_1_once(indices):
    with FakeServer(chat=two_choices(*indices)) as fake:
        engine = ServerEngine(served(fake.url, retries=0))
        malformed = rf"the server at {fake.url} answered HTTP 200 with a malformed chat completion \(.*ind"
        with pytest.raises(EngineError, match=malformed):
            ask(engine, n=2)
        engine.close()


def reshaped(path: tuple[Any, ...], value: Any):
    """Answers whose field at ``path`` holds ``value``."""

    def chat(body: dict[str, Any]) -> tuple[int, Any]:
        _, answer = seeded_answer(body)
        answer["usage"] = {"completion_tokens": 3}
        node = answer
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return 200, answer

    return chat


CHOICE = ("choices", 0)
STEP = (*CHOICE, "logprobs", "content", 1)


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ((*CHOICE, "message", "content"), 5, "choices.0.message.content"),
        ((*CHOICE, "message"), "text", "choices.0.message"),
        ((*CHOICE, "finish_reason"), ["stop"], "choices.0.finish_reason"),
        ((*CHOICE, "logprobs", "content"), {"0": {}}, "choices.0.logprobs.content"),
        ((*STEP, "token"), 1, "choices.0.logprobs.content.1.token"),
        ((*STEP, "top_logprobs", 0), "1", "choices.0.logprobs.content.1.top_logprobs.0"),
        (("usage", "completion_tokens"), "3", "usage.completion_tokens"),
        (("usage", "completion_tokens"), -3, "usage.completion_tokens"),
        (("usage",), [3], "usage"),
    ],
)
def test_a_malformed_answer_names_the_server_and_the_field(path, value, where):
    with FakeServer(chat=reshaped(path, value)) as fake:
        engine = ServerEngine(served(fake.url, retries=0))
        malformed = rf"the server at {fake.url} answered HTTP 200 with a malformed chat completion \({where}: "
        with pytest.raises(EngineError, match=malformed):
            ask(engine)
        engine.close()


def test_a_malformed_answer_in_a_run_is_its_error_not_a_crash(tmp_path):
    with (
        FakeServer(chat=two_choices("0", 1)) as fake,
        pytest.raises(EngineError, match=rf"server at {fake.url} answered HTTP 200 with a malformed"),
    ):
        evaluate(RECORDS[:2], [AspectCritic("dated", "d")], [served(fake.url, retries=0)], strictness=2)


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"id": 5}, "data.0.id"),
        ({"id": "m", "owned_by": ["vllm"]}, "data.0.owned_by"),
        ({"id": "m", "max_model_len": True}, "data.0.max_model_len"),
        ({"id": "m", "max_model_len": -4096}, "data.0.max_model_len"),
        ("m", "data.0"),
    ],
)
def test_a_malformed_model_list_names_the_field(entry, where):
    with (
        FakeServer(models=[entry]) as fake,
        pytest.raises(
            EngineError, match=rf"GET {fake.url}/models answered HTTP 200 .*not an OpenAI model list \({where}:"
        ),
    ):
        served_model(served(fake.url, retries=0))


@pytest.mark.parametrize("count", [True, -1, "12", 1.5, None])
def test_a_token_count_that_is_not_a_whole_number_is_not_used(count):
    with FakeServer(paths={"/tokenize": lambda body: (200, {"count": count})}) as fake:
        engine = ServerEngine(served(fake.url))
        prompt = engine.format_prompt([{"role": "user", "content": "x" * 300}])
        assert engine.count_tokens([prompt]) == [100 + 2 * 8]  # the estimate
        assert engine.tokenize == "estimate"
        engine.close()


def test_served_model_still_refuses_a_model_it_does_not_serve():
    with FakeServer() as fake, pytest.raises(ConfigError, match=r"serves 'judge', not served_model 'x'"):
        served_model(served(fake.url, served_model="x"))


def test_text_that_utf_8_cannot_encode_is_sent_escaped():
    with FakeServer() as fake:
        engine = ServerEngine(served(fake.url))
        ask(engine, "a lone \ud800 surrogate and \u00e9")
        engine.close()
    assert fake.chats()[0]["messages"][0]["content"] == "a lone \ud800 surrogate and \u00e9"


@pytest.mark.parametrize(
    ("extra", "problem"), [({"top_k": math.nan}, "Out of range float"), ({"x": {1, 2}}, "not JSON serializable")]
)
def test_extra_body_that_is_no_json_is_a_config_error_before_the_server_is_asked(extra, problem):
    with FakeServer() as fake:
        with pytest.raises(
            ConfigError, match=rf"model 'served': server.extra_body cannot be sent as JSON \(.*{problem}"
        ):
            ServerEngine(served(fake.url, extra_body=extra))
        assert fake.requests == []
