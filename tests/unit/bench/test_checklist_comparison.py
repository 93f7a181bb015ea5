"""`bench --checklist`: the checklist against one call per criterion on the same records."""

import json

import pytest

pytest.importorskip("sklearn")
from sklearn.metrics import cohen_kappa_score

from localjury.bench.checklist_comparison import checklist_critics, markdown_section, table_rows
from localjury.bench.run import run_bench
from localjury.errors import ConfigError
from localjury.metrics import AspectCritic, Faithfulness
from tests.fakes import factory as make_factory
from tests.fakes import judgment, run_cli, spec

GOLD = [1, 0, 1, 1, 0, 0]


def gold_of(prompt):
    return int(prompt.rsplit("<response>\n", 1)[1].split("\n", 1)[0].split()[-1])


def responder(model, prompt, j):
    """One call per criterion: A follows gold on `correct` and passes `polite`. In a checklist:
    A's `correct` verdict is right except on the last record, and it fails `polite` there too."""
    gold = gold_of(prompt)
    if "<criteria>" in prompt:
        last = "answer 5 gold" in prompt
        checks = {"correct": {"reason": "r", "verdict": 1 - gold if last else gold},
                  "polite": {"reason": "r", "verdict": 0 if last else 1}}  # fmt: skip
        return json.dumps({"checks": checks})
    criterion = prompt.rsplit("<criterion>\n", 1)[1].split("\n</criterion>", 1)[0]
    return judgment(gold if criterion.strip('"') == "The answer is right." else 1)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"id": f"r{i}", "response": f"answer {i} gold {g}", "gold": g} for i, g in enumerate(GOLD)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def bench(data, out, log, checklist=('polite="The answer is polite."',)):
    return run_bench(
        data, "jsonl", [spec("A")], out, metric='correct="The answer is right."', checklist=checklist,
        use_cache=False, engine_factory=make_factory(responder, log),
    )  # fmt: skip


def test_the_checklist_against_one_call_per_criterion(data, tmp_path):
    log = []
    figures = bench(data, tmp_path / "out", log)
    fig = figures["checklist"]
    assert fig["criteria"] == ["correct", "polite"] and fig["labeled"] == "correct" and fig["records"] == 6
    a = fig["models"]["A"]
    assert a["agreement"]["correct"]["same_verdict"] == pytest.approx(5 / 6)
    assert a["agreement"]["polite"] == {"decided_both": 6, "same_verdict": pytest.approx(5 / 6), "kappa": 0.0}
    assert a["labels"]["separate"]["kappa"] == 1.0 and a["labels"]["separate"]["accuracy"] == 1.0
    assert a["labels"]["checklist"]["accuracy"] == pytest.approx(5 / 6)
    flipped = [*GOLD[:-1], 1 - GOLD[-1]]
    assert a["labels"]["checklist"]["kappa"] == pytest.approx(cohen_kappa_score(GOLD, flipped))
    # the bench's own pass (from the store) plus the two compared passes, each from an empty store
    calls = [e for e in log if e[0] == "generate"]
    assert calls == [("generate", "A", 6, 1), ("generate", "A", 12, 1), ("generate", "A", 6, 1)]
    cost = a["cost"]
    assert (cost["separate"]["calls"], cost["checklist"]["calls"]) == (12, 6)
    assert cost["checklist"]["prompt_tokens"] < cost["separate"]["prompt_tokens"]
    saved = a["saved"]
    assert (
        saved["calls"] == 6
        and saved["prompt_tokens"] == cost["separate"]["prompt_tokens"] - cost["checklist"]["prompt_tokens"]
    )
    assert saved["tokens"] == sum(
        cost["separate"][k] - cost["checklist"][k] for k in ("prompt_tokens", "output_tokens")
    )
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Checklist against one call per criterion" in report and "(no labels)" in report
    assert "Checklist against one call per criterion" in (tmp_path / "out" / "report.html").read_text()
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["checklist"] == json.loads(json.dumps(fig))


def test_report_tables():
    fig = {
        "criteria": ["c", "d"], "labeled": "c", "records": 2,
        "models": {"A": {
            "agreement": {"c": {"decided_both": 2, "same_verdict": 1.0, "kappa": 1.0},
                          "d": {"decided_both": 0, "same_verdict": None, "kappa": None}},
            "labels": {"separate": {"kappa": 0.5, "kappa_ci": [0.1, 0.9]}, "checklist": {"kappa": None}},
            "cost": {"separate": {"calls": 4, "prompt_tokens": 100, "output_tokens": 40, "generate_seconds": 2.0},
                     "checklist": {"calls": 2, "prompt_tokens": 60, "output_tokens": 30, "generate_seconds": 1.5}},
            "saved": {"calls": 2, "prompt_tokens": 40, "output_tokens": 10, "generate_seconds": 0.5, "tokens": 50,
                      "tokens_share": 50 / 140, "seconds_share": 0.25},
        }},
    }  # fmt: skip
    rows, cost = table_rows(fig)
    assert rows == [
        ["A", "c", "100% of 2", "1.00", "0.50 [0.10, 0.90]", "—"],
        ["A", "d", "—", "—", "(no labels)", "(no labels)"],
    ]
    assert cost[-1] == ["A", "saved", "2", "40 (36% of all tokens)", "10", "0.5 (25%)"]
    assert markdown_section(fig)[0] == "## Checklist against one call per criterion"


@pytest.mark.parametrize(
    ("judge", "specs", "match"),
    [
        (Faithfulness(), ["polite"], "not an Aspect Critic"),
        (AspectCritic("c", "Right.", verdict_first=True), ["coherence"], "not an Aspect Critic asked reason first"),
        (AspectCritic("c", "Right."), ["faithfulness"], "expected a predefined aspect"),
        (AspectCritic("coherence", "Right."), ["coherence"], "distinct names"),
    ],
)
def test_criteria_that_make_no_checklist_are_refused(judge, specs, match):
    with pytest.raises(ConfigError, match=match):
        checklist_critics(judge, specs, 1)


def test_a_bad_checklist_is_refused_before_any_model_loads(data, tmp_path):
    log = []
    with pytest.raises(ConfigError, match="distinct names"):
        bench(data, tmp_path / "out", log, checklist=('correct="Again."',))
    assert log == []


def test_cli_passes_the_criteria(data, tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_run_bench(data, fmt, models, out, config, **kw):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr("localjury.bench.run.run_bench", fake_run_bench)
    args = [
        "bench",
        data,
        "-f",
        "jsonl",
        "-o",
        tmp_path / "o",
        "--checklist",
        "coherence",
        "--checklist",
        'p="Polite."',
    ]
    code, _, _ = run_cli(monkeypatch, capsys, *args)
    assert code == 0 and seen["config"].checklist == ["coherence", 'p="Polite."']
