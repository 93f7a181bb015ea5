"""`localjury review` as a person uses it: a real run of the embedded judge reviewed in a real
headless Chromium (Debian's chromium and chromium-driver, driven by Selenium): filter, label five
records by keyboard, undo, reload and find them kept, the agreement shown equal to scikit-learn's,
a hostile record inert, a request without the token refused, Ctrl-C; then `localjury align` fits
a profile to the labels saved."""

import json
import shutil
import signal
import urllib.error
import urllib.request

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("selenium", reason="selenium not installed (the dev extra has it)")

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.cli_process import cli
from tests.fakes import run_cli

# a browser, a server
pytestmark = [pytest.mark.system, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
DATED = "The response must include a specific date or year."
RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "hamlet", "user_input": "Who wrote Hamlet?", "response": "William Shakespeare."},
    {"id": "moon", "user_input": "When did people land on the Moon?", "response": "In July 1969."},
    {"id": "water", "user_input": "What is water made of?", "response": "Hydrogen and oxygen."},
    {"id": "euro", "user_input": "When did the euro start?", "response": "Its notes came out in 2002."},
    {"id": "sky", "user_input": "Why is the sky blue?", "response": "Rayleigh scattering."},
    {
        "id": "hostile",
        "user_input": '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">',
        "response": '<a href="javascript:window.pwned = 3">a link</a> \u202eright to left\u202c in 1999',
    },
]


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def served(results):
    """`localjury review RESULTS` in a subprocess, and the address it printed."""
    proc = cli("review", str(results))
    for line in proc.stdout:
        if line.startswith("open http://127.0.0.1:"):
            return proc, line.split()[1]
    proc.kill()
    pytest.fail(f"no address printed: {proc.stderr.read()[-2000:]}")


def shown_row(driver):
    """The row number of the record's page shown, once one is (a page being replaced is waited for).

    Read in one script, with no element handle: a handle found just before the page is replaced can be
    neither found nor stale when read (Chromium answers "Node with given id does not belong to the document")."""
    return WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("const item = document.getElementById('item'); return item && item.dataset.n")
    )


def press(driver, key, then=None):
    """Press ``key`` on the record's page and wait for another record's page (row ``then``)."""
    before = shown_row(driver)
    driver.find_element(By.TAG_NAME, "body").send_keys(key)
    WebDriverWait(driver, 20).until(lambda d: shown_row(d) != before and then in (None, shown_row(d)))


@pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None, reason="no chromium and chromium-driver (scripts/test installs them)"
)
def test_a_reviewer_labels_a_real_run_by_keyboard_and_align_fits_the_labels(tmp_path, monkeypatch, capsys, browser):
    from sklearn.metrics import cohen_kappa_score

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    results = tmp_path / "run" / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "-c", f"dated={DATED}", "--models",
                           "smollm2-135m-instruct", "--engine", "llamacpp", "-k", "2", "--seed", "0", "--no-cache",
                           "--max-tokens", "48", "--out", results, "--quiet")  # fmt: skip
    assert code == 0, err
    proc, address = served(results)
    try:
        base = address.split("/?")[0]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/")
        assert refused.value.code == 403
        browser.get(address)
        assert browser.current_url == base + "/"  # the token moved to a cookie, out of the address
        browser.find_element(By.CSS_SELECTOR, '[data-filter="all"]').click()
        assert len(browser.find_elements(By.CSS_SELECTOR, "#queue tbody tr")) == len(RECORDS)
        browser.find_element(By.CSS_SELECTOR, '[data-filter="unlabeled"]').click()
        browser.find_element(By.TAG_NAME, "body").send_keys("j")  # the first of the queue
        assert shown_row(browser) == "0"
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("n")
        browser.switch_to.active_element.send_keys("the year is there")
        browser.switch_to.active_element.send_keys("\ue00c")  # Esc leaves the note
        golds = {"p": 1, "f": 0}
        keys = ["p", "f", "p", "p", "f"]
        for key in [*keys, "f"]:
            press(browser, key)
        press(browser, "u", then="5")  # undo the sixth label: back at its record, unlabeled
        assert browser.find_element(By.ID, "label").text == "\u2013"  # an en dash: no label
        browser.get(base + "/?filter=labeled")
        browser.refresh()
        rows = browser.find_elements(By.CSS_SELECTOR, "#queue tbody tr")
        assert [r.find_element(By.CLASS_NAME, "label").text for r in rows] == ["pass", "fail", "pass", "pass", "fail"]
        labels = [json.loads(line) for line in (tmp_path / "run" / "r.labels.jsonl").read_text().splitlines()]
        assert [(r["id"], r["gold"]) for r in labels] == [
            (rec["id"], golds[k]) for rec, k in zip(RECORDS, keys, strict=False)
        ]
        assert labels[0]["note"] == "the year is there" and labels[0]["response"] == RECORDS[0]["response"]

        browser.get(base + "/agreement")
        shown = browser.find_element(By.CSS_SELECTOR, '[data-judge="smollm2-135m-instruct"]').get_attribute(
            "data-kappa"
        )
        judged = {r["record_id"]: r for r in map(json.loads, results.read_text().splitlines())}
        verdicts = [judged[r["id"]]["models"][0]["verdict"] for r in labels]
        decided = [(r["gold"], v) for r, v in zip(labels, verdicts, strict=True) if v is not None]
        expected = (
            cohen_kappa_score(*zip(*decided, strict=True))
            if len({g for g, _ in decided} | {v for _, v in decided}) > 1
            else None
        )
        assert (float(shown) if shown else None) == (None if expected is None else pytest.approx(expected))

        browser.get(base + "/item/6")
        assert browser.execute_script("return window.pwned") is None
        record = browser.find_element(By.ID, "record")
        assert not record.find_elements(By.TAG_NAME, "img") and not record.find_elements(By.TAG_NAME, "a")
        assert "<script>window.pwned = 1</script>" in record.text and "U+202E" in record.text
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    assert "stopped; 5 labels in" in out

    profile = tmp_path / "dated.profile.yaml"
    labels = tmp_path / "run" / "r.labels.jsonl"
    align = ["align", labels, "--metric", "dated", "-c", DATED, "--models", "smollm2-135m-instruct", "--no-calibrate"]
    code, out, err = run_cli(monkeypatch, capsys, *align, "--out", profile)
    assert code == 0, err
    assert "5 labeled examples (3 pass, 2 fail)" in out and profile.is_file()
