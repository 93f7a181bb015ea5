"""`localjury review`: a local page to read every judgment and label it by keyboard."""

from __future__ import annotations

import contextlib
import secrets
import socket
from pathlib import Path
from typing import Annotated

import typer

from localjury.cli._common import app, checked_path, err, out
from localjury.errors import ConfigError

#: The only address the review listens on.
HOST = "127.0.0.1"


@app.command()
def review(
    results: Annotated[
        Path,
        typer.Argument(
            callback=checked_path,
            help="A results file (`localjury run --out`), a bench's predictions.jsonl, or a labels file alone.",
        ),
    ],
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            "-l",
            callback=checked_path,
            help="The labels file to write (default: RESULTS' name with .labels.jsonl; a bench folder's labels.jsonl).",
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            callback=checked_path,
            help="The records judged, to show their texts (default: the data set the manifest or metrics.json names).",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port on 127.0.0.1 (default: a free one).")
    ] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the browser.")] = False,
) -> None:
    """Serve a page on 127.0.0.1 to read every judgment, filter the queue and label each record
    pass or fail by keyboard (? shows the keys); Ctrl-C stops it.

    Each label is saved at once to the labels file (and its history beside it), in the format
    `align`, `bench -f jsonl` and `calibrate` read; reopening resumes. The results are only read.
    The page refuses every request without the token in the address printed.
    """
    import uvicorn

    from localjury.review.app import create_app
    from localjury.review.queue import Review

    opened = Review(results, labels=labels, data=data)
    for problem in [*opened.index.problems, *opened.labels.problems][:10]:
        err.print(f"warning: {results}, {problem}", markup=False, highlight=False)
    if opened.opened.why_no_data:
        err.print(f"warning: the records' texts are not shown: {opened.opened.why_no_data}", markup=False)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)  # before the address is printed: a browser opened at once is not refused
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); choose another --port") from None
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    address = f"http://{HOST}:{port}/?token={token}"
    rows = len(opened.index)
    out.print(
        f"reviewing {rows:,} row{'s' * (rows != 1)} of {results} ({opened.index.kind})"
        f"\nlabels: {opened.labels.path}\nopen {address}\nCtrl-C stops",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if open_browser:
        import webbrowser

        webbrowser.open(address)
    config = uvicorn.Config(create_app(opened, token, port), log_level="warning", lifespan="off", access_log=False)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again once it has shut down
        uvicorn.Server(config).run(sockets=[sock])
    out.print(f"stopped; {len(opened.labels.labels):,} labels in {opened.labels.path}", markup=False, highlight=False)
