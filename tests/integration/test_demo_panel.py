"""The demo's default panel on the demo's obvious cases: what `scripts/demo` judges, with its
panel, strictness and seed, must come out right where the answer is not in doubt.

Qwen2.5-Coder-1.5B gets 13 of the 17 labelled cases (examples/demo_labels.jsonl) right. It
calls dated an answer that dodges a "when" question without a date, and calls the three
ramblers concise, as every embedded model did under every wording of the criterion tried
(README, "The default judge"): those are an expected failure, strict, so that a judge or
prompt that fixes them turns this test red until the xfail goes.
"""

import json
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")

from localjury import AspectCritic, evaluate
from localjury.registry import load_registry

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
PANEL = ["qwen2.5-coder-1.5b-instruct"]
DATED = "The response must include a specific date or year."
#: The human verdicts on the demo's unambiguous cases (borderline ones left out).
WANT = {
    (row["id"], row["metric"]): row["verdict"]
    for row in map(json.loads, (ROOT / "examples" / "demo_labels.jsonl").read_text().splitlines())
}
#: The cases the judge gets wrong, measured (benchmarks/results/demo_panel.md): an answer that
#: dodges a "when" question without a date, judged dated; three ramblers judged concise.
KNOWN_WRONG = [("eiffel", "mentions_date"), ("rambling", "conciseness"), ("tower", "conciseness"),
               ("painter", "conciseness")]  # fmt: skip


def right(score: float | None, want: int) -> bool:
    """The judge's majority says ``want``: a split (0.5) is right neither way."""
    return score is not None and (score > 0.5 if want else score < 0.5)


def test_the_test_judges_what_scripts_demo_judges():
    demo = (ROOT / "scripts" / "demo").read_text()
    assert f"--models {','.join(PANEL)}" in demo
    assert "--strictness 3 --seed 0" in demo
    assert f'mentions_date="{DATED}"' in demo and "--aspect conciseness" in demo


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[tuple[str, str], float | None]:
    registry = load_registry()
    for name in PANEL:
        registry.get(name).require_gguf()  # scripts/test pulls them
    metrics = [AspectCritic("mentions_date", DATED), AspectCritic.predefined("conciseness")]
    result = evaluate(
        DEMO, metrics, PANEL, strictness=3, seed=0, cache=tmp_path_factory.mktemp("store") / "judgments.sqlite"
    )
    return {(r.record_id, r.metric): r.score for r in result.results}


def test_the_panel_gets_the_obvious_cases_right(verdicts):
    cases = [case for case in WANT if case not in KNOWN_WRONG]
    assert len(cases) == 13
    wrong = {case: verdicts[case] for case in cases if not right(verdicts[case], WANT[case])}
    assert not wrong, wrong


@pytest.mark.xfail(strict=True, reason="measured: the embedded judges get these wrong (see KNOWN_WRONG)")
def test_the_panel_gets_the_known_wrong_cases_right(verdicts):
    wrong = {case: verdicts[case] for case in KNOWN_WRONG if not right(verdicts[case], WANT[case])}
    assert not wrong, wrong
