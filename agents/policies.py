"""Imports every built-in policy module so that each registers itself."""

from . import ace, archival, contextual, end_to_end, graph_policy, hybrid, letta, videoagent  # noqa: F401 - imported to register
