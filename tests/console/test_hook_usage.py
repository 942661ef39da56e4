"""What the session-end hook reads of a Claude Code transcript (console.hook_usage.read_transcript)."""

import json
import os
from datetime import UTC, datetime, timedelta

from console.hook_usage import read_transcript, recalls_in
from retrieval.usage import ShownText, used_by_values, used_memories

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
    assert read.wrote == {"app.env", "port=8080", "debug=0"}


def test_the_memories_of_a_prompts_context_are_memorias_and_the_recalls_it_shows_are_read(tmp_path):
    """A trial: Claude Code gives the session_start prompt to the model as the user's words, so the
    memories of its context counted as heard from the user, and the agent's use of them credited none."""
    prompt = (
        "You are starting this task: open port 7010\n\nMemory holds 1 memory relevant to it:\n\n"
        "Relevant memories (retrieval ret_0123456789abcdef0123). Quoted lines are stored data.\n\n"
        "[1] mem_a · fact\n> The release bot listens on port 8443"
    )
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "Memories (ret_abcdefabcdefabcdef00). ...",
    }
    call = {"type": "tool_use", "id": "t1", "name": "mcp__memoria__recall", "input": {"query": "port"}}
    lines = [entry("user", 0, prompt), entry("assistant", 1, [call]), entry("user", 2, [result])]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([*lines, entry("assistant", 3, "using 8443 and 7010")]))
    read = read_transcript(str(path), NOW)
    assert read.heard == {"7010"}  # the task's words are the user's; the context's are not
    assert read.wrote == {"8443"}
    seen = recalls_in(str(path))
    assert seen is not None and seen.used
    assert seen.ids == {"ret_0123456789abcdef0123", "ret_abcdefabcdefabcdef00"}
    assert recalls_in(str(tmp_path / "missing.jsonl")) is None and recalls_in(None) is None
    # A context the user pasted is what the user said: all of it is heard.
    pasted = tmp_path / "pasted.jsonl"
    pasted.write_text(entry("user", 0, prompt.removeprefix("You are starting this task: ")))
    assert "8443" in read_transcript(str(pasted), NOW).heard


def test_a_transcripts_recalls_are_read_whole_with_its_subagents_and_memoria_unused_is_said(tmp_path):
    """A review: the recall ids were read from the last 32 MB only (a long conversation's first recall comes
    early), and a subagent's recalls are in its own file beside the conversation's."""
    first, subagents = "ret_000000000000000000a1", "ret_000000000000000000b2"
    path = tmp_path / "conv.jsonl"
    early = {"type": "tool_result", "tool_use_id": "t1", "content": f"(retrieval {first})"}
    path.write_text(entry("user", 0, [early]) + "\n" + entry("user", 1, "x" * 1_000_000))
    (tmp_path / "conv" / "subagents").mkdir(parents=True)
    beside = {"type": "tool_result", "tool_use_id": "s1", "content": f"Memories ({subagents})."}
    (tmp_path / "conv" / "subagents" / "agent-1.jsonl").write_text(entry("user", 2, [beside]))
    seen = recalls_in(str(path))
    assert seen is not None and seen.ids == {first, subagents} and seen.used
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text(entry("user", 0, "fix the typo in README"))
    unused = recalls_in(str(quiet))
    assert unused is not None and (unused.ids, unused.used) == (frozenset(), False)


def test_a_tool_result_echoing_what_the_agent_wrote_does_not_take_it_back(tmp_path):
    # An Edit's result shows the edited lines, a later Read the file: the value was the agent's first.
    edit = {"type": "tool_use", "id": "e1", "name": "Edit", "input": {"new_string": "make rollback ENV=prod"}}
    echo = {"type": "tool_result", "tool_use_id": "e1", "content": "updated: 12  make rollback ENV=prod"}
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([entry("assistant", 1, [edit]), entry("user", 2, [echo])]))
    memory = ShownText("m_rb", "Roll back a bad deploy with make rollback ENV=prod", "how do I roll back")
    assert used_by_values([memory], read_transcript(str(path), NOW).wrote) == ["m_rb"]
    # Given first (the user typed it), the same value is no sign the memory served.
    path.write_text(
        "\n".join([entry("user", 0, "run make rollback ENV=prod"), entry("assistant", 1, [edit])])
    )
    assert used_by_values([memory], read_transcript(str(path), NOW).wrote) == []


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


def test_an_org_visible_memory_the_agent_used_is_found_on_the_orgs_shelf(runtime, tmp_path):
    from console.hook_usage import used_in_session
    from storage.records import Scope
    from tools.common import Caller
    from tools.recall import RecallInput, recall
    from tools.remember import RememberInput, remember

    caller = Caller("claude-code", "ses_org")
    stored = remember(
        RememberInput(content="Roll back a bad deploy with make rollback ENV=prod", visibility="org"),
        runtime,
        caller,
    )
    assert [m.id for m in recall(RecallInput(query="roll back a deploy"), runtime, caller).memories] == [
        stored.id
    ]
    path = tmp_path / "t.jsonl"
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    path.write_text(
        json.dumps(
            {"type": "assistant", "timestamp": later, "message": {"content": "make rollback ENV=prod"}}
        )
    )
    # A review found it never credited: the contents were read from the project's scope only.
    assert used_in_session(runtime, Scope("default", "default"), "ses_org", str(path), None) == [stored.id]
