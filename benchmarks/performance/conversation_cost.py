"""What judging a 20-turn conversation costs against a one-turn record, on real judges.

Builds ``--records`` trip-planning conversations of 20 turns after a system prompt (user
questions, assistant answers, four tool calls and their JSON results), and as many one-turn
records (``user_input``, ``response``) whose response is the conversation's final answer.
Each model judges each set with the same criterion at ``scope="last_turn"`` (the final
answer, the turns before it as context) and ``scope="conversation"`` (the whole
conversation), with the same k and seed, one run each (no judgment store), after a warm-up
run. Prints and saves, per record: prompt tokens, prompt tokens reused (the prefix the
prompts of one engine call share, prefilled once), output tokens, generation seconds, and the
ratios against the one-turn record. Then judges the conversations on the same model with a
context of half their prompt (plus the output budget): under ``on_overflow="error"`` each is
its record's error; under ``"truncate"`` its middle turns are cut (``turns_cut``).

    .venv/bin/python benchmarks/performance/conversation_cost.py
    .venv/bin/python benchmarks/performance/conversation_cost.py --models smollm2-135m-instruct:transformers --records 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from localjury import AspectCritic, __version__, evaluate
from localjury.engines.pool import keep_loaded
from localjury.models.registry import load_registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _figures
from _figures import RESULTS, provenance, save, table

CRITERION = "The assistant's statements agree with what the tools returned (flights, hotels, prices, weather)."
SYSTEM = (
    "You are a travel assistant. Use the tools to check weather, flights, hotels and prices; "
    "never invent a booking reference or a price."
)
#: Per trip: city, airport, flight, departure, fare (EUR), hotel, three nights (EUR).
TRIPS = [
    ("Lisbon", "LIS", "TP1351", "09:05", 142, "Casa do Largo", 387),
    ("Seville", "SVQ", "IB3711", "08:40", 118, "Hotel Alcazar Viejo", 402),
    ("Naples", "NAP", "BA2606", "07:55", 131, "Palazzo Decumani", 351),
    ("Porto", "OPO", "TP1333", "10:15", 109, "Casa da Ribeira", 298),
]


def _call(i: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _result(i: int, name: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": json.dumps(content)}


def final_answer(trip: tuple[Any, ...]) -> str:
    """The conversation's last assistant turn, also the one-turn record's response."""
    city, _, flight, dep, fare, hotel, stay = trip
    return (
        f"Your plan for {city}: fly {flight} from Heathrow on Friday 14 March at {dep} (booking QX7F2L, "
        f"{fare} EUR); stay three nights at {hotel} in the old town for {stay} EUR (about "
        f"{round(stay * 0.856)} GBP); expect sun on Friday and Monday, and pack an umbrella for Sunday's rain."
    )


def conversation(trip: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A system prompt and 20 turns: four questions answered with tool calls, then a summary."""
    city, code, flight, dep, fare, hotel, stay = trip
    dates = {"check_in": "2025-03-14", "check_out": "2025-03-17"}
    weather = {"14 Mar": "17C sunny", "15 Mar": "16C cloudy", "16 Mar": "14C rain", "17 Mar": "18C sunny"}
    flights = [
        {"flight": flight, "departs": dep, "arrives": "12:10", "direct": True, "fare_eur": fare},
        {"flight": "U28421", "departs": "06:20", "arrives": "09:35", "direct": True, "fare_eur": fare - 41},
        {"flight": "LH0901", "departs": "11:30", "arrives": "17:05", "direct": False, "fare_eur": fare + 60},
    ]
    hotels = [
        {"name": "Hotel Central", "area": "old town", "per_night_eur": 149, "rating": 4.1},
        {"name": hotel, "area": "old town", "per_night_eur": stay // 3, "rating": 4.6},
        {"name": "Residencial Sol", "area": "old town", "per_night_eur": 95, "rating": 3.7},
    ]
    gbp = {"amount": round(stay * 0.856, 2), "currency": "GBP", "rate": 0.856}
    question = f"I'm planning a long weekend in {city} from 14 to 17 March. What will the weather be like?"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question},
        _call(0, "get_weather", {"city": city, "from": "2025-03-14", "to": "2025-03-17"}),
        _result(0, "get_weather", weather),
        {"role": "assistant", "content": "Mild: sunny on Friday and Monday, cloudy on Saturday, rain on Sunday."},
        {"role": "user", "content": "Good. Find me a direct flight from London Heathrow on Friday morning."},
        _call(1, "search_flights", {"from": "LHR", "to": code, "date": "2025-03-14", "direct": True}),
        _result(1, "search_flights", flights),
        {"role": "assistant", "content": f"{flight} leaves at {dep} and lands at 12:10, direct, for {fare} EUR."},
        {"role": "user", "content": "Book that one, and find a hotel in the old town under 150 euros a night."},
        _call(2, "book_flight", {"flight": flight, "passengers": 1}),
        _result(2, "book_flight", {"status": "confirmed", "reference": "QX7F2L"}),
        _call(3, "search_hotels", {"city": city, "area": "old town", "max_per_night_eur": 150, **dates}),
        _result(3, "search_hotels", hotels),
        {"role": "assistant", "content": f"Booked (QX7F2L). Three hotels fit; {hotel} is the best rated (4.6)."},
        {"role": "user", "content": f"{hotel} sounds nice. How much are the three nights in pounds?"},
        _call(4, "convert_currency", {"amount": stay, "from": "EUR", "to": "GBP"}),
        _result(4, "convert_currency", gbp),
        {"role": "assistant", "content": f"Three nights cost {stay} EUR, about {round(gbp['amount'])} GBP."},
        {"role": "user", "content": "Great. Can you sum up the whole plan in a few lines?"},
        {"role": "assistant", "content": final_answer(trip)},
    ]


def datasets(n: int) -> dict[str, list[dict[str, Any]]]:
    """``n`` 20-turn conversations and ``n`` one-turn records with the same final answers."""
    trips = [TRIPS[i % len(TRIPS)] for i in range(n)]
    one_turn = [
        {
            "id": f"one-{i}",
            "user_input": f"Sum up my plan for a long weekend in {t[0]} from 14 to 17 March: flight, hotel, weather.",
            "response": final_answer(t),
        }
        for i, t in enumerate(trips)
    ]
    return {
        "one-turn": one_turn,
        "20-turn": [{"id": f"conv-{i}", "messages": conversation(t)} for i, t in enumerate(trips)],
    }


def judge(records: list[dict], scope: str, spec: Any, engine: str, k: int, seed: int, **settings: Any) -> dict:
    """One run: its summary's token and time counts, per record, and its results' errors and cuts."""
    metric = AspectCritic("tools_agree", CRITERION, strictness=k, scope=scope)  # type: ignore[arg-type]
    run = evaluate(records, [metric], [spec], engine=engine, seed=seed, use_cache=False, **settings)
    m = run.summary.models[0]
    n = len(records)
    # A prompt over the context is the model's error for that record (on_overflow="error").
    errors = [e for r in run.results if (e := r.error or next((j.error for j in r.models if j.error), None))]
    return {
        "prompt_tokens": round(m.prompt_tokens / n, 1),
        "prompt_tokens_reused": round(m.prompt_tokens_reused / n, 1),
        "output_tokens": round(m.output_tokens / n, 1),
        "seconds": round(m.generate_seconds / n, 3),
        "judgments": m.judgments,
        "abstentions": m.abstentions,
        "errors": len(errors),
        "error": errors[0] if errors else None,
        "turns_cut": [r.turns_cut for r in run.results],
    }


def model_rows(name: str, engine: str, data: dict[str, list[dict]], args: argparse.Namespace) -> list[dict]:
    """Every (record shape, scope) run of one model, then the two overflow runs."""
    spec = load_registry().get(name)
    budget = args.max_tokens or spec.max_tokens
    rows = []
    with keep_loaded():
        # Warm-up: the load, the grammar or index, the first call's costs.
        judge(data["one-turn"][:1], "last_turn", spec, engine, 1, args.seed, max_tokens=budget)
        for shape in ("one-turn", "20-turn"):
            for scope in ("last_turn", "conversation"):
                row = {"model": name, "engine": engine, "record": shape, "scope": scope, "context": spec.context_length}
                rows.append(
                    row | judge(data[shape], scope, spec, engine, args.strictness, args.seed, max_tokens=budget)
                )
                print(json.dumps(rows[-1]), flush=True)
        for row in rows[2:]:
            base = next(r for r in rows if r["record"] == "one-turn" and r["scope"] == row["scope"])
            row["prompt_ratio"] = round(row["prompt_tokens"] / base["prompt_tokens"], 2)
            row["seconds_ratio"] = round(row["seconds"] / base["seconds"], 2)
        full = next(r for r in rows if r["record"] == "20-turn" and r["scope"] == "conversation")
        short = spec.model_copy(update={"context_length": budget + int(full["prompt_tokens"]) // 2})
        for policy in ("error", "truncate"):
            row = {"model": name, "engine": engine, "record": "20-turn", "scope": "conversation"}
            row |= {"context": short.context_length, "on_overflow": policy}
            rows.append(row | judge(data["20-turn"], "conversation", short, engine, args.strictness, args.seed,
                                    on_overflow=policy, max_tokens=budget))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(report: dict) -> str:
    """The report as a Markdown table, with the overflow runs after it."""
    rows = report["rows"]
    lines = [
        f"# A 20-turn conversation against a one-turn record — k={report['strictness']}, seed {report['seed']}, "
        f"{report['records']} records of each, CPU: {report['cpu']}",
        "",
        "Per record. Ratios: the 20-turn record over the one-turn record at the same scope.",
        "",
        *table(
            [
                "model (engine)",
                "record",
                "scope",
                "prompt tokens",
                "reused",
                "output tokens",
                "gen. s",
                "prompt ratio",
                "time ratio",
            ],
            (
                [
                    f"{r['model']} ({r['engine']})",
                    r["record"],
                    r["scope"],
                    f"{r['prompt_tokens']:g}",
                    f"{r['prompt_tokens_reused']:g}",
                    f"{r['output_tokens']:g}",
                    f"{r['seconds']:.2f}",
                    f"{r.get('prompt_ratio', 1.0):.2f}",
                    f"{r.get('seconds_ratio', 1.0):.2f}",
                ]
                for r in rows
                if "on_overflow" not in r
            ),
        ),
        "",
        "Longer than the judge's context (the context set to half the conversation's prompt plus the output budget):",
        "",
        *table(
            ["model (engine)", "context", "on_overflow", "records in error", "turns cut", "prompt tokens", "gen. s"],
            (
                [
                    f"{r['model']} ({r['engine']})",
                    r["context"],
                    r["on_overflow"],
                    r["errors"],
                    ", ".join("-" if c is None else str(c) for c in r["turns_cut"]),
                    f"{r['prompt_tokens']:g}",
                    f"{r['seconds']:.2f}",
                ]
                for r in rows
                if "on_overflow" in r
            ),
        ),
    ]
    errors = {r["error"] for r in rows if r.get("error")}
    lines += ["", *(f"Error: `{e}`" for e in sorted(errors))]
    lines += ["", f"Command: `{report['command']}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--models",
        nargs="+",
        default=["qwen2.5-coder-1.5b-instruct:llamacpp", "smollm2-135m-instruct:transformers"],
        help="NAME:ENGINE pairs",
    )
    parser.add_argument("--records", type=int, default=2, help="records of each shape (one engine call holds them)")
    parser.add_argument("--strictness", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=None, help="output budget (default: each model's)")
    parser.add_argument("--out", default=str(RESULTS / "conversation_cost"), help="path stem for .json and .md")
    args = parser.parse_args(argv)

    data = datasets(args.records)
    rows = []
    for pair in args.models:
        name, _, engine = pair.partition(":")
        rows += model_rows(name, engine or "transformers", data, args)
    report = {
        "benchmark": "conversation cost",
        **provenance(__file__, argv),
        "criterion": CRITERION,
        "records": args.records,
        "strictness": args.strictness,
        "seed": args.seed,
        "localjury": __version__,
        "machine": f"{platform.machine()}, {platform.system()}",
        "cores": os.cpu_count(),
        "rows": rows,
    }
    save(args.out, report, markdown(report))
    return report


if __name__ == "__main__":
    main()
