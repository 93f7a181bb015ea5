"""HTTP to one OpenAI-compatible server for the server engine: a client that contacts the
entry's ``base_url`` and nothing else (no proxy from the environment, no redirect followed),
tries again with exponential backoff when the server cannot be reached, times out or is busy,
and asks the server what it serves (the identity a model's judgments are stored under)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from localjury.errors import ConfigError, EngineError
from localjury.models.registry import ModelSpec, is_loopback

if TYPE_CHECKING:
    import httpx2


ServerKind = Literal["vllm", "llama-cpp-python", "llama.cpp", "other"]
"""Which OpenAI-compatible server serves a model, as told by its ``/v1/models`` answer."""


class ServedModel(BaseModel):
    """A model on an OpenAI-compatible server, as the server reports it (``GET /v1/models``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    """The server's API URL (the entry's ``base_url``, without a trailing slash)."""
    model: str
    """The model's id on the server; every request names it."""
    owned_by: str | None = None
    """The entry's ``owned_by`` (``vllm`` for vLLM, ``me`` for llama-cpp-python...)."""
    root: str | None = None
    """What vLLM reports as the model's source (its path or hub name); null elsewhere."""
    max_model_len: int | None = None
    """The longest sequence the server plans for, where it says (vLLM)."""
    flavour: ServerKind = "other"
    """Which server this is, as far as localjury can tell."""


#: The engine's name in messages.
ENGINE = "server"
#: Statuses worth another try: the server is busy or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: First wait before a retry, in seconds; each further wait doubles, up to BACKOFF_CAP.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
#: The longest Retry-After a server may ask for that is honoured, in seconds.
RETRY_AFTER_CAP = 60.0


def backoff(attempt: int, retry_after: float | None = None) -> float:
    """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0): 0.5, 1, 2, 4,
    8, 8 ..., or the server's Retry-After when it gives one (at most a minute)."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, RETRY_AFTER_CAP)
    return float(min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))


def api_root(base_url: str) -> str:
    """The server's root, where the endpoints outside the OpenAI API live (``/tokenize``):
    ``base_url`` without its trailing ``/v1``."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def flavour_of(entry: dict[str, Any]) -> ServerKind:
    """Which server this is, from its ``/v1/models`` entry for the model."""
    owner = entry.get("owned_by")
    if owner == "vllm":
        return "vllm"
    if owner == "llamacpp":
        return "llama.cpp"
    if owner == "me" and "permissions" in entry:  # llama-cpp-python 0.3's ModelData
        return "llama-cpp-python"
    return "other"


def excerpt(text: str, limit: int = 300) -> str:
    """A server's answer in one line of at most ``limit`` characters, for a message."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class Unreachable(Exception):
    """A request that got no usable answer after every try (internal: becomes an EngineError)."""

    def __init__(self, reason: str, tries: int, seconds: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tries = tries
        self.seconds = seconds


class ServerClient:
    """HTTP to one server, and nowhere else: no proxy from the environment, no redirect
    followed, retries with backoff.

    Args:
        spec: The models.yaml entry (``base_url``, ``server:`` timeouts and retries).
        retries: Tries after the first (default: the entry's).
        sleep: How to wait between tries (tests pass a recorder).

    Raises:
        ConfigError: ``base_url`` names another machine without ``allow_remote``.
    """

    def __init__(
        self, spec: ModelSpec, *, retries: int | None = None, sleep: Callable[[float], None] | None = None
    ) -> None:
        import httpx2

        assert spec.base_url is not None, "a server client needs a base_url"
        host = httpx2.URL(spec.base_url).host
        if not spec.allow_remote and not is_loopback(host):  # models.yaml checks it too; a spec may be built by hand
            raise ConfigError(
                f"model {spec.name!r}: base_url {spec.base_url} is not this machine; set allow_remote: true in "
                "its models.yaml entry if records may go there"
            )
        self.spec = spec
        self.base_url = spec.base_url.rstrip("/")
        self.root = api_root(self.base_url)
        settings = spec.server
        self.retries = settings.retries if retries is None else retries
        self.sleep = sleep if sleep is not None else time.sleep
        self.http = httpx2.Client(
            trust_env=False,
            follow_redirects=False,
            timeout=httpx2.Timeout(settings.request_timeout, connect=settings.connect_timeout),
            limits=httpx2.Limits(max_connections=max(1, settings.max_concurrency or 16)),
        )

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> httpx2.Response:
        """Send one request, trying again on connection errors, timeouts and busy statuses;
        any other answer (an error status included) is returned.

        Raises:
            Unreachable: No usable answer after every try.
        """
        import httpx2

        started = time.perf_counter()
        reason = ""
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            try:
                response = self.http.request(method, url, json=body)
            except httpx2.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code not in RETRY_STATUSES:
                    return response
                reason = f"HTTP {response.status_code}: {excerpt(response.text)}"
                try:
                    retry_after = float(response.headers.get("retry-after", ""))
                except ValueError:
                    retry_after = None
            if attempt < self.retries:
                self.sleep(backoff(attempt, retry_after))
        raise Unreachable(reason, self.retries + 1, time.perf_counter() - started)

    def unreachable(self, exc: Unreachable, what: str) -> EngineError:
        """The error for a server that did not answer: its URL, what was tried, and the fix."""
        return EngineError(
            f"no answer from the server at {self.base_url} to {what} after {exc.tries} tries over "
            f"{exc.seconds:.1f} s ({exc.reason}); start the server (or fix base_url in the models.yaml entry), "
            "then run the same command again",
            engine=ENGINE,
            model=self.spec.name,
        )

    def close(self) -> None:
        self.http.close()


def served_model(spec: ModelSpec, *, retries: int | None = None) -> ServedModel:
    """What the server at ``spec.base_url`` reports of the model (``GET /v1/models``): the
    identity its judgments are stored under.

    Raises:
        EngineError: The server does not answer, or not as an OpenAI-compatible server.
        ConfigError: It does not serve ``served_model``, or serves several models and the
            entry names none.
    """
    client = ServerClient(spec, retries=retries)
    try:
        return served_by(client)
    finally:
        client.close()


def served_by(client: ServerClient) -> ServedModel:
    """What the server behind an open client reports of the entry's model; see :func:`served_model`."""
    spec = client.spec
    url = f"{client.base_url}/models"
    try:
        response = client.request("GET", url)
    except Unreachable as exc:
        raise client.unreachable(exc, "GET /models") from None
    try:
        entries = response.json()["data"] if response.status_code == 200 else None
    except (ValueError, KeyError, TypeError):
        entries = None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
        raise EngineError(
            f"GET {url} answered HTTP {response.status_code} ({excerpt(response.text)}), not an OpenAI model "
            "list; base_url must be an OpenAI-compatible API, usually ending in /v1",
            engine=ENGINE,
            model=spec.name,
        )
    ids = [str(e["id"]) for e in entries]
    if spec.served_model is not None:
        if spec.served_model not in ids:
            served = ", ".join(map(repr, ids)) or "nothing"
            raise ConfigError(
                f"model {spec.name!r}: the server at {client.base_url} serves {served}, not served_model "
                f"{spec.served_model!r}; fix served_model in the models.yaml entry"
            )
        entry = entries[ids.index(spec.served_model)]
    elif len(ids) == 1:
        entry = entries[0]
    else:
        raise ConfigError(
            f"model {spec.name!r}: the server at {client.base_url} serves "
            f"{', '.join(map(repr, ids)) or 'no model'}; name one as served_model in the models.yaml entry"
        )
    max_len = entry.get("max_model_len")
    return ServedModel(
        base_url=client.base_url,
        model=str(entry["id"]),
        owned_by=str(entry["owned_by"]) if entry.get("owned_by") is not None else None,
        root=str(entry["root"]) if entry.get("root") is not None else None,
        max_model_len=max_len if isinstance(max_len, int) else None,
        flavour=flavour_of(entry),
    )
