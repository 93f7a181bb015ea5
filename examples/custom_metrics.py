"""Declare your own metrics in Python: a single-step judge and a two-stage composite.

Run it (after scripts/setup and `localjury models pull smollm2-135m-instruct`):

    .venv/bin/python examples/custom_metrics.py [--models smollm2-135m-instruct] [--out DIR] [--records N]

It judges three records (or the first N) with the embedded model, prints each result, and
writes results.jsonl and its summary to DIR (default out/custom_metrics).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from localjury import (
    NLI_STATEMENT,
    STATEMENT_GENERATOR,
    CompositeMetric,
    Faithfulness,
    JudgeMetric,
    evaluate,
)


# 1. A single-step metric: an input model, an output model with a 0/1 verdict, an
#    instruction and one example. Fields named like record fields are filled from the record.
class Exchange(BaseModel):
    user_input: str
    response: str


class Verdict(BaseModel):
    reason: str = Field(max_length=160)
    verdict: Literal[0, 1]


answers_the_question = JudgeMetric(
    "answers_the_question",
    instruction=(
        "Read the question in <user_input> and the reply in <response>. Answer with JSON: a short "
        '"reason", then "verdict": 1 if the reply answers the question asked, 0 if it evades it '
        "or answers something else."
    ),
    input_model=Exchange,
    output_model=Verdict,
    examples=[
        (
            Exchange(user_input="How tall is Mont Blanc?", response="It is a mountain in the Alps."),
            Verdict(reason="It says where Mont Blanc is, not how tall it is.", verdict=0),
        )
    ],
    strictness=3,
)

# 2. A composite: reuse the two stages of Faithfulness the other way round. Statements are
#    extracted from the *reference*, and each is checked against the *response*: the share
#    of the reference's facts that the response covers (a recall, where faithfulness is a
#    precision).
reference_coverage = CompositeMetric(
    "reference_coverage",
    extract=STATEMENT_GENERATOR,
    verify=NLI_STATEMENT,
    extract_sources={"response": "reference"},
    verify_sources={"context": "response"},
    strictness=3,
    description="share of the reference's statements that the response supports",
)

RECORDS = [
    {
        "id": "everest",
        "user_input": "How tall is Mount Everest and where is it?",
        "response": "Mount Everest is 8,849 metres tall. It lies in the Himalayas.",
        "retrieved_contexts": ["Mount Everest, in the Himalayas on the Nepal-China border, is 8,849 m high."],
        "reference": "Mount Everest is 8,849 metres high and stands on the border of Nepal and China.",
    },
    {
        "id": "moon",
        "user_input": "Who first walked on the Moon?",
        "response": "The Moon landing was a great achievement of the 20th century.",
        "retrieved_contexts": ["Neil Armstrong was the first person to walk on the Moon, on 21 July 1969."],
        "reference": "Neil Armstrong, in July 1969.",
    },
    {
        "id": "python",
        "user_input": "Who created Python?",
        "response": "Python was created by Guido van Rossum and first released in 1991.",
        "retrieved_contexts": ["Guido van Rossum began working on Python in the late 1980s; it was released in 1991."],
        "reference": "Guido van Rossum.",
    },
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m-instruct", help="comma-separated jury")
    parser.add_argument("--out", type=Path, default=Path("out/custom_metrics"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--records", type=int, default=len(RECORDS), help="judge the first N records only")
    args = parser.parse_args()

    result = evaluate(
        RECORDS[: args.records],
        [answers_the_question, Faithfulness(strictness=3), reference_coverage],
        args.models.split(","),
        seed=args.seed,
    )
    for row in result.results:
        print(f"{row.record_id:8} {row.metric:22} score={row.score}")
        for s in row.statements or []:
            votes = "; ".join(f"{m.model}: {m.votes}" for m in s.models)
            print(f"{'':10}- {s.statement!r} support={s.score} ({votes})")
    out, summary = result.write(args.out / "results.jsonl")
    print(f"results: {out}\nsummary: {summary}")


if __name__ == "__main__":
    main()
