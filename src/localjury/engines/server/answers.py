"""What is sent to an OpenAI-compatible server beside the messages (the seed, the schema's
form, the most an answer may weigh), and what its answers mean: the samples with their verdict
probabilities, or the error that says what was wrong and what to change. The server engine's
HTTP-free half (:mod:`localjury.engines.server.server`).

An answer is read through a pydantic model of the OpenAI chat completion (:class:`ChatAnswer`):
the fields localjury uses, each of its type, the choices' indices each of 0..n-1 once, and
every log-probability a finite number, at most 0. Anything else is the request's error, which
names the server and what was wrong; never a sample, so that no number the server got wrong
reaches a verdict probability or a score (a text that is not a judgment is not an error: its
sample is an abstention, counted with its raw text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictInt, StrictStr, ValidationError, model_validator

from localjury._hashing import content_hash
from localjury.engines.base import Completion
from localjury.engines.constrain.verdicts import LOGPROB_SLACK, Decision, decision_of, verdict_probs_from_top
from localjury.engines.server.client import excerpt, problems
from localjury.engines.server.transport import Cap, Reply
from localjury.errors import EngineError

#: The name of the schema in an OpenAI ``response_format``.
SCHEMA_NAME = "judgment"
#: Bytes of an answer beside its samples' tokens: the envelope, usage, each choice's fields.
ANSWER_BASE = 64 << 10
#: Bytes an answer may take per output token it was asked for: a token's text escaped as JSON
#: (~100 bytes at most for the longest tokens), and with log-probabilities its top-20
#: alternatives, each with its text, bytes and number (~1.5 kB as vLLM writes them); both
#: with a margin of 5 or more.
TOKEN_BYTES = 1 << 10
LOGPROB_TOKEN_BYTES = 16 << 10
#: Whatever n and max_tokens, no answer is read past this.
ANSWER_CEILING = 256 << 20
#: The most characters kept of one sample's thinking (``reasoning_content``): far more than a
#: thinking budget's tokens write (about 4 characters a token: 250,000 tokens), so that a server
#: that sends more (one answer may hold hundreds of MiB within its cap) has its sample keep the
#: head, and a note of the cut, rather than the whole in the store and the results.
THINKING_MAX_CHARS = 1 << 20
#: What follows a thinking cut to :data:`THINKING_MAX_CHARS`.
THINKING_CUT = "\n[… thinking cut: the server sent {sent:,} characters; the first {kept:,} are kept]"

LogProb = Annotated[float, Strict(), Field(le=LOGPROB_SLACK, allow_inf_nan=False)]
"""A log-probability: a finite number, at most 0 (beyond float rounding, :data:`LOGPROB_SLACK`)."""


def request_seed(seed: int, prompt: str, first_sample: int) -> int:
    """A request's seed from the run seed, its prompt and the index of its first sample (31
    bits: servers parse seeds as 32-bit integers, signed or not)."""
    return int(content_hash(seed=seed, prompt=prompt, first=first_sample)[:8], 16) >> 1


def answer_cap(n: int, max_tokens: int, logprobs: bool) -> Cap:
    """The most bytes read of the answer to a request for ``n`` samples of at most
    ``max_tokens`` tokens: :data:`ANSWER_BASE` plus :data:`TOKEN_BYTES` per token asked for
    (:data:`LOGPROB_TOKEN_BYTES` with log-probabilities), at most :data:`ANSWER_CEILING`."""
    per = LOGPROB_TOKEN_BYTES if logprobs else TOKEN_BYTES
    size = min(ANSWER_BASE + n * max_tokens * per, ANSWER_CEILING)
    what = "with log-probabilities" if logprobs else "without log-probabilities"
    rule = f"64 KiB + {per >> 10} KiB per token of {n} x {max_tokens} tokens {what}, at most 256 MiB"
    return Cap(size, rule)


def bounded_thinking(thinking: str | None) -> str | None:
    """A sample's thinking as it is kept: whole up to :data:`THINKING_MAX_CHARS` characters,
    else its head and a note saying how much the server sent."""
    if thinking is None or len(thinking) <= THINKING_MAX_CHARS:
        return thinking
    return thinking[:THINKING_MAX_CHARS] + THINKING_CUT.format(sent=len(thinking), kept=THINKING_MAX_CHARS)


def structured(mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields that constrain the output to ``schema`` in one of the forms servers
    accept (see ``server.structured_outputs`` in models.yaml)."""
    if mode == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema}}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "vllm":
        return {"structured_outputs": {"json": schema}}
    raise ValueError(f"unknown structured output mode {mode!r}")


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True)  # other fields (``bytes``...) are ignored


class Alternative(_Part):
    """One of the top alternatives at an output token."""

    token: StrictStr
    """Its text."""
    logprob: LogProb
    """Its log-probability."""


class Step(_Part):
    """One output token with its log-probability and its top alternatives."""

    token: StrictStr
    """Its text."""
    logprob: LogProb | None = None
    """Its log-probability (unused; null is tolerated)."""
    top_logprobs: list[Alternative] | None = None
    """The top alternatives, the token itself usually among them."""


class Logprobs(_Part):
    """A choice's ``logprobs``."""

    content: list[Step] | None = None
    """One step per output token."""


class Message(_Part):
    """A choice's ``message``."""

    content: StrictStr | None = None
    """The output's text; null reads as empty (an abstention)."""
    reasoning_content: StrictStr | None = None
    """A reasoning model's thinking, where the server's reasoning parser separates it (vLLM,
    llama-server): kept beside the answer, never read as the answer."""
    reasoning: StrictStr | None = None
    """The same, under the name newer vLLM servers give it."""


class Choice(_Part):
    """One sample of a chat completion."""

    index: StrictInt | None = Field(None, ge=0)
    """Which sample it is (may be left out of a lone choice)."""
    message: Message | None = None
    """The output."""
    finish_reason: StrictStr | None = None
    """``stop`` when the model ended it; anything else reads as cut off."""
    logprobs: Logprobs | None = None
    """Its log-probabilities, when asked for and given."""


class Usage(_Part):
    """What the request used."""

    completion_tokens: StrictInt | None = Field(None, ge=0)
    """Output tokens of all its samples together."""


class ChatAnswer(_Part):
    """An OpenAI chat completion, as far as localjury reads it."""

    choices: list[Choice] = Field(min_length=1)
    """The samples, each index of 0..len-1 once."""
    usage: Usage | None = None
    """What the request used."""

    @model_validator(mode="after")
    def _indices(self) -> ChatAnswer:
        indices = [c.index for c in self.choices]
        if indices == [None]:
            return self
        if None in indices or sorted(indices) != list(range(len(indices))):  # type: ignore[type-var]
            shown = excerpt(", ".join(map(str, indices)), 80)
            raise ValueError(f"the choices' indices are {shown}, not each of 0..{len(indices) - 1} once")
        return self


@dataclass(frozen=True)
class Answers:
    """Reads the answers of the server at ``base_url`` for ``engine``'s model ``model``."""

    base_url: str
    engine: str
    model: str

    def refused(self, response: Reply, mode: str) -> EngineError:
        """The error for a request the server answered with an error status."""
        text = excerpt(response.text)
        if "logprob" in response.text.lower():
            fix = "if it refuses log-probabilities, set server.logprobs: false in the models.yaml entry"
        elif response.status_code in (400, 422):
            fix = (
                f"if it refuses the schema in the form {mode!r}, set server.structured_outputs in the models.yaml "
                "entry (json_schema, json_object or vllm); if the prompt is too long for it, lower context_length "
                "there to the server's, so that such records become per-record errors"
            )
        else:
            fix = "see the server's log; the same command resumes once it answers"
        return EngineError(
            f"the server at {self.base_url} answered HTTP {response.status_code} ({text}); {fix}",
            engine=self.engine,
            model=self.model,
        )

    def read(self, response: Reply) -> ChatAnswer:
        """An HTTP 200 answer read as a chat completion.

        Raises:
            EngineError: It is not one (no JSON object with choices), it is malformed, or its
                log-probabilities are not finite numbers at most 0.
        """
        try:
            return ChatAnswer.model_validate_json(response.content)
        except ValidationError as exc:
            errors = exc.errors()
            # Not JSON, not an object, or no list of choices: not a chat completion at all.
            if any(e["type"] == "json_invalid" or e["loc"] == ("choices",) for e in errors) or any(
                e["loc"] == () and e["type"] == "model_type" for e in errors
            ):
                problem = (
                    f"answered HTTP 200 without completions ({excerpt(response.text)}); is base_url an "
                    "OpenAI-compatible API?"
                )
            elif any(e["loc"][-1:] == ("logprob",) for e in errors):
                problem = (
                    f"answered with log-probabilities that are not finite numbers at most 0 ({problems(exc)}): "
                    "its model's distribution is broken (numbers that overflow, a damaged quantisation) and no "
                    "sample of it is kept; see the server's log, or set server.logprobs: false in the models.yaml "
                    "entry to judge by the votes alone"
                )
            else:
                problem = (
                    f"answered HTTP 200 with a malformed chat completion ({problems(exc)}); is base_url an "
                    "OpenAI-compatible API? see the server's log"
                )
        raise EngineError(f"the server at {self.base_url} {problem}", engine=self.engine, model=self.model)

    def completions(self, response: Reply, schema: dict[str, Any] | None, mode: str | None) -> list[Completion]:
        """The samples of one answer, in the order of their indices; an answer with no
        completion in it, or a malformed one, is an error (a text that is not JSON is not: its
        sample becomes an abstention)."""
        if response.status_code != 200:
            raise self.refused(response, mode or "none")
        answer = self.read(response)
        total = answer.usage.completion_tokens if answer.usage is not None else None
        decision = decision_of(schema) if schema is not None else None
        out = []
        for choice in sorted(answer.choices, key=lambda c: c.index or 0):
            message = choice.message
            text = message.content if message is not None else None
            thinking = (message.reasoning_content or message.reasoning) if message is not None else None
            steps = choice.logprobs.content if choice.logprobs is not None else None
            if steps:
                n_tokens = len(steps)
            elif total is not None:
                n_tokens = round(total / len(answer.choices))  # usage is per request, not per sample
            else:
                n_tokens = 0
            out.append(
                Completion(
                    text=text or "",
                    n_tokens=n_tokens,
                    finished=choice.finish_reason == "stop",
                    verdict_probs=verdict_probs(steps, decision) if steps and schema is not None else None,
                    thinking=bounded_thinking(thinking),
                )
            )
        return out


def refuses_format(response: Reply) -> bool:
    """Whether an error answer to the first request refuses the schema's form (llama-cpp-python
    0.3.36 answers a response_format it does not know with HTTP 500)."""
    if response.status_code in (400, 422):
        return True
    text = response.text.lower()
    return response.status_code == 500 and ("response_format" in text or "json_schema" in text)


def verdict_probs(steps: list[Step], decision: Decision | None) -> tuple[float, ...] | None:
    """Verdict probabilities (of the schema's ``decision``: a 0/1 verdict, an A/B preference,
    a rubric's score) from a chat completion's ``logprobs.content``; None when the server gave
    no alternatives."""
    tops = [[(a.token, a.logprob) for a in step.top_logprobs or ()] for step in steps]
    if not any(tops):
        return None
    return verdict_probs_from_top([step.token for step in steps], tops, decision)
