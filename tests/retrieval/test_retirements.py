from datetime import UTC, datetime, timedelta

import pytest

from retrieval.contradictions import ContradictionInput
from retrieval.retirements import (
    RETIRED,
    SWITCHED_AWAY,
    TIME_MOVED,
    VERSION_MOVED,
    retired_things,
    switched_away,
    things_retired,
    times_moved,
    versions_moved,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(memory_id: str, text: str, minutes: int) -> ContradictionInput:
    return ContradictionInput(memory_id, text, T0 + timedelta(minutes=minutes))


@pytest.mark.parametrize(
    ("text", "thing", "which", "named_alone"),
    [
        # A verb of giving up, then the thing and the use it was given up for.
        (
            "Decision: we're dropping Redis for the job queue and moving it to SQS.",
            "redis",
            {"job", "queue"},
            True,
        ),
        ("We no longer use Jenkins; CI runs on GitHub Actions.", "jenkins", set(), True),
        ("Dropped Jenkins for CI, GitHub Actions runs it now.", "jenkins", {"ci"}, True),
        ("Removed the Redis debug logging from the worker.", "redis debug logging", {"worker"}, True),
        ("Stopped using `make seed`, use the fixtures script.", "make seed", set(), True),
        ("Replaced Jenkins with GitHub Actions.", "jenkins", set(), True),
        ("We moved off Heroku in March.", "heroku", set(), True),  # (a time is no use of it)
        ("We moved CI off CircleCI last week.", "circleci", {"ci"}, True),  # what was moved is the use
        ("We moved it off Heroku.", "heroku", set(), True),
        # The thing, then that it is gone.
        ("The billing API port changed to 9443; 8443 is gone.", "8443", set(), True),
        ("We deploy with Argo CD now. make deploy is deprecated.", "make deploy", set(), True),
        ("The nightly export was removed.", "nightly export", set(), True),
        ("make deploy is deprecated for the API; use argocd.", "make deploy", {"api"}, True),
        ("The limit was removed.", "limit", set(), False),  # a plain word: not named alone
    ],
)
def test_a_thing_said_to_be_given_up_is_read_with_the_use_it_was_given_up_for(
    text, thing, which, named_alone
):
    [retired] = retired_things(text)
    assert (retired.thing, set(retired.which), retired.named_alone) == (thing, which, named_alone)


@pytest.mark.parametrize(
    "text",
    [
        "We should drop Redis.",  # planned
        "We plan to remove the nightly export.",
        "Did we drop Redis?",  # asked
        "If we remove the cache, builds slow down.",  # a condition
        "We're not dropping Redis.",  # denied
        "Never drop the users table in staging.",
        "Dan replaced Priya as the on-call lead.",  # a role handed over: role_holders reads it
        "We dropped by the office.",  # no thing
        "Wow, what a chilled-out sunset vibe!",  # "sunset" is no verb here
        # Instructions, advice and to-dos are no report of what was done (a review).
        "Before deploying, remove the debug flag.",
        "TODO: remove the debug flag before the release.",
        "Remember to remove the debug flag before the release.",
        "When the build fails, drop the Docker cache and rerun.",
        "Tip: removing node_modules and reinstalling fixes the esbuild error.",
        "Dropped the kids at school.",  # dropped off
    ],
)
def test_a_giving_up_planned_asked_conditional_or_denied_gives_nothing_up(text):
    assert retired_things(text) == ()


@pytest.mark.parametrize(
    ("older_text", "newer_text", "thing"),
    [
        (
            "We use Redis for the job queue (redis-queue.internal:6379).",
            "Decision: we're dropping Redis for the job queue and moving it to SQS (queue harbor-jobs-prod).",
            "redis",
        ),
        (
            "Heads up: billing API moved to port 8443 after the TLS change.",
            "The billing API port changed to 9443 after the service mesh migration; 8443 is gone.",
            "8443",
        ),
        (
            "To deploy, run `make deploy ENV=staging` from the repo root; prod needs a second approver.",
            "We deploy with Argo CD now: merge to main and argocd syncs the app. make deploy is deprecated.",
            "make deploy",
        ),
        ("We use Jenkins for CI.", "Dropped Jenkins for CI, GitHub Actions runs it now.", "jenkins"),
        (
            "The nightly export writes to the reports bucket.",
            "The nightly export was removed.",
            "nightly export",
        ),
        ("We use Jenkins for CI.", "Jenkins is gone.", "jenkins"),  # a name said to be gone, that was used
        # Forms a blind test of 60 changes found unread.
        (
            "Our CI runs on CircleCI; the config lives in .circleci/config.yml.",
            "We moved CI off CircleCI to GitHub Actions last week.",
            "circleci",
        ),
        (
            "We use Jest for JavaScript unit tests.",
            "Jest has been replaced by Vitest across the repo.",
            "jest",
        ),
    ],
)
def test_an_older_memory_that_uses_what_a_newer_one_gave_up_is_disputed(older_text, newer_text, thing):
    [found] = things_retired(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (found.older_id, found.newer_id, found.older_term) == ("old", "new", thing)
    assert found.only_disputes == RETIRED and not found.covers_older  # the rest it says may still hold


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        # Given up for another use.
        (
            "We use Redis for the session cache.",
            "We're dropping Redis for the job queue and moving it to SQS.",
        ),
        ("We use make deploy to ship the docs site.", "make deploy is deprecated for the API; use argocd."),
        # Not said word for word by the older one.
        ("Redis runs on redis.internal:6379.", "Removed the Redis debug logging from the worker."),
        ("The runner pool has 8 machines.", "The old runner pool is gone."),
        # A plain word given up, with nothing else in common.
        ("The upload size limit is 10 MB.", "The limit was removed."),
        # The older one gave it up already, or denies it.
        ("We switched from Jenkins to GitHub Actions.", "Jenkins is gone."),
        ("We don't use Jenkins anymore.", "Jenkins is gone."),
        # The use said after the thing, after "and" or as a purpose; an identifier kept whole (a review).
        ("Priya reviews all database migrations.", "Removed Priya and Dan from the reviewers list."),
        ("Use the VPN to reach the prod database.", "We no longer need the VPN to reach staging."),
        ("The ingest worker is pinned to node-7.", "Removed the worker from node-3."),
        # A value, or a name said to be gone, needs more in common.
        (
            "The admin console uses port 8443.",
            "The billing API port changed to 9443 after the service mesh migration; 8443 is gone.",
        ),
        ("Mom makes the best lasagna.", "Mom is gone now, she left for the airport."),
        # What was moved off it, or where it was replaced, is the use.
        ("We use CircleCI for the mobile app.", "We moved CI off CircleCI to GitHub Actions."),
        ("We use Jest for the docs site.", "Jest has been replaced by Vitest in the API."),
        # Said again by the newer one itself.
        (
            "We use Redis for the job queue.",
            "Dropped Redis for the job queue, Redis stays for the job queue cache.",
        ),
    ],
)
def test_a_thing_given_up_for_another_use_or_not_said_by_the_older_disputes_nothing(older_text, newer_text):
    assert things_retired(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_only_an_older_memory_is_outdated_by_a_giving_up():
    newer_first = memory("old", "The nightly export was removed.", 0)
    assert things_retired(newer_first, [memory("new", "The nightly export writes to S3.", 5)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text", "was", "now"),
    [
        ("we use Postgres for billing", "We switched billing to MySQL", "postgres", "mysql"),
        ("We use Redis for the queue.", "Switched the queue to SQS.", "redis", "sqs"),
        ("The job queue runs on Redis.", "We moved the job queue over to SQS.", "redis", "sqs"),
        # Said of the thing first, a version after the name (trial 184: left unlinked, the older first).
        (
            "The orders database is hosted on MySQL 5.7.",
            "The orders database was migrated to Postgres 15.",
            "mysql",
            "postgres",
        ),
        ("CI runs on Jenkins.", "Our CI has been moved to GitHub Actions.", "jenkins", "github actions"),
        (
            "The orders database is hosted on MySQL 5.7.",
            "Last week, the orders database was migrated to Postgres 15.",
            "mysql",
            "postgres",
        ),
    ],
)
def test_a_switch_that_names_only_what_it_switched_to_disputes_what_the_older_used(
    older_text, newer_text, was, now
):
    [found] = switched_away(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (found.older_term, found.newer_term, found.only_disputes) == (was, now, SWITCHED_AWAY)


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Billing emails come from Stripe.", "We switched billing to MySQL"),  # not what billing uses
        ("We use Postgres and Redis for billing.", "We switched billing to MySQL"),  # two things used
        ("We use Redis for the session cache.", "Switched the queue to SQS."),  # another thing
        ("We use MySQL for billing.", "We switched billing to MySQL."),  # the same one
        ("We use Postgres for billing.", "We should switch billing to MySQL."),  # planned
        ("We use Postgres for billing. It runs 16.", "We switched billing to MySQL."),  # says more
        ("We use Postgres for billing.", "We switched billing from Oracle to MySQL."),  # names another
        # Not a tie of use, or switched to no name (a review).
        ("The API is written in Go.", "Migrated the API to Kubernetes."),
        ("The release runs on Jenkins.", "Moved the release to Friday."),
        ("The kids are with Grandma this week.", "We moved the kids to a new school."),
        ("The logger ships logs via Fluentd.", "Switched the logger to JSON output."),
        ("The billing database is hosted on MySQL 5.7.", "The orders database was migrated to Postgres 15."),
        ("The release runs on Jenkins.", "The release was moved to Friday."),
        ("The logs are stored on GCS.", "All the data was migrated to S3."),
        ("We use Postgres for billing.", "Billing will be migrated to MySQL."),  # planned
        # what the sentence opens with was moved, not the thing named inside it (a review)
        ("The checkout service runs on AWS.", "Traffic for the checkout service was moved to Cloudflare."),
        (
            "The payments service runs on Kubernetes.",
            "The logs of the payments service were moved to Datadog.",
        ),
        (
            "The orders database is hosted on MySQL 5.7.",
            "Monitoring for the orders database was migrated to Grafana Cloud.",
        ),
    ],
)
def test_a_switch_to_another_leaves_an_older_memory_it_does_not_tie_to_one_thing(older_text, newer_text):
    assert switched_away(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text", "was", "now"),
    [
        (
            "We pin pydantic to 2.7 for now because of the settings migration.",
            "Bumped pydantic to 2.9 now that the settings migration is done.",
            "2.7",
            "2.9",
        ),
        ("The frontend uses Node 18 and pnpm 8.", "Upgraded Node to 20.", "18", "20"),
        ("pydantic==2.7 is pinned in requirements.txt, see PR 42.", "Bumped pydantic to 2.9.", "2.7", "2.9"),
        ("We run Postgres 14 in prod.", "Upgraded prod Postgres to 16.", "14", "16"),
        ("We're on pydantic 2.7.", "pydantic upgraded to 2.9.", "2.7", "2.9"),
        (
            "The project is pinned to Python 3.10.",
            "Bumped the project to Python 3.12 this morning.",
            "3.10",
            "3.12",
        ),
        ("We use React 17 in the dashboard frontend.", "The dashboard was upgraded to React 18.", "17", "18"),
        # Two words before "to", the second the kind of thing it runs on (a trial saw the pair left unmarked).
        (
            "We deploy on Kubernetes 1.27 on GKE.",
            "We upgraded the GKE clusters to Kubernetes 1.30.",
            "1.27",
            "1.30",
        ),
    ],
)
def test_a_version_moved_in_words_disputes_an_older_memory_that_says_more_beside_the_old_version(
    older_text, newer_text, was, now
):
    [found] = versions_moved(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (found.older_term, found.newer_term, found.only_disputes) == (was, now, VERSION_MOVED)


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("We use pydantic 2.7 in the API and pydantic 1.10 in the worker.", "Bumped pydantic to 2.9."),  # two
        ("We use pydantic 2.9 with ruff 0.5.", "Bumped pydantic to 2.9."),  # the same version
        ("We use pydantic 2.7.", "We might bump pydantic to 2.9."),  # planned
        ("We use pydantic 2.7.", "Bumped pydantic from 2.5 to 2.9."),  # names another: the switch rule's
        ("Sprint 14 ends Friday.", "Moved sprint planning to 15:00."),  # no version moved
        # Moved somewhere else, a fact about a version, an instruction (a review).
        ("The backend runs Node 18.", "Updated Node to 20 in the frontend."),
        ("The release builds use Python 3.10.", "Bumped the docs to Python 3.12."),
        ("numpy 2.0 breaks the ingest script.", "Pinned numpy to 1.26."),
        ("The frontend uses Node 18.", "Upgrade Node to 20 before running the e2e suite."),
        ("The prod servers run Node 18.", "We upgraded the staging servers to Node 20."),
        # A kind of host alone, or after "on the", still names where (a review).
        ("Our laptops use Ubuntu 22.04.", "Upgraded the servers to Ubuntu 24.04."),
        ("Local dev uses Postgres 14 via docker compose.", "Upgraded Postgres to 16 on the cluster."),
        ("Minikube for local dev uses Kubernetes 1.27.", "We upgraded both clusters to Kubernetes 1.30."),
    ],
)
def test_a_version_moved_leaves_an_older_memory_with_another_or_no_single_version(older_text, newer_text):
    assert versions_moved(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text", "was", "now"),
    [
        (
            "The staging database is wiped and reseeded every Sunday at 02:00 UTC.",
            "Staging DB reset moved to Saturdays at 03:00 UTC so it doesn't clash with the Sunday batch.",
            "02:00 sunday",
            "03:00 saturday",
        ),
        ("Daily standup is at 9:30.", "Standup moved to 10:00.", "9:30", "10:00"),
        (
            "The release freeze starts on Wednesday.",
            "Release freeze was pushed to Thursday.",
            "wednesday",
            "thursday",
        ),
        # The day moved; the time of day may hold.
        ("Planning is on Monday at 10:00.", "Planning moved to Tuesday.", "monday", "tuesday"),
        (
            "Daily standup is at 9:30.",
            "The daily standup has been rescheduled to 10:15 starting next week.",
            "9:30",
            "10:15",
        ),
        (
            "Team standup is at 9:30 every weekday.",
            "Standup has been moved to 10:15 starting this week.",
            "9:30",
            "10:15",
        ),
    ],
)
def test_a_time_moved_in_other_words_disputes_the_older_memory_that_gives_the_time(
    older_text, newer_text, was, now
):
    [found] = times_moved(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (found.older_term, found.newer_term, found.only_disputes) == (was, now, TIME_MOVED)


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        (
            "The staging database is reset every Saturday.",
            "The staging cache flush moved to Sundays.",
        ),  # another
        ("Sprint planning is on Wednesdays at 11:00.", "The sprint demo moved to Friday."),
        ("Standup notes go to #eng by 9:30.", "Standup moved to 10:00."),  # not when standup is
        ("We shipped 3 releases on Friday.", "The release moved to Monday."),
        (
            "The release freeze starts in December.",
            "Release freeze moved to 17:00.",
        ),  # a time of another kind
        ("Standup is at 9:30.", "If standup moved to 10:00, tell me."),  # a condition
        ("Standup is at 9:30.", "Standup moved from 9:00 to 10:00."),  # names another: the switch rule's
        # Moved to a place, or for one time only (a review).
        ("Priya is on vacation until Friday.", "Priya moved to the platform team on Monday."),
        ("My sister is visiting on Sunday.", "My sister moved to Ohio in March."),
        ("Daily standup is at 9:30.", "Standup moved to 10:00 tomorrow."),
        # Another team's (a new user's trial): its own word right before the words the two share.
        ("The platform team standup is at 10:00.", "The data team standup moved to 09:45."),
    ],
)
def test_a_time_moved_leaves_an_older_memory_about_another_thing_or_time(older_text, newer_text):
    assert times_moved(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []
