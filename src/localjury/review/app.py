"""The review's web app (Starlette, server-rendered with Jinja2, a little plain JavaScript): the
queue, a row's page, labeling, and what the labels say so far.

Safe by default: it answers only requests whose Host is this server's own address (no DNS
rebinding), that carry the token printed when it started (compared in constant time: in the
address once, then in a same-site cookie), and whose Origin, where given, is its own; every page
forbids anything from elsewhere by its Content-Security-Policy; every text from a record is
rendered as text. The file under review is only ever read."""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import URL, Headers, MutableHeaders, QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from localjury.errors import ConfigError, LocaljuryError
from localjury.review.agreement import agreement
from localjury.review.queue import FILTERS, LABELS, SORTS, Review
from localjury.review.view import inert, quotes_by_field, record_texts

HERE = Path(__file__).parent
COOKIE = "localjury_review"
#: Rows a page of the queue lists.
PAGE = 50
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


class Guard:
    """Refuse what is not this server's own page: another Host, another Origin, no token."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app, self.token, self.port = app, token.encode(), port
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        refused = self.refusal(scope)
        if refused is not None:
            await refused(scope, receive, secured)
        else:
            await self.app(scope, receive, secured)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to a request that is refused, or that hands over the token; None to serve it."""
        headers = Headers(scope=scope)
        if headers.get("host") not in self.hosts:
            return PlainTextResponse("this review answers only at its own address (127.0.0.1)", status_code=421)
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return PlainTextResponse("requests from other sites are refused", status_code=403)
        if scope["method"] not in ("GET", "HEAD") and origin is None:
            return PlainTextResponse("a change needs the page's own Origin", status_code=403)
        given = QueryParams(scope.get("query_string", b"")).get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token):
            # The token leaves the address bar and history: kept in a cookie this site alone sends.
            url = URL(scope=scope).remove_query_params("token")
            moved = RedirectResponse(str(url.replace(scheme="", netloc="")) or "/", status_code=303)
            moved.set_cookie(COOKIE, self.token.decode(), httponly=True, samesite="strict", path="/")
            return moved
        cookie = _cookie(headers)
        if cookie is None or not hmac.compare_digest(cookie.encode(), self.token):
            return PlainTextResponse(
                "this review needs its token: open the address `localjury review` printed", status_code=403
            )
        return None


def _cookie(headers: Headers) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def create_app(review: Review, token: str, port: int) -> ASGIApp:
    """The review's app, guarded (see :class:`Guard`) for the server at 127.0.0.1:``port``."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    env.filters["inert"] = inert

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        base = {"review": review, "opened": review.opened, "labels": len(review.labels.labels)}
        return HTMLResponse(env.get_template(name).render(**base, **context), status_code=status)

    def view(request: Request) -> dict[str, Any]:
        q = request.query_params
        metric = q.get("metric") if q.get("metric") in review.metrics() else None
        first = "all" if review.index.kind == LABELS else "unlabeled"  # a labels file's rows are all labeled
        chosen = {"filter": q.get("filter", first), "sort": q.get("sort", "file"), "metric": metric}
        if chosen["filter"] not in FILTERS or chosen["sort"] not in SORTS:
            raise ConfigError(f"unknown filter or sort in {request.url.query!r}")
        return chosen

    def link(path: str, chosen: dict[str, Any], **more: Any) -> str:
        return f"{path}?{urlencode({k: v for k, v in {**chosen, **more}.items() if v not in (None, '')})}"

    async def queue(request: Request) -> Response:
        chosen = view(request)
        masks = review.masks(chosen["metric"])
        rows = review.queue(chosen["filter"], chosen["sort"], chosen["metric"], masks)
        counts = {name: int(mask.sum()) for name, mask in masks.items()}
        start = max(0, int(request.query_params.get("page", "0") or 0)) * PAGE
        listed = [(int(n), *review.index.key(int(n))) for n in rows[start : start + PAGE]]
        return page(
            "queue.html", chosen=chosen, counts=counts, rows=listed, total=len(rows), start=start, page_size=PAGE,
            filters=FILTERS, sorts=SORTS, link=link, index=review.index, labeled=review.labeled(),
        )  # fmt: skip

    async def item(request: Request) -> Response:
        chosen = view(request)
        n = int(request.path_params["n"])
        shown = review.item(n)
        rows = review.queue(chosen["filter"], chosen["sort"], chosen["metric"])
        here = np.flatnonzero(rows == n)
        after = rows[here[0] + 1 :] if len(here) else rows[rows > n] if chosen["sort"] == "file" else rows
        before = rows[: here[0]] if len(here) else rows[rows < n] if chosen["sort"] == "file" else rows[:0]
        nav = {
            "next": link(f"/item/{int(after[0])}", chosen) if len(after) else None,
            "prev": link(f"/item/{int(before[-1])}", chosen) if len(before) else None,
            "queue": link("/", chosen),
            "place": (int(here[0]) + 1 if len(here) else None, len(rows)),
        }
        texts = record_texts(shown["record"] or {}, quotes_by_field(shown["models"], shown["row"]))
        return page("item.html", item=shown, texts=texts, nav=nav, chosen=chosen)

    async def label(request: Request) -> Response:
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("n"), int):
            raise ConfigError("a label is a JSON object with the row's number n, gold (0, 1 or null) and a note")
        note = body.get("note")
        kept = review.label(body["n"], body.get("gold"), note if isinstance(note, str) else None)
        return JSONResponse({"label": kept, "labels": len(review.labels.labels)})

    async def agreement_page(request: Request) -> Response:
        return page("agreement.html", figures=agreement(review))

    async def agreement_json(request: Request) -> Response:
        return JSONResponse(agreement(review))

    async def refused(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(exc)}, status_code=400)
        return page("error.html", status=400, error=str(exc))

    app = Starlette(
        routes=[
            Route("/", queue),
            Route("/item/{n:int}", item),
            Route("/agreement", agreement_page),
            Route("/api/agreement", agreement_json),
            Route("/api/label", label, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        exception_handlers={LocaljuryError: refused, ValueError: refused},
    )
    return Guard(app, token, port)
