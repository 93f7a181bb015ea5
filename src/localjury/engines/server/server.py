"""The server engine: judge through an OpenAI-compatible server's chat completions endpoint
(vLLM's ``vllm serve``, llama.cpp's ``llama-server``, llama-cpp-python's server, Ollama, LM
Studio).

Needs no extra and no local accelerator: the model runs wherever its server runs, and the HTTP
client (httpx2, which transformers' huggingface_hub already requires) is a core dependency.
Only the entry's ``base_url`` is contacted, never through a proxy from the environment, and
never a redirect elsewhere; a host other than this machine needs ``allow_remote: true``.

What is sent, per prompt: ``POST {base_url}/chat/completions`` with the chat messages, the
sampling settings (``temperature``, ``top_p``, ``max_tokens``), a ``seed``, the metric's JSON
schema (``response_format`` json_schema or json_object, or vLLM's ``structured_outputs``:
``server.structured_outputs``), ``logprobs`` with ``top_logprobs: 20``, and, for the servers
known by their ``/v1/models`` answer, the fields that turn their own sampling defaults off
(llama-cpp-python: ``top_k: 0, min_p: 0, repeat_penalty: 1``; vLLM: ``top_k: -1, min_p: 0,
repetition_penalty: 1``), so that samples come from the model's distribution at the entry's
temperature and top-p as on the local engines.

Samples: the k samples of a prompt are one request with ``n = k`` where the server honours it
(vLLM does), else k requests of one sample each (``server.sample_requests``; ``auto`` finds out
from the first answer). Seeds: a request's seed derives from (run seed, prompt, index of its
first sample), as on the vLLM engine; a seeded request per sample uses its sample's index.

Requests run concurrently (``server.max_concurrency``), each with retries and exponential
backoff when the server cannot be reached, times out or answers 429/502/503/504. Each try ends
by ``server.request_timeout`` in all, whatever the server does, and reads at most a cap that
grows with what was asked (:func:`~localjury.engines.server.answers.answer_cap`); an answer
that is not a well-formed chat completion, or whose log-probabilities are not finite numbers at
most 0, is the request's error (:mod:`~localjury.engines.server.answers`). When a request
still fails, the prompts of the call whose samples came back are handed to the run with the
error (:attr:`EngineError.completed`), which stores them before it stops.

Verdict probabilities come from the top log-probabilities the server returns with each output
token (vLLM and llama-cpp-python return the raw distribution); a server that returns none
leaves them unknown. Prompt lengths come from the server's tokenizer where it has an endpoint
for it (vLLM's ``/tokenize`` applies the chat template: exact; llama-cpp-python's
``/extras/tokenize/count`` counts the messages' text, plus :data:`TEMPLATE_TOKENS` per message
for the template); elsewhere they are estimated as one token per :data:`CHARS_PER_TOKEN`
characters plus the same allowance, an overestimate for most text.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, ClassVar, TypeVar

from localjury.engines.base import BatchEngine, Completion, GenerateCall, Message, Sampling
from localjury.engines.constrain.quotes import has_quotes
from localjury.engines.constrain.verdicts import TOP_LOGPROBS
from localjury.engines.server import FACTS
from localjury.engines.server.answers import Answers, answer_cap, refuses_format, request_seed, structured
from localjury.engines.server.client import ServerClient, ServerKind, Unreachable, excerpt, served_by
from localjury.engines.server.transport import Cap, Reply
from localjury.errors import ConfigError, EngineError
from localjury.models.registry import ModelFiles, ModelSpec

T = TypeVar("T")

#: Tokens allowed per message for its chat template's markers, where the server counts text only.
TEMPLATE_TOKENS = 8
#: Characters per token of the estimate used where the server has no tokenize endpoint.
CHARS_PER_TOKEN = 3
#: Bytes a tokenize answer may take beside its token ids, and per byte of the text counted
#: (vLLM lists the ids: at most one per byte, ~9 bytes each as JSON).
TOKENIZE_BASE = 64 << 10
TOKENIZE_BYTES = 16

#: Fields that turn a server's own sampling defaults off, so that temperature and top-p alone
#: shape the distribution (llama-cpp-python 0.3.36 defaults to top_k 40, min_p 0.05 and
#: repeat_penalty 1.1; vLLM applies a model's generation_config.json defaults).
PLAIN_SAMPLING: dict[ServerKind, dict[str, Any]] = {
    "vllm": {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0},
    "llama-cpp-python": {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0},
    "llama.cpp": {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0},
    "other": {},
}
#: The fields localjury sets in a request, which ``extra_body`` may not replace.
OWN_FIELDS = frozenset(
    {"model", "messages", "temperature", "top_p", "max_tokens", "n", "seed", "logprobs", "top_logprobs"}
    | {"response_format", "structured_outputs", "stream"}
)


class ServerEngine(BatchEngine):
    """Judge with a model served by an OpenAI-compatible server (see the module docstring).
    A reasoning model thinks as its server lets it: the thinking its reasoning parser separates
    (``reasoning_content``) is kept beside the answer, never read as the answer.

    Args:
        spec: The models.yaml entry: ``base_url``, ``served_model`` and the ``server:`` block.

    Raises:
        EngineError: The server does not answer (after the retries) or not as an OpenAI server.
        ConfigError: It does not serve the entry's model.
    """

    name: ClassVar[str] = "server"
    thinks: ClassVar[bool] = False

    def __init__(self, spec: ModelSpec, files: ModelFiles | None = None) -> None:
        del files  # a model on a server has none here
        _check_extra_body(spec)
        self.spec = spec
        self.client = ServerClient(spec)
        try:
            self.served = served_by(self.client)
        except BaseException:
            self.client.close()
            raise
        settings = spec.server
        self.flavour: ServerKind = self.served.flavour
        default_concurrency = 1 if self.flavour == "llama-cpp-python" else 16
        self.concurrency = settings.max_concurrency or default_concurrency
        self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="localjury-server")
        if settings.structured_outputs != "auto":
            self.mode: str | None = settings.structured_outputs
        elif self.flavour in ("vllm", "llama.cpp"):
            self.mode = "json_schema"
        elif self.flavour == "llama-cpp-python":
            self.mode = "json_object"  # it refuses type json_schema (HTTP 500 from a request validation error)
        else:
            self.mode = None  # found out by the first request
        self.honours_n: bool | None = {"n": True, "seeded": False, "auto": None}[settings.sample_requests]
        self.tokenize: str | None = None
        # A thinking setting switches a template's thinking (Qwen3's enable_thinking) where the
        # server takes template arguments (vLLM, llama.cpp's server); extra_body may say otherwise.
        switch = (
            {"chat_template_kwargs": {"enable_thinking": bool(spec.thinking)}}
            if spec.thinking is not None and self.flavour in ("vllm", "llama.cpp")
            else {}
        )
        self.extra = {**PLAIN_SAMPLING[self.flavour], **switch, **settings.extra_body}
        self._lock = threading.Lock()
        self.answers = Answers(self.client.base_url, self.name, spec.name)

    # -- prompts -------------------------------------------------------------------------

    def format_prompt(self, messages: Sequence[Message]) -> str:
        """The chat messages as JSON: the server applies the model's chat template itself."""
        return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], ensure_ascii=False)

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Prompt lengths by the server's tokenizer, or estimated (see the module docstring)."""
        if not prompts:
            return []
        first = [self._count(prompts[0])] if self.tokenize is None else []  # alone: finds the endpoint
        rest, failure = self._map(self._count, list(prompts[len(first) :]))
        if failure is not None:
            raise failure
        return [*first, *(rest[i] for i in range(len(prompts) - len(first)))]

    def _count(self, prompt: str) -> int:
        messages = json.loads(prompt)
        text = "\n".join(m["content"] for m in messages)
        allowance = TEMPLATE_TOKENS * (len(messages) + 1)
        candidates = [self.tokenize] if self.tokenize is not None else self._tokenize_candidates()
        for way in candidates:
            if way == "estimate":
                self.tokenize = way
                return math.ceil(len(text) / CHARS_PER_TOKEN) + allowance
            if way == "vllm":
                url = f"{self.client.root}/tokenize"
                body: dict[str, Any] = {"model": self.served.model, "messages": messages, "add_generation_prompt": True}
            else:
                url = f"{self.client.root}/extras/tokenize/count"
                body = {"model": self.served.model, "input": text}
            size = len(text.encode("utf-8", errors="replace"))
            cap = Cap(TOKENIZE_BASE + TOKENIZE_BYTES * size, "64 KiB + 16 bytes per byte of the text counted")
            try:
                response = self.client.request("POST", url, body, cap=cap)
            except Unreachable as exc:
                raise self.client.unreachable(exc, f"POST {url}") from None
            count = _count_of(response)
            if count is not None:
                self.tokenize = way
                return count if way == "vllm" else count + allowance
            if self.tokenize is not None:
                raise EngineError(
                    f"POST {url} answered HTTP {response.status_code} ({excerpt(response.text)}) where it "
                    "counted tokens before; a count is a whole number, at least 0",
                    engine=self.name,
                    model=self.spec.name,
                )
        raise AssertionError("the estimate always answers")

    def _tokenize_candidates(self) -> list[str]:
        if self.flavour == "vllm":
            return ["vllm", "estimate"]
        if self.flavour == "llama-cpp-python":
            return ["llama-cpp-python", "estimate"]
        if self.flavour == "llama.cpp":
            return ["estimate"]  # its /tokenize counts text without the chat template
        return ["vllm", "llama-cpp-python", "estimate"]

    # -- generation ----------------------------------------------------------------------

    def _generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Every prompt's ``n`` samples, requests running concurrently; see the module docstring.

        Raises:
            EngineError: A request failed after its retries, the server refused the schema, or
                it answered with no completion; ``completed`` holds the prompts that finished.
                Also quoted evidence, which an OpenAI-compatible server cannot constrain.
        """
        prompts, n, sampling, schema, progress = call.prompts, call.n, call.sampling, call.schema, call.progress
        if schema is not None and call.quotes is not None and has_quotes(schema):
            raise EngineError(str(FACTS.quotes_refusal(self.spec)), engine=self.name, model=self.spec.name)

        def one(prompt: str) -> list[Completion]:
            samples = self._samples(prompt, n, sampling, schema)
            if progress is not None:
                progress(1)
            return samples

        done: dict[int, list[Completion]] = {}
        start = 0
        if self.mode is None or (n > 1 and self.honours_n is None):
            # Alone, so that what the first answer tells (the schema's form, whether n is
            # honoured) is known before the others are sent.
            done[0] = one(prompts[0])
            start = 1
        rest, failure = self._map(one, list(prompts[start:]))
        done.update({start + i: samples for i, samples in rest.items()})
        if failure is not None:
            completed = {prompts[i]: samples for i, samples in done.items()}
            raise EngineError(
                f"{failure.message} ({len(completed)} of the {len(prompts)} prompts of this call had been answered)",
                engine=self.name,
                model=self.spec.name,
                completed=completed,
            ) from failure
        return [done[i] for i in range(len(prompts))]

    def _map(self, fn: Callable[[str], T], items: list[str]) -> tuple[dict[int, T], EngineError | None]:
        """``fn`` over ``items`` on the pool: the results by index, and the first error (the
        items not started by then are not sent)."""
        futures: dict[Future[T], int] = {self.pool.submit(fn, item): i for i, item in enumerate(items)}
        results: dict[int, T] = {}
        failure: EngineError | None = None
        try:
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in finished:
                    exc = future.exception()
                    if exc is None:
                        results[futures[future]] = future.result()
                    elif failure is None:
                        if not isinstance(exc, EngineError):
                            raise exc
                        failure = exc
                if failure is not None:
                    for future in pending:
                        future.cancel()
                    # Let the requests already sent finish: their answers are kept.
                    finished, _ = wait(pending)
                    for future in finished:
                        if not future.cancelled() and future.exception() is None:
                            results[futures[future]] = future.result()
                    pending = set()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results, failure

    def _samples(self, prompt: str, n: int, sampling: Sampling, schema: dict[str, Any] | None) -> list[Completion]:
        """One prompt's ``n`` samples: one request with n, or one seeded request per sample."""
        messages = json.loads(prompt)

        def ask(count: int, sample: int) -> list[Completion]:
            return self._request(messages, count, request_seed(sampling.seed, prompt, sample), sampling, schema)

        first = sampling.first_sample
        if n == 1 or self.honours_n is False:
            return [ask(1, first + j)[0] for j in range(n)]
        got = ask(n, first)
        if len(got) >= n:
            with self._lock:
                if self.honours_n is None:
                    self.honours_n = True
            return got[:n]
        if self.honours_n is not None:
            raise EngineError(
                f"the server at {self.client.base_url} returned {len(got)} samples where n = {n} were asked; set "
                "server.sample_requests: seeded in the models.yaml entry (one request per sample)",
                engine=self.name,
                model=self.spec.name,
            )
        with self._lock:
            self.honours_n = False
        # A server that ignores n drew the one sample the seeded request for the first sample
        # draws (the same seed, the same request otherwise): keep it, ask for the others.
        return [got[0], *(ask(1, first + j)[0] for j in range(1, n))]

    def _body(
        self, messages: list[Message], n: int, seed: int, sampling: Sampling, want_logprobs: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.served.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p if sampling.temperature > 0 else 1.0,
            "max_tokens": sampling.max_tokens,
            "seed": seed,
            **self.extra,
        }
        if n > 1:
            body["n"] = n
        if want_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        return body

    def _request(
        self, messages: list[Message], n: int, seed: int, sampling: Sampling, schema: dict[str, Any] | None
    ) -> list[Completion]:
        """One chat completion request (the schema's form found out on the first one)."""
        want_logprobs = self.spec.server.logprobs and schema is not None
        body = self._body(messages, n, seed, sampling, want_logprobs)
        url = f"{self.client.base_url}/chat/completions"
        cap = answer_cap(n, sampling.max_tokens, want_logprobs)
        if schema is None:
            return self.answers.completions(self._post(url, body, cap), schema, self.mode)
        modes = [self.mode] if self.mode is not None else ["json_schema", "json_object"]
        refusals: list[str] = []
        for mode in modes:
            response = self._post(url, {**body, **structured(mode, schema)}, cap)
            if response.status_code == 200:
                if self.mode is None:
                    with self._lock:
                        self.mode = mode
                return self.answers.completions(response, schema, self.mode)
            if self.mode is None and refuses_format(response):
                refusals.append(f"{mode}: HTTP {response.status_code} {excerpt(response.text, 200)}")
                continue
            raise self.answers.refused(response, mode)
        raise EngineError(
            f"the server at {self.client.base_url} refused the JSON schema in every form localjury sends "
            f"({'; '.join(refusals)}); judgments need output constrained to the schema: use a server that "
            "supports it (vLLM, llama.cpp's llama-server, llama-cpp-python, Ollama), or set "
            "server.structured_outputs in the models.yaml entry",
            engine=self.name,
            model=self.spec.name,
        )

    def _post(self, url: str, body: dict[str, Any], cap: Cap) -> Reply:
        try:
            return self.client.request("POST", url, body, cap=cap)
        except Unreachable as exc:
            raise self.client.unreachable(exc, "POST /chat/completions") from None

    def close(self) -> None:
        """Stop sending requests and close the connections (the server keeps running)."""
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


def _check_extra_body(spec: ModelSpec) -> None:
    """Refuse an entry's ``server.extra_body`` that replaces localjury's fields or is no JSON.

    Raises:
        ConfigError: It does either.
    """
    clash = sorted(OWN_FIELDS & set(spec.server.extra_body))
    if clash:
        raise ConfigError(
            f"model {spec.name!r}: server.extra_body sets {', '.join(clash)}, which localjury sets itself; "
            "remove them from extra_body (temperature, top_p and max_tokens have their own settings)"
        )
    try:
        json.dumps(spec.server.extra_body, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(
            f"model {spec.name!r}: server.extra_body cannot be sent as JSON ({exc}); give it numbers, strings, "
            "booleans, lists and mappings only, and no NaN or infinity"
        ) from None


def _count_of(response: Reply) -> int | None:
    """The token count of a tokenize answer; None unless it is HTTP 200 with a whole number of
    at least 0 as ``count`` (a count of true or -1 would let a prompt too long pass)."""
    if response.status_code != 200:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    count = data.get("count") if isinstance(data, dict) else None
    return count if type(count) is int and count >= 0 else None
