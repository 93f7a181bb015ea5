"""benchmarks/quality/reason_heads.py's side-by-side report of heads after the reason (no model is run)."""

import sys

from tests import ROOT
from tests.unit.benchmarks.scripts import load

sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))  # its sibling scripts, first on sys.path when it runs
rh = load("quality/reason_heads.py")


def head(kappa: float) -> dict:
    return {"kappa": kappa, "kappa_ci": [kappa - 0.2, kappa + 0.2], "accuracy": 0.5, "auroc": 0.7}


def test_the_summary_sets_each_readings_best_head_beside_the_verdict_the_judge_wrote():
    together = "+".join(str(i) for i in rh.LAYERS)
    after = {"3": head(0.20), "14": head(0.52), together: head(0.41)}
    last = {"3": head(0.18), "14": head(0.24), together: head(0.31)}
    figures = {
        "model": "m", "engine": "llamacpp", "cpu": "AMD EPYC", "command": "python x", "budget": 512,
        "sets": {"facts": {"records": 100, "groups": 100, "seconds": 900.0, "answer_tokens": 6000, "no_verdict": 1,
                           "zero_shot_votes_k3": {"kappa": 0.33, "kappa_ci": [0.08, 0.56]},
                           "written_verdict_k1": {"kappa": 0.30, "kappa_ci": [0.1, 0.5]},
                           "heads": after, "last_token": last, "response_mean": None}},
    }  # fmt: skip
    page = rh.markdown(figures)
    assert ("| facts | 0.33 [0.08, 0.56] | 0.30 [0.10, 0.50] | 0.31 [0.11, 0.51] (head, blocks "
            f"{together} together) | - | 0.52 [0.32, 0.72] (head, block 14) |") in page  # fmt: skip
    assert "| head, block 14 | 0.24 [0.04, 0.44] | 0.52 [0.32, 0.72] | 0.70 |" in page
    assert "6,000 answer tokens written; answers with no verdict: 1." in page
    assert "CPU: AMD EPYC" in page and "at most\n512 tokens" in page
