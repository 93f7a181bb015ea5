"""A labels file's rows are read once, where the file is read: a row whose id, pair or record
cannot be read is that row's error, named by its file and line, while every other row is judged
and written (bench, calibrate); align, whose examples are every row, refuses it before any model
loads; a line nested too deep, or over the bound, is a clear error naming the file and line."""

import json

import pytest

pytest.importorskip("sklearn")

from localjury.bench.align import build_profile
from localjury.bench.calibrate import calibrate
from localjury.bench.formats import load
from localjury.bench.run import run_bench
from localjury.bench.sampling import check_unique_ids
from localjury.errors import ConfigError
from localjury.metrics import AspectCritic
from tests.fakes import GOLD, factory, judgment, responder, spec

#: An id the record parser refuses, as a JSON value: the tester's list and its neighbours.
BAD_IDS = ["", "   ", 1.5, True, False, {"an": "object"}, [1], "\ud800", "a\udfffb"]
BAD_PAIRS = [1.5, True, {"an": "object"}, ["p"], "p\ud800"]


def write(path, rows):
    # ensure_ascii: a lone surrogate is written as its \\ud800 escape, which JSON reads back as one.
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def rows_with(tmp_path, field, values):
    """Labeled rows, one good row (gold from :data:`GOLD`) before each of ``values``, given as
    ``field`` of a row of its own: the good rows are the odd lines, the bad ones the even."""
    rows = []
    for i, value in enumerate(values):
        for j, bad in ((2 * i, False), (2 * i + 1, True)):
            g = GOLD[j % len(GOLD)]
            row = {"id": f"r{j}", "response": f"answer {j} gold {g}", "gold": g}
            rows.append(row | ({field: value} if bad else {}))
    return write(tmp_path / "labels.jsonl", rows)


def bench(data, out, log=None):
    engines = factory(responder, [] if log is None else log)
    return run_bench(data, "jsonl", [spec("A"), spec("B")], out, metric='correct="The answer is right."',
                     strictness=1, use_cache=False, engine_factory=engines)  # fmt: skip


def predictions(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("field", "values"), [("id", BAD_IDS), ("pair", BAD_PAIRS)])
def test_a_label_row_whose_id_or_pair_cannot_be_read_is_its_error_and_the_bench_is_written(tmp_path, field, values):
    data = rows_with(tmp_path, field, values)
    figures = bench(data, tmp_path / "out")
    rows = predictions(tmp_path / "out")
    good, bad = rows[0::2], rows[1::2]
    assert [r["record_id"] for r in good] == [f"r{2 * i}" for i in range(len(values))]
    assert all(r["error"] is None and r["models"]["A"]["prediction"] == r["gold"] for r in good)
    for line, row in enumerate(bad, start=1):
        assert row["record_id"] == f"line-{2 * line}" and row["pair"] is None
        assert f"({data} line {2 * line}), field {field!r}" in row["error"]
        assert row["models"]["A"]["prediction"] is None
    assert figures["records"] == len(rows) and figures["record_errors"] == len(values)
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["record_errors"] == len(values)
    # Every file is valid UTF-8: nothing of a lone surrogate reached one unescaped.
    for name in ("predictions.jsonl", "metrics.json", "report.md", "report.html"):
        (tmp_path / "out" / name).read_bytes().decode("utf-8")


@pytest.mark.parametrize("pair", [7, "p7"])
def test_a_pair_given_as_an_integer_or_a_string_is_its_text(tmp_path, pair):
    (item,) = load(write(tmp_path / "l.jsonl", [{"response": "x", "gold": 1, "pair": pair}]), "jsonl")
    assert (item.pair, item.id, item.error) == ("7" if pair == 7 else "p7", "line-1", None)


def test_a_record_field_the_parser_refuses_is_its_error_and_an_aligned_bench_is_written(tmp_path):
    """Found when the file is read, so that nothing after the judging (the aligned judge's
    demonstrations) meets a record it cannot read."""
    data = rows_with(tmp_path, "response", ["half a \ud800 surrogate", "\udfff", "b\ud801"])
    figures = run_bench(data, "jsonl", [spec("A")], tmp_path / "out", metric='correct="The answer is right."',
                        strictness=1, aligned=2, shots=2, use_cache=False,
                        engine_factory=factory(responder, []))  # fmt: skip
    rows = predictions(tmp_path / "out")
    for line, row in enumerate(rows, start=1):
        if line % 2:
            assert row["error"] is None and row["demonstrations"]
        else:
            assert row["record_id"] == f"r{line - 1}" and f"({data} line {line}), field 'response'" in row["error"]
            assert row["demonstrations"] == []
    assert figures["record_errors"] == 3 and "A (aligned)" in figures["judges"]


def test_calibrate_fits_on_the_other_rows_of_a_file_with_an_unreadable_id(tmp_path):
    rows = [{"id": f"r{i}", "response": f"answer {i}", "gold": int(i % 2 == 0)} for i in range(12)]
    rows[5]["id"] = 1.5
    data = write(tmp_path / "labels.jsonl", rows)

    def respond(model, prompt, j):
        return judgment(int(int(prompt.rsplit("answer ", 1)[1].split("\n", 1)[0]) % 2 == 0))

    result = calibrate(data, [spec("A")], tmp_path / "cal.json", metric='good="The answer is good."', strictness=1,
                       folds=2, use_cache=False, engine_factory=factory(respond, []))  # fmt: skip
    (cal,) = result.calibrators
    assert cal.records == 11 and cal.held_out["abstained"] == 1 and (tmp_path / "cal.json").is_file()


def test_align_refuses_an_unreadable_row_naming_its_line_before_any_model_loads(tmp_path):
    data = rows_with(tmp_path, "id", [{"an": "object"}])
    log: list = []
    refused = rf"record 'line-2' \({data} line 2\), field 'id': must be a string or an integer, got dict; fix or remove"
    with pytest.raises(ConfigError, match=refused):
        build_profile(data, [spec("A")], tmp_path / "p.yaml", judge=AspectCritic("right", "The answer is right."),
                      use_cache=False, engine_factory=factory(responder, log))  # fmt: skip
    assert log == [] and not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("line", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000])
@pytest.mark.parametrize("reader", ["bench", "calibrate", "align"])
def test_a_label_line_nested_too_deeply_is_an_error_naming_its_file_and_line(tmp_path, line, reader):
    data = write(tmp_path / "labels.jsonl", [{"id": "a", "response": "x", "gold": 1}, line])
    log: list = []
    engines = factory(responder, log)
    with pytest.raises(ConfigError, match=rf"{data}, line 2: nested too deeply to read"):
        if reader == "bench":
            bench(data, tmp_path / "out", log)
        elif reader == "calibrate":
            calibrate(data, [spec("A")], tmp_path / "c.json", metric='g="x"', use_cache=False, engine_factory=engines)
        else:
            build_profile(data, [spec("A")], tmp_path / "p.yaml", judge=AspectCritic("g", "x"), use_cache=False,
                          engine_factory=engines)  # fmt: skip
    assert log == []


def test_a_label_line_that_is_not_json_names_its_file_line_and_column(tmp_path):
    data = write(tmp_path / "labels.jsonl", [{"response": "x", "gold": 1}, '{"response": "y", "gold": 1'])
    with pytest.raises(ConfigError, match=rf"{data}, line 2: not valid JSON \(Expecting ',' delimiter at column 28\)"):
        load(data, "jsonl")


def test_repeated_ids_name_both_lines(tmp_path):
    data = write(tmp_path / "labels.jsonl", [{"id": "x", "response": "a", "gold": 1}, {"response": "b", "gold": 0},
                                             {"id": "x", "response": "c", "gold": 0}])  # fmt: skip
    with pytest.raises(ConfigError, match=rf"two records have the id 'x' \({data} line 1 and {data} line 3\)"):
        check_unique_ids(load(data, "jsonl"), data)
