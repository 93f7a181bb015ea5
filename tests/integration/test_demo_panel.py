"""The demo's main job, judged with its panel, strictness and seed on two of its records (a
one-line dated answer and an undated rambler: both verdicts of both criteria; each record costs
the 1.5B judge six samples): what must hold on any CPU. Which verdicts the judge gets
right is a claim about sampled outputs, which other kernels round differently: it lives in
``benchmarks/quality/demo_panel.py``, which judges every record, with its threshold (the
default judge gets at least 12 of the 17 labelled cases right; 13 measured on an AMD EPYC,
benchmarks/results/demo_panel.md).
"""

import json

import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")

from localjury import AspectCritic, evaluate
from localjury.models.registry import load_registry
from tests import ROOT

pytestmark = pytest.mark.slow

DEMO = ROOT / "examples" / "demo.jsonl"
PANEL = ["qwen2.5-coder-1.5b-instruct"]
DATED = "The response must include a specific date or year."
#: The demo records judged here.
JUDGED = ("war", "painter")
RECORDS = [row for row in map(json.loads, DEMO.read_text().splitlines()) if row["id"] in JUDGED]
#: The human verdicts on the judged records' unambiguous cases (borderline ones left out).
WANT = {
    (row["id"], row["metric"]): row["verdict"]
    for row in map(json.loads, (ROOT / "examples" / "demo_labels.jsonl").read_text().splitlines())
    if row["id"] in JUDGED
}


def test_the_test_judges_what_scripts_demo_judges():
    demo = (ROOT / "scripts" / "demo").read_text()
    assert f"--models {','.join(PANEL)}" in demo
    assert "--strictness 3 --seed 0" in demo
    assert f'mentions_date="{DATED}"' in demo and "--aspect conciseness" in demo
    # The records judged here hold both human verdicts of both criteria.
    assert {(metric, v) for (_, metric), v in WANT.items()} == {
        (metric, v) for metric in ("mentions_date", "conciseness") for v in (0, 1)
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    registry = load_registry()
    for name in PANEL:
        registry.get(name).require_gguf()  # scripts/test pulls them
    metrics = [AspectCritic("mentions_date", DATED), AspectCritic.predefined("conciseness")]
    return evaluate(
        RECORDS, metrics, PANEL, strictness=3, seed=0, cache=tmp_path_factory.mktemp("store") / "judgments.sqlite"
    )


def test_every_labelled_case_gets_a_majority_of_three_valid_votes(demo):
    results = {(r.record_id, r.metric): r for r in demo.results}
    assert set(WANT) <= set(results)
    for case in WANT:
        [judgment] = results[case].models
        valid = [v for v in judgment.votes if v is not None]
        assert len(judgment.votes) == 3 and judgment.abstentions == 3 - len(valid)
        pairs = zip(judgment.reasons, judgment.votes, strict=True)
        assert all(isinstance(reason, str) and reason for reason, v in pairs if v is not None)
        # The verdict is the majority of the valid votes (ties fail), the score the verdict's.
        if valid:
            assert judgment.verdict == int(2 * sum(valid) > len(valid))
            assert results[case].score == float(judgment.verdict)
        assert all(p is None or 0.0 <= p <= 1.0 for p in judgment.p_pass)


def test_the_demo_judges_every_record_on_both_criteria(demo):
    records = [row["id"] for row in RECORDS]
    assert len(records) == len(JUDGED)
    assert sorted((r.record_id, r.metric) for r in demo.results) == sorted(
        (rid, m) for rid in records for m in ("mentions_date", "conciseness")
    )
    assert demo.summary.models[0].judgments == 3 * 2 * len(records)
