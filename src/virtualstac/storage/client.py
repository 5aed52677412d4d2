"""Timeouts and retries of every network request the registry's stores send.

obstore's own defaults let a server that accepts a connection and never answers stall a read
for minutes (a 30 s timeout, retried for up to 3 minutes). :class:`NetworkOptions` bounds each
request and the retries after it; :class:`~virtualstac.storage.registry.ObjectStoreRegistry`
applies :data:`DEFAULT_NETWORK` to the stores it builds for ``http(s)://``, ``s3://``,
``gs://`` and ``az://`` prefixes, unless given other options (per registry, per prefix, or per
STAC storage scheme through :func:`~virtualstac.stac.storage.stac_registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

__all__ = ["DEFAULT_NETWORK", "NETWORK_SCHEMES", "NetworkOptions", "with_network_options"]

#: URL schemes whose stores talk to a server (the others are local or in memory).
NETWORK_SCHEMES = frozenset(
    {"http", "https", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure"}
)


@dataclass(frozen=True)
class NetworkOptions:
    """How long a request may take and how often it is retried. Times are in seconds.

    Attributes
    ----------
    connect_timeout
        Time to open a connection (TCP and TLS).
    timeout
        Time for a whole request, from connecting until the last byte of the answer: a server
        that accepts the connection and never answers fails after this long. Raise it for very
        large chunks on slow links.
    max_retries
        Retries after a failed attempt (connection refused or dropped, timeout, 5xx or 429
        answers); a request is sent at most ``max_retries + 1`` times. 4xx answers are final.
    backoff
        Wait before the first retry; each later wait doubles, with random jitter.
    max_backoff
        Longest wait between two attempts.
    retry_timeout
        No retry starts later than this after the first attempt, so a request fails within
        about ``retry_timeout + timeout`` whatever ``max_retries`` says.

    Examples
    --------
    >>> from virtualstac import ObjectStoreRegistry
    >>> patient = NetworkOptions(timeout=120, max_retries=5)
    >>> registry = ObjectStoreRegistry(network=patient)
    >>> _ = registry.register("https://data.example.org/archive/")
    """

    connect_timeout: float = 5.0
    timeout: float = 30.0
    max_retries: int = 3
    backoff: float = 0.1
    max_backoff: float = 5.0
    retry_timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "timeout", "backoff", "max_backoff", "retry_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"NetworkOptions.{name} must be a positive number of seconds")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError("NetworkOptions.max_retries must be a whole number >= 0")

    def client_options(self) -> dict[str, Any]:
        """obstore ``ClientConfig`` entries for the two timeouts."""
        return {
            "connect_timeout": timedelta(seconds=self.connect_timeout),
            "timeout": timedelta(seconds=self.timeout),
        }

    def retry_config(self) -> dict[str, Any]:
        """obstore ``RetryConfig`` for the retries and their backoff."""
        return {
            "max_retries": self.max_retries,
            "backoff": {
                "init_backoff": timedelta(seconds=self.backoff),
                "max_backoff": timedelta(seconds=self.max_backoff),
                "base": 2.0,
            },
            "retry_timeout": timedelta(seconds=self.retry_timeout),
        }


#: The options of every store a registry builds unless it is told otherwise.
DEFAULT_NETWORK = NetworkOptions()


def with_network_options(
    scheme: str, options: Mapping[str, Any], network: NetworkOptions
) -> dict[str, Any]:
    """Store constructor ``options`` with ``network``'s timeouts and retries added.

    Entries the caller gave win: ``client_options`` are merged key by key (so
    ``{"timeout": ...}`` there overrides ``network.timeout``), and a ``retry_config`` replaces
    the network's whole. Local and in-memory stores (``file://``, ``memory://``) are left as
    they are.
    """
    merged = dict(options)
    if scheme not in NETWORK_SCHEMES:
        return merged
    merged["client_options"] = {
        **network.client_options(),
        **dict(merged.get("client_options") or {}),
    }
    merged.setdefault("retry_config", network.retry_config())
    return merged
