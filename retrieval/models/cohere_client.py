"""The process's Cohere v2 client: the reranker and Cohere chat share one per key and base URL (one
connection pool), each call carrying its own timeout. Imported late: the SDK is heavy."""

from __future__ import annotations

import threading
from typing import Any

_clients: dict[tuple[str, str | None], Any] = {}
_lock = threading.Lock()


def cohere_client(api_key: str, *, base_url: str | None) -> Any:
    """The one client for ``api_key`` at ``base_url`` (Cohere's API when None), built on first use."""
    key = (api_key, base_url)
    with _lock:
        client = _clients.get(key)
        if client is None:
            import cohere

            options: dict[str, Any] = {"max_retries": 1}
            if base_url:
                options["base_url"] = base_url
            client = _clients[key] = cohere.ClientV2(api_key=api_key, **options)
    return client


def call_options(timeout: float) -> dict[str, Any]:
    """One call's request options: its timeout, in seconds (``timeout_in_seconds``, the key every SDK
    version from the oldest this project accepts reads)."""
    return {"timeout_in_seconds": timeout}
