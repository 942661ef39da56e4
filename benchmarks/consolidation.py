"""Consolidation on a realistic corpus: the turns of LoCoMo conversations remembered twice, once as said
and once lightly reworded, by two agents or by one. Reports how many memories were stored, merged, kept,
superseded and flagged, which resolver decided, how many merges joined two *different* turns (wrong
merges), and recall@5/@10 of the evidence turns against a store written once, so a quality drop shows.

    python -m benchmarks.consolidation --data ../shared/data/locomo/locomo-dev.json
    python -m benchmarks.consolidation --data FILE --conversations conv-26 conv-30

Runs on the offline backend (hashed vectors + full-text, no reranker, no LLM): the deterministic
resolver decides. Scenarios:
- once: one agent writes each session's turns once (remember_many; the reference for recall quality);
- two agents: as each turn is said, agent A remembers it and agent B a reworded copy (default policy:
  different agents' near-duplicates are corroboration and are kept);
- two agents, merged: the same with MEMORIA_CONSOLIDATION_ACROSS_AGENTS on;
- one agent twice: agent A writes the whole conversation, then again, reworded, in later sessions.

Each turn is one memory, "speaker: text", in an episode per session. Recall is scored in rank order
(final score), with the query's evidence turns; a memory that absorbed others stands for their turns too.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.locomo import Conversation, Turn, load, recall_at_k, standing_turns
from benchmarks.reporting import RESULTS, offline_settings, write_json

KS = (5, 10)

# Light rewording: the kind of difference two note-takers produce (contractions, fillers, punctuation,
# a synonym), never a change of meaning.
_CONTRACTIONS = [
    ("I'm", "I am"),
    ("it's", "it is"),
    ("It's", "It is"),
    ("don't", "do not"),
    ("that's", "that is"),
    ("That's", "That is"),
    ("can't", "cannot"),
    ("I've", "I have"),
    ("you're", "you are"),
    ("I'll", "I will"),
    ("didn't", "did not"),
    ("wasn't", "was not"),
]
_SYNONYMS = [
    ("amazing", "incredible"),
    ("awesome", "great"),
    ("glad", "happy"),
    ("Thanks", "Thank you"),
    ("kids", "children"),
    ("pic", "photo"),
    ("really", "truly"),
    ("pretty", "quite"),
    ("fun", "enjoyable"),
    ("loved", "adored"),
]
_FILLERS = re.compile(r"\b(?:so|just|actually|totally|definitely)\s+", re.IGNORECASE)


def reword(text: str, key: str) -> str:
    """A deterministic light rewording of ``text`` (about one in four turns is left verbatim)."""
    rng = random.Random(zlib.crc32(key.encode()))
    if rng.random() < 0.25:
        return text
    edits = [_contract, _synonym, _filler, _punctuation]
    rng.shuffle(edits)
    changed = text
    for edit in edits[: rng.choice((1, 2))]:
        changed = edit(changed, rng)
    if changed == text:
        changed = _punctuation(text, rng)
    return changed


def _contract(text: str, rng: random.Random) -> str:
    pairs = [(a, b) for a, b in _CONTRACTIONS if a in text] + [(b, a) for a, b in _CONTRACTIONS if b in text]
    if not pairs:
        return text
    old, new = rng.choice(pairs)
    return text.replace(old, new, 1)


def _synonym(text: str, rng: random.Random) -> str:
    pairs = [(a, b) for a, b in _SYNONYMS if re.search(rf"\b{a}\b", text)]
    if not pairs:
        return text
    old, new = rng.choice(pairs)
    return re.sub(rf"\b{old}\b", new, text, count=1)


def _filler(text: str, rng: random.Random) -> str:
    return _FILLERS.sub("", text, count=1)


def _punctuation(text: str, rng: random.Random) -> str:
    if text.endswith("!"):
        return text[:-1] + "."
    if text.endswith((".", "?")):
        return text[:-1]
    return text + "."


def memory_text(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.said}"


@dataclass(frozen=True)
class Scenario:
    name: str
    writers: tuple[str, ...]  # the agents writing; the second writes the reworded copy
    plan: str = "passes"  # "passes": one whole pass per writer; "interleaved": turn by turn
    across_agents: bool = False


SCENARIOS = (
    Scenario("once", ("a",)),
    Scenario("two agents", ("a", "b"), plan="interleaved"),
    Scenario("two agents, merged", ("a", "b"), plan="interleaved", across_agents=True),
    Scenario("one agent twice", ("a", "a")),
)


def run_scenario(conversation: Conversation, scenario: Scenario, db: Path) -> dict[str, Any]:
    from server.state import build_runtime
    from server.upkeep import aggregation_pass
    from storage.records import Scope
    from tools.common import Caller
    from tools.recall import RecallInput, recall
    from tools.remember import RememberInput, remember
    from tools.remember_many import BatchItem, RememberManyInput, remember_many

    settings = offline_settings(db, consolidation_across_agents=scenario.across_agents)
    runtime = build_runtime(settings)
    scope = Scope(settings.org_id, conversation.sample_id)
    turns_of: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    try:
        episode = f"{conversation.sample_id}-session-{{}}"

        def tally(turn: Turn, result: Any) -> None:
            turns_of.setdefault(result.id, set()).add(turn.dia_id)
            counts[result.status] += 1
            summary = result.consolidation
            if summary is not None:
                counts["revised on write"] += len(summary.revised)
                counts["flagged contradictions"] += len(summary.contradicts)
                counts["kept as distinct on write"] += len(summary.kept)

        def compact() -> None:
            # The server compacts on a timer (MEMORIA_MAINTENANCE_INTERVAL_SECONDS); here, once per session
            # written, so the store is in the shape a running server keeps it in.
            runtime.store.maintain(min_fragments=settings.compaction.min_fragments)

        sessions = conversation.sessions()
        if scenario.plan == "interleaved":  # both agents note each turn as it is said
            for number, turns in sessions.items():
                for turn in turns:
                    for index, agent in enumerate(scenario.writers):
                        text = memory_text(turn)
                        result = remember(
                            RememberInput(
                                content=reword(text, turn.dia_id) if index else text,
                                episode_id=episode.format(number),
                                project_id=conversation.sample_id,
                            ),
                            runtime,
                            Caller(f"agent-{agent}", f"{agent}-session{number}"),
                        )
                        counts["writes"] += 1
                        tally(turn, result)
                compact()
        else:  # each pass writes the whole conversation, a session per batch
            for index, agent in enumerate(scenario.writers):
                for number, turns in sessions.items():
                    items = [
                        BatchItem(
                            content=reword(memory_text(t), t.dia_id) if index else memory_text(t),
                            episode_id=episode.format(number),
                        )
                        for t in turns
                    ]
                    out = remember_many(
                        RememberManyInput(items=items, project_id=conversation.sample_id),
                        runtime,
                        Caller(f"agent-{agent}", f"{agent}-pass{index + 1}-session{number}"),
                    )
                    compact()
                    counts["writes"] += len(items)
                    counts["collapsed in batch"] += out.collapsed
                    for turn, result in zip(turns, out.results, strict=True):
                        tally(turn, result)
        write_seconds = time.perf_counter() - started
        print(f"  written in {write_seconds:.1f} s; sweeping and recalling ...", file=sys.stderr)
        swept = aggregation_pass(runtime)
        counts["superseded by the sweep"] += swept.superseded
        counts["corroboration clusters"] = swept.clusters

        memories = runtime.store.get_memories(list(turns_of), scope)
        statuses = Counter(m.status for m in memories.values())
        events = runtime.store.lineage(scope, list(turns_of))
        resolvers = Counter(f"{e.action} by {e.resolver}" for e in {e.event_id: e for e in events}.values())
        wrong = _wrong_merges(memories, turns_of)
        standing = standing_turns(memories, turns_of)  # a survivor stands for every turn it absorbed
        attested = len(runtime.store.attesters(scope)) if scenario.writers[1:] else 0

        quality = _score(
            conversation,
            lambda q: recall(
                RecallInput(query=q, top_k=max(KS), char_budget=200_000, project_id=conversation.sample_id),
                runtime,
                Caller("reader", "bench-read"),
            ),
            standing,
        )
    finally:
        runtime.close()
    return {
        "scenario": scenario.name,
        "conversation": conversation.sample_id,
        "writes": counts["writes"],
        "stored": counts["stored"],
        "exact duplicates": counts["duplicate"],
        "collapsed in batch": counts["collapsed in batch"],
        "active": statuses.get("active", 0),
        "superseded": statuses.get("superseded", 0),
        "kept as distinct on write": counts["kept as distinct on write"],
        "revised on write": counts["revised on write"],
        "flagged contradictions": counts["flagged contradictions"],
        "superseded by the sweep": counts["superseded by the sweep"],
        "corroboration clusters": counts["corroboration clusters"],
        "memories with attestations": attested,
        "wrong merges": len(wrong),
        "wrong merge examples": [list(pair) for pair in wrong[:5]],
        "decisions": dict(resolvers.most_common()),
        "write_seconds": round(write_seconds, 2),
        **quality,
    }


def _wrong_merges(memories: dict[str, Any], turns_of: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Superseded memories whose survivor stands for none of the same turns: two different turns merged
    (often the same short phrase said twice, such as "Thanks!"). Returns (superseded, survivor) texts."""
    wrong = []
    for memory_id, memory in memories.items():
        if memory.status == "superseded" and memory.replaced_by:
            survivor_turns = turns_of.get(memory.replaced_by, set())
            if not survivor_turns & turns_of.get(memory_id, set()):
                survivor = memories.get(memory.replaced_by)
                wrong.append((memory.content, survivor.content if survivor else memory.replaced_by))
    return wrong


def _score(conversation: Conversation, ask: Any, standing: dict[str, set[str]]) -> dict[str, Any]:
    scores: dict[int, list[float]] = {k: [] for k in KS}
    redundant: list[int] = []
    for question in conversation.scored_questions():
        # Scored in rank order (final score), not context order: the context groups memories by episode.
        ranked = sorted(ask(question.question).memories, key=lambda m: -m.score)
        returned = [standing.get(m.id, set()) for m in ranked]
        for k in KS:
            scores[k].append(recall_at_k(returned, question.evidence, k))
        ids = [m.id for m in ranked[: max(KS)]]
        redundant.append(
            len(ids) - len({frozenset(standing.get(i, {i})) for i in ids}) if any(returned[: max(KS)]) else 0
        )
    return {
        "questions": len(scores[KS[0]]),
        **{f"recall@{k}": round(statistics.fmean(values), 4) for k, values in scores.items()},
        "redundant slots in top 10": round(statistics.fmean(redundant), 3),
    }


def run(data: Path, only: Sequence[str] | None) -> dict[str, Any]:
    conversations = load(data, only)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memoria-consolidation-") as tmp:
        for conversation in conversations:
            for number, scenario in enumerate(SCENARIOS):
                print(
                    f"{conversation.sample_id}: {scenario.name} "
                    f"({len(conversation.turns)} turns x {len(scenario.writers)}) ...",
                    file=sys.stderr,
                )
                rows.append(
                    run_scenario(conversation, scenario, Path(tmp) / f"{conversation.sample_id}-{number}")
                )
    return {
        "data": str(data),
        "backend": "offline (hashed vectors + full-text, rules resolver)",
        "rows": rows,
    }


COLUMNS = (
    ("writes", "writes"),
    ("stored", "stored"),
    ("exact duplicates", "exact dup"),
    ("active", "active"),
    ("superseded", "supersed"),
    ("kept as distinct on write", "kept"),
    ("revised on write", "revised"),
    ("flagged contradictions", "contra"),
    ("wrong merges", "wrong"),
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("redundant slots in top 10", "dup/10"),
)


def print_table(report: dict[str, Any]) -> None:
    print(f"\nconsolidation on {report['data']} - {report['backend']}")
    header = f"{'conversation':<9} {'scenario':<20}" + "".join(f"{short:>9}" for _, short in COLUMNS)
    print(header)
    for row in report["rows"]:
        cells = "".join(
            f"{row[key]:>9.3f}" if isinstance(row[key], float) else f"{row[key]:>9}" for key, _ in COLUMNS
        )
        print(f"{row['conversation']:<9} {row['scenario']:<20}{cells}")
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for row in report["rows"]:
        by_scenario.setdefault(row["scenario"], []).append(row)
    if len(report["rows"]) > len(by_scenario):
        print("\nover all conversations (question-weighted):")
        for name, rows in by_scenario.items():
            total = sum(r["questions"] for r in rows)
            means = {k: sum(r[f"recall@{k}"] * r["questions"] for r in rows) / total for k in KS}
            print(
                f"  {name:<20} active {sum(r['active'] for r in rows):>6} / writes {sum(r['writes'] for r in rows):>6}  "
                + "  ".join(f"R@{k} {v:.3f}" for k, v in means.items())
            )
    print("\ndecisions (action by resolver):")
    for row in report["rows"]:
        print(f"  {row['conversation']} {row['scenario']}: {row['decisions'] or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument("--conversations", nargs="*", help="sample ids (default: every conversation)")
    parser.add_argument("--out", type=Path, default=RESULTS / "consolidation.json")
    args = parser.parse_args(argv)
    report = run(args.data, args.conversations)
    print_table(report)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
