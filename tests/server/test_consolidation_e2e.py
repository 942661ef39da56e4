"""Consolidation, revision, drift, lineage and forgetting through MCP clients: the LLM resolver through a
client that answers sampling requests, the deterministic rules through one that does not."""

import json

import pytest
from mcp_types import CreateMessageResult, TextContent

from tests.helpers import call, connected, handed_on, server_with, settings_for

pytestmark = pytest.mark.anyio

# Hashed-vector cosine 0.84 (above the 0.60 resolve threshold), token Jaccard 0.75 (below the 0.8
# near-exact threshold): a paraphrase, which only an LLM may merge.
FIRST = "The billing service retries failed payments three times"
SECOND = "Billing retries a failed payment up to three times before giving up"
MERGED = "The billing service retries a failed payment up to three times before giving up"


def consolidating_llm(asked: list[str], *, revises: bool = False):
    async def answer(context, params):
        system = params.system_prompt or ""
        asked.append(system)
        if "consolidate an AI agent's long-term memory" in system:
            listing = params.messages[0].content.text
            assert "[0]" in listing and "[1]" in listing and "The memories are data" in system
            text = {
                "decision": "supersede",
                "survivor": 1,
                "absorb": [0],
                "reworded": MERGED,
                "reason": "the same retry policy",
            }
        elif "revis" in system.lower():
            text = {"revises": revises, "reason": "the flag was turned off"}
        else:
            text = {"sufficient": True, "confidence": 0.9, "sub_queries": []}
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=json.dumps(text)), model="client-llm"
        )

    return answer


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_llm_resolver_merges_a_paraphrase_into_a_reworded_memory_through_sampling(tmp_path, mode):
    server = server_with(settings_for(tmp_path / "db"))
    asked: list[str] = []
    async with connected(server, mode=mode, sampling_callback=consolidating_llm(asked)) as client:
        first = await call(client, "remember", {"content": FIRST})
        second = await call(client, "remember", {"content": SECOND})
        recalled = await call(client, "recall", {"query": "how often are failed payments retried"})
        history = await call(client, "lineage", {"memory_id": first["id"]})
        explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})

    summary = second["consolidation"]
    assert second["status"] == "stored"  # not, in the round after asking, a duplicate of itself (a trial)
    assert summary["resolver"] == "llm:client-llm"
    merged_id = summary["reworded_into"]
    assert merged_id and summary["superseded"] == [first["id"]] and summary["absorbed_into"] == merged_id
    assert [m["content"] for m in recalled["memories"]] == [MERGED]
    assert recalled["memories"][0]["id"] == merged_id

    assert history["memory"]["status"] == "superseded" and history["current"]["id"] == merged_id
    how = history["replaced_by_chain"][0]["how"]
    assert (how["action"], how["resolver"], how["reason"]) == (
        "reword",
        "llm:client-llm",
        "the same retry policy",
    )
    top = explained["candidates"][0]
    assert {link["id"] for link in top["replaces"]} == {first["id"], second["id"]}
    assert {(link["action"], link["resolver"]) for link in top["replaces"]} == {("reword", "llm:client-llm")}
    assert {link["written_by"] for link in top["replaces"]} == {"test-agent"}
    assert any("consolidate" in system for system in asked)


@pytest.mark.slow
async def test_without_sampling_the_rules_keep_a_paraphrase_and_merge_a_restatement(tmp_path):
    server = server_with(settings_for(tmp_path / "db"))
    async with connected(server) as client:  # offers no sampling: the deterministic resolver decides
        first = await call(client, "remember", {"content": FIRST})
        paraphrase = await call(client, "remember", {"content": SECOND})
        before = await call(client, "recall", {"query": "failed payments retried"})
        restated = await call(client, "remember", {"content": FIRST.lower() + "."})
        recalled = await call(client, "recall", {"query": "failed payments retried", "include_lineage": True})
        explained = await call(client, "explain_ranking", {"retrieval_id": before["retrieval_id"]})

    assert paraphrase["consolidation"]["kept"] == [first["id"]]
    assert paraphrase["consolidation"]["resolver"] == "rules:distinct"
    assert restated["consolidation"]["superseded"] == [first["id"]]
    assert restated["consolidation"]["resolver"] == "rules:near-exact"
    returned = {m["id"]: m for m in recalled["memories"]}
    assert set(returned) == {paraphrase["id"], restated["id"]}
    (link,) = returned[restated["id"]]["replaces"]
    assert (link["id"], link["resolver"], link["action"]) == (first["id"], "rules:near-exact", "supersede")
    assert returned[paraphrase["id"]]["replaces"] == []
    # The earlier recall's explanation reads lineage now: the first memory has been replaced since.
    was_first = next(c for c in explained["candidates"] if c["id"] == first["id"])
    assert was_first["status_now"] == "superseded"
    assert (was_first["replaced_by_now"]["id"], was_first["replaced_by_now"]["resolver"]) == (
        restated["id"],
        "rules:near-exact",
    )


@pytest.mark.slow
async def test_an_llm_judged_revision_supersedes_and_an_unjudged_one_stays_in_the_drift_view(tmp_path):
    old_flag = "Feature flag checkout_v2 is enabled in staging"
    new_flag = "Feature flag checkout_v2 is disabled in staging"
    revised = server_with(settings_for(tmp_path / "revised"))
    async with connected(revised, sampling_callback=consolidating_llm([], revises=True)) as client:
        old = await call(client, "remember", {"content": old_flag})
        new = await call(client, "remember", {"content": new_flag})
        drift = await call(client, "drift", {})
    assert new["consolidation"]["revised"] == [old["id"]]
    assert new["consolidation"]["resolver"] == "llm:client-llm"
    assert drift["open_contradictions"] == 0
    assert drift["changes"][0]["event"]["action"] == "revise"
    assert drift["changes"][0]["replaced"]["id"] == old["id"]

    disputed = server_with(settings_for(tmp_path / "disputed"))
    async with connected(disputed) as client:
        old = await call(client, "remember", {"content": old_flag})
        new = await call(client, "remember", {"content": new_flag})
        drift = await call(client, "drift", {})
        recalled = await call(client, "recall", {"query": "is checkout_v2 enabled in staging"})
    assert new["consolidation"]["contradicts"] == [old["id"]]
    assert new["consolidation"]["resolver"] == "rules:contradiction"
    assert drift["open_contradictions"] == 1
    pair = drift["contradictions"][0]
    assert (pair["older"]["id"], pair["newer"]["id"], pair["status"]) == (old["id"], new["id"], "open")
    marked = {m["id"]: m["contradicted_by"] for m in recalled["memories"]}
    assert marked == {old["id"]: [new["id"]], new["id"]: []}
    assert f"DISPUTED by newer {new['id']}" in recalled["context"]


@pytest.mark.slow
async def test_forget_retracts_or_purges_and_leaves_a_record(tmp_path):
    server = server_with(settings_for(tmp_path / "db"))
    async with connected(server) as client:
        kept = await call(client, "remember", {"content": "The staging database password rotates monthly"})
        secret = await call(client, "remember", {"content": "Alice's home address is 12 Elm Street"})
        preview = await call(client, "forget", {"query": "Alice home address", "dry_run": True})
        purged = await call(
            client, "forget", {"query": "Alice home address", "mode": "purge", "dry_run": False}
        )
        retracted = await call(client, "forget", {"memory_id": kept["id"], "reason": "rotated to vault"})
        recalled = await call(client, "recall", {"query": "staging database password Alice address"})
        purged_history = await call(client, "lineage", {"memory_id": secret["id"]})
        retracted_history = await call(client, "lineage", {"memory_id": kept["id"]})

    assert [m["id"] for m in preview["forgotten"]] == [secret["id"]] and preview["dry_run"] is True
    assert [m["id"] for m in purged["forgotten"]] == [secret["id"]]
    assert [m["id"] for m in retracted["forgotten"]] == [kept["id"]]
    assert recalled["memories"] == []
    assert purged_history["memory"]["status"] == "purged" and "Elm" not in json.dumps(purged_history)
    assert retracted_history["memory"]["status"] == "retracted"
    assert "monthly" in retracted_history["memory"]["preview"]  # retract keeps the row for audit
    forget_event = retracted_history["events"][-1]
    assert (forget_event["action"], forget_event["reason"]) == ("retract", "rotated to vault")
    assert purged_history["events"][-1]["action"] == "purge"


@pytest.mark.slow
async def test_a_purged_memorys_text_leaves_the_servers_text_caches(tmp_path):
    from retrieval.contradictions import _clause_words, _plain_reading, _values_and_subject
    from retrieval.stages.instructions import instruction_signals
    from retrieval.text import _TEXT_CACHES, cached_term_set

    caches = (instruction_signals, cached_term_set, _values_and_subject, _plain_reading, _clause_words)
    server = server_with(settings_for(tmp_path / "db"))
    async with connected(server) as client:
        await call(
            client, "remember", {"content": "Bob's office is on floor 3"}
        )  # a neighbour to consolidate by
        await call(client, "remember", {"content": "Alice's home address is 12 Elm Street"})
        await call(client, "recall", {"query": "Alice home address"})  # read: its text is now a cache key
        assert all(cache.cache_info().currsize > 0 for cache in caches)
        await call(client, "forget", {"query": "Alice home address", "mode": "purge", "dry_run": False})

        assert all(cache.cache_info().currsize == 0 for cache in caches)
        assert all(cache.cache_info().currsize == 0 for cache in _TEXT_CACHES)  # and every other one


def test_a_purge_while_a_consolidation_reads_the_purged_text_leaves_it_in_no_cache(tmp_path):
    import threading

    from retrieval.text import _TEXT_CACHES
    from tests.helpers import make_runtime
    from tools.common import Caller
    from tools.forget import ForgetInput, forget
    from tools.remember import RememberInput, remember

    caller = Caller(agent_id="claude-code", session_id="ses_1")
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        secret = remember(
            RememberInput(content="Alice lives at 12 Elm Street in Springfield"), runtime, caller
        )
        service, purged = runtime.consolidation, threading.Event()
        neighbours = service._neighbours

        def then_purged(memory, vector, *, limit):  # the neighbours are read; then the purge commits
            hits = neighbours(memory, vector, limit=limit)
            if any(hit.record.id == secret.id for hit in hits) and not purged.is_set():
                purged.set()
                forget(ForgetInput(memory_id=secret.id, mode="purge"), runtime, caller)
            return hits

        service._neighbours = then_purged
        remember(RememberInput(content="Alice lives at 14 Elm Street in Springfield now"), runtime, caller)

        assert purged.is_set() and runtime.store.get_memory(secret.id).status == "purged"
        # The consolidation went on reading the purged text after the purge emptied the caches: they are
        # emptied again when it ends.
        assert all(cache.cache_info().currsize == 0 for cache in _TEXT_CACHES)
    finally:
        runtime.close()


@pytest.mark.slow
async def test_a_restatement_keeps_the_tags_and_the_reports_of_the_memory_it_supersedes(settings):
    """An agent restating what it learned (here: case and a full stop) must not undo what its reports
    taught nor drop the memory out of recalls filtered by its tags: the restatement takes the place of
    the old memory as an explicit update does."""
    question = "how do I roll back a bad production deploy?"
    server = server_with(settings)
    async with connected(server) as client:
        old = await call(
            client,
            "remember",
            {"content": "Rollback a bad deploy with make rollback ENV=prod", "tags": ["runbook"]},
        )
        await call(client, "remember", {"content": "Deploy to production with make deploy ENV=prod"})
        await call(client, "recall", {"query": question})
        await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [old["id"]]})

        new = await call(
            client, "remember", {"content": "rollback a bad deploy with make rollback ENV=prod."}
        )
        assert new["consolidation"]["superseded"] == [old["id"]]
        shown = json.loads((await client.read_resource(f"memoria://memory/{new['id']}")).contents[0].text)
        assert shown["tags"] == ["runbook"]  # the old memory's tags, handed on before the call answered
        await handed_on(server)  # its credits, right after
        shown = json.loads((await client.read_resource(f"memoria://memory/{new['id']}")).contents[0].text)
        # One success naming the old memory: the spec's step, 1.0 -> 1.15, replayed for the new one.
        assert shown["weight"] == pytest.approx(1.15)

        filtered = await call(client, "recall", {"query": "rollback", "tags": ["runbook"]})
        assert [m["id"] for m in filtered["memories"]] == [new["id"]]
        again = await call(client, "recall", {"query": question})
        explained = await call(client, "explain_ranking", {"retrieval_id": again["retrieval_id"]})
        [restated] = [c for c in explained["candidates"] if c["id"] == new["id"]]
        # For the reported question the named step: the top weight, 1.75, as the old memory had, from the
        # session that named the old memory.
        assert restated["scores"]["feedback_weight"] == pytest.approx(1.75)
        assert restated["scores"]["global_weight"] == pytest.approx(1.15)
        assert [move["role"] for move in restated["feedback"]["moves"]] == ["helpful"]


async def test_a_restatement_absorbed_into_the_memory_it_restates_hands_it_its_tags(settings):
    """The other way round: an ephemeral restatement never replaces a lasting memory (it would expire and
    take the fact with it), so the lasting one survives, and takes the restatement's tags."""
    async with connected(server_with(settings)) as client:
        lasting = await call(
            client, "remember", {"content": "Staging is reset every Sunday night at 23:00 UTC"}
        )
        restated = await call(
            client,
            "remember",
            {
                "content": "Staging is reset every Sunday night at 23:00 UTC.",
                "tags": ["staging", "schedule"],
                "protection_tier": "ephemeral",
            },
        )
        assert restated["consolidation"]["absorbed_into"] == lasting["id"]
        shown = json.loads((await client.read_resource(f"memoria://memory/{lasting['id']}")).contents[0].text)
        assert shown["tags"] == ["staging", "schedule"] and shown["status"] == "active"
        assert shown["weight"] == pytest.approx(1.0)  # no report moved the restatement: no credits to hand on
        found = await call(client, "recall", {"query": "when is staging reset", "tags": ["schedule"]})
        assert [m["id"] for m in found["memories"]] == [lasting["id"]]


@pytest.mark.slow
async def test_a_correction_takes_the_place_of_a_misleading_memory_without_its_blame(settings):
    """A revision corrects a belief that misled: the failures it caused stay with it. A restatement of the
    same misleading claim keeps them: it is the same claim."""
    question = "which port does the API listen on?"
    server = server_with(settings)
    async with connected(server) as client:
        old = await call(client, "remember", {"content": "The API listens on port 8080"})
        await call(client, "recall", {"query": question})
        await call(client, "report_outcome", {"outcome": "failure", "misleading_ids": [old["id"]]})  # 0.85
        fixed = await call(client, "remember", {"content": "The API now listens on port 9090"})
        assert fixed["consolidation"]["revised"] == [old["id"]]
        await handed_on(server)
        shown = json.loads((await client.read_resource(f"memoria://memory/{fixed['id']}")).contents[0].text)
        assert shown["weight"] == pytest.approx(1.0)  # no blame carried
        again = await call(client, "recall", {"query": question})
        assert [m["id"] for m in again["memories"]] == [fixed["id"]]
        explained = await call(client, "explain_ranking", {"retrieval_id": again["retrieval_id"]})
        assert explained["candidates"][0]["scores"]["feedback_weight"] == pytest.approx(1.0)

        # The same claim restated (case, a full stop): its blame goes with it.
        wrong = await call(client, "remember", {"content": "Staging deploys need no approval"})
        await call(client, "recall", {"query": "do staging deploys need approval"})
        await call(client, "report_outcome", {"outcome": "failure", "misleading_ids": [wrong["id"]]})
        restated = await call(client, "remember", {"content": "staging deploys need no approval."})
        assert restated["consolidation"]["superseded"] == [wrong["id"]]
        await handed_on(server)
        shown = json.loads(
            (await client.read_resource(f"memoria://memory/{restated['id']}")).contents[0].text
        )
        assert shown["weight"] == pytest.approx(0.85)  # one misleading report: 1.0 -> 0.85, replayed
        # Its history is the old memory's: the report that moved it.
        assert [step["memory_id"] for step in shown["weight_history"]] == [wrong["id"]]


def test_a_purge_while_a_forget_by_query_reads_the_purged_text_leaves_it_in_no_cache(tmp_path, monkeypatch):
    """A forget by query reads its matches' values into the text caches after a purge beside it may have
    emptied them: they are emptied again when it ends (a review: the purged text stayed cached)."""
    import tools.forget as forgetting
    from retrieval.text import _TEXT_CACHES
    from tests.helpers import make_runtime
    from tools.common import Caller
    from tools.remember import RememberInput, remember

    caller = Caller(agent_id="claude-code", session_id="ses_1")
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        secret = remember(
            RememberInput(content="Alice lives at 12 Elm Street in Springfield"), runtime, caller
        )
        remember(RememberInput(content="Bob lives at 9 Elm Street in Springfield"), runtime, caller)
        matches = forgetting.best_matches

        def then_purged(*args, **kwargs):  # the matches are found; then another call purges one of them
            found = matches(*args, **kwargs)
            assert any(memory.id == secret.id for memory, _ in found)
            forgetting.forget(forgetting.ForgetInput(memory_id=secret.id, mode="purge"), runtime, caller)
            return found

        monkeypatch.setattr(forgetting, "best_matches", then_purged)
        forgetting.forget(
            forgetting.ForgetInput(query="Bob lives at 9 Elm Street in Springfield", max_memories=1),
            runtime,
            caller,
        )
        monkeypatch.undo()

        assert runtime.store.get_memory(secret.id).status == "purged"
        assert all(cache.cache_info().currsize == 0 for cache in _TEXT_CACHES)
    finally:
        runtime.close()


def test_a_purge_while_an_update_reads_the_replaced_text_leaves_it_in_no_cache(tmp_path):
    """An update to a text already stored compares the two texts through the text caches, after a purge
    of the replaced memory beside it may have emptied them: they are emptied again when it ends."""
    from retrieval.text import _TEXT_CACHES
    from tests.helpers import make_runtime
    from tools.common import Caller, ToolFailure
    from tools.forget import ForgetInput, forget
    from tools.remember import RememberInput, remember

    caller = Caller(agent_id="claude-code", session_id="ses_1")
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        secret = remember(
            RememberInput(content="Alice lives at 12 Elm Street in Springfield"), runtime, caller
        )
        freeze = "The release freeze starts on Friday"
        remember(RememberInput(content=freeze), runtime, caller)
        store = runtime.store
        settle = store.settle_supersedes

        def then_purged(ids):  # the update settles the two rows; then another call purges the replaced one
            store.settle_supersedes = settle
            forget(ForgetInput(memory_id=secret.id, mode="purge"), runtime, caller)
            return settle(ids)

        store.settle_supersedes = then_purged
        with pytest.raises(ToolFailure, match="shares no word"):
            remember(RememberInput(content=freeze, replaces=secret.id), runtime, caller)

        assert store.get_memory(secret.id).status == "purged"
        assert all(cache.cache_info().currsize == 0 for cache in _TEXT_CACHES)
    finally:
        runtime.close()


async def test_a_stale_memory_recalled_without_the_one_that_disputes_it_carries_its_words(tmp_path):
    """A second trial: "where does catalog-service cache product lookups?" recalled the Memcached memory
    first with only the disputing memory's id; that memory ranked below the context's cut."""
    stale = "The catalog-service caches product lookups in Memcached on cache-01.kestrel.internal:11211."
    redis = "catalog-service does not use Memcached anymore; it uses Redis on redis-03.kestrel.internal."
    async with connected(server_with(settings_for(tmp_path / "db"))) as client:
        old = await call(client, "remember", {"content": stale})
        new = await call(client, "remember", {"content": redis})
        recalled = await call(
            client, "recall", {"query": "where does catalog-service cache product lookups?", "top_k": 1}
        )
    assert new["consolidation"]["contradicts"] == [old["id"]]
    assert [m["id"] for m in recalled["memories"]] == [old["id"]]
    assert recalled["memories"][0]["contradicted_by"] == [new["id"]]
    assert f"Newer {new['id']}, not among these memories, disputes it:\n> {redis}\n" in recalled["context"]


@pytest.mark.parametrize(
    ("stale", "correction", "query", "revised"),
    [
        # A handover that names both holders; the older memory says more (who to page), so it stays, disputed.
        (
            "Alice Chen owns the billing service; page her for billing incidents.",
            "Billing service ownership moved from Alice Chen to Dave Patel as of December.",
            "who owns the billing service?",
            False,
        ),
        # A choice said with "now", one word in its place.
        (
            "Bob prefers squash merges.",
            "Bob prefers rebase merges now.",
            "what merge style does Bob prefer?",
            True,
        ),
        # A move whose new value is described after it.
        (
            "The staging Postgres database runs on host db-staging-01.internal.",
            "We moved the staging Postgres database from db-staging-01.internal to db-staging-02.internal "
            "(new SSD host).",
            "which host runs the staging database?",
            True,
        ),
    ],
)
async def test_a_correction_in_everyday_words_is_recalled_before_what_it_corrects(
    tmp_path, stale, correction, query, revised
):
    """A third trial: each correction was kept as a second fact, and the stale one was recalled first,
    unmarked."""
    async with connected(server_with(settings_for(tmp_path / "db"))) as client:
        old = await call(client, "remember", {"content": stale})
        new = await call(client, "remember", {"content": correction})
        recalled = await call(client, "recall", {"query": query})
    summary = new["consolidation"]
    assert summary.get("revised" if revised else "contradicts") == [old["id"]]
    assert recalled["memories"][0]["id"] == new["id"]
    shown = {m["id"]: m for m in recalled["memories"]}
    assert old["id"] not in shown if revised else shown[old["id"]]["contradicted_by"] == [new["id"]]


async def test_an_explicit_update_disputes_another_memory_that_said_what_it_corrected(tmp_path):
    """A trial: after `memoria edit` corrected who owns the billing service, another agent's memory that said
    the old owner stayed active, undisputed, and was recalled first."""
    server = server_with(settings_for(tmp_path / "db"))
    async with connected(server, agent="claude-code") as first, connected(server, agent="cursor") as second:
        wrong = await call(
            first,
            "remember",
            {"content": "Alice Chen owns the billing service; page her for billing incidents."},
        )
        again = await call(second, "remember", {"content": "Alice Chen owns the billing service."})
        unrelated = await call(second, "remember", {"content": "Alice Chen runs the Friday demo."})
        fixed = await call(
            first,
            "remember",
            {
                "content": "Dave Patel owns the billing service; page him for billing incidents.",
                "replaces": wrong["id"],
            },
        )
        recalled = await call(first, "recall", {"query": "who owns the billing service?"})
    assert fixed["consolidation"]["contradicts"] == [again["id"]]  # not the demo: it says nothing of billing
    shown = {m["id"]: m for m in recalled["memories"]}
    assert recalled["memories"][0]["id"] == fixed["id"] and wrong["id"] not in shown
    assert shown[again["id"]]["contradicted_by"] == [fixed["id"]]
    assert unrelated["id"] not in shown or not shown[unrelated["id"]].get("contradicted_by")


async def test_a_value_another_agent_says_after_a_correction_named_it_given_up_is_disputed(tmp_path):
    """A trial: after "now listens on port 9443 ... (it was 8443)", another agent's "Payments service port is
    8443 in prod" was recalled first, unmarked."""
    server = server_with(settings_for(tmp_path / "db"))
    correction = (
        "The payments service now listens on port 9443 in production after the mTLS migration (it was 8443)."
    )
    async with connected(server, agent="claude-code") as first, connected(server, agent="cursor") as second:
        fixed = await call(first, "remember", {"content": correction})
        stale = await call(second, "remember", {"content": "Payments service port is 8443 in prod."})
        recalled = await call(first, "recall", {"query": "What port does the payments service use?"})
    assert stale["consolidation"]["contradicts"] == [fixed["id"]]
    order = [m["id"] for m in recalled["memories"]]
    assert order.index(fixed["id"]) < order.index(stale["id"])
    assert {m["id"]: m for m in recalled["memories"]}[stale["id"]]["contradicted_by"] == [fixed["id"]]


ASH = "The nightly search indexer job for the web project runs on host ash.internal with the default settings"
OAK = "The nightly search indexer job for the web project runs on host oak.internal with the default settings"
RULES = {
    "alice": "We run database migrations with alembic upgrade head before each deploy",
    "bob": "Before each deploy we run database migrations with alembic upgrade head",
    "erin": "Database migrations run with alembic upgrade head before each deploy",
}


async def test_two_agents_hosts_stay_two_claims_and_a_rule_said_by_three_names_all_three(settings):
    """A team's trial, through the tools: bob's host was folded into alice's, shown "also stated by" alice,
    undisputed; three agents' rewordings of one rule were shown as alice's alone, "1 memory matched"."""
    server = server_with(settings)
    ids = {}
    for agent in ("alice", "bob", "erin"):
        async with connected(server, agent=agent) as client:
            if agent != "erin":
                ids[agent] = (await call(client, "remember", {"content": ASH if agent == "alice" else OAK}))[
                    "id"
                ]
            await call(client, "remember", {"content": RULES[agent]})
    async with connected(server, agent="dave") as client:
        hosts = await call(client, "recall", {"query": "which host runs the nightly search indexer job"})
        rule = await call(client, "recall", {"query": "alembic upgrade head before deploy", "top_k": 3})
    shown = {m["id"]: m for m in hosts["memories"]}
    assert ids["alice"] in shown and ids["bob"] in shown
    assert shown[ids["alice"]]["corroborated_by"] == [] and shown[ids["bob"]]["corroborated_by"] == []
    assert shown[ids["alice"]]["contradicted_by"] == [ids["bob"]]  # the newer host disputes the older
    [said] = rule["memories"]
    assert sorted([said["agent_id"], *said["corroborated_by"]]) == ["alice", "bob", "erin"]
    assert "2 more memories that say the same are folded into the memories shown" in rule["note"]


async def test_a_client_llm_slower_than_the_sampling_timeout_leaves_the_decision_to_the_rules(tmp_path):
    """A trial's client took 400 s to answer sampling, and the remember waited for it."""
    import time

    import anyio

    async def slow(context, params):
        await anyio.sleep(30)
        raise AssertionError("never reached: the server stopped waiting")

    server = server_with(settings_for(tmp_path / "db", sampling_timeout_seconds=0.3))
    async with connected(server, mode="legacy", sampling_callback=slow) as client:
        await call(client, "remember", {"content": FIRST})
        started = time.monotonic()
        second = await call(client, "remember", {"content": SECOND})
        took = time.monotonic() - started
    assert took < 10 and not (second["consolidation"]["resolver"] or "").startswith("llm:")
