"""A judge profile of tens of thousands of labeled examples loads in time linear in their
number: the check that their ids are unique counts each id once, not each against all."""

import pytest
import yaml

from localjury.errors import ConfigError
from localjury.metrics.profile import JudgeProfile, load_profile

#: About the 71,000 small examples (2.6 MB of YAML, inside every YAML bound) that took over
#: 300 s to load while each id was counted among all the others.
EXAMPLES = 70_000


def profile_data(ids: list[str]) -> dict:
    return {
        "criterion": {"name": "dated", "definition": "The response must include a specific date or year."},
        "examples": [{"id": i, "response": f"In {1900 + n % 100}.", "gold": n % 2} for n, i in enumerate(ids)],
    }


def test_a_profile_of_seventy_thousand_examples_loads_and_still_refuses_a_repeated_id():
    ids = [f"ex-{n}" for n in range(EXAMPLES)]
    profile = JudgeProfile.model_validate(profile_data(ids))
    assert len(profile.examples) == EXAMPLES and profile.examples[-1].id == f"ex-{EXAMPLES - 1}"
    repeated = [*ids[:-1], "ex-12345"]  # the last id repeats one in the middle
    with pytest.raises(ValueError, match=r"example ids must be unique; repeated: ex-12345 \["):
        JudgeProfile.model_validate(profile_data(repeated))


def test_the_repeated_ids_are_named_sorted_at_most_five():
    ids = [f"ex-{n}" for n in range(EXAMPLES)] + [f"ex-{n}" for n in (9, 3, 7, 1, 5, 8)]
    with pytest.raises(ValueError, match=r"repeated: ex-1, ex-3, ex-5, ex-7, ex-8 \["):
        JudgeProfile.model_validate(profile_data(ids))


def test_a_profile_file_with_a_repeated_id_is_a_config_error_naming_the_file(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile_data([f"ex-{n}" for n in range(2_000)] + ["ex-7"])))
    with pytest.raises(ConfigError, match=r"judge profile .*profile\.yaml: examples: .*repeated: ex-7"):
        load_profile(path)
