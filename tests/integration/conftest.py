import pytest


@pytest.fixture(scope="module", autouse=True)
def _engines_loaded_once(engines_loaded_once):
    """Every integration module shares its engines (tests/conftest.py's ``engines_loaded_once``)."""


@pytest.fixture(autouse=True)
def fresh_engines_where_marked(request):
    if request.node.get_closest_marker("fresh_engines") is None:
        yield
        return
    from localjury.engines.pool import suspended

    with suspended():
        yield
