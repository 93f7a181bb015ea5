"""Every table the CLI prints keeps its names whole at 80 columns: model, metric and aspect
names and column headings are never cut nor folded inside a word, no line is longer than the
terminal; free text wraps, and what does not fit is left out with a line saying so. At 120
columns nothing is left out."""

import io
import re

import pytest
from typer.testing import CliRunner

from localjury._terminal import Column, SafeConsole, print_table
from localjury.cli import app
from localjury.cli.bench import print_calibration, print_figures
from localjury.cli.verify import print_checks
from localjury.metrics import PREDEFINED_ASPECTS
from localjury.results.summary import MetricSummary, ModelPlan, ModelSummary, RunPlan, Summary
from localjury.results.tables import print_plan, print_summary

#: The four embedded models, the longest names a user types.
MODELS = ["smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]
METRICS = ["mentions_date", "faithfulness", "factual_accuracy"]


def render(print_fn, *args, width=80) -> str:
    console = SafeConsole(file=io.StringIO(), width=width, record=True)
    print_fn(*args, console)
    return console.export_text()


def assert_whole(text: str, names, headings=(), width: int = 80) -> None:
    """Each name on one line of ``text``, each heading's words whole, no "…", no line too long."""
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, text
    assert "…" not in text, text
    for name in names:
        assert any(re.search(rf"(?<!\S){re.escape(name)}(?!\S)", line) for line in lines), (name, text)
    words = {w for line in lines for w in line.split()}
    for heading in headings:  # a heading may wrap between its words, never inside one
        assert set(heading.split()) <= words, (heading, text)


def left_out(text: str) -> str | None:
    found = re.search(r"^\((.*) left out at (\d+) columns; widen the terminal\)$", text, re.MULTILINE)
    return found[1] if found else None


# The run summary and the dry-run plan


def summary() -> Summary:
    models = [
        ModelSummary(model=name, path="/m", engine="llamacpp", judgments=1_500_000, cached=123_456, abstentions=4_321,
                     abstained_verdicts=99, pass_rate=0.5, load_seconds=12.3, generate_seconds=86_399.9,
                     judgments_per_second=17.36, output_tokens=45_000_000, output_tokens_per_second=520.8,
                     prompt_tokens=987_654_321, prompt_tokens_reused=876_543_210, replicas=16 if i == 3 else 1)
        for i, name in enumerate(MODELS)
    ]  # fmt: skip
    metrics = [
        MetricSummary(metric=name, definition="d", records=99_997, strictness=3, tie_break="fail", scored=99_990,
                      mean_score=0.6, pass_rate=0.61)
        for name in METRICS
    ]  # fmt: skip
    return Summary(localjury_version="0", dataset=None, seed=0, temperature=None, max_tokens=None, metrics=metrics,
                   models=models, started_at="t", records=100_000, record_errors=3, seconds=90_000.0)  # fmt: skip


@pytest.mark.parametrize("width", [80, 120])
def test_the_run_summary(width):
    text = render(print_summary, summary(), width=width)
    headings = ["metric", "k", "records", "scored", "mean", "pass", "model", "judg", "cached", "abst", "no verd"]
    headings += ["load s", "gen s", "judg/s", "prompt", "reused", "output"]
    assert_whole(text, MODELS + METRICS, headings, width)
    assert left_out(text) is None


@pytest.mark.parametrize("width", [80, 120])
def test_the_dry_run_plan(width):
    plan = RunPlan(
        dataset="d.jsonl", records=250_000, record_errors=0, store="/s.sqlite", estimate_prompts=0, kept=False,
        models=[ModelPlan(model=name, engine="llamacpp", records=249_998, prompts=499_996, judgments=1_499_988,
                          cached=12, prompt_tokens=212_345_678) for name in MODELS],
    )  # fmt: skip
    text = render(print_plan, plan, width=width)
    headings = ["model", "records", "prompts", "judg", "cached", "prompt", "est. s"]
    assert_whole(text, MODELS, headings, width)
    assert left_out(text) is None


# `localjury aspects` and `localjury models list`


def cli(width: int, *args: str, **env: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width), **env})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("width", [80, 120])
def test_aspects(width):
    text = cli(width, "aspects")
    assert_whole(text, list(PREDEFINED_ASPECTS), ["aspect", "criterion (verdict 1 means it holds)"], width)
    flat = " ".join(text.split())
    assert all(criterion in flat for criterion in PREDEFINED_ASPECTS.values())


def test_models_list_at_80_columns_leaves_out_the_description(tmp_path):
    text = cli(80, "models", "list", LOCALJURY_HOME=str(tmp_path))
    assert_whole(text, MODELS, ["model", "for", "engine", "ready"])
    assert left_out(text) == "engine chosen because, description"
    assert "localjury models pull smollm2-135m-instruct gemma-3-270m" in " ".join(text.split())


def test_models_list_at_120_columns_says_why_each_engine(tmp_path):
    text = cli(120, "models", "list", LOCALJURY_HOME=str(tmp_path))
    assert_whole(text, MODELS, ["model", "for", "engine", "ready", "engine chosen because"], 120)
    assert left_out(text) == "description"
    assert "not pulled: localjury models pull gemma-3-270m" in " ".join(text.split())


def test_models_list_at_150_columns_has_every_column(tmp_path):
    text = cli(150, "models", "list", LOCALJURY_HOME=str(tmp_path))
    assert_whole(text, MODELS, ["model", "for", "engine", "ready", "engine chosen because", "description"], 150)
    assert left_out(text) is None
    assert "SmolLM2-135M-Instruct (Apache-2.0)" in " ".join(text.split())


# `localjury bench` and `localjury calibrate`


def judge(accuracy: float, kappa: float) -> dict:
    orders = {"items": 100, "accuracy_as_given": 0.79, "accuracy_swapped": 0.81, "accuracy": 0.8, "both_right": 0.63}
    return {
        "accuracy": accuracy, "accuracy_ci": [accuracy - 0.125, accuracy + 0.1], "balanced_accuracy": accuracy,
        "kappa": kappa, "kappa_ci": [kappa - 0.2, kappa + 0.25], "per_class": {"1": {"f1": 0.7}, "0": {"f1": 0.6}},
        "self_consistency": {"unanimous": 0.85}, "pairs": {"pair_accuracy": 0.5}, "judgments_per_second": 1.43,
        "abstention_rate": 0.015, "orders": orders | {"positional_agreement": 0.68},
    }  # fmt: skip


def figures() -> dict:
    published = {"judge": "ChatGPT (gpt-3.5-turbo-0613)", "items": 100, "accuracy_as_given": 0.79}
    published |= {"accuracy_swapped": 0.79, "accuracy": 0.79, "both_right": 0.63, "agreement": 0.68}
    return {
        "records": 200,
        "judges": {name: judge(0.655, -0.05) for name in [*MODELS, "jury"]},
        "baseline": {"predicts": 1, "accuracy": 0.5, "balanced_accuracy": 0.5},
        "published": {"rows": [published]},
    }


BENCH_HEADINGS = ["judge", "accuracy [95% CI]", "Cohen's κ [95% CI]", "pair acc.", "abstained", "judgments/s"]
ORDERS_HEADINGS = ["acc. as given", "acc. swapped", "acc. both orders", "both right", "positional agr."]


def test_the_bench_tables_at_80_columns():
    text = render(print_figures, figures(), "llmbar")
    assert_whole(text, [*MODELS, "jury", "[53.0%, 75.5%]", "[-0.25, 0.20]"], BENCH_HEADINGS[:-1] + ORDERS_HEADINGS)
    assert left_out(text) == "judgments/s"
    assert_whole(text, ["ChatGPT", "(gpt-3.5-turbo-0613)", "(published, 100 pairs)"])


def test_the_bench_tables_at_120_columns():
    text = render(print_figures, figures(), "llmbar", width=120)
    assert_whole(text, [*MODELS, "jury", "1.43"], BENCH_HEADINGS + ORDERS_HEADINGS, 120)
    assert left_out(text) is None


@pytest.mark.parametrize("width", [80, 120])
def test_the_calibration_table(width):
    from localjury.votes.calibration import Calibrator

    held = {"uncalibrated": {"accuracy": 0.612, "kappa": 0.21}, "calibrated": {"accuracy": 0.705, "kappa": None}}
    calibrators = [
        Calibrator(model=model, metric=metric, source="p_pass", a=1.0, b=0.0, threshold=0.4375, records=1200,
                   positives=600, held_out=held)
        for model in MODELS
        for metric in METRICS
    ]  # fmt: skip
    text = render(print_calibration, calibrators, width=width)
    assert_whole(text, MODELS + METRICS, ["model", "metric", "n", "thr.", "accuracy", "κ"], width)
    assert "61.2% →" in text and "70.5%" in text and "0.21 → -" in text  # at 80, between the words
    assert left_out(text) is None


# `localjury verify`


@pytest.mark.parametrize("width", [80, 120])
def test_the_verify_table(tmp_path, width):
    from localjury.results.verify import Check

    checks = [Check(what=f"model {name}", ok=False, expected="a" * 64, found="b" * 64) for name in MODELS]
    checks.append(Check(what="package llama-cpp-python", ok=True, expected="0.3.16", found="0.3.16"))
    text = render(print_checks, checks, tmp_path / "results.manifest.json", width=width)
    assert_whole(text.replace("a" * 16 + "…", "").replace("b" * 16 + "…", ""), MODELS, ["check", "ok", "manifest",
                 "this machine"], width)  # fmt: skip
    assert "a" * 16 + "…" in text and "llama-cpp-python" in text


# The helper itself


def test_a_name_longer_than_the_terminal_folds_as_a_last_resort():
    name = "my-organisation/a-very-long-local-checkpoint-name-qwen2.5-32b-instruct-awq-and-more"
    columns = [Column("model", [name], "name"), Column("judg", ["1.5M"]), Column("note", ["free text"], "text", 1)]
    text = render(lambda c: print_table(c, columns))
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    assert "".join(line.split()[0] for line in text.splitlines()[2:] if line.strip()).startswith(name)
    assert left_out(text) is None  # leaving a column out would not have kept the name whole


def test_the_least_important_columns_go_first_and_the_rest_wrap():
    text_ = "a criterion in words, as long as it needs to be " * 3
    columns = [
        Column("model", MODELS, "name"),
        Column("engine", ["llamacpp (measured 1.4 j/s)"] * 4, importance=3),
        Column("for", ["pipeline only"] * 4, importance=2),
        Column("hint", ["x" * 40] * 4, importance=1),
        Column("description", [text_] * 4, "text", importance=0),
    ]
    out = render(lambda c: print_table(c, columns))
    assert left_out(out) == "hint, description"
    assert_whole(out, [*MODELS, "(measured"], ["model", "engine", "for"])
    out = render(lambda c: print_table(c, columns), width=160)
    assert left_out(out) is None and "x" * 40 in out


def test_a_name_with_control_characters_is_measured_as_printed():
    name = "judge\x1b[2J-\u202eevil"  # printed with its controls as escapes
    columns = [Column("model", [name, *MODELS], "name"), Column("judg", ["1.5M"] * 5)]
    text = render(lambda c: print_table(c, columns), width=40)
    assert max(len(line) for line in text.splitlines()) <= 40
    assert_whole(text, [r"judge\x1b[2J-\u202eevil", *MODELS], width=40)
