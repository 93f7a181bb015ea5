"""The benchmark report: Markdown, and a self-contained HTML page with plots (inline SVG)."""

from __future__ import annotations

import html
from typing import Any

from localjury.bench._markdown import md_text
from localjury.bench._plots import plots

BASELINE = "majority baseline"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(ci: list[float] | tuple[float, float] | None, pct: bool = True) -> str:
    if not ci:
        return ""
    lo, hi = ci
    return f" [{lo:.1%}, {hi:.1%}]" if pct else f" [{lo:.2f}, {hi:.2f}]"


def _rows(fig: dict[str, Any]) -> list[list[str]]:
    """The main table: one row per judge and the jury, then the baseline."""
    rows = []
    paired = any("pairs" in j for j in fig["judges"].values())
    for name, j in fig["judges"].items():
        per = j.get("per_class") or {}
        sc = (j.get("self_consistency") or {}).get("unanimous")
        row = [
            name,
            _pct(j["accuracy"]) + _ci(j["accuracy_ci"]),
            _pct(j["balanced_accuracy"]),
            _num(j["kappa"], 2) + _ci(j["kappa_ci"], pct=False),
            _num(per.get("1", {}).get("f1"), 2),
            _num(per.get("0", {}).get("f1"), 2),
        ]
        if paired:
            row.append(_pct(j["pairs"]["pair_accuracy"]))
        jps = j.get("judgments_per_second")
        row += [_pct(j["abstention_rate"]), _pct(sc), "-" if jps is None else f"{jps:.2f}"]
        rows.append(row)
    b = fig["baseline"]
    base = [f"{BASELINE} (always {b['predicts']})", _pct(b["accuracy"]), _pct(b["balanced_accuracy"]), "0.00"]
    base += ["-", "-"] + (["-"] if paired else []) + ["0.0%", "-", "-"]
    rows.append(base)
    return rows


GRADED_HEADER = ["judge", "AUROC [95% CI]", "Brier", "ECE", "scored"]
GRADED_NOTE = (
    "Graded score: each model's confidence (mean verdict probability p_pass) where its engine gives one, else "
    "the share of its valid votes that pass (for a composite metric its score); the jury's the mean of its "
    "models'. AUROC: how well it ranks gold 1 above gold 0 (0.5 is chance); Brier: mean "
    "squared error against gold (0 is perfect, 0.25 a constant 0.5); ECE: expected calibration error over "
    "10 equal-width bins."
)


def _graded_rows(fig: dict[str, Any]) -> list[list[str]]:
    """The graded table: AUROC, Brier score and ECE of each judge's graded score."""
    rows = []
    for name, j in fig["judges"].items():
        g = j.get("graded")
        if g:
            rows.append([name, _num(g["auroc"], 2) + _ci(g["auroc_ci"], pct=False), _num(g["brier"]), _num(g["ece"])])
            rows[-1].append(str(g["scored"]))
    return rows


ORDERS_HEADER = ["judge", "acc. as given", "acc. swapped", "acc. both orders", "both right", "positional agr."]
ORDERS_NOTE = (
    "Pairwise, both orders: every pair is judged with its responses as given (order AB) and swapped (BA), "
    "k samples each; an order's pick is the majority of its valid votes, corrected to the pair's frame (the "
    "jury's: the mean of its models' vote shares). 'acc. both orders' is the mean of the two orders' "
    "accuracies and 'positional agr.' the share of pairs with the same pick in both orders, as the LLMBar "
    "paper reports them; an order with no pick counts as wrong. The main table's prediction is the majority "
    "of all 2k order-corrected votes."
)


def _orders_rows(fig: dict[str, Any]) -> list[list[str]]:
    """Pairwise benches: each judge's figures over the two orders, then the published rows."""
    rows = []
    for name, j in fig["judges"].items():
        o = j.get("orders")
        if o and o.get("items"):
            rows.append([name] + [_pct(o[k]) for k in _ORDER_KEYS])
    published = fig.get("published") or {}
    for r in published.get("rows", []):
        rows.append([f"{r['judge']} (published, {r['items']} pairs)"] + [_pct(r[k]) for k in _PUBLISHED_KEYS])
    return rows


_ORDER_KEYS = ("accuracy_as_given", "accuracy_swapped", "accuracy", "both_right", "positional_agreement")
_PUBLISHED_KEYS = ("accuracy_as_given", "accuracy_swapped", "accuracy", "both_right", "agreement")


def _published_note(fig: dict[str, Any]) -> str:
    published = fig.get("published")
    if not published:
        return ""
    b = fig["benchmark"]
    whole = b["records"] == b["records_in_file"]
    sample = (
        ""
        if whole
        else f" This bench judged {b['records']} of the {b['records_in_file']} pairs: a sample, not the set the "
        "published rows cover."
    )
    return (
        f"Published rows: LLMBar {published['subset']}, prompt {published['prompt']}, from {published['citation']}."
        + sample
    )


def _header(fig: dict[str, Any]) -> list[str]:
    paired = any("pairs" in j for j in fig["judges"].values())
    cols = ["judge", "accuracy [95% CI]", "balanced acc.", "Cohen's κ [95% CI]", "F1 (pass)", "F1 (fail)"]
    return cols + (["pair acc."] if paired else []) + ["abstained", "self-consistent", "judgments/s"]


def _intro(fig: dict[str, Any]) -> list[tuple[str, str]]:
    b = fig["benchmark"]
    counts = fig["baseline"]["class_counts"]
    return [
        ("dataset", f"{b['dataset']} ({b['format']}: {b['format_description']})"),
        ("records", f"{b['records']} of {b['records_in_file']} (gold 1: {counts['1']}, gold 0: {counts['0']})"),
        ("sampling", f"--limit {b['limit']}, --sample-seed {b['sample_seed']}; judging seed {b['seed']}"),
        ("metric", f"{b['metric']['name']}: {b['metric']['description']} (strictness {b['strictness']})"),
        ("localjury", b["localjury_version"] + "; " + ", ".join(f"{k} {v}" for k, v in b["packages"].items())),
    ]


def _models(fig: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for m in fig["benchmark"]["models"]:
        source = m.get("source") or {}
        packages = source.get("packages") or {}
        pkgs = ", ".join(f"{k}=={v}" for k, v in packages.items()) if isinstance(packages, dict) else ""
        origin = f"; embedded, from {pkgs}, {source.get('gguf_file', '')}" if pkgs else ""
        out.append((m["name"], f"{m['path']} (sha256 {str(m['sha256'])[:16]}…{origin})"))
    return out


NOTE = (
    "Figures on the decided records; 'abstained' is the share with no verdict (those count as wrong in "
    "accuracy_abstain_as_wrong in metrics.json). A record passes when its score is above 0.5. "
    "Compare every judge with the majority baseline: a judge no better than it has learnt nothing about the labels."
)


def _md_row(row: list[str]) -> str:
    """A table row: its first cell (a judge's name) escaped; the others are localjury's figures."""
    return "| " + " | ".join([md_text(row[0]), *row[1:]]) + " |"


def markdown(fig: dict[str, Any]) -> str:
    """The report as Markdown; names, paths and descriptions from outside are escaped
    (:func:`~localjury.bench._markdown.md_text`), as the HTML report escapes them."""
    lines = [f"# Judge benchmark — {md_text(fig['benchmark']['format'])}", ""]
    lines += [f"- **{k}**: {md_text(v)}" for k, v in _intro(fig)]
    lines += [f"- **model {md_text(k)}**: {md_text(v)}" for k, v in _models(fig)]
    lines += ["", "| " + " | ".join(_header(fig)) + " |", "|" + "---|" * len(_header(fig))]
    lines += [_md_row(r) for r in _rows(fig)]
    agreement = fig["agreement"]["fleiss"]
    lines += ["", NOTE, ""]
    orders = _orders_rows(fig)
    if orders:
        lines += ["## Both orders (pairwise)", "", "| " + " | ".join(ORDERS_HEADER) + " |"]
        lines += ["|" + "---|" * len(ORDERS_HEADER)] + [_md_row(r) for r in orders]
        lines += ["", md_text(ORDERS_NOTE + (" " + _published_note(fig) if fig.get("published") else "")), ""]
    graded = _graded_rows(fig)
    if graded:
        lines += ["## Graded scores", "", "| " + " | ".join(GRADED_HEADER) + " |", "|" + "---|" * len(GRADED_HEADER)]
        lines += [_md_row(r) for r in graded]
        lines += ["", GRADED_NOTE, ""]
    if agreement["models"] > 1:
        lines.append(
            f"Agreement between models: Fleiss' κ {_num(agreement['kappa'], 2)} on {agreement['records']} records."
        )
        lines.append("")
    if fig.get("checklist"):
        from localjury.bench.checklist_comparison import markdown_section

        lines += markdown_section(fig["checklist"])
    if fig.get("evidence"):
        from localjury.bench.evidence_examples import markdown_section as evidence_lines

        lines += evidence_lines(fig["evidence"])
    if fig.get("thinking"):
        from localjury.bench.thinking_examples import markdown_section as thinking_lines

        lines += thinking_lines(fig["thinking"])
    lines += ["## Confusion matrices (rows: gold 0, 1; columns: predicted 0, 1)", ""]
    for name, j in fig["judges"].items():
        if j["confusion"]:
            (tn, fp), (fn, tp) = j["confusion"]
            lines.append(f"- {md_text(name)}: gold 0 → [{tn}, {fp}], gold 1 → [{fn}, {tp}]")
    lines.append("")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.35em .6em;text-align:right}th{background:#f4f6f8}
td:first-child,th:first-child{text-align:left}
tr.baseline td{color:#8a2a2a;background:#fbf1f1}tr.published td{color:#555;background:#f4f4f8}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;font-size:.92em}dt{font-weight:600}
dd{margin:0;word-break:break-all}
.plots{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}.plots figure{margin:0}
figcaption{font-size:.85em;color:#555}.note{font-size:.88em;color:#444;background:#f7f7f2;padding:.6em .8em}
svg{max-width:100%;height:auto}
mark{background:#ffe58a;padding:0 .1em}.quoted{font-size:.92em;line-height:1.5}.samples{font-size:.88em;color:#333}
"""


def html_report(fig: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (no external resources)."""
    esc = html.escape
    intro = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _intro(fig))
    intro += "".join(f"<dt>model {esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _models(fig))
    head = "".join(f"<th>{esc(c)}</th>" for c in _header(fig))
    body = ""
    for row in _rows(fig):
        cls = ' class="baseline"' if row[0].startswith(BASELINE) else ""
        body += f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
    agreement = fig["agreement"]["fleiss"]
    fleiss_line = (
        f"<p>Agreement between models: Fleiss' κ {_num(agreement['kappa'], 2)} on {agreement['records']} records "
        "every model decided.</p>"
        if agreement["models"] > 1
        else ""
    )
    figures = plots(fig)
    graded_rows = _graded_rows(fig)
    graded = ""
    if graded_rows:
        ghead = "".join(f"<th>{esc(c)}</th>" for c in GRADED_HEADER)
        gbody = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in graded_rows)
        graded = (
            f"<h2>Graded scores</h2><table id='graded'><thead><tr>{ghead}</tr></thead><tbody>{gbody}</tbody></table>"
            f"<p class='note'>{esc(GRADED_NOTE)}</p>"
        )
    orders_rows = _orders_rows(fig)
    orders = ""
    if orders_rows:
        ohead = "".join(f"<th>{esc(c)}</th>" for c in ORDERS_HEADER)
        obody = "".join(
            ('<tr class="published">' if "(published" in r[0] else "<tr>")
            + "".join(f"<td>{esc(c)}</td>" for c in r)
            + "</tr>"
            for r in orders_rows
        )
        note = ORDERS_NOTE + (" " + _published_note(fig) if fig.get("published") else "")
        orders = (
            f"<h2>Both orders (pairwise)</h2><table id='orders'><thead><tr>{ohead}</tr></thead><tbody>{obody}"
            f"</tbody></table><p class='note'>{esc(note)}</p>"
        )
    captions = {
        "accuracy": "Accuracy per judge with 95% bootstrap CI; dashed: majority baseline.",
        "confusion": "Confusion matrices (decided records).",
        "agreement": "Agreement between models (Cohen's κ on records both decided).",
        "speed": "Accuracy against generation throughput.",
        "reliability": "Reliability diagram: share of gold 1 against the graded score, per 0.1-wide bin.",
    }
    plot_html = "".join(
        f'<figure id="plot-{k}">{svg}<figcaption>{esc(captions[k])}</figcaption></figure>' for k, svg in figures.items()
    )
    if fig.get("checklist"):
        from localjury.bench.checklist_comparison import html_section

        graded += html_section(fig["checklist"])
    if fig.get("evidence"):
        from localjury.bench.evidence_examples import html_section as evidence_html

        graded += evidence_html(fig["evidence"])
    if fig.get("thinking"):
        from localjury.bench.thinking_examples import html_section as thinking_html

        graded += thinking_html(fig["thinking"])
    title = f"Judge benchmark — {fig['benchmark']['format']}"
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1><dl>{intro}</dl>"
        f"<h2>Judges against gold</h2><table id='figures'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f"<p class='note'>{esc(NOTE)}</p>{fleiss_line}{orders}{graded}"
        f"<h2>Plots</h2><div class='plots'>{plot_html}</div>"
        "</body></html>\n"
    )
