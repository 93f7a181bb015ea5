"""Decision heads: a judge's verdict read from its own hidden states by a linear head fitted on
a user's labels.

A judge prompt's hidden state at its last token, or averaged over its response's tokens, or at
the place where the judge, having written its reason, is about to write its verdict (the output
of one transformer block, or of several blocks one after another; see
:meth:`~localjury.engines.base.BatchEngine.hidden_states`) is a vector ``x``; a head is a
logistic regression on it, ``p = sigmoid(x . weights + bias)``, and the record passes when
``p >= 0.5``. A head on several blocks is first reduced (PCA, or the
regularisation alone, chosen by grouped cross-validation inside the training folds); every
step is linear, so the fitted head is plain weights over ``x`` all the same. ``localjury align``
fits one per layer and one on several blocks, and keeps one only where it beats the ways of
prompting the same judge by cross-validation (:mod:`localjury.bench.decision_ways`).

A head means something only for the hidden states it was fitted on: it is bound to the model's
weights file (its SHA-256, so another quantization is another model), the engine that read
them, the layer, the prompt format and the criterion's wording, and refused where any differs.
Its weights are plain numbers in the judge profile (YAML), never a pickle.

Pure functions over arrays and labels (scikit-learn for the fits); no engine, no run.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from localjury._hashing import content_hash
from localjury.errors import ConfigError
from localjury.models._shape import ModelShape
from localjury.types import Pooling

if TYPE_CHECKING:
    import numpy as np

#: The regularisation strengths tried (scikit-learn's C: inverse L2 strength), chosen inside each
#: training fold by a grouped cross-validation of its own.
C_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
#: The C of a head whose training rows are too few to choose one by cross-validation.
DEFAULT_C = 0.01
#: The reductions tried for a head on several blocks, chosen with C inside each training fold:
#: none (the regularisation alone), or PCA to so many components (those a fold's rows allow).
PCA_GRID = (None, 16, 32)
#: What a head's name says after its blocks when it reads the response's mean state.
OVER_RESPONSE = " over the response"
#: What a head's name says after its blocks when it reads the state where the judge, having written
#: its reason, is about to write its verdict.
AFTER_REASON = " after the reason"
#: Where the judge's answer reaches its verdict's value: the key and its colon (the schema's
#: ``verdict`` field, written after ``reason``).
VERDICT_KEY = re.compile(r'"verdict"\s*:\s*')


def reading_suffix(pooling: Pooling, after_reason: bool) -> str:
    """What a head's name says after its blocks of where it reads the states: nothing at the
    prompt's last token, :data:`OVER_RESPONSE` or :data:`AFTER_REASON`."""
    return AFTER_REASON if after_reason else OVER_RESPONSE if pooling == "response" else ""


def verdict_prefix(answer: str) -> str | None:
    """The judge's answer up to the place where it writes its verdict (``{"reason": "...",
    "verdict": ``): what an after-the-reason head reads the state at the end of, appended to the
    prompt. None where the answer has no verdict key (cut by its token budget)."""
    found = VERDICT_KEY.search(answer)
    return answer[: found.end()] if found else None


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
    """A linear head on the judge prompt's hidden state (at its last token, or averaged over its
    response's tokens): one block's output, or several blocks' one after another."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    layer: int = Field(ge=0)
    """The transformer block whose output it reads (0: the first block); the first of its blocks."""
    more_layers: list[int] = Field(default=[], exclude_if=lambda value: not value)
    """The blocks it reads after ``layer``, their outputs following ``layer``'s in the state
    (a head on several blocks); left out of the profile for a head on one block."""
    weights: list[float] = Field(min_length=1)
    """One weight per number of the state (the features' standardisation and reduction folded in)."""
    bias: float
    """The intercept."""
    threshold: float = Field(default=0.5, gt=0, lt=1)
    """A record passes when the head's probability is at or above this."""
    c: float = Field(gt=0)
    """The regularisation strength the fit chose (scikit-learn's C)."""
    pooling: Pooling = Field(default="last", exclude_if=lambda value: value == "last")
    """Where it reads the prompt's states: at its last token (``last``, left out of the profile),
    or their mean over the record's response's tokens (``response``)."""
    after_reason: bool = Field(default=False, exclude_if=lambda value: not value)
    """It reads the prompt followed by the judge's own answer up to its verdict (one greedy sample
    under the criterion's schema, :func:`verdict_prefix`): the state where the judge, having written
    its reason, is about to write its verdict. Left out of the profile where it does not."""
    reduction: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """How a head on several blocks reduced its state before the regression (``pca 16``: to 16
    principal components), folded into its weights; left out where none was."""
    binding: HeadBinding
    """What its hidden states came from."""
    labels: int = Field(ge=0)
    """Labeled records it was fitted on (a preference head: labeled pairs)."""
    preference: bool = Field(default=False, exclude_if=lambda value: not value)
    """A preference head (:mod:`localjury.votes.preference`): its probability is one response's
    reward through a sigmoid, and a pair's preference ``sigmoid(r_A - r_B)``; its threshold is not
    used. Left out for a yes/no head."""
    levels: int | None = Field(default=None, ge=2, exclude_if=lambda value: value is None)
    """A graded head (:mod:`localjury.votes.graded`): a rubric's number of levels N. ``state . weights
    + bias`` is its score on 1..N (a ridge regression's, kept within the scale), and its output that
    score normalised to 0..1, not a probability; its threshold is not used, and its ``c`` is 1 / the
    ridge's alpha. Left out for the other heads."""

    @property
    def layers(self) -> list[int]:
        """The blocks it reads, in the order of their outputs in its state."""
        return [self.layer, *self.more_layers]

    @property
    def blocks_name(self) -> str:
        """Its blocks for messages: ``layer 7``, or ``layers 3+7+27``, with where it reads them
        after (:func:`reading_suffix`: ``over the response``, ``after the reason``)."""
        blocks = f"layer {self.layer}" if not self.more_layers else "layers " + "+".join(str(i) for i in self.layers)
        return blocks + reading_suffix(self.pooling, self.after_reason)

    def sha256(self) -> str:
        """The head's hash: of its weights, layers and binding."""
        return content_hash(head=self.model_dump(mode="json"))

    def probability(self, state: Sequence[float] | np.ndarray) -> float:
        """The head's probability that the record meets the criterion, from its hidden state.

        Raises:
            ConfigError: The state has another size than the head's weights.
        """
        z = self._linear(state)
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))

    def output(self, state: Sequence[float] | np.ndarray) -> float:
        """What the head says of a hidden state, within 0..1: its probability (:meth:`probability`),
        or a graded head's score kept within its scale 1..N and normalised, ``(score - 1) / (N - 1)``
        (as a rubric normalises a model's score).

        Raises:
            ConfigError: The state has another size than the head's weights.
        """
        if self.levels is None:
            return self.probability(state)
        return (min(max(self._linear(state), 1.0), self.levels) - 1) / (self.levels - 1)

    def scale_score(self, output: float) -> float:
        """A graded head's :meth:`output` back on its scale 1..N."""
        return 1 + output * ((self.levels or 2) - 1)

    def answer(self, output: float) -> dict[str, int]:
        """The judge's answer the head's ``output`` stands for: ``{"score": the nearest level}``
        for a graded head, else ``{"verdict": 0 or 1}``."""
        if self.levels is None:
            return {"verdict": self.verdict(output)}
        return {"score": int(self.scale_score(output) + 0.5)}

    def _linear(self, state: Sequence[float] | np.ndarray) -> float:
        """The weights' dot product with ``state``, plus the bias."""
        if len(state) != len(self.weights):
            raise ConfigError(
                f"a hidden state of {len(state)} numbers for a head of {len(self.weights)} weights "
                f"({self.blocks_name} of {self.binding.model!r})"
            )
        return float(sum(w * float(x) for w, x in zip(self.weights, state, strict=True))) + self.bias

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
        blocks = len(self.layers)
        if shape.hidden_size is not None and shape.hidden_size * blocks != len(self.weights):
            per = f" ({blocks} blocks of {len(self.weights) // blocks:,})" if blocks > 1 else ""
            raise ConfigError(
                f"{head} has {len(self.weights):,} weights{per}, but model {model!r} has a hidden size of "
                f"{shape.hidden_size:,} ({shape.source}): {fix}"
            )
        if shape.blocks is not None and max(self.layers) >= shape.blocks:
            raise ConfigError(
                f"{head} reads layer {max(self.layers)}, but model {model!r} has {shape.blocks} blocks, 0 to "
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
                f"the decision head of {self.binding.model!r} ({self.blocks_name}) was fitted on other hidden "
                f"states than model {binding.model!r} gives here: {'; '.join(differs)}. Run `localjury align` "
                "again for this model, engine and criterion"
            )


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


def fit_logistic(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int, reduce: bool = False, odd: bool = False
) -> tuple[Any, dict[str, Any]]:
    """A standardised, L2-regularised logistic regression (balanced classes) with C chosen by a
    grouped cross-validation on these rows only; ``reduce``: also whether to reduce the features
    first by PCA, and to how many components (:data:`PCA_GRID`, those the inner training folds'
    rows allow). The fitted pipeline and what it chose (``C``, ``pca``: None or the components).
    Inner folds holding one label only are left out; with fewer than two left (few labels in
    large groups), C is :data:`DEFAULT_C` and nothing is reduced. ``odd``: features scaled but
    not centred and no intercept, so that ``-x`` gets ``1 - p`` (a preference head's differences)."""
    from joblib import Memory
    from sklearn import config_context
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    inner = [
        (train, test)
        for train, test in grouped_folds([str(g) for g in groups], y.tolist(), 3, seed)
        if len(set(y[train].tolist())) == 2 and len(set(y[test].tolist())) == 2
    ]
    logistic = LogisticRegression(class_weight="balanced", max_iter=5000, fit_intercept=not odd)
    pipe = make_pipeline(StandardScaler(with_mean=not odd), logistic)
    if len(inner) < 2:
        return pipe.set_params(logisticregression__C=DEFAULT_C).fit(x, y), {"C": DEFAULT_C, "pca": None}
    grid: list[dict[str, Any]] = [{"logisticregression__C": list(C_GRID)}]
    with tempfile.TemporaryDirectory(prefix="localjury-head-") as cache:
        if reduce:
            rows = min(len(train) for train, _ in inner)
            sizes = [n for n in PCA_GRID if n is not None and n < min(rows, x.shape[1])]
            # No reduction is PCA to every component: an L2-regularised regression's weights lie in
            # the span of its rows, so rotating onto them changes no prediction, and the regression
            # then fits on as many numbers as rows instead of thousands. A fold's scaling and PCA
            # are fitted once for all C (``memory``: a cache of this fit's own).
            steps = (StandardScaler(with_mean=not odd), PCA(svd_solver="full"), logistic)
            pipe = make_pipeline(*steps, memory=Memory(cache, verbose=0))
            grid = [{"pca__n_components": [n], "logisticregression__C": list(C_GRID)} for n in (None, *sizes)]
        search = GridSearchCV(pipe, grid, cv=inner, scoring="neg_log_loss")
        # The parameters are this function's own: scikit-learn's check of them at each of the
        # search's fits is overhead (on small folds, align's unit tests ran 13% faster without).
        with config_context(skip_parameter_validation=True):
            search.fit(x, y)
    chosen = search.best_params_.get("pca__n_components")
    pca = None if chosen is None else int(chosen)
    return search.best_estimator_, {"C": float(search.best_params_["logisticregression__C"]), "pca": pca}


def cross_validated(
    states: np.ndarray,
    gold: Sequence[int],
    groups: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    reduce: bool = False,
) -> list[float]:
    """Each record's probability from a head fitted on the other folds (:func:`grouped_folds`:
    no group in both), its C (and with ``reduce``, its PCA) chosen inside those folds."""
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
        model, _ = fit_logistic(states[train], y[train], g[train], seed, reduce)
        out[test] = model.predict_proba(states[test])[:, 1]
    return [float(p) for p in out]


def linear(model: Any) -> tuple[np.ndarray, float]:
    """A fitted pipeline (:func:`fit_logistic`) as the plain weights and bias of one logistic function of
    its input: the standardisation and any PCA folded in (each step is linear)."""
    import numpy as np

    scaler, *middle, logistic = (step for _, step in model.steps)
    w, b = logistic.coef_[0], float(np.sum(logistic.intercept_))
    if middle:  # a PCA: u = (z - mean) @ components.T, so w . u = z . a - mean . a
        a = middle[0].components_.T @ w
        w, b = a, b - float(np.dot(middle[0].mean_, a))
    weights = w / scaler.scale_
    return weights, b - float(np.dot(weights, scaler.mean_)) if scaler.with_mean else b


def fit_head(
    states: np.ndarray,
    gold: Sequence[int],
    groups: Sequence[str],
    layers: int | Sequence[int],
    binding: HeadBinding,
    seed: int = 0,
    pooling: Pooling = "last",
    after_reason: bool = False,
) -> DecisionHead:
    """The head fitted on all these records (C chosen by grouped cross-validation; for a head on
    several ``layers``, whose outputs follow one another in each row of ``states``, its PCA too),
    its standardisation and reduction folded into plain weights and a bias; ``pooling`` and
    ``after_reason``: where ``states`` were read."""
    import numpy as np

    blocks = [layers] if isinstance(layers, int) else list(layers)
    model, chose = fit_logistic(states, np.asarray(gold), np.asarray(groups), seed, reduce=len(blocks) > 1)
    weights, bias = linear(model)
    return head_of(blocks, weights, bias, chose, binding, len(gold), pooling=pooling, after_reason=after_reason)


def head_of(
    blocks: Sequence[int],
    weights: np.ndarray,
    bias: float,
    chose: dict[str, Any],
    binding: HeadBinding,
    labels: int,
    preference: bool = False,
    pooling: Pooling = "last",
    after_reason: bool = False,
    levels: int | None = None,
) -> DecisionHead:
    """A fitted head as the profile holds it: its blocks and where it reads them, plain weights and bias, and
    what :func:`fit_logistic` chose (C, and the PCA where one was); ``levels``: a graded head's scale."""
    return DecisionHead(
        layer=blocks[0],
        more_layers=list(blocks[1:]),
        pooling=pooling,
        after_reason=after_reason,
        weights=[float(w) for w in weights],
        bias=bias,
        c=chose["C"],
        reduction=f"pca {chose['pca']}" if chose["pca"] else None,
        binding=binding,
        labels=labels,
        preference=preference,
        levels=levels,
    )
