"""The manual reads as a guide: short prose paragraphs, and code the reader sees whole."""

import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A line that is no prose: a table row, a heading, a list item, a comment, a quote, an admonition, a link target.
NOT_PROSE = re.compile(r"^(\||#|[-*+] |\d+\. |<!--|>|!!!|\?\?\?|\[[^\]]*\]:)")


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(first line number, words) of each prose paragraph: consecutive unindented lines outside
    code blocks that are no table, heading, list item, comment, quote or admonition."""
    out: list[tuple[int, int]] = []
    start, words, fence = None, 0, False
    for number, line in enumerate([*text.split("\n"), ""], 1):
        if line.strip().startswith("```"):
            fence = not fence
            prose = False
        else:
            prose = not fence and bool(line.strip()) and not line.startswith((" ", "\t")) and not NOT_PROSE.match(line)
        if prose:
            if start is None:
                start, words = number, 0
            words += len(line.split())
        elif start is not None:
            out.append((start, words))
            start = None
    return out


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a code block."""
    out, fence = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith("```"):
            fence = not fence
        elif fence:
            out.append((number, line))
    return out


def test_no_prose_paragraph_runs_over_120_words_and_most_are_short():
    counted = [(page.name, line, words) for page in PAGES for line, words in paragraphs(page.read_text())]
    long = [f"{name}:{line} ({words} words)" for name, line, words in counted if words > 120]
    assert not long, f"paragraphs over 120 words (split them, or move details to a list or table): {long}"
    assert statistics.median(words for _, _, words in counted) < 60


#: Code lines that cannot be cut at 88 columns, by (page, how the line starts), each with why.
WIDE_CODE = {
    # One line of a JSONL file is one record: the conversation it shows cut over lines would be
    # no JSONL line (tests/docs/test_examples_run.py writes the block as the `conv.jsonl` that
    # the page's command reads).
    ("docs/records.md", '{"id": "c1", "messages": ['),
}


def wide_code(page: Path) -> list[str]:
    """``page:line (length)`` of each code line of ``page`` over 88 columns, but those of ``WIDE_CODE``."""
    name = str(page.relative_to(ROOT))
    return [
        f"{name}:{n} ({len(line)})"
        for n, line in code_lines(page.read_text())
        if len(line) > 88 and not any(name == p and line.startswith(start) for p, start in WIDE_CODE)
    ]


def test_the_code_of_the_readme_and_every_page_fits_88_columns():
    wide = [where for page in PAGES for where in wide_code(page)]
    assert not wide, f"code lines over 88 columns, cut at the page's width: {wide}"
    for name, start in WIDE_CODE:  # an exception the page no longer needs is dropped
        lines = [line for _, line in code_lines((ROOT / name).read_text()) if line.startswith(start)]
        assert any(len(line) > 88 for line in lines), f"{name}: no wide code line starts {start!r}"


def test_the_counter_sees_prose_not_code_lists_or_tables():
    text = "One two three.\nFour five.\n\n- a list item\n  of words\n\n| a | table |\n\n```\nnot prose\n```\nSix.\n"
    assert paragraphs(text) == [(1, 5), (12, 1)]
    assert code_lines(text) == [(10, "not prose")]
