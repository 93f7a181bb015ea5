"""The pytest plugin, as a user meets it: installed by its entry point, its ``judge`` fixture
judging with the real embedded model in a pytest run (a subprocess) of the committed example
test file, examples/test_judge_example.py, the engine loaded once for the session, a failing
assertion reporting the jury's reasons."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests import ROOT

pytestmark = pytest.mark.slow  # the embedded SmolLM2, loaded for real

#: The user's test file: the committed example, run as the README shows.
EXAMPLE = ROOT / "examples" / "test_judge_example.py"

#: Each of the example's assertions the other way round (the same judgments, from the store),
#: and one test that writes a judgment's score and reasons where this test can read them.
OPPOSITE = """
import json, os

from test_judge_example import DATED, QUESTION, my_system


def test_not_the_answer_gives_a_date(judge):
    assert not judge.passes(my_system(QUESTION), DATED, user_input=QUESTION)


def test_not_the_answer_is_concise(judge):
    assert not judge.passes(my_system(QUESTION), "conciseness", user_input=QUESTION)


def test_zz_record_the_judgment(judge):
    j = judge.passes(my_system(QUESTION), DATED, user_input=QUESTION)
    with open(os.environ["JUDGED"], "w") as fh:
        json.dump({"score": j.score, "reasons": j.reasons}, fh)
"""

#: Counts the engine loads of the session (not the pooled hand-backs): the user's conftest.
COUNT_LOADS = """
import json, os
import localjury.engines.pool as pool

LOADS = []
_kept = pool.kept


def counting(spec, name, load):
    def counted():
        LOADS.append((spec.name, name))
        return load()
    return _kept(spec, name, counted)


pool.kept = counting


def pytest_sessionfinish(session):
    with open(os.environ["LOADS"], "w") as fh:
        json.dump(LOADS, fh)
"""


def test_the_example_runs_its_engine_once_and_a_failed_assertion_shows_the_reasons(smollm, tmp_path):
    shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name)
    (tmp_path / "test_opposite.py").write_text(OPPOSITE)
    (tmp_path / "conftest.py").write_text(COUNT_LOADS)
    env = {**os.environ, "JUDGED": str(tmp_path / "judged.json"), "LOADS": str(tmp_path / "loads.json")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path / EXAMPLE.name),
         str(tmp_path / "test_opposite.py"), "--junitxml", str(tmp_path / "report.xml"),
         "--localjury-models", "smollm2-135m-instruct", "--localjury-cache", str(tmp_path / "store.sqlite"),
         "--localjury-strictness", "3"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900,
    )  # fmt: skip
    out = proc.stdout
    # Whatever the verdicts, each of the example's tests and its opposite (the same judgment:
    # the same seed and store) have opposite outcomes: two fail, pytest exits 1.
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    assert "2 failed, 3 passed" in out
    failed = {
        case.get("name"): case.find("failure") is not None
        for case in ET.parse(tmp_path / "report.xml").iter("testcase")
    }
    assert failed["test_the_answer_gives_a_date"] != failed["test_not_the_answer_gives_a_date"]
    assert failed["test_the_answer_is_concise"] != failed["test_not_the_answer_is_concise"]
    judged = json.loads((tmp_path / "judged.json").read_text())
    assert judged["score"] is None or 0 <= judged["score"] <= 1
    # The failure names the criterion and carries every reason of the jury, in the report's
    # "localjury judgments" section.
    section = out.split("localjury judgments", 1)[1]
    assert "on the criterion 'The response must include a specific date or year.'" in out
    assert "smollm2-135m-instruct: verdict" in section and "votes [" in section
    assert judged["reasons"] and all(textwrap.shorten(r, 60)[:40] in out for r in judged["reasons"])
    # Five tests, two judgments generated, one engine load for the whole session.
    assert json.loads((tmp_path / "loads.json").read_text()) == [["smollm2-135m-instruct", "transformers"]]
