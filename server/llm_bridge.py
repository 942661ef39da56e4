"""The request's LLM: the client's own model by MCP sampling, or Cohere chat, behind ``LanguageModel``.

The pipeline runs in a worker thread and calls ``complete`` synchronously. On a handshake-era
connection the server may ask the client mid-call, so the call hops back to the event loop and waits.
On a 2026-07-28 connection the server may not: ``complete`` raises ``ClientInputNeeded``, the tool
returns an ``InputRequiredResult`` carrying the question, and the client answers and retries; the
retried call replays the answers recorded so far (carried in ``request_state``, which the SDK seals)
and gets one question further each round.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    InputRequiredResult,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)

from retrieval.models.llm.base import (
    ClientInputNeeded,
    LanguageModel,
    LLMRequest,
    LLMResponse,
    LLMUnavailable,
)
from retrieval.models.llm.cohere_chat import CohereChatModel
from retrieval.models.llm.openai_chat import OpenAIChatModel
from retrieval.models.model_files import short_reason
from server.config import Settings

# Sampling is deprecated in the 2026-07-28 spec but it is how a server reaches the client's model, and the
# memory server is asked to use it; the warning would only repeat on every call.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, message=".*sampling.*")


# Rounds of the input-required flow one tool call may take; the SDK's client gives up after 10.
MAX_SAMPLING_ROUNDS = 8


@dataclass
class SamplingLedger:
    """What the client has answered (or failed to answer) so far in this tool call, and how many rounds
    it took; carried between rounds in ``request_state``."""

    answers: dict[str, LLMResponse] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0

    def to_state(self) -> str:
        return json.dumps(
            {
                "answers": {key: {"text": r.text, "model": r.model} for key, r in self.answers.items()},
                "failures": self.failures,
                "rounds": self.rounds,
            }
        )


class SamplingLanguageModel:
    """The client's LLM, reached by ``sampling/createMessage``."""

    def __init__(
        self, ctx: Context[Any, Any], ledger: SamplingLedger, *, mid_call: bool, timeout: float = 60.0
    ) -> None:
        self._ctx = ctx
        self.ledger = ledger
        self._mid_call = mid_call
        self._timeout = timeout
        self._gave_up: str | None = None  # the client did not answer in time: not asked again in this call

    @property
    def name(self) -> str:
        return "mcp-sampling"

    def complete(self, request: LLMRequest) -> LLMResponse:
        ledger = self.ledger
        if request.key in ledger.answers:
            return ledger.answers[request.key]
        if request.key in ledger.failures:
            raise LLMUnavailable(ledger.failures[request.key])
        if self._gave_up is not None:  # (a review: each later request of the call waited the timeout again)
            raise LLMUnavailable(self._gave_up)
        if self._mid_call:
            response = anyio.from_thread.run(self._sample, request)
            ledger.answers[request.key] = response
            return response
        if ledger.rounds >= MAX_SAMPLING_ROUNDS:
            raise LLMUnavailable(
                f"the client was already asked {ledger.rounds} times during this call; continuing without the LLM"
            )
        raise ClientInputNeeded({request.key: request})

    async def _sample(self, request: LLMRequest) -> LLMResponse:
        params = sampling_params(request)
        try:
            # Bounded, as the endpoints are (a trial's client took 400 s, and the remember waited for it).
            with anyio.fail_after(self._timeout):
                result = await self._ctx.request_context.session.create_message(
                    params.messages,
                    max_tokens=params.max_tokens,
                    system_prompt=params.system_prompt,
                    temperature=params.temperature,
                    model_preferences=params.model_preferences,
                )
        except TimeoutError as exc:
            reason = f"the client's sampling took longer than {self._timeout:g} s (MEMORIA_SAMPLING_TIMEOUT_SECONDS)"
            self.ledger.failures[request.key] = self._gave_up = reason  # nothing more asked in this call
            raise LLMUnavailable(reason) from exc
        except Exception as exc:
            raise LLMUnavailable(f"the client's sampling failed ({short_reason(exc)})") from exc
        return response_of(result)


def sampling_params(request: LLMRequest) -> CreateMessageRequestParams:
    preferences = ModelPreferences(hints=[ModelHint(name=request.model_hint)]) if request.model_hint else None
    return CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=request.prompt))],
        max_tokens=request.max_tokens,
        system_prompt=request.system,
        temperature=0.0,
        model_preferences=preferences,
    )


def response_of(result: Any) -> LLMResponse:
    content = getattr(result, "content", None)
    blocks = content if isinstance(content, list) else [content]
    text = "".join(
        getattr(block, "text", "") or "" for block in blocks if getattr(block, "type", None) == "text"
    )
    if not text:
        raise LLMUnavailable("the client's sampling answer had no text")
    return LLMResponse(text=text, model=str(getattr(result, "model", "") or "client-model"))


def recorded_ledger(ctx: Context[Any, Any]) -> SamplingLedger:
    """Earlier rounds' ledger (``request_state``, sealed by the SDK) plus this round's ``input_responses``."""
    ledger = SamplingLedger()
    state = ctx.request_state
    if state:
        try:
            data = json.loads(state)
            ledger.answers = {
                key: LLMResponse(text=str(value["text"]), model=str(value["model"]))
                for key, value in data.get("answers", {}).items()
            }
            ledger.failures = {str(key): str(value) for key, value in data.get("failures", {}).items()}
            ledger.rounds = int(data.get("rounds", 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            ledger = SamplingLedger(rounds=MAX_SAMPLING_ROUNDS)  # unreadable state: stop asking, fall back
    for key, response in (ctx.input_responses or {}).items():
        try:
            if not isinstance(response, CreateMessageResult):
                raise LLMUnavailable(
                    f"the client answered with {type(response).__name__}, not a sampling result"
                )
            ledger.answers[key] = response_of(response)
        except LLMUnavailable as exc:
            ledger.failures[key] = str(exc)  # replayed as a failure, never asked again
    return ledger


def input_required(needed: ClientInputNeeded, ledger: SamplingLedger) -> InputRequiredResult:
    ledger.rounds += 1
    return InputRequiredResult(
        input_requests={
            key: CreateMessageRequest(params=sampling_params(request))
            for key, request in needed.requests.items()
        },
        request_state=ledger.to_state(),
    )


class LLMChooser:
    """Picks the LLM for one request from the configuration and what the client offers."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._cohere: CohereChatModel | None = None
        self._openai: OpenAIChatModel | None = None

    def background(self) -> LanguageModel | None:
        """For work with no client to ask (the consolidation sweep), and for requests whose client offers
        no sampling: an OpenAI-compatible endpoint, else Cohere chat, whichever is configured."""
        chosen = self._settings.background_llm
        if chosen == "openai":
            return self._openai_model()
        if chosen == "cohere":
            return self._cohere_model()
        return None

    def _openai_model(self) -> OpenAIChatModel:
        if self._openai is None:
            settings = self._settings
            assert settings.openai.base_url is not None
            key = settings.openai.api_key
            self._openai = OpenAIChatModel(
                settings.openai.base_url,
                model=settings.openai.model or "",
                api_key=key.get_secret_value() if key is not None else None,
                timeout=settings.openai.timeout_seconds,
            )
        return self._openai

    def _cohere_model(self) -> CohereChatModel:
        if self._cohere is None:
            assert self._settings.cohere.api_key is not None
            self._cohere = CohereChatModel(
                self._settings.cohere.api_key.get_secret_value(),
                model=self._settings.cohere.chat_model,
                base_url=self._settings.cohere.base_url,
                timeout=self._settings.cohere.timeout_seconds * 3,
            )
        return self._cohere

    def for_request(self, ctx: Context[Any, Any], ledger: SamplingLedger) -> LanguageModel | None:
        session = ctx.request_context.session
        capabilities = session.client_capabilities
        if (
            self._settings.llm in ("auto", "sampling")
            and capabilities is not None
            and capabilities.sampling is not None
        ):
            return SamplingLanguageModel(
                ctx,
                ledger,
                mid_call=session.can_send_request,
                timeout=self._settings.sampling_timeout_seconds,
            )
        return self.background()
