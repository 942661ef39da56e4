"""What an org or project id may be: one a token grant can name. Grants write scopes as ``org/project``,
either part ``*`` for all (``server.auth.ScopePattern``), and split at the first "/"."""

from __future__ import annotations

from typing import Literal


def scope_id_problem(value: str, part: Literal["org", "project"]) -> str | None:
    """What makes ``value`` no ``part`` id a token grant can name, or None: an org id with a "/" could be
    granted by no token, and "*" alone reads as every org or project."""
    if value == "*":
        return f"'*' stands for every {part} in a token's grant: name one {part}"
    if part == "org" and "/" in value:
        return (
            "must not contain '/': a token grant writes org/project, so an org named with a '/' could not "
            "be granted; use another separator, such as '-' or '.'"
        )
    return None
