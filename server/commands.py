"""Console commands for people at a terminal (``memoria token``), never part of a running server.

These write their results to stdout, which is where a person or a script reads them. The serving path
(``memoria serve``, ``server.app``) never imports this module, so nothing here can reach the stdio
protocol stream; tests/test_architecture.py holds both rules.
"""

from __future__ import annotations

import json
import sys

from server.auth import ScopePattern, new_token, token_digest


def issue_token(principal: str, read: list[str], write: list[str]) -> int:
    """Print a new random token (shown once) and its tokens-file entry, which holds only its digest."""
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
