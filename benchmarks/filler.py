"""Filler beside the best match: what recall shows of a small store of developer facts, per share of the
best match's score under which a memory is left out (``MEMORIA_MIN_SHARE_OF_BEST``).

    python -m benchmarks.filler [--embedding-model FOLDER]

LoCoMo is chit-chat: its questions' evidence often ranks far below their best match, so it tells what a
share costs (the quality benchmark with ``--set MEMORIA_MIN_SHARE_OF_BEST=...``). A developer's store is
the other case: thirty unrelated facts of one team, where a query has one or two answers and every other
memory that passes the relevance floor is filler. Each query below names the facts that answer it (none
for a question the store cannot answer); each share is measured through the recall tool on a fresh store
with top_k 10: the memories shown, how many answer the query, and the answers missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.quality import base_settings, model_settings, say
from benchmarks.reporting import RESULTS, write_json

FACTS = (
    "Deploys to production go through the release pipeline: run `make release` then approve in Spinnaker.",
    "The billing service talks to Postgres on port 5433 in staging, not the default 5432.",
    "Web tests run with `npm run test:web`; they need Chrome installed locally.",
    "The CI timeout is 45 minutes; long integration suites must be split into shards.",
    "Alice owns the terraform state bucket and approves changes to it.",
    "TLS certificates are rotated by cert-manager every 60 days; never rotate them by hand.",
    "The public API is rate limited to 100 requests per minute per token.",
    "Feature flags live in LaunchDarkly; the production environment key is in 1Password.",
    "Python 3.11 is required by the deploy script because it uses tomllib.",
    "The payment webhook retries 5 times with exponential backoff starting at 2 seconds.",
    "Use `poetry install --with dev` to set up the backend repository.",
    "The staging database is reset every Sunday night at 02:00 UTC.",
    "Logs are shipped to Datadog; search them with service:billing env:prod.",
    "Bob prefers small pull requests under 400 lines, reviewed within a day.",
    "The mobile app uses React Native 0.72 and builds with Expo EAS.",
    "Secrets must never be committed; the pre-commit hook runs gitleaks.",
    "Redis is used as the session store; keys expire after 24 hours.",
    "The frontend is deployed to Vercel on every merge to main.",
    "On arm64 runners the CI fails because the grpcio wheel is missing; pin grpcio 1.59.",
    "Kubernetes ingress is nginx, configured through the ingress-nginx Helm chart values in infra/helm.",
    "The search service uses Elasticsearch 8 with an index per tenant.",
    "Database migrations are written with Alembic and run automatically on deploy.",
    "On-call rotation changes every Monday at 10:00; the schedule is in PagerDuty.",
    "The design system components live in packages/ui and use Tailwind.",
    "Load tests are run with k6 from the perf/ folder against the staging cluster.",
    "Error budgets: the API's SLO is 99.9% availability over 30 days.",
    "The user prefers tabs over spaces in Go code and gofmt on save.",
    "S3 bucket acme-uploads stores user uploads; objects move to Glacier after 90 days.",
    "The GraphQL gateway is Apollo Router, configured in gateway/router.yaml.",
    "Weekly product demo is on Thursdays at 15:00 in the big meeting room.",
)
# A query, and the indexes in FACTS of the facts that answer it.
QUERIES: dict[str, tuple[int, ...]] = {
    "how do I run the web tests": (2,),
    "how do I deploy to production": (0, 21),
    "what port does postgres use in staging": (1,),
    "why does CI fail on arm64": (18,),
    "who owns the terraform state": (4,),
    "how are TLS certificates rotated": (5,),
    "what is the API rate limit": (6,),
    "where are feature flags configured": (7,),
    "how long do redis sessions last": (16,),
    "when is the staging database reset": (11,),
    "how do I set up the backend": (10,),
    "what does the mobile app use": (14,),
    "ship a new version to prod": (0,),
    "what are the code review preferences": (13,),
    "how do I find billing logs": (12,),
    "what is the office wifi password": (),
    "who is the CEO of the company": (),
    "what's the recipe for banana bread": (),
}
SHARES = (0.0, 0.2, 0.25, 0.3, 0.4)


def measure(settings: Any) -> dict[str, Any]:
    """Store FACTS, recall every query; what was shown, per query and in all."""
    from server.state import build_runtime
    from tools.common import Caller
    from tools.recall import RecallInput, recall
    from tools.remember import RememberInput, remember

    runtime = build_runtime(settings)
    try:
        writer = Caller("benchmark", "facts")
        ids = [remember(RememberInput(content=fact), runtime, writer).id for fact in FACTS]
        shown = answers = missed = unanswerable_empty = 0
        rows = []
        for index, (query, wanted) in enumerate(QUERIES.items()):
            out = recall(RecallInput(query=query, top_k=10), runtime, Caller("benchmark", f"q{index}"))
            got = [ids.index(memory.id) for memory in out.memories if memory.id in ids]
            shown += len(got)
            answers += sum(1 for fact in got if fact in wanted)
            missed += sum(1 for fact in wanted if fact not in got)
            unanswerable_empty += not wanted and not got
            rows.append({"query": query, "shown": got, "answers": list(wanted)})
        return {
            "backend": runtime.backends["embedder"],
            "shown": shown,
            "answers shown": answers,
            "filler shown": shown - answers,
            "answers missed": missed,
            "unanswerable answered with nothing": unanswerable_empty,
            "unanswerable": sum(1 for wanted in QUERIES.values() if not wanted),
            "queries": rows,
        }
    finally:
        runtime.close()


def run(use_models: bool, extra: dict[str, str]) -> dict[str, Any]:
    found = {}
    with tempfile.TemporaryDirectory(prefix="memoria-filler-") as tmp:
        for share in SHARES:
            settings = base_settings(
                Path(tmp) / f"share-{share}", use_models, extra | {"MEMORIA_MIN_SHARE_OF_BEST": str(share)}
            )
            found[f"{share:g}"] = measure(settings)
            say(f"share {share:g}: done")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embedding-model", type=Path, metavar="FOLDER", help="also measure this local model"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "filler.json")
    args = parser.parse_args(argv)
    runs = {"offline": run(False, {})}
    if args.embedding_model is not None:
        runs["model"] = run(True, model_settings(args.embedding_model))
    for name, by_share in runs.items():
        first = next(iter(by_share.values()))
        print(f"\n{name}: {first['backend']} ({len(QUERIES)} queries, {len(FACTS)} facts, top_k 10)")
        print(
            f"  {'share':<6} {'shown':>6} {'answers':>8} {'filler':>7} {'missed':>7} {'nothing for unanswerable':>25}"
        )
        for share, found in by_share.items():
            print(
                f"  {share:<6} {found['shown']:>6} {found['answers shown']:>8} {found['filler shown']:>7} "
                f"{found['answers missed']:>7} "
                + f"{found['unanswerable answered with nothing']} of {found['unanswerable']}".rjust(25)
            )
    write_json(args.out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
