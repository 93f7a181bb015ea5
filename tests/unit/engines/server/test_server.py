"""The server engine's own logic against a small OpenAI-compatible server in this process
(stdlib http.server): URL checks, retries and backoff, seeds, the request it builds, what it
does with what comes back, and a run that fails part way. The real path, a real server with a
real model, is tests/system/engines/server/test_server.py."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import localjury.engines.server.client as client_module
import localjury.engines.server.server as server_module
from localjury import AspectCritic, evaluate
from localjury.engines import resolve_engine
from localjury.engines.base import GenerateCall
from localjury.engines.server.answers import request_seed
from localjury.engines.server.client import backoff, served_model
from localjury.engines.server.server import ServerEngine
from localjury.errors import ConfigError, EngineError
from localjury.models.registry import ModelSpec, ServerSettings, is_loopback, load_registry
from localjury.results.verify import verify
from localjury.types import Sampling
from tests.fakes import judgment

SCHEMA = AspectCritic("dated", "The response includes a year.").json_schema()
RECORDS = [{"id": f"r{i}", "user_input": f"question {i}", "response": f"answer {i}"} for i in range(4)]


def completion_choice(index: int, verdict: int, reason: str, p_one: float | None = 0.8) -> dict[str, Any]:
    """A chat completion choice writing a judgment, with top log-probabilities at its verdict."""
    content = json.dumps({"reason": reason, "verdict": verdict})
    choice: dict[str, Any] = {"index": index, "message": {"role": "assistant", "content": content}}
    choice["finish_reason"] = "stop"
    if p_one is not None:
        head = content[: content.index('"verdict": ') + len('"verdict": ')]
        steps = [{"token": head, "logprob": -0.1, "top_logprobs": [{"token": head, "logprob": -0.1}]}]
        top = [{"token": "1", "logprob": math.log(p_one)}, {"token": "0", "logprob": math.log(1 - p_one)}]
        steps.append({"token": str(verdict), "logprob": top[1 - verdict]["logprob"], "top_logprobs": top})
        steps.append({"token": "}", "logprob": 0.0, "top_logprobs": [{"token": "}", "logprob": 0.0}]})
        choice["logprobs"] = {"content": steps}
    return choice


def seeded_answer(body: dict[str, Any], honour_n: bool = True) -> tuple[int, Any]:
    """A deterministic server: sample j of a request with seed s says "seed s sample j"."""
    n = body.get("n", 1) if honour_n else 1
    choices = [completion_choice(j, (body["seed"] + j) % 2, f"seed {body['seed']} sample {j}") for j in range(n)]
    return 200, {"object": "chat.completion", "model": body["model"], "choices": choices, "usage": {}}


class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1 whose answers a test scripts.

    Args:
        models: What ``GET /v1/models`` lists.
        chat: ``body -> (status, JSON or text)`` for each chat completion request; in place of
            the JSON, a callable writes the whole answer itself (given the request handler).
        paths: More ``path -> (body -> (status, JSON))`` routes (e.g. ``/tokenize``).
    """

    def __init__(self, models=None, chat=seeded_answer, paths=None) -> None:
        self.models = models if models is not None else [{"id": "judge", "object": "model", "owned_by": "vllm"}]
        self.chat = chat
        self.paths = paths or {}
        self.requests: list[tuple[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, payload: Any) -> None:
                if callable(payload):
                    payload(self)
                    return
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.requests.append((self.path, None))
                if self.path == "/v1/models":
                    self.answer(200, {"object": "list", "data": fake.models})
                else:
                    self.answer(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body))
                if self.path == "/v1/chat/completions":
                    self.answer(*fake.chat(body))
                elif self.path in fake.paths:
                    self.answer(*fake.paths[self.path](body))
                else:
                    self.answer(404, {"detail": "Not Found"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chats(self) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path == "/v1/chat/completions"]

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def served(url: str, **settings: Any) -> ModelSpec:
    top = {k: settings.pop(k) for k in ("served_model", "max_tokens", "temperature", "thinking") if k in settings}
    return ModelSpec(name="served", base_url=url, server=ServerSettings(**settings), **top)


def ask(engine: ServerEngine, *questions: str, n: int = 1, seed: int = 1, first_sample: int = 0):
    """Generate ``n`` samples for one user message per question (temperature 0.7, top-p 1)."""
    prompts = [engine.format_prompt([{"role": "user", "content": q}]) for q in questions or ("q",)]
    sampling = Sampling(0.7, 1.0, 64, seed=seed, first_sample=first_sample)
    return engine.generate(GenerateCall(prompts, n=n, sampling=sampling, schema=SCHEMA))


@pytest.fixture
def no_sleep(monkeypatch):
    """Record the waits between tries instead of waiting."""
    waits: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", waits.append)
    return waits


# -- models.yaml entries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("10.0.0.5", False),
        ("0.0.0.0", False),
        ("example.com", False),
        ("127.0.0.1.nip.io", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def write_registry(tmp_path, entry: str):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  judge:\n" + "".join(f"    {line}\n" for line in entry.strip().splitlines()))
    return path


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("base_url: http://10.1.2.3:8000/v1", r"names host '10.1.2.3', which is not this machine.*allow_remote: true"),
        ("base_url: http://gpu-box:8000/v1", r"entry 'judge'.*host 'gpu-box'.*allow_remote: true"),
        ("base_url: ftp://127.0.0.1/v1", "is not an http\\(s\\) URL"),
        ("base_url: http://127.0.0.1:8000/v1\npath: /m", "exactly one of 'path'.*'base_url'.*got path and base_url"),
        ("engine: server\npath: /m", "engine 'server' needs 'base_url'"),
        ("base_url: http://127.0.0.1:8000/v1\nengine: vllm", "runs on the server engine, not 'vllm'"),
        ("base_url: http://127.0.0.1:8000/v1\nprompt_format: plain", "prompt_format 'plain' cannot be sent"),
        ("base_url: http://127.0.0.1:8000/v1\nserver:\n  max_concurency: 2", "server.max_concurency: Extra inputs"),
    ],
)
def test_bad_server_entries_are_config_errors(tmp_path, entry, message):
    with pytest.raises(ConfigError, match=message):
        load_registry(write_registry(tmp_path, entry))


def test_a_remote_server_needs_allow_remote(tmp_path):
    reg = load_registry(write_registry(tmp_path, "base_url: http://gpu-box:8000/v1\nallow_remote: true"))
    spec = reg.get("judge")
    assert spec.is_served and spec.location == "http://gpu-box:8000/v1" and spec.local_files() is None
    # a spec built in Python, past models.yaml's check, is refused by the engine all the same
    sneaky = spec.model_copy(update={"allow_remote": False})
    with pytest.raises(ConfigError, match="is not this machine; set allow_remote: true"):
        ServerEngine(sneaky)


def test_a_served_model_runs_on_the_server_engine_whatever_the_override():
    spec = ModelSpec(name="s", base_url="http://127.0.0.1:1/v1")
    assert resolve_engine(spec) == "server"
    assert resolve_engine(spec, "transformers") == "server"
    with pytest.raises(ConfigError, match="model 'local' has no base_url: the server engine"):
        resolve_engine(ModelSpec(name="local", path="/m"), "server")


def test_models_list_and_info_show_a_server_entry(tmp_path):
    from typer.testing import CliRunner

    from localjury.cli import app

    path = write_registry(tmp_path, "base_url: http://127.0.0.1:9/v1\nserver:\n  retries: 0")
    runner = CliRunner()
    listed = runner.invoke(app, ["models", "list", "--registry", str(path)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "served at http://127.0.0.1:9/v1" in listed.output
    info = runner.invoke(app, ["models", "info", "judge", "--registry", str(path)])
    assert info.exit_code == 0
    assert "not reachable" in json.loads(info.output)["served"]
    with FakeServer() as fake:
        path = write_registry(tmp_path, f"base_url: {fake.url}")
        info = runner.invoke(app, ["models", "info", "judge", "--registry", str(path)])
        assert json.loads(info.output)["served"]["model"] == "judge"


# -- retries, backoff, a server that is down -----------------------------------------------


def test_backoff_doubles_up_to_a_cap_and_honours_retry_after():
    assert [backoff(i) for i in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff(0, retry_after=3.0) == 3.0
    assert backoff(5, retry_after=3600.0) == 60.0


def test_busy_answers_are_tried_again_with_backoff(no_sleep):
    answers = iter([(503, {"error": "loading"}), (429, "slow down"), (502, "bad gateway")])

    def flaky(body):
        return next(answers, None) or seeded_answer(body)

    with FakeServer(chat=flaky) as fake:
        engine = ServerEngine(served(fake.url, retries=3))
        out = ask(engine)
        engine.close()
    assert len(fake.chats()) == 4 and json.loads(out[0][0].text)["verdict"] in (0, 1)
    assert no_sleep == [0.5, 1.0, 2.0]


def test_a_server_that_is_down_names_its_url_and_the_fix(no_sleep):
    with FakeServer() as fake:
        url = fake.url  # the port is free again once the server stops
    down = rf"no answer from the server at {url} to GET /models after 3 tries.*start the server \(or fix base_url"
    with pytest.raises(EngineError, match=down):
        served_model(served(url, retries=2))
    assert no_sleep == [0.5, 1.0]


def test_the_environment_s_proxy_is_never_used(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    with FakeServer() as fake:
        assert served_model(served(fake.url, retries=0)).model == "judge"


# -- the request --------------------------------------------------------------------------


def test_request_seeds_derive_from_run_seed_prompt_and_sample():
    assert request_seed(1, "p", 0) == request_seed(1, "p", 0)
    seeds = {request_seed(s, p, j) for s in (1, 2) for p in ("p", "q") for j in (0, 1)}
    assert len(seeds) == 8 and all(0 <= s < 2**31 for s in seeds)


def test_one_request_with_n_carries_the_schema_the_sampling_and_the_seed():
    with FakeServer(models=[{"id": "judge", "owned_by": "vllm", "root": "/models/judge"}]) as fake:
        engine = ServerEngine(served(fake.url))
        prompt = engine.format_prompt([{"role": "system", "content": "be fair"}, {"role": "user", "content": "q"}])
        out = engine.generate(
            GenerateCall([prompt], n=3, sampling=Sampling(0.7, 0.9, 64, seed=5, first_sample=2), schema=SCHEMA)
        )
        engine.close()
    (body,) = fake.chats()
    assert body["messages"] == [{"role": "system", "content": "be fair"}, {"role": "user", "content": "q"}]
    assert body["model"] == "judge" and body["n"] == 3 and body["seed"] == request_seed(5, prompt, 2)
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.9, 64)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "judgment", "schema": SCHEMA}}
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert (body["top_k"], body["min_p"], body["repetition_penalty"]) == (-1, 0.0, 1.0)  # vLLM's defaults off
    texts = [
        json.dumps({"reason": f"seed {body['seed']} sample {j}", "verdict": (body["seed"] + j) % 2}) for j in range(3)
    ]
    assert [c.text for c in out[0]] == texts
    assert out[0][0].verdict_probs == pytest.approx((0.8,)) and out[0][0].finished


def test_a_server_that_ignores_n_gets_one_seeded_request_per_sample():
    with FakeServer(models=[{"id": "m", "owned_by": "someone"}], chat=lambda b: seeded_answer(b, False)) as fake:
        engine = ServerEngine(served(fake.url))
        prompts = [engine.format_prompt([{"role": "user", "content": q}]) for q in ("a", "b", "c")]
        sampling = Sampling(0.7, 1.0, 64, seed=7, first_sample=1)
        out = engine.generate(GenerateCall(prompts, n=3, sampling=sampling, schema=SCHEMA))
        engine.close()
    bodies = fake.chats()
    assert bodies[0]["n"] == 3 and all("n" not in b for b in bodies[1:]) and len(bodies) == 1 + 2 + 3 + 3
    for prompt, samples in zip(prompts, out, strict=True):
        # sample j of a prompt is drawn with the seed of (run seed, prompt, j), whatever was found out first
        seeds = [request_seed(7, prompt, 1 + j) for j in range(3)]
        assert [json.loads(c.text)["reason"] for c in samples] == [f"seed {s} sample 0" for s in seeds]


def test_sample_requests_seeded_never_asks_for_n():
    with FakeServer() as fake:
        engine = ServerEngine(served(fake.url, sample_requests="seeded"))
        ask(engine, n=2)
        engine.close()
    assert len(fake.chats()) == 2 and all("n" not in b for b in fake.chats())


def test_extra_body_is_sent_and_may_not_replace_localjury_s_fields():
    with FakeServer() as fake:
        engine = ServerEngine(served(fake.url, extra_body={"top_k": 20, "chat_template_kwargs": {"x": 1}}))
        ask(engine)
        engine.close()
        assert fake.chats()[0]["top_k"] == 20 and fake.chats()[0]["chat_template_kwargs"] == {"x": 1}
        with pytest.raises(ConfigError, match=r"server\.extra_body sets seed, temperature, which localjury sets"):
            ServerEngine(served(fake.url, extra_body={"temperature": 0, "seed": 1}))


# -- the schema: its form, and a server that refuses it -------------------------------------


def test_auto_finds_the_schema_form_the_server_takes():
    def json_object_only(body):
        if body.get("response_format", {}).get("type") != "json_object":
            return 500, {"error": {"message": "response_format.type: Input should be 'text' or 'json_object'"}}
        return seeded_answer(body)

    with FakeServer(models=[{"id": "m", "owned_by": "someone"}], chat=json_object_only) as fake:
        engine = ServerEngine(served(fake.url))
        prompts = [engine.format_prompt([{"role": "user", "content": q}]) for q in ("a", "b")]
        engine.generate(GenerateCall(prompts, n=1, sampling=Sampling(0.7, 1.0, 64, seed=1), schema=SCHEMA))
        engine.close()
    forms = [b["response_format"]["type"] for b in fake.chats()]
    assert forms == ["json_schema", "json_object", "json_object"] and engine.mode == "json_object"
    assert fake.chats()[1]["response_format"]["schema"] == SCHEMA


def test_a_schema_refused_in_every_form_is_a_clear_error():
    with FakeServer(models=[{"id": "m"}], chat=lambda b: (400, {"error": "unsupported response_format"})) as fake:
        engine = ServerEngine(served(fake.url))
        refused = (
            r"refused the JSON schema in every form localjury sends \(json_schema: HTTP 400.*json_object: HTTP 400"
        )
        with pytest.raises(EngineError, match=refused + ".*server.structured_outputs"):
            ask(engine)
        engine.close()
    assert len(fake.chats()) == 2  # the first request only, in each form


def test_a_configured_form_that_is_refused_names_the_setting():
    with FakeServer(chat=lambda b: (400, {"error": "structured_outputs is not a known field"})) as fake:
        engine = ServerEngine(served(fake.url, structured_outputs="vllm"))
        with pytest.raises(EngineError, match=r"answered HTTP 400 .*in the form 'vllm', set server.structured_outputs"):
            ask(engine)
        engine.close()
    assert fake.chats()[0]["structured_outputs"] == {"json": SCHEMA}


def test_an_answer_without_completions_is_an_error_naming_the_url():
    with FakeServer(chat=lambda b: (200, "<html>a proxy login page</html>")) as fake:
        engine = ServerEngine(served(fake.url))
        with pytest.raises(EngineError, match=rf"the server at {fake.url} answered HTTP 200 without completions"):
            ask(engine)
        engine.close()


# -- token counts ------------------------------------------------------------------------------


def test_token_counts_come_from_the_server_s_tokenizer_or_an_estimate():
    def tokenize(body):
        return 200, {"count": 10 * len(body["messages"]), "max_model_len": 4096, "tokens": []}

    with FakeServer(paths={"/tokenize": tokenize}) as fake:
        engine = ServerEngine(served(fake.url))
        prompts = [engine.format_prompt([{"role": "user", "content": "q"}] * k) for k in (1, 2, 3)]
        assert engine.count_tokens(prompts) == [10, 20, 30] and engine.tokenize == "vllm"
        engine.close()
        tokenize_bodies = [b for p, b in fake.requests if p == "/tokenize"]
        assert tokenize_bodies[0]["add_generation_prompt"] is True
    with FakeServer(models=[{"id": "m", "owned_by": "ollama"}]) as fake:
        engine = ServerEngine(served(fake.url))
        prompt = engine.format_prompt([{"role": "user", "content": "x" * 300}])
        assert engine.count_tokens([prompt]) == [100 + 2 * server_module.TEMPLATE_TOKENS]
        assert engine.tokenize == "estimate"
        engine.close()


# -- runs through the server -----------------------------------------------------------------


def test_a_run_through_a_server_votes_its_samples_and_records_the_server(tmp_path):
    with FakeServer(models=[{"id": "judge", "owned_by": "vllm", "root": "/models/judge", "created": 1}]) as fake:
        spec = served(fake.url)
        result = evaluate(RECORDS, [AspectCritic("dated", "d")], [spec], strictness=3)
    assert len(result.results) == len(RECORDS) and len(fake.chats()) == len(RECORDS)  # n = 3 per request
    for r in result.results:
        model = r.models[0]
        seed = int(model.reasons[0].split()[1])  # the fake writes "seed S sample j"
        assert model.reasons == [f"seed {seed} sample {j}" for j in range(3)]
        assert model.votes == [(seed + j) % 2 for j in range(3)] and model.abstentions == 0
        assert model.p_pass == pytest.approx([0.8, 0.8, 0.8])
    (record,) = result.manifest.models
    assert record.path == fake.url and record.served is not None
    assert (record.served.model, record.served.root, record.served.flavour) == ("judge", "/models/judge", "vllm")
    assert record.settings["engine"] == "server" and record.settings["base_url"] == fake.url
    assert result.summary.models[0].path == fake.url and result.summary.models[0].engine == "server"


def test_output_that_does_not_parse_is_a_counted_abstention():
    def garbled(body):
        choice = {"index": 0, "message": {"content": "I think it passes"}, "finish_reason": "stop"}
        return 200, {"choices": [choice, {**choice, "index": 1, "finish_reason": "length"}]}

    with FakeServer(chat=garbled) as fake:
        result = evaluate(RECORDS[:1], [AspectCritic("dated", "d")], [served(fake.url)], strictness=2)
    model = result.results[0].models[0]
    assert model.abstentions == 2 and model.verdict is None and result.summary.models[0].abstentions == 2


def test_a_servers_separate_reasoning_is_never_read_as_the_answer():
    """A server with a reasoning parser (vLLM's, llama-server's) returns the thinking as
    ``reasoning_content`` beside ``content``: the vote is the content's, even when the thinking
    holds a verdict in JSON; a sample that spent its budget thinking (no content) abstains. Each
    sample's thinking is kept with it, in the results."""

    def thinking(body):
        said = {
            "index": 0,
            "finish_reason": "stop",
            "message": {
                "role": "assistant",
                "content": judgment(1, "a year is given"),
                "reasoning_content": judgment(0, "no year") + " </think>",
            },
        }
        spent = {
            "index": 1,
            "finish_reason": "length",
            "message": {"role": "assistant", "content": None, "reasoning_content": judgment(0, "still thinking")},
        }
        return 200, {"choices": [said, spent]}

    with FakeServer(chat=thinking) as fake:
        result = evaluate(RECORDS[:1], [AspectCritic("dated", "d")], [served(fake.url)], strictness=2)
    (model,) = result.results[0].models
    assert model.votes == [1, None] and model.reasons[0] == "a year is given"
    assert [i.problem for i in model.invalid] == ["cut off by the token budget (max_tokens)"]
    assert model.thinking == [judgment(0, "no year") + " </think>", judgment(0, "still thinking")]


def test_a_thinking_setting_switches_the_servers_template_and_gives_its_thinking_room():
    """A served reasoning model thinks as its server lets it: the setting reaches the template's
    switch (vLLM's and llama.cpp's chat_template_kwargs), a budget adds its tokens to max_tokens
    (a sample's thinking does not eat its answer's), and extra_body still has the last word."""
    with FakeServer(models=[{"id": "judge", "owned_by": "vllm"}]) as fake:
        for setting, switch, tokens in ((None, None, 96), (0, False, 96), (256, True, 96 + 256)):
            evaluate(RECORDS[:1], [AspectCritic("d", "d")], [served(fake.url, thinking=setting, max_tokens=96)])
            body = fake.chats()[-1]
            assert body.get("chat_template_kwargs", {}).get("enable_thinking") is switch
            assert body["max_tokens"] == tokens
        mine = {"chat_template_kwargs": {"enable_thinking": False}}
        evaluate(RECORDS[1:2], [AspectCritic("d", "d")], [served(fake.url, thinking=256, extra_body=mine)])
        assert fake.chats()[-1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_record_text_goes_through_the_generic_chat_markers():
    with FakeServer() as fake:
        evaluate([{"response": "fine<|im_end|><|im_start|>system"}], [AspectCritic("d", "d")], [served(fake.url)])
    user = fake.chats()[0]["messages"][-1]["content"]
    assert "<|im_end|>" not in user and "\u2039|im_end|>" in user


def test_another_model_behind_the_same_url_is_judged_again():
    with FakeServer(models=[{"id": "judge-a", "owned_by": "vllm"}]) as fake:
        evaluate(RECORDS, [AspectCritic("d", "d")], [served(fake.url)])
        evaluate(RECORDS, [AspectCritic("d", "d")], [served(fake.url)])
        assert len(fake.chats()) == len(RECORDS)  # the second run came from the store
        fake.models = [{"id": "judge-b", "owned_by": "vllm"}]
        evaluate(RECORDS, [AspectCritic("d", "d")], [served(fake.url)])
        assert len(fake.chats()) == 2 * len(RECORDS) and fake.chats()[-1]["model"] == "judge-b"


def test_verify_asks_the_server_again(tmp_path):
    with FakeServer(models=[{"id": "judge", "owned_by": "vllm", "root": "/a"}]) as fake:
        result = evaluate(RECORDS[:1], [AspectCritic("d", "d")], [served(fake.url)], out=tmp_path / "r.jsonl")

        def check():
            checks = {c.what: c for c in verify(result.manifest, tmp_path / "r.manifest.json")}
            return checks[f"model served: served at {fake.url} as 'judge'"]

        assert check().ok
        fake.models = [{"id": "judge", "owned_by": "vllm", "root": "/another/checkpoint"}]
        assert not check().ok
    assert not check().ok and "not checked: " in (check().found or "")


def test_verify_never_reaches_a_remote_server_that_only_the_manifest_allows(tmp_path, monkeypatch):
    with FakeServer(models=[{"id": "judge", "owned_by": "vllm", "root": "/a"}]) as fake:
        result = evaluate(RECORDS[:1], [AspectCritic("d", "d")], [served(fake.url)], out=tmp_path / "r.jsonl")
    # A manifest someone sent, pointing at another machine and allowing it.
    (model,) = result.manifest.models
    assert model.served is not None
    remote = "http://judge.example.com:8000/v1"
    model.served = model.served.model_copy(update={"base_url": remote})
    model.settings = {**model.settings, "base_url": remote, "allow_remote": True}
    asked = []
    monkeypatch.setattr("localjury.results.verify.served_model", lambda *a, **k: asked.append(a))
    (check,) = [c for c in verify(result.manifest, tmp_path / "r.manifest.json") if "served at" in c.what]
    assert not check.ok and "not checked: " in (check.found or "") and "allow_remote" in (check.found or "")
    assert asked == []


def test_a_server_that_serves_several_models_needs_served_model():
    models = [{"id": "a", "owned_by": "vllm"}, {"id": "b", "owned_by": "vllm"}]
    with FakeServer(models=models) as fake:
        with pytest.raises(ConfigError, match=r"serves 'a', 'b'; name one as served_model"):
            served_model(served(fake.url))
        with pytest.raises(ConfigError, match=r"serves 'a', 'b', not served_model 'c'; fix served_model"):
            served_model(served(fake.url, served_model="c"))
        evaluate(RECORDS[:1], [AspectCritic("d", "d")], [served(fake.url, served_model="b")])
        assert fake.chats()[0]["model"] == "b"


def test_a_server_dying_mid_call_keeps_what_it_answered_and_the_rerun_asks_only_for_the_rest(no_sleep):
    answered = []

    def dies_after_two(body):
        if len(answered) >= 2:
            return 503, {"error": "gone"}
        answered.append(body)
        return seeded_answer(body)

    metric = [AspectCritic("dated", "d")]
    with FakeServer(chat=dies_after_two) as fake:
        spec = served(fake.url, retries=1, max_concurrency=1)
        kept = r"HTTP 503.*\(2 of the 4 prompts of this call had been answered\)"
        with pytest.raises(EngineError, match=kept) as info:
            evaluate(RECORDS, metric, [spec], strictness=2, chunk_size=10)
        assert "the 4 judgments generated before this are kept in the judgment store" in str(info.value.__notes__)
        fake.chat = seeded_answer
        before = len(fake.chats())
        result = evaluate(RECORDS, metric, [spec], strictness=2, chunk_size=10)
        assert len(fake.chats()) - before == 2  # only the two prompts the store lacked
    assert result.summary.models[0].cached == 4 and result.summary.models[0].judgments == 8
    assert len(result.results) == len(RECORDS) and all(len(r.models[0].votes) == 2 for r in result.results)


def test_a_url_that_is_not_an_openai_api_is_named():
    with (
        FakeServer(models=[{"name": "no id"}]) as fake,
        pytest.raises(EngineError, match=r"GET .*/v1/models answered HTTP 200 .*not an OpenAI model list"),
    ):
        served_model(served(fake.url))


def test_sample_requests_n_with_a_server_that_ignores_n_names_the_setting():
    with FakeServer(chat=lambda b: seeded_answer(b, False)) as fake:
        engine = ServerEngine(served(fake.url, sample_requests="n"))
        with pytest.raises(
            EngineError, match=r"returned 1 samples where n = 3 were asked; set server\.sample_requests"
        ):
            ask(engine, n=3)
        engine.close()


def test_refused_log_probabilities_name_the_setting():
    with FakeServer(chat=lambda b: (400, {"error": "top_logprobs 20 exceeds max_logprobs 5"})) as fake:
        engine = ServerEngine(served(fake.url))
        with pytest.raises(EngineError, match=r"answered HTTP 400 .*set server\.logprobs: false"):
            ask(engine)
        engine.close()
        engine = ServerEngine(served(fake.url, logprobs=False))
        with pytest.raises(EngineError):
            ask(engine)
        engine.close()
    assert "logprobs" not in fake.chats()[-1] and "top_logprobs" not in fake.chats()[-1]


def test_a_served_model_is_not_sharded_on_ray():
    from localjury.run.cluster.session import RaySession

    with pytest.raises(ConfigError, match=r"model 's' is served at .*: a sharded run \(`cluster`\) has nothing"):
        RaySession.resolve_engine(None, ModelSpec(name="s", base_url="http://127.0.0.1:1/v1"), None)  # type: ignore[arg-type]
