"""Call Perdure's public API: start workflows, describe them, read their history."""

from perdure.client._client import Client

__all__ = ["Client"]
