"""Letta as a sidecar: a local Letta server (its own virtual environment, PostgreSQL with
pgvector, a moviemem gateway) that the `letta` policy talks to with letta-client.

    from moviemem.letta import Sidecar, server_url
"""

from .sidecar import ENV_URL, LETTA_VERSION, Sidecar, checked_url, health, server_url

__all__ = ["ENV_URL", "LETTA_VERSION", "Sidecar", "checked_url", "health", "server_url"]
