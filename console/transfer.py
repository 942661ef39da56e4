"""Moving memories in and out of a store: lossless export and import (JSON Lines, ``storage.portable``),
imports of conversation transcripts (``console.transcripts``), and re-embedding with another model.

The console commands call these handlers; they are not MCP tools. Long work reports to ``progress``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast, get_args

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from console import transcripts
from retrieval.redaction import redact
from retrieval.text import clip, content_hash, counted, has_visible_text, listed
from storage.records import (
    Audience,
    ContradictionRecord,
    LineageEvent,
    MemoryRecord,
    ProtectionTier,
    Scope,
    Viewer,
    WeightEvent,
)
from storage.scope_ids import scope_id_problem
from tools.common import Caller, Progress, Runtime, Tag, ToolFailure, no_progress
from tools.remember import RememberInput, draft_of, prepare
from writing.consolidation.rules import token_jaccard
from writing.drafts import in_batch_order, memory_id_for

if TYPE_CHECKING:
    from storage.portable import ExportHeader

log = logging.getLogger(__name__)

ImportFormat = Literal["auto", "memoria", "locomo", "transcript"]
WRITE_BATCH = 500  # rows (or transcript messages) per write
PART_LABEL = len("[part 999 of 999] ")  # room a long message's part leaves for its label
EMBED_BATCH = 64  # texts per embedding call when an import re-embeds


class TableCount(BaseModel):
    written: int = 0
    skipped: int = Field(0, description="Rows (or messages) already in the store, or repeated in the file.")


class TransferSummary(BaseModel):
    format: Literal["memoria", "locomo", "transcript"]
    tables: dict[str, TableCount] = Field(description="Per table: rows written and skipped.")
    reembedded: int = Field(0, description="Memories given new vectors by this server's embedder.")
    superseded: int | None = Field(
        None,
        description="An export's import: memories already in the store that the export says were "
        "superseded, by a memory the store now holds: superseded here too, as its lineage says.",
    )
    reweighed: int | None = Field(
        None,
        description="An export's import: memories already in the store whose weight the imported reports' "
        "credits moved.",
    )
    amended: int | None = Field(
        None,
        description="An export's import: memories already in the store whose tags or protection tier the "
        "export amended after any amend made here: given the export's; or, amended on neither side, given the "
        "tags the export's copy adds.",
    )
    episodes: list[str] = Field(
        default_factory=list,
        description="A conversation's episodes, one per session (`memoria list --episode`).",
    )
    note: str | None = Field(None, description="What the transfer left out, and how to bring it.")
    seconds: float


class ReembedSummary(BaseModel):
    examined: int = Field(
        description="Memories read: those whose vectors another embedder made, or with --all every memory "
        "that still has content (every status but purged)."
    )
    reembedded: int
    consolidated: int = Field(
        0,
        description="Memories whose vectors another embedder made, compared again with their neighbours by "
        "consolidation (while a store holds two embedders' vectors, a write is compared only with its own's)",
    )
    superseded: int = Field(0, description="Memories that comparison found restated, and superseded")
    seconds: float
    embedder: str


# ------------------------------------------------------------------ export


def export_store(
    runtime: Runtime,
    out: TextIO,
    *,
    scopes: Sequence[Scope] | None = None,
    vectors: bool = True,
    progress: Progress = no_progress,
    viewer: Viewer | None = None,
) -> TransferSummary:
    """Write every row of the store (of ``scopes``, or all) to ``out`` as a memoria export: a header line
    with the row counts, then one line per row. Rows go to a temporary file first, so the header's
    counts are those of the rows that follow even while other processes write. With a ``viewer``: only
    what that agent may read (``storage.portable.export_rows``); without one, the operator's backup of
    everything, private memories included."""
    from storage import portable

    started = time.perf_counter()
    store = runtime.store
    counts = dict.fromkeys(portable.TABLE_ORDER, 0)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        for done, (table, row) in enumerate(portable.export_rows(store, scopes, vectors, viewer), start=1):
            spool.write(_line({"table": table, "row": row}))
            counts[table] += 1
            if done % 1_000 == 0:
                progress("exporting", done, None)
        total = sum(counts.values())
        progress("exporting", total, total)
        out.write(_line(portable.export_header(store, counts, runtime.clock()).to_json()))
        spool.seek(0)
        shutil.copyfileobj(spool, out)
    out.flush()
    return TransferSummary(
        format="memoria",
        tables={name: TableCount(written=count) for name, count in counts.items()},
        note=_shelves_note(portable.shelves_left_out(store, scopes)) if scopes and viewer is None else None,
        seconds=time.perf_counter() - started,
    )


def _shelves_note(left_out: dict[str, int]) -> str | None:
    """What a project's export says of its org's org-visible memories, which it does not hold."""
    if not left_out:
        return None
    held = ", ".join(f"{count:,} of org {org_id}" for org_id, count in left_out.items())
    return (
        f"left out the memories remembered for the whole org ({held}; every status): they are read by "
        "every project of the org, not this project's alone. The whole store's export holds them, and "
        "--agent NAME adds them to what that agent reads"
    )


def _line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


# ------------------------------------------------------------------ import


def import_file(
    runtime: Runtime,
    path: Path,
    *,
    format: ImportFormat = "auto",
    scope: Scope | None = None,
    agent_id: str = "import",
    progress: Progress = no_progress,
) -> TransferSummary:
    """Import ``path``: a memoria export (lossless; memories made by another embedder, or exported
    without vectors, are embedded again by this server's), LoCoMo conversations, or a chat transcript
    (JSON, JSON Lines or plain text; ``console.transcripts``). ``auto`` tells them apart by content.

    A transcript becomes one memory per message ("Speaker: text", agent = the speaker, or ``agent_id``
    when the file names none) and one episode per session, in ``scope`` (default: the server's); a message
    longer than a memory may be becomes several, labelled ``[part i of n]`` (``transcripts.parts_of``). Ids
    are content hashes, so importing again stores nothing twice (and does not bring back a memory that
    was forgotten). The new memories are stamped as already examined by consolidation: a bulk import of
    thousands of turns would otherwise make the next writes wait for a consolidation sweep over them
    all; near-duplicates among them are not merged.

    The whole file is checked before anything is written: a bad file raises ``ToolFailure`` naming
    the line (or message) and writes nothing."""
    started = time.perf_counter()
    if format not in ("auto", "memoria", "locomo", "transcript"):
        raise ToolFailure(f"format must be auto, memoria, locomo or transcript, but got {format!r}")
    kind = detect_format(path) if format == "auto" else format
    if kind == "memoria":
        if scope is not None:
            raise ToolFailure(scoped_export_refused(path))
        summary = _import_export(runtime, path, progress)
    else:
        target = scope or Scope(runtime.settings.org_id, runtime.settings.project_id)
        sessions = _read_sessions(path, kind)
        summary = _import_sessions(runtime, path, kind, sessions, target, agent_id, progress)
    return summary.model_copy(update={"seconds": time.perf_counter() - started})


def scoped_export_refused(path: Path) -> str:
    """Why a memoria export is not imported into a scope named for it, and what to do instead."""
    return (
        f"{path}: a memoria export keeps the scopes it was exported from (a memory's id is made from its "
        "scope), so it cannot be imported into another; import it without --org and --project. To bring only "
        "some of its scopes, export just those (memoria export --org ORG --project PROJECT)"
    )


def detect_format(path: Path) -> Literal["memoria", "locomo", "transcript"]:
    lines = _numbered_lines(path)
    try:
        first = next(lines, (0, ""))[1].strip()
    finally:
        lines.close()
    if not first:
        raise ToolFailure(f"{path}: the file is empty: there is nothing to import")
    if first.startswith("{"):
        try:
            value = json.loads(first)
        except ValueError:
            value = None  # a JSON document over several lines
        if isinstance(value, dict) and "memoria_export" in value:
            return "memoria"
    if first.startswith(("{", "[")):
        try:
            data = json.loads(_text_of(path))
        except ValueError:
            return "transcript"  # JSON Lines (or broken JSON: reading it says where)
        if transcripts.is_locomo(data) or (isinstance(data, dict) and "conversation" in data):
            return "locomo"
    return "transcript"


# The first bytes of compressed files, which read as text that is not UTF-8.
_COMPRESSED = (
    (b"\x1f\x8b", "gzip", "gunzip"),
    (b"PK\x03\x04", "zip", "unzip"),
    (b"(\xb5/\xfd", "zstd", "unzstd"),
)


def _opened(path: Path) -> Any:
    try:
        with path.open("rb") as raw:
            first = raw.read(4)
        for magic, kind, tool in _COMPRESSED:
            if first.startswith(magic):
                raise ToolFailure(
                    f"{path}: is a {kind} file: decompress it first ({tool} {path.name}) and import what it holds"
                )
        return path.open(encoding="utf-8-sig")
    except OSError as exc:
        raise ToolFailure(f"{path}: cannot be read ({exc.strerror or exc}): check the path") from None


def _text_of(path: Path) -> str:
    try:
        with _opened(path) as file:
            return str(file.read())
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> ToolFailure:
    """The file is no UTF-8 text: where its first such byte is, "at line N, byte B of the line (0xXX)" (a
    trial's error said nothing of where; the decoder's own position counts from the chunk it read)."""
    raw, where = path.read_bytes(), ""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as first:
        line = raw.count(b"\n", 0, first.start) + 1
        column = first.start - (raw.rfind(b"\n", 0, first.start) + 1) + 1
        where = f" at line {line}, byte {column} of the line (0x{raw[first.start]:02x})"
    return ToolFailure(f"{path}: is not UTF-8 text ({exc.reason}{where}): save it as UTF-8 and import again")


def _numbered_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """(line number, line) of the non-blank lines."""
    with _opened(path) as file:
        try:
            for number, line in enumerate(file, start=1):
                if line.strip():
                    yield number, line
        except UnicodeDecodeError as exc:
            raise _not_utf8(path, exc) from None


def _fail(path: Path, where: str, what: str, advice: str) -> ToolFailure:
    return ToolFailure(f"{path}, {where}: {what}; {advice}. Nothing was imported.")


# ------------------------------------------------------------------ memoria exports


# The session a weight replayed by an import is recorded under in a memory's weight history: a name no client's
# session has in practice (one that took it would see these rows as its report's).
IMPORT_SESSION = "(import: replayed every report)"
IMPORT_ACTOR = "import"  # the agent and session of what an import changes itself


def _import_export(runtime: Runtime, path: Path, progress: Progress) -> TransferSummary:
    from storage import portable, schema
    from storage.migrations import legacy_credit_rows

    header, counts = _checked_export(runtime, path, progress)
    store = runtime.store
    embedder = runtime.models.embedder
    tables = {name: TableCount() for name in portable.TABLE_ORDER}
    total = sum(counts.values())
    done = reembedded = kept_foreign = 0
    touched: set[Scope] = set()
    kept: list[dict[str, Any]] = []  # the export's memory rows the store already held (skipped)
    amends: set[str] = set()  # the export's amend events
    for table, rows in _batches(path):
        # Rows of an older release as this schema holds them, as the check read them (a trial: an export
        # from before visibility passed the check, then failed to write: "visibility needs a value").
        rows = [as_current(header.schema_version, table, row) for row in rows]
        if table == schema.MEMORIES:
            here = portable.existing_memory_ids(store, [row["id"] for row in rows])
            kept += [{key: row.get(key) for key in _KEPT} for row in rows if row["id"] in here]
            rows, embedded, foreign = _with_vectors(rows, runtime, progress)
            reembedded += embedded
            kept_foreign += foreign
        if table == schema.LINEAGE:
            amends |= {str(row["event_id"]) for row in rows if row.get("action") == "amend"}
        written = portable.import_rows(store, table, rows)
        tables[table].written += written.written
        tables[table].skipped += written.skipped
        if table == schema.OUTCOMES and header.schema_version < schema.FEEDBACK_SCHEMA_VERSION:
            # An export from before per-memory credit: its reports become credits, as migration 5 makes them.
            credited = portable.import_rows(store, schema.FEEDBACK, legacy_credit_rows(rows))
            tables[schema.FEEDBACK].written += credited.written
            tables[schema.FEEDBACK].skipped += credited.skipped
        if written.written and table in (schema.MEMORIES, schema.ATTESTATIONS):
            touched |= {Scope(row["org_id"], row["project_id"]) for row in rows}
        done += len(rows)
        progress("importing", done, total)
    superseded, reweighed, forgotten, forgotten_there, forks = _reconcile(runtime, kept)
    amended = _amended(runtime, kept, amends)
    if superseded or reweighed or amended:
        touched |= {Scope(row["org_id"], row["project_id"]) for row in kept}
    for scope in sorted(touched, key=lambda s: (s.org_id, s.project_id)):
        # This process's clusters of a scope it already aggregated are built again with the new rows.
        if runtime.corroboration.last_result(scope) is not None:
            runtime.corroboration.run_pass(scope)
    log.info(
        "imported %s (exported %s, embedder now %s)", path, header.exported_at.isoformat(), embedder.name
    )
    return TransferSummary(
        format="memoria",
        tables=tables,
        reembedded=reembedded,
        superseded=superseded,
        reweighed=reweighed,
        amended=amended,
        note="; ".join(
            note
            for note in (
                _forgotten_note(forgotten, forgotten_there),
                _forks_note(forks),
                _foreign_note(kept_foreign, runtime),
            )
            if note
        )
        or None,
        seconds=0.0,
    )


def _forks_note(forks: list[tuple[str, str, str]]) -> str | None:
    """What an import says of memories corrected one way here and another way in the export."""
    if not forks:
        return None
    pairs = ", ".join(f"{corrected}: {here} here, {there} there" for corrected, here, there in forks[:5])
    one = len(forks) == 1
    return (
        f"{counted(len(forks), 'memory')} {'was' if one else 'were'} corrected differently here and in the export "
        f"({pairs}{', ...' if len(forks) > 5 else ''}): both corrections kept and disputed (`memoria report` "
        "lists them); `memoria edit` the one that stands with what holds, or forget the other"
    )


def _forgotten_note(forgotten: list[str], forgotten_there: list[str]) -> str | None:
    """What an import says of the memories active in the export that this store has forgotten, and of those
    the export says were forgotten that are active here (a trial: a memory retracted as poison on one
    server stayed active on the other after an import, and nothing said so)."""
    notes = []
    if forgotten:
        notes.append(
            f"{counted(len(forgotten), 'memory')} active in the export {'is' if len(forgotten) == 1 else 'are'} "
            f"retracted or purged here ({listed(forgotten)}): kept as "
            "this store holds them (a forget here stands). To bring a retracted one back, `memoria restore ID`; "
            "a purged one's text is gone here: remember it again (the export's row of that id holds it)"
        )
    if forgotten_there:
        one = len(forgotten_there) == 1
        notes.append(
            f"{counted(len(forgotten_there), 'memory')} the export says {'was' if one else 'were'} retracted or "
            f"purged {'is' if one else 'are'} active here ({listed(forgotten_there)}): kept active (an import "
            f"forgets nothing). If {'it' if one else 'they'} should go here too, `memoria forget` "
            f"{'it' if one else 'each'} (`memoria show ID` says who forgot it there and why: the imported lineage)"
        )
    return "; ".join(notes) or None


_KEPT = ("id", "org_id", "project_id", "status", "replaced_by", "tags", "protection_tier", "expires_at")


def _reconcile(
    runtime: Runtime, kept: list[dict[str, Any]]
) -> tuple[int, int, list[str], list[str], list[tuple[str, str, str]]]:
    """Bring the memories the store already held in line with what the import brought (a trial: an export
    imported into a store that held the text an explicit update had corrected left that memory active
    beside its correction, ranked first, with a weight its imported history did not give it):

    - one the export says was superseded by a memory now in the store, and still active here, is
      superseded by it, as the imported lineage says;
    - one corrected here by another memory than the export's correction: the two corrections dispute
      each other (``_forked_corrections``);
    - its global weight is replayed from every report's credits the store now holds.

    Returns (memories superseded, memories whose weight changed, the ids of those active in the export
    that this store retracted or purged, and of those the export says were retracted or purged that are
    active here: each left as this store holds it, and said; the corrections that fork)."""
    from writing.outcomes import replayed_weights, write_weights

    store = runtime.store
    now = runtime.clock()
    by_scope: dict[Scope, list[dict[str, Any]]] = {}
    for row in kept:
        by_scope.setdefault(Scope(row["org_id"], row["project_id"]), []).append(row)
    superseded = reweighed = 0
    forgotten: list[str] = []
    forgotten_there: list[str] = []
    forks: list[tuple[str, str, str]] = []
    for scope, rows in by_scope.items():
        current = store.get_memories([row["id"] for row in rows], scope)
        forgotten += [
            row["id"]
            for row in rows
            if row["status"] == "active"
            and row["id"] in current
            and current[row["id"]].status in ("retracted", "purged")
        ]
        forgotten_there += [
            row["id"]
            for row in rows
            if row["status"] in ("retracted", "purged")
            and row["id"] in current
            and current[row["id"]].status == "active"
        ]
        replacing = {
            row["replaced_by"] for row in rows if row["status"] == "superseded" and row["replaced_by"]
        }
        held = store.get_memories(sorted(replacing), scope) if replacing else {}
        for row in rows:
            here = current.get(row["id"])
            if (
                row["replaced_by"] in held
                and row["status"] == "superseded"
                and here
                and here.status == "active"
            ):
                # ``decided``: a survivor itself superseded since (a chain of updates) still takes it, as in
                # the export; one retracted or purged here does not.
                superseded += len(store.supersede(scope, [here.id], row["replaced_by"], now, decided=True))
        forks += _forked_corrections(runtime, scope, rows, current, held, now)
        # Under the reports' lock, as every weight write: a report made meanwhile is not written over.
        with store.reporting():
            current = store.get_memories(list(current), scope)
            credits = store.credits_for(scope, list(current), across_org=True)
            weights = replayed_weights(
                runtime.weight_policy, {m: current[m] for m in credits if m in current}, credits
            )
            moved = {m: w for m, w in weights.items() if abs(w - current[m].weight) > 1e-9}
            write_weights(store, runtime.corroboration, current, moved, now)
            # Each move said in the memory's weight history, whose rows come from both stores' reports and
            # end at the weight replayed here (a trial: `memoria show` gave 0.970 under rows that end at 0.850).
            store.add_weight_events(
                [
                    WeightEvent(
                        memory_id=m,
                        org_id=scope.org_id,
                        project_id=scope.project_id,
                        session_id=IMPORT_SESSION,
                        weight_before=current[m].weight,
                        weight_after=weight,
                        revision=0,
                        at=now,
                    )
                    for m, weight in moved.items()
                ]
            )
        reweighed += len(moved)
    return superseded, reweighed, sorted(forgotten), sorted(forgotten_there), sorted(forks)


def _forked_corrections(
    runtime: Runtime,
    scope: Scope,
    rows: list[dict[str, Any]],
    current: dict[str, MemoryRecord],
    held: dict[str, MemoryRecord],
    now: datetime,
) -> list[tuple[str, str, str]]:
    """The memories corrected one way in the export and another way here (a trial: a memory edited to
    "Wednesday" on one server and to "Thursday" on the other; after the import both stood, undisputed):
    where each correction leads now (a correction corrected again, on either side, leads on) are two active
    memories, they are an open contradiction, the later one disputing the earlier, as two statements of
    one thing that disagree are. Returns (corrected, here, there) for each."""
    from writing.inheritance import current_version

    store = runtime.store
    forks = []
    records = []
    for row in rows:
        here, theirs = current.get(row["id"]), held.get(row["replaced_by"] or "")
        if row["status"] != "superseded" or here is None or theirs is None or here.status != "superseded":
            continue
        ours = store.get_memory(here.replaced_by, scope) if here.replaced_by else None
        if ours is None or ours.id == theirs.id:
            continue
        mine, there = current_version(store, ours), current_version(store, theirs)
        if mine.id == there.id or mine.status != "active" or there.status != "active":
            continue
        older, newer = sorted((mine, there), key=lambda m: (m.created_at, m.id))
        records.append(
            ContradictionRecord.detected(
                scope,
                older.id,
                newer.id,
                kind="revision",
                detail=f"both correct {here.id}: one here, one in an imported export",
                similarity=token_jaccard(older.content, newer.content),
                at=now,
            )
        )
        forks.append((here.id, mine.id, there.id))
    for record in store.put_contradictions(records):  # as consolidation's: they corroborate nothing
        runtime.corroboration.keep_apart(scope, record.older_id, record.newer_id)
    return forks


def _foreign_note(kept: int, runtime: Runtime) -> str | None:
    """The memories whose exported vectors another embedder made, kept because the configured one did not
    load (a trial: the summary said nothing of them, where docs/cli.md says they are embedded again)."""
    if not kept:
        return None
    info = runtime.models.embedder_info
    return (
        f"{counted(kept, 'memory')} keep the vectors another embedder made: the configured {info.requested} did "
        f"not load ({info.reason}), and the offline fallback's would replace them; once it loads, run `memoria "
        "reembed`"
    )


def _amended(runtime: Runtime, kept: list[dict[str, Any]], amends: set[str]) -> int:
    """The memories the store already held, active here and in the export, whose tags, protection tier or
    expiry the export amended (``memoria edit``, ``replaces=`` with the same text) after any amend made here: given the
    export's, as its imported lineage says (a trial: the lineage said "its tags are now [...]" beside the old
    row, and a tier raised to protected was lost). ``amends``: the ids of the export's amend events. A memory
    whose latest amend was made here keeps what it has; one amended on neither side takes the tags the
    export's copy adds (its tier and expiry stay). Returns how many."""
    from storage.portable import decode_time

    store, amended = runtime.store, 0
    for row in kept:
        tags, tier = list(row.get("tags") or ()), row.get("protection_tier")
        if row["status"] != "active" or tier not in get_args(ProtectionTier):
            continue
        scope = Scope(row["org_id"], row["project_id"])
        expires = decode_time(row["expires_at"], "expires_at") if row.get("expires_at") else None
        with store.exclusive():  # read again and written in one sequence: a purge in between stays purged
            here = store.get_memories([row["id"]], scope).get(row["id"])
            if here is None or here.status != "active":
                continue
            if here.protection_tier == "immutable":  # it keeps its tier, as an amend leaves it (a review)
                tier, expires = "immutable", None
            # An expiry changed alone too (a trial: `memoria edit --until never` was not imported).
            if (list(here.tags), here.protection_tier, here.expires_at) == (tags, tier, expires):
                continue
            # (Not the tags an import merged before: a later import merges the next export's too, a review.)
            events = [
                e
                for e in store.lineage(scope, [here.id])
                if e.memory_id == here.id and e.action == "amend" and e.resolver != IMPORT_ACTOR
            ]
            latest = max(events, key=lambda event: (event.at, event.event_id), default=None)
            if latest is None:
                # Amended on neither side, each written with its own tags (the same text remembered on two
                # machines): the export's add theirs, as a restatement's do (a trial saw them dropped).
                added = [tag for tag in tags if tag not in here.tags]
                merged = [*here.tags, *added][: max(runtime.writer.limits.max_tags, len(here.tags))]
                if len(merged) > len(here.tags):
                    runtime.writer.inheritance.retag(here, merged)
                    # Said in its lineage, as an amend is (a trial: the tags changed and nothing said why).
                    event = LineageEvent.new(
                        scope,
                        "amend",
                        here.id,
                        resolver=IMPORT_ACTOR,
                        reason=f"its tags are now {merged} (were {list(here.tags)}): the imported copy had "
                        f"{added[: len(merged) - len(here.tags)]}",
                        agent_id=IMPORT_ACTOR,
                        session_id=IMPORT_ACTOR,
                        at=runtime.clock(),
                    )
                    store.add_lineage([event])
                    amended += 1
                continue
            if latest.event_id not in amends:
                continue
            tags = tags[: max(runtime.writer.limits.max_tags, len(here.tags))]
            runtime.writer.inheritance.retag(here, tags, (cast(ProtectionTier, tier), expires))
            amended += 1
        if tier == "immutable" and here.weight < 1.0:  # never weighed below where it started
            runtime.writer.inheritance.weigh_behind(scope, here.id)
    return amended


def as_current(schema_version: int, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row of an export made at ``schema_version`` as this schema stores it: an A/B row from before
    the raw-relevance columns (schema 6) held the boosted score in relevance_score, as migration 6 reads it; a
    memory from before visibility (schema 7) was readable by its whole project, as migration 7 says."""
    from storage import schema

    if (
        table == schema.AB_LOGS
        and schema_version < schema.AB_LOGS_SCHEMA_VERSION
        and "boosted_score" not in row
    ):
        return {**row, "boosted_score": row.get("relevance_score")}
    if table == schema.MEMORIES and "visibility" not in row:  # exported before memories had visibility
        return {**row, "visibility": schema.VISIBILITY_DEFAULT}
    return row


def _checked_export(runtime: Runtime, path: Path, progress: Progress) -> tuple[ExportHeader, dict[str, int]]:
    """Read the whole export once, checking every line; the header and the rows per table."""
    from storage import portable, schema

    store = runtime.store
    header: ExportHeader | None = None
    counts: dict[str, int] = {}
    again = "export it again with `memoria export`"
    for number, line in _numbered_lines(path):
        where = f"line {number}"
        try:
            value = json.loads(line)
        except ValueError:
            value = None if header is None else _json_line(path, number, line)
        if header is None:
            try:
                header = portable.parse_header(value)
            except portable.RowError as exc:
                raise _fail(
                    path,
                    where,
                    f"the first line {exc}",
                    "pass a file made by `memoria export`, or name the file's format",
                ) from None
            if header.schema_version > store.schema_version:
                raise _fail(
                    path,
                    where,
                    f"the export comes from a store at schema version {header.schema_version}, newer than "
                    f"this memoria's ({store.schema_version})",
                    "upgrade memoria, then import it",
                )
            continue
        table, row = _entry(path, number, value)
        try:
            current = as_current(header.schema_version, table, row)
            portable.validate_row(store, table, current)
        except portable.RowError as exc:
            raise _fail(path, where, f"the {table} row: {exc}", f"fix the line or {again}") from None
        if table == schema.MEMORIES and (problem := _identity_problem(current)) is not None:
            raise _fail(path, where, f"the memories row {current['id']}: {problem}", again)
        counts[table] = counts.get(table, 0) + 1
        if sum(counts.values()) % 10_000 == 0:
            progress("checking", sum(counts.values()), sum(header.counts.values()))
    if header is None:
        raise ToolFailure(f"{path}: the file is empty: there is nothing to import")
    for table in sorted(set(counts) | set(header.counts)):
        if counts.get(table, 0) != header.counts.get(table, 0):
            raise ToolFailure(
                f"{path}: has {counts.get(table, 0)} {table} rows but its header says "
                f"{header.counts.get(table, 0)}: the file is truncated or was edited; {again}. "
                "Nothing was imported."
            )
    progress("checking", sum(counts.values()), sum(counts.values()))
    return header, counts


_TAG: TypeAdapter[str] = TypeAdapter(Tag)


def _identity_problem(row: dict[str, Any]) -> str | None:
    """Why a memory row's text is not the one its id and content_hash were made from (None when it is).
    Both derive from the text (``writing.drafts.memory_id_for``), so a row whose text was edited after
    export would shadow the original: remembering that text again reads as a duplicate of the edited row,
    and is never stored. A purged row has no text to check. Ids made before private memories named their
    audience (the shared recipe) are read as well."""
    for part in ("org", "project"):  # an id no token grant could name (an older release let one in)
        problem = scope_id_problem(str(row[f"{part}_id"]), part)  # type: ignore[arg-type]
        if problem:
            return f"its {part}_id {row[f'{part}_id']!r} is one no token grant can name: it {problem}"
    for tag in row.get("tags") or ():  # one no call could name (a trial's edited 500-character tag)
        try:
            _TAG.validate_python(tag)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
            return f"its tag {clip(str(tag), 40)!r} is one no call could name ({reason}): fix or drop it"
    if row.get("status") == "purged":
        return None
    digest = content_hash(row["content"])
    if digest != row["content_hash"]:
        return (
            "its content is not the text its content_hash was made from: the file was edited after export "
            "(a memory's id and hash come from its text; to change what it says, import the original and "
            "correct it with `memoria edit`)"
        )
    scope = Scope(row["org_id"], row["project_id"])
    audience = Audience.of(row.get("visibility") or "project", row["agent_id"], row.get("session_id") or "")
    if row["id"] not in {memory_id_for(scope, digest), memory_id_for(scope, digest, audience)}:
        return "its id is not the one its scope and text give: the file was edited after export"
    return None


def _json_line(
    path: Path, number: int, line: str, advice: str = "the file may be truncated or edited: export it again"
) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise _fail(path, f"line {number}", f"is not JSON ({getattr(exc, 'msg', exc)})", advice) from None


def _entry(path: Path, number: int, value: Any) -> tuple[str, dict[str, Any]]:
    from storage import portable

    if (
        not isinstance(value, dict)
        or not isinstance(value.get("row"), dict)
        or set(value) != {"table", "row"}
    ):
        raise _fail(
            path, f"line {number}", 'expected {"table": name, "row": {...}}', "export the store again"
        )
    table = value["table"]
    if table not in portable.TABLE_ORDER:
        raise _fail(
            path,
            f"line {number}",
            f"names no table of this memoria ({table!r})",
            "upgrade memoria if the export is from a newer one",
        )
    return table, value["row"]


def _batches(path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The rows after the header, checked already, in runs of one table of up to ``WRITE_BATCH``."""
    table: str | None = None
    rows: list[dict[str, Any]] = []
    lines = _numbered_lines(path)
    next(lines)  # the header
    for number, line in lines:
        name, row = _entry(path, number, json.loads(line))
        if rows and (name != table or len(rows) >= WRITE_BATCH):
            yield str(table), rows
            rows = []
        table = name
        rows.append(row)
    if rows:
        yield str(table), rows


def _with_vectors(
    rows: list[dict[str, Any]], runtime: Runtime, progress: Progress
) -> tuple[list[dict[str, Any]], int, int]:
    """Memory rows with vectors this store can use: made by this server's embedder (kept as exported)
    or embedded again by it. A purged memory has no text to embed: it gets a blank vector, as a purge
    leaves. Rows the store already holds are not embedded (the import skips them). When the configured
    embedder did not load (the offline fallback runs), exported vectors are kept as they are rather than
    replaced by hashed ones: `memoria doctor` then lists them and `memoria reembed` redoes them once the
    model loads. Returns the rows, how many were embedded, and how many keep another embedder's vectors."""
    import numpy as np

    from storage import portable

    store = runtime.store
    embedder = runtime.models.embedder
    keep_foreign = runtime.models.embedder_info.offline_fallback
    present = portable.existing_memory_ids(store, [row["id"] for row in rows])
    ready: list[dict[str, Any]] = []
    pending: list[int] = []  # positions to embed
    kept = 0
    for row in rows:
        usable = portable.has_vector(store, row)
        if row["status"] == "purged" or not row["content"]:
            ready.append(row if usable else portable.with_vector(row, np.zeros(store.vector_dim)))
        else:
            foreign = row["embedder"] != embedder.name
            if row["id"] not in present and ((foreign and not keep_foreign) or not usable):
                pending.append(len(ready))
            kept += row["id"] not in present and foreign and keep_foreign and usable
            ready.append(row)
    for start in range(0, len(pending), EMBED_BATCH):
        positions = pending[start : start + EMBED_BATCH]
        vectors = embedder.embed_documents([ready[i]["content"] for i in positions])
        for position, vector in zip(positions, vectors, strict=True):
            ready[position] = portable.with_vector(ready[position], vector, embedder.name)
        progress("embedding", start + len(positions), len(pending))
    return ready, len(pending), kept


# ------------------------------------------------------------------ transcripts


def _read_sessions(path: Path, kind: Literal["locomo", "transcript"]) -> list[transcripts.Session]:
    text = _text_of(path)
    try:
        if kind == "locomo":
            data = _json_document(path, text)
            return transcripts.locomo_sessions([data] if isinstance(data, dict) else data)
        stripped = text.lstrip()
        if stripped.startswith("["):
            return transcripts.json_sessions(_json_document(path, text))
        if stripped.startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                if exc.msg != "Extra data":  # not JSON Lines either: one broken document
                    raise _fail(
                        path, f"line {exc.lineno}", f"is not valid JSON ({exc.msg})", "fix the JSON"
                    ) from None
                data = None
            if isinstance(data, dict) and "messages" in data:
                return transcripts.json_sessions(data)
            lines = (
                (number, _json_line(path, number, line, "fix that line (each line one JSON message)"))
                for number, line in enumerate(text.splitlines(), start=1)
                if line.strip()
            )
            return transcripts.jsonl_sessions(lines)
        return transcripts.text_sessions(text.splitlines())
    except transcripts.TranscriptError as exc:
        raise ToolFailure(
            f"{path}, {exc}. Nothing was imported; fix the file, or pass --format if it is another kind"
        ) from None


def _json_document(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"line {exc.lineno}", f"is not valid JSON ({exc.msg})", "fix the JSON") from None


def _import_sessions(
    runtime: Runtime,
    path: Path,
    kind: Literal["locomo", "transcript"],
    sessions: Sequence[transcripts.Session],
    scope: Scope,
    agent_id: str,
    progress: Progress,
) -> TransferSummary:
    from storage import schema

    records, blank, split, with_secrets = _records(runtime, path, kind, sessions, scope, agent_id)
    store = runtime.store
    written = 0
    progress("importing", 0, len(records))
    for start in range(0, len(records), WRITE_BATCH):
        batch = records[start : start + WRITE_BATCH]
        # The same record and vector building as remember_many; consolidation is not run (see import_file).
        news = runtime.writer.embedded(batch, runtime.writer.preceding_contents(batch))
        for stored, created in store.insert_many(news):
            if created:
                written += 1
                runtime.writer.observe(stored)
        progress("importing", start + len(batch), len(records))
    memories = TableCount(written=written, skipped=len(records) - written + blank)
    episodes = list(dict.fromkeys(record.episode_id for record in records if record.episode_id))
    notes = []
    if split:
        notes.append(
            f"{split} message{'s' if split > 1 else ''} longer than a memory may be "
            f"(MEMORIA_MAX_CONTENT_CHARS, {runtime.writer.limits.max_content_chars:,}) stored in parts, each "
            "labelled [part i of n], in order in its episode"
        )
    if with_secrets:  # as remember says it of one memory (a trial: an import said nothing of them)
        notes.append(f"{counted(with_secrets, 'message')} stored with what looked like secrets replaced")
    return TransferSummary(
        format=kind,
        tables={schema.MEMORIES: memories},
        episodes=episodes,
        note="; ".join(notes) or None,
        seconds=0.0,
    )


def episode_stem(path: Path) -> str:
    """What a transcript's episodes are named after (``<stem>:<session>``): the file and where it lies.
    Two unrelated transcripts called transcript.txt must not become one episode (their turns would lend
    each other relevance as episode neighbours), and the same file imported again (grown since) goes on
    in its own episodes."""
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:6]
    return f"{path.stem[:60] or 'transcript'}-{where}"


def _records(
    runtime: Runtime,
    path: Path,
    kind: str,
    sessions: Sequence[transcripts.Session],
    scope: Scope,
    agent_id: str,
) -> tuple[list[MemoryRecord], int, int, int]:
    """Every message as the record ``remember`` would store, checked before anything is written; and
    how many messages were blank (not stored), too long for one memory (stored in parts), and stored with
    secrets replaced (``retrieval.redaction``)."""
    now = runtime.clock()
    stem = episode_stem(path)
    undated = sum(1 for s in sessions if s.when is None for m in s.messages if m.when is None)
    undated_at = now - timedelta(seconds=undated)  # undated messages: one second apart, ending now
    records: list[MemoryRecord] = []
    blank = split = with_secrets = 0
    limit = runtime.writer.limits.max_content_chars
    for session in sessions:
        episode_id = session.name if kind == "locomo" else f"{stem}:{session.name[:60]}"
        for index, message in enumerate(session.messages):
            if not has_visible_text(message.text.replace("\x00", "")):  # "Bob:" alone is no memory
                blank += 1
                continue
            when = _when(message, session, index, undated_at)
            if message.when is None and session.when is None:
                undated_at += timedelta(seconds=1)
            speaker = message.speaker
            said = f"{speaker}: " if speaker else ""
            # A message longer than a memory may be goes in parts, in order (``in_batch_order`` below), cut
            # from its redacted text: a secret's marker may be longer than the secret, and a part over the
            # limit would refuse the whole file (a review).
            texts, secret = [message.text], False
            if len(said) + len(message.text) > limit // 8:  # a marker is at most a few times its secret
                redacted = redact(message.text).text
                secret = redacted != message.text
                if len(said) + len(redacted) > limit:
                    texts = transcripts.parts_of(redacted, max(1, limit - len(said) - PART_LABEL))
                    texts = [f"[part {n} of {len(texts)}] {text}" for n, text in enumerate(texts, start=1)]
                    split += 1
            for text in texts:
                try:
                    args = RememberInput(
                        content=said + text,
                        tags=list(message.tags),
                        agent_id=speaker or agent_id,
                        session_id=episode_id,
                        episode_id=episode_id,
                        occurred_at=when,
                        org_id=scope.org_id,
                        project_id=scope.project_id,
                    )
                    prepared = prepare(runtime, draft_of(args, runtime, Caller(agent_id, episode_id)))
                    record = prepared.record
                    secret = secret or prepared.redacted is not None
                except ValidationError as exc:
                    problems = "; ".join(
                        f"{'.'.join(str(p) for p in error['loc'])} {error['msg']}" for error in exc.errors()
                    )
                    raise _fail(path, message.where, problems, "fix the message") from None
                except ToolFailure as exc:
                    raise _fail(path, message.where, str(exc), "fix the message") from None
                records.append(replace(record, consolidated_at=now))
            with_secrets += secret
    # Messages (and parts) that share a time keep the file's order, a microsecond apart.
    return _in_stored_episodes(runtime, in_batch_order(records), scope), blank, split, with_secrets


def _in_stored_episodes(runtime: Runtime, records: list[MemoryRecord], scope: Scope) -> list[MemoryRecord]:
    """A session some of whose messages are stored already (the file imported before, from another
    folder or by an earlier release that named episodes after the file alone, and grown since) goes on
    in the episode they are in, so its new messages follow the old ones there."""
    stored = runtime.store.get_memories([record.id for record in records], scope)
    already: dict[str, str] = {}  # this import's episode -> the one its stored messages are in
    for record in records:
        found = stored.get(record.id)
        if (
            record.episode_id
            and found is not None
            and found.episode_id
            and _session_of(found.episode_id) == _session_of(record.episode_id)
        ):
            already.setdefault(record.episode_id, found.episode_id)
    if not already:
        return records
    return [
        replace(record, episode_id=already[record.episode_id], session_id=already[record.episode_id])
        if record.episode_id in already
        else record
        for record in records
    ]


_FOLDER_MARK = re.compile(r"-[0-9a-f]{6}$")  # what ``episode_stem`` adds after a file's name


def _session_of(episode_id: str) -> tuple[str, str]:
    """An imported episode's file name and session, without the mark of the folder the file lay in: the same
    session of the same file, imported from another folder (or by an earlier release, which named episodes
    after the file alone). Only such a session goes on in the episode its stored messages are in; one that
    shares a message with another file's ("ok", "thanks!") keeps its own (a trial: 1,143 sessions of 16
    quarterly files became 111 episodes, one holding 1,022 memories from 2023 to 2026)."""
    stem, _, session = episode_id.partition(":")
    return _FOLDER_MARK.sub("", stem), session


def _when(
    message: transcripts.Message, session: transcripts.Session, index: int, undated_at: datetime
) -> datetime:
    """The message's own time; else its session's, plus a second per message before it (the order
    within the session is kept); else ``undated_at``."""
    if message.when is not None:
        return message.when
    if session.when is not None:
        return session.when + timedelta(seconds=index)
    return undated_at


# ------------------------------------------------------------------ re-embedding


def reembed(
    runtime: Runtime,
    *,
    scope: Scope | None = None,
    all_memories: bool = False,
    batch_size: int = 64,
    progress: Progress = no_progress,
) -> ReembedSummary:
    """Give memories (of ``scope``, or all; every status but purged) vectors from this server's embedder:
    those made by another one, or every one with ``all_memories``. Written batch by batch under the
    write lock, so recall goes on meanwhile, and seen at once by the scope copies and LanceDB search."""
    from writing import reembedding

    if batch_size < 1:
        raise ToolFailure(f"batch_size must be >= 1, but got {batch_size}")
    started = time.perf_counter()
    store = runtime.store
    embedder = runtime.models.embedder
    info = runtime.models.embedder_info
    if info.offline_fallback:  # never replace real vectors with the fallback's hashed ones
        raise ToolFailure(
            f"the configured embedder {info.requested} did not load ({info.reason}), so re-embedding would "
            f"give every memory the offline fallback's {embedder.name} vectors instead: fix the model first "
            "(`memoria doctor` says how), or set MEMORIA_EMBEDDER=hashed if the hashed vectors are what you want"
        )
    if embedder.dimension != store.vector_dim:
        raise ToolFailure(
            f"the embedder {embedder.name} makes {embedder.dimension}-d vectors but this store holds "
            f"{store.vector_dim}-d ones: export the store (`memoria export`), then import the file into a "
            f"new folder with this embedder and MEMORIA_VECTOR_DIM={embedder.dimension} configured (the "
            "import embeds every memory again)"
        )
    done = reembedding.reembed(
        store, embedder, scope=scope, all_memories=all_memories, batch_size=batch_size, progress=progress
    )
    # Also after a run that found nothing to embed: one stopped between its vectors and its sweep left the
    # sweep's memories waiting (a trial: the second run said "consolidated 0" and never compared them).
    consolidated, superseded = _consolidated_again(runtime, scope, progress)
    return ReembedSummary(
        examined=done.examined,
        reembedded=done.written,
        consolidated=consolidated,
        superseded=superseded,
        seconds=time.perf_counter() - started,
        embedder=embedder.name,
    )


def _consolidated_again(runtime: Runtime, scope: Scope | None, progress: Progress) -> tuple[int, int]:
    """The consolidation sweep over every memory waiting for it (those another embedder's vectors kept from
    their neighbours: ``storage.reembedding``, this run's or an earlier one's stopped before its sweep), now
    rather than at a server's next pass: how many it examined, and superseded. Nothing when consolidation is
    off."""
    consolidation, store = runtime.consolidation, runtime.store
    if not consolidation.policy.enabled:
        return 0, 0
    examined = superseded = 0
    for each in [scope] if scope is not None else store.scopes():
        while seeds := [memory.id for memory in store.unconsolidated(each, consolidation.policy.sweep_batch)]:
            swept = consolidation.sweep(each)
            runtime.writer.track(each, swept)
            superseded += len(swept.superseded)
            marked = sum(1 for m in store.get_memories(seeds, each).values() if m.consolidated_at is not None)
            if not marked:  # a sweep that examined none would find them again: no endless loop
                break
            examined += marked
            progress("consolidating", examined, None)
    return examined, superseded
