"""The manual reads as a guide: short prose paragraphs, and code the reader sees whole."""

import re
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A line that is no prose: a table row, a heading, a list item, a comment, a quote, an admonition, a link target.
NOT_PROSE = re.compile(r"^(\||#|[-*+] |\d+\. |<!--|>|!!!|\?\?\?|\[[^\]]*\]:)")


def lines(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, line, kind) of each line of ``text`` and of a blank one after the last (it
    ends whatever stretch is open): kind is ``fence`` for a line that opens or closes a code
    block, ``code`` inside one, ``text`` elsewhere."""
    fence = False
    for number, line in enumerate([*text.split("\n"), ""], 1):
        if line.strip().startswith("```"):
            fence = not fence
            yield number, line, "fence"
        else:
            yield number, line, "code" if fence else "text"


def runs(text: str, counts: Callable[[str], bool]) -> list[tuple[int, int]]:
    """(first line number, words) of each run of consecutive lines outside code blocks for
    which ``counts`` holds."""
    out: list[tuple[int, int]] = []
    start, words = None, 0
    for number, line, kind in lines(text):
        if kind == "text" and line.strip() and counts(line):
            if start is None:
                start, words = number, 0
            words += len(line.split())
        elif start is not None:
            out.append((start, words))
            start = None
    return out


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(first line number, words) of each prose paragraph: consecutive unindented lines outside
    code blocks that are no table, heading, list item, comment, quote or admonition."""
    return runs(text, lambda line: not line.startswith((" ", "\t")) and not NOT_PROSE.match(line))


def blocks(text: str) -> list[tuple[int, int]]:
    """(first line number, words) of each block of consecutive non-blank lines outside code
    blocks, tables, headings and comments: a paragraph, or a list whose items no blank line
    parts, as a reader sees one mass of text."""
    return runs(text, lambda line: not line.lstrip().startswith(("|", "#", "<!--")))


LIST_ITEM = re.compile(r"^\s*([-*+] |\d+\. )")


def list_items(text: str) -> list[tuple[int, int]]:
    """(first line number, words) of each list item outside code blocks: its first line and the
    indented lines that continue it."""
    out: list[tuple[int, int]] = []
    start, words = None, 0
    for number, line, kind in lines(text):
        item = kind == "text" and LIST_ITEM.match(line)
        goes_on = kind == "text" and start is not None and line.startswith((" ", "\t")) and line.strip() != ""
        if start is not None and (item or not goes_on):
            out.append((start, words))
            start = None
        if item:
            start, words = number, len(line.split()) - 1
        elif goes_on and start is not None:
            words += len(line.split())
    return out


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a code block."""
    return [(number, line) for number, line, kind in lines(text) if kind == "code"]


def over_120_words(counter: Callable[[str], list[tuple[int, int]]]) -> list[str]:
    """``page:line (words)`` of each stretch ``counter`` finds in the pages over 120 words."""
    return [
        f"{page.name}:{line} ({words} words)"
        for page in PAGES
        for line, words in counter(page.read_text())
        if words > 120
    ]


def test_no_prose_paragraph_runs_over_120_words_and_most_are_short():
    long = over_120_words(paragraphs)
    assert not long, f"paragraphs over 120 words (split them, or move details to a list or table): {long}"
    assert statistics.median(words for page in PAGES for _, words in paragraphs(page.read_text())) < 60


def wide_code(page: Path) -> list[str]:
    """``page:line (length)`` of each code line of ``page`` over 88 columns."""
    name = str(page.relative_to(ROOT))
    return [f"{name}:{n} ({len(line)})" for n, line in code_lines(page.read_text()) if len(line) > 88]


def test_the_code_of_the_readme_and_every_page_fits_88_columns():
    wide = [where for page in PAGES for where in wide_code(page)]
    assert not wide, f"code lines over 88 columns, cut at the page's width: {wide}"


def test_no_block_of_text_runs_over_120_words():
    long = over_120_words(blocks)
    assert not long, f"blocks of text over 120 words (split them, or part a list's items with blank lines): {long}"


def test_the_block_counter_joins_a_tight_list_and_parts_a_loose_one():
    text = "Intro.\n- one two\n- three\n\n- four\n\n| a | table |\n\n```\nnot text\n```\n"
    assert blocks(text) == [(1, 6), (5, 2)]


def test_no_list_item_runs_over_120_words():
    long = over_120_words(list_items)
    assert not long, f"list items over 120 words (split them into items): {long}"


def test_the_item_counter_sees_each_item_and_its_continuation():
    text = "Prose.\n\n- one two\n  three four\n- five\n\n1. six seven\n\n```\n- not an item\n```\n"
    assert list_items(text) == [(3, 4), (5, 1), (7, 2)]


def test_the_counter_sees_prose_not_code_lists_or_tables():
    text = "One two three.\nFour five.\n\n- a list item\n  of words\n\n| a | table |\n\n```\nnot prose\n```\nSix.\n"
    assert paragraphs(text) == [(1, 5), (12, 1)]
    assert code_lines(text) == [(10, "not prose")]


#: What belongs in the project's history, not in a user's manual: an id of a commit (7 to 12
#: hex digits with a letter and a digit, outside URLs and hashes the page explains), one of
#: our issues (an upstream project's issue may be cited by its project), a figure said to be
#: from before.
HISTORY = {
    "a commit id": re.compile(r"(?<![\w/.:-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}(?![\w/-]|\.\w|\.\.)"),
    "an issue of ours": re.compile(r"(?<!llama\.cpp )(?<!vLLM )(?<!Outlines )\b[Ii]ssues? #?\d+"),
    "history": re.compile(r"\b(earlier (measured|run|figure)s?|previously measured|(stored|written) before this)\b"),
}


def test_the_pages_give_the_current_answer_not_the_history():
    found = [
        f"{page.relative_to(ROOT)}:{n}: {kind} ({m.group(0)!r})"
        for page in PAGES
        for n, line in enumerate(page.read_text().split("\n"), 1)
        for kind, pattern in HISTORY.items()
        for m in pattern.finditer(line)
    ]
    assert not found, f"history in the manual (say what holds now): {found}"


def test_the_history_check_sees_commits_issues_and_earlier_figures():
    caught = [
        "timed at 4278a49 on a Zen 4",
        "pytest took 17 min 30 s at 60a777e.",
        "Against the goals of issue 29",
        "An earlier run gave x1.54",
    ]
    passed = [
        "llama.cpp issue 20824, closed without a fix",
        "sha256 3f2a9c1b7d... of the file",  # not 7-12 digits alone
        "https://example.org/a1b2c3d4e5",
        "records 1000000 and 2500000",
    ]
    assert all(any(p.search(text) for p in HISTORY.values()) for text in caught)
    assert not any(p.search(text) for p in HISTORY.values() for text in passed)


#: Pages that open otherwise: the API reference (generated from the docstrings), and the hubs
#: whose first sections are the examples (the home page's two commands, Start here's paths).
NO_OPENING_EXAMPLE = {"api.md", "index.md", "start-here.md"}


def test_each_page_opens_with_what_it_is_for_then_a_runnable_example():
    lacking = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name in NO_OPENING_EXAMPLE:
            continue
        lines = page.read_text().split("\n")
        opening = lines[: next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))]
        prose = next((line for line in opening[1:] if line.strip()), "")
        if not opening[0].startswith("# ") or not prose or NOT_PROSE.match(prose) or "```" not in "\n".join(opening):
            lacking.append(page.name)
    assert not lacking, f"pages that do not open with a sentence of what they are for and an example: {lacking}"
