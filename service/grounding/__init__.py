"""Grounding: whether each sentence of an answer (its claims: service.text.claims) is
supported by the sources it was given, and what is done with those that are not. It sits above
the chains: the LLM judge (judge.py) packs its requests with theirs."""

from service.grounding.check import Grounding, GroundingCheck, SentenceCheck
from service.grounding.judge import LlmGroundingCheck
from service.grounding.policy import Grounded, GroundingPolicy

__all__ = [
    "Grounded",
    "Grounding",
    "GroundingCheck",
    "GroundingPolicy",
    "LlmGroundingCheck",
    "SentenceCheck",
]
