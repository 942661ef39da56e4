"""Cohere chat as the LLM, for servers whose clients do not offer MCP sampling (``MEMORIA_LLM=cohere``)."""

from __future__ import annotations

from typing import Any

from retrieval.models.cohere_client import call_options, cohere_client
from retrieval.models.llm.base import LLMRequest, LLMResponse, LLMUnavailable


class CohereChatModel:
    def __init__(
        self, api_key: str, *, model: str, base_url: str | None = None, timeout: float = 30.0
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
        return f"cohere-chat:{self._model}"

    def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            if self._client is None:
                self._client = cohere_client(self._api_key, base_url=self._base_url)
            response = self._client.chat(
                model=self._model,
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": request.prompt},
                ],
                max_tokens=request.max_tokens,
                temperature=0.0,
                request_options=call_options(self._timeout),
            )
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            raise LLMUnavailable(f"Cohere chat failed with {status or type(exc).__name__}") from exc
        parts = getattr(getattr(response, "message", None), "content", None) or []
        text = "".join(getattr(part, "text", "") or "" for part in parts)
        billed = getattr(getattr(response, "usage", None), "billed_units", None)
        return LLMResponse(
            text=text,
            model=self._model,
            input_tokens=_int(getattr(billed, "input_tokens", None)),
            output_tokens=_int(getattr(billed, "output_tokens", None)),
        )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None
