"""A pytest plugin: judge your system's outputs inside its tests.

Installed with localjury (entry point ``pytest11``); a test asks for the ``judge`` fixture::

    def test_the_answer_gives_a_year(judge):
        response = my_system("When did the Berlin Wall fall?")
        assert judge.passes(response, "The response must include a specific date or year.")

A failing assertion shows the jury's verdicts and reasons. The engines load once per pytest
session (:func:`localjury.engines.pool.keep_loaded`), and judgments go through the judgment
store as any run's do, so a rerun of unchanged tests generates nothing. Settings, on the
command line or in the ``[pytest]`` ini section: ``--localjury-models a,b`` /
``localjury_models`` (default: the default judge), ``--localjury-strictness K`` /
``localjury_strictness`` (default 3), ``--localjury-seed S`` / ``localjury_seed`` (default 0),
``--localjury-registry FILE`` / ``localjury_registry``, ``--localjury-cache FILE`` /
``localjury_cache`` (the judgment store).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from localjury.votes.voting import passes

if TYPE_CHECKING:
    from localjury.results.record_result import RecordResult

#: The setting names: (command-line option, ini key, help).
_SETTINGS = (
    ("--localjury-models", "localjury_models", "the jury, names from models.yaml, comma-separated"),
    ("--localjury-strictness", "localjury_strictness", "samples per model for each judgment (default 3)"),
    ("--localjury-seed", "localjury_seed", "the seed (default 0): the same tests judge the same way"),
    ("--localjury-registry", "localjury_registry", "the models.yaml to read"),
    ("--localjury-cache", "localjury_cache", "the judgment store (default: localjury's own, under $LOCALJURY_HOME)"),
)


@dataclass(frozen=True)
class Judgment:
    """The jury's result for one response and criterion: true when it passes (a strict
    majority of the jury's scores), its repr the verdicts and reasons, so that a failing
    ``assert judge.passes(...)`` says why."""

    criterion: str
    result: RecordResult

    def __bool__(self) -> bool:
        return bool(passes(self.result.score))

    @property
    def score(self) -> float | None:
        """The jury's score (0 to 1); None when every model abstained."""
        return self.result.score

    @property
    def reasons(self) -> list[str]:
        """Every reason the jury gave, model by model."""
        return [reason for m in self.result.models for reason in m.reasons if reason]

    def _head(self) -> str:
        if self.result.score is None:
            return "NO VERDICT (every model abstained)"
        return f"{'PASS' if self else 'FAIL'} (score {self.result.score:g})"

    def __repr__(self) -> str:
        # One line: pytest writes it after "assert" (escaping newlines, and cutting it to 240
        # characters unless -vv); the whole explanation is the report's "localjury" section.
        return f"<{self._head()}: {' | '.join(self.reasons) or 'no reason'}>"

    def explain(self) -> str:
        """The criterion, each model's verdict and votes, and every reason, one per line."""
        lines = [f"{self._head()} on the criterion {self.criterion!r}"]
        for m in self.result.models:
            lines.append(f"  {m.model}: verdict {m.verdict}, votes {m.votes}, {m.abstentions} abstention(s)")
            lines.extend(f"    - {reason}" for reason in m.reasons if reason)
        return "\n".join(lines)


class Judge:
    """Judges one response at a time with a local jury (what the ``judge`` fixture gives).

    Args:
        models: The jury: names from models.yaml (default: the default judge).
        strictness: Samples per model for each judgment.
        seed: The run seed: the same call judges the same way on the same machine.
        registry: The models.yaml to read.
        settings: Further :func:`localjury.evaluate` settings (e.g. ``cache=``, ``use_cache=``).
    """

    def __init__(
        self,
        models: Sequence[str] | None = None,
        *,
        strictness: int = 3,
        seed: int = 0,
        registry: str | None = None,
        **settings: Any,
    ) -> None:
        self.models = list(models) if models else None
        self.settings = {"strictness": strictness, "seed": seed, "registry": registry, **settings}
        self.made: list[Judgment] = []
        """The judgments made since the plugin last reported them (one test's)."""

    def passes(
        self,
        response: str,
        criterion: str,
        *,
        user_input: str | None = None,
        contexts: Sequence[str] | None = None,
        reference: str | None = None,
    ) -> Judgment:
        """Judge ``response`` on ``criterion`` (a yes/no statement, or a predefined aspect's
        name such as ``"conciseness"``); the result is true when the jury passes it.

        Raises:
            AssertionError: The record could not be judged (e.g. too long for every judge):
                the message is its error, so the test fails saying why.
        """
        from localjury.metrics import PREDEFINED_ASPECTS, AspectCritic
        from localjury.run import evaluate

        if criterion in PREDEFINED_ASPECTS:
            metric = AspectCritic.predefined(criterion)
        else:
            metric = AspectCritic("criterion", criterion)
        record: dict[str, Any] = {"id": "pytest", "response": response, "user_input": user_input}
        record["reference"] = reference
        if contexts is not None:
            record["retrieved_contexts"] = list(contexts)
        run = evaluate([record], [metric], self.models, **self.settings)
        (result,) = run.results
        if result.error is not None:
            raise AssertionError(f"localjury could not judge the response: {result.error}")
        judgment = Judgment(metric.definition, result)
        self.made.append(judgment)
        return judgment


_JUDGE = pytest.StashKey["Judge"]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that judged something gets a "localjury" section in its report: every
    judgment it made, with each model's votes and reasons."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    judge = item.config.stash.get(_JUDGE, None)
    if judge is None or report.when != "call":
        return
    if report.failed and judge.made:
        report.sections.append(("localjury judgments", "\n\n".join(j.explain() for j in judge.made)))
    judge.made.clear()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's settings, on the command line and in the ini file."""
    group = parser.getgroup("localjury", "judging with local models (the judge fixture)")
    for flag, key, text in _SETTINGS:
        group.addoption(flag, dest=key, default=None, help=text)
        parser.addini(key, text)


def _setting(config: pytest.Config, key: str) -> str | None:
    value = config.getoption(key) or config.getini(key)
    return (str(value).strip() or None) if value else None


def _number(config: pytest.Config, key: str, default: int) -> int:
    value = _setting(config, key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"{key} must be a whole number, got {value!r}") from None


@pytest.fixture(scope="session")
def judge(pytestconfig: pytest.Config) -> Iterator[Judge]:
    """A :class:`Judge` whose engines load once for the whole pytest session."""
    from localjury.engines.pool import keep_loaded

    models = _setting(pytestconfig, "localjury_models")
    with keep_loaded():
        judge = pytestconfig.stash[_JUDGE] = Judge(
            [m.strip() for m in models.split(",") if m.strip()] if models else None,
            strictness=_number(pytestconfig, "localjury_strictness", 3),
            seed=_number(pytestconfig, "localjury_seed", 0),
            registry=_setting(pytestconfig, "localjury_registry"),
            **({"cache": cache} if (cache := _setting(pytestconfig, "localjury_cache")) else {}),
        )
        yield judge
