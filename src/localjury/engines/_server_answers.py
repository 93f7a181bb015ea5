"""What is sent to an OpenAI-compatible server beside the messages (the seed, the schema's
form), and what its answers mean: the samples with their verdict probabilities, or the error
that says what to change. The server engine's HTTP-free half (:mod:`localjury.engines.server`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localjury._hashing import content_hash
from localjury.engines._server_client import excerpt
from localjury.engines._verdicts import Decision, decision_of, verdict_probs_from_top
from localjury.engines.base import Completion
from localjury.errors import EngineError

if TYPE_CHECKING:
    import httpx2

#: The name of the schema in an OpenAI ``response_format``.
SCHEMA_NAME = "judgment"


def request_seed(seed: int, prompt: str, first_sample: int) -> int:
    """A request's seed from the run seed, its prompt and the index of its first sample (31
    bits: servers parse seeds as 32-bit integers, signed or not)."""
    return int(content_hash(seed=seed, prompt=prompt, first=first_sample)[:8], 16) >> 1


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


@dataclass(frozen=True)
class Answers:
    """Reads the answers of the server at ``base_url`` for ``engine``'s model ``model``."""

    base_url: str
    engine: str
    model: str

    def refused(self, response: httpx2.Response, mode: str) -> EngineError:
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

    @staticmethod
    def json(response: httpx2.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def completions(
        self, response: httpx2.Response, schema: dict[str, Any] | None, mode: str | None
    ) -> list[Completion]:
        """The samples of one answer; an answer with no completion in it is an error (a text
        that is not JSON is not: its sample becomes an abstention)."""
        if response.status_code != 200:
            raise self.refused(response, mode or "none")
        data = self.json(response)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
            raise EngineError(
                f"the server at {self.base_url} answered HTTP 200 without completions "
                f"({excerpt(response.text)}); is base_url an OpenAI-compatible API?",
                engine=self.engine,
                model=self.model,
            )
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        total = usage.get("completion_tokens") if isinstance(usage, dict) else None
        out = []
        for choice in sorted(choices, key=lambda c: c.get("index", 0)):
            message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
            text = message.get("content") if isinstance(message, dict) else None
            steps = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
            steps = steps if isinstance(steps, list) else None
            if steps:
                n_tokens = len(steps)
            elif isinstance(total, int):
                n_tokens = round(total / len(choices))  # usage is per request, not per sample
            else:
                n_tokens = 0
            out.append(
                Completion(
                    text=text if isinstance(text, str) else "",
                    n_tokens=n_tokens,
                    finished=choice.get("finish_reason") == "stop",
                    verdict_probs=verdict_probs(steps, decision_of(schema)) if steps and schema is not None else None,
                )
            )
        return out


def refuses_format(response: httpx2.Response) -> bool:
    """Whether an error answer to the first request refuses the schema's form (llama-cpp-python
    0.3.36 answers a response_format it does not know with HTTP 500)."""
    if response.status_code in (400, 422):
        return True
    text = response.text.lower()
    return response.status_code == 500 and ("response_format" in text or "json_schema" in text)


def verdict_probs(steps: list[Any], decision: Decision | None) -> tuple[float, ...] | None:
    """Verdict probabilities (of the schema's ``decision``: a 0/1 verdict, an A/B preference,
    a rubric's score) from a chat completion's ``logprobs.content``; None when the server gave
    no alternatives."""
    tokens: list[str] = []
    tops: list[list[tuple[str, float]]] = []
    for step in steps:
        if not isinstance(step, dict) or not isinstance(step.get("token"), str):
            return None
        tokens.append(step["token"])
        alternatives = step.get("top_logprobs") or []
        tops.append(
            [
                (a["token"], float(a["logprob"]))
                for a in alternatives
                if isinstance(a, dict) and isinstance(a.get("token"), str) and isinstance(a.get("logprob"), int | float)
            ]
        )
    if not any(tops):
        return None
    return verdict_probs_from_top(tokens, tops, decision)
