"""MCP prompts that teach an agent the memory routine: ``session_start`` recalls what memory knows about
the task (through the recall tool, so the retrieval counts toward this session's outcome) and says when
to call what; ``session_end`` asks for the outcome report that moves the weights."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, Prompt, UserMessage
from pydantic import Field

from retrieval.text import clip, counted, shown_safely
from server.auth import current_grant
from server.registry import ToolSpec, invoke
from server.state import AppState
from tools.empty_recall_notes import ELSEWHERE, SCOPE_EMPTY_NOTES
from tools.recall import RecallOutput
from tools.recall_notes import WEAK_ENDS, WEAK_SAID
from tools.recall_window import searched_window

ROUTINE = """\
While you work:
- call `recall` again whenever you are stuck or the task changes direction;
- call `remember` for durable knowledge only: facts about the project, decisions and their reasons, fixes
  that worked, pitfalls. One fact per call, not chatter or transient state;
- when a remembered fact turns out wrong, remember the correction with `replaces` set to the wrong
  memory's id (or say the whole fact again naming what it replaces: "The billing API listens on port 9090,
  not 8080"), or `forget` it.
When the task ends, call `report_outcome` once (success, failure or partial) with the ids of the memories
you relied on as `helpful_ids` and of any that misled you as `misleading_ids`: they rise or sink for
tasks like this one."""


# For a token that may only read: the routine says what it can do, and who can do the rest (a trial's
# read-only token was told to remember and report, which it was then refused).
READ_ONLY_ROUTINE = """\
This token may only read memory: call `recall` again whenever you are stuck or the task changes direction,
and `explain_ranking` to see why a memory ranked where it did. It cannot `remember`, `forget` or
`report_outcome`: tell the user what is worth keeping, or ask the server's operator for a token that
writes to this project."""

OUTCOMES = ("success", "failure", "partial")  # what report_outcome's ``outcome`` takes
TASK_SHOWN = 300  # characters of the task session_start says back (it searches up to the query limit)
NOTE_LIMIT = 4_000  # characters report_outcome's ``note`` takes


def said_back(text: str, limit: int) -> str:
    """An argument as a prompt says it back: at most ``limit`` characters, with control and bidirectional
    characters escaped as a context shows them (a new user's trial: a 10,000-character task came back whole,
    with a raw U+202E, and a 50,000-character note was handed on as one report_outcome refuses)."""
    text = shown_safely(" ".join(text.split()))
    return text if len(text) <= limit else clip(text, limit)


def reads_only() -> bool:
    """Whether the request's token grants no writes anywhere (stdio and in-process: the local user's own)."""
    grant = current_grant()
    return grant is not None and not grant.write


def _scope_note(note: str | None) -> str | None:
    """What an empty recall said of its project, when it holds nothing this caller may read and others of
    its org do (``tools.empty_recall_notes``): a mistyped project_id, most likely, not a task with nothing
    remembered yet (a new store's first session is told that what it learns starts it)."""
    if note and note.startswith(SCOPE_EMPTY_NOTES) and ELSEWHERE in note:
        return note
    return None


def build_prompts(recall_spec: ToolSpec, *, tokens_required: bool) -> list[Prompt]:
    async def session_start(
        task: Annotated[str, Field(description="What you are about to do, in a sentence.")],
        ctx: Context[AppState, Any],
        org_id: Annotated[
            str | None, Field(description="The org to recall from (default: the server's).")
        ] = None,
        project_id: Annotated[
            str | None, Field(description="The project to recall from (default: the server's).")
        ] = None,
    ) -> list[Message]:
        """Recall the project context for a task and explain the memory routine."""
        # A long task description is searched by its beginning, up to the query limit.
        state: AppState = ctx.request_context.lifespan_context
        if not task.strip():
            return [
                UserMessage("Memory was not searched: `task` is empty. Describe the task in a few words.")
            ]
        # An empty scope argument is passed on as given, so that recall refuses it as it refuses any other.
        arguments = {
            "query": task.strip()[: state.settings.max_query_chars],
            **({"org_id": org_id} if org_id is not None else {}),
        }
        arguments.update({"project_id": project_id} if project_id is not None else {})
        try:
            found = await invoke(
                recall_spec,
                ctx,
                arguments,
                tokens_required=tokens_required,
                with_llm=False,
                retry="",
                strict=False,
            )
        except ToolError as exc:  # the SDK would turn a raised error into a bare "Error rendering prompt"
            reason = str(exc)
            return [
                UserMessage(
                    f"You are starting this task: {said_back(task, TASK_SHOWN)}\n\nMemory was not searched: {reason}"
                )
            ]
        assert isinstance(found, RecallOutput)  # without the LLM there is no input-required round trip
        # The weak-match clause whole: it holds a "; " of its own.
        note = found.note or ""
        begins, ends = note.find(WEAK_SAID), note.find(WEAK_ENDS)
        weak = note[begins : ends + len(WEAK_ENDS)] if 0 <= begins < ends else None
        scope_said = None if found.memories else _scope_note(found.note)
        if found.memories:
            # Matches recall itself calls weak are not "relevant" (a new user's trial: the agent read them
            # as the project's answer).
            held = f"that may not bear on it: {weak}" if weak else "relevant to it"
            known = (
                # (the block's own first line says it is data, not instructions: said once; a trial)
                f"Memory holds {counted(len(found.memories), 'memory')} {held}:\n\n" + found.context
            )
        elif scope_said:
            # A mistyped project_id (a new user's trial: the prompt said only "nothing relevant", and the
            # agent began writing into the wrong project): what recall says of the scope, and no invitation
            # to start it.
            known = f"Memory was searched, and found nothing: {scope_said}."
        else:
            known = (
                "Memory holds nothing relevant to it"
                + searched_window(found.window)
                + ": what you learn and remember now starts it."
            )
        if not reads_only():
            return [
                UserMessage(
                    f"You are starting this task: {said_back(task, TASK_SHOWN)}\n\n{known}\n\n{ROUTINE}"
                )
            ]
        if not found.memories and not scope_said:  # (it cannot remember what it learns now)
            known = "Memory holds nothing relevant to it" + searched_window(found.window) + "."
        return [
            UserMessage(
                f"You are starting this task: {said_back(task, TASK_SHOWN)}\n\n{known}\n\n{READ_ONLY_ROUTINE}"
            )
        ]

    def session_end(
        outcome: Annotated[str | None, Field(description="success, failure or partial, if known.")] = None,
        notes: Annotated[
            str | None, Field(description="What helped or misled, for the report's note.")
        ] = None,
    ) -> list[Message]:
        """Report how the task went, so the memories that helped rise and those that misled sink."""
        if reads_only():
            return [
                UserMessage(
                    "The task is over. This token may only read memory, so it cannot remember what is left "
                    "nor report the outcome: tell the user which facts, decisions or fixes of this session are "
                    "worth keeping, and which memories helped or misled, for someone with a token that writes."
                )
            ]
        judge = (
            "Judge the outcome: success (the task was done), failure (it was not, or memory misled you), "
            "or partial."
        )
        said = (outcome or "").strip()
        given = said.lower()
        if given in OUTCOMES:
            how = f"The task's outcome is `{given}`."
        elif given:  # an argument is free text: one report_outcome refuses is not passed on as it is
            how = f"`{said_back(said, 80)}` is not an outcome `report_outcome` takes. {judge}"  # (a trial: whole)
        else:
            how = judge
        extra = (
            f" Pass this as the note: {said_back(notes, NOTE_LIMIT - 1).rstrip('.')}."
            if notes and notes.strip()
            else " Add a short note on what helped or misled."
        )
        return [
            UserMessage(
                "The task is over. First, `remember` any durable fact, decision or fix from this session that "
                f"is not stored yet. Then: {how} Call `report_outcome` once with it (and `score` from 0 to 1 if "
                "you can grade it more finely). Name the memories you actually relied on in `helpful_ids` and "
                "any that were wrong or misled you in `misleading_ids`, by the ids recall listed: they move a "
                f"full step, the others you were shown only a little.{extra}"
            )
        ]

    return [
        Prompt.from_function(
            session_start,
            name="session_start",
            title="Start a session with memory",
            description="Recall what memory knows about a task, as a ready-to-use context, and when to call "
            "remember and report_outcome.",
        ),
        Prompt.from_function(
            session_end,
            name="session_end",
            title="End a session: report the outcome",
            description="Ask the agent to remember what is left and report the task's outcome.",
        ),
    ]
