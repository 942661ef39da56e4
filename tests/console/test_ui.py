"""memoria ui: the token, the scope, the JSON calls, and the page in a real browser (headless Chromium
through Playwright, as for the report page: skipped without it, except under CI=true)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from console.ui import UiServer
from storage.records import Scope
from tests.console.test_report_browser import browser as browser  # the shared Chromium fixture
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.remember import RememberInput, remember

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">The deploy key lives in the vault"


@pytest.fixture
def ui(tmp_path) -> Iterator[UiServer]:
    runtime = make_runtime(settings_for(tmp_path / "db"))
    caller = Caller("agent-a", "ses_1")
    for content, extra in (
        ("Deploys go out on Tuesdays after the standup", {"tags": ["ops"], "episode_id": "ep_week"}),
        ("The billing database runs Postgres 15", {"tags": ["db"]}),
        (HOSTILE, {}),
        ("Another project's secret plan", {"project_id": "other"}),
    ):
        remember(RememberInput(content=content, **extra), runtime, caller)
    server = UiServer(runtime)
    server.start()
    try:
        yield server
    finally:
        server.close()
        runtime.close()


def fetch(
    ui: UiServer,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    base = ui.url.split("/?")[0]
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode() if body is not None else None, headers=headers or {}
    )
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as error:
        raw, status = error.read().decode(), error.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


@pytest.mark.slow
def test_every_request_without_this_runs_token_is_refused(ui):
    assert ui.url.startswith("http://127.0.0.1:") and f"?token={ui.token}" in ui.url
    for path in ("/", "/api/memories", "/report"):
        assert fetch(ui, path)[0] == 401
        assert fetch(ui, path, token="not-the-token")[0] == 401
    status, page = fetch(ui, f"/?token={ui.token}")
    assert status == 200 and "<title>memoria</title>" in page
    assert fetch(ui, "/api/memories", token=ui.token)[0] == 200


@pytest.mark.slow
def test_a_request_for_another_host_or_from_another_origin_is_refused_even_with_the_token(ui):
    """A page elsewhere whose DNS name was rebound to 127.0.0.1 sends its own Host and Origin."""
    port = ui.url.split(":")[2].split("/")[0]
    assert fetch(ui, "/api/memories", token=ui.token, headers={"Host": "evil.example"})[0] == 421
    assert fetch(ui, "/api/memories", token=ui.token, headers={"Host": f"evil.example:{port}"})[0] == 421
    foreign = {"Origin": "http://evil.example"}
    status, answer = fetch(ui, "/api/forget", token=ui.token, body={"id": "mem_x"}, headers=foreign)
    assert status == 421 and answer == {"error": "open the URL memoria ui printed, as it is printed"}
    # Its own page, by either loopback name, is served.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}"):
        own = {"Host": host, "Origin": f"http://{host}"}
        assert fetch(ui, "/api/memories", token=ui.token, headers=own)[0] == 200


@pytest.mark.slow
def test_the_calls_stay_in_the_configured_scope_and_errors_say_what_to_do(ui):
    status, listed = fetch(ui, "/api/memories", token=ui.token)
    assert status == 200 and (listed["org_id"], listed["project_id"]) == ("default", "default")
    assert len(listed["memories"]) == 3 and "secret plan" not in json.dumps(listed)
    status, found = fetch(ui, "/api/memories?project_id=other", token=ui.token)
    assert "secret plan" not in json.dumps(found)  # the page has no way to another project
    status, error = fetch(ui, "/api/memory?id=mem_nope", token=ui.token)
    assert status == 400 and "no memory 'mem_nope'" in error["error"]
    status, error = fetch(
        ui, "/api/edit", token=ui.token, body={"id": listed["memories"][0]["id"], "content": "  "}
    )
    assert status == 400 and "content" in error["error"]
    status, error = fetch(ui, "/api/memories?since=someday", token=ui.token)
    assert status == 400 and "'someday' is not a time" in error["error"]


@pytest.mark.slow
def test_a_memory_retracted_from_the_page_is_restored_from_it_as_it_was(ui):
    """A trial: a retraction made in the page could be undone only with `memoria restore` in a terminal."""
    _, listed = fetch(ui, "/api/memories", token=ui.token)
    memory_id = next(m["id"] for m in listed["memories"] if "Postgres" in m["preview"])
    status, _ = fetch(ui, "/api/forget", token=ui.token, body={"id": memory_id, "mode": "retract"})
    assert status == 200
    status, restored = fetch(ui, "/api/restore", token=ui.token, body={"id": memory_id})
    assert status == 200 and restored["id"] == memory_id
    _, shown = fetch(ui, f"/api/memory?id={memory_id}", token=ui.token)
    assert (shown["status"], shown["tags"]) == ("active", ["db"])
    status, error = fetch(ui, "/api/restore", token=ui.token, body={"id": memory_id})
    assert status == 400 and error["error"] == f"{memory_id} is active: there is nothing to restore"
    status, error = fetch(ui, "/api/restore", token=ui.token, body={})
    assert status == 400 and "restore needs the id of a retracted memory" in error["error"]
    # Another project's memory is no memory here: the page names no other project (a review).
    other = next(
        m
        for m in ui.runtime.store.list_memories(Scope("default", "other"), limit=5)
        if "secret plan" in m.content
    )
    status, error = fetch(ui, "/api/restore", token=ui.token, body={"id": other.id})
    assert (status, error["error"]) == (400, f"no memory {other.id!r} here: check the id")


@pytest.mark.slow
def test_an_edit_from_the_page_keeps_the_memorys_date(ui):
    """A trial: the page's edit form has no date, so a corrected incident always left its week for today."""
    from datetime import UTC, datetime

    when = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)
    dated = remember(
        RememberInput(content="The outage lasted two hours", occurred_at=when),
        ui.runtime,
        Caller("agent-a", "s"),
    )
    status, edited = fetch(
        ui, "/api/edit", token=ui.token, body={"id": dated.id, "content": "The outage lasted three hours"}
    )
    assert status == 200 and edited["created_at"] == "2026-11-25T15:00:00Z"


@pytest.mark.slow
def test_the_page_shows_the_org_wide_memories_and_no_agents_private_ones(ui):
    caller = Caller("agent-a", "ses_1")
    private = remember(
        RememberInput(content="Agent A's private draft of the incident review", visibility="agent"),
        ui.runtime,
        caller,
    )
    org = remember(
        RememberInput(content="Every team reviews incidents within a week", visibility="org"),
        ui.runtime,
        caller,
    )
    listed = fetch(ui, "/api/memories", token=ui.token)[1]
    ids = {memory["id"] for memory in listed["memories"]}
    assert org.id in ids and private.id not in ids
    found = fetch(ui, "/api/recall?query=incident+review+draft", token=ui.token)[1]
    assert org.id in {m["id"] for m in found["memories"]} and "private draft" not in json.dumps(found)
    status, error = fetch(ui, f"/api/memory?id={private.id}", token=ui.token)
    assert status == 400 and "no memory" in error["error"] and "draft" not in error["error"]


class Tab:
    def __init__(self, chromium: Any, url: str) -> None:
        self.problems: list[str] = []
        self.page = chromium.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on(
            "console",
            lambda message: self.problems.append(message.text) if message.type == "error" else None,
        )
        self.page.on("dialog", lambda dialog: dialog.accept())  # the forget confirmation: yes
        self.page.goto(url, wait_until="load")


def rows_become(page: Any, count: int) -> None:
    """Wait until the list shows ``count`` memories (the page's policy forbids evaluated waits)."""
    deadline = time.monotonic() + 10
    while page.locator("li.memory").count() != count:
        assert time.monotonic() < deadline, f"the list never showed {count} memories"
        page.wait_for_timeout(50)


@pytest.mark.slow
def test_the_page_searches_browses_shows_edits_and_forgets(ui, browser):
    tab = Tab(browser, ui.url)
    page = tab.page
    page.wait_for_selector("li.memory")
    assert page.locator("li.memory").count() == 3
    assert page.locator("img").count() == 0 and page.title() == "memoria"  # the hostile memory is text
    assert page.locator("li.memory", has_text="onerror").count() == 1

    page.fill("#query", "when do deploys go out")
    page.click("#search button")
    page.wait_for_selector("#heading:has-text('recall: when do deploys go out')")
    first = page.locator("li.memory").first
    assert "Deploys go out on Tuesdays" in first.inner_text()

    first.click()
    page.wait_for_selector("#detail:not([hidden])")
    assert page.inner_text("#content") == "Deploys go out on Tuesdays after the standup"
    old_id = page.locator("#facts li", has_text="id:").inner_text().split(": ")[1]

    page.click("#episode-link")  # browse its episode
    rows_become(page, 1)

    page.fill("#edit-text", "Deploys go out on Wednesdays after the standup")
    page.click("#save")
    page.wait_for_selector(f"#message:has-text('replaces {old_id}')")
    assert page.inner_text("#content") == "Deploys go out on Wednesdays after the standup"
    new_id = page.locator("#facts li", has_text="id:").inner_text().split(": ")[1]
    assert new_id != old_id and "ops" in page.inner_text("#facts")

    _, old = fetch(ui, f"/api/memory?id={old_id}", token=ui.token)
    assert old["status"] == "superseded" and old["replaced_by"] == new_id
    assert old["lineage"]["events"][-1]["reason"] == "explicit update"

    assert page.is_disabled("#restore")  # active: nothing to restore
    page.click("#retract")  # confirmed by the dialog handler
    page.wait_for_selector(f"#message:has-text('retract: {new_id}')")
    assert "status: retracted" in page.inner_text("#facts")
    assert page.is_disabled("#save") and page.is_disabled("#purge")

    page.click("#restore")  # the retraction undone (a trial found no way back in the page)
    page.wait_for_selector(f"#message:has-text('restored {new_id}')")
    assert "status: active" in page.inner_text("#facts") and page.is_disabled("#restore")

    report = browser.new_page()
    report.goto(ui.url.replace("/?token=", "/report?token="), wait_until="load")
    assert "Feedback impact" in report.content() and "Drift" in report.content()
    report.close()
    assert tab.problems == []
    page.close()
