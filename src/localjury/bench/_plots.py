"""The benchmark report's plots, drawn with matplotlib (the ``bench`` extra) as inline SVG."""

from __future__ import annotations

import io
from typing import Any


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})  # same input, same file
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def plots(fig: dict[str, Any]) -> dict[str, str]:
    """The report's plots as inline SVG: accuracy with CIs, confusion matrices, the model
    agreement heatmap, the reliability diagram of the graded scores, accuracy vs throughput."""
    import matplotlib

    matplotlib.use("Agg")
    drawn = {
        "accuracy": _accuracy_svg(fig),
        "confusion": _confusion_svg(fig),
        "agreement": _agreement_svg(fig),
        "reliability": _reliability_svg(fig),
        "speed": _speed_svg(fig),
    }
    return {name: svg for name, svg in drawn.items() if svg is not None}


def _accuracy_svg(fig: dict[str, Any]) -> str:
    """Each judge's accuracy with its CI, against the majority baseline."""
    import matplotlib.pyplot as plt

    judges = fig["judges"]
    names = list(judges)
    f, ax = plt.subplots(figsize=(6.4, 0.6 + 0.5 * len(names)))
    accs = [judges[n]["accuracy"] or 0 for n in names]
    errs = [
        [a - (judges[n]["accuracy_ci"] or [a, a])[0] for n, a in zip(names, accs, strict=True)],
        [(judges[n]["accuracy_ci"] or [a, a])[1] - a for n, a in zip(names, accs, strict=True)],
    ]
    ax.barh(names, accs, xerr=errs, color="#4C72B0", capsize=4)
    base = fig["baseline"]["accuracy"] or 0
    ax.axvline(base, color="#C44E52", linestyle="--", label=f"majority baseline {base:.0%}")
    ax.set_xlim(0, 1)
    ax.set_xlabel("accuracy on decided records (95% bootstrap CI)")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    return _svg(f)


def _confusion_svg(fig: dict[str, Any]) -> str | None:
    """A confusion matrix per judge that has one; None where none has."""
    import matplotlib.pyplot as plt

    judges = fig["judges"]
    with_cm = [n for n in judges if judges[n]["confusion"]]
    if not with_cm:
        return None
    f, axes = plt.subplots(1, len(with_cm), figsize=(2.6 * len(with_cm), 2.6), squeeze=False)
    for ax, n in zip(axes[0], with_cm, strict=True):
        cm = judges[n]["confusion"]
        ax.imshow(cm, cmap="Blues", vmin=0)
        top = max(max(r) for r in cm) or 1
        for i in range(2):
            for j in range(2):
                color = "white" if cm[i][j] > top / 2 else "black"
                ax.text(j, i, str(cm[i][j]), ha="center", va="center", fontsize=11, color=color)
        ax.set_xticks([0, 1], ["pred 0", "pred 1"])
        ax.set_yticks([0, 1], ["gold 0", "gold 1"])
        ax.set_title(n, fontsize=9)
    return _svg(f)


def _agreement_svg(fig: dict[str, Any]) -> str | None:
    """The heatmap of Cohen's κ between each two models; None with fewer than two."""
    import matplotlib.pyplot as plt

    matrix = fig["agreement"]["pairwise_kappa"]
    models = list(matrix)
    if len(models) <= 1:
        return None
    values = [[matrix[a][b] if matrix[a][b] is not None else float("nan") for b in models] for a in models]
    f, ax = plt.subplots(figsize=(1.2 + 1.1 * len(models), 1.0 + 0.9 * len(models)))
    im = ax.imshow(values, cmap="RdYlGn", vmin=-1, vmax=1)
    for i in range(len(models)):
        for j in range(len(models)):
            v = values[i][j]
            ax.text(j, i, "-" if v != v else f"{v:.2f}", ha="center", va="center", fontsize=10)
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_title("Cohen's κ between models", fontsize=9)
    f.colorbar(im, ax=ax, fraction=0.046)
    return _svg(f)


def _reliability_svg(fig: dict[str, Any]) -> str | None:
    """The reliability diagram of each judge's graded scores; None where no judge has one."""
    import matplotlib.pyplot as plt

    judges = fig["judges"]
    graded = {
        n: judges[n]["graded"]["reliability"] for n in judges if (judges[n].get("graded") or {}).get("reliability")
    }
    if not graded:
        return None
    f, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="#999", linestyle=":", linewidth=1, label="perfect calibration")
    for n, bins in graded.items():
        xs = [b["mean_score"] for b in bins]
        ys = [b["positive_rate"] for b in bins]
        ax.plot(xs, ys, marker="o", label=n)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("graded score (bin mean)")
    ax.set_ylabel("share of gold 1")
    ax.legend(fontsize=7, loc="upper left")
    return _svg(f)


def _speed_svg(fig: dict[str, Any]) -> str | None:
    """Each judge's accuracy against its throughput; None where no judge has both."""
    import matplotlib.pyplot as plt

    judges = fig["judges"]
    speed = [(n, judges[n].get("judgments_per_second"), judges[n]["accuracy"]) for n in judges]
    speed = [s for s in speed if s[1] is not None and s[2] is not None]
    if not speed:
        return None
    f, ax = plt.subplots(figsize=(5.2, 3.2))
    for n, jps, acc in speed:
        ax.scatter(jps, acc, s=60)
        ax.annotate(n, (jps, acc), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.axhline(fig["baseline"]["accuracy"] or 0, color="#C44E52", linestyle="--", linewidth=1)
    ax.set_xlabel("judgments per second (generation)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    return _svg(f)
