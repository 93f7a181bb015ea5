"""Reading agent traces at scale: the speed and peak memory of ``localjury``'s OTLP reader
(:func:`localjury.records.traces.iter_trace_records`, two streaming passes) against the plain
way, every line parsed and every span held until the end, measured in the same run; and the
same reader on the same spans in OTLP protobuf.

Writes ``--spans`` spans as OTLP JSON: copies of the OpenInference trace in
``examples/agent_traces.jsonl`` (5 spans: an agent, a retriever, a tool, two LLM calls), each
with ids of its own and split over two consecutive lines (a batch ends inside it, as the
Collector's batches do), ``--traces-per-line`` traces a line. Then, each in a process of its
own:

- ``stream``: ``iter_trace_records`` over the file, the records counted;
- ``whole``: every line parsed with ``json.loads`` and its spans grouped by trace in one dict
  (what reading without a bound holds), then counted (the process imports localjury's reader
  too, so both start from the same memory);
- ``stream-pb``: ``iter_trace_records`` over the same spans written as OTLP protobuf (the
  Collector's ``format: proto``; needs the ``traces`` extra);
- ``huge`` (with ``--huge-mib``): a file whose first line holds one attribute of that size,
  then one trace: the streaming reader skips the line (an error naming it) without holding it.

and records that process's peak resident memory (``ru_maxrss`` of that child) and wall time.

    .venv/bin/python benchmarks/performance/trace_reading.py
    .venv/bin/python benchmarks/performance/trace_reading.py --spans 10000 100000 1000000 --huge-mib 1024
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, measure, provenance, save, table

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "agent_traces.jsonl"
STREAM = """
import sys
from localjury.records.traces import iter_trace_records
from localjury.errors import RecordError
records = errors = 0
for item in iter_trace_records(sys.argv[1]):
    errors += isinstance(item, RecordError)
    records += not isinstance(item, RecordError)
print(records, errors)
"""
WHOLE = """
import json, sys
import localjury.records.traces  # the same imports as the streaming reader's process
traces = {}
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        request = json.loads(line)
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    traces.setdefault(span["traceId"], []).append(span)
print(len(traces), 0)
"""


def template_spans() -> list[str]:
    """The first trace of the example file, its spans as JSON strings (ids replaced per copy)."""
    request = json.loads(TEMPLATE.read_text().splitlines()[0])
    return [json.dumps(s) for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def write(path: Path, spans: int, per_line: int) -> int:
    """Write copies of the template trace until ``spans`` spans; return the traces written."""
    parts = template_spans()
    ids = {json.loads(p)["spanId"] for p in parts}
    trace_id = json.loads(parts[0])["traceId"]
    head, tail = parts[:2], parts[2:]
    traces = max(1, spans // len(parts))

    def copy(k: int, chunk: list[str]) -> list[str]:
        out = []
        for text in chunk:
            text = text.replace(trace_id, f"{k:032x}")
            for span_id in ids:
                text = text.replace(span_id, f"{k:08x}{span_id[8:]}")
            out.append(text)
        return out

    def line(spans_json: list[str]) -> str:
        return (
            '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{"name":"bench"},"spans":['
            + ",".join(spans_json)
            + "]}]}]}\n"
        )

    with path.open("w", encoding="utf-8") as fh:
        for start in range(0, traces, per_line):
            batch = range(start, min(start + per_line, traces))
            fh.write(line([s for k in batch for s in copy(k, head)]))
            fh.write(line([s for k in batch for s in copy(k, tail)]))
    return traces


def write_huge(path: Path, mib: int) -> None:
    """One line with an attribute of ``mib`` MiB, then the template trace."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "a" * 32 + '","spanId":"' + "b" * 16)
        fh.write('","name":"big","attributes":[{"key":"input.value","value":{"stringValue":"')
        block = "x" * (1 << 20)
        for _ in range(mib):
            fh.write(block)
        fh.write('"}}]}]}]}]}\n')
        fh.write(TEMPLATE.read_text().splitlines()[0] + "\n")


def write_proto(source: Path, path: Path) -> None:
    """``source`` (OTLP JSON lines, hex ids) as the Collector writes ``format: proto``: each
    request's bytes after their size, 4 bytes big-endian."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    with source.open("rb") as lines, path.open("wb") as fh:
        for line in lines:
            request = json.loads(line)
            for rs in request["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if span.get(key):
                                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
            data = ParseDict(request, ExportTraceServiceRequest()).SerializeToString()
            fh.write(len(data).to_bytes(4, "big") + data)


def run(argv: list[str]) -> dict[str, Any]:
    """:func:`_figures.measure` of ``argv``, its output the counts it printed."""
    got = measure(argv, ROOT)
    got["counted"] = got.pop("stdout").strip()
    return got


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--traces-per-line", type=int, default=100)
    parser.add_argument("--huge-mib", type=int, default=0, help="also read a file with one attribute this large")
    parser.add_argument("--out", type=Path, default=RESULTS / "trace_reading")
    parser.add_argument("--write", nargs=3, metavar=("SPANS", "PER_LINE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:  # in the writing process: this one stays small
        spans, per_line, path = args.write
        write(Path(path), int(spans), int(per_line))
        write_proto(Path(path), Path(path).with_suffix(".pb"))
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="trace_reading-") as tmp:
        for spans in args.spans:
            path = Path(tmp) / f"t{spans}.jsonl"
            subprocess.run(
                [sys.executable, __file__, "--write", str(spans), str(args.traces_per_line), str(path)], check=True
            )
            proto = path.with_suffix(".pb")
            for mode, code, read in (("stream", STREAM, path), ("whole", WHOLE, path), ("stream-pb", STREAM, proto)):
                got = run([sys.executable, "-c", code, str(read)])
                row = {"mode": mode, "spans": spans, "file_mib": round(read.stat().st_size / (1 << 20), 1), **got}
                print(json.dumps({k: v for k, v in row.items() if k != "stderr"}), flush=True)
                runs.append(row)
            path.unlink()
            proto.unlink()
        if args.huge_mib:
            path = Path(tmp) / "huge.jsonl"
            write_huge(path, args.huge_mib)
            got = run([sys.executable, "-c", STREAM, str(path)])
            row = {"mode": "huge", "spans": 6, "file_mib": round(path.stat().st_size / (1 << 20), 1), **got}
            print(json.dumps({k: v for k, v in row.items() if k != "stderr"}), flush=True)
            runs.append(row)
    for row in runs:
        row.pop("stderr")
    ratios = {}
    for spans in args.spans:
        stream, whole, pb = (
            next(r for r in runs if r["mode"] == m and r["spans"] == spans) for m in ("stream", "whole", "stream-pb")
        )
        ratios[str(spans)] = {
            "seconds_stream_over_whole": round(stream["seconds"] / whole["seconds"], 2),
            "rss_stream_over_whole": round(stream["peak_rss_mib"] / whole["peak_rss_mib"], 2),
            "seconds_pb_over_json": round(pb["seconds"] / stream["seconds"], 2),
            "rss_pb_over_json": round(pb["peak_rss_mib"] / stream["peak_rss_mib"], 2),
        }
    figures = {"benchmark": "trace_reading", **provenance(__file__, argv), "python": sys.version.split()[0],
               "runs": runs, "ratios": ratios}  # fmt: skip
    save(args.out, figures, markdown(figures))


def markdown(figures: dict[str, Any]) -> str:
    rows = [[r["mode"], f"{r['spans']:,}", r["file_mib"], r["peak_rss_mib"], r["seconds"], r["counted"], r["exit"]]
            for r in figures["runs"]]  # fmt: skip
    ratios = [
        [
            f"{int(n):,}",
            v["seconds_stream_over_whole"],
            v["rss_stream_over_whole"],
            v["seconds_pb_over_json"],
            v["rss_pb_over_json"],
        ]
        for n, v in figures["ratios"].items()
    ]
    return "\n".join([
        f"# Reading agent traces (OTLP JSON and protobuf) — CPU: {figures['cpu']}",
        "",
        "`stream`: `iter_trace_records` (two passes; a trace held until its last line); `whole`: every line "
        "parsed and every span kept until the end, the plain way. Copies of the OpenInference trace of "
        "`examples/agent_traces.jsonl` (5 spans), each split over two lines. `stream-pb`: the same file as "
        "OTLP protobuf (the Collector's `format: proto`), read by the same reader. `huge`: one attribute of the "
        "file's size on the first line, then one trace (the line is skipped as an error, never held). Each "
        "in a process of its own; peak RSS is that process's `ru_maxrss`; counted: records (traces), errors.",
        "",
        *table(["mode", "spans", "file MiB", "peak RSS MiB", "seconds", "counted", "exit"], rows, "llrrrll"),
        "",
        *table(["spans", "time stream / whole", "peak RSS stream / whole", "time protobuf / JSON",
                "peak RSS protobuf / JSON"], ratios, "lrrrr"),
        "",
        f"Command: `{figures['command']}`",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
