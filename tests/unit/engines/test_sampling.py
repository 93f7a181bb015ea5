"""The engine's sampler: greedy, temperature, top-p, and seeded reproducibility."""

import pytest

torch = pytest.importorskip("torch")

from localjury.engines._local import batch_seed  # noqa: E402
from localjury.engines._local import sample as _sample  # noqa: E402
from localjury.engines.base import Sampling  # noqa: E402


def draw(logits, temperature, top_p, seed, times=200):
    rngs = [torch.Generator().manual_seed(seed * 1000 + r) for r in range(logits.shape[0])]
    return [_sample(logits, Sampling(temperature, top_p, 10, seed), rngs).tolist() for _ in range(times)]


def test_temperature_zero_is_greedy():
    logits = torch.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, float("-inf")]])
    assert _sample(logits, Sampling(0.0, 1.0, 10, 0), [torch.Generator()] * 2).tolist() == [1, 0]


def test_masked_tokens_are_never_drawn():
    logits = torch.tensor([[0.0, float("-inf"), 0.0, float("-inf")]])
    assert {row[0] for row in draw(logits, 1.0, 1.0, seed=1)} == {0, 2}


def test_top_p_keeps_the_smallest_set_reaching_p():
    # probabilities ~ [0.70, 0.20, 0.10]: top_p 0.5 keeps only the first, 0.8 the first two
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]]))
    assert {row[0] for row in draw(logits, 1.0, 0.5, seed=2)} == {0}
    assert {row[0] for row in draw(logits, 1.0, 0.8, seed=3)} == {0, 1}


def test_sampling_follows_the_distribution():
    logits = torch.log(torch.tensor([[0.25, 0.75]]))
    ones = sum(row[0] for row in draw(logits, 1.0, 1.0, seed=4, times=2000))
    assert 1350 < ones < 1650  # 1500 expected; the bounds are over 7 standard deviations out


def test_same_generator_seed_same_draws():
    logits = torch.zeros((4, 50))
    assert draw(logits, 1.0, 1.0, seed=5, times=5) == draw(logits, 1.0, 1.0, seed=5, times=5)
    assert draw(logits, 1.0, 1.0, seed=5, times=5) != draw(logits, 1.0, 1.0, seed=6, times=5)


def test_batch_seed_is_stable_and_input_sensitive():
    assert batch_seed(0, 3, "a") == batch_seed(0, 3, "a")
    assert len({batch_seed(0, 3, "a"), batch_seed(1, 3, "a"), batch_seed(0, 3, "b"), batch_seed(0, 1, "a")}) == 4
    assert 0 <= batch_seed(2**40, "x") < 2**63


def test_a_rows_draws_do_not_depend_on_the_other_rows_of_its_batch():
    logits = torch.zeros((3, 50))
    sampling = Sampling(1.0, 1.0, 10, 0)

    def rows(seeds):
        rngs = [torch.Generator().manual_seed(s) for s in seeds]
        return [_sample(logits[: len(seeds)], sampling, rngs).tolist() for _ in range(5)]

    alone = [r[0] for r in rows([7])]
    assert [r[1] for r in rows([1, 7, 2])] == alone and [r[0] for r in rows([7, 3])] == alone
