"""A test file of your own, judged by a local jury: the ``judge`` fixture of localjury's pytest
plugin (installed with localjury, nothing to import or register).

Run it from the repository's root (after scripts/setup and `localjury models pull
smollm2-135m-instruct`):

    .venv/bin/pytest examples/test_judge_example.py --localjury-models smollm2-135m-instruct

Without ``--localjury-models`` the default judge (qwen2.5-coder-1.5b-instruct) judges. The
engine loads once for the session; each judgment draws three samples (``--localjury-strictness``)
with seed 0 and goes through the judgment store, so a second run generates nothing. Whether a
test passes is the jury's verdict: SmolLM2 is too small to judge well, and a failing test's
report shows each model's votes and reasons under "localjury judgments".
"""

QUESTION = "When did the Berlin Wall fall?"
DATED = "The response must include a specific date or year."


def my_system(question: str) -> str:
    """The system under test (here a canned answer; yours calls your model or pipeline)."""
    return "The Berlin Wall fell on 9 November 1989."


def test_the_answer_gives_a_date(judge):
    response = my_system(QUESTION)
    assert judge.passes(response, DATED, user_input=QUESTION)


def test_the_answer_is_concise(judge):
    # A predefined aspect by name (`localjury aspects` lists them).
    assert judge.passes(my_system(QUESTION), "conciseness", user_input=QUESTION)
