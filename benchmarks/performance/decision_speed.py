"""Decision mode against the generating judge, side by side on this machine: judgments per
second of one prefill a record stopped after the head's block, of the same prefills through
every block, and of k=3 generation under the schema, on the same records, in alternating rounds.

    python benchmarks/performance/decision_speed.py [--records 20] [--rounds 3]

The judge, records and block are ``decision_heads.py``'s speed figure's (Qwen2.5-Coder-1.5B,
GGUF Q4_K_M on llama.cpp; TruthfulQA's first records of the bench run, the zero-shot prompt;
the best block there), each round one call of each kind after an untimed warm-up. It says which
kernels llama.cpp ran: repacked, or plain where a probe refused those
(``localjury.engines.native.llamacpp_kernels``). The figures of each CPU are kept beside the
others': writes benchmarks/results/decision_speed.{json,md}, one entry a CPU, this one's replaced.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality"))  # decision_heads' judge and records
from _figures import RESULTS, provenance, save, table
from decision_heads import HEAD_CRITERION, MODEL, SETS, baseline, speed

from localjury.bench._judge import resolve_metric
from localjury.engines import load_engine
from localjury.models.registry import load_registry

STEM = RESULTS / "decision_speed"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20, help="records judged each round (one more warms up)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    name = "truthfulqa"
    layer = json.loads((RESULTS / "decision_heads.json").read_text())["sets"][name]["best_layer"]
    items, _ = baseline(name)
    judge = resolve_metric(HEAD_CRITERION.get(name), SETS[name][1], 3)
    engine = load_engine(load_registry(None).get(MODEL).model_copy(update={"engine": "llamacpp"}))
    try:
        rounds = [speed(engine, judge, items[: args.records + 1], layer) for _ in range(args.rounds)]
        kernels = "repacked" if engine.kernels.extra_bufts else f"plain: {engine.kernels.reason}"
    finally:
        engine.close()
    here = provenance(__file__, argv)
    median = {key: statistics.median(r[key] for r in rounds)
              for key in ("decision_mode_per_s", "full_depth_per_s", "generate_k3_per_s", "ratio")}  # fmt: skip
    entry = {**here, "kernels": kernels, "records": args.records, "layer": layer, "blocks": rounds[0]["blocks"],
             "median": median, "rounds": rounds}  # fmt: skip
    figures = merged(STEM.with_suffix(".json"), here["cpu"], entry)
    save(STEM, figures, markdown(figures))
    print(markdown(figures))


def merged(held: Path, cpu: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``held`` (a JSON file this script wrote, if any) with ``cpu``'s entry set to
    ``entry``: the other CPUs' entries kept, in their order."""
    by_cpu = json.loads(held.read_text())["by_cpu"] if held.is_file() else {}
    return {"benchmark": "decision_speed", "model": MODEL, "engine": "llamacpp", "by_cpu": {**by_cpu, cpu: entry}}


def markdown(f: dict[str, Any]) -> str:
    lines = [
        "# Decision mode against the generating judge",
        "",
        f"{f['model']} on {f['engine']}: judgments per second on the same TruthfulQA records, each CPU's",
        "medians of its rounds (each round: decision mode, the same prefills through every block, k=3",
        "generation under the schema, one after another). The ratio: k=3 generation's time over decision mode's.",
        "",
    ]
    rows = []
    for cpu_line, e in f["by_cpu"].items():
        m, ratios = e["median"], [r["ratio"] for r in e["rounds"]]
        rows.append([cpu_line, f"{e['records']} x {len(e['rounds'])}", f"{e['layer']} of {e['blocks']}",
                     f"{m['decision_mode_per_s']:.2f}", f"{m['full_depth_per_s']:.2f}",
                     f"{m['generate_k3_per_s']:.2f}", f"**{m['ratio']:.1f}x**",
                     f"{min(ratios):.1f}-{max(ratios):.1f}x"])  # fmt: skip
    header = ["CPU", "records x rounds", "stops after block", "decision mode /s", "every block /s", "k=3 /s", "ratio",
              "rounds' ratios"]  # fmt: skip
    lines += table(header, rows, "llrrrrrr")
    lines += [""] + [f"llama.cpp's kernels on {c}: {e['kernels']}." for c, e in f["by_cpu"].items() if "kernels" in e]
    lines += ["", "Commands: " + "; ".join(sorted({f"`{e['command']}`" for e in f["by_cpu"].values()})) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
