"""The handshake never waits for the store or models, and a failed start-up is a clear tool error."""

import threading

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from server.app import build_server
from tests.helpers import TOOL_NAMES, call, call_error, connected, make_runtime

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_tools_list_answers_while_models_are_still_loading(settings):
    release = threading.Event()

    def slow_runtime(s):
        release.wait(timeout=30)  # stands in for a model that takes long to load
        return make_runtime(s)

    async with connected(build_server(settings, runtime_factory=slow_runtime)) as client:
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == TOOL_NAMES
        assert not release.is_set()

        results = []

        async def remember():
            results.append(await call(client, "remember", {"content": "stored once the runtime is ready"}))

        async with anyio.create_task_group() as group:
            group.start_soon(remember)
            await anyio.sleep(0.2)
            assert results == []  # the call waits for the runtime instead of failing
            release.set()
        assert results[0]["status"] == "stored"


async def test_a_runtime_that_cannot_start_gives_a_tool_error_with_the_reason(settings):
    def broken_runtime(s):
        raise RuntimeError("MEMORIA_DB_URI points at a read-only folder")

    async with connected(build_server(settings, runtime_factory=broken_runtime)) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOL_NAMES
        text = await call_error(client, "recall", {"query": "anything"})
        # A resource read says it is the server's fault, not the request's (a review).
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memoria://stats")
    assert "could not start: MEMORIA_DB_URI points at a read-only folder" in text
    assert "restart" in text
    assert raised.value.error.code == INTERNAL_ERROR and "could not start" in str(raised.value)


async def test_a_call_waiting_on_a_failing_start_up_gets_the_reason(settings):
    release = threading.Event()

    def failing_runtime(s):
        release.wait(timeout=30)
        raise RuntimeError("the store folder is not writable")

    async with connected(build_server(settings, runtime_factory=failing_runtime)) as client:
        texts = []

        async def recall():
            texts.append(await call_error(client, "recall", {"query": "anything"}))

        async with anyio.create_task_group() as group:
            group.start_soon(recall)
            await anyio.sleep(0.2)
            release.set()
    assert "could not start: the store folder is not writable" in texts[0]
