"""The narrative event graph: events and their temporal, causal and flashback relations."""

from .narrative import CAUSAL, RELATION_TYPES, TEMPORAL, NarrativeGraph, NarrativeGraphWarning

__all__ = ["CAUSAL", "RELATION_TYPES", "TEMPORAL", "NarrativeGraph", "NarrativeGraphWarning"]
