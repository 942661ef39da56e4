"""benchmarks.peer: a peer's reply that says it failed is never timed as if it had worked."""

from benchmarks.peer import reports_error


def test_an_error_object_in_the_text_or_the_structured_reply_is_an_error():
    assert reports_error(None, '{"error": "Unknown tool: store_memory"}')  # mcp-memory-service 12.x
    assert reports_error({"error": "bad input"}, "")


def test_a_stored_memory_or_plain_text_is_not():
    assert not reports_error({"success": True, "content_hash": "ab12"}, '{"success": true}')
    assert not reports_error(None, "Memory stored: it says error somewhere in prose")
    assert not reports_error(None, '["error"]')
