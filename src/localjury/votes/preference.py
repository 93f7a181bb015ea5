"""Preference heads: which of two responses a judge's hidden states prefer, learned from a
user's preference pairs (a Bradley-Terry model on the judge's own states: a local reward model).

Each response of a pair is read as a pointwise record (its state at the judge prompt's last
token, see :mod:`localjury.votes.heads`); the head is a logistic regression with no intercept on
the difference of the two states, ``p(A better) = sigmoid(w . (x_A - x_B))``, fitted on every
pair in both orders. Swapping A and B negates the difference, so the head gives ``1 - p``:
position-free by construction, where a prompted pairwise judge must be asked in both orders.

Its weights are a :class:`~localjury.votes.heads.DecisionHead`'s (``preference: true``): an engine
decides each response by it as it decides a record by a yes/no head, its probability the response's
reward through a sigmoid, and :func:`preferred` makes the pair's preference of the two
(:mod:`localjury.metrics.preference_critic`).

Pure functions over arrays and labels (scikit-learn for the fits); no engine, no run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from localjury.errors import ConfigError
from localjury.types import Pooling
from localjury.votes.heads import DecisionHead, HeadBinding, fit_logistic, grouped_folds, head_of, linear

if TYPE_CHECKING:
    import numpy as np


def both_orders(a: np.ndarray, b: np.ndarray, a_better: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The training rows of pairs ``(a, b)``: ``a - b`` labeled ``a_better``, then ``b - a``
    labeled the other way (one row of each a pair, in that order)."""
    import numpy as np

    y = np.asarray(a_better)
    return np.concatenate([a - b, b - a]), np.concatenate([y, 1 - y])


def cross_validated_preference(
    a: np.ndarray,
    b: np.ndarray,
    a_better: Sequence[int],
    pairs: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    reduce: bool = False,
) -> list[float]:
    """Each pair's probability that ``a`` is the better response, from a head fitted on the
    pairs of the other folds (grouped by ``pairs``, both orders of each pair on one side), its C
    (with ``reduce``, its PCA) chosen inside them.

    Raises:
        ConfigError: Fewer than two pairs, or the pairs' ids are not unique.
    """
    import numpy as np
    from scipy.special import expit

    if len(set(pairs)) != len(pairs) or len(pairs) < 2:
        raise ConfigError("cross-validating a preference head needs two pairs or more, each once")
    y, ids = np.asarray(a_better), np.asarray(pairs)
    out = np.zeros(len(y))
    for train, test in grouped_folds(list(pairs), list(a_better), folds, seed):
        x, labels = both_orders(a[train], b[train], y[train])
        model, _ = fit_logistic(x, labels, np.concatenate([ids[train], ids[train]]), seed, reduce, odd=True)
        weights, _ = linear(model)
        out[test] = expit((a[test] - b[test]) @ weights)
    return [float(p) for p in out]


def fit_preference(
    a: np.ndarray,
    b: np.ndarray,
    a_better: Sequence[int],
    pairs: Sequence[str],
    layers: int | Sequence[int],
    binding: HeadBinding,
    seed: int = 0,
    pooling: Pooling = "last",
) -> DecisionHead:
    """The preference head fitted on every pair in both orders (C chosen by grouped
    cross-validation; for a head on several ``layers``, its PCA too; ``pooling``: where the
    states were read): weights over one response's state, and a bias that centres the rewards
    of the labeled responses on 0 (a constant no pair's preference sees: it keeps each
    response's sigmoid away from 0 and 1)."""
    import numpy as np

    blocks = [layers] if isinstance(layers, int) else list(layers)
    x, labels = both_orders(a, b, a_better)
    model, chose = fit_logistic(x, labels, np.concatenate([np.asarray(pairs)] * 2), seed, len(blocks) > 1, odd=True)
    weights, _ = linear(model)
    bias = -float(np.concatenate([a, b]).mean(axis=0) @ weights)
    return head_of(blocks, weights, bias, chose, binding, len(pairs), preference=True, pooling=pooling)


def preferred(p_a: float, p_b: float) -> float:
    """The probability that A is the better response, from a preference head's probability of
    each (its reward through a sigmoid): ``sigmoid(r_A - r_B)``; swapped, ``1 - p``."""
    from scipy.special import expit, logit

    def reward(p: float) -> float:  # a probability rounded to 0 or 1 kept finite
        return float(logit(min(max(p, 1e-15), 1 - 1e-15)))

    return float(expit(reward(p_a) - reward(p_b)))
