"""Where the relevance floor goes: the relevance of evidence turns, of other candidates, and of the best
candidate of queries about things the conversations never mention, per backend.

    python -m benchmarks.floor --data ../shared/data/locomo/locomo-dev.json [--embedding-model FOLDER]

Each conversation is stored as the quality benchmark stores it, then every question (categories 1-4) and
every off-topic query below is recalled with the floor off; the relevance each candidate had before the
floor (fused, or reranked, score x attribution) is read from the trace. The floor a backend gets by
default is the evidence relevance's 1st percentile, rounded down to 0.05: at most 1% of the evidence is
ever cut, while memories matching nothing in particular are.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.locomo import load, standing_turns
from benchmarks.quality import base_settings, model_settings, remember_conversation, say, with_overrides
from benchmarks.reporting import RESULTS, write_json

# Questions an agent might ask of a memory that holds none of this (developer chores, not chit-chat).
OFF_TOPIC = (
    "how do I configure the kubernetes ingress controller",
    "what port does postgres listen on in staging",
    "why does the CI pipeline fail on arm64",
    "where are the billing service credentials stored",
    "which python version does the deploy script need",
    "what is the retry policy for the payment webhook",
    "who owns the terraform state bucket",
    "how do we rotate the TLS certificates",
    "what is the rate limit of the public API",
    "which feature flags are enabled in production",
)
PERCENTILES = (1, 5, 10, 25, 50)


CANDIDATE_FLOORS = (0.05, 0.10, 0.15, 0.20)
WEAK_SHARES = (1.5, 2.0, 2.5, 3.0)  # of the default floor: where a recall's best match might read as weak


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, round(share / 100 * (len(ordered) - 1))))
    return ordered[index]


def relevances(runtime: Any, project: str, query: str, session: str) -> list[tuple[str, float]]:
    """(memory id, relevance) of every direct candidate of one recall, from its trace."""
    from storage.records import Scope
    from tools.common import Caller
    from tools.recall import RecallInput, recall

    out = recall(
        RecallInput(query=query, top_k=20, char_budget=200_000, project_id=project, session_id=session),
        runtime,
        Caller("benchmark", session),
    )
    record = runtime.store.get_retrieval(out.retrieval_id, Scope(runtime.settings.org_id, project))
    trace = json.loads(record.trace_json) if record is not None else {"candidates": []}
    return [
        # What the floor compares (the relevance with BM25 read against a full match of the query).
        (entry["id"], float(entry["scores"].get("floor", entry["scores"]["relevance"])))
        for entry in trace["candidates"]
        if entry.get("source") == "direct"
    ]


def run(data: Path, use_models: bool, extra: dict[str, str]) -> dict[str, Any]:
    from server.state import build_runtime

    evidence: list[float] = []
    others: list[float] = []
    off_topic_best: list[float] = []
    question_best: list[float] = []  # each question's best direct candidate: what a weak-match note reads
    backend = ""
    with tempfile.TemporaryDirectory(prefix="memoria-floor-") as tmp:
        for conversation in load(data):
            settings = with_overrides(
                base_settings(Path(tmp) / conversation.sample_id, use_models, extra), {"min_fact_score": 0.0}
            )
            runtime = build_runtime(settings)
            try:
                backend = runtime.backends["embedder"]
                turns_of = remember_conversation(conversation, runtime)
                from storage.records import Scope

                memories = runtime.store.get_memories(
                    list(turns_of), Scope(settings.org_id, conversation.sample_id)
                )
                standing = standing_turns(memories, turns_of)
                for index, question in enumerate(conversation.scored_questions()):
                    found = relevances(runtime, conversation.sample_id, question.question, f"q{index}")
                    question_best.append(max((relevance for _, relevance in found), default=0.0))
                    for memory_id, relevance in found:
                        wanted = standing.get(memory_id, set()) & set(question.evidence)
                        (evidence if wanted else others).append(relevance)
                for index, query in enumerate(OFF_TOPIC):
                    found = relevances(runtime, conversation.sample_id, query, f"off{index}")
                    off_topic_best.append(max((relevance for _, relevance in found), default=0.0))
            finally:
                runtime.close()
            say(f"{conversation.sample_id}: done")
    floor = math.floor(percentile(evidence, 1) * 20) / 20
    from retrieval.stages.threshold import relevance_floor_for

    default = relevance_floor_for(None, backend, reranked=False)  # the floor this backend gets today
    return {
        "backend": backend,
        "evidence": {f"p{p}": round(percentile(evidence, p), 4) for p in PERCENTILES} | {"n": len(evidence)},
        "other candidates": {f"p{p}": round(percentile(others, p), 4) for p in (50, 75, 90)}
        | {"n": len(others)},
        "off-topic best": {
            "median": round(statistics.median(off_topic_best), 4),
            "max": round(max(off_topic_best), 4),
            "share below floor": round(sum(v < floor for v in off_topic_best) / len(off_topic_best), 3),
            "n": len(off_topic_best),
        },
        "question best": {f"p{p}": round(percentile(question_best, p), 4) for p in PERCENTILES}
        | {"n": len(question_best)},
        "evidence below floor": round(sum(v < floor for v in evidence) / len(evidence), 4),
        # Where a recall's best match reads as weak (``WEAK_MATCH`` x the backend's default floor, in
        # tools.recall_notes): the share of the questions, all about what the conversation holds, whose best
        # match is below it, and of the off-topic queries whose best match clears that floor but not this.
        "default floor": default,
        "weak below": {
            f"{share:g} x {default:g}": {
                "questions": round(sum(v < share * default for v in question_best) / len(question_best), 4),
                "off-topic above the floor": round(
                    sum(default <= v < share * default for v in off_topic_best)
                    / max(1, sum(v >= default for v in off_topic_best)),
                    3,
                ),
            }
            for share in WEAK_SHARES
        },
        "floor": floor,
        # What other floors would cut: the share of the evidence, and of the off-topic queries' best
        # candidates (so of those queries answered with nothing).
        "by floor": {
            f"{candidate:.2f}": {
                "evidence below": round(sum(v < candidate for v in evidence) / len(evidence), 4),
                "off-topic best below": round(
                    sum(v < candidate for v in off_topic_best) / len(off_topic_best), 3
                ),
            }
            for candidate in CANDIDATE_FLOORS
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument(
        "--embedding-model", type=Path, metavar="FOLDER", help="also measure this local model"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "floor.json")
    args = parser.parse_args(argv)
    runs = {"offline": run(args.data, False, {})}
    if args.embedding_model is not None:
        runs["model"] = run(args.data, True, model_settings(args.embedding_model))
    for name, found in runs.items():
        print(f"\n{name}: {found['backend']}")
        for key in ("evidence", "other candidates", "off-topic best", "question best"):
            print(f"  {key:<18} {found[key]}")
        print(f"  floor {found['floor']}: evidence below it {found['evidence below floor']:.2%}")
        for candidate, cut in found["by floor"].items():
            print(
                f"  at {candidate}: evidence below {cut['evidence below']:.2%}, "
                f"off-topic queries answered with nothing {cut['off-topic best below']:.1%}"
            )
        for share, weak in found["weak below"].items():
            print(
                f"  best match below {share}: questions {weak['questions']:.1%}, off-topic queries that clear "
                f"the floor {weak['off-topic above the floor']:.1%}"
            )
    write_json(args.out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
