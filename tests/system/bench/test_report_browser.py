"""bench's HTML report rendered in a real headless Chromium: its tables and plots are there,
and the page is not blank."""

import shutil
import subprocess

import pytest

pytest.importorskip("sklearn")

from tests.fakes import scripted_bench

# a browser
pytestmark = [pytest.mark.system, pytest.mark.usefixtures("private_home")]


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(chromium() is None, reason="no Chromium here (scripts/test installs Debian's chromium)")
def test_the_html_report_renders_in_a_headless_browser(tmp_path):
    from PIL import Image

    _, out = scripted_bench(tmp_path)
    url = (out / "report.html").resolve().as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([chromium(), *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-1000:]
    assert "Judges against gold" in dom.stdout and dom.stdout.count("<svg") >= 4
    # figures: header, A, B, jury, baseline; graded scores: header, A, B, jury
    assert dom.stdout.count("<tr") == 9
    shot = tmp_path / "report.png"
    subprocess.run(
        [chromium(), *flags, "--window-size=1200,1600", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    image = Image.open(shot).convert("L")
    low, high = image.getextrema()
    assert image.size == (1200, 1600) and high - low > 200  # text and plots, not a blank page
    colors = len(set(image.resize((300, 400)).tobytes()))
    assert colors > 20
