"""Who consolidated, and what a consolidation changed: the plain records the tools pass around and
return, kept apart from the service (and numpy) so the tool layer imports them cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Actor:
    agent_id: str
    session_id: str


@dataclass
class ConsolidationReport:
    """What a write (or a sweep) changed, and which resolver decided."""

    resolver: str | None = None
    superseded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    revised: list[str] = field(default_factory=list)
    contradicts: list[str] = field(default_factory=list)
    version_of: str | None = None
    absorbed_into: str | None = None
    reworded_into: str | None = None
    # (survivor id, agent): authors of absorbed memories now counted as corroborating the survivor.
    attested: list[tuple[str, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # new memories written by rewording
    # The rerank step (policy.rerank): each close neighbour's score against the new memory, or why it
    # did not run.
    rerank_scores: dict[str, float] = field(default_factory=dict)
    rerank_skipped: str | None = None
    # Why the language model did not decide where it was asked (it failed, or answered out of shape): the
    # rules decided in its place.
    model_skipped: str | None = None

    def merge(self, other: ConsolidationReport) -> None:
        for name in ("superseded", "kept", "revised", "contradicts", "attested", "created"):
            getattr(self, name).extend(getattr(other, name))
        self.resolver = self.resolver or other.resolver
        self.model_skipped = self.model_skipped or other.model_skipped
