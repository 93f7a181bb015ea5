"""The run summary and the dry-run plan as tables that read whole in an 80-column terminal:
short headings, figures of at most 6 characters, names whole (see :func:`print_table`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localjury._terminal import Column, print_table
from localjury.results.summary import RunPlan, Summary

if TYPE_CHECKING:
    from rich.console import Console


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:.3f}"


def _count(n: int) -> str:
    """A count in at most 6 characters: exact below 100,000, then in k, M, G."""
    if n < 100_000:
        return str(n)
    for unit, scale in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        v = n / scale
        if round(v, 1) < 1000:
            return f"{v:.1f}{unit}" if round(v, 1) < 100 else f"{v:.0f}{unit}"
    return f"{n / 1e12:.0f}T"


def _secs(value: float | None) -> str:
    """Seconds in at most 6 characters (up to about 11 days)."""
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 999.95 else f"{value:.0f}"


def _rate(value: float | None) -> str:
    """A rate per second in at most 6 characters."""
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 99.995 else f"{value:.1f}" if value < 9999.95 else f"{value:.0f}"


def print_summary(summary: Summary, console: Console) -> None:
    """Print the per-metric and per-model tables (they fit an 80-column terminal)."""
    metrics = summary.metrics
    crit = [
        Column("metric", [m.metric for m in metrics], "name"),
        Column("k", [str(m.strictness) for m in metrics]),
        Column("records", [_count(m.records) for m in metrics]),
        Column("scored", [_count(m.scored) for m in metrics]),
        Column("mean", [_fmt(m.mean_score) for m in metrics]),
        Column("pass", [_fmt(m.pass_rate, True) for m in metrics]),
    ]
    print_table(console, crit, title="Metrics")
    console.print(
        "mean: mean score; pass: share of the scored records that pass (score above 0.5; a rubric's: at its threshold)",
        style="dim",
    )
    for m in summary.metrics:
        if m.position_consistency is not None:
            console.print(
                f"{m.metric}: pairwise (score, pass rate: preference for response_a); "
                f"position consistency {_fmt(m.position_consistency, True)}",
                style="dim",
            )
        if m.stacked is not None:
            st = m.stacked
            console.print(
                f"{m.metric}: stacked jury of {', '.join(st.members)} (weights align learned from {st.labels} labels; "
                f"the score above is the mean): pass {_fmt(st.pass_rate, True)} of {st.scored}, "
                f"{st.missing} without a member's probability, agrees with the mean on {_fmt(st.agreement, True)}",
                style="dim",
            )
        if m.records_cut:
            console.print(
                f"{m.metric}: {m.turns_cut} conversation turns cut in {m.records_cut} records to fit a judge's "
                "context (each result's turns_cut says how many)",
                style="dim",
            )
    models = summary.models
    names = [s.model if s.replicas == 1 else f"{s.model} (x{s.replicas})" for s in models]
    verdicts = [
        Column("model", names, "name"),
        Column("judg", [_count(s.judgments) for s in models]),
        Column("cached", [_count(s.cached) for s in models]),
        Column("abst", [_count(s.abstentions) for s in models]),
        Column("ungr", [_count(s.ungrounded) for s in models]),
        Column("no verd", [_count(s.abstained_verdicts) for s in models]),
        Column("pass", [_fmt(s.pass_rate, True) for s in models]),
    ]
    cost = [
        Column("model", names, "name"),
        Column("load s", [_secs(s.load_seconds) for s in models]),
        Column("gen s", [_secs(s.generate_seconds) for s in models]),
        Column("judg/s", [_rate(s.judgments_per_second) for s in models]),
        Column("prompt", [_count(s.prompt_tokens) for s in models]),
        Column("reused", [_count(s.prompt_tokens_reused) for s in models]),
        Column("output", [_count(s.output_tokens) for s in models]),
    ]
    console.print()
    print_table(console, verdicts, title="Models")
    console.print(
        "judg: samples judged (records x metrics x k); cached: of those, found in the judgment store; "
        "abst: samples that abstained; ungr: samples whose reason cites a number or quotation the record does not "
        "hold; no verd: pairs without a verdict or score; pass: share of the verdicts "
        "that pass" + ("; (xN): N replicas on Ray" if any(s.replicas > 1 for s in summary.models) else ""),
        style="dim",
    )
    console.print()
    print_table(console, cost, title="Cost")
    console.print(
        "load s, gen s: seconds loading and generating; judg/s: samples generated per second of generation; "
        "prompt, output: tokens of the prompts generated (each once; samples from the store cost none) and of "
        "the outputs; reused: prompt tokens not computed, their KV cache reused (the prefix the prompts share)",
        style="dim",
    )
    for s in summary.models:
        if s.lost_records:
            console.print(
                f"{s.model}: {s.lost_records} records lost: a replica's process died on every try at their shards "
                "(see the results' errors and Ray's log); run the same command again to retry them",
                style="bold red",
            )
    line = f"{summary.records} records ({summary.record_errors} bad), seed {summary.seed}, {summary.seconds:.1f} s"
    console.print(line)


def print_plan(plan: RunPlan, console: Console) -> None:
    """Print a dry run's plan: a table per model (it fits an 80-column terminal), then what
    the counts leave out and what the estimate did."""
    models = plan.models
    seconds = [
        _secs(m.estimate.seconds) if m.estimate is not None else ("0.0" if plan.kept and not m.judgments else "-")
        for m in models
    ]
    table = [
        Column("model", [m.model for m in models], "name"),
        Column("records", [_count(m.records) for m in models]),
        Column("prompts", [_count(m.prompts) for m in models]),
        Column("judg", [_count(m.judgments) for m in models]),
        Column("cached", [_count(m.cached) for m in models]),
        Column("prompt", [_count(m.prompt_tokens) for m in models]),
        Column("est. s", seconds),
    ]
    print_table(console, table, title="Plan")
    console.print(
        "records: records with prompts for the model; prompts, judg: prompts to generate and the samples they draw; "
        "cached: samples already in the judgment store; prompt: tokens of the prompts to generate; "
        "est. s: estimated seconds of the run that follows, load included",
        style="dim",
    )
    for m in plan.models:
        if m.over_context:
            console.print(f"{m.model}: {m.over_context} prompts exceed its context: errors, not generated")
        if m.awaiting_extraction:
            console.print(
                f"{m.model}: the verification prompts of {m.awaiting_extraction} (record, metric) pairs depend on "
                "statement extractions not in the judgment store yet: not counted nor estimated (a dry run counts "
                "them once the extractions are stored)"
            )
        if m.adaptive_more:
            console.print(
                f"{m.model}: adaptive strictness: up to {m.adaptive_more} more samples where the first are not "
                "unanimous (not counted)"
            )
        if (e := m.estimate) is not None:
            console.print(
                f"{m.model}: measured {e.judgments} samples of {e.prompts} prompts in {e.generate_seconds:.1f} s "
                f"({e.judgments_per_second:.2f} judg/s, {e.output_tokens_per_judgment:.0f} output tokens each) after "
                f"a {e.load_seconds:.1f} s load and a {e.warmup_seconds:.1f} s warm-up; an engine batch: "
                f"{e.batch_seconds:.1f} s + {e.prompt_seconds:.1f} s a prompt"
            )
    bad = f" ({plan.record_errors} bad)" if plan.record_errors else ""
    line = f"{plan.records} records{bad}"
    if plan.seconds is not None:
        line += f"; estimated run time {_secs(plan.seconds)} s"
    console.print(line)
    if plan.estimate_prompts:
        if plan.kept:
            console.print(
                f"The estimate's samples are kept in the judgment store {plan.store}: the run reads them instead of "
                "generating them again. No results file was written.",
                style="dim",
            )
        else:
            console.print(
                "The estimate's samples were not kept (a temporary store). No results file was written.", style="dim"
            )
    else:
        console.print("No model was loaded and nothing was written.", style="dim")
