"""RunConfig: every run setting in one frozen object, checked when built."""

import json
import pickle

import pytest
from pydantic import ValidationError

from localjury import AspectCritic, RayCluster, RunConfig, evaluate
from localjury.errors import ConfigError
from localjury.run.config import SamplingConfig
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")


def test_settings_by_name_land_in_their_group():
    a = spec("A")
    config = RunConfig.of(strictness=3, seed=7, use_cache=False, chunk_size=2, models=[a, "b"], engine="vllm")
    assert (config.sampling.strictness, config.sampling.seed) == (3, 7)
    assert config.store.use_cache is False and config.store.path() is None
    assert config.input.chunk_size == 2
    assert config.jury.models[0] is a and config.jury.engine == "vllm"
    assert config.replace(seed=8).sampling.seed == 8 and config.sampling.seed == 7  # a copy
    assert pickle.loads(pickle.dumps(config)) == config  # what a replica receives


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"strictness": 0}, "strictness must be from 1 to 64, got 0"),
        ({"tie_break": "coin"}, "unknown tie-break policy 'coin'; expected one of: fail, pass, abstain"),
        ({"temperature": -1.0}, "temperature must be a finite number >= 0, got -1.0"),
        ({"temperature": float("inf")}, "temperature must be a finite number >= 0, got inf"),
        ({"temperature": float("nan")}, "temperature must be a finite number >= 0, got nan"),
        ({"threshold": float("nan")}, r"threshold must be from 0 up to \(not including\) 1, got nan"),
        ({"seed": -1}, "seed must be from 0 to 4294967295, got -1"),
        ({"seed": 2**32}, "seed must be from 0 to 4294967295, got 4294967296"),
        ({"max_tokens": 0}, "max_tokens must be >= 1, got 0"),
        ({"chunk_size": 0}, "chunk_size must be >= 1, got 0"),
        ({"on_overflow": "wrap"}, "unknown overflow policy 'wrap'; expected one of: error, truncate"),
        ({"seed": "x"}, "invalid run setting"),
    ],
)
def test_invalid_settings_are_config_errors(settings, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.of(**settings)


def test_unknown_settings_and_changes_are_refused():
    with pytest.raises(TypeError, match="unknown run setting 'strictnes'"):
        RunConfig.of(strictnes=3)
    with pytest.raises(ValidationError):
        RunConfig(sampling=SamplingConfig(), bogus=1)  # extra="forbid"
    with pytest.raises(ValidationError):
        RunConfig().sampling.seed = 3  # frozen


def test_manifest_settings_keep_their_keys():
    settings = RunConfig.of(strictness=3, cluster=RayCluster(replicas=2)).manifest_settings("A")
    assert set(settings) == {
        "strictness", "tie_break", "temperature", "max_tokens", "adaptive", "extractor", "chunk_size",
        "on_overflow", "engine", "cluster", "scoring", "threshold", "calibration", "checklist",
    }  # fmt: skip
    assert RunConfig.of(with_reasons=True).manifest_settings("A")["with_reasons"] is True  # recorded where asked
    assert settings["cluster"] == {
        "backend": "ray",
        "address": None,
        "replicas": 2,
        "cpus_per_replica": None,
        "shard_size": None,
    }


def test_evaluate_takes_a_config_and_keywords_replace_its_settings():
    engine = factory(lambda m, p, j: judgment(1), [])
    config = RunConfig.of(strictness=1, use_cache=False)
    result = evaluate([{"response": "x"}], [DATED], [spec("A")], config=config, strictness=3, engine_factory=engine)
    assert result.summary.metrics[0].strictness == 3
    assert result.manifest.settings["strictness"] == 3


@pytest.mark.parametrize("field", ["a", "b", "threshold"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_calibration_file_with_a_number_that_is_not_finite_is_refused(tmp_path, field, value):
    fit = {"model": "A", "metric": "dated", "source": "p_pass", "a": 1.0, "b": 0.0, "threshold": 0.5}
    fit.update({"records": 4, "positives": 2, field: value})
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"localjury_version": "x", "calibrators": [fit]}))  # NaN, Infinity: as Python writes
    with pytest.raises(ConfigError, match=rf"is not a calibration file: calibrators\.0\.{field}: .*finite number"):
        RunConfig.of(calibration=path)


def test_evaluate_refuses_a_temperature_that_is_not_finite_before_anything_loads():
    log: list = []
    for value in (float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="temperature must be a finite number >= 0"):
            evaluate([{"response": "In 1999."}], [DATED], [spec("A")], temperature=value, use_cache=False,
                     engine_factory=factory(lambda m, p, j: judgment(1), log))  # fmt: skip
    assert log == []
