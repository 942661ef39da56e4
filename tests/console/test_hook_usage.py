"""What the session-end hook reads of a Claude Code transcript (console.hook_usage.read_transcript)."""

import json
import os
from datetime import UTC, datetime, timedelta

from console.hook_usage import read_transcript
from retrieval.usage import ShownText, used_memories

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def entry(kind: str, minutes: int, content) -> str:
    stamp = (NOW + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")
    return json.dumps({"type": kind, "timestamp": stamp, "message": {"content": content}})


def test_the_agents_writing_after_the_recall_is_said_and_everything_else_is_heard(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                entry("assistant", -1, "before the recall: port 7001"),
                entry("user", 0, "the user says the port is 7002"),
                entry(
                    "assistant",
                    1,
                    [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "mcp__memoria__recall",
                            "input": {"query": "q 7003"},
                        },
                        {"type": "text", "text": "a text block"},
                        {
                            "type": "tool_use",
                            "id": "t2",
                            "name": "Write",
                            "input": {"file_path": "app.env", "content": "PORT=8080\nDEBUG=0", "limit": 200},
                        },
                        {"type": "thinking", "thinking": "not written out 7004"},
                    ],
                ),
                entry(
                    "user",
                    2,
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "[1] mem_a > listens on 7005",
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "t2",
                            "content": [{"type": "text", "text": "wrote 7006"}],
                        },
                    ],
                ),
                json.dumps({"type": "assistant", "message": {"content": "no timestamp 7007"}}),
                "{broken",
            ]
        )
    )
    read = read_transcript(str(path), NOW)
    # Said: the text and the string leaves of its own tool call (not the keys, not the 200 parameter).
    assert read.said == ["a text block", "app.env", "PORT=8080\nDEBUG=0"]
    # Heard: the user, its writing before the recall, a tool's result; not memoria's own result (the
    # recalled memories), its own call's input, its thinking.
    assert read.heard == {"7001", "7002", "7006", "7007"}


def test_a_value_the_agent_had_from_elsewhere_credits_no_memory(tmp_path):
    memory = ShownText("m_port", "The billing API listens on port 8443", "which port for billing")
    path = tmp_path / "t.jsonl"
    path.write_text(
        entry("user", 0, "it is on 8443 now") + "\n" + entry("assistant", 1, "Set the docs to 8443.")
    )
    read = read_transcript(str(path), NOW)
    assert used_memories([memory], "\n".join(read.said), known=read.heard) == []
    assert used_memories([memory], "\n".join(read.said)) == ["m_port"]  # what the user's words prevent


def test_one_bad_byte_costs_its_line_only_and_a_pipe_or_a_missing_file_reads_as_nothing(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b'{"type": "user", "x": "\xff"}\n' + entry("assistant", 1, "make rollback ENV=prod").encode()
    )
    assert read_transcript(str(path), NOW).said == ["make rollback ENV=prod"]
    assert read_transcript(str(tmp_path / "absent.jsonl"), NOW).said == []
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    opened = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer, so that opening it to read does not block
    try:
        assert read_transcript(str(fifo), NOW).said == []
    finally:
        os.close(opened)
    assert read_transcript("bad\0path", NOW).said == []
