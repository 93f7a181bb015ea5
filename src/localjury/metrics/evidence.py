"""The answer with quoted evidence: up to three quotes of the judged text before the reason and
the verdict, each an exact span of it on the engines that constrain quotes
(:mod:`localjury.engines.constrain.quotes`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from localjury.metrics.base import REASON_MAX_CHARS
from localjury.types import QUOTE_KEY

#: The most quotes one judgment's evidence holds, and the longest quote (characters as JSON
#: writes it): bounded, so that the evidence cannot eat the token budget of the reason.
MAX_QUOTES = 3
QUOTE_MAX_CHARS = 160

#: One quote: a non-empty string of at most QUOTE_MAX_CHARS characters.
QuoteText = Annotated[str, StringConstraints(min_length=1, max_length=QUOTE_MAX_CHARS)]


class EvidenceJudgment(BaseModel):
    """The judge's output with quoted evidence (``evidence=True``): the quotes first, then the
    reasoning over them, then the verdict. On an engine that constrains quotes, each quote can
    only be an exact span of the judged text (:data:`~localjury.types.QUOTE_KEY`)."""

    model_config = ConfigDict(extra="forbid")

    evidence: list[QuoteText] = Field(max_length=MAX_QUOTES, json_schema_extra={QUOTE_KEY: True})
    """Up to three short quotes copied from the judged text that bear on the criterion; empty
    when it holds nothing that does."""
    reason: str = Field(max_length=REASON_MAX_CHARS)
    """One or two sentences that check the criterion against the quotes."""
    verdict: Literal[0, 1]
    """1 when the response meets the criterion, 0 when it does not."""
