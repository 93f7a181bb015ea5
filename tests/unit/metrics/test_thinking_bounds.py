"""Thinking blocks built to be slow or large: 10 MB of nested ``<think>`` tags, closed or never
closed, a block of megabytes, and many tags after the close. Each is cut in time linear in its
length (a regular expression that backtracks, or a search restarted at each tag, would take
minutes), and the answer is what a reader sees after the thinking."""

import time

import pytest

from localjury.errors import RecordError
from localjury.metrics.thinking import answers_only, split_thinking
from localjury.records.record import Record

MB = 1 << 20
OPEN, CLOSE = "<think>", "</think>"
DEPTH = 10 * MB // len(OPEN)  # 10 MB of opening tags


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def assert_prompt(seconds: float) -> None:
    # A hang guard, not a speed figure: linear work on 10-20 MB takes well under a second here,
    # quadratic work hours; a loaded machine is far from either.
    assert seconds < 120, f"took {seconds:.1f} s"


def test_ten_megabytes_of_nested_blocks_closed_as_deep_leave_the_answer_alone():
    text = OPEN * DEPTH + "deep thought" + CLOSE * DEPTH + "\n\nIn 1989."
    split, seconds = timed(split_thinking, text)
    assert_prompt(seconds)
    assert (split.answer, split.closed) == ("In 1989.", True) and text[split.start :] == "In 1989."
    assert split.thinking == OPEN * (DEPTH - 1) + "deep thought" + CLOSE * (DEPTH - 1)


def test_closes_beyond_ten_megabytes_of_nested_openings_are_the_answers():
    text = OPEN * DEPTH + "x" + CLOSE * (DEPTH + 2) + "y"
    split, seconds = timed(split_thinking, text)
    assert_prompt(seconds)
    assert (split.answer, split.closed) == (CLOSE * 2 + "y", True) and text[split.start :] == split.answer


def test_ten_megabytes_of_nested_blocks_never_closed_are_all_thinking():
    text = OPEN * DEPTH + "still thinking"
    split, seconds = timed(split_thinking, text)
    assert_prompt(seconds)
    assert (split.answer, split.closed, split.start) == ("", False, len(text))
    assert len(split.thinking) == len(text) - len(OPEN)
    record = Record(id="r", user_input="When?", response=text)
    with pytest.raises(RecordError, match="its <think> block is never closed") as caught:
        answers_only(record, "dated")
    assert caught.value.field == "response"


@pytest.mark.parametrize(
    ("text", "thinking", "answer"),
    [
        # more openings than closes: the first close ends it, the rest is the answer
        (OPEN + OPEN + "a" + CLOSE + "In 1989.", OPEN + "a", "In 1989."),
        # a nested block's own closes, blank space between, are not words of the answer
        (OPEN + OPEN + "a" + CLOSE + " \n" + CLOSE + "\nIn 1989.", OPEN + "a" + CLOSE + " \n", "In 1989."),
        # a thinking that mentions the tag: its close is the first, and the answer is whole
        (OPEN + "the <think> tag" + CLOSE + "In 1989.", "the <think> tag", "In 1989."),
        # closes beyond the nested openings are the answer's, as any text after the block
        (OPEN + OPEN + "a" + CLOSE + CLOSE + CLOSE + "x", OPEN + "a" + CLOSE, CLOSE + "x"),
        # words between the closes: the answer starts with them, closes and all
        (OPEN + OPEN + "a" + CLOSE + "b" + CLOSE + "c", OPEN + "a", "b" + CLOSE + "c"),
    ],
)
def test_nested_blocks_end_where_a_reader_sees_their_end(text, thinking, answer):
    split = split_thinking(text)
    assert (split.thinking, split.answer, split.closed) == (thinking, answer, True)
    assert text[split.start :] == answer


def test_a_block_of_megabytes_and_megabytes_of_tags_after_it_take_linear_time():
    thinking = "word " * (4 * MB)  # 20 MB of thinking
    text = OPEN + thinking + CLOSE + "In 1989. " + (CLOSE + OPEN) * MB
    split, seconds = timed(split_thinking, text)
    assert_prompt(seconds)
    assert split.thinking == thinking and split.answer.startswith("In 1989. </think><think>")
    blank = " \n\t" * (3 * MB)  # blank space is skipped once, not at each tag
    split, seconds = timed(split_thinking, blank + OPEN + "x" + CLOSE + blank + "In 1989.")
    assert_prompt(seconds)
    assert (split.thinking, split.answer) == ("x", "In 1989.")


def test_every_response_of_a_record_and_every_turn_is_cut_alike():
    nested = OPEN * 1000 + "x" + CLOSE * 1000
    record = Record(
        id="r",
        messages=[
            {"role": "user", "content": "When?"},
            {"role": "assistant", "content": nested + "In 1989."},
        ],
        response_a=nested + "A.",
        response_b="B.",
    )
    cut = answers_only(record, "m")
    assert (cut.response_a, cut.response_b) == ("A.", "B.")
    assert [m.content for m in cut.messages] == ["When?", "In 1989."]
