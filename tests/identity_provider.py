"""A real OAuth identity provider's RFC 7662 introspection endpoint on loopback, for the auth tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


class IdentityProvider:
    """A real RFC 7662 introspection endpoint on loopback: answers from ``tokens`` (token -> claims) and
    records each request's form and Authorization header."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        self.tokens = tokens
        self.requests: list[tuple[dict[str, list[str]], str | None]] = []

    @contextmanager
    def serving(self) -> Iterator[str]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                provider.requests.append((form, self.headers.get("Authorization")))
                claims = provider.tokens.get(form.get("token", [""])[0])
                body = json.dumps({"active": True, **claims} if claims else {"active": False}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
