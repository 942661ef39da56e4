"""The ``memoria`` console script: ``memoria serve`` (stdio, the default) or ``memoria serve --http HOST:PORT``,
and the commands for people (remember, recall, explain, outcome, forget, show, stats, import, export,
reembed, consolidate, doctor, report, token) in ``console.commands``: they print to stdout, so they live apart from
the serving path (``server.serve``), which writes only to stderr. Only their arguments are declared here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from server.config import ConfigError, Settings, default_data_dir, local_store_folder
from server.log_setup import configure_logging
from server.serve import add_serve_arguments, serve


def positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, but got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, but got {number}")
    return number


def dated(parser: argparse.ArgumentParser, when: str) -> None:
    """``--occurred-at`` (``when``: its help) and the ``--time-zone`` it is read in."""
    parser.add_argument("--occurred-at", metavar="WHEN", help=when)
    parser.add_argument(
        "--time-zone", metavar="ZONE", help="whose 'yesterday', e.g. Europe/Paris (default UTC)"
    )


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which names the closest command to one mistyped ("recal": did you mean recall?)."""

    def error(self, message: str) -> NoReturn:
        import difflib
        import re

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:  # (choices quoted up to Python 3.12.7, bare since: both are read)
            choices = [choice.strip().strip("'") for choice in found.group(2).split(",")]
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                message = f"{message}; did you mean {close[0]!r}?"
        super().error(message)


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memoria",
        description="Long-term memory for AI agents, over MCP. With no command, `memoria` serves MCP on stdio "
        "(as `memoria serve`): it waits for a client's messages on stdin.",
    )
    parser.add_argument("--version", action="version", version=f"memoria {installed_version()}")
    commands = parser.add_subparsers(dest="command")
    add_serve_arguments(
        commands.add_parser(
            "serve",
            help="run the MCP server (stdio unless --http is given)",
            description="Run the MCP server: on stdio (it waits for a client's messages on stdin; Ctrl-C "
            "stops it), or with --http HOST:PORT as streamable HTTP at http://HOST:PORT/mcp.",
        )
    )
    add_people_commands(commands)
    token = commands.add_parser(
        "token",
        help="issue a static bearer token: prints the token once and the entry for MEMORIA_HTTP_TOKENS_FILE",
        description="Issue a static bearer token for `memoria serve --http`: prints the token once, and its "
        'entry for the "tokens" list of the file MEMORIA_HTTP_TOKENS_FILE names (its SHA-256, never the token).',
    )
    token.add_argument("--principal", required=True, help="who holds it (becomes the agent of its memories)")
    token.add_argument("--read", action="append", default=[], metavar="ORG/PROJECT", help="scope it may read")
    token.add_argument(
        "--write", action="append", default=[], metavar="ORG/PROJECT", help="scope it may write (and read)"
    )
    return parser


def add_people_commands(commands: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="URI", help="LanceDB folder or URI (overrides MEMORIA_DB_URI)")
    common.add_argument(
        "--create",
        action="store_true",
        help="make a new store at --db (or MEMORIA_DB_URI) if there is none there",
    )
    common.add_argument("--org", metavar="ORG", help="org scope (default MEMORIA_ORG_ID)")
    common.add_argument("--project", metavar="PROJECT", help="project scope (default MEMORIA_PROJECT_ID)")
    common.add_argument("--json", action="store_true", help="print the result as JSON, for scripts")
    common.add_argument("--verbose", action="store_true", help="say everything about the models in full")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name, parents=[common], help=help, description=help[:1].upper() + help[1:] + "."
        )

    remember = command("remember", "store one memory")
    remember.add_argument("content", help="the memory, verbatim ('-' reads it from stdin)")
    remember.add_argument("--kind", choices=["fact", "episode", "artifact"], default="fact")
    remember.add_argument("--tag", action="append", default=[], help="a tag (repeat for more)")
    remember.add_argument(
        "--tier", choices=["standard", "immutable", "protected", "ephemeral"], default="standard"
    )
    remember.add_argument("--episode", metavar="ID", help="the episode it belongs to")
    dated(remember, "when it was learned: 2026-11-24T09:30Z, 'yesterday' (default now)")
    remember.add_argument(
        "--until",
        metavar="WHEN",
        help="when it stops being true: 2026-12-11 (through that day, in --time-zone) or 2026-12-11T18:00Z; "
        "recall no longer shows it then (default: never)",
    )
    remember.add_argument(
        "--visibility",
        choices=["org", "project", "agent", "session"],
        default="project",
        help="who may read it: the whole org, the project (default), only this agent, or only its session",
    )
    remember.add_argument("--agent", metavar="NAME", help="who learned it (default cli)")
    remember.add_argument("--session", metavar="ID", help="the working session (default a new one)")

    edit = command("edit", "correct a memory: the new text supersedes it (kept for audit)")
    edit.add_argument("memory_id", help="the memory to correct (an id from recall or list)")
    edit.add_argument(
        "content",
        nargs="?",
        help="the corrected memory, verbatim ('-' reads it from stdin); left out with --tag or --tier: "
        "the same text, only those change",
    )
    edit.add_argument("--kind", choices=["fact", "episode", "artifact"], help="default: the memory's")
    edit.add_argument("--tag", action="append", help="a tag (repeat for more; default: the memory's tags)")
    edit.add_argument("--tier", choices=["standard", "protected", "ephemeral"], help="default: the memory's")
    dated(edit, "when it happened or was learned: 2026-11-24, 'yesterday' (default: the memory's date)")
    edit.add_argument(
        "--until",
        metavar="WHEN",
        help="when it stops being true: 2026-12-11 (through that day) or 2026-12-11T18:00Z; never: it no longer "
        "expires (default: the memory's)",
    )
    edit.add_argument("--agent", metavar="NAME", help="who corrects it (default cli)")
    edit.add_argument("--session", metavar="ID", help="the working session (default a new one)")

    recall = command("recall", "find the memories most useful for a task")
    recall.add_argument("query", help="the task or question, in plain words")
    recall.add_argument("--top-k", type=positive, metavar="N", help="at most N directly matched memories")
    recall.add_argument(
        "--budget",
        "--char-budget",
        type=int,
        default=16_000,
        metavar="CHARS",
        help="the context's size limit (the tool's char_budget)",
    )
    recall.add_argument("--tag", action="append", default=[], help="only memories with this tag (repeatable)")
    recall.add_argument(
        "--all-tags", action="store_true", help="with several --tag: memories with all of them"
    )
    recall.add_argument("--kind", action="append", default=[], choices=["fact", "episode", "artifact"])
    recall.add_argument(
        "--since", metavar="WHEN", help="only memories of this time or later: 2026-11-24, 'last week'"
    )
    recall.add_argument("--until", metavar="WHEN", help="only memories before this time ends")
    recall.add_argument(
        "--time-zone", metavar="ZONE", help="whose days and weeks, e.g. Europe/Paris (default UTC)"
    )
    recall.add_argument("--context", action="store_true", help="print only the ready-to-paste context block")
    recall.add_argument("--agent", metavar="NAME", help="who is asking (default cli)")
    recall.add_argument(
        "--session",
        metavar="ID",
        help="the session to count it in (default: the agent's current session, the newest one not yet "
        "reported; `memoria outcome` then reports it)",
    )
    recall.add_argument(
        "--new-session", action="store_true", help="start a new session instead of continuing the current one"
    )

    explain = command("explain", "show why each memory of a recall ranked where it did")
    explain.add_argument("retrieval_id", nargs="?", help="the retrieval id recall printed")
    explain.add_argument("--query", help="run a recall for this query now and explain it")
    explain.add_argument("--memory", metavar="ID", help="only this memory")

    outcome = command("outcome", "report how a session's task went, moving its memories' weights")
    outcome.add_argument("outcome", nargs="?", choices=["success", "failure", "partial"])
    outcome.add_argument("--score", type=float, metavar="0..1", help="a finer grade; overrides the label")
    outcome.add_argument("--note", help="what helped or misled")
    outcome.add_argument(
        "--helpful",
        action="append",
        default=[],
        metavar="ID",
        help="a memory you relied on (from recall's list; repeatable): it rises a full step",
    )
    outcome.add_argument(
        "--misleading",
        action="append",
        default=[],
        metavar="ID",
        help="a memory that was wrong or misled you (repeatable): it sinks a full step",
    )
    outcome.add_argument(
        "--session",
        metavar="ID",
        help="the session (default: the agent's current session, the one `memoria recall` used last; "
        "reporting it again replaces the earlier report)",
    )
    outcome.add_argument(
        "--replace",
        action="store_true",
        help="replace a report the agent made itself (refused without it: the agent's report may name the "
        "memories that helped or misled, and this one would drop what it said)",
    )
    outcome.add_argument(
        "--agent", metavar="NAME", help="whose session (default cli; claude-code with --hook)"
    )
    outcome.add_argument(
        "--hook",
        action="store_true",
        help="run as a Claude Code SessionEnd hook: read the hook's JSON on stdin, report the newest unreported "
        "claude-code session (partial unless an outcome is given), and never fail the hook",
    )

    forget = command(
        "forget", "retract (or purge) a memory, the best matches of a query, or a tag's memories"
    )
    forget.add_argument("memory_id", nargs="?", help="the memory to forget (or --query / --tag instead)")
    forget.add_argument("--query", help="forget the best matches of this query instead")
    forget.add_argument("--tag", help="forget every memory with this tag instead")
    forget.add_argument(
        "--max", type=positive, metavar="N", help="with --query: at most N memories (default 1)"
    )
    forget.add_argument("--purge", action="store_true", help="erase content, tags and vector for good")
    forget.add_argument("--reason", help="why (kept in the lineage record)")
    forget.add_argument("--dry-run", action="store_true", help="show what would go, change nothing")
    forget.add_argument(
        "--yes", action="store_true", help="forget without asking (a purge, or what --query or --tag chose)"
    )
    forget.add_argument("--agent", metavar="NAME", help="who forgets (default cli)")
    forget.add_argument(
        "--session", metavar="ID", help="the session whose private memories may be forgotten too"
    )

    restore = command("restore", "undo a retraction: the memory is active again, as it was")
    restore.add_argument("memory_id", nargs="+", help="the retracted memories (ids from forget or list)")

    ui = command("ui", "a live page over the scope's memories: search, browse, edit, forget (127.0.0.1 only)")
    ui.add_argument("--port", type=port, default=0, metavar="P", help="the port (default: any free one)")
    ui.add_argument("--no-open", action="store_true", help="print the URL without opening a browser")

    show = command("show", "one memory in full: provenance, weight history, lineage")
    show.add_argument("memory_id", help="the memory's id (from recall, list or remember)")
    show.add_argument("--agent", metavar="NAME", help="the agent whose private memory it is (default cli)")
    show.add_argument("--session", metavar="ID", help="with --agent: the session whose private memory it is")

    command("stats", "what the scope's memory holds and which backends serve it")

    drift = command("drift", "the scope's open contradictions, newest first, and its recent revisions")
    drift.add_argument("--include-resolved", action="store_true", help="settled contradictions too")
    drift.add_argument(
        "--limit", type=positive, default=50, metavar="N", help="at most N of each (50; at most 500)"
    )

    listing = command("list", "the scope's memories, newest first, a page at a time")
    listing.add_argument("--agent", metavar="NAME", help="only memories this agent wrote")
    listing.add_argument("--tag", help="only memories with this tag")
    listing.add_argument("--kind", choices=["fact", "episode", "artifact"])
    listing.add_argument("--episode", metavar="ID", help="only this episode's memories")
    listing.add_argument(
        "--since",
        metavar="WHEN",
        help="dated (occurred_at, else written) at or after: 2026-11-24, 2026-11, 'last week'",
    )
    listing.add_argument(
        "--until", metavar="WHEN", help="dated before (a day, week or month: before it ends)"
    )
    listing.add_argument(
        "--time-zone", metavar="ZONE", help="whose days and weeks, e.g. Europe/Paris (default UTC)"
    )
    listing.add_argument(
        "--status",
        choices=["active", "superseded", "retracted", "any"],
        help="which memories: active (default), superseded, retracted, or any (a window's history too)",
    )
    listing.add_argument("--cursor", help="the next page (the cursor the previous page printed)")
    listing.add_argument(
        "--limit", type=positive, default=50, metavar="N", help="memories per page (50; at most 200)"
    )

    importing = command("import", "import a memoria export (JSONL), a LoCoMo file or a chat transcript")
    importing.add_argument("path", help="the file to import")
    importing.add_argument("--format", choices=["auto", "memoria", "locomo", "transcript"], default="auto")
    importing.add_argument(
        "--agent", metavar="NAME", help="transcripts: the agent for lines without a speaker"
    )

    export = command("export", "write the store (or one scope with --org/--project) as JSONL")
    export.add_argument("path", nargs="?", help="the file to write (default stdout)")
    export.add_argument("--no-vectors", action="store_true", help="leave vectors out (import re-embeds)")
    export.add_argument(
        "--force", action="store_true", help="write over a file that is not a memoria export (one is, always)"
    )
    export.add_argument(
        "--agent",
        metavar="NAME",
        help="only what this agent may read (its org's shelf too; without it: everything, private memories included)",
    )
    export.add_argument("--session", metavar="ID", help="with --agent: also that session's own memories")

    reembed = command("reembed", "recompute vectors made by another embedder than the active one")
    reembed.add_argument("--all", action="store_true", help="recompute every vector")

    command(
        "consolidate",
        "examine every active memory again with this release's rules (after upgrading: what an older one missed)",
    )

    doctor = command("doctor", "check the store, indexes, models and backend, and say how to fix problems")
    doctor.add_argument("--fix", action="store_true", help="also compact tables and build missing indexes")

    client = command("client", "print the MCP entry (and hook) for a client, with this installation's path")
    client.add_argument("client", choices=["claude-code", "claude-desktop", "cursor", "vscode"])

    report = command("report", "write a self-contained HTML page: feedback impact, drift, clusters, health")
    report.add_argument("--out", default="memoria-report.html", metavar="PATH")
    report.add_argument(
        "--retrievals", type=positive, default=200, metavar="N", help="recent recalls to analyse"
    )
    report.add_argument("--open", action="store_true", help="open it in the browser")
    report.add_argument(
        "--force", action="store_true", help="write over a file that is not a memoria report (one is, always)"
    )


def installed_version() -> str:
    """The installed package's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoria-mcp")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout that was never installed
        return "(not installed)"


def port(text: str) -> int:
    """A TCP port to listen on, 0-65535 (0: any free one)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 0 to 65535") from None
    if not 0 <= number <= 65_535:
        raise argparse.ArgumentTypeError(f"{number} is not a port: give a number from 0 to 65535")
    return number


def missing_store(db: str, *, create: bool, given_as: str = "--db") -> str | None:
    """Why a command for people refuses the store it was given (``--db``, or ``MEMORIA_DB_URI`` set in the
    environment; None: it may go on). A mistyped folder would otherwise become a new, empty store that
    answers every question with nothing. URIs (s3://, gs://, ...) are the object store's business; the
    default folder, given by nobody, is made on first use."""
    folder = local_store_folder(db)
    if folder is None:
        return None
    if folder.is_file():
        return f"{db} ({given_as}) is a file, not a store's folder: check the path"
    if folder.is_dir():
        try:
            entries = list(folder.iterdir())
        except OSError as exc:
            return f"cannot read the store at {db} ({given_as}): {exc.strerror or exc}"
        if create or not entries or any(entry.name.endswith(".lance") for entry in entries):
            return None
        # A folder of other files (a project's source, say) would otherwise become a store as well.
        return (
            f"{db} ({given_as}) holds no memoria store but other files: check the path, or add --create to "
            "make a new store in it"
        )
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"cannot make a store at {db} ({given_as}): {exc.strerror or exc}; check the path"
        return None
    return (
        f"there is no store at {db} ({given_as}): check the path, or add --create to make a new store there"
    )


def subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of command ``name``."""
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]  # type: ignore[no-any-return]
    return None


def command_first(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``memoria --db X list`` as ``memoria list --db X``: options given before the command are the
    command's (every command takes the shared ones). Only a command name that is not the value of the
    option before it moves (``--db list`` names a folder)."""
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():
        if isinstance(action, argparse._SubParsersAction):
            commands |= action.choices
    # Options of any command that take a value (--db, --org, --project, --http, ...).
    takes_value = {
        option
        for command in commands.values()
        for action in command._actions
        if action.nargs != 0
        for option in action.option_strings
    }
    names = set(commands)
    for index, token in enumerate(argv):
        if token in names and (index == 0 or argv[index - 1] not in takes_value):
            return [token, *argv[:index], *argv[index + 1 :]]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    top_level = {"-h", "--help", "--version"}
    if argv and argv[0].startswith("-") and argv[0] not in top_level:
        argv = command_first(argv, parser)
    if not argv or (argv[0].startswith("-") and argv[0] not in top_level):
        argv = ["serve", *argv]  # `memoria` alone, or `memoria --http ...`, means serve
    args, unknown = parser.parse_known_args(argv)
    command = subparser(parser, args.command) if unknown else None
    if command is not None and argv[0] == args.command:
        # An optional argument read after an option: `memoria edit ID --project alpha TEXT` (a trial was
        # told TEXT was unrecognized). The command's own parser reads its arguments in any order.
        args, unknown = command.parse_known_intermixed_args(
            argv[1:], namespace=argparse.Namespace(command=args.command)
        )
    if unknown:  # said by the command's own parser, with its usage, not the top level's
        (command or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "token":  # needs no store and no configuration
        from console.commands import issue_token

        return issue_token(args.principal, args.read, args.write)
    overrides = {"db_uri": args.db} if getattr(args, "db", None) else {}
    try:
        settings = Settings.from_env(**overrides)
        # A store someone named (--db, or MEMORIA_DB_URI as the settings read it) must exist (doctor too:
        # it diagnoses the store it is given); import fills a new one by nature; client only prints an entry
        # that names the folder (the server makes it when it first starts). The default folder is made on
        # first use.
        named = settings.db_uri != str(default_data_dir() / "lancedb")
        checked = args.command not in ("serve", "doctor", "import", "client") and hasattr(args, "create")
        # Doctor diagnoses what is there (a file, a folder of other files), and never makes a store.
        folder = local_store_folder(settings.db_uri) if args.command == "doctor" else None
        if named and (checked or (folder is not None and not folder.is_file())):
            refused = missing_store(
                settings.db_uri,
                create=getattr(args, "create", False) and args.command != "doctor",
                given_as="--db" if args.db else "MEMORIA_DB_URI",
            )
            if refused and args.command == "doctor":  # doctor makes no store, --create or not (a trial's)
                refused = (
                    refused.split(", or add --create")[0]
                    + " (doctor makes none; `memoria serve`, or a command with --create, does)"
                )
            if refused:
                print(f"memoria: {refused}", file=sys.stderr)
                return 0 if getattr(args, "hook", False) else 2
        # A command for people prints what it did itself: the log's INFO lines (one per import, per
        # maintenance round) would only interleave with that output, unless asked for.
        quiet = (
            args.command != "serve"
            and "log_level" not in settings.model_fields_set
            and not getattr(args, "verbose", False)
        )
        configure_logging("WARNING" if quiet else settings.log_level)
        if args.command != "serve":  # a command for people: its output goes to stdout, and it serves nothing
            from console.commands import run

            return run(args, settings)
        return serve(settings, args.http)
    except ConfigError as exc:
        print(f"memoria: {exc}", file=sys.stderr)
        return 0 if getattr(args, "hook", False) else 2  # a session-end hook never fails the session


if __name__ == "__main__":  # python -m console.cli, as python -m console
    sys.exit(main())
