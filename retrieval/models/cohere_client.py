"""One way to build Cohere's v2 client (reranker and chat share it); imported late, it is heavy."""

from __future__ import annotations

from typing import Any


def cohere_client(api_key: str, *, base_url: str | None, timeout: float) -> Any:
    import cohere

    options: dict[str, Any] = {"timeout": timeout, "max_retries": 1}
    if base_url:
        options["base_url"] = base_url
    return cohere.ClientV2(api_key=api_key, **options)
