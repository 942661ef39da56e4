"""How well memories that talk to the model are recognised, and how rarely ordinary text is taken for them.

    python -m benchmarks.instructions                                  # the labelled set only
    python -m benchmarks.instructions --data ../shared/data/locomo/locomo-dev.json

The labelled set (``benchmarks/data/instructions.jsonl``) holds instruction-like texts in many spellings
(invisible characters, full-width and look-alike letters, line separators, a right-to-left override,
spaced letters), languages (English, Spanish, French, German, Portuguese, Chinese), chat-template markup
and tool-call JSON, beside ordinary notes that merely mention prompts, rules, systems or forgetting.
Reported: the share of instruction-like texts flagged (recall) and of ordinary ones flagged (false
alarms), with each miss and false alarm; with ``--data``, the share of a LoCoMo file's dialogue turns
flagged (every one of them is ordinary conversation).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.reporting import RESULTS, write_json
from retrieval.stages.instructions import instruction_signals

LABELLED = Path(__file__).parent / "data" / "instructions.jsonl"


def labelled(path: Path = LABELLED) -> list[tuple[str, bool]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    return [(row["text"], bool(row["instruction"])) for row in rows]


def score_labelled(samples: list[tuple[str, bool]]) -> dict[str, Any]:
    instructions = [text for text, is_instruction in samples if is_instruction]
    ordinary = [text for text, is_instruction in samples if not is_instruction]
    missed = [text for text in instructions if not instruction_signals(text)]
    alarms = [text for text in ordinary if instruction_signals(text)]
    return {
        "instruction_like": len(instructions),
        "ordinary": len(ordinary),
        "recall": (len(instructions) - len(missed)) / len(instructions) if instructions else 0.0,
        "false_alarm_rate": len(alarms) / len(ordinary) if ordinary else 0.0,
        "missed": missed,
        "false_alarms": alarms,
    }


def dialogue_turns(path: Path) -> list[str]:
    conversations = json.loads(path.read_text(encoding="utf-8"))
    return [
        turn["text"]
        for conversation in conversations
        for key, session in conversation["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labelled", type=Path, default=LABELLED, help="JSONL of {text, instruction}")
    parser.add_argument("--data", type=Path, help="a LoCoMo-format file: its dialogue turns are all ordinary")
    args = parser.parse_args(argv)

    report: dict[str, Any] = {"labelled": score_labelled(labelled(args.labelled))}
    found = report["labelled"]
    print(
        f"labelled set: {found['instruction_like']} instruction-like, recall {found['recall']:.3f}; "
        f"{found['ordinary']} ordinary, false alarms {found['false_alarm_rate']:.3f}"
    )
    for text in found["missed"]:
        print(f"  missed: {text!r}")
    for text in found["false_alarms"]:
        print(f"  false alarm: {text!r}")
    if args.data is not None:
        turns = dialogue_turns(args.data)
        flagged = [(text, instruction_signals(text)) for text in turns if instruction_signals(text)]
        report["dialogue"] = {
            "turns": len(turns),
            "flagged": len(flagged),
            "false_alarm_rate": len(flagged) / len(turns) if turns else 0.0,
            "examples": [{"text": text, "signals": list(signals)} for text, signals in flagged[:20]],
        }
        print(
            f"dialogue turns: {len(turns)}, flagged {len(flagged)} ({100 * len(flagged) / max(1, len(turns)):.2f}%)"
        )
        for text, signals in flagged[:20]:
            print(f"  flagged ({', '.join(signals)}): {text!r}")
    write_json(RESULTS / "instructions.json", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
