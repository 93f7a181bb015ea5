"""benchmarks/quality/grounded_reasons.py: one set judged once and read under both policies, its
figures checked against the labels directly (a scripted judge stands in for the model)."""

import json
import sys

from sklearn.metrics import cohen_kappa_score

from localjury import evaluate
from tests import ROOT
from tests.fakes import factory, spec
from tests.unit.benchmarks.scripts import load

sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))  # its sibling scripts, first on sys.path when it runs
gr = load("quality/grounded_reasons.py")


def respond(model, prompt, sample):
    """On the python record's date, sample 0 passes citing a year the record lacks and the others
    fail; every other prompt passes, citing nothing."""
    judged = prompt.rsplit("<criterion>", 1)[-1]  # the record's block, after the examples'
    if "Guido van Rossum" in judged and "specific date or year" in judged:
        return json.dumps(
            {"reason": "It gives the date 1989." if sample == 0 else "No year.", "verdict": int(sample == 0)}
        )
    return json.dumps({"reason": "Fine.", "verdict": 1})


def test_the_demo_set_is_read_under_both_policies_and_scored_against_its_labels(monkeypatch, tmp_path):
    monkeypatch.setattr(gr, "load_registry", lambda _: type("R", (), {"get": staticmethod(lambda name: spec("A"))})())
    scripted = factory(respond, [])
    monkeypatch.setattr(gr, "evaluate", lambda *a, **k: evaluate(*a, **{**k, "engine_factory": scripted}))
    out = gr.one_set("demo", 3, tmp_path / "store.sqlite")
    gold = gr.EXPECTED
    keys = list(gold)
    flag = [0 if k == ("python", "mentions_date") else 1 for k in keys]  # python: votes [1, 0, 0]
    assert out["flag"]["ungrounded"] == out["abstain"]["ungrounded"] == 1
    assert (out["flag"]["abstentions"], out["abstain"]["abstentions"]) == (0, 1)
    assert out["flag"]["right"] == sum(f == gold[k] for f, k in zip(flag, keys, strict=True))
    assert abs(out["flag"]["kappa"] - cohen_kappa_score([gold[k] for k in keys], flag)) < 1e-9
    assert out["verdicts_changed"] == 0  # [None, 0, 0] fails as [1, 0, 0] did
    assert out["flagged"] == [
        {"record": "python", "metric": "mentions_date", "gold": gold[("python", "mentions_date")], "vote": 1,
         "cited": ["1989"], "reason": "It gives the date 1989."}
    ]  # fmt: skip
    page = gr.markdown({"model": "m", "strictness": 3, "cpu": "CPU", "command": "python x", "sets": {"demo": out}})
    assert f"| demo | flag | 1 of {out['flag']['samples']} (2%) | 0 | 0 | {out['flag']['right']}/17 |" in page
    assert "| python | mentions_date | 0 | 1 | 1989 | It gives the date 1989. |" in page
