"""Decision heads: a judge's verdict read from its own hidden states by a linear head fitted on
a user's labels, with no text sampled.

A judge prompt's hidden state at its last token (the output of one transformer block; see
:meth:`~localjury.engines.base.BatchEngine.hidden_states`) is a vector ``x``; a head is a
logistic regression on it, ``p = sigmoid(x . weights + bias)``, and the record passes when
``p >= 0.5``. ``localjury align`` fits one per layer and keeps one only where it beats the
ways of prompting the same judge by cross-validation (:mod:`localjury.bench.decision_ways`).

A head means something only for the hidden states it was fitted on: it is bound to the model's
weights file (its SHA-256, so another quantization is another model), the engine that read
them, the layer, the prompt format and the criterion's wording, and refused where any differs.
Its weights are plain numbers in the judge profile (YAML), never a pickle.

Pure functions over arrays and labels (scikit-learn for the fits); no engine, no run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from localjury._hashing import content_hash
from localjury.errors import ConfigError
from localjury.models._shape import ModelShape

if TYPE_CHECKING:
    import numpy as np

#: The regularisation strengths tried (scikit-learn's C: inverse L2 strength), chosen inside each
#: training fold by a grouped cross-validation of its own.
C_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
#: The C of a head whose training rows are too few to choose one by cross-validation.
DEFAULT_C = 0.01


class HeadBinding(BaseModel):
    """What a head's hidden states came from: a head is used only where all of it is the same."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The model's name in models.yaml (informative: the file's hash decides)."""
    weights_sha256: str
    """The SHA-256 of the model's weights file (the GGUF; a folder's weight files together)."""
    engine: str
    """The engine that read the hidden states (another engine computes other numbers)."""
    prompt_format: str
    """The SHA-256 of the model's prompt format (its chat template, or the plain format)."""
    criterion: str
    """The criterion's wording the prompts carried."""

    def differences(self, other: HeadBinding) -> list[str]:
        """What differs between this binding and ``other``, field by field (the model's name aside)."""
        return [
            f"{name} {getattr(self, name)[:16]!r} (the head's) vs {getattr(other, name)[:16]!r}"
            for name in ("weights_sha256", "engine", "prompt_format", "criterion")
            if getattr(self, name) != getattr(other, name)
        ]


class DecisionHead(BaseModel):
    """A linear head on one layer's hidden state at the judge prompt's last token."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    layer: int = Field(ge=0)
    """The transformer block whose output it reads (0: the first block)."""
    weights: list[float] = Field(min_length=1)
    """One weight per dimension of the hidden state (the features' standardisation folded in)."""
    bias: float
    """The intercept."""
    threshold: float = Field(default=0.5, gt=0, lt=1)
    """A record passes when the head's probability is at or above this."""
    c: float = Field(gt=0)
    """The regularisation strength the fit chose (scikit-learn's C)."""
    binding: HeadBinding
    """What its hidden states came from."""
    labels: int = Field(ge=0)
    """Labeled records it was fitted on."""

    def sha256(self) -> str:
        """The head's hash: of its weights, layer and binding."""
        return content_hash(head=self.model_dump(mode="json"))

    def probability(self, state: Sequence[float] | np.ndarray) -> float:
        """The head's probability that the record meets the criterion, from its hidden state.

        Raises:
            ConfigError: The state has another size than the head's weights.
        """
        if len(state) != len(self.weights):
            raise ConfigError(
                f"a hidden state of {len(state)} numbers for a head of {len(self.weights)} weights "
                f"(layer {self.layer} of {self.binding.model!r})"
            )
        z = float(sum(w * float(x) for w, x in zip(self.weights, state, strict=True))) + self.bias
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))

    def check_shape(self, shape: ModelShape, *, model: str, source: str) -> None:
        """Refuse a model whose hidden states this head cannot read: another hidden size than
        its weights' count, or fewer blocks than its layer needs.

        Args:
            shape: The model's shape, read from its config.
            model: The model's name.
            source: Where the head comes from (its judge profile), for the message.

        Raises:
            ConfigError: Naming the head's file, its weight count or layer, the model, and the
                model's hidden size or blocks.
        """
        head = f"the decision head of {self.binding.model!r} in {source}"
        fix = "it was fitted on another model's hidden states: run `localjury align` again for this model"
        if shape.hidden_size is not None and shape.hidden_size != len(self.weights):
            raise ConfigError(
                f"{head} has {len(self.weights):,} weights, but model {model!r} has a hidden size of "
                f"{shape.hidden_size:,} ({shape.source}): {fix}"
            )
        if shape.blocks is not None and self.layer >= shape.blocks:
            raise ConfigError(
                f"{head} reads layer {self.layer}, but model {model!r} has {shape.blocks} blocks, 0 to "
                f"{shape.blocks - 1} ({shape.source}): {fix}"
            )

    def verdict(self, probability: float) -> int:
        """1 where ``probability`` is at or above the threshold, else 0."""
        return int(probability >= self.threshold)

    def check(self, binding: HeadBinding) -> None:
        """Refuse hidden states that come from elsewhere than the head's.

        Raises:
            ConfigError: Naming what differs (the model's file, engine, prompt format or criterion).
        """
        differs = self.binding.differences(binding)
        if differs:
            raise ConfigError(
                f"the decision head of {self.binding.model!r} (layer {self.layer}) was fitted on other hidden "
                f"states than model {binding.model!r} gives here: {'; '.join(differs)}. Run `localjury align` "
                "again for this model, engine and criterion"
            )


class DecisionWay(BaseModel):
    """One way of deciding, as cross-validation scored it against the labels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    way: str
    """``zero-shot votes``, ``zero-shot calibrated``, ``aligned votes``, ``aligned calibrated``, ``head layer N``
    or ``length only`` (a head on the record's lengths: a baseline, never the winner)."""
    kappa: float | None
    """Cohen's kappa of its verdicts against the labels (null: undefined, one label only)."""
    kappa_ci: list[float] | None = None
    """Its 95% bootstrap interval."""
    auroc: float | None = None
    """The AUROC of its probability (a head's), where it has one."""
    records: int = Field(ge=0)
    """Records it decided (a prompting way's abstentions left out)."""


class DecisionReport(BaseModel):
    """How one model is best asked the criterion, by cross-validation on the labels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str
    """The model's name in models.yaml."""
    ways: list[DecisionWay] = []
    """Every way measured, best kappa first."""
    winner: str
    """The way the profile uses for this model."""
    why: str
    """Why it won, or why no head was kept."""
    artifact: str | None = None
    """A warning where the record's length alone could explain the best head (``align``'s
    length-only baseline)."""


def grouped_folds(groups: Sequence[str], gold: Sequence[int], folds: int, seed: int) -> list[tuple[Any, Any]]:
    """(train, test) index arrays of ``folds`` folds (fewer where there are fewer groups; none for
    one group) in which no group is on both sides, the labels spread as evenly as the groups
    allow (scikit-learn's ``StratifiedGroupKFold``)."""
    import numpy as np
    from sklearn.model_selection import StratifiedGroupKFold

    units = len(set(groups))
    if units < 2:
        return []  # one group: nothing to hold out
    k = min(folds, units)
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    y = np.asarray(gold)
    return list(splitter.split(np.zeros((len(y), 1)), y, np.asarray(groups)))


def _fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> tuple[Any, float]:
    """A standardised, L2-regularised logistic regression (balanced classes) with C chosen by a
    grouped cross-validation on these rows only; the fitted pipeline and its C. Inner folds
    holding one label only are left out; with fewer than two left (few labels in large groups),
    C is :data:`DEFAULT_C`."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    inner = [
        (train, test)
        for train, test in grouped_folds([str(g) for g in groups], y.tolist(), 3, seed)
        if len(set(y[train].tolist())) == 2 and len(set(y[test].tolist())) == 2
    ]
    pipe = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=5000))
    if len(inner) < 2:
        return pipe.set_params(logisticregression__C=DEFAULT_C).fit(x, y), DEFAULT_C
    search = GridSearchCV(pipe, {"logisticregression__C": list(C_GRID)}, cv=inner, scoring="neg_log_loss")
    search.fit(x, y)
    return search.best_estimator_, float(search.best_params_["logisticregression__C"])


def cross_validated(
    states: np.ndarray, gold: Sequence[int], groups: Sequence[str], *, folds: int = 5, seed: int = 0
) -> list[float]:
    """Each record's probability from a head fitted on the other folds (:func:`grouped_folds`:
    no group in both), its C chosen inside those folds."""
    import numpy as np

    y, g = np.asarray(gold), np.asarray(groups)
    out = np.zeros(len(y))
    split = grouped_folds(list(groups), list(gold), folds, seed)
    if not split:
        raise ConfigError("cross-validating a head needs labeled records of two groups or more")
    for train, test in split:
        if len(set(y[train].tolist())) < 2:  # one label to learn from: its share is all a head could say
            out[test] = float(y[train].mean())
            continue
        model, _ = _fit(states[train], y[train], g[train], seed)
        out[test] = model.predict_proba(states[test])[:, 1]
    return [float(p) for p in out]


def fit_head(
    states: np.ndarray, gold: Sequence[int], groups: Sequence[str], layer: int, binding: HeadBinding, seed: int = 0
) -> DecisionHead:
    """The head fitted on all these records (C chosen by grouped cross-validation), its
    standardisation folded into plain weights and a bias."""
    import numpy as np

    model, c = _fit(states, np.asarray(gold), np.asarray(groups), seed)
    scaler, logistic = model.named_steps["standardscaler"], model.named_steps["logisticregression"]
    weights = logistic.coef_[0] / scaler.scale_
    bias = float(logistic.intercept_[0] - float(np.dot(weights, scaler.mean_)))
    return DecisionHead(
        layer=layer, weights=[float(w) for w in weights], bias=bias, c=c, binding=binding, labels=len(gold)
    )
