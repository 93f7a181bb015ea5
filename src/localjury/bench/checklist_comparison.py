"""What checklist mode costs in accuracy and saves in compute: ``localjury bench --checklist``.

The bench's criterion and the extra criteria given are judged on the same records twice, each
time from an empty (temporary) judgment store so that every sample is generated and counted:
once one call per criterion (each criterion its own metric), once all in one checklist call
per record (:class:`~localjury.metrics.checklist.Checklist`). Per model, the figures are the
agreement of the two modes' verdicts on each criterion (share of equal verdicts, Cohen's
kappa), each mode's agreement with the labels on the bench's criterion (accuracy and kappa
with 95% bootstrap intervals, :func:`localjury.bench.stats.classification`), and the tokens
and generation seconds each mode took.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from localjury.bench import stats
from localjury.bench._markdown import md_text
from localjury.errors import ConfigError, RecordError
from localjury.metrics import AspectCritic, Checklist
from localjury.metrics.base import Metric
from localjury.metrics.spec import parse_metric
from localjury.run import EngineFactory, RunConfig, RunResult, evaluate
from localjury.votes.voting import passes

if TYPE_CHECKING:
    from rich.progress import Progress

    from localjury.results._outputs import OutputSet

#: The two ways of judging the criteria, in the order they are run and reported.
MODES = ("separate", "checklist")
#: The Markdown and HTML table's columns.
HEADER = ["Judge", "Criterion", "Same verdict", "κ between modes", "κ separate (95% CI)", "κ checklist (95% CI)"]
COST_HEADER = ["Judge", "Mode", "Calls", "Prompt tokens", "Output tokens", "Generate s"]
NOTE = (
    "Each criterion judged one call per criterion (separate) and all in one checklist call per record, "
    "each from an empty judgment store. Same verdict and κ between modes: on the records both modes decided; "
    "κ against the labels: the bench's criterion only (the other criteria have no labels)."
)


def checklist_critics(judge: Metric, specs: Sequence[str], strictness: int) -> list[AspectCritic]:
    """The checklist's criteria: the bench's own (an Aspect Critic) first, then each of
    ``specs`` (a predefined aspect or ``NAME="criterion"``).

    Raises:
        ConfigError: The bench's metric is no Aspect Critic asked reason first, a spec is
            no criterion, or the criteria do not make a checklist (a repeated name).
    """
    if not isinstance(judge, AspectCritic) or judge.verdict_first or judge.evidence:
        raise ConfigError(
            f"--checklist compares yes/no criteria; the bench's metric {judge.name!r} is not an Aspect Critic "
            "asked reason first (give a criterion in `metric`, pointwise, without --verdict-first or --evidence)"
        )
    critics: list[AspectCritic] = [judge]
    for spec in specs:
        try:
            metric: Metric | None = parse_metric(spec, strictness=strictness)
        except ConfigError:
            metric = None
        if not isinstance(metric, AspectCritic):
            raise ConfigError(f'--checklist {spec!r}: expected a predefined aspect or NAME="criterion text"')
        critics.append(metric)
    names = [c.name for c in critics]
    if len(set(names)) != len(names):
        raise ConfigError(f"--checklist: the criteria need distinct names, got {names}")
    return critics


def compare_checklist(
    records: Sequence[dict[str, Any] | RecordError],
    gold: Sequence[int],
    critics: Sequence[AspectCritic],
    config: RunConfig,
    *,
    seed: int = 0,
    progress: Progress | None = None,
    engine_factory: EngineFactory | None = None,
    output_set: OutputSet | None = None,
) -> dict[str, Any]:
    """Judge ``records`` on ``critics`` in both modes (each from a temporary store) and compare.

    Args:
        records: The bench's records (a row the labels reader refused as its error).
        gold: Their labels on the first critic (the bench's criterion).
        critics: The criteria, the labeled one first (:func:`checklist_critics`).
        config: The bench's run settings (its store is replaced by a temporary one).
        seed: Seed of the bootstrap intervals.
        progress, engine_factory, output_set: As for :func:`localjury.evaluate`.

    Returns:
        ``criteria``, ``labeled`` and ``records``; per model (``models``): ``agreement`` per
        criterion (``decided_both``, ``same_verdict``, ``kappa``), ``labels`` per mode (the
        labeled criterion's :func:`~localjury.bench.stats.classification`), ``cost`` per mode
        (``calls``, ``prompt_tokens``, ``output_tokens``, ``generate_seconds``) and ``saved``
        (each of those the checklist did not spend, ``tokens`` of prompt and output together,
        and the shares ``tokens_share`` and ``seconds_share`` of the separate mode's).
    """
    temporary = config.replace(use_cache=False)
    runs: dict[str, RunResult] = {}
    for mode in MODES:
        runs[mode] = evaluate(
            list(records),
            [Checklist(critics)] if mode == "checklist" else list(critics),
            config=temporary,
            progress=progress,
            engine_factory=engine_factory,
            output_set=output_set,
        )
    names = [c.name for c in critics]
    verdicts = {mode: _verdicts(run, names) for mode, run in runs.items()}
    sep, chk = verdicts["separate"], verdicts["checklist"]
    models = [m.model for m in runs["separate"].summary.models]
    return {
        "criteria": names,
        "labeled": names[0],
        "records": len(records),
        "models": {
            model: {
                "agreement": {n: _agreement(sep[model][n], chk[model][n]) for n in names},
                "labels": {
                    mode: stats.classification(list(gold), verdicts[mode][model][names[0]], seed=seed) for mode in MODES
                },
                **_cost(runs, model, len(records), len(names)),
            }
            for model in models
        },
    }


def _verdicts(run: RunResult, names: list[str]) -> dict[str, dict[str, list[int | None]]]:
    """Per model and criterion, each record's prediction (its score passes), in record order."""
    out: dict[str, dict[str, list[int | None]]] = {}
    for r in run.iter_results():
        for j in r.models:
            verdict = passes(j.score)
            out.setdefault(j.model, {n: [] for n in names})[r.metric].append(None if verdict is None else int(verdict))
    return out


def _agreement(a: list[int | None], b: list[int | None]) -> dict[str, Any]:
    both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return {
        "decided_both": len(both),
        "same_verdict": sum(x == y for x, y in both) / len(both) if both else None,
        "kappa": stats._kappa([x for x, _ in both], [y for _, y in both]) if both else None,
    }


def _cost(runs: dict[str, RunResult], model: str, records: int, criteria: int) -> dict[str, Any]:
    cost = {}
    for mode, run in runs.items():
        (s,) = [m for m in run.summary.models if m.model == model]
        cost[mode] = {
            "calls": records * (criteria if mode == "separate" else 1),
            "prompt_tokens": s.prompt_tokens,
            "output_tokens": s.output_tokens,
            "generate_seconds": s.generate_seconds,
        }
    sep, chk = cost["separate"], cost["checklist"]
    saved: dict[str, Any] = {k: sep[k] - chk[k] for k in sep}
    tokens = {mode: c["prompt_tokens"] + c["output_tokens"] for mode, c in cost.items()}
    saved["tokens"] = tokens["separate"] - tokens["checklist"]
    saved["tokens_share"] = saved["tokens"] / tokens["separate"] if tokens["separate"] else None
    seconds = sep["generate_seconds"]
    saved["seconds_share"] = saved["generate_seconds"] / seconds if seconds else None
    return {"cost": cost, "saved": saved}


def _kappa_ci(entry: dict[str, Any]) -> str:
    kappa, ci = entry.get("kappa"), entry.get("kappa_ci")
    if kappa is None:
        return "—"
    return f"{kappa:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def table_rows(fig: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """The report's two tables from ``metrics.json``'s ``checklist``: per judge and criterion
    the agreement between the modes (kappa against the labels on the labeled criterion's
    row), and per judge each mode's cost and what the checklist saved."""
    rows, cost_rows = [], []
    for model, m in fig["models"].items():
        for name, a in m["agreement"].items():
            labeled = name == fig["labeled"]
            same = "—" if a["same_verdict"] is None else f"{a['same_verdict']:.0%} of {a['decided_both']}"
            kappa = "—" if a["kappa"] is None else f"{a['kappa']:.2f}"
            by_mode = [_kappa_ci(m["labels"][mode]) if labeled else "(no labels)" for mode in MODES]
            rows.append([model, name, same, kappa, *by_mode])
        for mode, c in [*m["cost"].items(), ("saved", m["saved"])]:
            cells = [str(c["calls"]), str(c["prompt_tokens"]), str(c["output_tokens"]), f"{c['generate_seconds']:.1f}"]
            if mode == "saved" and c["tokens_share"] is not None:
                cells[1] += f" ({c['tokens_share']:.0%} of all tokens)"
            if mode == "saved" and c["seconds_share"] is not None:
                cells[3] += f" ({c['seconds_share']:.0%})"
            cost_rows.append([model, mode, *cells])
    return rows, cost_rows


def markdown_section(fig: dict[str, Any]) -> list[str]:
    """The report's Markdown lines for ``metrics.json``'s ``checklist``."""
    rows, cost_rows = table_rows(fig)
    lines = ["## Checklist against one call per criterion", ""]
    for header, body in ((HEADER, rows), (COST_HEADER, cost_rows)):
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(md_text(c) for c in r) + " |" for r in body] + [""]
    return [*lines, md_text(NOTE), ""]


def html_section(fig: dict[str, Any]) -> str:
    """The report's HTML for ``metrics.json``'s ``checklist``."""
    rows, cost_rows = table_rows(fig)
    tables = ""
    for header, body in ((HEADER, rows), (COST_HEADER, cost_rows)):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
        cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        tables += f"<table class='checklist'><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"
    return f"<h2>Checklist against one call per criterion</h2>{tables}<p class='note'>{html.escape(NOTE)}</p>"
