"""Cohere Rerank over its v2 API (``COHERE_API_KEY``; a custom base URL for proxies and tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.models.cohere_client import call_options, cohere_client
from retrieval.models.rerankers.base import RerankFailed


class CohereReranker:
    """Calls ``ClientV2.rerank``; Cohere's relevance scores are already in [0, 1]."""

    def __init__(
        self, api_key: str, *, model: str = "rerank-v3.5", base_url: str | None = None, timeout: float = 10.0
    ) -> None:
        if not api_key:
            raise ValueError("api_key must be non-empty: set COHERE_API_KEY")
        self._api_key = api_key
        self._model = model
        self._base_url = base_url
        self._timeout = timeout
        self._client: Any = None

    @property
    def name(self) -> str:
        return f"cohere:{self._model}"

    def warm_up(self) -> None:
        if self._client is not None:
            return
        self._client = cohere_client(self._api_key, base_url=self._base_url)

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        try:
            self.warm_up()
            response = self._client.rerank(
                model=self._model,
                query=query,
                documents=list(documents),
                top_n=len(documents),
                request_options=call_options(self._timeout),
            )
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            transient = status is None or status == 429 or status >= 500
            hint = "" if transient else " (check COHERE_API_KEY and MEMORIA_COHERE_RERANK_MODEL)"
            raise RerankFailed(
                f"Cohere rerank failed with {status or type(exc).__name__}{hint}", transient=transient
            ) from exc
        scores = [0.0] * len(documents)
        for result in getattr(response, "results", None) or []:
            index = getattr(result, "index", None)
            if not isinstance(index, int) or not 0 <= index < len(documents):
                raise RerankFailed(
                    f"Cohere rerank returned an index outside 0..{len(documents) - 1}: {index!r}",
                    transient=False,
                )
            scores[index] = min(1.0, max(0.0, float(result.relevance_score)))
        return scores
