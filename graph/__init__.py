"""The narrative event graph: events and their temporal, causal and flashback relations, and the
builders that make it from a film's text (scenes, the rule graph, model extraction and refinement,
flashbacks). The events and scenes stages in ingest/stages/ run the builders."""

from .narrative import CAUSAL, RELATION_TYPES, TEMPORAL, NarrativeGraph, NarrativeGraphWarning

__all__ = ["CAUSAL", "RELATION_TYPES", "TEMPORAL", "NarrativeGraph", "NarrativeGraphWarning"]
