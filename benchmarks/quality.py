"""Retrieval quality on LoCoMo-format conversations, through the server's own code path.

    python -m benchmarks.quality --data ../shared/data/locomo/locomo-dev.json
    python -m benchmarks.quality --data FILE --conversations conv-26 conv-30 --holdout conv-47

Each conversation is its own scope (project); each speaker is an agent; each session is an episode with
its date (turn n at the session's time + n x 30 s); each turn is one memory, stored with ``remember_many``
as a client would. Then the aggregation job runs once, as a server does in the background. Every
question goes through the ``recall`` handler (the tool's code) with top_k 20, and the memories it
returns, best score first, are scored against the question's evidence turns: recall@5/@10/@20,
NDCG@10 and MRR, per category and over every category but 5 (adversarial), the headline.

In the same run:
- a plain BM25 (k1 1.2, b 0.75, "speaker: text", no stemming) over the same turns, the floor;
- ablations: the full pipeline, then each stage switched off in turn;
- a feedback-learning experiment on a copy of each store: the questions are split in two (alternate
  questions); the second half is measured, then every first-half question is recalled and reported
  with ``report_outcome`` (success when an evidence turn reached the context, failure otherwise), and
  the second half is measured again.

By default the models are the offline backend (hashed vectors + full-text, no reranker); ``--models``
uses whatever the environment configures (MEMORIA_EMBEDDER, MEMORIA_EMBEDDING_MODEL, ...).
``--holdout`` names conversations to report separately: they were not looked at while tuning.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.bm25 import BM25
from benchmarks.locomo import (
    CATEGORIES,
    Conversation,
    Question,
    load,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    standing_turns,
)
from benchmarks.reporting import RESULTS, add_settings_argument, offline_settings, settings_of, write_json
from console.terminal import ProgressBar

KS = (5, 10, 20)
METRICS = ("R@5", "R@10", "R@20", "NDCG@10", "MRR")
# The views an agent experiences: recall in the order the context shows memories, anywhere in it, and
# how big it is (memories, characters).
CONTEXT_METRICS = ("ctx R@5", "ctx R@10", "anywhere", "memories", "chars")
TURN_SPACING = timedelta(seconds=30)
UNDATED = datetime(2020, 1, 1, tzinfo=UTC)  # sessions without a readable date


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


def variants(org_id: str) -> tuple[Variant, ...]:
    return (
        Variant("full pipeline"),
        Variant("- gate", {"gate": "off"}),
        Variant("- full-text fusion", {"fulltext_search": False}),
        Variant("- rerank", {"reranker": "none"}),
        Variant("- attribution", {"author_discount": 0.0}),
        Variant("- corroboration", {"corroboration": False}),
        Variant("- feedback", {"org_features": {org_id: {"feedback_weighting_disabled": True}}}),
        Variant("- episode expansion", {"episode_expansion": False}),
        Variant("- episode neighbourhood", {"neighbourhood_weight": 0.0}),
        Variant("- answer type", {"answer_type_weight": 0.0}),
    )


# -- scoring ------------------------------------------------------------------------------------


def score_question(
    returned: Sequence[set[str]],
    evidence: Sequence[str],
    in_context_order: Sequence[set[str]] | None = None,
    context_chars: int | None = None,
) -> dict[str, float]:
    """Scores of the memories best score first; with ``in_context_order`` (the same memories in the order
    the context shows them) also recall in that order, anywhere in the context, and the context's size."""
    scores = {f"R@{k}": recall_at_k(returned, evidence, k) for k in KS}
    scores["NDCG@10"] = ndcg_at_k(returned, evidence, 10)
    scores["MRR"] = reciprocal_rank(returned, evidence)
    if in_context_order is not None:
        scores["ctx R@5"] = recall_at_k(in_context_order, evidence, 5)
        scores["ctx R@10"] = recall_at_k(in_context_order, evidence, 10)
        scores["anywhere"] = recall_at_k(in_context_order, evidence, len(in_context_order))
        scores["memories"] = float(len(in_context_order))
    if context_chars is not None:
        scores["chars"] = float(context_chars)
    return scores


@dataclass
class Tally:
    """Per-question scores, grouped so any slice (category, conversation, split, group) can be averaged."""

    rows: list[tuple[str, int, dict[str, float], str]] = field(default_factory=list)

    def add(self, conversation: str, category: int, scores: dict[str, float], group: str = "") -> None:
        self.rows.append((conversation, category, scores, group))

    def mean(
        self,
        *,
        category: int | None = None,
        conversations: Iterable[str] | None = None,
        excluding: Iterable[str] = (),
        group: str | None = None,
    ) -> dict[str, Any]:
        inside = set(conversations) if conversations is not None else None
        outside = set(excluding)
        chosen = [
            scores
            for conversation, cat, scores, in_group in self.rows
            if (category is None or cat == category)
            and (inside is None or conversation in inside)
            and conversation not in outside
            and (group is None or in_group == group)
        ]
        means: dict[str, Any] = {
            metric: round(statistics.fmean(s[metric] for s in chosen), 4) if chosen else None
            for metric in METRICS
        }
        for metric in CONTEXT_METRICS:
            if chosen and all(metric in s for s in chosen):
                means[metric] = round(statistics.fmean(s[metric] for s in chosen), 4)
        means["questions"] = len(chosen)
        return means

    def summary(self, holdout: Iterable[str] = ()) -> dict[str, Any]:
        held = set(holdout)
        summary: dict[str, Any] = {
            "overall": self.mean(),
            "by_category": {
                CATEGORIES[category]: self.mean(category=category)
                for category in sorted({row[1] for row in self.rows})
            },
            "by_conversation": {
                conversation: self.mean(conversations=[conversation])
                for conversation in dict.fromkeys(row[0] for row in self.rows)
            },
        }
        if held:
            summary["tuning"] = self.mean(excluding=held)
            summary["holdout"] = self.mean(conversations=held)
        return summary

    def group_summary(self, holdout: Iterable[str] = ()) -> dict[str, Any]:
        """Means per group (related / unrelated / seen), over everything and over each split."""
        held = set(holdout)
        groups = list(dict.fromkeys(row[3] for row in self.rows))
        splits: dict[str, dict[str, Any]] = {"all": {}}
        if held:
            splits |= {"tuning": {"excluding": held}, "holdout": {"conversations": held}}
        return {
            split: {group: self.mean(group=group, **where) for group in groups}
            for split, where in splits.items()
        }


# -- the server side ----------------------------------------------------------------------------


def base_settings(db: Path, use_models: bool, extra: dict[str, str] | None = None) -> Any:
    """Offline backend (or the environment's models with ``use_models``); ``extra`` are MEMORIA_*
    variables to try a configuration, e.g. {"MEMORIA_MAX_SIBLINGS": "5"}."""
    if not use_models:
        return offline_settings(db, extra)
    from server.config import Settings

    env = dict(os.environ) | (extra or {})
    return Settings.from_env(env, db_uri=str(db), maintenance_interval_seconds=3600)


def with_overrides(settings: Any, overrides: dict[str, Any]) -> Any:
    """The settings with some fields changed (named as ``Settings.from_env`` overrides), validated again."""
    return settings.replace(**overrides)


def remember_conversation(conversation: Conversation, runtime: Any) -> dict[str, set[str]]:
    """Store every turn with ``remember_many`` (one call per session); memory id -> the turns it stands for."""
    from tools.common import Caller
    from tools.remember_many import BatchItem, RememberManyInput, remember_many

    turns_of: dict[str, set[str]] = {}
    for number, turns in conversation.sessions().items():
        start = turns[0].when.replace(tzinfo=UTC) if turns[0].when else UNDATED
        for offset in range(0, len(turns), 200):
            chunk = turns[offset : offset + 200]
            items = [
                BatchItem(
                    content=turn.said,
                    agent_id=turn.speaker,
                    episode_id=f"{conversation.sample_id}-session-{number}",
                    occurred_at=start + TURN_SPACING * (offset + index),
                )
                for index, turn in enumerate(chunk)
            ]
            out = remember_many(
                RememberManyInput(items=items, project_id=conversation.sample_id),
                runtime,
                Caller("importer", f"import-session-{number}"),
            )
            for turn, result in zip(chunk, out.results, strict=True):
                turns_of.setdefault(result.id, set()).add(turn.dia_id)
        runtime.store.maintain(min_fragments=runtime.settings.compaction.min_fragments)
    return turns_of


def ask(runtime: Any, conversation: Conversation, question: Question, session: str) -> list[Any]:
    """Recall through the tool's handler; the returned memories, best score first."""
    return ask_for_output(runtime, conversation, question, session)[0]


def ask_for_output(
    runtime: Any, conversation: Conversation, question: Question, session: str
) -> tuple[list[Any], Any]:
    """The returned memories, best score first, and the recall's whole output."""
    from tools.common import Caller
    from tools.recall import RecallInput, recall

    out = recall(
        RecallInput(
            query=question.question,
            top_k=max(KS),
            char_budget=200_000,
            project_id=conversation.sample_id,
            session_id=session,
        ),
        runtime,
        Caller("benchmark", session),
    )
    return sorted(out.memories, key=lambda memory: (-memory.score, memory.position)), out


def measure(
    runtime: Any,
    conversation: Conversation,
    questions: Sequence[Question],
    standing: dict[str, set[str]],
    tally: Tally,
    label: str,
) -> None:
    for index, question in enumerate(questions):
        returned, out = ask_for_output(runtime, conversation, question, f"{label}-{index}")
        tally.add(
            conversation.sample_id,
            question.category,
            score_question(
                [standing.get(m.id, set()) for m in returned],
                question.evidence,
                [standing.get(m.id, set()) for m in out.memories],
                len(out.context),
            ),
        )
        progress(f"{conversation.sample_id} {label}", index + 1, len(questions))


@dataclass(frozen=True)
class FeedbackArm:
    """One way of reporting outcomes in the feedback experiment."""

    name: str
    named: bool  # the agent names the memories it relied on (helpful_ids), beside the outcome
    repeats: int = 1  # every training question recalled and reported this many times, in new sessions
    # The session-end hook's report instead of the agent's: partial, with the memories the agent's answer
    # used (retrieval.usage; the answer is LoCoMo's when an evidence turn was recalled, none otherwise).
    hook: bool = False


# Not an arm: the most any feedback weighting could reach (every trained evidence memory among a question's
# candidates placed first).
CEILING = "ceiling (any weighting)"
FEEDBACK_ARMS = (
    FeedbackArm("session-only", named=False),
    FeedbackArm("helpful_ids", named=True),
    FeedbackArm("session-only x5", named=False, repeats=5),
    FeedbackArm("helpful_ids x5", named=True, repeats=5),
    FeedbackArm("hook", named=False, hook=True),
)


def split_questions(questions: Sequence[Question]) -> tuple[list[Question], list[Question], list[str]]:
    """Training (even positions) and test (odd) questions, and each test question's group: "related"
    when its evidence overlaps some training question's evidence, "unrelated" otherwise."""
    train, test = list(questions[0::2]), list(questions[1::2])
    trained = {turn for question in train for turn in question.evidence}
    groups = ["related" if trained & set(question.evidence) else "unrelated" for question in test]
    return train, test, groups


def measure_groups(
    runtime: Any,
    conversation: Conversation,
    questions: Sequence[Question],
    groups: Sequence[str],
    standing: dict[str, set[str]],
    tally: Tally,
    label: str,
    *,
    ceiling: tuple[Tally, set[str]] | None = None,
) -> None:
    """Score each question in its group. With ``ceiling`` (a tally and the training questions' evidence
    turns): also the most any feedback weighting could reach, every trained evidence memory among the
    question's candidates placed first."""
    from storage.records import Scope

    for index, (question, group) in enumerate(zip(questions, groups, strict=True)):
        returned, out = ask_for_output(runtime, conversation, question, f"{label}-{index}")
        shown = [standing.get(m.id, set()) for m in returned]
        tally.add(conversation.sample_id, question.category, score_question(shown, question.evidence), group)
        if ceiling is not None:
            bound, trained = ceiling
            record = runtime.store.get_retrieval(
                out.retrieval_id, Scope(runtime.settings.org_id, conversation.sample_id)
            )
            candidates = json.loads(record.trace_json)["candidates"] if record is not None else []
            lifted = {turn for c in candidates for turn in standing.get(c["id"], set()) if turn in trained}
            best = [lifted, *(turns - lifted for turns in shown)]
            bound.add(
                conversation.sample_id, question.category, score_question(best, question.evidence), group
            )
        progress(f"{conversation.sample_id} {label}", index + 1, len(questions))


def train_with_outcomes(
    runtime: Any,
    conversation: Conversation,
    train: Sequence[Question],
    standing: dict[str, set[str]],
    arm: FeedbackArm,
) -> None:
    """Recall every training question in its own session and report honestly: success exactly when an
    evidence turn was recalled; with ``arm.named`` the recalled evidence memories are named helpful."""
    from tools.common import Caller
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    total = len(train) * arm.repeats
    for repeat in range(arm.repeats):
        for index, question in enumerate(train):
            session = f"fb-{arm.name.replace(' ', '')}-{repeat}-{index}"
            returned = ask(runtime, conversation, question, session)
            helpful = [m.id for m in returned if standing.get(m.id, set()) & set(question.evidence)]
            arguments = ReportOutcomeInput(
                outcome="success" if helpful else "failure",
                helpful_ids=helpful if arm.named and helpful else None,
                session_id=session,
                project_id=conversation.sample_id,
            )
            if arm.hook:  # partial, and the memories the answer used (never the agent's word)
                used = used_by_answer(returned, question, answered=bool(helpful))
                arguments = ReportOutcomeInput(
                    outcome="partial", session_id=session, project_id=conversation.sample_id
                )
                arguments._used = tuple(used)
            report_outcome(arguments, runtime, Caller("benchmark", session))
            progress(f"{conversation.sample_id} {arm.name} training", repeat * len(train) + index + 1, total)


def used_by_answer(returned: Sequence[Any], question: Question, *, answered: bool) -> list[str]:
    """What the session-end hook would name after the agent answered ``question``: the returned memories
    above the filler floor of which the answer holds a value (``retrieval.usage``). The agent's answer
    is LoCoMo's when an evidence turn was recalled (``answered``), and nothing otherwise."""
    from retrieval.outcomes import CreditPolicy
    from retrieval.usage import ShownText, used_memories

    if not answered or not returned:
        return []
    best = max(memory.score for memory in returned)
    shown = [
        ShownText(memory.id, memory.content, question.question)
        for memory in returned
        if CreditPolicy().above_floor(memory.score, best)
    ]
    return used_memories(shown, question.answer)


def feedback_experiment(
    settings: Any,
    db: Path,
    conversation: Conversation,
    standing: dict[str, set[str]],
    tallies: dict[str, Tally],
    arms: Sequence[FeedbackArm] = FEEDBACK_ARMS,
) -> None:
    """Train on alternate questions with report_outcome, on a copy of the store per arm; measure the other
    questions (related / unrelated) and the training questions asked again ("seen"), before and after."""
    from server.state import build_runtime

    train, test, groups = split_questions(conversation.scored_questions())
    seen = ["seen"] * len(train)
    trained = {turn for question in train for turn in question.evidence}
    for arm in (None, *arms):
        name = arm.name if arm is not None else "before"
        copy = db.parent / f"{db.name}-feedback-{name.replace(' ', '')}"
        shutil.copytree(db, copy)
        runtime = build_runtime(with_overrides(settings, {"db_uri": str(copy)}))
        try:
            if arm is not None:
                train_with_outcomes(runtime, conversation, train, standing, arm)
            tally = tallies.setdefault(name, Tally())
            bound = (tallies.setdefault(CEILING, Tally()), trained) if arm is None else None
            measure_groups(
                runtime, conversation, test, groups, standing, tally, f"fb-{name}-test", ceiling=bound
            )
            measure_groups(runtime, conversation, train, seen, standing, tally, f"fb-{name}-seen")
        finally:
            runtime.close()
        shutil.rmtree(copy, ignore_errors=True)


# -- the run ------------------------------------------------------------------------------------


# The CLI's progress bar on stderr (console/terminal.py): a bar per step that takes more than a second.
progress = ProgressBar(sys.stderr)


def say(message: str) -> None:
    progress.finish()
    print(message, file=sys.stderr, flush=True)


def run(
    data: Path,
    only: Sequence[str] | None = None,
    *,
    holdout: Sequence[str] = (),
    ablations: bool = True,
    feedback: bool = True,
    use_models: bool = False,
    extra: dict[str, str] | None = None,
    arms: Sequence[FeedbackArm] = FEEDBACK_ARMS,
) -> dict[str, Any]:
    from server.state import build_runtime
    from server.upkeep import aggregation_pass

    conversations = load(data, only)
    unknown = set(holdout) - {c.sample_id for c in conversations}
    if unknown:
        raise ValueError(f"--holdout names conversations not in the run: {', '.join(sorted(unknown))}")
    bm25 = Tally()
    results: dict[str, Tally] = {}
    feedback_tallies: dict[str, Tally] = {}
    backend = ""
    seconds: dict[str, float] = {"remember": 0.0, "aggregation": 0.0, "recall": 0.0}
    recalls = 0
    with tempfile.TemporaryDirectory(prefix="memoria-quality-") as tmp:
        for conversation in conversations:
            questions = conversation.scored_questions()
            index = BM25([f"{turn.speaker}: {turn.text}" for turn in conversation.turns])
            for question in questions:
                ranked = [{conversation.turns[i].dia_id} for i in index.rank(question.question, max(KS))]
                bm25.add(conversation.sample_id, question.category, score_question(ranked, question.evidence))

            db = Path(tmp) / conversation.sample_id
            settings = base_settings(db, use_models, extra)
            runtime = build_runtime(settings)
            try:
                backend = ", ".join(f"{k} {v}" for k, v in runtime.backends.items())
                started = time.perf_counter()
                turns_of = remember_conversation(conversation, runtime)
                seconds["remember"] += time.perf_counter() - started
                started = time.perf_counter()
                aggregation_pass(runtime)
                seconds["aggregation"] += time.perf_counter() - started
                from storage.records import Scope

                memories = runtime.store.get_memories(
                    list(turns_of), Scope(settings.org_id, conversation.sample_id)
                )
                standing = standing_turns(memories, turns_of)
            finally:
                runtime.close()
            say(
                f"{conversation.sample_id}: {len(conversation.turns)} turns remembered, {len(questions)} questions"
            )

            for variant in variants(settings.org_id) if ablations else variants(settings.org_id)[:1]:
                runtime = build_runtime(with_overrides(settings, variant.overrides))
                try:
                    started = time.perf_counter()
                    measure(
                        runtime,
                        conversation,
                        questions,
                        standing,
                        results.setdefault(variant.name, Tally()),
                        variant.name.replace(" ", "").replace("-", "no-", 1),
                    )
                    seconds["recall"] += time.perf_counter() - started
                    recalls += len(questions)
                finally:
                    runtime.close()
            say(f"{conversation.sample_id}: scored {len(questions)} questions x {len(results)} variants")

            if feedback:
                feedback_experiment(settings, db, conversation, standing, feedback_tallies, arms)
                say(f"{conversation.sample_id}: feedback experiment done")

    report: dict[str, Any] = {
        "data": str(data),
        "conversations": [c.sample_id for c in conversations],
        "holdout": list(holdout),
        "backend": backend,
        "settings": dict(extra or {}),
        "questions": len(bm25.rows),
        "bm25": bm25.summary(holdout),
        "variants": {name: tally.summary(holdout) for name, tally in results.items()},
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "recall_ms_mean": round(1000.0 * seconds["recall"] / recalls, 1) if recalls else None,
    }
    if feedback:
        report["feedback"] = {
            "method": "alternate questions: recall the even ones and report honest outcomes (success exactly "
            "when an evidence turn was recalled; with helpful_ids the recalled evidence memories named), then "
            "measure the odd ones, related (evidence shared with a training question) or not, and the "
            "training questions asked again (seen)",
            "arms": {name: tally.group_summary(holdout) for name, tally in feedback_tallies.items()},
        }
    return report


# -- output -------------------------------------------------------------------------------------


def _row(label: str, means: dict[str, Any]) -> str:
    cells = "".join(f"{means[m]:>9.3f}" if means[m] is not None else f"{'-':>9}" for m in METRICS)
    return f"{label:<24}{cells}{means['questions']:>7}"


def _header(title: str) -> str:
    return f"{title:<24}" + "".join(f"{m:>9}" for m in METRICS) + f"{'n':>7}"


def print_table(report: dict[str, Any]) -> None:
    full = report["variants"].get("full pipeline")
    print(f"\nretrieval quality on {report['data']} - {report['questions']} questions, categories 1-4")
    print(f"backend: {report['backend']}")
    print(_header("all but adversarial"))
    print(_row("BM25 (k1 1.2, b 0.75)", report["bm25"]["overall"]))
    for name, summary in report["variants"].items():
        print(_row(name, summary["overall"]))
    if full is not None:
        print("\n" + _header("by category"))
        for category, means in full["by_category"].items():
            print(_row(f"{category} (memoria)", means))
            print(_row(f"{category} (BM25)", report["bm25"]["by_category"][category]))
        print("\n" + _header("by conversation"))
        for conversation, means in full["by_conversation"].items():
            print(_row(f"{conversation} (memoria)", means))
            print(_row(f"{conversation} (BM25)", report["bm25"]["by_conversation"][conversation]))
        if report["holdout"]:
            print("\n" + _header("split"))
            for part in ("tuning", "holdout"):
                print(_row(f"{part} (memoria)", full[part]))
                print(_row(f"{part} (BM25)", report["bm25"][part]))
        print(
            "\n"
            + f"{'as the agent reads it':<24}"
            + "".join(f"{m:>10}" for m in CONTEXT_METRICS)
            + f"{'n':>7}"
        )
        for part in ("overall", *(("tuning", "holdout") if report["holdout"] else ())):
            means = full[part]
            if all(means.get(m) is not None for m in CONTEXT_METRICS):
                cells = "".join(f"{means[m]:>10.3f}" for m in CONTEXT_METRICS[:3]) + "".join(
                    f"{means[m]:>10.1f}" for m in CONTEXT_METRICS[3:]
                )
                print(f"{part:<24}{cells}{means['questions']:>7}")
    if "feedback" in report:
        print_feedback(report["feedback"]["arms"])
    print(f"\nmean recall {report['recall_ms_mean']} ms; seconds {report['seconds']}")


def print_feedback(arms: dict[str, Any]) -> None:
    """Per split and group: before, then each arm with its change from before."""
    before = arms["before"]
    for split, groups in before.items():
        for group in groups:
            print("\n" + _header(f"feedback: {group} ({split})"))
            base = groups[group]
            print(_row("before outcomes", base))
            for name, summary in arms.items():
                if name == "before":
                    continue
                after = summary[split].get(group)
                if after is None:  # the ceiling is not computed for every group
                    continue
                delta = {
                    m: (after[m] - base[m]) if after[m] is not None and base[m] is not None else None
                    for m in METRICS
                }
                print(_row(f"{name}", after))
                print(_row("  change", delta | {"questions": after["questions"]}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument("--conversations", nargs="*", help="sample ids (default: every conversation)")
    parser.add_argument("--holdout", nargs="*", default=[], help="conversations to report separately")
    parser.add_argument("--no-ablations", action="store_true", help="only the full pipeline")
    parser.add_argument("--no-feedback", action="store_true", help="skip the feedback experiment")
    parser.add_argument(
        "--feedback-arms",
        nargs="+",
        choices=[arm.name for arm in FEEDBACK_ARMS],
        metavar="ARM",
        help="the feedback experiment's arms to run (default: all of "
        + ", ".join(repr(arm.name) for arm in FEEDBACK_ARMS)
        + ")",
    )
    parser.add_argument(
        "--models", action="store_true", help="use the configured models, not the offline backend"
    )
    parser.add_argument(
        "--embedding-model",
        type=Path,
        metavar="FOLDER",
        help="also run with this local sentence-transformers model (no reranker), beside the offline backend",
    )
    add_settings_argument(parser, help="try a setting (repeatable)")
    parser.add_argument("--out", type=Path, default=RESULTS / "quality.json")
    args = parser.parse_args(argv)
    extra = settings_of(parser, args.set)
    if args.embedding_model is not None and not args.embedding_model.is_dir():
        parser.error(f"--embedding-model {args.embedding_model} is not a folder")
    backends: dict[str, tuple[bool, dict[str, str]]] = {
        "configured" if args.models else "offline": (args.models, extra)
    }
    if args.embedding_model is not None:
        backends["model"] = (True, model_settings(args.embedding_model) | extra)
    runs = {}
    for name, (use_models, settings) in backends.items():
        say(f"backend: {name}")
        runs[name] = run(
            args.data,
            args.conversations,
            holdout=args.holdout,
            ablations=not args.no_ablations,
            feedback=not args.no_feedback,
            use_models=use_models,
            extra=settings,
            arms=[
                arm for arm in FEEDBACK_ARMS if args.feedback_arms is None or arm.name in args.feedback_arms
            ],
        )
    for report in runs.values():
        print_table(report)
    write_json(args.out, {"runs": runs})
    return 0


def model_settings(folder: Path) -> dict[str, str]:
    """A local sentence-transformers model and nothing to download: no reranker (none can be had here)."""
    return {
        "MEMORIA_EMBEDDER": "sentence-transformers",
        "MEMORIA_EMBEDDING_MODEL": str(folder.resolve()),
        "MEMORIA_RERANKER": "none",
        "MEMORIA_LLM": "none",
        "MEMORIA_ALLOW_MODEL_DOWNLOADS": "false",
    }


if __name__ == "__main__":
    sys.exit(main())
