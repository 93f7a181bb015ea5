"""benchmarks/quality/pooled_heads.py's side-by-side report of pooled and last-token heads (no model is run)."""

import sys

from tests import ROOT
from tests.unit.benchmarks.scripts import load

sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))  # its sibling scripts, first on sys.path when it runs
ph = load("quality/pooled_heads.py")


def head(kappa: float, accuracy: float = 0.5) -> dict:
    return {"kappa": kappa, "kappa_ci": [kappa - 0.2, kappa + 0.2], "accuracy": accuracy, "auroc": 0.7}


def test_the_summary_names_each_ways_best_block_and_matches_the_last_tokens_blocks_together():
    together = "+".join(str(i) for i in ph.LAYERS)
    pooled = {"3": head(0.10), "14": head(0.37), together: head(0.39)}
    last = {"3": head(0.18), "14": head(0.24), together + "+27": head(0.28), "27": head(0.30)}
    pairs_pooled = {"3": head(0.2, 0.60), "17": head(0.4, 0.72)}
    pairs_last = {"3": head(0.1, 0.48), "21": head(0.3, 0.66)}
    zero = {"kappa": 0.33, "kappa_ci": [0.08, 0.56], "accuracy": 0.83}
    figures = {
        "model": "m", "engine": "llamacpp", "cpu": "AMD EPYC", "command": "python x", "last_token_from": "python y",
        "sets": {
            "facts": {"records": 100, "groups": 100, "zero_shot_votes_k3": zero, "heads": pooled,
                      "last_token": {"heads": last}},
            "pairs": {"records": 200, "groups": 100, "zero_shot_votes_k3": {**zero, "pair_accuracy": 0.65},
                      "heads": pooled, "preference": {"pairs": 100, "heads": pairs_pooled},
                      "last_token": {"heads": last, "preference": {"heads": pairs_last}}},
        },
    }  # fmt: skip
    page = ph.markdown(figures)
    assert "| facts | yes/no head | 0.33 [0.08, 0.56] | 0.30 [0.10, 0.50] (head, block 27) |" in page
    assert f"0.39 [0.19, 0.59] (head, blocks {together} together) |" in page
    assert "| pairs | preference head, pairs right | 0.65 | 0.66 (preference head, block 21) | 0.72 " in page
    # the last-token head on all blocks (27 too) sits beside the pooled one on the blocks read
    assert f"| head, blocks {together} together | 0.28 [0.08, 0.48] | 0.39 [0.19, 0.59] | 0.70 |" in page
    assert "| preference head, block 17 | - | 0.72 |" in page
