"""Console commands for people at a terminal, never part of a running server.

``memoria remember | recall | explain | outcome | forget | show | stats | import | export | reembed |
doctor | report | token``: each opens the store named by the configuration (or ``--db``), runs the same
handler the MCP tool runs, and prints a readable table, or JSON with ``--json``. Progress bars go to
stderr; results go to stdout, which is where a person or a script reads them. The serving path
(``memoria serve``, ``server.app``) never imports this module, so nothing here can reach the stdio
protocol stream; tests/test_architecture.py holds both rules.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import logging
import os
import re
import secrets
import shlex
import shutil
import sys
import webbrowser
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from console.terminal import ProgressBar, counts, key_values, printable, table, ticking
from retrieval.text import clip, counted, listed
from server.arguments import friendly_validation_message
from server.config import Settings, default_data_dir, local_store_folder
from storage.records import Scope, View, Viewer
from tools.common import Caller, Runtime, ToolFailure, ToolSettings
from tools.empty_recall_notes import held_elsewhere
from tools.remember_text import readers
from tools.remember_text import text_of as remembered
from tools.result_text import misleading_advice

if TYPE_CHECKING:
    from retrieval.models.llm.base import LanguageModel

Model = TypeVar("Model", bound=BaseModel)
log = logging.getLogger("memoria")

CLI_AGENT = "cli"
CLI_SESSION_PREFIX = "ses_cli_"  # the sessions these commands start
HOOK_AGENT = "claude-code"  # the client name Claude Code gives in the MCP handshake
HOOK_WINDOW = timedelta(hours=24)  # a session-end hook reports on a session that recalled this recently


class CommandError(Exception):
    """A command that cannot run as asked; the message says what to do."""


# ---------------------------------------------------------------------------------------------- running


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the people command ``args.command``; returns the exit status. A session-end hook
    (``outcome --hook``) always exits 0: its problems are said on stderr and never fail the session."""
    status = _run(args, settings)
    return 0 if getattr(args, "hook", False) else status


# The tools' argument names, as the commands spell them: a tool's message names its argument, the same
# message from a command names the flag. Only a name quoted as an argument (`char_budget`) and the tools'
# own phrases are rewritten, never a value a message quotes (an id, a path, a file's field).
FLAGS = {
    "helpful_ids": "--helpful",
    "misleading_ids": "--misleading",
    "char_budget": "--budget",
    "top_k": "--top-k",
    "session_id": "--session",
    "org_id": "--org",
    "project_id": "--project",
    "agent_id": "--agent",
    "episode_id": "--episode",
    "occurred_at": "--occurred-at",
    "expires_at": "--until",
    "protection_tier": "--tier",
    "tags": "--tag",
    "kinds": "--kind",
    "score": "--score",
    "note": "--note",
    "reason": "--reason",
    "since": "--since",
    "until": "--until",
    "time_zone": "--time-zone",
    "limit": "--limit",
    "cursor": "--cursor",
    "max_memories": "--max",
}
_QUOTED_NAME = re.compile(r"`(" + "|".join(FLAGS) + r")(?:\.\d+)?`")
_PHRASES = (
    (re.compile(r"(?<![\w-])(helpful_ids|misleading_ids)(?![\w-])"), lambda m: FLAGS[m.group(1)]),
    (
        re.compile(r"\b(another |leave )(protection_tier|occurred_at|expires_at)\b"),
        lambda m: m.group(1) + FLAGS[m.group(2)],
    ),
    (re.compile(r"\b(char_budget|top_k)( must be between)"), lambda m: FLAGS[m.group(1)] + m.group(2)),
    (re.compile(r"\b(char_budget|top_k)=(\d+)"), lambda m: f"{FLAGS[m.group(1)]} {m.group(2)}"),
    (re.compile(r"\braise (char_budget|top_k)\b"), lambda m: f"raise {FLAGS[m.group(1)]}"),
    (re.compile(r"\b(pass|or) query\b"), lambda m: f"{m.group(1)} --query"),
    (re.compile(r"\bat memoria://memory/(mem_\w+)"), lambda m: f"with `memoria show {m.group(1)}`"),
    (re.compile(r"\b(?:the )?org_id and project_id\b"), lambda m: "--org and --project"),
    (re.compile(r"\b(a |one of )retrieval_id\b"), lambda m: f"{m.group(1)}retrieval id"),
    (re.compile(r"\bPass memory_id\b"), lambda m: "Pass a memory id"),
    (
        re.compile(r"\bpass memory_id=(mem_\w+)( with mode=purge)?"),
        lambda m: f"run `memoria forget {m.group(1)}{' --purge' if m.group(2) else ''}`",
    ),
    (re.compile(r"\bPass replaces= the id\b"), lambda m: "Pass the id"),
    # The tools a message points to, as the commands that run them.
    (re.compile(r"`?\bexplain_ranking\b`?"), lambda m: "`memoria explain`"),
    # An explicit update is `memoria edit ID TEXT`; a plain memory, `memoria remember TEXT`.
    (
        re.compile(r"\b([Rr])emember (the new text|the correction) without replaces\b"),
        lambda m: f"{m.group(1)}emember {m.group(2)} with `memoria remember`",
    ),
    (re.compile(r"\bUpdate (mem_\w+)"), lambda m: f"Edit {m.group(1)} (`memoria edit {m.group(1)} TEXT`)"),
    (
        re.compile(r"\bremember it with replaces=(mem_\w+)"),
        lambda m: f"run `memoria edit {m.group(1)}` with it",
    ),
    (re.compile(r"\bwith replaces=(?=[,;) ]|$)"), lambda m: "with `memoria edit`"),
    (re.compile(r"\bcall again with dry_run=false\b"), lambda m: "run again without --dry-run"),
    # The drift tool has no command: `memoria report` shows the open contradictions (a trial ran `memoria drift`).
    (re.compile(r"\(drift lists the open pairs\)"), lambda m: "(`memoria report` lists the open pairs)"),
    (
        re.compile(r"\breport this connection's own session\b"),
        lambda m: "report the session `memoria recall` used last",
    ),
)


# Arguments that are a flag in one command and not in another (`memoria recall QUERY`, but `memoria
# forget --query QUERY`): named by that command's flag in its messages.
COMMAND_FLAGS = {"forget": {"query": "--query", "tag": "--tag"}}


# A command a message suggests, in backticks: "`memoria edit mem_1 TEXT`", "`memoria show mem_1`".
_SUGGESTED = re.compile(r"`(memoria [a-z]+(?: [^`]*)?)`")
# Commands that reach no store: a suggestion of them needs no store flags.
_STORELESS = frozenset({"doctor", "serve", "token"})


def in_flags(message: str, command: str | None = None) -> str:
    """A tool's ``message`` as a command says it: its arguments named by their flags, and each command it
    suggests given the flags that reach this command's store and scope (``same_store``: a trial followed
    "`memoria edit ID TEXT`" from a command run with --project, and was told the id was not found)."""
    for name, flag in COMMAND_FLAGS.get(command or "", {}).items():
        message = re.sub(rf"(`|^){name}(`| is empty)", rf"\g<1>{flag}\g<2>", message)
    message = _QUOTED_NAME.sub(lambda match: f"`{FLAGS[match.group(1)]}`", message)
    for pattern, replacement in _PHRASES:
        message = pattern.sub(replacement, message)
    flags = STORE_FLAGS.get()

    def reaching(found: re.Match[str]) -> str:
        suggested = found.group(1)
        if suggested.split()[1] in _STORELESS or re.search(r"(?<!\S)--(?:db|org|project)\b", suggested):
            return found.group(0)
        return f"`{suggested}{flags}`"

    return _SUGGESTED.sub(reaching, message) if flags else message


def _run(args: argparse.Namespace, settings: Settings) -> int:
    flags = STORE_FLAGS.set(same_store(args))
    try:
        return _run_command(args, settings)
    finally:
        STORE_FLAGS.reset(flags)  # (commands run in one process, as tests run them, suggest their own)


def _run_command(args: argparse.Namespace, settings: Settings) -> int:
    command = COMMANDS[args.command]
    VERBOSE.set(bool(getattr(args, "verbose", False)))
    try:
        return command(args, settings)
    except (CommandError, ToolFailure) as exc:
        print(f"memoria {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `memoria export | head`: the reader left; stop quietly (an OSError too: first)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(
            f"memoria {args.command}: {exc.strerror or exc}{where}: check the path and its permissions",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(f"memoria {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a store or model fault: one line that says what failed, not a traceback
        from retrieval.models.model_files import short_reason

        log.debug("memoria %s failed", args.command, exc_info=True)
        print(
            f"memoria {args.command} failed: {short_reason(exc)}. `memoria doctor` checks the store and models; "
            "MEMORIA_LOG_LEVEL=DEBUG shows the details.",
            file=sys.stderr,
        )
        return 1


@contextlib.contextmanager
def opened(settings: Settings, *, models: bool = True, writes: bool = False) -> Iterator[Runtime]:
    """The runtime a command works with (the store, the models, the pipeline), closed afterwards; a
    message on stderr while it loads, if that takes more than a second. ``models=False`` for commands
    that embed and rank nothing (an outcome report, an export): the offline backend stands in, so they
    neither wait for model loading nor warn about models they do not use. ``writes``: a command that
    writes compacts what piled up once it is done (``compact_if_piled``)."""
    from server.state import build_runtime

    if not models:
        settings = settings.model_copy(update={"embedder": "hashed", "reranker": "none", "llm": "none"})
    progress = ProgressBar(sys.stderr)
    said: list[str] = []
    try:
        with ticking(progress, "opening the store" + (" and loading models" if models else "")):
            runtime = build_runtime(settings, announce=said.append)
    except Exception as exc:
        raise CommandError(
            f"could not open the memory store at {settings.db_uri}: {exc}. Check MEMORIA_DB_URI or --db; "
            "`memoria doctor` shows what is wrong"
        ) from exc
    finally:
        progress.finish()
    for line in said if VERBOSE.get() else [backend_line(runtime)] if said else []:
        print(line, file=sys.stderr)
    try:
        yield runtime
        if writes:
            compact_if_piled(runtime, settings.compaction.min_fragments)
    finally:
        runtime.close()


def compact_if_piled(runtime: Runtime, min_fragments: int) -> None:
    """One maintenance round, as `memoria doctor --fix` runs it, once a table's appends piled up into
    ``MEMORIA_COMPACTION_MIN_FRAGMENTS`` fragments (nothing otherwise: a look at each table's fragments). No
    server runs rounds for a store that only the command line writes: a new user's trial found 42 fragments
    after 46 remembers, each making the next search and append slower, and doctor warned. Best effort: what
    the command did is committed already."""
    try:
        runtime.store.maintain(min_fragments=min_fragments)
    except Exception as exc:
        print(
            f"memoria: could not compact the store ({exc}); `memoria doctor --fix` does it", file=sys.stderr
        )


# --verbose: every model message in full (the default is one line about the backend)
VERBOSE: contextvars.ContextVar[bool] = contextvars.ContextVar("memoria_verbose", default=False)
# The store flags this command was given (``same_store``), for the commands its messages suggest.
STORE_FLAGS: contextvars.ContextVar[str] = contextvars.ContextVar("memoria_store_flags", default="")


def backend_line(runtime: Runtime) -> str:
    """One short line for a person when the models did not load as configured."""
    embedder, reranker = runtime.models.embedder_info, runtime.models.reranker_info
    if embedder.offline_fallback:
        return (
            f"memoria: offline backend ({embedder.active}, full-text; reranker {reranker.active}): "
            "the configured models did not load (--verbose says why)"
        )
    return (
        f"memoria: embedder {embedder.active}, reranker {reranker.active} (--verbose for the model messages)"
    )


# ``--until never``: an argument given as null (a memory's expiry taken away), where a flag left out is
# an argument left out.
NO_EXPIRY: Final = object()


def call(
    handler: Callable[[Any, Runtime, Caller], Awaitable[Model]],
    model: type[BaseModel],
    values: dict[str, Any],
    runtime: Runtime,
    caller: Caller,
    command: str,
    private: dict[str, Any] | None = None,
) -> Model:
    """``handler`` on ``values`` validated as the MCP tool validates them (``private``: attributes of the
    arguments no tool call can set, for what only a command knows)."""
    try:
        given = {
            key: None if value is NO_EXPIRY else value for key, value in values.items() if value is not None
        }
        arguments = model.model_validate(given)
        for name, value in (private or {}).items():
            setattr(arguments, name, value)
    except ValidationError as exc:
        message = friendly_validation_message(
            command, exc, retry="run it again", limits=runtime.settings.schema_limits(command)
        )
        raise CommandError(in_flags(message, command)) from None
    try:
        return anyio.run(handler, arguments, runtime, caller)
    except ToolFailure as exc:
        raise CommandError(in_flags(str(exc), command)) from None


def configured_model(settings: Settings) -> LanguageModel | None:
    """The language model a command's recall asks (the gate, iterative retrieval, the LLM reranker, the LLM
    passes): an OpenAI-compatible endpoint or Cohere chat, as the server gives a client that cannot sample."""
    if settings.background_llm is None:
        return None  # nothing to ask (and the MCP SDK the bridge imports stays out of the command)
    from server.llm_bridge import LLMChooser

    return LLMChooser(settings).background()


def caller_for(args: argparse.Namespace, *, agent: str = CLI_AGENT) -> Caller:
    session = getattr(args, "session", None) or f"{CLI_SESSION_PREFIX}{secrets.token_hex(6)}"
    return Caller(agent_id=getattr(args, "agent", None) or agent, session_id=session, person=True)


def scope_of(args: argparse.Namespace) -> dict[str, Any]:
    return {"org_id": args.org, "project_id": args.project}


def same_store(args: argparse.Namespace) -> str:
    """The flags a command that follows this one needs to reach the same store and scope (as this one was
    given them): printed in the commands a result suggests (a trial followed `memoria outcome` from a
    recall of another project, and replaced the default project's report)."""
    given = [(f"--{name}", getattr(args, name, None)) for name in ("db", "org", "project")]
    return "".join(f" {flag} {shlex.quote(value)}" for flag, value in given if value)


def emit(args: argparse.Namespace, result: BaseModel, readable: str) -> int:
    print(result.model_dump_json(indent=2) if args.json else printable(readable), file=sys.stdout)
    return 0


def day(timestamp: str | None, zone: str | None = None) -> str:
    return at(timestamp, zone)[:10]


def at(timestamp: str | None, zone: str | None = None) -> str:
    """An ISO-8601 moment as a table shows it, "2026-11-30 23:45", in ``zone`` (the command's --time-zone, as
    its window and its context read days; UTC without one): a table beside a context must not show
    another day for the same memory (a trial's finding)."""
    if not timestamp:
        return ""
    from retrieval.time_window import zone_of

    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(zone_of(zone)).strftime("%Y-%m-%d %H:%M")


# --------------------------------------------------------------------------------------------- commands


def remember_command(args: argparse.Namespace, settings: Settings) -> int:
    values = {
        "kind": args.kind,
        "tags": args.tag,
        "episode_id": args.episode,
        "protection_tier": args.tier,
        "occurred_at": learned_at(args.occurred_at, args.time_zone),
        "visibility": args.visibility,
        "expires_at": true_until(args.until, args.time_zone),
    }
    return remember_with(args, settings, values, "remember")


def edit_command(args: argparse.Namespace, settings: Settings) -> int:
    """An explicit update: the new text supersedes the memory (kept for audit), with its kind, tags, tier,
    episode and date unless given (a correction of what happened last week still happened then: a trial's
    edited incident left its week for today)."""
    if args.content is None and not (args.tag or args.tier or args.until):
        raise CommandError(
            "pass the corrected text, or --tag, --tier or --until to change only the memory's tags, tier or "
            "expiry"
        )
    values = {
        "replaces": args.memory_id,
        "kind": args.kind,
        "tags": args.tag,
        "protection_tier": args.tier,
        "occurred_at": learned_at(args.occurred_at, args.time_zone),
        "expires_at": true_until(args.until, args.time_zone),
    }
    return remember_with(args, settings, values, "edit")


def restore_command(args: argparse.Namespace, settings: Settings) -> int:
    """Undo a retraction (``console.restoring``): each retracted memory is remembered again as it was."""
    from console.restoring import restore

    scope = scope_arg(args, settings)
    progress = ProgressBar(sys.stderr)
    with opened(settings, writes=True) as runtime:
        try:
            results = restore(runtime, scope, args.memory_id, flags=same_store(args), progress=progress)
        except ToolFailure as exc:
            raise CommandError(str(exc)) from None
    progress.finish()
    if args.json:
        print(json.dumps([result.model_dump(mode="json") for result in results], indent=2), file=sys.stdout)
        return 0
    print(printable("\n".join(_restored(remembered(result)) for result in results)), file=sys.stdout)
    return 0


def _restored(said: str) -> str:
    """A restore's result as a restore says it: "restored mem_... (fact, standard) in org/project", not the
    remember's "stored ..." and its line on the identical memory it restored (a trial found it confusing)."""
    first, *rest = said.split("\n")
    if first.startswith("stored "):
        first = "re" + first
    return "\n".join([first, *(line for line in rest if not line.startswith("restored: "))])


def true_until(text: str | None, zone: str | None) -> str | object | None:
    """``--until`` as the tool reads it: a date alone through the end of that day in ``zone`` (--time-zone,
    default UTC), an ISO 8601 time as given (without an offset, in ``zone``); "never" takes an expiry away
    (``NO_EXPIRY``: the tool's expires_at null, which an edit passes on)."""
    if text is None:
        return None
    if text.strip().lower() == "never":
        return NO_EXPIRY
    from retrieval.time_window import zone_of

    said = text.strip()
    try:
        day = date.fromisoformat(said) if re.fullmatch(r"\d{4}-?\d{2}-?\d{2}", said) else None
        moment = None if day else datetime.fromisoformat(said.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--until {text!r} is not a date or a time: give 2026-12-11 (through that day), 2026-12-11T18:00Z, "
            "or never"
        ) from None
    if day is not None:  # through that day where the user is
        return (datetime.combine(day, time(), zone_of(zone)) + timedelta(days=1)).isoformat()
    assert moment is not None
    return moment.replace(tzinfo=zone_of(zone)).isoformat() if moment.tzinfo is None else moment.isoformat()


def learned_at(text: str | None, zone: str | None) -> str | None:
    """``--occurred-at`` as the tool reads it: ISO 8601 as given (without an offset, in ``zone``), or a
    relative time ("yesterday", "3 days ago", "last week") as the start of the span it names, in ``zone``
    (--time-zone, default UTC), as --since reads both. A new user's trial: `--occurred-at yesterday` was
    refused, though --since takes it."""
    if text is None:
        return None
    from retrieval.time_window import EXAMPLES, WindowError, span, zone_of

    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        pass
    else:  # ISO 8601 (or its basic form): the tool checks and reads it; without an offset, in --time-zone
        return moment.replace(tzinfo=zone_of(zone)).isoformat() if zone and moment.tzinfo is None else text

    try:
        return span(text, now=datetime.now(UTC), zone=zone_of(zone))[0].isoformat()
    except WindowError as exc:
        if re.fullmatch(r"[\d\sT:.+-]+Z?", text.strip()):
            return text  # a malformed ISO time: the tool's message says what is wrong with it
        raise CommandError(
            f"--occurred-at {text!r} is not a time: give ISO 8601 (2026-11-24T09:30:00Z) or one of {EXAMPLES}"
        ) from exc


def remember_with(args: argparse.Namespace, settings: Settings, values: dict[str, Any], command: str) -> int:
    """remember (or edit) ``args.content`` ('-': stdin) with these arguments, and print what it did."""
    from tools import remember

    content = sys.stdin.read() if args.content == "-" else args.content
    caller = caller_for(args)
    # An edit keeps the memory's date (``tools.remember.inherited``).
    with opened(settings, writes=True) as runtime:
        if content is None:  # `memoria edit ID --tag ...`: the same text, other tags or tier
            scope = scope_arg(args, settings)
            # As the tool reads it: the project and the org's shelf, as this agent sees them (a review found
            # an org-wide memory said not to exist here, and another agent's private one read).
            seen_by = View(scope, Viewer(caller.agent_id, caller.session_id))
            found = runtime.store.get_memory(values["replaces"], seen_by)
            if found is None:
                raise CommandError(
                    f"no memory {values['replaces']!r} in org {scope.org_id!r} / project {scope.project_id!r}"
                    f"{held_elsewhere(runtime, caller, values['replaces'], scope)}: check the id (`memoria list`) and "
                    "--org/--project"
                )
            content = found.content
        result = call(
            remember.handle,
            remember.RememberInput,
            {"content": content, **values, **scope_of(args)},
            runtime,
            caller,
            command,
        )
    return emit(args, result, in_flags(remembered(result)))


def recall_command(args: argparse.Namespace, settings: Settings) -> int:
    from retrieval.stages.instructions import instruction_signals
    from tools import recall

    with opened(settings) as runtime:
        caller = Caller(
            agent_id=args.agent or CLI_AGENT,
            session_id=args.session
            or current_session(runtime, args, args.agent or CLI_AGENT, new=args.new_session),
            llm=configured_model(settings),
        )
        result = call(
            recall.handle,
            recall.RecallInput,
            {
                "query": args.query,
                "top_k": args.top_k,
                "char_budget": args.budget,
                "tags": args.tag or None,
                "tags_all": args.all_tags or None,
                "kinds": args.kind or None,
                "since": args.since,
                "until": args.until,
                "time_zone": args.time_zone,
                **scope_of(args),
            },
            runtime,
            caller,
            "recall",
        )
    if args.context and not args.json:
        if result.context:
            print(printable(result.context), file=sys.stdout)
        else:  # stdout stays empty (nothing to paste); why, on stderr
            print(_empty_recall(args, result), file=sys.stderr)
        return 0
    if result.gated or not result.memories:
        readable = _empty_recall(args, result)
    else:
        readable = table(
            ["#", "score", "id", "kind", "agent", "date", "memory"],
            [
                [
                    memory.position,
                    memory.score,
                    memory.id,
                    memory.kind + (" (sibling)" if memory.source == "sibling" else ""),
                    memory.agent_id,
                    day(memory.created_at, args.time_zone),
                    ("[disputed] " if memory.contradicted_by else "")
                    # as the context's WARNING says it (a new user's trial: the table said nothing)
                    + ("[reads as instructions] " if instruction_signals(memory.content) else "")
                    + memory.content,
                ]
                for memory in result.memories
            ],
        )
    footer = [
        *([f"note: {in_flags(result.note)}"] if result.note and result.memories else []),
        *(f"warning: {warning}" for warning in result.warnings),
        f"retrieval {result.retrieval_id}, session {result.session_id}",
        f"why: memoria explain {result.retrieval_id}{same_store(args)}",
        *(
            [
                "how it went: memoria outcome success|failure|partial [--helpful ID] [--misleading ID]"
                f"{same_store(args)}{' --agent ' + shlex.quote(args.agent) if args.agent else ''} "
                f"--session {result.session_id}"
            ]
            if result.memories
            else []
        ),
    ]
    return emit(args, result, "\n".join([readable, "", *footer]))


def _empty_recall(args: argparse.Namespace, result: Any) -> str:
    """Why a recall placed nothing in its context: its query was gated, nothing relevant was found within
    its limits, or what matched did not fit (the budget, or the language model's passes: the note)."""
    from tools.recall_notes import NOTHING_MATCHED

    if result.gated:
        return f"memory was not searched: {result.gate_reason}"
    if result.note and not result.note.startswith(NOTHING_MATCHED):
        return in_flags(result.note)
    found = _nothing_found(args, result.window)
    # What its vector search could not see, as the tool's text says it: a trial switched the embedder and
    # read only "nothing relevant", where `memoria reembed` was the fix.
    unseen = result._unsearched
    return f"{found}\n{unseen[0].upper()}{unseen[1:]}." if unseen else found


def _nothing_found(args: argparse.Namespace, window: dict[str, str | None] | None) -> str:
    """What an empty recall says: that nothing stored is relevant, or that nothing passed the limits it
    was given (a window, tags, kinds, another project) or took from the query's words (a window), with
    how to widen it."""
    from tools.recall_window import searched_window

    limits = [
        *([f"--since {args.since}"] if args.since else []),
        *([f"--until {args.until}"] if args.until else []),
        *(f"--tag {tag}" for tag in args.tag),
        *(f"--kind {kind}" for kind in args.kind),
    ]
    # --project and --org name the memory searched, not a filter on it: nothing to widen there (a new
    # user's trial: "try again without it" sent a search of project fb to the default project).
    where = "".join(
        [
            *([f" in project {args.project}"] if args.project else []),
            *([f" of org {args.org}"] if args.org else []),
        ]
    )
    searched = searched_window(window)
    if searched and window and window.get("from") != "since/until":
        also = f" and {' '.join(limits)}" if limits else ""
        return (
            f"nothing relevant found{where}{searched}{also}: the time the query names limited the search; say "
            "it without the time words to search all of memory."
        )
    if not limits:
        return f"nothing relevant to this query was found in memory{where}."
    since = (window or {}).get("since")
    if args.since and since and datetime.fromisoformat(since) > datetime.now(UTC):  # (a trial)
        return (
            f"nothing found{where}: --since {args.since} starts in the future ({since}), and no memory is "
            "dated after now: pass a --since before now, or none."
        )
    widen = "without it" if len(limits) == 1 else "without some of them"
    # The zone the window's days were read in: not a limit to drop, but part of what was searched.
    zone = f" (days in --time-zone {args.time_zone})" if args.time_zone and (args.since or args.until) else ""
    said = f"nothing relevant found{where} within {' '.join(limits)}{zone}: try again {widen}."
    if not (args.since or args.until):
        return said
    # A question about a time in few words ("what did we decide?" since last week) may match nothing there
    # while the window holds what it asks for: a new user's trial, told to drop the window, got an older
    # memory that matched "week" instead. Listing the window shows what it holds.
    window_flags = (("--since", args.since), ("--until", args.until), ("--time-zone", args.time_zone))
    listing = "".join(f" {flag} {shlex.quote(str(value))}" for flag, value in window_flags if value)
    return f"{said} To read everything stored in that time: memoria list{same_store(args)}{listing}"


def explain_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import explain_ranking
    from tools.explain_text import relevance_floor, searched_within

    if (args.retrieval_id is None) == (args.query is None):
        raise CommandError(
            ("pass only one of " if args.query is not None else "pass ")
            + "a retrieval id (from recall) or --query to run and explain a recall now"
        )
    with opened(settings) as runtime:
        result = call(
            explain_ranking.handle,
            explain_ranking.ExplainRankingInput,
            {
                "retrieval_id": args.retrieval_id,
                "query": args.query,
                "memory_id": args.memory,
                **scope_of(args),
            },
            runtime,
            replace(caller_for(args), llm=configured_model(settings)),
            "explain_ranking",
        )
    floor = relevance_floor(result)
    head = key_values(
        [
            ("retrieval", f"{result.retrieval_id} ({result.purpose}, {result.created_at})"),
            ("query", clip(result.query, 100)),
            ("by", f"{result.agent_id}, session {result.session_id}"),
            ("weighting", "on" if result.weighting_enabled else "off (A/B control)"),
            # The window and filters the recall searched within (a trial: only the tool's text said them).
            *([("searched only", searched)] if (searched := searched_within(result).strip()) else []),
            *(
                [("relevance floor", f"{floor:g}, compared with each memory's match (not its relevance)")]
                if floor is not None
                else []
            ),
            *((f"backend: {name}", value) for name, value in result.backends.items()),
            ("stages (ms)", ", ".join(f"{s.stage} {s.elapsed_ms:.1f}" for s in result.stages)),
            *(
                (f"llm pass: {e['llm_pass']}", _pass_summary(e))
                for s in result.stages
                for e in s.events
                if e.get("event") == "LLMPassRan"
            ),
        ]
    )
    if result.gated:
        head += f"\nthe gate skipped retrieval: {result.gated}"
    # The candidates come in the order recall ranked them (final score, after the episode neighbourhood and
    # the answer type); "weighted" is the rank before siblings and neighbours joined, "unweighted" the rank
    # by relevance alone, "delta" the places feedback moved it in the order recall returned.
    ranked = result.candidates
    body = table(
        [
            "rank",
            "weighted",
            "unweighted",
            "delta",
            "final",
            "relevance",
            "match",
            "rerank",
            "boost",
            "nbhd",
            "answer",
            "weight",
            "global",
            "ctx",
            "id",
            "why",
        ],
        [
            [
                c.rank + 1,
                None if c.weighted_rank is None else c.weighted_rank + 1,
                None if c.unweighted_rank is None else c.unweighted_rank + 1,
                c.rank_delta,
                c.scores.final,
                c.scores.relevance,
                c.scores.floor,
                c.scores.rerank,
                c.scores.corroboration_boost,
                c.scores.neighbourhood,
                c.scores.answer_type,
                c.scores.feedback_weight,
                c.scores.global_weight,
                c.in_context,
                c.id,
                f"{c.reason} | {c.preview}",
            ]
            for c in ranked
        ],
    )
    moved = "\n".join(_feedback_lines(ranked))
    notes = "\n".join(f"note: {note}" for note in result.notes)
    parts = (head, body or "no candidates.", moved, notes)
    return emit(args, result, "\n\n".join(part for part in parts if part))


def _feedback_lines(ranked: list[Any]) -> list[str]:
    """The reports behind each weight that is not neutral, as `memoria explain` prints them: which
    session, the memory's role there, how close that session's query was, the weight before and after."""
    lines = []
    for candidate in ranked:
        if not candidate.feedback.moves:
            continue
        lines.append(
            f"feedback on {candidate.id}: weight {candidate.scores.feedback_weight:.3f} for this query "
            f"(global {candidate.scores.global_weight:.3f}), {candidate.feedback.reports} report(s)"
        )
        lines += [
            f"  {move.session_id}: {move.role}, share {move.share:.2f}, closeness {move.closeness:.2f}, "
            f"{move.weight_before:.3f} -> {move.weight_after:.3f}"
            for move in candidate.feedback.moves
        ]
    return lines


def _pass_summary(event: dict[str, Any]) -> str:
    """One LLM pass at assembly, as `memoria explain` prints it."""
    usage = (
        f"; {event['prompt_tokens']} + {event['completion_tokens']} tokens"
        if event.get("prompt_tokens") is not None
        else ""
    )
    cost = f", ${event['cost']:.6f}" if event.get("cost") is not None else ""
    model = f" ({event['model']}{usage}{cost})" if event.get("model") else ""
    return f"{'applied' if event['applied'] else 'not applied'}: {event['reason']}{model}"


def label_of(score: float | None) -> str | None:
    """The outcome label nearest a score given alone (the score still sets the weights): failure 0,
    partial 0.5, success 1; a score halfway between two reads as partial."""
    if score is None:
        return None
    if score < 0.25:
        return "failure"
    return "success" if score > 0.75 else "partial"


def outcome_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import report_outcome

    if args.score is not None and not 0.0 <= args.score <= 1.0:  # said first: no session is looked for
        raise CommandError(f"--score {args.score:g} is out of range: pass a number from 0 to 1")
    hook = read_hook_input(sys.stdin) if args.hook else {}
    label = args.outcome or ("partial" if args.hook else None) or label_of(args.score)
    if label is None:
        raise CommandError("say how the task went: memoria outcome success|failure|partial, or --score 0..1")
    agent = args.agent or (HOOK_AGENT if args.hook else CLI_AGENT)
    note = args.note or (hook_note(hook) if args.hook else None)
    with opened(settings, models=False, writes=True) as runtime:
        if args.session:
            session = args.session
            if not args.replace:
                refuse_replacing_the_agents_report(runtime, args, session)
        elif not args.hook:
            # The session `memoria recall` used last: reporting it again replaces the earlier report,
            # never an older session's.
            scope = scope_arg(args, runtime.settings)
            since = datetime.now(UTC) - HOOK_WINDOW
            recent = runtime.store.recent_sessions(scope, agent, since)
            # A newer recall of another project waiting for its report is the one meant, most likely: say so
            # rather than report this project's (a new user's trial: `outcome success` after a recall with
            # --project mobile replaced the report of an earlier session of the default project).
            elsewhere = next(
                (
                    (name, project)
                    for name, project, at in runtime.store.sessions_in_other_projects(scope, agent, since)
                    if (not recent or at > recent[0][1])
                    and runtime.store.get_outcome(Scope(scope.org_id, project), name) is None
                ),
                None,
            )
            if elsewhere is not None and not args.replace:
                name, project = elsewhere
                here = recent[0][0] if recent else None
                this = (
                    "none here"
                    if here is None
                    else f"its newest session here, {here}, was reported already"
                    if runtime.store.get_outcome(scope, here)
                    else f"its newest session here is {here}"
                )
                raise CommandError(
                    f"{agent}'s newest recall was in project {project!r} (session {name}), not in "
                    f"{scope.project_id!r} ({this}): pass --project {project} to report it"
                    + (f", or --session {here} for this project's" if here else "")
                )
            if not recent:
                raise CommandError(
                    f"no session of {agent} recalled in the last {HOOK_WINDOW.total_seconds() / 3600:.0f} hours: "
                    "run `memoria recall` first, or pass --session (recall prints its session id)"
                )
            session = recent[0][0]
            unreported = [
                name
                for name, _ in recent
                if not name.startswith(CLI_SESSION_PREFIX) and runtime.store.get_outcome(scope, name) is None
            ]
            if not session.startswith(CLI_SESSION_PREFIX) and len(unreported) > 1:
                # Several of an agent's sessions wait (two windows, or conversations never reported): which
                # one this report is about is not known, as for the hook.
                raise CommandError(
                    f"{len(unreported)} sessions of {agent} wait for a report ({', '.join(unreported)}); pass "
                    "--session ID for the one this report is about"
                )
            reported = runtime.store.get_outcome(scope, session)
            if not session.startswith(CLI_SESSION_PREFIX) and reported and (not args.replace or elsewhere):
                # Not a session of this command: its report was the agent's (or its hook's) to make; with
                # --replace, this one is meant (a trial was refused, and told to pass what it had passed),
                # unless a newer recall of another project waits for its report (a review).
                raise CommandError(
                    f"{agent}'s newest session {session} was already reported; pass --session {session} "
                    "--replace to replace that report"
                )
        else:
            since = max(
                datetime.now(UTC) - HOOK_WINDOW, conversation_start(hook) or datetime.min.replace(tzinfo=UTC)
            )
            waiting = sessions_waiting(runtime, args, agent, since, hook_reports_only=args.hook)
            if args.hook and waiting:
                others, waiting = waiting, recalled_in_transcript(runtime, args, waiting, hook)
                if not waiting:
                    print(
                        f"memoria outcome: the ending conversation's transcript shows memoria never used, so "
                        f"{'neither' if len(others) > 1 else 'not'} the {counted(len(others), 'session')} of "
                        f"{agent} waiting for a report ({', '.join(others)}: another conversation's); nothing "
                        "reported",
                        file=sys.stderr,
                    )
                    return 0
            if not waiting:  # never recalled, or the agent reported it itself: nothing to do
                print(
                    f"memoria outcome: no session of {agent} that recalled since {since:%Y-%m-%d %H:%M} UTC "
                    "is waiting for a report; nothing reported",
                    file=sys.stderr,
                )
                return 0
            if len(waiting) > 1:  # several conversations at once: guessing could hit the wrong one
                print(
                    f"memoria outcome: {len(waiting)} sessions of {agent} are waiting for a report "
                    f"({', '.join(waiting)}); which one ended is not known, so nothing was reported. Report them "
                    "with `memoria outcome LABEL --session ID`.",
                    file=sys.stderr,
                )
                return 0
            session = waiting[0]
        used: list[str] = []
        if args.hook and not args.helpful and not args.misleading:
            used = hook_used(runtime, args, session, hook)
            if used:
                note = f"{note}; {counted(len(used), 'memory')} the transcript shows it used"
        result = call(
            report_outcome.handle,
            report_outcome.ReportOutcomeInput,
            {
                "outcome": label,
                "score": args.score,
                "session_id": session,
                "note": note,
                "helpful_ids": args.helpful or None,
                "misleading_ids": args.misleading or None,
                **scope_of(args),
            },
            runtime,
            # A session typed with --session is named, as an agent names another session: one that never
            # recalled is refused (a typo), not made up. Found here (the newest, or the hook's), it is ours.
            Caller(agent_id=agent, session_id=f"{CLI_SESSION_PREFIX}report" if args.session else session),
            "report_outcome",
            {"_used": tuple(used)},
        )
    readable = [
        f"session {result.session_id}: {result.outcome} (score {result.score:.2f}), {result.status}",
        in_flags(result.detail),
    ]
    if result.updated:
        readable.append(
            table(
                ["id", "role", "share", "global weight before", "global weight after"],
                [[u.id, u.role, u.share, u.weight_before, u.weight_after] for u in result.updated],
            )
        )
    advice = misleading_advice(result, "correct it with `memoria edit ID TEXT`, or `memoria forget ID`")
    readable += [advice] if advice else []
    return emit(args, result, "\n".join(readable))


def hook_used(runtime: Runtime, args: argparse.Namespace, session: str, hook: dict[str, Any]) -> list[str]:
    """The memories the ending conversation's transcript shows the agent used (a whole share each, not the
    agent's word). Those an earlier report of the same session credited so (the hook's, before /clear) are
    kept by the report itself (``writing.outcomes.used_kept``)."""
    from console.hook_usage import used_in_session

    scope = scope_arg(args, runtime.settings)
    return used_in_session(runtime, scope, session, hook.get("transcript_path"), conversation_start(hook))


def refuse_replacing_the_agents_report(runtime: Runtime, args: argparse.Namespace, session: str) -> None:
    """An agent's session (not one of this command's) reported already, not by the hook, is replaced only
    with ``--replace``: its report (the agent's, or an earlier command's: a report does not keep who made
    it) may name the memories that helped or misled, and a report from here would drop what it said."""
    if session.startswith(CLI_SESSION_PREFIX):
        return
    report = runtime.store.get_outcome(scope_arg(args, runtime.settings), session)
    if report is None or (report.note or "").startswith(HOOK_NOTE):
        return
    named = [credit for credit in report.own_credits() if credit.role in ("helpful", "misleading")]
    said = f", naming {counted(len(named), 'memory')} helpful or misleading" if named else ""
    raise CommandError(
        f"session {session} was reported already ({report.outcome}{said}); this report would replace it. "
        "Add --replace to replace it (name the memories again with --helpful / --misleading to keep them)"
    )


def current_session(runtime: Runtime, args: argparse.Namespace, agent: str, *, new: bool = False) -> str:
    """The agent's current session: the newest one that recalled in the last ``HOOK_WINDOW`` and has no
    report yet, so that recalls made one after another count toward one outcome; a new one when that
    session was reported (or there is none, or ``new``)."""
    if not new:
        scope = scope_arg(args, runtime.settings)
        recent = runtime.store.recent_sessions(scope, agent, datetime.now(UTC) - HOOK_WINDOW)
        # Only sessions this command started: never one of a connected agent's.
        mine = [session for session, _ in recent if session.startswith(CLI_SESSION_PREFIX)]
        if mine and runtime.store.get_outcome(scope, mine[0]) is None:
            return mine[0]
    return f"{CLI_SESSION_PREFIX}{secrets.token_hex(6)}"


def read_hook_input(stream: TextIO) -> dict[str, Any]:
    """The JSON a Claude Code hook receives on stdin (session_id, transcript_path, reason, ...); a hook
    run by hand with nothing on stdin reads as empty."""
    if stream.isatty():
        return {}
    text = stream.read().strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--hook expects the hook's JSON on stdin: {exc}") from None
    return value if isinstance(value, dict) else {}


HOOK_NOTE = "reported by the session-end hook"


def hook_note(hook: dict[str, Any]) -> str:
    reason = hook.get("reason") or hook.get("hook_event_name") or "the session ended"
    session = hook.get("session_id")
    return f"{HOOK_NOTE} ({reason}" + (f", Claude Code session {session})" if session else ")")


def sessions_waiting(
    runtime: Runtime, args: argparse.Namespace, agent: str, since: datetime, *, hook_reports_only: bool
) -> list[str]:
    """Sessions of ``agent`` that recalled since ``since`` and wait for a report, newest first: never
    reported, or (for the hook) reported by this hook before recalls that came after it (a conversation
    cleared with /clear goes on in the same server process, so in the same session). A report the agent
    made itself is never replaced by the hook's."""
    scope = scope_arg(args, runtime.settings)
    waiting = []
    for session, last_recall in runtime.store.recent_sessions(scope, agent, since):
        report = runtime.store.get_outcome(scope, session)
        if report is None or (
            hook_reports_only
            and (report.note or "").startswith(HOOK_NOTE)
            and last_recall > report.reported_at
        ):
            waiting.append(session)
    return waiting


def recalled_in_transcript(
    runtime: Runtime, args: argparse.Namespace, waiting: list[str], hook: dict[str, Any]
) -> list[str]:
    """Of the sessions ``waiting``, the ending conversation's: none when its transcript shows memoria never
    used (another window's session that recalled while it ran is that window's to report: a trial saw a
    conversation that never called memoria report it); those whose recall ids it names; else (no
    transcript to read, or memoria used and no id of these named: a subagent's, a cut transcript) all of
    them, as before."""
    from console.hook_usage import recalls_in

    seen = recalls_in(hook.get("transcript_path"))
    if seen is None:
        return waiting
    if not seen.used:
        return []
    scope = scope_arg(args, runtime.settings)
    named = [
        session
        for session in waiting
        if any(r.retrieval_id in seen.ids for r in runtime.store.session_retrievals(scope, session))
    ]
    return named or waiting


def conversation_start(hook: dict[str, Any]) -> datetime | None:
    """When the ending Claude Code conversation began: the first timestamp in its transcript (JSONL), so
    the hook does not report on sessions of conversations that ended before it began."""
    path = hook.get("transcript_path")
    if not isinstance(path, str):
        return None
    try:
        with open(path, encoding="utf-8") as transcript:
            for line in transcript:
                try:
                    stamp = json.loads(line).get("timestamp")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if isinstance(stamp, str):
                    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) - timedelta(minutes=1)
    except (OSError, ValueError):
        return None
    return None


def scope_arg(args: argparse.Namespace, settings: ToolSettings) -> Scope:
    """The scope ``--org``/``--project`` name (default: the configured one), checked as the tools check it."""
    from tools.common import ScopeArgs

    try:
        return ScopeArgs.model_validate(scope_of(args)).scope(settings)
    except ValidationError as exc:
        raise CommandError(
            in_flags(friendly_validation_message("this command", exc, retry="run it again"))
        ) from None


def forget_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import forget
    from tools.forget_matches import org_wide_note

    given = sum(what is not None for what in (args.memory_id, args.query, args.tag))
    if given != 1:
        raise CommandError(
            ("pass only one of " if given else "pass ")
            + "a memory id, --query (to forget the best matches) or --tag"
        )
    mode = "purge" if args.purge else "retract"
    values = {
        "memory_id": args.memory_id,
        "query": args.query,
        "tag": args.tag,
        "mode": mode,
        "max_memories": args.max,
        "reason": args.reason,
        **scope_of(args),
    }
    with opened(settings, writes=True) as runtime:
        caller = caller_for(args)
        # A purge, or anything chosen by a query or a tag, is shown and confirmed first.
        chosen = args.query is not None or args.tag is not None
        if (mode == "purge" or chosen) and not args.dry_run and not args.yes:
            preview = call(
                forget.handle, forget.ForgetInput, {**values, "dry_run": True}, runtime, caller, "forget"
            )
            if not preview.forgotten:
                print(in_flags(preview.note or "nothing matches: nothing forgotten"), file=sys.stderr)
                return 1
            what = "erase" if mode == "purge" else "retract"
            print(forgotten_table(preview), file=sys.stderr)  # stdout stays the result (--json)
            aside = _beside_the_preview(preview.note)
            if aside:  # what else matches and is left, what is inactive already
                print(in_flags(aside), file=sys.stderr)
            if not sys.stdin.isatty():  # nobody to ask: what would go is listed above, then refused
                raise CommandError(
                    f"this would {what} the {counted(len(preview.forgotten), 'memory')} above: add --yes to confirm"
                )
            question = "erase these memories for good" if mode == "purge" else "retract these memories"
            print(f"{question} ({len(preview.forgotten)})? [y/N] ", end="", file=sys.stderr, flush=True)
            if sys.stdin.readline().strip().lower() != "y":
                print(f"nothing {'purged' if mode == 'purge' else 'retracted'}", file=sys.stderr)
                return 1
            if args.tag is not None:
                # Exactly the memories shown: one tagged since the list was printed is not among them.
                shown = [memory.id for memory in preview.forgotten]
                one_by_one = {**values, "tag": None, "dry_run": False}
                done = [
                    call(
                        forget.handle,
                        forget.ForgetInput,
                        {**one_by_one, "memory_id": memory_id},
                        runtime,
                        caller,
                        "forget",
                    )
                    for memory_id in shown
                ]
                gone = [memory for result in done for memory in result.forgotten]
                verb = "purged" if mode == "purge" else "retracted"
                # Said of the org-wide ones, as the preview said (each was forgotten by its id).
                home = scope_arg(args, runtime.settings)
                stored = [runtime.store.get_memory(memory.id) for memory in gone]
                org_wide = org_wide_note([m for m in stored if m is not None], home, dry_run=False)
                note = f"{counted(len(gone), 'memory')} tagged {args.tag!r} {verb}"
                result = forget.ForgetOutput(
                    mode=mode,
                    dry_run=False,
                    forgotten=gone,
                    note=f"{note}; {org_wide}" if org_wide else note,
                )
                readable = f"{verb} {counted(len(gone), 'memory')}; {result.note}"
                return emit(args, result, _forgotten_text(args, readable, result, _expired(runtime, result)))
        result = call(
            forget.handle, forget.ForgetInput, {**values, "dry_run": args.dry_run}, runtime, caller, "forget"
        )
        expired = _expired(runtime, result)
    verb = "would " + mode if result.dry_run else {"purge": "purged", "retract": "retracted"}[mode]
    if result.forgotten or not result.note:
        readable = f"{verb} {counted(len(result.forgotten), 'memory')}" + (
            f"; {in_flags(result.note)}" if result.note else ""
        )
    else:  # the note says that nothing was forgotten, and why
        readable = in_flags(result.note)
    emitted = emit(args, result, _forgotten_text(args, readable, result, expired))
    # Nothing chosen by a query or a tag, confirmed, shown (--dry-run) or not: the same exit status as
    # when asked (a new user's trial: --dry-run exited 0 when nothing matched).
    return 1 if chosen and not result.forgotten else emitted


def _expired(runtime: Runtime, result: Any) -> set[str]:
    """The ids of the memories a forget took whose expiry had passed (a tag takes them too)."""
    now = datetime.now(UTC)
    found = [runtime.store.get_memory(memory.id) for memory in result.forgotten]
    return {m.id for m in found if m is not None and m.expires_at is not None and m.expires_at <= now}


def _forgotten_text(args: argparse.Namespace, readable: str, result: Any, expired: set[str]) -> str:
    """What a forget prints: what it did, the memories, and the command that undoes a retraction just
    made (none for a purge, or a dry run), without the memories whose expiry had passed: `restore` brings
    a memory back with its expiry, so those stay out (a trial: the undo brought one back for good)."""
    back = [m.id for m in result.forgotten if m.id not in expired]
    undo = None
    if result.forgotten and result.mode == "retract" and not result.dry_run:
        undo = "undo: memoria restore " + " ".join(back) + same_store(args) if back else None
        if expired:  # on a line of its own: the undo line is a command to copy
            gone = ", ".join(sorted(expired))
            undo = "\n".join(filter(None, [undo, f"not restorable, their time had run out: {gone}"]))
    return "\n".join(filter(None, [readable, forgotten_table(result), undo]))


# A dry run of a whole tag says so, and how to go ahead with the tool: the command asks instead.
_DRY_RUN_SAID = re.compile(r"^dry run: .*?; call again with dry_run=false to forget them(?:; )?", re.DOTALL)


def _beside_the_preview(note: str | None) -> str | None:
    """What a preview's note says beside the memories it lists, for a command about to ask for
    confirmation: not the tool's own instructions for going ahead (``--dry-run`` was not given)."""
    return _DRY_RUN_SAID.sub("", note or "") or None


def forgotten_table(result: Any) -> str:
    relevance = {match.id: match.relevance for match in getattr(result, "matches", [])}
    return table(
        ["id", "relevance", "kind", "agent", "date", "memory"],
        [
            [m.id, relevance.get(m.id), m.kind, m.agent_id, day(m.created_at), m.preview]
            for m in result.forgotten
        ],
    )


def ui_command(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the live page on 127.0.0.1 until interrupted; its URL (with this run's token) goes to stdout."""
    from console.ui import UiServer

    with opened(settings) as runtime:
        try:
            ui = UiServer(runtime, port=args.port)
        except OSError as exc:
            raise CommandError(
                f"could not listen on 127.0.0.1:{args.port}: {exc}. Pick another --port"
            ) from None
        print(f"memoria ui: {ui.url}  (Ctrl-C stops it)", file=sys.stdout, flush=True)
        if not args.no_open and not webbrowser.open(ui.url):
            print(
                "memoria ui: no browser could be started here: open the address above yourself",
                file=sys.stderr,
            )
        try:
            ui.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            ui.close()
    return 0


def expiry(expires_at: str | None, status: str) -> str | None:
    """When an ephemeral memory expires, and whether it has: recall leaves it out from then, and the next
    maintenance round retracts it (if it is still active)."""
    if expires_at is None:
        return None
    if datetime.fromisoformat(expires_at) > datetime.now(UTC):
        return expires_at
    if status not in ("active", "expired"):  # "expired": active, not yet retracted (``status_at``)
        return f"{expires_at} (expired)"
    return f"{expires_at} (expired: recall and listings leave it out; the next maintenance round retracts it)"


def show_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import show_memory

    with opened(settings) as runtime:
        result = call(
            show_memory.handle,
            show_memory.ShowMemoryInput,
            {"memory_id": args.memory_id, **scope_of(args)},
            runtime,
            caller_for(args),
            "show",
        )
    lineage = result.lineage
    facts = key_values(
        [
            ("id", result.id),
            ("scope", readers(result)),
            ("kind / tier", f"{result.kind} / {result.protection_tier}"),
            (
                "status",
                result.status + (f" (replaced by {result.replaced_by})" if result.replaced_by else ""),
            ),
            # Its date: when it happened or was learned (occurred_at), else when it was written.
            ("dated", f"{result.created_at} by {result.agent_id}, session {result.session_id}"),
            ("expires", expiry(result.expires_at, result.status)),
            ("episode", result.episode_id),
            ("tags", ", ".join(result.tags) or None),
            # Over every report (a trial read it as what recall applies; that is a weight per query, closer
            # reports counting more: `memoria explain` shows it).
            (
                "global weight",
                f"{result.weight:.3f} (every report; recall applies a weight per task: memoria explain "
                f"--query QUERY --memory {result.id})",
            ),
            ("embedder", result.embedder),
            # Where nothing active stands in its place (its correction forgotten since), the note says so.
            ("current", None if lineage.current.id == result.id else lineage.note or lineage.current.id),
        ]
    )
    parts = [facts, "", result.content or "(content purged)"]
    if result.weight_history:
        # A correction's history holds the memories it replaced (an explicit update, a restatement): a row
        # of another memory says whose weight it moved (a new user's trial read a predecessor's misleading
        # report as the correction's own).
        inherited = any(s.memory_id != result.id for s in result.weight_history)
        parts += [
            "",
            "weight history:",
            table(
                ["at", "session", "before", "after", *(["memory"] if inherited else [])],
                [
                    [
                        s.at,
                        s.session_id,
                        s.weight_before,
                        s.weight_after,
                        *([s.memory_id if s.memory_id != result.id else "this one"] if inherited else []),
                    ]
                    for s in result.weight_history
                ],
            ),
        ]
    if lineage.replaces:
        parts += [
            "",
            "replaced:",
            table(
                ["id", "how", "by", "memory"],
                [[r.memory.id, r.how.action, r.how.resolver, r.memory.preview] for r in lineage.replaces],
            ),
        ]
    return emit(args, result, "\n".join(parts))


def stats_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import stats

    with opened(settings) as runtime:
        result = call(stats.handle, stats.StatsInput, scope_of(args), runtime, caller_for(args), "stats")
    weights = result.weights
    readable = key_values(
        [
            ("store", f"{result.store} (schema {result.schema_version})"),
            ("scope", f"{result.org_id}/{result.project_id}"),
            ("memories", f"{result.memories:,} ({counts(result.by_status)})"),
            *([("org-wide", f"{result.org_wide:,} active, read here too")] if result.org_wide else []),
            ("active by kind", counts(result.by_kind)),
            ("active by tier", counts(result.by_tier)),
            ("by embedder", counts(result.by_embedder)),
            ("agents / episodes", f"{result.agents:,} / {result.episodes:,}"),
            (  # (active memories whose weight is not 1.0 now; the report counts every move, of any memory)
                "weights moved",
                f"{weights.moved:,} active memories off 1.0 now ({weights.raised:,} raised, "
                f"{weights.lowered:,} lowered; range {_span(weights.lowest, weights.highest)})",
            ),
            # (when each happened, else when written: a trial read "written" of a history imported today)
            ("dated", f"{result.first_written or '-'} .. {result.last_written or '-'}"),
            ("recalls recorded", result.retrievals),
            ("sessions reported", counts(result.sessions_reported)),
            ("open contradictions", result.open_contradictions),
            ("lineage events", result.lineage_events),
            *((f"backend: {name}", value) for name, value in result.backends.items()),
        ]
    )
    if result.note:
        readable += f"\nnote: {in_flags(result.note)}"
    return emit(args, result, readable)


def drift_command(args: argparse.Namespace, settings: Settings) -> int:
    """The scope's open contradictions, newest first, and its recent revisions (the drift tool; a trial found
    no command for it)."""
    from tools import drift

    arguments = {"include_resolved": args.include_resolved, "limit": args.limit, **scope_of(args)}
    with opened(settings) as runtime:
        result = call(drift.handle, drift.DriftInput, arguments, runtime, caller_for(args), "drift")
    settle = (
        "Settle each: `memoria forget ID` the one that is wrong, or `memoria edit ID TEXT` it with what is "
        "true."
    )
    return emit(args, result, in_flags(drift.text_of(result, settle)))


def list_command(args: argparse.Namespace, settings: Settings) -> int:
    from tools import list_memories

    arguments = {
        "agent_id": args.agent,
        "tag": args.tag,
        "kind": args.kind,
        "episode_id": args.episode,
        "since": args.since,
        "until": args.until,
        "time_zone": args.time_zone,
        "status": args.status,
        "cursor": args.cursor,
        "limit": args.limit,
    }
    with opened(settings) as runtime:
        result = call(
            list_memories.handle,
            list_memories.ListMemoriesInput,
            {**{name: value for name, value in arguments.items() if value is not None}, **scope_of(args)},
            runtime,
            caller_for(args),
            "list",
        )
    rows = [
        [
            memory.id,
            at(memory.created_at, args.time_zone),
            memory.kind,
            memory.agent_id,
            (f"[expires {at(memory.expires_at, args.time_zone)}] " if memory.expires_at else "")
            + (
                f"[{memory.status}{f' by {memory.replaced_by}' if memory.replaced_by else ''}] "
                if memory.status != "active"
                else ""
            )
            # Its preview whole (the table wraps it under itself to the terminal's width), marked when the
            # text goes on: a trial read 60 characters under an 87-character column.
            + (
                memory.preview + "…" if len(memory.preview) >= list_memories.PREVIEW_CHARS else memory.preview
            ),
        ]
        for memory in result.memories
    ]
    zone = f" ({args.time_zone})" if args.time_zone else ""
    parts = [table(["id", f"dated{zone}", "kind", "agent", "memory"], rows) if rows else "no memories match"]
    if args.since or args.until:
        # The window as read: "1 week ago" is the calendar week (from Monday) before this one, "7 days ago"
        # a day (a new user's trial expected seven days back, and the window showed only in --json).
        window = [
            f"{name} {given!r} = {at(resolved, args.time_zone)}"
            for name, given, resolved in (
                ("since", args.since, result.since),
                ("until", args.until, result.until),
            )
            if given
        ]
        parts.append(f"window: {', '.join(window)}{zone or ' (UTC)'}" + (" (excluded)" if args.until else ""))
        if (
            not rows and result.since and datetime.fromisoformat(result.since) > datetime.now(UTC)
        ):  # (a trial)
            parts.append("the window starts in the future: no memory is dated after now")
    if result.next_cursor:
        # The same listing's next page: every option given again (the cursor carries none of them), the
        # time window as resolved now ("2 hours ago" read again later would be another window).
        given = [
            (flag, getattr(args, name, None))
            for flag, name in (
                ("--db", "db"),
                ("--org", "org"),
                ("--project", "project"),
                ("--agent", "agent"),
                ("--tag", "tag"),
                ("--kind", "kind"),
                ("--episode", "episode"),
                ("--status", "status"),
                ("--limit", "limit"),
                ("--time-zone", "time_zone"),  # the dates shown (a trial: page 2 showed them in UTC)
            )
        ]
        given += [("--since", result.since), ("--until", result.until)]
        again = " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in given if value is not None)
        parts.append(f"next page: memoria list {again + ' ' if again else ''}--cursor {result.next_cursor}")
    return emit(args, result, "\n".join(parts))


def _span(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:.3f} .. {high:.3f}"


def import_command(args: argparse.Namespace, settings: Settings) -> int:
    from console import transfer

    path = Path(args.path)
    if not path.is_file():
        raise CommandError(
            f"no file at {path}: pass the path of a memoria export, a LoCoMo file or a transcript"
        )
    named = args.org or args.project  # an export keeps its own scopes; transcripts default to the server's
    # Read once, before a store is made for it: an export named a scope is refused first.
    kind = transfer.detect_format(path) if named and args.format == "auto" else args.format
    if named and kind == "memoria":
        raise CommandError(transfer.scoped_export_refused(path))
    progress = ProgressBar(sys.stderr)
    folder = local_store_folder(settings.db_uri)
    made_here = folder is not None and not folder.exists()
    try:
        with opened(settings, writes=True) as runtime:
            scope = scope_arg(args, settings) if named else None
            result = transfer.import_file(
                runtime, path, format=kind, scope=scope, agent_id=args.agent or "import", progress=progress
            )
    except Exception:
        # A refused import leaves no empty store behind where there was none (it checks the whole file
        # before it writes anything).
        if made_here and folder is not None and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
        raise
    progress.finish()
    return emit(args, result, transfer_readable(result, f"imported {path}"))


def export_command(args: argparse.Namespace, settings: Settings) -> int:
    from console import transfer
    from storage.records import Viewer

    scopes = None
    if args.org is not None or args.project is not None:  # an empty one is refused, not read as "all"
        scopes = [scope_arg(args, settings)]
    if args.session and not args.agent:
        raise CommandError("--session needs --agent: the session is that agent's")
    viewer = Viewer(args.agent, args.session or "") if args.agent else None
    what = f"{scopes[0].org_id}/{scopes[0].project_id}" if scopes else "the store"
    if args.path not in (None, "-"):  # said before the store is read, not after
        wanted = Path(args.path)
        # A previous export is written over (a nightly backup's file); any other file is not.
        writable_as(wanted, "export", "memoria-export.jsonl", force=args.force, ours=_is_export)
        if not wanted.parent.is_dir():
            raise CommandError(
                f"there is no folder {wanted.parent} to write {wanted.name} in: check the path"
            )
    progress = ProgressBar(sys.stderr)
    with opened(settings, models=False) as runtime:
        if args.path in (None, "-"):
            result = transfer.export_store(
                runtime,
                sys.stdout,
                scopes=scopes,
                vectors=not args.no_vectors,
                progress=progress,
                viewer=viewer,
            )
            progress.finish()
            print(transfer_readable(result, f"exported {what} to stdout"), file=sys.stderr)
            return _said_if_empty(result, scopes, args.agent)
        target = Path(args.path)
        partial = target.with_name(target.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                result = transfer.export_store(
                    runtime, out, scopes=scopes, vectors=not args.no_vectors, progress=progress, viewer=viewer
                )
            partial.replace(target)  # a reader never sees half an export
        finally:
            partial.unlink(missing_ok=True)
    progress.finish()
    emit(args, result, transfer_readable(result, f"exported {what} to {target}"))
    return _said_if_empty(result, scopes, args.agent)


def _said_if_empty(result: Any, scopes: list[Scope] | None, agent: str | None) -> int:
    """An export that holds no memory says so on stderr and exits 1: a trial's mistyped --org (or --org
    without --project, which reads project 'default') wrote an empty backup, quietly, with status 0."""
    if any(count.written for name, count in result.tables.items() if name.startswith("memories")):
        return 0
    where = (
        f"org {scopes[0].org_id!r} / project {scopes[0].project_id!r}: check --org and --project (`memoria "
        "stats` shows what a scope holds)"
        if scopes
        else "this store"
    )
    said = f"agent {agent!r} may read nothing in {where}" if agent else f"nothing is stored in {where}"
    print(f"memoria export: the export holds no memories: {said}", file=sys.stderr)
    return 1


def writable_as(path: Path, what: str, example: str, *, force: bool, ours: Callable[[bytes], bool]) -> None:
    """Refuse to write a memoria ``what`` (export, report) at ``path`` when it is a folder, or a file that is
    neither empty nor begins as one (``ours``, given its first bytes), unless ``force``: nothing of the
    user's is lost."""
    if path.is_dir():
        raise CommandError(f"{path} is a folder: give the {what} a file name, such as {path / example}")
    if path.is_file() and not force:
        try:
            with path.open("rb") as file:
                head = file.read(1024)
        except OSError:
            head = None
        if head is None or (head.strip() and not ours(head)):
            raise CommandError(
                f"{path} exists and is not a memoria {what}: nothing was written. Give another file name, or "
                "add --force to write over it"
            )


def _is_export(head: bytes) -> bool:
    return head.lstrip().startswith(b'{"memoria_export"')


def _is_report(head: bytes) -> bool:
    return head.startswith(b"<!DOCTYPE html>") and b"<title>memoria report" in head


def transfer_readable(result: Any, title: str) -> str:
    data = result.model_dump()
    tables = data.get("tables") or {}
    rows = [
        [name, counts_of.get("written", 0), counts_of.get("skipped", 0)] for name, counts_of in tables.items()
    ]
    extra = [
        (key, listed(value) if isinstance(value, list) else value)
        for key, value in data.items()
        if key not in ("tables",) and not isinstance(value, dict) and value != [] and value is not None
    ]
    parts = [title, table(["table", "written", "skipped"], rows) if rows else "", key_values(extra)]
    return "\n".join(part for part in parts if part)


def reembed_command(args: argparse.Namespace, settings: Settings) -> int:
    from console import transfer

    scope = scope_arg(args, settings) if args.org or args.project else None
    progress = ProgressBar(sys.stderr)
    with opened(settings) as runtime:
        result = transfer.reembed(runtime, scope=scope, all_memories=args.all, progress=progress)
    progress.finish()
    return emit(args, result, key_values(list(result.model_dump().items())))


class ConsolidateSummary(BaseModel):
    """What `memoria consolidate` found: memories examined, superseded (revised included), newly disputed."""

    scopes: int
    examined: int
    superseded: int
    disputed: int
    artifacts_restored: int  # superseded by an artifact of another title (``writing.repairs``)
    seconds: float


def consolidate_command(args: argparse.Namespace, settings: Settings) -> int:
    """Consolidation run again over every active memory (of ``--org``/``--project``, or of every scope),
    oldest first, with this release's rules (``writing.reconsolidation``)."""
    from time import perf_counter

    from writing.reconsolidation import consolidate_again
    from writing.repairs import restore_misread_versions

    progress = ProgressBar(sys.stderr)
    with opened(settings) as runtime:
        if not runtime.consolidation.policy.enabled:
            raise ToolFailure(
                "consolidation is off (MEMORIA_CONSOLIDATION_ENABLED=false): turn it on to examine memories"
            )
        scopes = [scope_arg(args, settings)] if args.org or args.project else runtime.store.scopes()
        started = perf_counter()
        restored = restore_misread_versions(runtime.writer)  # as a server's start does (a CLI-only store)
        found = [consolidate_again(runtime.writer, scope, progress) for scope in scopes]
    progress.finish()
    result = ConsolidateSummary(
        scopes=len(scopes),
        examined=sum(f.examined for f in found),
        superseded=sum(f.superseded for f in found),
        disputed=sum(f.disputed for f in found),
        artifacts_restored=len(restored),
        seconds=round(perf_counter() - started, 1),
    )
    readable = key_values(list(result.model_dump().items()))
    if result.disputed:
        readable += "\n\n`memoria drift` lists the pairs now disputed."
    if result.superseded or result.artifacts_restored:
        readable += "\n\n`memoria show ID` says what replaced a memory, or what restored it, and why."
    return emit(args, result, readable)


def report_command(args: argparse.Namespace, settings: Settings) -> int:
    from console.report import build_report
    from console.report_page import render_report

    target = Path(args.out)
    # An earlier report is written over (the default file, a nightly page); any other file is not: a trial
    # wrote one over an export backup.
    writable_as(target, "report", "memoria-report.html", force=args.force, ours=_is_report)
    progress = ProgressBar(sys.stderr)
    with opened(settings) as runtime:
        scope = scope_arg(args, settings)
        data = build_report(runtime, scope, retrievals=args.retrievals, progress=progress)
    progress.finish()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(data), encoding="utf-8")
    if args.json:
        print(json.dumps({"path": str(target.resolve()), "bytes": target.stat().st_size}), file=sys.stdout)
    else:
        print(f"wrote {target.resolve()}", file=sys.stdout)
    if args.open and not webbrowser.open(target.resolve().as_uri()):
        print(
            f"memoria report: no browser could be started here: open {target.resolve()} yourself",
            file=sys.stderr,
        )
    return 0


def doctor_command(args: argparse.Namespace, settings: Settings) -> int:
    from console.doctor import diagnose

    checks = diagnose(settings, fix=args.fix, progress=ProgressBar(sys.stderr))
    failed = any(check.status == "fail" for check in checks)
    if args.json:
        print(json.dumps([check.as_dict() for check in checks], indent=2), file=sys.stdout)
        return 1 if failed else 0
    marks = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "fixed": "fixed"}
    print(
        table(["", "check", "finding"], [[marks[c.status], c.name, c.detail] for c in checks], width=10_000),
        file=sys.stdout,
    )
    fixes = [c for c in checks if c.fix and c.status in ("warn", "fail")]
    if fixes:
        print("\nhow to fix:", file=sys.stdout)
        for check in fixes:
            print(f"- {check.name}: {check.fix}", file=sys.stdout)
    else:
        print("\nall good.", file=sys.stdout)
    return 1 if failed else 0


def issue_token(principal: str, read: list[str], write: list[str]) -> int:
    """Print a new random token (shown once) and its tokens-file entry, which holds only its digest."""
    from server.auth import (  # (the MCP SDK's auth: only this command)
        ScopePattern,
        is_principal_name,
        new_token,
        token_digest,
    )

    principal = principal.strip()
    if not is_principal_name(principal):  # the server would refuse the entry, and start for no one
        print("memoria token: --principal must be a name of 1-128 printable characters", file=sys.stderr)
        return 2
    try:
        for scope in (*read, *write):
            ScopePattern.parse(scope)
    except ValueError as exc:
        print(f"memoria token: {exc}", file=sys.stderr)
        return 2
    if not read and not write:
        print("memoria token: grant at least one scope with --read or --write ORG/PROJECT", file=sys.stderr)
        return 2
    token = new_token()
    entry = {"principal": principal, "token_sha256": token_digest(token), "read": read, "write": write}
    print(f"token (give it to {principal}; it is not stored anywhere): {token}", file=sys.stdout)
    print('entry for the "tokens" list of MEMORIA_HTTP_TOKENS_FILE:', file=sys.stdout)
    print(json.dumps(entry), file=sys.stdout)
    return 0


def absolute_uri(uri: str) -> str:
    """A local folder as an absolute path (a client starts the server from another folder); a URI as given."""
    return uri if "://" in uri else str(Path(uri).expanduser().resolve())


def memoria_executable() -> str:
    """The absolute path of this installation's ``memoria`` script (clients do not share the shell's PATH)."""
    beside = Path(sys.executable).parent / ("memoria.exe" if sys.platform == "win32" else "memoria")
    found = shutil.which("memoria")
    return str(beside if beside.exists() else Path(found).resolve() if found else "memoria")


# What a server started by a client must share with the user's own commands, besides the store and the
# project: the models (a server on another embedder, or on the offline fallback, writes vectors the user's
# commands skip, and skips theirs) and the org. Secrets (Cohere's key) stay out of client files.
SHARED_SETTINGS = (
    "MEMORIA_ORG_ID",
    "MEMORIA_EMBEDDER",
    "MEMORIA_EMBEDDING_MODEL",
    "MEMORIA_EMBEDDING_MODEL_FILE",
    "MEMORIA_VECTOR_DIM",
    "MEMORIA_RERANKER",
    "MEMORIA_RERANK_MODEL",
    "MEMORIA_RERANK_MODEL_FILE",
    "MEMORIA_COHERE_RERANK_MODEL",
    "MEMORIA_COHERE_BASE_URL",
    "MEMORIA_MODEL_BACKEND",
    "MEMORIA_MODEL_DEVICE",
    "MEMORIA_ALLOW_MODEL_DOWNLOADS",
)
MODEL_FOLDERS = ("MEMORIA_EMBEDDING_MODEL", "MEMORIA_RERANK_MODEL")  # a local folder: its absolute path


def shared_settings(environ: dict[str, str]) -> dict[str, str]:
    """The ``SHARED_SETTINGS`` this shell sets, model folders as absolute paths (a client starts the server
    from another folder)."""
    from retrieval.models.embedders.sentence_transformers import model_reference

    found = {name: environ[name] for name in SHARED_SETTINGS if environ.get(name)}
    return {name: model_reference(value) if name in MODEL_FOLDERS else value for name, value in found.items()}


def client_setup(
    client: str,
    executable: str,
    project: str | None,
    db: str | None = None,
    settings: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Where each client reads its MCP servers, and the entry to put there (plus, for Claude Code, the
    SessionEnd hook that reports the outcome of a session the agent did not report itself). ``project``,
    ``db`` (the store the user's own commands use) and ``settings`` (``shared_settings``: the models) go
    into the entry and the hook, so that the server the client starts, the hook and the CLI all read and
    write the same memories with the same model."""
    env = {
        **({"MEMORIA_DB_URI": db} if db else {}),
        **({"MEMORIA_PROJECT_ID": project} if project else {}),
        **(settings or {}),
    }
    server: dict[str, Any] = {"command": executable, "args": ["serve"], **({"env": env} if env else {})}
    if client == "claude-code":
        hook = shlex.join(
            [
                *(
                    ["env", *(f"{name}={value}" for name, value in (settings or {}).items())]
                    if settings
                    else []
                ),
                executable,
                "outcome",
                "--hook",
                *(["--project", project] if project else []),
                *(["--db", db] if db else []),
            ]
        )
        add = ["claude", "mcp", "add", "memoria", "--scope", "project"]
        add += [flag for name, value in env.items() for flag in ("-e", f"{name}={value}")]
        return {
            "files": {
                ".mcp.json": {"mcpServers": {"memoria": {"type": "stdio", **server}}},
                ".claude/settings.json": {
                    "hooks": {
                        "SessionEnd": [{"hooks": [{"type": "command", "command": hook, "timeout": 60}]}]
                    }
                },
            },
            "note": "both in the project's folder (merge into existing files); or run "
            f"`{shlex.join([*add, '--', executable, 'serve'])}`",
        }
    if client == "claude-desktop":
        return {
            "files": {"claude_desktop_config.json": {"mcpServers": {"memoria": server}}},
            "note": "macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\ "
            "(Settings > Developer > Edit Config); restart Claude Desktop afterwards",
        }
    if client == "cursor":
        return {
            "files": {".cursor/mcp.json": {"mcpServers": {"memoria": server}}},
            "note": "in the project's folder, or ~/.cursor/mcp.json for every project",
        }
    if client == "vscode":
        return {
            "files": {".vscode/mcp.json": {"servers": {"memoria": {"type": "stdio", **server}}}},
            "note": "in the workspace folder; start it from the MCP: List Servers command, and use it in "
            "Copilot's agent mode",
        }
    raise CommandError(f"unknown client {client!r}: choose claude-code, claude-desktop, cursor or vscode")


def client_command(args: argparse.Namespace, settings: Settings) -> int:
    # The store the user chose (--db, or MEMORIA_DB_URI in this shell) goes into the entry; without a
    # choice the entry leaves it out and the server uses its default, as this command would.
    chosen = args.db or (settings.db_uri if settings.db_uri != str(default_data_dir() / "lancedb") else None)
    # The project too: one this shell names (MEMORIA_PROJECT_ID) is the one the user's commands use (a trial
    # saw the agent's server write to "default" while `memoria recall` read the shell's project).
    unset = type(settings).model_fields["project_id"].default
    project = args.project or (settings.project_id if settings.project_id != unset else None)
    setup = client_setup(
        args.client,
        memoria_executable(),
        project,
        chosen and absolute_uri(chosen),
        shared_settings(dict(os.environ)),
    )
    if os.environ.get("MEMORIA_RERANKER") == "cohere":  # its key is a secret: never written into a file
        setup["note"] += "; the reranker is Cohere's: set COHERE_API_KEY where the client starts the server"
    if args.json:
        print(json.dumps(setup, indent=2), file=sys.stdout)
        return 0
    for name, document in setup["files"].items():
        print(f"{name}:\n{json.dumps(document, indent=2)}\n", file=sys.stdout)
    print(f"where: {setup['note']}", file=sys.stdout)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "remember": remember_command,
    "edit": edit_command,
    "ui": ui_command,
    "recall": recall_command,
    "explain": explain_command,
    "outcome": outcome_command,
    "forget": forget_command,
    "restore": restore_command,
    "show": show_command,
    "stats": stats_command,
    "drift": drift_command,
    "list": list_command,
    "import": import_command,
    "export": export_command,
    "reembed": reembed_command,
    "consolidate": consolidate_command,
    "doctor": doctor_command,
    "report": report_command,
    "client": client_command,
}
