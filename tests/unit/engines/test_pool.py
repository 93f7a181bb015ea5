"""Engines kept loaded across runs (localjury.engines.pool)."""

from localjury import AspectCritic, evaluate
from localjury.engines import pool
from localjury.models.registry import ModelSpec
from tests.fakes import ScriptedEngine, judgment


class Loaded:
    def __init__(self, log):
        self.log = log
        self.closed = False
        log.append("load")

    def close(self):
        self.closed = True
        self.log.append("close")


def spec(name="m", **kw):
    return ModelSpec(name=name, path="/nowhere", **kw)


def test_outside_a_pool_every_load_is_a_new_engine():
    log = []
    a = pool.kept(spec(), "transformers", lambda: Loaded(log))
    b = pool.kept(spec(), "transformers", lambda: Loaded(log))
    assert a is not b and log == ["load", "load"]


def test_inside_a_pool_one_load_per_entry_and_engine_closed_at_the_end():
    log = []
    with pool.keep_loaded():
        a = pool.kept(spec(), "transformers", lambda: Loaded(log))
        a.close()  # a run's close leaves it loaded
        b = pool.kept(spec(), "transformers", lambda: Loaded(log))
        assert log == ["load"] and not b.closed and a.log is b.log
        pool.kept(spec(), "llamacpp", lambda: Loaded(log))  # another engine: its own load
        pool.kept(spec(dtype="bfloat16"), "transformers", lambda: Loaded(log))  # another entry too
        assert log == ["load"] * 3
    assert log == ["load"] * 3 + ["close"] * 3


def test_a_pool_keeps_only_the_engines_it_names_and_can_be_suspended():
    log = []
    with pool.keep_loaded({"llamacpp"}):
        pool.kept(spec(), "vllm", lambda: Loaded(log))
        pool.kept(spec(), "vllm", lambda: Loaded(log))
        assert log == ["load", "load"]
        pool.kept(spec(), "llamacpp", lambda: Loaded(log))
        with pool.suspended():
            pool.kept(spec(), "llamacpp", lambda: Loaded(log))
        pool.kept(spec(), "llamacpp", lambda: Loaded(log))
    assert log == ["load"] * 4 + ["close"]


def test_two_runs_in_a_pool_load_the_model_once():
    log = []

    def load(s):  # what load_engine does with the engine's class
        return pool.kept(s, "transformers", lambda: ScriptedEngine(s, lambda m, p, j: judgment(1), log))

    with pool.keep_loaded():
        for seed in (1, 2):
            result = evaluate([{"response": "x"}], [AspectCritic("d", "d")], [spec("A")], seed=seed,
                              use_cache=False, engine_factory=load)  # fmt: skip
            assert result.results[0].score == 1.0
        assert [e for e in log if e[0] in ("load", "close")] == [("load", "A")]
    assert log[-1] == ("close", "A") and not pool._pools


def test_a_pool_keeps_its_engines_across_blocks_unless_a_keep_loaded_block_is_open():
    log = []
    kept = pool.Pool()
    for _ in range(2):
        with kept.active():
            pool.kept(spec(), "transformers", lambda: Loaded(log)).close()
    assert log == ["load"] and not pool._pools  # loaded once, and the pool is not left open
    kept.close()
    assert log == ["load", "close"]
    other = []
    with pool.keep_loaded():  # the open block keeps them, not the Pool
        with kept.active():
            pool.kept(spec(), "transformers", lambda: Loaded(other))
        kept.close()
        assert other == ["load"]
    assert other == ["load", "close"]
