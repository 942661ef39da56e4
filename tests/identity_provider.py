"""A real OAuth identity provider's RFC 7662 introspection endpoint on loopback, for the auth tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

from tests.standin_http import JsonHandler, serving


class IdentityProvider:
    """A real RFC 7662 introspection endpoint on loopback: answers from ``tokens`` (token -> claims) and
    records each request's form and Authorization header."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        self.tokens = tokens
        self.requests: list[tuple[dict[str, list[str]], str | None]] = []

    @contextmanager
    def serving(self) -> Iterator[str]:
        provider = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                provider.requests.append((form, self.headers.get("Authorization")))
                claims = provider.tokens.get(form.get("token", [""])[0])
                self._reply(200, {"active": True, **claims} if claims else {"active": False})

        with serving(Handler) as url:
            yield url
