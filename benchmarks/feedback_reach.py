"""How far feedback weighting can lift recall on LoCoMo, and what limits it.

The feedback experiment of ``benchmarks/quality.py`` reports what memoria's weighting does. This one asks
what any weighting could do with the same honest outcomes: every question is recalled once through the
tool (no feedback), the training questions' recalled evidence memories are the ones an agent would name
in ``helpful_ids`` ("credited"), and the test questions' candidates are re-ranked offline by bounds and by
simple policies:

- ``credited, oracle``: every credited memory that is evidence for the test question placed first (what a
  weighting could reach if it knew which credited memory serves which question);
- ``credited, blind``: every credited memory placed first, whatever the question;
- ``query-close xB``: a credited memory's score times 1 + B x closeness of the closest training query
  that credited it (memoria's weight for a query, with the closeness points of the backend);
- ``... + credited non-candidates``: the same, and a credited memory that is not among the question's
  candidates joins them (a feedback leg of the search), either as the oracle would (the credited evidence
  first) or scored as it scored for the closest reporting query, scaled to the question's best score and
  by closeness;
- ``session-only, ...``: no memory named, each training session reported honestly (success exactly when
  an evidence memory was returned), its returned memories credited by the server's own ``assign_credit``
  with a share by position (the server's 1 / log2(2 + rank), or another shape) and weighed by its own
  ``contextual_weight`` for each test question; the training questions asked again ("seen") too.

It also prints why the oracle is out of reach: how well the cosine of two questions separates a credited
memory that is evidence for the test question from one that is not (ROC AUC), and how many of the related
test questions' missed evidence memories were credited but not even among the candidates (no weighting
can lift those).

    .venv/bin/python -m benchmarks.feedback_reach --data ../shared/data/locomo/locomo-dev.json \\
        --conversations conv-43 conv-44 conv-47
    # the real embedder: add --embedding-model <an all-MiniLM-L6-v2 folder>
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np

from benchmarks.locomo import load, recall_at_k, standing_turns
from benchmarks.quality import (
    ask_for_output,
    base_settings,
    model_settings,
    remember_conversation,
    split_questions,
)
from retrieval.trace import lent_after_weighting

K = 5


@dataclass
class Asked:
    """One question as recalled before any feedback."""

    evidence: set[str]
    vector: np.ndarray
    returned: list[str]  # memory ids, best score first
    candidates: list[tuple[str, float]]  # direct candidates and the score feedback would weight
    helpful: set[str] = field(default_factory=set)  # training questions: the recalled evidence memories
    shown: list[tuple[str, float]] = field(default_factory=list)  # the returned memories and their scores
    query: str = ""
    # What each direct candidate's episode neighbours and its answer type lent it (added after weighting, as
    # the server adds it), as traced before any feedback: the server lends from weighted scores, so a weight
    # that moves one moves the loan too; this re-ranking leaves that out.
    lent: dict[str, float] = field(default_factory=dict)


@dataclass
class Conversation:
    turns_of: dict[str, set[str]]
    train: list[Asked]
    test: list[Asked]
    groups: list[str]


def recall_all(conversation: Any, runtime: Any, turns_of: dict[str, set[str]]) -> Conversation:
    from storage.records import Scope

    scope = Scope(runtime.settings.org_id, conversation.sample_id)
    embedder = runtime.models.embedder
    train_q, test_q, groups = split_questions(conversation.scored_questions())
    asked: dict[int, list[Asked]] = {0: [], 1: []}
    for part, questions in enumerate((train_q, test_q)):
        for index, question in enumerate(questions):
            returned, out = ask_for_output(runtime, conversation, question, f"reach-{part}-{index}")
            record = runtime.store.get_retrieval(out.retrieval_id, scope)
            trace = json.loads(record.trace_json)["candidates"] if record is not None else []
            vector = np.asarray(embedder.embed_query(question.question), dtype=float)
            direct = [c for c in trace if c["source"] == "direct"]
            item = Asked(
                set(question.evidence),
                vector / (np.linalg.norm(vector) or 1.0),
                [m.id for m in returned],
                [(c["id"], _boosted(c["scores"])) for c in direct],
                lent={c["id"]: lent_after_weighting(c["scores"]) for c in direct},
                shown=[(m.id, m.score) for m in returned],
                query=question.question,
            )
            if part == 0:
                item.helpful = {m for m in item.returned if turns_of.get(m, set()) & item.evidence}
            asked[part].append(item)
    return Conversation(turns_of, asked[0], asked[1], groups)


def _boosted(scores: dict[str, Any]) -> float:
    """What feedback weights: relevance plus the corroboration boost, faded by decay (as Candidate.boosted_score)."""
    boost = scores.get("corroboration_boost") or 0.0
    decay = scores.get("decay")
    return (scores["relevance"] + boost) * (1.0 if decay is None else decay)


Policy = Callable[[Asked, Conversation], dict[str, float]]  # memory id -> score multiplier
Injection = Callable[[Asked, Conversation], dict[str, float]]  # memory id -> score, if not a candidate


def credited_by(conversation: Conversation) -> dict[str, list[Asked]]:
    credited: dict[str, list[Asked]] = {}
    for question in conversation.train:
        for memory_id in question.helpful:
            credited.setdefault(memory_id, []).append(question)
    return credited


def oracle(question: Asked, conversation: Conversation) -> dict[str, float]:
    return {
        m: 1e6 for m in credited_by(conversation) if conversation.turns_of.get(m, set()) & question.evidence
    }


def blind(question: Asked, conversation: Conversation) -> dict[str, float]:
    return dict.fromkeys(credited_by(conversation), 1e6)


def query_close(boost: float, start: float, full: float) -> Policy:
    def policy(question: Asked, conversation: Conversation) -> dict[str, float]:
        weights = {}
        for memory_id, reporters in credited_by(conversation).items():
            cosine = max(float(question.vector @ other.vector) for other in reporters)
            closeness = min(1.0, max(0.0, (cosine - start) / (full - start)))
            weights[memory_id] = 1.0 + boost * closeness
        return weights

    return policy


def oracle_injected(question: Asked, conversation: Conversation) -> dict[str, float]:
    return oracle(question, conversation)


def closest_reporter(question: Asked, reporters: Sequence[Asked]) -> tuple[float, Asked]:
    return max(((float(question.vector @ other.vector), other) for other in reporters), key=lambda p: p[0])


def injected_as_reported(start: float, full: float) -> Injection:
    """A credited memory scored as it scored for the closest reporting query, relative to that query's best
    candidate, times this question's best score and the closeness of the two queries."""

    def injection(question: Asked, conversation: Conversation) -> dict[str, float]:
        best_here = max((score for _, score in question.candidates), default=0.0)
        found = {}
        for memory_id, reporters in credited_by(conversation).items():
            cosine, reporter = closest_reporter(question, reporters)
            closeness = min(1.0, max(0.0, (cosine - start) / (full - start)))
            scored = dict(reporter.candidates)
            best_there = max(scored.values(), default=0.0) or 1.0
            if closeness > 0.0:
                found[memory_id] = closeness * best_here * scored.get(memory_id, 0.0) / best_there
        return found

    return injection


def session_only(share: Callable[[int], float], closeness: Callable[[float], float]) -> Policy:
    """Every training session reported without naming a memory, honestly (success exactly when an evidence
    memory was returned), credited by the server's ``assign_credit`` with ``share`` for a place, and each
    memory's weight for the question replayed by the server's ``contextual_weight``. A memory's score for
    the floor is the one it was returned with (the server reads it before weighting and lending)."""
    from retrieval.outcomes import (
        CreditedReport,
        CreditPolicy,
        ShownContext,
        ShownMemory,
        WeightPolicy,
        assign_credit,
        contextual_weight,
    )

    class Shaped(CreditPolicy):
        @staticmethod
        def position_share(rank: int) -> float:
            return share(rank)

    credited: dict[int, dict[str, list[tuple[Asked, Any]]]] = {}

    def reports_of(conversation: Conversation) -> dict[str, list[tuple[Asked, Any]]]:
        if id(conversation) not in credited:
            found: dict[str, list[tuple[Asked, Any]]] = {}
            for question in conversation.train:
                success = any(
                    conversation.turns_of.get(m, set()) & question.evidence for m, _ in question.shown
                )
                context = ShownContext(question.query, tuple(ShownMemory(m, s) for m, s in question.shown))
                for credit in assign_credit([context], session_score=float(success), policy=Shaped()):
                    found.setdefault(credit.memory_id, []).append((question, credit))
            credited[id(conversation)] = found
        return credited[id(conversation)]

    def policy(question: Asked, conversation: Conversation) -> dict[str, float]:
        reports = reports_of(conversation)
        weights = {}
        for memory_id, _ in question.candidates:
            if memory_id in reports:
                replay = [
                    CreditedReport(f"s{index}", credit, closeness(float(question.vector @ reporter.vector)))
                    for index, (reporter, credit) in enumerate(reports[memory_id])
                ]
                weights[memory_id] = contextual_weight(replay, WeightPolicy())[0]
        return weights

    return policy


def change(
    conversations: Sequence[Conversation],
    policy: Policy,
    injection: Injection | None = None,
    *,
    seen: bool = False,
) -> dict[str, float]:
    """Mean R@5 change per group (related, unrelated) over the test questions; with ``seen``, also over
    the training questions asked again."""
    changes: dict[str, list[float]] = {}
    for conversation in conversations:
        asked = list(zip(conversation.test, conversation.groups, strict=True))
        asked += [(question, "seen") for question in conversation.train] if seen else []
        for question, group in asked:
            weights = policy(question, conversation)
            lent = question.lent
            before = sorted(question.candidates, key=lambda c: -(c[1] + lent.get(c[0], 0.0)))
            pool = dict(question.candidates)
            for memory_id, score in (injection(question, conversation) if injection else {}).items():
                pool.setdefault(memory_id, score)
            after = sorted(pool.items(), key=lambda c: -(c[1] * weights.get(c[0], 1.0) + lent.get(c[0], 0.0)))
            turns = conversation.turns_of
            delta = recall_at_k(
                [turns.get(m, set()) for m, _ in after], sorted(question.evidence), K
            ) - recall_at_k([turns.get(m, set()) for m, _ in before], sorted(question.evidence), K)
            changes.setdefault(group, []).append(delta)
    return {group: mean(values) for group, values in changes.items()}


def separation(conversations: Sequence[Conversation]) -> tuple[float, int, int]:
    """ROC AUC of the query cosine for credited candidates that are evidence vs not, and the pair counts."""
    positives: list[float] = []
    negatives: list[float] = []
    for conversation in conversations:
        credited = credited_by(conversation)
        for question in conversation.test:
            for memory_id, _ in question.candidates:
                if memory_id in credited:
                    cosine = max(float(question.vector @ other.vector) for other in credited[memory_id])
                    is_evidence = bool(conversation.turns_of.get(memory_id, set()) & question.evidence)
                    (positives if is_evidence else negatives).append(cosine)
    if not positives or not negatives:
        return float("nan"), len(positives), len(negatives)
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives)), len(positives), len(negatives)


def unreachable(conversations: Sequence[Conversation]) -> tuple[int, int]:
    """Related test questions' evidence turns missing from the top 5: how many, and how many of those are
    held by a credited memory that was not among the question's candidates at all."""
    missing = out_of_reach = 0
    for conversation in conversations:
        credited = set(credited_by(conversation))
        holders: dict[str, set[str]] = {}
        for memory_id, turns in conversation.turns_of.items():
            for turn in turns:
                holders.setdefault(turn, set()).add(memory_id)
        for question, group in zip(conversation.test, conversation.groups, strict=True):
            if group != "related":
                continue
            lent = question.lent
            ranked = [m for m, _ in sorted(question.candidates, key=lambda c: -(c[1] + lent.get(c[0], 0.0)))]
            shown = {turn for m in ranked[:K] for turn in conversation.turns_of.get(m, set())}
            candidates = set(ranked)
            for turn in question.evidence - shown:
                missing += 1
                held = holders.get(turn, set())
                out_of_reach += bool(held & credited) and not (held & credited & candidates)
    return missing, out_of_reach


def run(
    data: Path, only: Sequence[str] | None, use_models: bool, extra: dict[str, str] | None
) -> list[Conversation]:
    from server.state import build_runtime
    from server.upkeep import aggregation_pass
    from storage.records import Scope

    found = []
    with tempfile.TemporaryDirectory(prefix="memoria-reach-") as tmp:
        for conversation in load(data, only):
            settings = base_settings(Path(tmp) / conversation.sample_id, use_models, extra)
            runtime = build_runtime(settings)
            try:
                turns_of = remember_conversation(conversation, runtime)
                aggregation_pass(runtime)
                memories = runtime.store.get_memories(
                    list(turns_of), Scope(settings.org_id, conversation.sample_id)
                )
                found.append(recall_all(conversation, runtime, standing_turns(memories, turns_of)))
                print(f"{conversation.sample_id}: recalled", file=sys.stderr, flush=True)
            finally:
                runtime.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument("--conversations", nargs="*", help="sample ids (default: every conversation)")
    parser.add_argument(
        "--embedding-model", type=Path, metavar="FOLDER", help="a local sentence-transformers model"
    )
    args = parser.parse_args(argv)
    use_models = args.embedding_model is not None
    conversations = run(
        args.data,
        args.conversations,
        use_models,
        model_settings(args.embedding_model) if use_models else None,
    )
    from retrieval.outcomes import LEXICAL_CLOSENESS, SEMANTIC_CLOSENESS, Closeness, CreditPolicy

    points = SEMANTIC_CLOSENESS if use_models else LEXICAL_CLOSENESS  # the server's for the backend
    closeness = (points.start, points.full)
    print(
        f"R@{K} change of the test questions (related / unrelated), {'model' if use_models else 'offline'} backend"
    )
    rows: list[tuple[str, Policy, Injection | None]] = [
        ("credited, oracle", oracle, None),
        ("credited, blind", blind, None),
    ]
    rows += [(f"query-close x{boost}", query_close(boost, *closeness), None) for boost in (0.15, 0.75, 2.0)]
    rows += [
        ("credited, oracle + credited non-candidates", oracle, oracle_injected),
        (
            "query-close x0.75 + credited non-candidates",
            query_close(0.75, *closeness),
            injected_as_reported(*closeness),
        ),
    ]
    for label, policy, injection in rows:
        got = change(conversations, policy, injection)
        print(f"  {label:50s} {got.get('related', 0.0):+.3f} / {got.get('unrelated', 0.0):+.3f}")
    print("session-only reports, related / unrelated / seen (the training questions asked again):")
    shapes: list[tuple[str, Callable[[int], float]]] = [
        ("1 / log2(2 + rank) (the server's)", CreditPolicy.position_share),
        ("the same share for every place", lambda rank: 1.0),
        ("the best three only", lambda rank: 1.0 if rank < 3 else 0.0),
        ("the best only", lambda rank: 1.0 if rank == 0 else 0.0),
    ]
    for label, shape in shapes:
        got = change(conversations, session_only(shape, Closeness(*closeness)), seen=True)
        print(
            f"  {'session-only, ' + label:50s} {got.get('related', 0.0):+.3f} / "
            f"{got.get('unrelated', 0.0):+.3f} / {got.get('seen', 0.0):+.3f}"
        )
    auc, positives, negatives = separation(conversations)
    print(
        f"query cosine separating credited evidence from other credited candidates: AUC {auc:.3f} ({positives} vs {negatives})"
    )
    missing, out_of_reach = unreachable(conversations)
    print(
        f"related questions' evidence missing from the top {K}: {missing}; credited but not a candidate: {out_of_reach}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
