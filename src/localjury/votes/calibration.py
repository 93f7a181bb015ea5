"""Calibration of a judge's graded score against user labels: Platt scaling and a decision
threshold per (model, metric), fitted by ``localjury calibrate`` and applied by a run.

A model's graded score of a record is its confidence (the mean ``p_pass`` of its valid
samples) where its engine gives verdict probabilities, else the share of its valid votes that
pass. Calibration maps it through Platt scaling, ``sigmoid(a * logit(score) + b)``, and passes
the record when the calibrated score is above the fitted threshold. Pure functions over
scores and labels, and the file that carries the fits; no engine, no run.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from localjury._files import read_bounded
from localjury.errors import ConfigError

#: Scores are clipped this far from 0 and 1 before the logit.
EPS = 1e-4
#: The largest calibration file read: a fit is a few hundred bytes plus its held-out figures
#: (a few KiB), so 16 MiB holds thousands; a larger file is refused unread.
MAX_CALIBRATION_BYTES = 16 << 20
Source = Literal["p_pass", "vote_share"]


def logit(score: float) -> float:
    """The log-odds of a score in [0, 1], clipped to [EPS, 1 - EPS] first."""
    p = min(max(score, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def fit_platt(scores: Sequence[float], gold: Sequence[int]) -> tuple[float, float]:
    """Platt scaling: (a, b) of a logistic regression of the gold label on ``logit(score)``
    (scikit-learn, L2 with C=1: a few dozen labels do not send it to infinity). With one
    class only, the identity (1, 0).

    Monotone: calibration may rescale a judge's scores, never reverse them. Where the fit's
    slope is negative (the judge ranks the records against the labels), the slope is 0 and
    the calibrated score is the labels' base rate for every record: a judge that is wrong
    the other way round is not turned into a good one by inverting it."""
    from sklearn.linear_model import LogisticRegression

    if len(set(gold)) < 2:
        return 1.0, 0.0
    x = [[logit(s)] for s in scores]
    fit = LogisticRegression(C=1.0).fit(x, list(gold))
    a, b = float(fit.coef_[0][0]), float(fit.intercept_[0])
    if a < 0:
        return 0.0, logit(sum(gold) / len(gold))
    return a, b


def _balanced_accuracy(scores: Sequence[float], gold: Sequence[int], threshold: float) -> float:
    pos = [s for s, g in zip(scores, gold, strict=True) if g == 1]
    neg = [s for s, g in zip(scores, gold, strict=True) if g == 0]
    tpr = sum(s > threshold for s in pos) / len(pos) if pos else 0.0
    tnr = sum(s <= threshold for s in neg) / len(neg) if neg else 0.0
    return (tpr + tnr) / 2 if pos and neg else (tpr if pos else tnr)


def fit_threshold(scores: Sequence[float], gold: Sequence[int]) -> float:
    """The threshold (a record passes when its score is above it) with the best balanced
    accuracy on these records; among equals, the one nearest 0.5. Candidates: 0.5 and the
    midpoints between consecutive distinct scores (and just below the lowest)."""
    distinct = sorted(set(scores))
    candidates = {0.5, max(0.0, distinct[0] - EPS)} if distinct else {0.5}
    candidates.update((a + b) / 2 for a, b in itertools.pairwise(distinct))
    return max(sorted(candidates), key=lambda t: (_balanced_accuracy(scores, gold, t), -abs(t - 0.5)))


class Calibrator(BaseModel):
    """One (model, metric)'s fit: Platt scaling of its graded score, then a threshold."""

    # A file's NaN or Infinity (Python's json reads both) is refused: every score would be NaN.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str
    """The model's name in models.yaml."""
    metric: str
    """The metric's name."""
    source: Source
    """What was calibrated: ``p_pass`` (the model's confidence) or ``vote_share``."""
    a: float
    """Platt slope on ``logit(score)``."""
    b: float
    """Platt intercept."""
    threshold: float
    """A record passes when its calibrated score is above this."""
    records: int
    """Labelled records the fit used."""
    positives: int
    """Of them, labelled 1."""
    labels: str = ""
    """The labelled records it was fitted on."""
    labels_sha256: str = ""
    """Their file's SHA-256."""
    held_out: dict[str, Any] = {}
    """k-fold figures of the fit: each record scored by a fit on the other folds."""

    def calibrated(self, score: float) -> float:
        """The calibrated score: ``sigmoid(a * logit(score) + b)``."""
        return _sigmoid(self.a * logit(score) + self.b)

    def verdict(self, score: float) -> int:
        """1 when the calibrated score is above the threshold, else 0."""
        return int(self.calibrated(score) > self.threshold)


def fit(model: str, metric: str, source: Source, scores: Sequence[float], gold: Sequence[int]) -> Calibrator:
    """Fit Platt scaling, then the threshold on the calibrated scores, on these records."""
    a, b = fit_platt(scores, gold)
    calibrated = [_sigmoid(a * logit(s) + b) for s in scores]
    return Calibrator(
        model=model,
        metric=metric,
        source=source,
        a=a,
        b=b,
        threshold=fit_threshold(calibrated, gold),
        records=len(gold),
        positives=sum(gold),
    )


def cross_validated(
    scores: Sequence[float], gold: Sequence[int], *, folds: int = 5, seed: int = 0
) -> tuple[int, list[tuple[float, float]]]:
    """The folds used, and each record's (calibrated score, threshold) from a fit on the other
    folds (stratified k-fold, at most ``folds`` and at most the smaller class's count): never
    a record scored by a fit that saw it.

    Raises:
        ConfigError: Fewer than 2 records of either label.
    """
    from sklearn.model_selection import StratifiedKFold

    smaller = min(sum(gold), len(gold) - sum(gold))
    if smaller < 2:
        raise ConfigError(
            f"calibration needs at least 2 labelled records of each label (gold 1 and gold 0), got "
            f"{sum(gold)} and {len(gold) - sum(gold)}"
        )
    out = [(0.0, 0.0)] * len(gold)
    k = min(folds, smaller)
    splits = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for train, test in splits.split([[s] for s in scores], list(gold)):
        c = fit("", "", "p_pass", [scores[i] for i in train], [gold[i] for i in train])
        for i in test:
            out[i] = (c.calibrated(scores[i]), c.threshold)
    return k, out


#: The last list of fits :func:`fits_by_metric` indexed, and its index.
_indexed: list[tuple[list[Calibrator], dict[str, dict[str, Calibrator]]]] = []


def fits_by_metric(calibrators: list[Calibrator]) -> dict[str, dict[str, Calibrator]]:
    """Fits by metric, then by model (of two for one model and metric, the later), indexed once
    for a list however often it is asked: a run asks for each of its metrics' fits, and a file
    may hold thousands. The index is shared: read it, never change it.
    """
    cached = _indexed[0] if _indexed else None
    if cached is None or cached[0] is not calibrators:  # the list is held, so its id is never reused
        index: dict[str, dict[str, Calibrator]] = {}
        for c in calibrators:
            index.setdefault(c.metric, {})[c.model] = c
        cached = (calibrators, index)
        _indexed[:] = [cached]
    return cached[1]


class CalibrationFile(BaseModel):
    """What ``localjury calibrate`` writes and ``run --calibration`` reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    """The file format's version."""
    localjury_version: str
    """The localjury that fitted it."""
    calibrators: list[Calibrator]
    """One fit per (model, metric)."""

    def merged(self, fits: Iterable[Calibrator]) -> CalibrationFile:
        """This file with ``fits`` added, replacing its fits of the same (model, metric)."""
        new = list(fits)
        keys = {(c.model, c.metric) for c in new}
        kept = [c for c in self.calibrators if (c.model, c.metric) not in keys]
        return self.model_copy(update={"calibrators": kept + new})

    def lookup(self, model: str, metric: str) -> Calibrator | None:
        """The fit for this model and metric (of two, the later: the one a run applies), or None."""
        return fits_by_metric(self.calibrators).get(metric, {}).get(model)

    def require(self, models: Iterable[str], metrics: Iterable[str], where: str) -> None:
        """Refuse a run this file does not cover, before any model loads.

        Raises:
            ConfigError: A (model, metric) of the run has no fit, naming what does.
        """
        metrics = list(metrics)
        missing = [(m, n) for m in models for n in metrics if self.lookup(m, n) is None]
        if missing:
            have = ", ".join(f"{c.model}/{c.metric}" for c in self.calibrators) or "none"
            raise ConfigError(
                f"the calibration {where} has no fit for {', '.join(f'{m}/{n}' for m, n in missing)} "
                f"(it has: {have}); fit one with `localjury calibrate`, or run without it"
            )


def read_calibration(path: str | Path) -> CalibrationFile:
    """A calibration file's fits (:func:`load_calibration`, without its hash)."""
    return load_calibration(path)[0]


def load_calibration(path: str | Path) -> tuple[CalibrationFile, str]:
    """Read a calibration file; return it and its SHA-256.

    Raises:
        ConfigError: The file is missing, not a regular file, unreadable (a read error
            included), over :data:`MAX_CALIBRATION_BYTES`, or not a calibration file.
    """
    data = read_bounded(Path(path), "calibration file", "give the path of the JSON file", MAX_CALIBRATION_BYTES)
    try:
        return CalibrationFile.model_validate_json(data), hashlib.sha256(data).hexdigest()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path} is not a calibration file: {where}: {first['msg']}") from None
