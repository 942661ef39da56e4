"""build_report over a store built through the real handlers, checked against figures computed by hand
from the A/B rows and weight events; render_report escapes what memories say."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.report import build_report
from console.report_page import render_report
from storage.records import Scope
from tests.ab_logs import ab_log_rows
from tools.common import Caller, Runtime
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, report_outcome

SCOPE = Scope("default", "default")
HOSTILE = 'postgres note <script>alert(1)</script> "><img src=x onerror=alert(1)>'
TEXTS = {
    "pool": "postgres pool size is 20",
    "port": "postgres runs on port 5432",
    "backup": "postgres backups run nightly at 2am",
    "hostile": HOSTILE,
    "cat": "the cat sat on the mat",
}


@dataclass
class Sample:
    ids: dict[str, str]
    retrievals: list[tuple[str, int]]  # (retrieval id, top_k), oldest first
    flag_old: str
    flag_new: str
    billing: str
    switch: str
    deploy_cursor: str
    deploy_claude: str


def caller(session: str, agent: str = "claude-code") -> Caller:
    return Caller(agent, session)


def stepping_clock(runtime: Runtime) -> None:
    """Five minutes per reading, starting three hours ago, so times spread out (and none is in the future)."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    steps = itertools.count()
    runtime.clock = lambda: start + timedelta(minutes=5 * next(steps))


def build_sample(runtime: Runtime) -> Sample:
    """Recalls reordered by reported outcomes, an open contradiction, a revision, and corroboration by a
    second agent (of the hostile memory too)."""
    stepping_clock(runtime)
    ids = {
        key: remember(RememberInput(content=text), runtime, caller("ses_w")).id for key, text in TEXTS.items()
    }
    retrievals = []

    def recall_in(session: str, query: str, top_k: int) -> None:
        found = recall(RecallInput(query=query, top_k=top_k), runtime, caller(session))
        retrievals.append((found.retrieval_id, top_k))

    def report(session: str, outcome: str, **named: list[str]) -> None:
        named_ids = {role: [ids[key] for key in keys] for role, keys in named.items()}
        report_outcome(ReportOutcomeInput(outcome=outcome, **named_ids), runtime, caller(session))

    recall_in("ses_1", "postgres pool", 2)  # pool, port
    report("ses_1", "failure", misleading_ids=["pool", "port"])  # pool, port: 0.85
    recall_in("ses_2", "postgres pool", 2)  # port (0.85) drops below backup: pool, backup
    report("ses_2", "success", helpful_ids=["pool", "backup"])  # pool 1.03, backup 1.15
    recall_in("ses_3", "postgres pool", 2)
    recall_in("ses_4", "postgres note", 1)  # the hostile memory
    report("ses_4", "success", helpful_ids=["hostile"])  # hostile: 1.15

    flag_old = remember(
        RememberInput(content="Feature flag checkout_v2 is enabled in staging"), runtime, caller("ses_5")
    ).id
    flag_new = remember(
        RememberInput(content="Feature flag checkout_v2 is disabled in staging"), runtime, caller("ses_6")
    ).id
    billing = remember(
        RememberInput(content="We use Postgres for the billing database"), runtime, caller("ses_7")
    ).id
    switch = remember(
        RememberInput(content="We switched from Postgres to MySQL in March"), runtime, caller("ses_8")
    ).id
    deploy_cursor = remember(
        RememberInput(content="We deploy on Tuesdays."), runtime, caller("ses_9", "cursor")
    ).id
    deploy_claude = remember(RememberInput(content="we deploy on tuesdays"), runtime, caller("ses_10")).id
    again = remember(RememberInput(content=HOSTILE), runtime, caller("ses_11", "cursor"))
    assert again.status == "duplicate" and again.id == ids["hostile"]
    return Sample(ids, retrievals, flag_old, flag_new, billing, switch, deploy_cursor, deploy_claude)


@pytest.fixture
def runtime(tmp_path) -> Runtime:
    """Every feedback step at the spec's EMA, named memories' too: the sample's ranks are worked out by
    hand with it (the named step is tests/retrieval/test_outcomes.py's). Every match above the floor may
    enter a context: the sample's weak matches (backup, 0.21 beside pool's 0.9 for "postgres pool") are
    what the reports reorder, not filler (retrieval/stages/filler.py has its own tests)."""
    from tests.helpers import make_runtime, settings_for

    built = make_runtime(settings_for(tmp_path / "store", feedback_named_alpha=0.2, min_share_of_best=0.0))
    yield built
    built.close()


@pytest.fixture
def sample(runtime: Runtime) -> Sample:
    return build_sample(runtime)


@pytest.mark.slow
def test_feedback_impact_matches_the_ab_rows(runtime, sample):
    rows = [row for rid, _ in sample.retrievals for row in ab_log_rows(runtime.store, SCOPE, rid)]
    deltas = [row.unweighted_rank - row.weighted_rank for row in rows]
    top_ks = dict(sample.retrievals)
    changed = 0
    for rid, top_k in top_ks.items():
        mine = [row for row in rows if row.retrieval_id == rid]
        changed += {r.observation_id for r in mine if r.unweighted_rank < top_k} != {
            r.observation_id for r in mine if r.weighted_rank < top_k
        }

    feedback = build_report(runtime, SCOPE).feedback

    assert (feedback.retrievals, feedback.candidates) == (4, len(rows))
    assert feedback.retrievals_top_k_changed == changed
    assert feedback.mean_abs_delta == pytest.approx(sum(map(abs, deltas)) / len(deltas))
    assert {(b.delta, b.count) for b in feedback.delta_histogram} == set(Counter(deltas).items())
    assert sum(p.count for p in feedback.rank_points) == len(rows)
    assert feedback.moved_candidates == sum(1 for delta in deltas if delta)
    # By hand, from the recalls' scores (the cat is below the relevance floor: 4 + 4 + 4 + 3 candidates):
    # the first ran on neutral weights; in the second and third, port (0.3692 x 0.85 = 0.3138) fell below
    # backup (0.3365, then 0.3365 x 1.15): the top 2 changed; in the fourth (top 1 stays the hostile memory)
    # pool (0.4458 x 1.0) passed port (0.4525 x 0.9082, its misleading step for "postgres note", about half
    # as close to "postgres pool" as that query itself). Pool's reports are set apart there, its helpful one
    # and with it its misleading one: it says "pool", and the hostile memory says "note" and as many of the
    # query's words.
    assert (feedback.candidates, feedback.moved_candidates, changed, feedback.retrievals_reordered) == (
        15,
        6,
        2,
        3,
    )
    assert feedback.mean_abs_delta == pytest.approx(6 / 15)
    assert [(b.delta, b.count) for b in feedback.delta_histogram] == [(-1, 3), (0, 9), (1, 3)]
    assert [(m.id, m.total_abs_delta, m.lifted, m.lowered) for m in feedback.most_moved] == [
        (sample.ids["port"], 3, 0, 3),
        (sample.ids["backup"], 2, 2, 0),
        (sample.ids["pool"], 1, 1, 0),
    ]
    backup = feedback.most_moved[1]
    assert (backup.preview, backup.appearances, backup.mean_delta) == (TEXTS["backup"], 4 - 1, 2 / 3)
    assert backup.weight == pytest.approx(1.15)


@pytest.mark.slow
def test_weight_history_starts_at_neutral_and_follows_each_report(runtime, sample):
    feedback = build_report(runtime, SCOPE).feedback
    histories = {h.id: [round(p.weight, 6) for p in h.points] for h in feedback.weight_histories}
    # alpha 0.2 towards 0.25 (failure) or 1.75 (success): 0.8 x 1.0 + 0.05 = 0.85; 0.8 x 0.85 + 0.35 = 1.03
    assert histories == {
        sample.ids["pool"]: [1.0, 0.85, 1.03],
        sample.ids["port"]: [1.0, 0.85],
        sample.ids["backup"]: [1.0, 1.15],
        sample.ids["hostile"]: [1.0, 1.15],
    }
    assert feedback.weight_histories[0].id == sample.ids["pool"]  # moved 0.15 + 0.18, the most
    assert feedback.weight_histories[0].movement == pytest.approx(0.33)
    events = runtime.store.weight_events(SCOPE, sample.ids["pool"])
    assert [p.session_id for p in feedback.weight_histories[0].points] == [None, "ses_1", "ses_2"]
    assert [p.at for p in feedback.weight_histories[0].points][1:] == [
        e.at.isoformat().replace("+00:00", "Z") for e in events
    ]
    # ses_1: pool, port; ses_2: pool, backup; ses_4: hostile
    assert (feedback.weight_events, feedback.memories_with_weight_events) == (5, 4)
    # The legend's figure is every step's size added up, and says so beside where the weight started.
    page = render_report(build_report(runtime, SCOPE))
    assert f"{sample.ids['pool']}</code> 2 reports moved it 0.330 in all, now 1.030 (from 1.000)" in page


@pytest.mark.slow
def test_a_purged_memory_is_shown_as_purged_not_as_missing(runtime, sample):
    from tools.forget import ForgetInput, forget

    forget(ForgetInput(memory_id=sample.ids["port"], mode="purge"), runtime, caller("ses_w"))
    feedback = build_report(runtime, SCOPE).feedback
    [port] = [h for h in feedback.weight_histories if h.id == sample.ids["port"]]
    assert (port.status, port.preview) == ("purged", "[purged]")
    page = render_report(build_report(runtime, SCOPE))
    assert "not in the store" not in page and "postgres runs on port" not in page


@pytest.mark.slow
def test_most_moved_limits_the_memories_shown(runtime, sample):
    feedback = build_report(runtime, SCOPE, most_moved=1).feedback
    assert [h.id for h in feedback.weight_histories] == [sample.ids["pool"]]
    assert len(feedback.most_moved) == 1


@pytest.mark.slow
def test_a_memory_private_to_an_agent_never_reaches_the_report(runtime):
    secret = "the acquisition codename is NIGHTJAR"
    shared = remember(RememberInput(content="the acquisition closes in May"), runtime, caller("s1")).id
    private = remember(RememberInput(content=secret, visibility="agent"), runtime, caller("s1")).id
    found = recall(RecallInput(query="acquisition codename closes"), runtime, caller("s1"))
    assert {m.id for m in found.memories} == {shared, private}
    report_outcome(
        ReportOutcomeInput(outcome="success", helpful_ids=[shared, private]), runtime, caller("s1")
    )
    report = build_report(runtime, SCOPE)
    assert [h.id for h in report.feedback.weight_histories] == [shared]
    assert private not in {m.id for m in report.feedback.most_moved}
    # Its counts are of what it shows (a trial read "2 weight changes on 2 memories" above one).
    assert (report.feedback.weight_events, report.feedback.memories_with_weight_events) == (1, 1)
    page = render_report(report)
    assert private not in page and "NIGHTJAR" not in page


@pytest.mark.slow
def test_only_the_newest_retrievals_are_analysed(runtime, sample):
    feedback = build_report(runtime, SCOPE, retrievals=1).feedback
    newest, top_k = sample.retrievals[-1]
    rows = ab_log_rows(runtime.store, SCOPE, newest)
    # The "postgres note" recall: 3 candidates; pool passed port, but the top 1 stayed the hostile memory.
    assert (top_k, feedback.retrievals, feedback.candidates, len(rows)) == (1, 1, 3, 3)
    assert (feedback.retrievals_reordered, feedback.retrievals_top_k_changed) == (1, 0)
    assert feedback.first_at == feedback.last_at


@pytest.mark.slow
def test_drift_lists_the_open_contradiction_and_what_the_revision_replaced(runtime, sample):
    view = build_report(runtime, SCOPE).drift
    assert view.open_contradictions == 1
    pair = view.contradictions[0]
    assert (pair.older.id, pair.newer.id, pair.status) == (sample.flag_old, sample.flag_new, "open")
    assert pair.newer.preview == "Feature flag checkout_v2 is disabled in staging"
    revisions = [(c.event.action, c.replaced.id, c.by.id) for c in view.changes if c.replaced and c.by]
    assert ("revise", sample.billing, sample.switch) in revisions


@pytest.mark.slow
def test_clusters_show_the_agents_and_boost_of_corroborated_memories(runtime, sample):
    section = build_report(runtime, SCOPE).corroboration
    by_canonical = {cluster.canonical_id: cluster for cluster in section.shown}
    deploy = by_canonical[sample.deploy_cursor]  # equal weights: the earlier one is canonical
    assert (deploy.size, deploy.agents, deploy.corroboration_score) == (2, ["cursor", "claude-code"], 1)
    assert deploy.boost == pytest.approx(0.1)
    assert [m.id for m in deploy.members] == [sample.deploy_cursor, sample.deploy_claude]
    hostile = by_canonical[sample.ids["hostile"]]  # stored once, restated by cursor: an attestation
    assert (hostile.size, hostile.agents, hostile.members[0].preview) == (
        1,
        ["claude-code", "cursor"],
        HOSTILE,
    )
    assert section.clusters == len(section.shown) and section.corroborated == section.clusters
    # The pass behind them, with the source documents' names: the same counts, over the 10 active memories.
    last = section.aggregation
    assert (last.clusters, last.corroboratedCount, last.rows) == (section.clusters, section.corroborated, 10)


@pytest.mark.slow
def test_health_counts_the_scope_memories_and_every_table(runtime, sample):
    health = build_report(runtime, SCOPE).health
    # 5 + 2 flags + billing (superseded by the switch) + switch + 2 deploys; the hostile restatement is no row.
    assert health.memories == 11
    assert health.by_status == {"active": 10, "superseded": 1}
    assert health.by_kind == {"fact": 10} and health.by_tier == {"standard": 10}  # the active ones
    assert health.by_embedder == {runtime.models.embedder.name: 11}
    tables = {table.name: table for table in health.tables}
    assert tables["memories_v4"].rows == runtime.store.count_memories() == 11
    assert tables["weight_events"].rows == 5
    assert all(table.disk_bytes and table.disk_bytes >= table.data_bytes for table in health.tables)


@pytest.mark.slow
def test_header_fields_and_progress(runtime, sample):
    seen = []
    data = build_report(runtime, SCOPE, progress=lambda label, done, total: seen.append((label, done, total)))
    assert (data.org_id, data.project_id, data.store_uri) == ("default", "default", runtime.store.uri)
    assert data.backends == runtime.backends
    assert [entry for entry in seen if entry[1] == entry[2]] == [
        ("feedback impact", 1, 1),
        ("drift", 1, 1),
        ("corroboration clusters", 1, 1),
        ("store health", 1, 1),
    ]


@pytest.mark.slow
def test_the_page_shows_hostile_memory_text_as_text(runtime, sample):
    page = render_report(build_report(runtime, SCOPE))
    assert "<img" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert page.count("<script") == 1  # the page's own sorting script
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert _tags_and_handlers(page)[1] == []


def test_an_empty_scope_renders_how_to_get_data_instead_of_charts(runtime):
    data = build_report(runtime, Scope("nobody", "nothing"))
    assert data.feedback.retrievals == 0 and data.health.memories == 0
    page = render_report(data)
    assert page.count("Nothing yet") == 5  # recalls, weights, drift, clusters, memories of the scope
    assert 'id="feedback"' in page and "<svg" in page  # the store's table charts still draw


def test_retrievals_must_be_positive(runtime):
    with pytest.raises(ValueError, match="retrievals must be >= 1, but got 0"):
        build_report(runtime, SCOPE, retrievals=0)


# ---------------------------------------------------------------------------------------- escaping, fuzzed


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def _tags_and_handlers(page: str) -> tuple[set[str], list[str]]:
    collector = _Collector()
    collector.feed(page)
    return collector.tags, collector.handlers


@pytest.fixture(scope="module")
def page_of_the_sample(tmp_path_factory):
    from tests.helpers import make_runtime, settings_for

    runtime = make_runtime(settings_for(tmp_path_factory.mktemp("fuzz") / "store"))
    try:
        build_sample(runtime)
        return build_report(runtime, SCOPE)
    finally:
        runtime.close()


MARKUP = st.text(alphabet=st.sampled_from(list("<>\"'&=/ ;:()`ascriptimgonerrorsvg")), max_size=40)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=MARKUP)
def test_no_text_anywhere_in_the_data_adds_markup(page_of_the_sample, text):
    """Every string of the data replaced by fuzzed markup: the page has the same elements and no handlers."""
    baseline, _ = _tags_and_handlers(render_report(page_of_the_sample))
    hostile = _replace_strings(page_of_the_sample.model_dump(), text)
    page = render_report(type(page_of_the_sample).model_validate(hostile))
    tags, handlers = _tags_and_handlers(page)
    assert handlers == [] and tags <= baseline
    assert page.count("<script") == 1


def test_control_characters_in_the_data_are_written_as_the_terminal_shows_them(page_of_the_sample):
    """A new user's trial found a memory's escape and bell raw in the page; the CLI writes <U+001B>."""
    hostile = _replace_strings(page_of_the_sample.model_dump(), "\x1b[31m\x07")
    page = render_report(type(page_of_the_sample).model_validate(hostile))
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", page)
    assert "&lt;U+001B&gt;[31m&lt;U+0007&gt;" in page


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT")


def _replace_strings(value, text):
    if isinstance(value, dict):
        return {key: _replace_strings(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_strings(item, text) for item in value]
    if isinstance(value, str) and not TIMESTAMP.match(value):  # times must stay parseable
        return text + value
    return value


def test_weight_changes_count_only_the_reports_that_moved_a_weight(runtime):
    """A trial: a partial outcome (its target is the starting weight) wrote events that moved nothing, and
    the report counted them as weight changes."""
    remember(RememberInput(content="The cache is Redis 7 on port 6380"), runtime, caller("ses_a"))
    recall(RecallInput(query="redis cache port"), runtime, caller("ses_a"))
    report_outcome(ReportOutcomeInput(outcome="partial"), runtime, caller("ses_a"))
    assert runtime.store.weight_events(SCOPE, runtime.store.list_memories(SCOPE, limit=1)[0].id)  # written
    feedback = build_report(runtime, SCOPE).feedback
    assert (feedback.weight_events, feedback.memories_with_weight_events) == (0, 0)


def test_a_report_on_an_empty_scope_names_the_scopes_that_hold_memories(runtime):
    """A trial ran the report on the default scope of a store whose memories were all in org acme."""
    remember(
        RememberInput(content="The API uses port 5433", org_id="acme", project_id="api"), runtime, caller("s")
    )
    remember(RememberInput(content="All services log in UTC", visibility="org"), runtime, caller("s"))
    report = build_report(runtime, SCOPE)  # the org's shelf is no scope to report on: not named
    assert report.health.memories == 0 and report.health.elsewhere == ["acme/api"]
    page = render_report(report)
    assert "these scopes of the store do: acme/api." in page


def test_the_weight_legend_counts_only_the_reports_that_moved_the_weight():
    # A review: a report writes a weight event for every memory it credits, moved or not.
    from console.report_page import _reports_moved

    t = datetime(2026, 12, 1, tzinfo=UTC)
    line = [(t, 1.0, None), (t, 0.85, "ses_1"), (t, 0.85, "ses_2"), (t, 1.03, "ses_3")]
    assert _reports_moved(line) == "2 reports"
    assert _reports_moved(line[:2]) == "1 report"
