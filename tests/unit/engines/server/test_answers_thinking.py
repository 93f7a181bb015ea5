"""A server's thinking (``reasoning_content``) is bounded per sample as its answers are: a
sample keeps at most THINKING_MAX_CHARS characters of it, the head, and a note that says it was
cut and how much the server sent; never the hundreds of megabytes one answer may hold."""

from __future__ import annotations

import json

from localjury import AspectCritic, evaluate
from localjury.engines.server.answers import THINKING_MAX_CHARS, Answers, bounded_thinking
from localjury.engines.server.transport import Reply
from tests.fakes import judgment
from tests.unit.engines.server.test_server import RECORDS, FakeServer, served

ANSWERS = Answers("http://127.0.0.1:9/v1", "server", "served")


def reply(*thinkings: str | None, key: str = "reasoning_content") -> Reply:
    choices = [
        {"index": i, "finish_reason": "stop", "message": {"content": judgment(1), key: t}}
        for i, t in enumerate(thinkings)
    ]
    return Reply(200, {}, json.dumps({"choices": choices}).encode())


def test_a_thinking_within_the_bound_is_kept_whole():
    exact = "t" * THINKING_MAX_CHARS
    samples = ANSWERS.completions(reply("a short thought", exact, None), None, None)
    assert [s.thinking for s in samples] == ["a short thought", exact, None]
    assert bounded_thinking(None) is None


def test_a_thinking_over_the_bound_keeps_its_head_and_says_it_was_cut():
    head = "step. " * (THINKING_MAX_CHARS // 6 + 1)
    sent = head + "x" * (3 * THINKING_MAX_CHARS)  # ~4 MiB for one sample
    for key in ("reasoning_content", "reasoning"):  # the name newer vLLM servers give it
        (kept, short) = ANSWERS.completions(reply(sent, "brief", key=key), None, None)
        assert kept.thinking is not None and kept.thinking.startswith(head[:THINKING_MAX_CHARS])
        note = (
            f"\n[… thinking cut: the server sent {len(sent):,} characters; the first {THINKING_MAX_CHARS:,} are kept]"
        )
        assert kept.thinking == sent[:THINKING_MAX_CHARS] + note
        assert (kept.text, short.thinking) == (judgment(1), "brief")  # the answer is untouched


def test_a_run_stores_and_reports_the_cut_thinking():
    sent = "why " * THINKING_MAX_CHARS  # 4 MiB of thinking in each sample

    def chat(body):
        choices = [
            {"index": j, "finish_reason": "stop", "message": {"content": judgment(1), "reasoning_content": sent}}
            for j in range(body.get("n", 1))
        ]
        return 200, {"choices": choices}

    with FakeServer(chat=chat) as fake:
        result = evaluate(RECORDS[:1], [AspectCritic("dated", "d")], [served(fake.url)], strictness=2)
    (model,) = result.results[0].models
    assert model.votes == [1, 1]
    assert [len(t) for t in model.thinking] == [len(bounded_thinking(sent))] * 2
    assert all(
        t.endswith(f"sent {len(sent):,} characters; the first {THINKING_MAX_CHARS:,} are kept]") for t in model.thinking
    )
