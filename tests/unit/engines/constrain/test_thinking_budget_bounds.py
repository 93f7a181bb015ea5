"""A thinking judge's output cut into its thinking and its answer in time linear in its length,
whatever tags its thinking holds: 10 MB of nested ``<think>`` tags, closed, never closed, or
with blank lines in them (where an unclosed block's answer is looked for)."""

import time

from localjury.engines.constrain.thinking_budget import answer_start, split_answer

MB = 1 << 20
OPEN, CLOSE = "<think>", "</think>"
DEPTH = 10 * MB // len(OPEN)
ANSWER = '{"reason": "a year", "verdict": 1}'


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    seconds = time.perf_counter() - started
    assert seconds < 120, f"took {seconds:.1f} s"  # a hang guard: linear is milliseconds, quadratic hours
    return out


def test_the_first_close_ends_ten_megabytes_of_nested_thinking():
    # A thinking grammar ends the block at its first close and constrains what follows to the
    # answer, so the answer is what follows the first close.
    thinking, answer = timed(split_answer, OPEN * DEPTH + "x" + CLOSE + "\n\n" + ANSWER)
    assert answer == ANSWER and thinking == OPEN * (DEPTH - 1) + "x"


def test_ten_megabytes_of_unclosed_thinking_have_no_answer_unless_one_follows_a_blank_line():
    thinking, answer = timed(split_answer, OPEN * DEPTH + "out of tokens")
    assert answer == "" and thinking.endswith("out of tokens") and len(thinking) == DEPTH * len(OPEN) - len(OPEN) + 13
    # vLLM ends a block at its budget without the close: the answer after the last blank line
    blank_lines = (OPEN + "\n\n") * (DEPTH // 2)
    thinking, answer = timed(split_answer, blank_lines + ANSWER)
    assert answer == ANSWER and thinking.endswith(OPEN)


def test_the_answers_first_token_is_found_in_linear_time():
    tokens = [OPEN] * (MB // 8) + ["x", CLOSE, ANSWER]
    assert timed(answer_start, tokens) == len(tokens) - 1
