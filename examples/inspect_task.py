"""Score an inspect_ai task with a local jury, then judge its log again as records.

Run it offline (after scripts/setup and `localjury models pull smollm2-135m-instruct`):

    .venv/bin/python examples/inspect_task.py [--log-dir DIR]

inspect's ``mockllm`` plays the model under test with canned answers (no network, no key);
localjury's scorer judges each answer with the embedded SmolLM2, three samples a judgment.
The script prints each sample's score and the jury's explanation, then reads the log inspect
wrote (under DIR, default out/inspect) as records and judges it with ``evaluate``: the same
prompts, so the judgment store answers them all. With a real model under test, let inspect run
the task:

    inspect eval examples/inspect_task.py --model openai/gpt-4o-mini
"""

from __future__ import annotations

import argparse
import math

from inspect_ai import Task, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, Model, ModelOutput, ModelUsage, get_model
from inspect_ai.solver import generate

from localjury import AspectCritic, evaluate
from localjury.integrations.inspect import localjury_scorer

DATED = "The response must include a specific date or year."
JUDGE = "smollm2-135m-instruct"


@task
def berlin_wall(judges: str = JUDGE, strictness: int = 3, cache: str | None = None) -> Task:
    """Two questions; each answer is judged on whether it gives a date or year.

    Args:
        judges: The jury, names from models.yaml, comma-separated.
        strictness: Samples per judge for each judgment.
        cache: The judgment store (default: localjury's own).
    """
    asked = [ChatMessageSystem(content="Answer in one sentence."), ChatMessageUser(content="When did the Wall fall?")]
    return Task(
        dataset=[Sample(id="wall", input=asked, target="1989"), Sample(id="moon", input="When did Apollo 11 land?")],
        solver=generate(),
        scorer=localjury_scorer(
            {"dated": DATED}, judges.split(","), strictness=strictness, seed=0, **({"cache": cache} if cache else {})
        ),
    )


def canned_model() -> Model:
    """mockllm answering the two questions in turn. Their token usage is given: without it,
    mockllm counts tokens with tiktoken, which downloads its encoding the first time."""
    answers = ["The Berlin Wall fell on 9 November 1989.", "Some time ago, in the summer."]
    outputs = [ModelOutput.from_content("mockllm/model", a) for a in answers]
    for out in outputs:
        out.usage = ModelUsage(input_tokens=20, output_tokens=10, total_tokens=30)
    return get_model("mockllm/model", custom_outputs=outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", default="out/inspect", help="where inspect writes its log")
    args = parser.parse_args()

    (log,) = inspect_eval(berlin_wall(), model=canned_model(), log_dir=args.log_dir, display="none")
    print(f"inspect log: {log.location} ({log.status})")
    for sample in log.samples or []:
        score = sample.scores["localjury"]
        value = score.value["dated"]
        print(f"\n{sample.id}: dated = {'unscored' if math.isnan(value) else value}\n{score.explanation}")

    run = evaluate(log.location, [AspectCritic("dated", DATED)], [JUDGE], strictness=3, seed=0)
    print("\nThe log judged as records:", {r.record_id: r.score for r in run.results})
    print(f"({run.summary.models[0].cached} of {run.summary.models[0].judgments} samples from the judgment store)")


if __name__ == "__main__":
    main()
