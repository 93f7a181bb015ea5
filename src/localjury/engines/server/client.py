"""HTTP to one OpenAI-compatible server for the server engine: a client that contacts the
entry's ``base_url`` and nothing else (no proxy from the environment, no redirect followed),
bounds each request by ``server.request_timeout`` in all and each answer by a size cap
(:mod:`localjury.engines.server.transport`), tries again with exponential backoff when the server
cannot be reached, times out or is busy, and asks the server what it serves (the identity a
model's judgments are stored under)."""

from __future__ import annotations

import reprlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from localjury.errors import ConfigError, EngineError
from localjury.models.identity import ServedModel, ServerKind
from localjury.models.registry import ModelSpec, is_loopback

if TYPE_CHECKING:
    from localjury.engines.server.transport import Cap, Reply


#: The engine's name in messages.
ENGINE = "server"
#: Statuses worth another try: the server is busy or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: First wait before a retry, in seconds; each further wait doubles, up to BACKOFF_CAP.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
#: The longest Retry-After a server may ask for that is honoured, in seconds.
RETRY_AFTER_CAP = 60.0
#: A timeout this close to a try's deadline is the deadline's (a socket's timer may end a hair early).
DEADLINE_SLACK = 0.05
#: The most bytes read of a model list (``GET /v1/models``): some 10,000 entries of vLLM's
#: size, for a server with many adapters.
MODELS_CAP = 4 << 20


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
    text = " ".join(text[: 4 * limit].split())
    return text if len(text) <= limit else text[:limit] + "..."


def problems(exc: ValidationError, limit: int = 3) -> str:
    """What was wrong with an answer, from its validation error: where, what, and the value."""
    out = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "the answer"
        value = excerpt(reprlib.repr(error.get("input")), 60)
        out.append(f"{where}: {error['msg']} (got {value})" if error["type"] != "missing" else f"{where}: missing")
    more = exc.error_count() - len(out)
    return "; ".join(out) + (f"; and {more} more" if more > 0 else "")


class Unreachable(Exception):
    """A request that got no usable answer after every try (internal: becomes an EngineError)."""

    def __init__(self, reason: str, tries: int, seconds: float, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tries = tries
        self.seconds = seconds
        self.timed_out = timed_out
        """Whether the last try ran past ``server.request_timeout``."""


class ServerClient:
    """HTTP to one server, and nowhere else: no proxy from the environment, no redirect
    followed, each try bounded by ``server.request_timeout`` in all and its answer by a size
    cap (:mod:`~localjury.engines.server.transport`), retries with backoff.

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

        from localjury.engines.server.transport import HEADERS, deadline_transport

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
        limits = httpx2.Limits(max_connections=max(1, settings.max_concurrency or 16))
        self.http = httpx2.Client(
            trust_env=False,
            follow_redirects=False,
            timeout=httpx2.Timeout(settings.request_timeout, connect=settings.connect_timeout),
            headers=HEADERS,
            transport=deadline_transport(limits),
        )

    def request(self, method: str, url: str, body: dict[str, Any] | None = None, *, cap: Cap) -> Reply:
        """Send one request, trying again on connection errors, timeouts and busy statuses;
        any other answer (an error status included) is returned. Each try ends by
        ``server.request_timeout`` whatever the server does, and reads at most ``cap``.

        Raises:
            Unreachable: No usable answer after every try.
            EngineError: The answer is over ``cap`` (not tried again: it would be again).
        """
        import httpx2

        from localjury.engines.server.transport import Oversize, fetch

        limit = self.spec.server.request_timeout
        started = time.perf_counter()
        reason = ""
        timed_out = False
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            deadline = time.monotonic() + limit
            try:
                reply = fetch(self.http, method, url, body, deadline=deadline, cap=cap)
            except httpx2.TransportError as exc:
                timed_out = isinstance(exc, httpx2.TimeoutException) and time.monotonic() >= deadline - DEADLINE_SLACK
                if timed_out:
                    reason = f"no whole answer within server.request_timeout, {limit:g} s"
                else:
                    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except Oversize as exc:
                raise self.oversize(f"{method} {self.path(url)}", cap, str(exc)) from None
            else:
                if reply.status_code not in RETRY_STATUSES:
                    return reply
                reason = f"HTTP {reply.status_code}: {excerpt(reply.text)}"
                timed_out = False
                try:
                    retry_after = float(reply.headers.get("retry-after", ""))
                except ValueError:
                    retry_after = None
            if attempt < self.retries:
                self.sleep(backoff(attempt, retry_after))
        raise Unreachable(reason, self.retries + 1, time.perf_counter() - started, timed_out)

    def path(self, url: str) -> str:
        """``url`` as a path from the server's root, for messages (``/v1/chat/completions``)."""
        return url.removeprefix(self.root) or "/"

    def unreachable(self, exc: Unreachable, what: str) -> EngineError:
        """The error for a server that did not answer: its URL, what was tried, and the fix."""
        if exc.timed_out:
            fix = (
                "if its answers take longer, raise server.request_timeout in the models.yaml entry; "
                "else see the server's log"
            )
        else:
            fix = "start the server (or fix base_url in the models.yaml entry)"
        return EngineError(
            f"no answer from the server at {self.base_url} to {what} after {exc.tries} tries over "
            f"{exc.seconds:.1f} s ({exc.reason}); {fix}, then run the same command again",
            engine=ENGINE,
            model=self.spec.name,
        )

    def oversize(self, what: str, cap: Cap, problem: str) -> EngineError:
        """The error for an answer refused for its size: the URL, what was wrong, the cap and its rule."""
        return EngineError(
            f"the answer of the server at {self.base_url} to {what} {problem}, and was not read further; its "
            f"size cap is {cap.size:,} bytes ({cap.rule}): is base_url an OpenAI-compatible server? see its log",
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


class _ModelEntry(BaseModel):
    """One model of a ``GET /v1/models`` answer: the fields localjury reads, each of its type
    (the others are kept for :func:`flavour_of`)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: StrictStr
    """The model's id on the server."""
    owned_by: StrictStr | None = None
    """Who the server says owns it (names the server: ``vllm``, ``llamacpp``...)."""
    root: StrictStr | None = None
    """vLLM's source of the model."""
    max_model_len: StrictInt | None = Field(None, gt=0)
    """vLLM's longest sequence."""


class _ModelList(BaseModel):
    """A ``GET /v1/models`` answer."""

    data: list[_ModelEntry]
    """The models served."""


def served_by(client: ServerClient) -> ServedModel:
    """What the server behind an open client reports of the entry's model; see :func:`served_model`."""
    from localjury.engines.server.transport import Cap

    spec = client.spec
    url = f"{client.base_url}/models"
    try:
        reply = client.request("GET", url, cap=Cap(MODELS_CAP, "the most a model list takes"))
    except Unreachable as exc:
        raise client.unreachable(exc, "GET /models") from None
    try:
        if reply.status_code != 200:
            raise ValueError(f"HTTP {reply.status_code}")
        entries = _ModelList.model_validate_json(reply.content).data
    except ValueError as exc:
        what = problems(exc) if isinstance(exc, ValidationError) else str(exc)
        raise EngineError(
            f"GET {url} answered HTTP {reply.status_code} ({excerpt(reply.text)}), not an OpenAI model "
            f"list ({what}); base_url must be an OpenAI-compatible API, usually ending in /v1",
            engine=ENGINE,
            model=spec.name,
        ) from None
    ids = [e.id for e in entries]
    if spec.served_model is not None:
        if spec.served_model not in ids:
            served = ", ".join(map(repr, ids)) or "nothing"
            raise ConfigError(
                f"model {spec.name!r}: the server at {client.base_url} serves {excerpt(served)}, not served_model "
                f"{spec.served_model!r}; fix served_model in the models.yaml entry"
            )
        entry = entries[ids.index(spec.served_model)]
    elif len(ids) == 1:
        entry = entries[0]
    else:
        raise ConfigError(
            f"model {spec.name!r}: the server at {client.base_url} serves "
            f"{excerpt(', '.join(map(repr, ids))) or 'no model'}; name one as served_model in the models.yaml entry"
        )
    return ServedModel(
        base_url=client.base_url,
        model=entry.id,
        owned_by=entry.owned_by,
        root=entry.root,
        max_model_len=entry.max_model_len,
        flavour=flavour_of(entry.model_dump()),
    )
