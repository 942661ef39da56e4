"""Deterministic consolidation rules (pure): token Jaccard, what each protection tier allows, and the
near-exact restatement rule (a memory that adds nothing to another is absorbed by it)."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from retrieval.contradictions import (
    is_value,
    joined_as_words,
    says_more_than_a_value,
    shown_value,
    written_out,
)
from retrieval.text import (
    STOPWORDS,
    content_terms,
    keyed_by_text,
    light_stem,
    negation_sides,
    one_date_spelling,
    plain_thousands,
    set_jaccard,
    swapped_spans,
    term_set,
    word_tokens,
)
from storage.records import MemoryRecord

__all__ = ["set_jaccard", "term_set"]  # shared with assembly's near-duplicate folding (retrieval.text)


def token_jaccard(left: str, right: str) -> float:
    """Jaccard over stemmed content words (1.0 for two texts with no content words)."""
    return set_jaccard(term_set(left), term_set(right))


def may_be_superseded(memory: MemoryRecord, *, by_revision: bool) -> bool:
    """immutable: never; protected: only by an explicit revision; standard and ephemeral: yes."""
    if memory.protection_tier == "immutable":
        return False
    if memory.protection_tier == "protected":
        return by_revision
    return True


def explicit_version(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Whether an explicit update of artifact ``old`` by ``new`` may make ``new`` its next version
    (``version_of``), as a new version found by the rules is (a trial: ``replaces=`` left the versions
    chain empty): both artifacts, and ``new`` without a previous version of its own. (Nor may ``new`` be
    one of ``old``'s earlier versions, an update back to it: ``WriteService.next_version``.)"""
    return old.kind == new.kind == "artifact" and new.version_of is None


# An artifact's title: its first line when it has several, or a single line's words before ": " ("Health
# check for ledger: curl ..."); words, spaces and a file name's marks only, so that no command, quote, flag,
# code fence or shebang is read as one ("curl -H 'Authorization: ...", "```bash", "#!/bin/sh").
_TITLE = re.compile(r"#{0,3}+ ?+(\w[\w ./-]{0,79}+)")
_TITLED = re.compile(r"([^\n:]{1,80}?):\s")


def _title(text: str) -> str | None:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    head = (
        lines[0] if len(lines) > 1 else (found.group(1) if (found := _TITLED.match(text.strip())) else None)
    )
    if head is None:
        return None
    title = _TITLE.fullmatch(head.rstrip(":"))
    return title.group(1) if title and " -" not in title.group(1) else None  # (" -x": a command's flag)


def names_another_artifact(older: str, newer: str) -> bool:
    """Whether ``newer`` is an artifact about another thing than ``older`` rather than its next version: both
    have a title (a first line of several, or a single line's words before ": ") and, where the two titles put
    a word in the same place, each has a word of its own that is not a value ("Health check for ledger: curl
    ... :8017" and "Health check for billing-api: curl ... :8002"; "deploy.yaml" and "service.yaml"): a trial
    saw the ledger's health check superseded by billing-api's and no longer recalled. Only titles are read: an
    edit of a command or a file's body changes its words ("postgres redis" -> "postgres valkey", "log_level:
    info" -> "debug", a review), and values changed in a title ("# deploy v1.2" -> "v1.3") are an edit too."""
    titles = _title(older), _title(newer)
    if titles[0] is None or titles[1] is None:
        return False
    before, after = word_tokens(titles[0]), word_tokens(titles[1])
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return any(
        tag == "replace" and _has_a_name(before[i1:i2]) and _has_a_name(after[j1:j2])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    )


def _has_a_name(words: Sequence[str]) -> bool:
    return any(word not in STOPWORDS and not is_value(word) for word in words)


@dataclass(frozen=True)
class Resolution:
    """What to do with a group of similar memories, and who decided."""

    action: Literal["supersede", "keep_both"]
    survivor_id: str | None
    loser_ids: tuple[str, ...]
    resolver: str
    reason: str
    reworded: str | None = None


def newest(memories: Sequence[MemoryRecord]) -> MemoryRecord:
    """The survivor of a group of restatements: the newest, but never an ephemeral memory over a lasting
    one (it would expire and take the fact with it)."""
    return max(memories, key=_lasting_newest)


def may_absorb(survivor: MemoryRecord, loser: MemoryRecord, *, by_revision: bool = False) -> bool:
    """Whether ``survivor`` may supersede ``loser``: the loser's tier allows it, and an ephemeral memory
    never replaces a lasting one."""
    if survivor.protection_tier == "ephemeral" and loser.protection_tier != "ephemeral":
        return False
    return may_be_superseded(loser, by_revision=by_revision)


@dataclass(frozen=True)
class Statement:
    """What the restatement rule compares of a memory's text: its stemmed content words, on either side of
    its first negating word (all before it when it negates nothing)."""

    before: frozenset[str]
    after: frozenset[str]
    negates: bool
    text: str = ""

    @classmethod
    def of(cls, text: str) -> Statement:
        return _statement_of(text)

    @property
    def words(self) -> frozenset[str]:
        return self.before | self.after


@keyed_by_text
@lru_cache(maxsize=8_192)
def _statement_of(text: str) -> Statement:
    """``Statement.of``; remembered, as a write's group is mostly the group of the writes before it (each
    member's text was read again on every write: 3% of a remember's time in the process)."""
    # What it states: "FYI", "(checked)" and "prod" for "production" say nothing more (a trial's four
    # rewordings of one claim by one agent stood as four memories, outnumbering the fact they denied).
    written = written_out(text)
    words = frozenset(content_terms(written))
    sides = negation_sides(written)
    if sides is None:
        return Statement(words, frozenset(), False, written)
    # The text's content words on each side (a side of stop words alone has none: "We do not ...").
    before, after = (words & {light_stem(word) for word in word_tokens(side)} for side in sides)
    return Statement(before, after, True, written)


def adds_nothing(text: Statement, other: Statement) -> bool:
    """Whether ``text`` says nothing that ``other`` does not: each of its content words is in ``other`` (so a
    value swapped for another, "web-01" for "web-02", "100" for "300", "orders" for "users", is a
    different fact, never a restatement), both negate or neither ("is not weekly" is not "is weekly"),
    and each word falls on the same side of the negation in both ("deploys from the release branch, not
    from main" is not "from main, not from the release branch"; "backups go to S3, not to GCS" is not
    "go not to S3 but to GCS"), and no two of its parts stand in each other's place ("Alice reports to
    Bob" is not "Bob reports to Alice": ``swapped_spans``), and it names each value no more often than
    ``other`` does ("replica 0 of shard 0" is not held by "replica 0 of shard 1": as sets of words, it
    would be). Words in another order otherwise say the same ("runs daily at 02:00", "at 02:00 it runs
    daily")."""
    if text.negates != other.negates:
        return False
    if not (text.before <= other.before and text.after <= other.after):
        return False
    if not _values(text.text) <= _values(other.text):
        return False
    if (
        other.words - text.words
        and says_more_than_a_value(text.text)
        and not says_more_than_a_value(other.text)
    ):
        # It says that something changed ("now", "moved to") where the other says what was so, with a word the
        # other has and it lacks: what changed, not a detail left out. A new user's trial saw "Deploys to
        # production now happen once a week" absorbed by "... happen twice a week" ("once" is no content word),
        # and recall keep only the older.
        return False
    return swapped_spans(text.text, other.text) is None


def _values(text: str) -> Counter[str]:
    """How often ``text`` names each of its values (its words with a digit, days and months by name: as
    value changes read them, ``retrieval.contradictions.is_value``), stemmed: "Tuesdays" is "Tuesday". A
    value joined by hyphens, dots or slashes is one value, as value changes read it: "10.0.1.2" is not
    "10.0.2.1", nor "INC-2026-11-03" "INC-2026-03-11" (a trial: as digit groups, each held the other)."""
    return Counter(
        _one_spelling(light_stem(word))
        for word in word_tokens(joined_as_words(plain_thousands(text)))
        if is_value(word)
    )


def _one_spelling(value: str) -> str:
    """A date written one way, however joined and with or without leading zeros: "2026/03/11" and
    "2026.03.11" are "2026-03-11" (reviews: the same date read as another value); other joined values keep
    their joints (``retrieval.text.one_date_spelling``)."""
    return one_date_spelling(shown_value(value)) or value


def absorbs(survivor: Statement, loser: Statement, threshold: float) -> bool:
    """The near-exact restatement rule: ``loser`` adds nothing to ``survivor``, and their content words
    overlap by Jaccard >= ``threshold`` (a short text inside a long one is not restated by it)."""
    return adds_nothing(loser, survivor) and set_jaccard(loser.words, survivor.words) >= threshold


def _lasting_newest(memory: MemoryRecord) -> tuple[bool, object, str]:
    return (memory.protection_tier != "ephemeral", memory.created_at, memory.id)


def near_exact_resolutions(members: Sequence[MemoryRecord], threshold: float) -> list[Resolution]:
    """Group members whose texts are near-exact restatements (``absorbs``): each memory that adds nothing
    to another is absorbed by the fullest of those that hold it (of the same words, the newest, never an
    ephemeral one over a lasting one), as that memory's tier allows; every other pair is kept as
    genuinely distinct. The newer of two memories survives unless the older says more: a restatement that
    leaves out a detail ("at 10:00 UTC") does not take it away."""
    said = {member.id: Statement.of(member.content) for member in members}

    def absorbed_by(loser: MemoryRecord, survivor: MemoryRecord) -> bool:
        if survivor.id == loser.id or not absorbs(said[survivor.id], said[loser.id], threshold):
            return False
        # Of the same words either way: the lasting newest survives (``newest``).
        same = said[survivor.id].words == said[loser.id].words
        return not same or _lasting_newest(survivor) > _lasting_newest(loser)

    fullest = [m for m in members if not any(absorbed_by(m, other) for other in members)]
    groups: dict[str, list[MemoryRecord]] = {m.id: [] for m in fullest}
    for member in members:
        if member.id in groups:
            continue
        holders = [kept for kept in fullest if absorbed_by(member, kept)]
        if holders:
            survivor = max(holders, key=lambda kept: (len(said[kept.id].words), *_lasting_newest(kept)))
            groups[survivor.id].append(member)
        else:  # held only by memories that are themselves absorbed, with less in common: its own group
            groups[member.id] = []
    by_id = {member.id: member for member in members}
    resolutions = []
    for survivor_id, absorbed in groups.items():
        survivor = by_id[survivor_id]
        losers = tuple(sorted(m.id for m in absorbed if may_absorb(survivor, m)))
        if losers:
            resolutions.append(
                Resolution(
                    "supersede",
                    survivor.id,
                    losers,
                    "rules:near-exact",
                    f"restates it (adds nothing to it; token Jaccard >= {threshold})",
                )
            )
    if len(groups) > 1:
        representatives = tuple(sorted(groups))
        resolutions.append(
            Resolution(
                "keep_both",
                None,
                representatives,
                "rules:distinct",
                f"each says something the other does not, or token Jaccard below {threshold}",
            )
        )
    return resolutions


def collapse_batch(
    records: Sequence[MemoryRecord], threshold: float, *, across_agents: bool = False
) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """Intra-batch near-duplicates: (loser, survivor) pairs, the last written of each group surviving.
    Tiers are respected (``may_absorb``), and items of different agents collapse only ``across_agents``
    (otherwise they are corroboration)."""
    pairs = []
    survivors: list[MemoryRecord] = []
    said = {record.id: Statement.of(record.content) for record in records}
    for record in reversed(records):  # later items win, over what adds nothing to them (``absorbs``)
        match = next(
            (
                kept
                for kept in survivors
                if kept.kind == record.kind
                and (across_agents or kept.agent_id == record.agent_id)
                and may_absorb(kept, record)
                and absorbs(said[kept.id], said[record.id], threshold)
            ),
            None,
        )
        if match is None:
            survivors.append(record)
        else:
            pairs.append((record, match))
    return list(reversed(pairs))
