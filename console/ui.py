"""memoria ui: a live page over the configured org and project, served on 127.0.0.1 only.

Every request carries the token printed with the URL (made anew each run): the page in its query, the page's
own calls in an ``Authorization: Bearer`` header; anything else gets 401. The page searches through
recall, browses the scope's memories by agent, tag, kind, episode and time, shows one memory with its
weight history and lineage, edits one (an explicit update through the write path, so lineage records it),
forgets one (retract or purge, after a confirmation), restores a retracted one (``console.restoring``, as
`memoria restore` does), and links to the report's feedback-impact and drift
views. It calls the same tool functions an MCP client does, so their validation and errors are the
page's; it never names another org or project. Memory text reaches the page as JSON and is set as text,
never parsed as markup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from pydantic import BaseModel, ValidationError

from server.arguments import friendly_validation_message
from storage.records import Scope
from tools.common import Caller, Runtime, ToolFailure

MAX_BODY = 8_000_000  # an edit's JSON (the content's own limit is the write path's, up to 1,000,000 chars)


class UiServer:
    """The page and its JSON calls, on 127.0.0.1:``port`` (0: any free port) for ``runtime``."""

    def __init__(self, runtime: Runtime, *, port: int = 0, token: str | None = None) -> None:
        self.runtime = runtime
        self.token = token or secrets.token_urlsafe(24)
        self.caller = Caller(agent_id="ui", session_id=f"ses_ui_{secrets.token_hex(6)}", person=True)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/?token={self.token}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="memoria-ui", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def addressed_here(self, headers: Any) -> bool:
        """Whether the request names this server as its host, and a request from a page comes from this
        server's own page: a page elsewhere that a DNS name rebound to 127.0.0.1 is refused before the
        token is even looked at (as the MCP HTTP server refuses a foreign Host or Origin)."""
        port = self._httpd.server_address[1]
        here = {f"127.0.0.1:{port}", f"localhost:{port}"}
        if port == 80:  # a browser leaves the default port out
            here |= {"127.0.0.1", "localhost"}
        origin = headers.get("Origin")
        return headers.get("Host", "").lower() in here and (
            origin is None or origin.lower() in {f"http://{host}" for host in here}
        )

    def authorised(self, headers: Any, query: dict[str, list[str]]) -> bool:
        given = headers.get("Authorization", "")
        token = given[7:] if given.startswith("Bearer ") else (query.get("token") or [""])[0]
        return hmac.compare_digest(token.encode(), self.token.encode())

    # -- what each call does (the tool functions, as an MCP client would call them) ---------------------

    def call(self, module: Any, model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
        arguments = model.model_validate(
            {key: value for key, value in values.items() if value not in (None, "")}
        )
        handler: Callable[..., Any] = module.handle
        result = anyio.run(handler, arguments, self.runtime, self.caller)
        return dict(result.model_dump(mode="json"))

    def get(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        from tools import list_memories, recall, show_memory

        if path == "/api/memories":
            fields = ("agent_id", "tag", "kind", "episode_id", "since", "until", "cursor")
            return self.call(
                list_memories, list_memories.ListMemoriesInput, {f: query.get(f) for f in fields}
            )
        if path == "/api/recall":
            return self.call(recall, recall.RecallInput, {"query": query.get("query"), "top_k": 20})
        if path == "/api/memory":
            return self.call(show_memory, show_memory.ShowMemoryInput, {"memory_id": query.get("id")})
        raise LookupError(path)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        from tools import forget, remember

        if path == "/api/edit":  # a correction keeps the memory's date (``tools.remember.inherited``)
            values = {"content": body.get("content"), "replaces": body.get("id")}
            return self.call(remember, remember.RememberInput, values)
        if path == "/api/forget":
            values = {
                "memory_id": body.get("id"),
                "mode": body.get("mode"),
                "reason": "forgotten in memoria ui",
            }
            return self.call(forget, forget.ForgetInput, values)
        if path == "/api/restore":  # a retraction undone, as `memoria restore` does it (a trial found no way)
            from console.restoring import restore

            memory_id = body.get("id")
            if not isinstance(memory_id, str) or not memory_id:
                raise ToolFailure("restore needs the id of a retracted memory")
            settings = self.runtime.settings
            [restored] = restore(
                self.runtime, Scope(settings.org_id, settings.project_id), [memory_id], flags=None
            )
            return dict(restored.model_dump(mode="json"))
        raise LookupError(path)

    def report_page(self) -> str:
        from console.report import build_report
        from console.report_page import render_report

        settings = self.runtime.settings
        return render_report(build_report(self.runtime, Scope(settings.org_id, settings.project_id)))


def _handler_for(ui: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "memoria-ui"

        def log_message(self, format: str, *args: Any) -> None:  # stdout and stderr stay quiet
            return

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if not ui.addressed_here(self.headers):
                self._send(
                    421, "application/json", {"error": "open the URL memoria ui printed, as it is printed"}
                )
                return
            if not ui.authorised(self.headers, query):
                self._send(
                    401, "application/json", {"error": "open the URL memoria ui printed (with its token)"}
                )
                return
            try:
                if method == "GET" and parts.path == "/":
                    self._send(200, "text/html; charset=utf-8", PAGE, policy=PAGE_POLICY)
                elif method == "GET" and parts.path == "/report":
                    self._send(200, "text/html; charset=utf-8", ui.report_page())
                elif method == "GET":
                    self._send(
                        200, "application/json", ui.get(parts.path, {k: v[0] for k, v in query.items()})
                    )
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    if length < 0:
                        self._send(400, "application/json", {"error": "a negative Content-Length"})
                        return
                    if length > MAX_BODY:
                        self._send(413, "application/json", {"error": "the request is too large"})
                        return
                    body = json.loads(self.rfile.read(length) or b"{}")
                    self._send(
                        200, "application/json", ui.post(parts.path, body if isinstance(body, dict) else {})
                    )
            except LookupError:
                self._send(404, "application/json", {"error": f"nothing at {parts.path}"})
            except ValidationError as exc:
                message = friendly_validation_message("the page", exc, retry="")
                self._send(400, "application/json", {"error": message})
            except (ToolFailure, ValueError) as exc:
                self._send(400, "application/json", {"error": str(exc)})

        def _send(self, status: int, kind: str, body: Any, *, policy: str | None = None) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            if policy:
                self.send_header("Content-Security-Policy", policy)
            self.end_headers()
            self.wfile.write(data)

    return Handler


SCRIPT = r"""
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
let cursor = null;
let current = null;

async function api(path, options = {}) {
  const headers = Object.assign({"Authorization": "Bearer " + token}, options.body ? {"Content-Type": "application/json"} : {});
  const response = await fetch(path, Object.assign({}, options, {headers}));
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
  return data;
}
function say(text, bad) { const box = $("message"); box.textContent = text; box.className = bad ? "bad" : "ok"; }
function el(tag, text, cls) { const node = document.createElement(tag); if (text !== undefined && text !== null) node.textContent = String(text); if (cls) node.className = cls; return node; }

function row(memory, extra) {
  const item = el("li", null, "memory");
  item.dataset.id = memory.id;
  item.append(el("span", memory.created_at ? memory.created_at.slice(0, 10) : "", "date"),
              el("span", memory.agent_id, "agent"), el("span", memory.kind, "kind"));
  item.append(el("span", extra || "", "score"));  // empty when browsing: the text keeps the wide column
  item.append(el("span", memory.preview !== undefined ? memory.preview : memory.content, "text"));
  item.addEventListener("click", () => open(memory.id));
  return item;
}

async function browse(more) {
  const params = new URLSearchParams();
  for (const name of ["agent_id", "tag", "kind", "episode_id", "since", "until"]) { const v = $(name).value.trim(); if (v) params.set(name, v); }
  if (more && cursor) params.set("cursor", cursor);
  try {
    const page = await api("/api/memories?" + params);
    const list = $("memories");
    if (!more) list.replaceChildren();
    for (const memory of page.memories) list.append(row(memory));
    cursor = page.next_cursor;
    $("more").hidden = !cursor;
    $("heading").textContent = page.org_id + " / " + page.project_id + (page.memories.length || more ? "" : ": nothing here");
    say("");
  } catch (error) { say(error.message, true); }
}

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return browse(false);
  try {
    const found = await api("/api/recall?" + new URLSearchParams({query}));
    const list = $("memories");
    list.replaceChildren();
    for (const memory of found.memories) list.append(row(memory, memory.score.toFixed(3)));
    $("more").hidden = true;
    $("heading").textContent = found.memories.length ? "recall: " + query : (found.note || "nothing relevant was found");
    say("");
  } catch (error) { say(error.message, true); }
}

async function open(id) {
  try {
    const memory = await api("/api/memory?" + new URLSearchParams({id}));
    current = memory;
    const panel = $("detail");
    panel.hidden = false;
    $("content").textContent = memory.content;
    $("facts").replaceChildren(...[
      ["id", memory.id], ["status", memory.status + (memory.replaced_by ? " by " + memory.replaced_by : "")],
      ["kind", memory.kind], ["tags", memory.tags.join(", ")], ["agent", memory.agent_id],
      ["episode", memory.episode_id || ""], ["tier", memory.protection_tier], ["weight", memory.weight.toFixed(3)],
      ["created", memory.created_at]].map(([k, v]) => { const li = el("li"); li.append(el("b", k + ": "), el("span", v)); return li; }));
    $("weights").replaceChildren(...memory.weight_history.map((s) => el("li", s.at.slice(0, 19) + "  " + s.weight_before.toFixed(3) + " -> " + s.weight_after.toFixed(3) + "  (" + s.session_id + ")")));
    $("events").replaceChildren(...memory.lineage.events.map((e) => el("li", (e.at || "").slice(0, 19) + "  " + e.action + (e.related_id ? " " + e.related_id : "") + "  " + (e.resolver || "") + ": " + (e.reason || ""))));
    $("episode-link").hidden = !memory.episode_id;
    $("edit-text").value = memory.content;
    // An expired memory is still stored as active: it can be forgotten, not edited (replaces= refuses it).
    const active = memory.status === "active", stored = active || memory.status === "expired";
    $("save").disabled = !active;
    for (const id of ["retract", "purge"]) $(id).disabled = !stored;
    $("restore").disabled = memory.status !== "retracted";
  } catch (error) { say(error.message, true); }
}

async function save() {
  if (!current) return;
  try {
    const stored = await api("/api/edit", {method: "POST", body: JSON.stringify({id: current.id, content: $("edit-text").value})});
    await browse(false);
    await open(stored.id);
    say(stored.note || ("stored " + stored.id));
  } catch (error) { say(error.message, true); }
}

async function forget(mode) {
  if (!current) return;
  const what = mode === "purge" ? "Erase this memory's content for good" : "Retract this memory (kept for audit)";
  if (!confirm(what + "?\n\n" + current.content.slice(0, 200))) return;
  try {
    const done = await api("/api/forget", {method: "POST", body: JSON.stringify({id: current.id, mode})});
    await browse(false);
    await open(current.id);
    say((done.dry_run ? "would " : "") + mode + ": " + done.forgotten.map((m) => m.id).join(", "));
  } catch (error) { say(error.message, true); }
}

async function restore() {
  if (!current) return;
  try {
    const done = await api("/api/restore", {method: "POST", body: JSON.stringify({id: current.id})});
    await browse(false);
    await open(done.id);
    say("restored " + done.id);
  } catch (error) { say(error.message, true); }
}

$("search").addEventListener("submit", search);
$("filters").addEventListener("submit", (event) => { event.preventDefault(); browse(false); });
$("more").addEventListener("click", () => browse(true));
$("save").addEventListener("click", save);
$("retract").addEventListener("click", () => forget("retract"));
$("purge").addEventListener("click", () => forget("purge"));
$("restore").addEventListener("click", restore);
$("episode-link").addEventListener("click", () => { $("episode_id").value = current.episode_id; browse(false); });
$("report").href = "/report?token=" + encodeURIComponent(token);
browse(false);
"""

STYLE = """
body { font: 14px system-ui, sans-serif; margin: 0; display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); }
header { grid-column: 1 / 3; padding: 8px 16px; background: #1f2937; color: #fff; display: flex; gap: 16px; align-items: center; }
header a { color: #93c5fd; margin-left: auto; }
main, aside { padding: 8px 16px; }
form { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0; }
input, select, textarea { font: inherit; padding: 3px 6px; }
ul { list-style: none; padding: 0; }
li.memory { display: grid; grid-template-columns: 90px 100px 70px 60px 1fr; gap: 6px; padding: 4px; border-bottom: 1px solid #e5e7eb; cursor: pointer; }
li.memory:hover { background: #f3f4f6; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
#content { white-space: pre-wrap; overflow-wrap: anywhere; background: #f9fafb; padding: 8px; border: 1px solid #e5e7eb; }
#message.bad { color: #b91c1c; } #message.ok { color: #047857; }
textarea { width: 100%; min-height: 120px; }
"""

HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memoria</title><style>{style}</style></head>
<body>
<header><strong>memoria</strong><span id="heading"></span><a id="report" target="_blank" rel="noopener">feedback impact and drift</a></header>
<main>
<form id="search"><input id="query" size="50" placeholder="search: a task, question or error"><button>Search</button></form>
<form id="filters">
<input id="agent_id" placeholder="agent" size="10"><input id="tag" placeholder="tag" size="10">
<select id="kind"><option value="">any kind</option><option>fact</option><option>episode</option><option>artifact</option></select>
<input id="episode_id" placeholder="episode" size="12"><input id="since" placeholder="since: last week" size="14">
<input id="until" placeholder="until" size="10"><button>Browse</button></form>
<p id="message" role="status"></p>
<ul id="memories"></ul><button id="more" hidden>More</button>
</main>
<aside id="detail" hidden>
<h3>Memory</h3><div id="content"></div><ul id="facts"></ul>
<button id="episode-link" hidden>Browse its episode</button>
<h4>Edit (the new text supersedes this one, which stays for audit)</h4>
<textarea id="edit-text" maxlength="20000"></textarea><button id="save">Save as a revision</button>
<h4>Forget</h4><button id="retract">Retract</button> <button id="purge">Purge</button> <button id="restore">Restore</button>
<h4>Weight history</h4><ul id="weights"></ul>
<h4>Lineage</h4><ul id="events"></ul>
</aside>
<script>{script}</script>
</body></html>
"""

PAGE = HTML.replace("{style}", STYLE).replace("{script}", SCRIPT)
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; connect-src 'self'; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
