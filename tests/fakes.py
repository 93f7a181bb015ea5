"""A small scripted engine for fast unit tests of the runner (never a stand-in for the real path)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from localjury.engines.base import Completion, GenerateCall, render_plain
from localjury.models.registry import ModelSpec


def judgment(verdict: int, reason: str = "because") -> str:
    return json.dumps({"reason": reason, "verdict": verdict})


class ScriptedEngine:
    """Answers each sample with ``respond(model, prompt, sample)``; logs what the runner asks."""

    name = "scripted"

    def __init__(
        self,
        spec: ModelSpec,
        respond: Callable[[str, str, int], str | tuple[str, bool] | Completion],
        log: list,
        calls: list | None = None,
    ) -> None:
        self.spec = spec
        self.respond = respond
        self.log = log
        self.calls = calls
        log.append(("load", spec.name))

    def format_prompt(self, messages):
        return render_plain(messages)

    def count_tokens(self, prompts):
        return [len(p.split()) for p in prompts]

    def generate(self, call: GenerateCall):
        self.log.append(("generate", self.spec.name, len(call.prompts), call.n))
        if self.calls is not None:
            asked = {"model": self.spec.name, "prompts": list(call.prompts), "n": call.n, "sampling": call.sampling}
            asked["schema"] = call.schema
            self.calls.append(asked | ({"quotes": list(call.quotes)} if call.quotes is not None else {}))
        out = []
        for p in call.prompts:
            samples = []
            for j in range(call.n):
                r = self.respond(self.spec.name, p, j)
                if isinstance(r, Completion):
                    samples.append(r)
                    continue
                text, finished = r if isinstance(r, tuple) else (r, True)
                samples.append(Completion(text=text, n_tokens=len(text) // 4, finished=finished))
            out.append(samples)
        if call.progress:
            call.progress(len(call.prompts))
        return out

    def close(self):
        self.log.append(("close", self.spec.name))


def factory(respond, log, calls=None):
    return lambda spec, files=None: ScriptedEngine(spec, respond, log, calls)


def spec(name: str, **kw) -> ModelSpec:
    return ModelSpec(name=name, path=f"/nonexistent/{name}", **kw)


def fake_registry(tmp_path: Path, name: str = "fake") -> Path:
    """A model folder that passes the pre-load checks (a config.json and an empty safetensors
    header) and a models.yaml naming it ``name``; returns the models.yaml."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    registry = tmp_path / "models.yaml"
    registry.write_text(f"models:\n  {name}:\n    path: {folder}\n")
    return registry


#: The criterion the CLI tests judge with :func:`run_args`.
CRITERION = "dated=The response must include a specific date or year."


def run_args(data, registry, out, *more) -> list:
    """``localjury run`` of ``data`` on :data:`CRITERION` with the model ``fake`` of
    ``registry`` (see :func:`fake_registry`), quiet, writing ``out``; ``more`` options after."""
    return ["run", data, "--criterion", CRITERION, "--models", "fake", "--registry", registry, "--quiet",
            "--out", out, *more]  # fmt: skip


def run_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """Run the CLI in this process; return (exit code, stdout, stderr)."""
    import sys

    import pytest

    from localjury.cli import main

    monkeypatch.setattr(sys, "argv", ["localjury", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (0 if code is None else code), captured.out, captured.err


#: The gold labels of :func:`scripted_bench`'s records.
GOLD = [1, 0, 1, 1, 0, 0, 1, 0]


def gold_of(prompt):
    return int(prompt.rsplit("<response>\n", 1)[1].split("\n", 1)[0].split()[-1])


def responder(model, prompt, j):
    """A agrees with gold on every record; B passes everything."""
    return judgment(gold_of(prompt) if model == "A" else 1)


def scripted_bench(tmp_path: Path) -> tuple[dict, Path]:
    """A bench run of two scripted judges over 8 labelled records (A agrees with ``GOLD``,
    B passes everything), strictness 3; returns its figures and its output folder."""
    import json

    from localjury.bench.run import run_bench

    data = tmp_path / "d.jsonl"
    rows = [
        {"id": f"r{i}", "response": f"answer {i} gold {g}", "gold": g, "pair": f"p{i // 2}"} for i, g in enumerate(GOLD)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    figures = run_bench(
        data,
        "jsonl",
        [spec("A"), spec("B")],
        out,
        metric='correct="The answer is right."',
        strictness=3,
        use_cache=False,
        engine_factory=factory(responder, []),
    )
    return figures, out


#: The criterion of :func:`scripted_results`.
DATED = ("dated", "The response must include a specific date or year.")


def dated_responder(model, prompt, j):
    """A passes the responses that hold a year; B passes every other sample (its votes split)."""
    response = prompt.rsplit("<response>\n", 1)[-1]
    if model == "A":
        return judgment(int(any(str(y) in response for y in range(1000, 2100))), f"sample {j} of A")
    return judgment(j % 2, f"sample {j} of B")


def scripted_results(tmp_path: Path, records: list[dict], respond=dated_responder) -> Path:
    """A run's results file, with its manifest beside it naming the data set (written to
    ``tmp_path/data.jsonl``): scripted judges A and B, strictness 3, on :data:`DATED`."""
    from localjury import AspectCritic, evaluate

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "run" / "r.jsonl"
    out.parent.mkdir()
    evaluate(
        str(data), [AspectCritic(*DATED)], [spec("A"), spec("B")], strictness=3, out=out, use_cache=False,
        engine_factory=factory(respond, []),
    )  # fmt: skip
    return out
