"""The ``memoria`` console script: ``memoria serve`` (stdio, the default) or ``memoria serve --http HOST:PORT``,
and ``memoria token`` to issue a static bearer token for HTTP (in ``server/commands.py``: commands for
people print to stdout, so they live apart from the serving path, which writes only to stderr)."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Sequence

import anyio

from server.config import ConfigError, Settings
from server.log_setup import configure_logging

log = logging.getLogger("memoria")


def parse_http_address(value: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6); the host defaults to 127.0.0.1."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PORT or HOST:PORT, but got {value!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, but got {number}")
    return host, number


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoria", description="Long-term memory for AI agents, over MCP.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the MCP server (stdio unless --http is given)")
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=parse_http_address,
        help="serve streamable HTTP instead of stdio; HOST defaults to 127.0.0.1",
    )
    serve.add_argument("--db", metavar="URI", help="LanceDB folder or URI (overrides MEMORIA_DB_URI)")
    token = commands.add_parser(
        "token",
        help="issue a static bearer token: prints the token once and the entry for MEMORIA_HTTP_TOKENS_FILE",
    )
    token.add_argument("--principal", required=True, help="who holds it (becomes the agent of its memories)")
    token.add_argument("--read", action="append", default=[], metavar="ORG/PROJECT", help="scope it may read")
    token.add_argument(
        "--write", action="append", default=[], metavar="ORG/PROJECT", help="scope it may write (and read)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in {"-h", "--help"}):
        argv = ["serve", *argv]  # `memoria` alone, or `memoria --http ...`, means serve
    args = make_parser().parse_args(argv)
    if args.command == "token":  # a command for people: its output goes to stdout, and it serves nothing
        from server.commands import issue_token

        return issue_token(args.principal, args.read, args.write)
    overrides = {"db_uri": args.db} if getattr(args, "db", None) else {}
    try:
        settings = Settings.from_env(**overrides)
        configure_logging(settings.log_level)
        return serve(settings, args.http)
    except ConfigError as exc:
        print(f"memoria: {exc}", file=sys.stderr)
        return 2


def serve(settings: Settings, http: tuple[str, int] | None) -> int:
    from server.app import build_server
    from server.http import refuse_open_endpoint, transport_security

    app = build_server(settings)
    if http is None:
        log.info("memoria serving MCP on stdio; store %s", settings.db_uri)
        anyio.run(app.run_stdio_async)
        return 0
    host, port = http
    authenticated = app.settings.auth is not None  # build_server read the tokens file or OAuth settings
    refuse_open_endpoint(host, settings, authenticated=authenticated)
    security = transport_security(host, port, settings)
    log.info(
        "memoria serving MCP over streamable HTTP at http://%s:%d/mcp; store %s; clients %s",
        host,
        port,
        settings.db_uri,
        f"authenticate with {'OAuth' if settings.oauth_issuer_url else 'static tokens'}"
        if authenticated
        else "are not asked for a token (loopback)",
    )
    anyio.run(
        functools.partial(
            app.run_streamable_http_async,
            host=host,
            port=port,
            transport_security=security,
            max_request_body_size=settings.http_max_body_bytes,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
