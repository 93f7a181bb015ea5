"""The bench's Markdown report writes names, paths and descriptions from outside as text: rendered
(markdown-it-py, CommonMark with tables and strikethrough), they make no HTML element, link or
emphasis, every table row keeps its cells, and each reads as it was given."""

import json
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

pytest.importorskip("sklearn")

from localjury.bench._markdown import md_text
from localjury.bench.run import run_bench
from tests.fakes import factory, judgment, spec

HOSTILE = [
    "<script>alert(1)</script>",
    "a | b || c",
    "*bold* __strong__ `code` ~~gone~~",
    "[link](javascript:alert(1)) ![img](x.png) <https://example.com>",
    "# heading",
    "1. a list",
    "- a bullet",
    "> a quote",
    "x\ny\r\nz\u2028<img src=x onerror=alert(1)>",
    "&lt;script&gt; &amp; \\| \\",
    "===",
    "  indented    code",
]


class Page(HTMLParser):
    """The elements of a rendered page, its tables' rows (cells per row) and its text."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.rows: list[list[int]] = []  # per table, cells of each row
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.rows.append([])
        elif tag == "tr":
            self.rows[-1].append(0)
        elif tag in ("td", "th"):
            self.rows[-1][-1] += 1

    def handle_data(self, data):
        self.text.append(data)


def render(md: str) -> Page:
    return Page(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md))


def words(text: str) -> str:
    return " ".join(text.split())


def report(tmp_path, names, metric, data_name="d.jsonl"):
    tmp_path.mkdir()
    data = tmp_path / data_name
    rows = [{"id": f"r{i}", "response": f"answer {i}", "gold": i % 2} for i in range(4)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    run_bench(
        data,
        "jsonl",
        [spec(n) for n in names],
        out,
        metric=metric,
        use_cache=False,
        engine_factory=factory(lambda m, p, j: judgment(1), []),
    )
    return (out / "report.md").read_text()


def test_hostile_names_paths_and_descriptions_render_as_text(tmp_path):
    benign = render(report(tmp_path / "benign", ["A", "B"], 'correct="The answer is right."'))
    names = [f"m{i} {h}" for i, h in enumerate(HOSTILE)]
    description = " ".join(HOSTILE)
    md = report(tmp_path / "hostile", names, f'correct="{description}"', data_name="d<b>|*x*[y](z).jsonl")
    page = render(md)
    assert page.tags == benign.tags  # no script, img, a, em, code, del, h2 or list beyond the report's own
    assert "script" not in page.tags and "a" not in page.tags
    for table, benign_table in zip(page.rows, benign.rows, strict=True):
        assert len(table) == len(benign_table) + len(HOSTILE) - 2  # one row per model, as given
        assert set(table) == {table[0]}  # every row as many cells as the header
    text = words("".join(page.text))
    for name in names:
        assert words(name) in text  # each name reads as given (line breaks as spaces)
    assert words(description) in text and "d<b>|*x*[y](z).jsonl" in text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&|\\`*_[]()!#~-+=.1 \n\ta")), max_size=30))
def test_any_text_is_one_table_cell_that_reads_as_itself(text):
    page = render(f"| name | n |\n|---|---|\n| {md_text(text)} | 1 |\n")
    assert page.tags == {"table", "thead", "tbody", "tr", "th", "td"}
    assert page.rows == [[2, 2]]
    assert words("".join(page.text)) == words(f"name n {text} 1")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&|\\`*_[]()!#~-+=.1 \n\ta")), max_size=30).filter(str.strip))
def test_any_text_is_one_list_item_that_reads_as_itself(text):
    page = render(f"- **model {md_text(text)}**: {md_text(text)}\n- {md_text(text)}: end\n")
    assert page.tags == {"ul", "li", "strong"}
    t = text.strip()  # as a list item drops it
    assert words("".join(page.text)) == words(f"model {t}: {t} {t}: end")


def test_the_report_shows_each_samples_thinking_collapsed_the_misjudged_records_first():
    from localjury.bench.thinking_examples import examples, html_section, markdown_section

    def row(rid, gold, prediction, thinking):
        cell = {"votes": [prediction] * 2, "reasons": ["r <b>", None], "prediction": prediction, "thinking": thinking}
        return {"record_id": rid, "gold": gold, "models": {"A": cell}}

    rows = [row("right", 1, 1, ["It has a date.", None]), row("wrong", 0, 1, ["<i>1989</i> is a year.", "x"])]
    shown = examples([*rows, {"record_id": "none", "gold": 1, "models": {"A": {"votes": [1]}}}])
    assert [ex["record_id"] for ex in shown] == ["wrong", "right"]  # a record without thinking is not shown
    page = html_section(shown)
    assert page.count("<details class='thinking'>") == 4 and "&lt;i&gt;1989&lt;/i&gt; is a year." in page
    assert "<summary>thinking (4 words)</summary>" in page and "r &lt;b&gt;" in page
    assert "- **wrong**: gold 0, predicted 1" in "\n".join(markdown_section(shown))
