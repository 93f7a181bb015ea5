"""A calibration file's fits looked up through an index built once: a run of thousands of
metrics against a file of thousands of fits asks each metric's fits in constant time, and the
index never outlives the fits it was built from (a merged copy, another file)."""

import time

import pytest

from localjury.errors import ConfigError
from localjury.votes.calibration import CalibrationFile, Calibrator, fits_by_metric


def fit(model: str, metric: str, threshold: float = 0.5) -> Calibrator:
    return Calibrator(model=model, metric=metric, source="p_pass", a=1.0, b=0.0, threshold=threshold,
                      records=10, positives=5)  # fmt: skip


def test_thousands_of_metrics_find_their_fits_among_thousands_promptly():
    metrics = [f"m{i}" for i in range(20_000)]
    cal = CalibrationFile(localjury_version="0", calibrators=[fit(model, m) for m in metrics for model in "AB"])
    started = time.perf_counter()
    cal.require(["A", "B"], metrics, "given")
    found = [fits_by_metric(cal.calibrators).get(m, {}) for m in metrics]
    seconds = time.perf_counter() - started
    assert all(sorted(f) == ["A", "B"] for f in found) and cal.lookup("B", "m7") == fit("B", "m7")
    assert seconds < 120, f"took {seconds:.1f} s"  # a hang guard: 0.2 s indexed; each against every fit (8e8) minutes


def test_a_missing_fit_is_still_named():
    cal = CalibrationFile(localjury_version="0", calibrators=[fit("A", "m1")])
    with pytest.raises(ConfigError, match=r"the calibration given has no fit for A/m2, B/m1, B/m2 \(it has: A/m1\)"):
        cal.require(["A", "B"], ["m1", "m2"], "given")


def test_the_index_follows_the_fits_and_leaves_equality_and_dumps_alone():
    cal = CalibrationFile(localjury_version="0", calibrators=[fit("A", "m1", 0.3), fit("A", "m1", 0.6)])
    assert cal.lookup("A", "m1").threshold == 0.6  # of two, the later: the one a run applies
    merged = cal.merged([fit("A", "m1", 0.9), fit("B", "m2")])
    assert merged.lookup("A", "m1").threshold == 0.9 and fits_by_metric(merged.calibrators)["m2"] == {
        "B": fit("B", "m2")
    }
    assert cal.lookup("B", "m2") is None  # the original keeps its own fits
    fresh = CalibrationFile.model_validate(cal.model_dump())
    assert fresh == cal and fresh.lookup("A", "m1") == cal.lookup("A", "m1")
    copied = cal.model_copy(update={"calibrators": [fit("C", "m3")]})
    assert copied.lookup("A", "m1") is None and copied.lookup("C", "m3") == fit("C", "m3")
