"""HTTP for the server engine, bounded whatever the server does: a total deadline per request
and a cap on the size of each answer.

httpx (and httpcore under it) time each socket read and write on its own: a server that
sends one byte a second, or trickles its headers, holds a request for as long as it likes.
Here the connection pool's network backend gives every socket operation of a request (the
connection, the TLS handshake, each send, each receive) at most what is left of the request's
deadline, which :func:`fetch` sets around the request; so the request ends by its deadline in
whichever phase it is. The name lookup is the one step not bounded (the system resolver's own
timeouts apply).

The body is read in chunks and refused once it passes its cap, before it is all in memory. The
answer is asked for uncompressed (``Accept-Encoding: identity``); one that comes compressed
anyway is refused, as its size could not be bounded before decompressing it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import httpcore2
import httpx2

#: What every request asks for: the answer as it is, so that its size is the size read.
HEADERS = {"Accept-Encoding": "identity"}

_DEADLINE: ContextVar[float | None] = ContextVar("localjury_server_deadline", default=None)
"""The ``time.monotonic()`` by which the request this thread sends must have ended."""


class Cap(NamedTuple):
    """The most bytes read of one answer, and the rule it comes from (for messages)."""

    size: int
    rule: str


@dataclass(frozen=True)
class Reply:
    """A server's whole answer to one request, read within its cap."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @cached_property
    def text(self) -> str:
        """The body as text (UTF-8; bytes that are not are replaced)."""
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ValueError: It is not JSON, or nests deeper than Python's stack.
        """
        try:
            return json.loads(self.content)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None


class Oversize(Exception):
    """An answer over its cap, or one whose size cannot be bounded (internal: the client
    makes it an EngineError naming the server); the message says which, as "the answer ..."
    would go on."""


def _left(timeout: float | None, late: type[httpcore2.TimeoutException]) -> float | None:
    """``timeout`` shortened to what is left of the current request's deadline (unchanged
    outside a request); ``late`` raised once the deadline has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the request's deadline (server.request_timeout) has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every operation ends by the deadline of the request using it."""

    def __init__(self, stream: httpcore2.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._stream.get_extra_info("socket")
        if sock is None:  # pragma: no cover - httpcore2's sync streams all have one
            self._stream.write(buffer, _left(timeout, httpcore2.WriteTimeout))
            return
        # httpcore2 gives each send() of a write the whole timeout: a server that reads a byte
        # at a time would stretch it without end. Each send here gets what is left.
        view = memoryview(buffer)
        try:
            while view:
                sock.settimeout(_left(timeout, httpcore2.WriteTimeout))
                view = view[sock.send(view) :]
        except TimeoutError as exc:
            raise httpcore2.WriteTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpcore2.WriteError(str(exc)) from exc

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        # Python bounds a whole handshake by the socket's timeout (not each step of it).
        tls = self._stream.start_tls(ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout))
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore2's own synchronous backend, its connections bounded by :class:`_DeadlineStream`."""

    def __init__(self) -> None:
        self._backend = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.NetworkStream:
        timeout = _left(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore2.NetworkStream:  # pragma: no cover - base_url is always http(s)
        timeout = _left(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:  # pragma: no cover - httpcore2 sleeps only between its own retries
        self._backend.sleep(seconds)


def deadline_transport(limits: httpx2.Limits) -> httpx2.HTTPTransport:
    """httpx2's transport, its connections made by :class:`_DeadlineBackend`; no proxy, and
    the system's trust store for TLS."""
    transport = httpx2.HTTPTransport(trust_env=False, limits=limits)
    # httpx2 2.x sends every request through the httpcore2 pool it keeps as ``_pool``, and its
    # constructor takes no network backend: the pool is made again, the same but for the backend.
    transport._pool.close()
    transport._pool = httpcore2.ConnectionPool(
        ssl_context=httpx2.create_ssl_context(trust_env=False),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_DeadlineBackend(),
    )
    return transport


@contextmanager
def _until(deadline: float) -> Iterator[None]:
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def fetch(
    http: httpx2.Client, method: str, url: str, body: dict[str, Any] | None, *, deadline: float, cap: Cap
) -> Reply:
    """Send one request and read its whole answer, by ``deadline`` and within ``cap``.

    Raises:
        httpx2.TransportError: No answer (``httpx2.TimeoutException`` once the deadline passed).
        Oversize: The answer is over the cap, or compressed.
    """
    # Encoded here, as ASCII: httpx2 encodes JSON as UTF-8, which a lone surrogate in a record's
    # text cannot be; escaped, it is JSON the server reads as the record wrote it.
    content = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")
    headers = None if body is None else {"Content-Type": "application/json"}
    with _until(deadline), http.stream(method, url, content=content, headers=headers) as response:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise Oversize(
                f"came compressed (Content-Encoding {encoding!r}) although localjury asks for it uncompressed, so "
                "its size could not be bounded before decompressing it"
            )
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > cap.size:
            raise Oversize(f"announced {int(declared):,} bytes, over its size cap")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_raw():
            size += len(chunk)
            if size > cap.size:
                raise Oversize(f"passed its size cap ({size:,} bytes had come)")
            chunks.append(chunk)
        return Reply(response.status_code, response.headers, b"".join(chunks))
