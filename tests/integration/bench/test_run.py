"""`localjury bench` on the real embedded model: every output file from a tiny run."""

import json

import pytest

from tests import ROOT
from tests.fakes import run_cli

pytestmark = pytest.mark.slow

LLMBAR = ROOT.parent / "shared" / "data" / "llmbar" / "llmbar_natural.json"


def test_bench_on_the_embedded_model_writes_every_file(smollm, tmp_path, monkeypatch, capsys):
    data = LLMBAR
    if not data.is_file():  # outside the workspace: a tiny set in the same format, as many pairs as --limit
        data = tmp_path / "llmbar.json"
        data.write_text(
            json.dumps(
                [{"input": "Reply with one word: yes.", "output_1": "yes", "output_2": "No way.", "label": 1}] * 4
            )
        )
    out = tmp_path / "bench"
    # In this process: a second interpreter would add only its start and its imports (torch,
    # transformers: about 15 s on one core).
    code, stdout, stderr = run_cli(
        monkeypatch, capsys, "bench", data, "--format", "llmbar", "--limit", "4", "--models", "smollm2-135m-instruct",
        "--strictness", "2", "--sample-seed", "1", "--no-cache", "--quiet", "--out", out,
    )  # fmt: skip
    assert code == 0, stderr[-3000:]
    assert {p.name for p in out.iterdir()} == {"metrics.json", "predictions.jsonl", "report.md", "report.html"}
    figures = json.loads((out / "metrics.json").read_text())
    judge = figures["judges"]["smollm2-135m-instruct"]
    # LLMBar benches pairwise by default: 4 pairs, each judged in both orders with 2 samples.
    assert figures["benchmark"]["mode"] == "pairwise"
    assert figures["records"] == 4 and judge["records"] == 4
    assert judge["judgments_per_second"] > 0 and judge["self_consistency"]["judgments"] <= 8
    assert judge["orders"]["items"] == 4 and 0 <= judge["orders"]["accuracy"] <= 1
    assert figures["benchmark"]["models"][0]["source"]["embedded"] == "smollm2-135m-instruct"
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(len(r["models"]["smollm2-135m-instruct"]["votes"]) == 4 for r in rows)
    # Whatever the samples (they differ between CPUs' kernels): a pair the judge decided has a
    # prediction, the others count as abstained, and the figures agree with the rows.
    predicted = sum(r["models"]["smollm2-135m-instruct"]["prediction"] is not None for r in rows)
    assert judge["decided"] == predicted and judge["abstention_rate"] == (4 - predicted) / 4
    assert all(len(r["models"]["smollm2-135m-instruct"]["order_votes"]["BA"]) == 2 for r in rows)
    report = (out / "report.md").read_text()
    assert "majority baseline" in report and "## Both orders (pairwise)" in report and "smollm2" in stdout
    if data == LLMBAR:  # the real Natural set: the paper's judges as reference rows
        assert "GPT-4 (gpt-4-0613) (published, 100 pairs)" in report and "a sample, not the set" in report
