"""What the session-end hook reads of a Claude Code transcript (console.hook_usage.agent_output)."""

import json
from datetime import UTC, datetime, timedelta

from console.hook_usage import agent_output

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def entry(kind: str, minutes: int, content) -> str:
    stamp = (NOW + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")
    return json.dumps({"type": kind, "timestamp": stamp, "message": {"content": content}})


def test_only_the_agents_own_writing_after_the_recall_is_read(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                entry("assistant", -1, "before the recall"),
                entry("assistant", 1, "plain text after"),
                entry(
                    "assistant",
                    2,
                    [
                        {"type": "text", "text": "a text block"},
                        {"type": "tool_use", "name": "Bash", "input": {"command": "make rollback ENV=prod"}},
                        {"type": "tool_use", "name": "mcp__memoria__recall", "input": {"query": "own call"}},
                        {"type": "thinking", "thinking": "not written out"},
                    ],
                ),
                entry("user", 3, "the user's words"),
                json.dumps({"type": "assistant", "message": {"content": "no timestamp"}}),
                "{broken",
            ]
        )
    )
    assert agent_output(str(path), NOW).splitlines() == [
        "plain text after",
        "a text block",
        '{"command": "make rollback ENV=prod"}',
    ]


def test_a_missing_or_unreadable_transcript_reads_as_nothing(tmp_path):
    assert agent_output(str(tmp_path / "absent.jsonl"), NOW) == ""
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    assert agent_output(str(tmp_path / "bin.jsonl"), NOW) == ""
