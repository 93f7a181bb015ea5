"""The command line on a Hugging Face datasets folder with the embedded SmolLM2 on the
transformers engine: a dry run plans and estimates, the run that follows reuses the estimate's
samples and counts its tokens, a second dry run finds everything in the store."""

import json

import datasets
import pytest
from typer.testing import CliRunner

from localjury.cli import app

pytestmark = pytest.mark.slow

ROWS = [
    {"id": "wall", "question": "When did the Berlin Wall fall?", "answer": "It fell on 9 November 1989."},
    {"id": "hamlet", "question": "Who wrote Hamlet?", "answer": "William Shakespeare."},
    {"id": "euro", "question": "When was the Euro introduced?", "answer": "Euro cash arrived in 2002."},
]


def localjury(*args):
    """The command in this process (typer's runner, 80 columns): the dry run's estimate and the
    run share one load of SmolLM2 (the module keeps its engines, tests/conftest.py)."""
    proc = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert proc.exit_code == 0, (proc.stderr, proc.exception)
    return proc


def test_dry_run_then_run_on_a_datasets_folder(smollm, tmp_path):
    folder = tmp_path / "records"
    datasets.Dataset.from_list(ROWS).save_to_disk(folder)
    store, out = tmp_path / "store.sqlite", tmp_path / "out" / "results.jsonl"
    common = ["--criterion", "dated=The response must include a specific date or year.",
              "--models", "smollm2-135m-instruct", "--engine", "transformers", "--strictness", "2", "--seed", "0",
              "--cache", str(store), "--quiet"]  # fmt: skip

    plan = json.loads(localjury("run", str(folder), *common, "--dry-run", "--estimate", "2", "--json").stdout)
    (m,) = plan["models"]
    assert (plan["records"], m["records"], m["prompts"], m["judgments"], m["cached"]) == (3, 3, 3, 6, 0)
    e = m["estimate"]
    assert plan["kept"] and (e["prompts"], e["judgments"]) == (2, 4) and e["judgments_per_second"] > 0
    assert plan["seconds"] == e["seconds"] > 0
    assert not out.parent.exists()  # no results file

    shown = localjury("run", str(folder), *common, "--out", str(out)).stdout
    summary = json.loads(out.with_name("results.summary.json").read_text())
    (s,) = summary["models"]
    assert (s["judgments"], s["cached"]) == (6, 4)  # the estimate's 4 samples were not generated again
    # The one prompt left, counted by the run's engine as the dry run's tokenizer counted it.
    assert s["prompt_tokens"] > 100 and s["prompt_tokens"] < m["prompt_tokens"] / 2
    assert s["prompt_tokens_reused"] == 0  # one prompt in its call: nothing shared
    assert s["output_tokens"] > 0 and s["generate_seconds"] > 0
    assert [json.loads(line)["record_id"] for line in out.read_text().splitlines()] == ["wall", "hamlet", "euro"]
    assert "Cost" in shown and "…" not in shown and max(map(len, shown.splitlines())) <= 80
    localjury("verify", str(out))  # the manifest's hash of the folder matches

    # The estimate asked for again: with every sample stored there is nothing to time.
    again = json.loads(localjury("run", str(folder), *common, "--dry-run", "--estimate", "2", "--json").stdout)
    (m,) = again["models"]
    assert (m["prompts"], m["judgments"], m["cached"], m["estimate"]) == (0, 0, 6, None)
    assert again["seconds"] == 0.0


def test_a_huge_record_never_reaches_the_real_tokenizer(smollm, tmp_path, monkeypatch):
    """A 64 MiB response between two small records: the dry run plans the two with SmolLM2's
    real tokenizer, and the big one is the record's error before the tokenizer sees it (a
    tokenizer given a few hundred MB aborts the process)."""
    from localjury import AspectCritic, dry_run
    from localjury.engines.base import PromptTokens
    from localjury.metrics.prompt_fit import MAX_TOKEN_BYTES

    bound = smollm.context_length * MAX_TOKEN_BYTES
    count = PromptTokens.count_tokens

    def guarded(self, prompts):
        assert all(len(p.encode()) <= bound for p in prompts), "a prompt over the byte bound tokenized"
        return count(self, prompts)

    monkeypatch.setattr(PromptTokens, "count_tokens", guarded)
    data = tmp_path / "d.jsonl"
    with data.open("w") as fh:
        fh.write(json.dumps(ROWS[0]) + "\n")
        fh.write(json.dumps({"id": "huge", "response": "word " * ((64 << 20) // 5)}) + "\n")
        fh.write(json.dumps(ROWS[1]) + "\n")
    critic = AspectCritic("dated", "The response must include a specific date or year.")
    plan = dry_run(data, [critic], [smollm], estimate=0, use_cache=False)
    (m,) = plan.models
    assert (plan.records, plan.record_errors, m.records, m.prompts, m.over_context) == (3, 0, 2, 2, 0)
