"""The manual's pictures (see scripts/pictures): each command runs for real, its terminal
output (forced to colour, 100 columns) is turned into an SVG by Rich, and the HTML report and
`localjury review`'s page are screenshot by headless Chromium. The run is judged afresh (``--no-cache``), so that its
summary shows what a first run costs."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
#: Where the run and the bench write, relative to the root (as the pictures show it).
OUT = Path("out") / "pictures"
JUDGE = "qwen2.5-coder-1.5b-instruct"
WIDTH = 100
DATED = "The response must include a specific date or year."


def terminal(args: list[str]) -> str:
    """``localjury ARGS``' stdout and stderr, with colour, as a 100-column terminal shows them."""
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": str(WIDTH), "TERM": "xterm-256color"}
    proc = subprocess.run(["localjury", *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if proc.returncode != 0:
        sys.exit(f"localjury {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stderr + proc.stdout


def svg(ansi: str, name: str, title: str) -> None:
    """Write ``ansi`` as docs/images/NAME.svg, a terminal window titled ``title``."""
    console = Console(record=True, width=WIDTH, force_terminal=True, file=io.StringIO())
    console.print(Text.from_ansi(ansi.rstrip("\n")))
    # The page must render offline: the local font or the browser's monospace, no web font.
    picture = re.sub(r',\s*url\("https?://[^"]*"\) format\("[^"]*"\)', "", console.export_svg(title=title))
    (IMAGES / f"{name}.svg").write_text(picture)
    print(f"wrote docs/images/{name}.svg", file=sys.stderr)


def report(html: Path) -> None:
    """Screenshot bench's report.html as docs/images/report.png (1200 x 1500)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        sys.exit("scripts/pictures: no Chromium here (Debian: apt-get install chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1500"]
    shot = IMAGES / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", html.resolve().as_uri()], capture_output=True,
                   timeout=120, check=True)  # fmt: skip
    print("wrote docs/images/report.png", file=sys.stderr)


def review_page(results: Path, record: str, metric: str) -> None:
    """Screenshot `localjury review`'s page of one record as docs/images/review.png (1200 x 900):
    the server started for real, Chromium given its address with the token."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        sys.exit("scripts/pictures: no Chromium here (Debian: apt-get install chromium)")
    rows = [json.loads(line) for line in (ROOT / results).read_text().splitlines()]
    n = next(i for i, r in enumerate(rows) if (r["record_id"], r["metric"]) == (record, metric))
    server = subprocess.Popen(["localjury", "review", str(results)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        address = next(line.split()[1] for line in server.stdout or [] if line.startswith("open http"))
        base, token = address.split("/?token=")
        shot = IMAGES / "review.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,900"]
        page = f"{base}/item/{n}?filter=all&token={token}"
        subprocess.run([browser, *flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    print("wrote docs/images/review.png", file=sys.stderr)


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    results = OUT / "results.jsonl"
    run = ["run", "examples/demo.jsonl", "--criterion", f"mentions_date={DATED}", "--aspect", "conciseness",
           "--models", JUDGE, "--strictness", "3", "--seed", "0", "--quiet", "--no-cache",
           "--out", str(results)]  # fmt: skip
    svg(terminal(run), "run-summary", "localjury run examples/demo.jsonl ...")
    show = ["show", str(results), "--record", "wall", "--metric", "mentions_date"]
    svg(terminal(show), "show", "localjury show results.jsonl --record wall --metric mentions_date")
    review_page(results, "wall", "mentions_date")
    bench = ["bench", "examples/dated_labels.jsonl", "--format", "jsonl", "--metric", f"dated={DATED}",
             "--models", JUDGE, "--strictness", "3", "--seed", "0", "--quiet", "--out", str(OUT / "bench")]  # fmt: skip
    terminal(bench)
    report(ROOT / OUT / "bench" / "report.html")


if __name__ == "__main__":
    main()
