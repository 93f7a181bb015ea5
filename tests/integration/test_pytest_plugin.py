"""The pytest plugin, as a user meets it: installed by its entry point, its ``judge`` fixture
judging with the real embedded model in a pytest run of a user's test file (a subprocess),
the engine loaded once for the session, a failing assertion reporting the jury's reasons."""

import json
import subprocess
import sys
import textwrap

USER_TESTS = """
import json, os

RESPONSE = "The Berlin Wall fell on 9 November 1989."
DATED = "The response must include a specific date or year."
ASKED = "When did the Berlin Wall fall?"


def test_passes(judge):
    assert judge.passes(RESPONSE, DATED, user_input=ASKED)


def test_fails(judge):
    assert not judge.passes(RESPONSE, DATED, user_input=ASKED)


def test_a_predefined_aspect_by_name(judge):
    j = judge.passes(RESPONSE, "conciseness", user_input=ASKED)
    with open(os.environ["JUDGED"], "w") as fh:
        json.dump({"score": j.score, "reasons": judge.passes(RESPONSE, DATED, user_input=ASKED).reasons}, fh)
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


def test_the_judge_fixture_loads_once_and_a_failed_assertion_shows_the_reasons(smollm, tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "conftest.py").write_text(COUNT_LOADS)
    env = {**__import__("os").environ, "JUDGED": str(tmp_path / "judged.json"), "LOADS": str(tmp_path / "loads.json")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path / "test_user.py"),
         "--localjury-models", "smollm2-135m-instruct", "--localjury-cache", str(tmp_path / "store.sqlite"),
         "--localjury-strictness", "3"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900,
    )  # fmt: skip
    out = proc.stdout
    # Whatever the verdict, exactly one of "passes" and "not passes" fails: pytest exits 1.
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    assert "1 failed, 2 passed" in out
    judged = json.loads((tmp_path / "judged.json").read_text())
    assert 0 <= judged["score"] <= 1
    # The failure names the criterion and carries every reason of the jury (the same judgment:
    # the same seed and store), in the report's "localjury judgments" section.
    section = out.split("localjury judgments", 1)[1]
    assert "on the criterion 'The response must include a specific date or year.'" in section
    assert "smollm2-135m-instruct: verdict" in section and "votes [" in section
    assert judged["reasons"] and all(textwrap.shorten(r, 60)[:40] in section for r in judged["reasons"])
    # Four judgments, one engine load for the whole session.
    assert json.loads((tmp_path / "loads.json").read_text()) == [["smollm2-135m-instruct", "transformers"]]
