"""What every tool handler shares: argument types, the caller's identity, the runtime and the error type.

Handlers know nothing of MCP: they take a pydantic input model, the ``Runtime`` and the ``Caller`` and
return a pydantic output model, raising ``ToolFailure`` with a message that tells the model what to do.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Literal, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from retrieval.outcomes import CreditPolicy, WeightPolicy
from retrieval.redaction import redact_text
from retrieval.text import is_unsafe_char
from storage.records import MemoryRecord, Scope, View, Viewer
from storage.scope_ids import scope_id_problem
from tools.lanes import Lanes
from writing.drafts import memory_id_for

__all__ = ["memory_id_for"]  # ids are the write service's; tools and tests name them from here too

if TYPE_CHECKING:  # heavy (LanceDB, models): imported by the runtime builder, after the MCP handshake
    from retrieval.aggregation import CorroborationService
    from retrieval.feedback_index import FeedbackIndex
    from retrieval.models.llm.base import LanguageModel
    from retrieval.models.providers import Models
    from retrieval.pipeline import RecallPipeline
    from storage.store import MemoryStore
    from writing.consolidation.service import ConsolidationService
    from writing.service import WriteService


class Progress(Protocol):
    """Where long work (import, export, re-embedding, report building) says how far it is: ``done`` of
    ``total`` items (None: unknown) of the step called ``label``. The CLI draws a bar on stderr."""

    def __call__(self, label: str, done: int, total: int | None) -> None: ...


def no_progress(label: str, done: int, total: int | None) -> None:
    """A ``Progress`` that shows nothing (the MCP tools, tests)."""


class ToolFailure(Exception):
    """A request that cannot be served as asked; the message is for the calling model to act on."""


class ServerFault(ToolFailure):
    """A ``ToolFailure`` that is the server's, not the request's (it could not start): a resource read says
    "internal error" for it, not "invalid params"."""


class NotFound(ToolFailure):
    """A ``ToolFailure`` for something the caller named that it may not read here: a resource read says
    "not found" for it, not "internal error"."""


def no_such_memory(memory_id: str, org_id: str, project_id: str, elsewhere: str = "") -> ToolFailure:
    """The failure for an id the caller may not read here (unknown, another tenant's, or private to
    another agent: the same words, so that existence is not revealed), with what to check; ``elsewhere``:
    where it is, for a caller allowed to know (``held_elsewhere``)."""
    return NotFound(
        f"no memory {memory_id!r} in org {org_id!r} / project {project_id!r}{elsewhere or ''}: check the id "
        "(each recall result carries its memories' ids) and the `org_id` / `project_id` it was stored in"
    )


def _clean_identifier(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("must not be empty or whitespace")
    # isprintable() is False for every unsafe category (and a few safe ones): the exact test only then.
    if not value.isprintable() and any(is_unsafe_char(char) for char in value):
        raise ValueError("must not contain control characters or line breaks")
    return value


def _clean_tag(value: str) -> str:
    value = _clean_identifier(value)
    if "|" in value:
        raise ValueError(f"must not contain '|', but got {value!r}")
    return value


Identifier = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_clean_identifier)]


def _grantable(part: Literal["org", "project"]) -> Callable[[str], str]:
    """An ``Identifier``'s check, and that a token grant can name it as an org or project id."""

    def check(value: str) -> str:
        value = _clean_identifier(value)
        problem = scope_id_problem(value, part)
        if problem:
            raise ValueError(problem)
        return value

    return check


OrgId = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_grantable("org"))]
ProjectId = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_grantable("project"))]
# Free text that is embedded, logged or stored (queries, notes, reasons): secrets are replaced on the way in.
WithoutSecrets = AfterValidator(redact_text)
Tag = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_clean_tag)]


def _time_text(value: str) -> str:
    if not value.strip():  # left out, a window is not asked for; empty, it was meant and lost
        raise ValueError('is empty: pass a time such as "2026-11-24" or "last week", or leave it out')
    return value


def _zone_text(value: str) -> str:
    if not value.strip():
        raise ValueError('is empty: pass an IANA time zone such as "Europe/Paris", or leave it out (UTC)')
    return value


# A time in words (``since``, ``until``) and a time zone (``time_zone``), read by ``retrieval.time_window``.
TimeText = Annotated[str, Field(max_length=64), AfterValidator(_time_text)]
ZoneText = Annotated[str, Field(max_length=64), AfterValidator(_zone_text)]


class AggregationView(BaseModel):
    """The scope's last aggregation pass, with the names of the source documents' AggregationResult."""

    clusters: int = Field(description="Near-duplicate clusters (SimHash) found.")
    contradictions: int = Field(description="Contradiction pairs detected.")
    corroboratedCount: int = Field(description="Clusters stated by more than one agent.")
    elapsedMs: float = Field(description="How long the pass took, in milliseconds.")
    rows: int = Field(description="Active memories the pass read.")
    finished_at: str | None = Field(None, description="When it finished (UTC, ISO 8601).")


def aggregation_view(runtime: Runtime, scope: Scope) -> AggregationView | None:
    """The last aggregation pass over ``scope`` in this process; None before the first one."""
    found = runtime.corroboration.last_result(scope)
    if found is None:
        return None
    return AggregationView(
        clusters=len(found.clusters),
        contradictions=len(found.contradictions),
        corroboratedCount=found.corroborated_count,
        elapsedMs=round(found.elapsed_ms, 3),
        rows=found.rows,
        finished_at=iso(found.finished_at) if found.finished_at else None,  # as every time is shown (a trial)
    )


class RerankKnobs(Protocol):
    @property
    def multiplier(self) -> int: ...


class ToolSettings(Protocol):
    """What a tool reads of the server's settings (``server.config.Settings`` is one): the configured
    scope, the limits its arguments are checked against, and the recall knobs a handler applies itself.
    Everything else reaches the tools already built into the runtime's parts."""

    @property
    def org_id(self) -> str: ...
    @property
    def project_id(self) -> str: ...
    @property
    def top_k_facts(self) -> int: ...
    @property
    def max_top_k(self) -> int: ...
    @property
    def max_query_chars(self) -> int: ...
    @property
    def min_char_budget(self) -> int: ...
    @property
    def max_char_budget(self) -> int: ...
    @property
    def query_time_words(self) -> bool: ...
    @property
    def forget_min_relevance(self) -> float: ...
    @property
    def rerank(self) -> RerankKnobs: ...

    def feedback_weighting_enabled(self, org_id: str) -> bool: ...

    def schema_limits(self, tool: str) -> dict[str, dict[str, int]]: ...


class ScopeArgs(BaseModel):
    """The tenant scope every tool accepts; omitted fields fall back to the server's configured scope."""

    # Strict: a tool's arguments are JSON, and a boolean or a string where a number goes (`"top_k": true`,
    # `"top_k": "5"`) is a mistake to name, not a value to guess (a number where a decimal goes is fine).
    model_config = ConfigDict(extra="forbid", strict=True)

    # Undescribed in the tool list (every tool has them; an agent leaves them out to use the server's
    # MEMORIA_ORG_ID and MEMORIA_PROJECT_ID): the bytes go to arguments an agent has to choose.
    org_id: OrgId | None = None
    project_id: ProjectId | None = None

    def scope(self, settings: ToolSettings) -> Scope:
        return Scope(self.org_id or settings.org_id, self.project_id or settings.project_id)


@dataclass(frozen=True)
class Caller:
    """Who is calling: agent from the MCP handshake's client name, session one per client connection,
    and the LLM this request may use (the client's by sampling, or Cohere chat), if any.
    ``may_change_org`` says whether it may write or forget an org's org-visible memories (with a bearer
    token: one granting writes to every project of the org; on stdio and in-process: yes)."""

    agent_id: str
    session_id: str
    llm: LanguageModel | None = None
    may_change_org: Callable[[str], bool] = field(default=lambda org_id: True, compare=False)
    remote: bool = False  # a bearer token's holder: the server's own paths are not theirs to see
    # A person at this machine (the command line, the page): trusted to correct any memory it may update,
    # where an agent's update of another agent's protected memory only disputes it.
    person: bool = False
    # The connection's session before this one (reported, then ended by the next task): a report on a
    # session that recalled nothing, right after, was most likely meant to change that one's.
    previous_session: str | None = None

    @property
    def viewer(self) -> Viewer:
        return Viewer(self.agent_id, self.session_id)

    def check_org_change(self, org_id: str, what: str, tool: str) -> None:
        """A ``ToolFailure`` unless the caller may change what the whole org reads."""
        if not self.may_change_org(org_id):
            raise ToolFailure(
                f"{what} is read by every project of org {org_id!r}, and this token may not write to all of "
                f"them: nothing was changed. Use visibility='project' (or 'agent'), or a token that grants "
                f"{org_id}/*, then call {tool} again."
            )


def view_for(args: ScopeArgs, runtime: Runtime, caller: Caller) -> View:
    """What a call may read: its scope as its agent and session see it (their own private memories and
    the shared ones), and the org's shelf. The agent and session are the call's own if it names them."""
    agent_id = getattr(args, "agent_id", None) or caller.agent_id
    session_id = getattr(args, "session_id", None) or caller.session_id
    return View(args.scope(runtime.settings), Viewer(agent_id, session_id))


@dataclass
class Runtime:
    """The process-wide parts a handler works with, built once in the background at start-up."""

    settings: ToolSettings
    store: MemoryStore
    models: Models
    pipeline: RecallPipeline
    corroboration: CorroborationService
    consolidation: ConsolidationService

    # How outcome reports move weights, and how a report credits the memories of its contexts.
    weight_policy: WeightPolicy = field(default_factory=WeightPolicy)
    credit_policy: CreditPolicy = field(default_factory=CreditPolicy)
    # The outcome reports behind each memory's weight for a query; None: global weights only.
    feedback: FeedbackIndex | None = None

    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    aggregation_passes: int = 0  # finished by the background job so far (the benchmark waits for one)
    # The worker threads recalls and reports may hold at once (``tools.lanes``).
    lanes: Lanes = field(default_factory=Lanes)
    # Every write goes through it (set by the runtime builder, once the runtime exists: it reads its clock).
    writer: WriteService = field(init=False)

    @property
    def backends(self) -> dict[str, str]:
        return backend_summary(self.models)

    def close(self) -> None:
        writer = getattr(self, "writer", None)  # set once the runtime is assembled
        if writer is not None:
            writer.close()  # what it still hands on is written before the store closes
        self.store.close()


def backend_summary(models: Models) -> dict[str, str]:
    """Which backends run, and why when it is the offline fallback: for the trace and explain_ranking."""
    return {
        "embedder": models.embedder_info.describe(),
        "reranker": models.reranker_info.describe(),
        # Which engine answered a given recall is in its trace (the candidate_search leg).
        "fulltext": "BM25: the scope copy's index (scopes up to the copy limit), else LanceDB's",
    }


def new_retrieval_id() -> str:
    return "ret_" + secrets.token_hex(10)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def expired_by(memory: MemoryRecord) -> str:
    """What made ``memory`` expire, as a message says it: its ephemeral tier's time, or the expiry it was given
    (a trial read "its standard tier" of a memory given --until)."""
    return "its ephemeral tier" if memory.protection_tier == "ephemeral" else "the expiry it was given"
