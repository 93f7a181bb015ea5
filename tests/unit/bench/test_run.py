"""A bench run end to end with a scripted engine: every output file and the right figures
(the HTML report in a real headless Chromium: tests/system/bench/test_report_browser.py)."""

import json
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

from localjury.bench.run import resolve_metric, run_bench
from localjury.errors import ConfigError
from localjury.metrics import AspectCritic, Faithfulness, PairwiseCritic
from tests.fakes import GOLD, factory, judgment, responder, scripted_bench, spec


@pytest.fixture
def bench(tmp_path):
    return scripted_bench(tmp_path)


def test_figures_per_model_jury_and_baseline(bench):
    figures, _ = bench
    a, b, jury = (figures["judges"][n] for n in ("A", "B", "jury"))
    assert (a["accuracy"], a["kappa"], a["balanced_accuracy"]) == (1.0, 1.0, 1.0)
    assert b["accuracy"] == 0.5 and b["kappa"] == 0.0 and b["per_class"]["0"]["recall"] == 0.0
    # The jury's score is 1.0 on gold 1 and 0.5 (not a pass) on gold 0: it is always right.
    assert jury["accuracy"] == 1.0 and "self_consistency" not in jury
    assert a["self_consistency"] == {"judgments": 8, "unanimous": 1.0, "majority_agreement": 1.0}
    # pairs (1,0),(1,1),(0,0),(1,0): A gets each member right; B (always 1) only the (1,1) pair
    assert a["pairs"]["pair_accuracy"] == 1.0 and b["pairs"]["pair_accuracy"] == 0.25
    assert figures["baseline"]["accuracy"] == 0.5 and figures["records"] == 8
    assert figures["agreement"]["pairwise_kappa"]["A"]["B"] == 0.0
    # Graded by vote share: A separates the classes perfectly, B (always 1.0) not at all, and
    # the jury (1.0 on gold 1, 0.5 on gold 0) ranks perfectly but is half a point off on gold 0.
    assert a["graded"]["auroc"] == 1.0 and a["graded"]["brier"] == 0.0 and a["graded"]["ece"] == 0.0
    assert b["graded"]["auroc"] == 0.5 and b["graded"]["brier"] == 0.5
    assert jury["graded"]["auroc"] == 1.0 and jury["graded"]["brier"] == pytest.approx(4 * 0.25 / 8)
    assert figures["benchmark"]["metric"]["name"] == "correct" and figures["benchmark"]["strictness"] == 3


def test_every_output_file(bench):
    _, out = bench
    assert json.loads((out / "metrics.json").read_text())["judges"]["A"]["accuracy"] == 1.0
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in rows] == GOLD
    assert rows[1]["models"]["A"] == {
        "votes": [0, 0, 0],
        "verdict": 0,
        "score": 0.0,
        "prediction": 0,
        "graded": 0.0,
        "abstentions": 0,
        "reasons": ["because"] * 3,
    }
    # The jury's graded score is the mean of A's vote share (0) and B's (1).
    assert rows[1]["jury_graded"] == 0.5
    assert rows[1]["jury_prediction"] == 0 and rows[1]["score"] == 0.5
    md = (out / "report.md").read_text()
    assert "majority baseline (always 0)" in md and "| A | 100.0% [" in md and "sample-seed 0" in md
    assert "## Graded scores" in md and "| A | 1.00 [1.00, 1.00] | 0.000 | 0.000 | 8 |" in md
    page = (out / "report.html").read_text()
    assert page.count("<svg") >= 5 and 'id="plot-reliability"' in page
    assert not any(ref in page for ref in ('src="http', "src='http", "<link", 'href="http', "@import"))


def test_resolve_metric():
    assert isinstance(resolve_metric(None, "halueval-qa", 1), Faithfulness)
    critic = resolve_metric(None, "llmbar", 3)
    assert isinstance(critic, AspectCritic) and critic.strictness == 3 and critic.name == "follows_instruction"
    assert resolve_metric("coherence", "jsonl", 1).name == "coherence"
    with pytest.raises(ConfigError, match="format 'jsonl' has no default criterion"):
        resolve_metric(None, "jsonl", 1)
    with pytest.raises(ConfigError, match="`metric` 'nice'"):
        resolve_metric("nice", "jsonl", 1)


@pytest.mark.parametrize("name", ["predictions.jsonl", "metrics.json", "report.md"])
def test_bench_outputs_never_overwrite_the_data_set(tmp_path, name):
    data = tmp_path / name
    data.write_text(json.dumps({"id": "r0", "response": "answer 0 gold 1", "gold": 1}) + "\n")
    before = data.read_bytes()
    log: list = []
    with pytest.raises(ConfigError, match="would overwrite the dataset"):
        run_bench(data, "jsonl", [spec("A")], tmp_path, use_cache=False, engine_factory=factory(responder, log))
    assert data.read_bytes() == before and log == []  # refused before any model loads


def a_store(path):
    """A judgment store holding one generation, closed (its -wal folded in)."""
    from localjury.store import JudgmentStore

    store = JudgmentStore(path)
    store.put_many({"k": "a generation"})
    store.close()
    return path.read_bytes()


@pytest.mark.parametrize("name", ["metrics.json", "predictions.jsonl", "report.md", "report.html"])
def test_bench_outputs_never_overwrite_the_judgment_store(tmp_path, monkeypatch, name):
    """The store where the run resolves it (LOCALJURY_CACHE here) is refused as an output
    before any model loads, as `run` refuses it."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r0", "response": "answer 0 gold 1", "gold": 1}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    before = a_store(out / name)
    monkeypatch.setenv("LOCALJURY_CACHE", str(out / name))
    log: list = []
    with pytest.raises(ConfigError, match=rf"the \w+( \w+)? {out / name} would overwrite the judgment store"):
        run_bench(data, "jsonl", [spec("A")], out, metric='correct="The answer is right."',
                  engine_factory=factory(responder, log))  # fmt: skip
    assert (out / name).read_bytes() == before and log == []
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing else written, no lock left


def test_bench_outputs_never_overwrite_the_store_through_a_link(tmp_path, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r0", "response": "answer 0 gold 1", "gold": 1}) + "\n")
    before = a_store(tmp_path / "judgments.sqlite")
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").symlink_to(tmp_path / "judgments.sqlite")
    monkeypatch.setenv("LOCALJURY_CACHE", str(tmp_path / "judgments.sqlite"))
    with pytest.raises(ConfigError, match="would overwrite the judgment store"):
        run_bench(data, "jsonl", [spec("A")], out, metric='correct="The answer is right."',
                  engine_factory=factory(responder, []))  # fmt: skip
    assert (tmp_path / "judgments.sqlite").read_bytes() == before


def test_the_bench_cli_refuses_the_store_with_exit_2(tmp_path, monkeypatch, capsys):
    import sys

    from localjury.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r0", "response": "answer 0 gold 1", "gold": 1}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    before = a_store(out / "metrics.json")
    monkeypatch.setenv("LOCALJURY_CACHE", str(out / "metrics.json"))
    args = ["bench", data, "--format", "jsonl", "--metric", 'correct="The answer is right."', "--out", out, "--quiet"]
    monkeypatch.setattr(sys, "argv", ["localjury", *map(str, args)])
    with pytest.raises(SystemExit) as info:
        main()
    err = " ".join(capsys.readouterr().err.split())
    assert info.value.code == 2 and "would overwrite the judgment store" in err and "Traceback" not in err
    assert (out / "metrics.json").read_bytes() == before


def test_bench_output_folder_that_is_a_file_is_refused(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r0", "response": "answer 0 gold 1", "gold": 1}) + "\n")
    with pytest.raises(ConfigError, match="is a file; give a folder"):
        run_bench(data, "jsonl", [spec("A")], data, use_cache=False, engine_factory=factory(responder, []))


PAIR_GOLD = [1, 0, 0, 1, 1, 0]


def shown_first(prompt):
    """The response the pairwise prompt shows as A (the record's own, after its examples)."""
    return prompt.rsplit("<response_a>\n", 1)[1].split("\n", 1)[0]


def pair_responder(model, prompt, j):
    """A picks whichever shown response is the good one; B always answers "A" (pure position bias)."""
    preferred = "A" if model == "B" or shown_first(prompt) == "good" else "B"
    return json.dumps({"reason": "because", "preferred": preferred})


@pytest.fixture
def pair_bench(tmp_path):
    data = tmp_path / "pairs.jsonl"
    rows = [
        {"id": f"p{i}", "user_input": "q", "response_a": "good" if g else "bad", "response_b": "bad" if g else "good",
         "gold": g}
        for i, g in enumerate(PAIR_GOLD)
    ]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    figures = run_bench(
        data,
        "jsonl",
        [spec("A"), spec("B")],
        out,
        metric='better="The response is the better one."',
        strictness=3,
        use_cache=False,
        engine_factory=factory(pair_responder, []),
    )
    return figures, out


def test_a_pairwise_bench_reports_both_orders(pair_bench):
    figures, out = pair_bench
    assert figures["benchmark"]["mode"] == "pairwise" and figures["records"] == 6
    a, b, jury = (figures["judges"][n] for n in ("A", "B", "jury"))
    assert a["orders"] == {
        "items": 6, "accuracy_as_given": 1.0, "accuracy_swapped": 1.0, "accuracy": 1.0, "both_right": 1.0,
        "positional_agreement": 1.0, "no_pick": 0,
    }  # fmt: skip
    # B says "A" in both orders: right as given exactly on gold 1 (3 of 6), swapped exactly on
    # gold 0; never right twice, never the same pick twice; its 2k corrected votes always split.
    assert b["orders"]["accuracy_as_given"] == 0.5 and b["orders"]["accuracy_swapped"] == 0.5
    assert b["orders"]["both_right"] == 0.0 and b["orders"]["positional_agreement"] == 0.0
    assert b["abstention_rate"] == 1.0 and b["decided"] == 0
    assert a["accuracy"] == 1.0 and a["kappa"] == 1.0 and jury["accuracy"] == 1.0  # B abstains: the jury is A
    # The jury's pick in an order is the mean of A's and B's shares: as given, B's 1.0 joins A's
    # 1.0 (gold 1: a pick of 1) or 0.0 (gold 0: 0.5, no pick); swapped, B's 0.0 joins A's.
    assert jury["orders"]["accuracy_as_given"] == 0.5 and jury["orders"]["no_pick"] == 6
    # Self-consistency per order: each order's 3 samples agree for both judges.
    assert a["self_consistency"]["judgments"] == 12 and b["self_consistency"]["unanimous"] == 1.0
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert rows[0]["models"]["B"]["order_votes"] == {"AB": [1, 1, 1], "BA": [1, 1, 1]}
    md = (out / "report.md").read_text()
    assert "## Both orders (pairwise)" in md and "| A | 100.0% | 100.0% | 100.0% | 100.0% | 100.0% |" in md
    assert "published" not in md  # a jsonl set has no published rows


def test_llmbar_benches_pairwise_by_default_beside_the_published_judges(tmp_path):
    rows = [{"input": f"say {w}", "output_1": w if g else "no", "output_2": "no" if g else w, "label": 1 if g else 2}
            for w, g in zip(["hi", "yo", "ok", "hey"], [1, 0, 1, 0], strict=True)]  # fmt: skip
    data = tmp_path / "llmbar_natural.json"
    data.write_text(json.dumps(rows))

    def respond(model, prompt, j):
        good = shown_first(prompt) != "no"
        return json.dumps({"reason": "r", "preferred": "A" if good else "B"})

    out = tmp_path / "out"
    figures = run_bench(data, "llmbar", [spec("A")], out, strictness=1, use_cache=False,
                        engine_factory=factory(respond, []))  # fmt: skip
    assert figures["benchmark"]["mode"] == "pairwise" and figures["records"] == 4
    assert figures["judges"]["A"]["orders"]["accuracy"] == 1.0
    published = figures["published"]
    assert published["subset"] == "Natural" and "Zeng et al." in published["citation"]
    gpt4 = published["rows"][0]
    assert gpt4["judge"].startswith("GPT-4") and gpt4["accuracy"] == 0.935 and gpt4["agreement"] == 0.97
    md = (out / "report.md").read_text()
    assert "GPT-4 (gpt-4-0613) (published, 100 pairs) | 92.0% | 95.0% | 93.5% | 92.0% | 97.0% |" in md
    assert "ChatGPT" in md and "Llama-2-70B-Chat" in md and "a sample, not the set" not in md
    page = (out / "report.html").read_text()
    assert "<table id='orders'>" in page and 'class="published"' in page
    # The same set pointwise: two records per pair, no order figures.
    pointwise = run_bench(data, "llmbar", [spec("A")], tmp_path / "pw", strictness=1, use_cache=False, mode="pointwise",
                          engine_factory=factory(responder_for_pointwise, []))  # fmt: skip
    assert pointwise["records"] == 8 and "orders" not in pointwise["judges"]["A"] and "published" not in pointwise


def responder_for_pointwise(model, prompt, j):
    return judgment(int(prompt.rsplit("<response>\n", 1)[1].split("\n", 1)[0] != "no"))


def test_resolve_metric_pairwise():
    critic = resolve_metric(None, "llmbar", 3, pairwise=True)
    assert isinstance(critic, PairwiseCritic) and critic.name == "follows_instruction" and critic.strictness == 3
    aspect = resolve_metric("coherence", "jsonl", 1, pairwise=True)
    assert isinstance(aspect, PairwiseCritic) and aspect.name == "coherence"
    with pytest.raises(ConfigError, match="composite metric: it cannot judge pairs"):
        resolve_metric("faithfulness", "jsonl", 1, pairwise=True)
    with pytest.raises(ConfigError, match="unknown bench mode 'both'"):
        run_bench(Path("x.json"), "llmbar", [spec("A")], Path("out"), mode="both")
