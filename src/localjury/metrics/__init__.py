"""Judge metrics."""

from localjury.metrics.aspect_critic import PREDEFINED_ASPECTS, AspectCritic
from localjury.metrics.base import Judgment, Message, Metric, ParsedSample

__all__ = ["PREDEFINED_ASPECTS", "AspectCritic", "Judgment", "Message", "Metric", "ParsedSample"]
