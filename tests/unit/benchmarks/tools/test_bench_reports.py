"""benchmarks/tools/bench_reports.py: the bench folders' HTML reports are made again from their
figures, and are not committed (no model is run)."""

import shutil
import subprocess

import pytest

from tests import ROOT
from tests.unit.benchmarks.scripts import load

pytest.importorskip("matplotlib", reason="the bench extra draws the report's plots")

reports = load("tools/bench_reports.py")
RESULTS = ROOT / "benchmarks" / "results"


def test_it_writes_a_folders_report_from_its_metrics_the_same_bytes_each_time(tmp_path):
    committed = min(reports.bench_folders(), key=lambda f: (f / "metrics.json").stat().st_size)
    folder = tmp_path / "bench" / committed.name
    folder.mkdir(parents=True)
    shutil.copy(committed / "metrics.json", folder / "metrics.json")
    reports.main([str(folder)])
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "Judge benchmark" in page and "<svg" in page
    reports.main([str(folder)])
    assert (folder / "report.html").read_text(encoding="utf-8") == page


def test_it_finds_every_bench_folder_under_the_results_and_refuses_a_folder_without_figures(tmp_path):
    for name in ("b/one", "a", "c/d/two"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "metrics.json").write_text("{}")
    (tmp_path / "no-figures").mkdir()
    assert reports.bench_folders(tmp_path) == [tmp_path / "a", tmp_path / "b/one", tmp_path / "c/d/two"]
    with pytest.raises(SystemExit, match=r"no-figures holds no metrics.json: give a folder `localjury bench --out`"):
        reports.write_report(tmp_path / "no-figures")


def test_the_committed_bench_folders_keep_their_figures_and_leave_the_html_out():
    folders = reports.bench_folders()
    assert folders and all(f.is_relative_to(RESULTS) for f in folders)
    for folder in folders:
        assert {"metrics.json", "predictions.jsonl", "report.md"} <= {p.name for p in folder.iterdir()}, folder
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    pages = [str((f / "report.html").relative_to(ROOT)) for f in folders]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *pages], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == pages, "a bench folder's report.html is not in .gitignore"
    tracked = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=ROOT, capture_output=True, text=True)
    assert not [p for p in tracked.stdout.split() if p.endswith(".html")], "an HTML report is committed"
