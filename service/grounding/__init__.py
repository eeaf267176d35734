"""Grounding: whether each sentence of an answer is supported by the sources it was given."""

from service.grounding.check import Grounding, GroundingCheck, SentenceCheck

__all__ = ["Grounding", "GroundingCheck", "SentenceCheck"]
