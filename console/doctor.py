"""``memoria doctor``: checks the store, its tables and indexes, which models load and which backend is
active, and the HTTP credentials, and says how to fix what is wrong. ``fix=True`` also does the part it
can do itself (compacting piled-up appends, folding new rows into the indexes, building the vector index).

Each check is independent: a store that does not open is reported, and the model checks still run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from console.terminal import ticking
from retrieval.models.embedders.sentence_transformers import local_model_folder
from retrieval.models.model_files import short_reason
from server.config import ConfigError, Settings, local_store_folder
from server.state import model_config, open_store
from tools.common import Progress, no_progress

if TYPE_CHECKING:
    from storage.store import MemoryStore

Status = Literal["ok", "warn", "fail", "fixed"]
LOW_DISK_BYTES = 1 << 30


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


def diagnose(settings: Settings, *, fix: bool = False, progress: Progress = no_progress) -> list[Check]:
    checks: list[Check] = []
    steps: list[Callable[[], list[Check]]] = []
    store: MemoryStore | None = None
    local = local_store_folder(settings.db_uri)
    if local is not None and not local.is_file() and not _holds_a_store(local):
        # Diagnosing makes nothing: the default folder (or an empty one) has no store until first use (a
        # trial: doctor on a fresh machine made the ten tables it then reported as fine).
        checks.append(
            Check(
                "store",
                "ok",
                f"no store at {settings.db_uri} yet: `memoria serve`, or a first `memoria remember`, makes "
                "it there (doctor makes none)",
            )
        )
    else:
        try:
            progress("opening the store", 0, 1)
            store = open_store(settings)
            checks.append(
                Check(
                    "store",
                    "ok",
                    f"{settings.db_uri} opens (schema version {store.schema_version}, {store.vector_dim}-d vectors)",
                )
                if store.upgraded_from is None
                else Check(
                    "store",
                    "warn",
                    f"{settings.db_uri} was at schema version {store.upgraded_from}, an older release's, and was "
                    f"upgraded to {store.schema_version} as it opened ({store.vector_dim}-d vectors)",
                    "stop any server of an older release still running on this store (its writes now fail), "
                    "upgrade it and start it again",
                )
            )
        except Exception as exc:
            # A file is said so by the folder check below; the store's own message would name MEMORIA_DB_URI
            # and say the folder is made if missing, whichever way the path was given (a trial's --db).
            afile = local is not None and local.is_file()
            checks.append(
                Check(
                    "store",
                    "fail",
                    f"{settings.db_uri} does not open: "
                    + ("it is a file, not a store's folder" if afile else str(exc)),
                    "point --db or MEMORIA_DB_URI at a store's folder (a command with --create makes a new one)"
                    if afile
                    else "set MEMORIA_DB_URI to a writable folder (or a LanceDB URI with credentials in "
                    "MEMORIA_STORAGE_OPTIONS), or pass --db",
                )
            )
    try:
        checks += _local_folder(settings)
        if store is not None:
            steps = [
                lambda: _tables(store, settings, fix, progress),
                lambda: _models_and_vectors(store, settings),
            ]
        else:
            steps = [lambda: _models_and_vectors(None, settings)]
        for done, step in enumerate(steps, start=1):
            try:
                checks += step()
            except Exception as exc:  # one check failing must not hide the others
                checks.append(
                    Check(
                        "check",
                        "fail",
                        f"a check could not run: {short_reason(exc)}",
                        "see the server's stderr log",
                    )
                )
            progress("checking", done, len(steps))
        checks += _http_credentials(settings)
        checks += _llm_stages(settings)
    finally:
        if store is not None:
            store.close()
    return checks


def _holds_a_store(folder: Path) -> bool:
    """Whether ``folder`` holds a store's tables (a folder of LanceDB tables)."""
    try:
        return folder.is_dir() and any(entry.name.endswith(".lance") for entry in folder.iterdir())
    except OSError:
        return True  # unreadable: opening it says why


def _local_folder(settings: Settings) -> list[Check]:
    from storage.recovery import QUARANTINE_DIR

    if "://" in settings.db_uri and not settings.db_uri.startswith("file://"):
        return [Check("folder", "ok", "object storage: no local folder to check")]
    folder = Path(settings.db_uri.removeprefix("file://")).expanduser()
    checks = []
    if folder.is_file():
        checks.append(
            Check(
                "folder",
                "fail",
                f"{folder} is a file, not a folder",
                "point --db or MEMORIA_DB_URI at a folder",
            )
        )
    elif folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        checks.append(
            Check("folder", "fail", f"{folder} is not writable", f"chmod u+w {folder}, or use another --db")
        )
    elif not folder.exists():
        parent = next((up for up in folder.parents if up.exists()), None)
        if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
            checks.append(
                Check(
                    "folder",
                    "fail",
                    f"{folder} does not exist, and {parent} is not writable: no store can be made there",
                    f"chmod u+w {parent}, or use another --db",
                )
            )
        else:
            checks.append(Check("folder", "ok", f"{folder} does not exist yet; it can be made"))
    else:
        checks.append(Check("folder", "ok", f"{folder} is writable"))
    if folder.exists():
        free = shutil.disk_usage(folder).free
        status: Status = "ok" if free >= LOW_DISK_BYTES else "warn"
        checks.append(
            Check(
                "disk",
                status,
                f"{free / (1 << 30):.1f} GiB free",
                None if status == "ok" else "free some disk space",
            )
        )
        quarantine = folder / QUARANTINE_DIR
        if quarantine.exists():
            checks.append(
                Check(
                    "recovery",
                    "warn",
                    f"a crash once left broken table versions; they were set aside in {quarantine} and the store "
                    "opened on the version before",
                    f"nothing to repair; delete {quarantine} once you no longer want the broken files for inspection",
                )
            )
    return checks


def _tables(store: MemoryStore, settings: Settings, fix: bool, progress: Progress) -> list[Check]:
    from storage.inspection import store_health

    health = store_health(store)
    piled = [t for t in health.tables if t.fragments >= settings.compaction.min_fragments]
    # The rows the most behind of a table's indexes lacks: a sum over its indexes counted a row once per
    # index (a trial read 2,056 rows behind in a table of 258).
    unindexed = {t.name: max(index.unindexed_rows for index in t.indexes) for t in health.tables if t.indexes}
    behind = {name: rows for name, rows in unindexed.items() if rows >= 1_000}
    memories = next(t for t in health.tables if t.name.startswith("memories"))
    has_vector_index = any("vector" in index.columns for index in memories.indexes)
    needs_vector_index = (
        settings.vector.index_min_rows > 0
        and memories.rows >= settings.vector.index_min_rows
        and not has_vector_index
    )
    has_fulltext = any("search_text" in index.columns for index in memories.indexes)
    size = health.disk_bytes
    checks = [
        Check(
            "tables",
            "ok",
            f"{len(health.tables)} tables, {memories.rows:,} memory rows"
            + (f", {size / (1 << 20):.1f} MiB on disk" if size is not None else ""),
        ),
        Check(
            "full-text index",
            "ok" if has_fulltext else "warn",
            "present on the memories" if has_fulltext else "missing on the memories (full-text search scans)",
            None if has_fulltext else "run `memoria doctor --fix`",
        ),
    ]
    problems = []
    if piled:
        problems.append(
            "appends piled up in " + ", ".join(f"{t.name} ({t.fragments} fragments)" for t in piled)
        )
    if behind:
        rows = {t.name: t.rows for t in health.tables}
        problems.append(
            "rows not yet in every index: "
            + ", ".join(f"{n} {r:,} of {rows[n]:,}" for n, r in behind.items())
        )
    if needs_vector_index:
        problems.append(f"no vector index over {memories.rows:,} memories (searches scan every vector)")
    if not problems:
        checks.append(Check("maintenance", "ok", "fragments and indexes are up to date"))
        return checks
    if not fix:
        checks.append(
            Check(
                "maintenance",
                "warn",
                "; ".join(problems),
                "run `memoria doctor --fix` (a running server also does this every "
                f"{settings.maintenance_interval_seconds:.0f} s)",
            )
        )
        return checks
    with ticking(progress, "compacting tables and building indexes"):
        done = store.maintain(min_fragments=2)
    checks.append(Check("maintenance", "fixed", "; ".join(done.values()) or "nothing left to do"))
    return checks


def _models_and_vectors(store: MemoryStore | None, settings: Settings) -> list[Check]:
    from retrieval.models.providers import load_models
    from storage.stats import stale_embedders

    announced: list[str] = []
    models = load_models(
        model_config(settings), store.vector_dim if store else settings.vector.dim, announced.append
    )
    checks = []
    for info in (models.embedder_info, models.reranker_info):
        if info.offline_fallback:
            checks.append(
                Check(
                    info.role,
                    "warn",
                    f"{info.describe()}",
                    _model_fix(info.role, downloads_allowed=settings.allow_model_downloads),
                )
            )
        else:
            checks.append(Check(info.role, "ok", info.describe()))
    backend = "offline (hashed vectors + full-text search)" if models.offline else "model-backed"
    checks.append(Check("backend", "ok", f"recall runs {backend}"))
    if store is None:
        return checks
    stale = stale_embedders(store, models.embedder.name)
    if stale:
        checks.append(
            Check(
                "vectors",
                "warn",
                f"{sum(stale.values()):,} memories have vectors from another embedder ("
                + ", ".join(f"{name}: {count:,}" for name, count in stale.items())
                + f") than the active {models.embedder.name}; vector search cannot compare them",
                _vectors_fix(
                    stale,
                    offline_fallback=models.embedder_info.offline_fallback,
                    hashed_chosen=settings.embedder == "hashed",
                ),
            )
        )
    else:
        checks.append(Check("vectors", "ok", f"every memory's vector is from {models.embedder.name}"))
    return checks


def _vectors_fix(stale: dict[str, int], *, offline_fallback: bool, hashed_chosen: bool) -> str:
    """How to make vector search compare every memory again. A model folder that made the stored vectors
    and is still there is named first: pointing MEMORIA_EMBEDDING_MODEL back at it keeps its vectors (a new
    user's trial went back to the default after a run with a local model, and search fell to words alone,
    the doctor naming no way back); the server re-embeds at start what the offline fallback wrote meanwhile,
    and ``memoria reembed`` what another model did. On the offline fallback the model's vectors are the ones
    to keep: load a model first, or choose the hashed vectors on purpose."""
    folders = [folder for name in stale if (folder := local_model_folder(name)) is not None]
    chosen = "MEMORIA_EMBEDDER=sentence-transformers and " if hashed_chosen else ""
    others = (
        " (then `memoria reembed` for the memories of the other embedders listed)" if len(stale) > 1 else ""
    )
    back = (
        f"the model in {folders[0]} made {stale_count(stale, folders[0]):,} of them: set {chosen}"
        f"MEMORIA_EMBEDDING_MODEL={folders[0]} to use it again, its vectors kept{others}; or "
        if len(folders) == 1
        else ""
    )
    if offline_fallback:
        return (
            back
            + "make the configured model load (the embedder check above), then run `memoria reembed`; or, to stay"
            " on the offline backend, set MEMORIA_EMBEDDER=hashed for the server and run"
            " `MEMORIA_EMBEDDER=hashed memoria reembed`"
        )
    return back + "run `memoria reembed` to give them the active embedder's vectors"


def stale_count(stale: dict[str, int], folder: str) -> int:
    """The memories whose vectors the model in ``folder`` made (under any recipe of its name)."""
    return sum(count for name, count in stale.items() if local_model_folder(name) == folder)


# The variables with which the Hugging Face libraries try no download at all (the values they read as on).
HUB_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_ON = {"1", "true", "yes", "on"}


def _hub_offline() -> str | None:
    """The variable that keeps the Hugging Face libraries from downloading, if one is set on."""
    return next(
        (name for name in HUB_OFFLINE_VARIABLES if os.environ.get(name, "").strip().lower() in _ON), None
    )


def _model_fix(role: str, *, downloads_allowed: bool) -> str:
    """What makes the model load. Downloads are allowed by default, so when they are the fix is the
    network (or a local folder), not the setting; unless the environment turns downloads off for the
    Hugging Face libraries themselves (a new user's trial read "let this machine reach Hugging Face" while
    the reason quoted said that outgoing traffic had been disabled: ``HF_HUB_OFFLINE=1``)."""
    offline = _hub_offline()
    download = (
        f"or unset {offline} (it keeps the Hugging Face libraries from downloading anything) on a machine "
        "that reaches Hugging Face"
        if downloads_allowed and offline
        else "or let this machine reach Hugging Face (downloads are allowed; the reason above says what failed)"
        if downloads_allowed
        else "or set MEMORIA_ALLOW_MODEL_DOWNLOADS=true"
        + (f" and unset {offline}" if offline else "")
        + " on a machine that reaches Hugging Face"
    )
    if role == "embedder":
        return (
            # (not always: a team's trial was told to re-embed vectors the model it pointed back to had made)
            f"point MEMORIA_EMBEDDING_MODEL at a local sentence-transformers folder, {download}; then "
            "`memoria reembed` if the vectors check lists memories of another embedder than that model"
        )
    return (
        f"point MEMORIA_RERANK_MODEL at a local cross-encoder folder, set COHERE_API_KEY for Cohere Rerank, "
        f"{download}"
    )


def _llm_stages(settings: Settings) -> list[Check]:
    """Which configured stages need a language model, and whether one can answer them."""
    wanted = [
        *(["the LLM gate"] if settings.gate == "llm" else []),
        *(["iterative retrieval"] if settings.max_iterations > 1 else []),
        *(
            ["the LLM reranker"]
            if settings.llm_reranker.get("enabled") or settings.llm_reranker_by_agent
            else []
        ),
        *(f"the {name.replace('_', ' ')} pass" for name in dict.fromkeys(settings.llm_passes)),
    ]
    if not wanted:
        return []
    stages = ", ".join(wanted)
    if settings.llm == "none":
        return [
            Check(
                "llm",
                "warn",
                f"{stages} configured, but MEMORIA_LLM=none: they never ask a model and keep their local form",
                "set MEMORIA_LLM=auto with MEMORIA_OPENAI_BASE_URL and MEMORIA_OPENAI_MODEL (a local Ollama or "
                "llama.cpp server) or COHERE_API_KEY, or leave these stages off",
            )
        ]
    sampling = "the client's own model when it offers sampling, else " if settings.llm == "auto" else ""
    chosen = settings.background_llm
    if chosen == "openai":
        assert settings.openai.base_url is not None
        endpoint = f"{settings.openai.model} at the OpenAI-compatible endpoint {settings.openai.base_url}"
        failure = _unreachable(settings.openai.base_url)
        if failure is not None:
            return [
                Check(
                    "llm",
                    "warn",
                    f"{stages}: {sampling}{endpoint}, which does not answer ({failure}); until it does they "
                    "keep their local form",
                    "start the model server (e.g. `ollama serve`) or fix MEMORIA_OPENAI_BASE_URL",
                )
            ]
        return [Check("llm", "ok", f"{stages}: {sampling}{endpoint}")]
    if chosen == "cohere":
        return [Check("llm", "ok", f"{stages}: {sampling}Cohere chat ({settings.cohere.chat_model})")]
    if settings.llm in ("auto", "sampling"):
        return [
            Check(
                "llm",
                "warn",
                f"{stages}: only clients that offer MCP sampling can answer (few do); with the others they "
                "keep their local form",
                "set MEMORIA_OPENAI_BASE_URL and MEMORIA_OPENAI_MODEL (a local Ollama or llama.cpp server), or "
                "COHERE_API_KEY, so that every client's recalls have a model",
            )
        ]
    return [
        Check(
            "llm",
            "warn",
            f"{stages}: MEMORIA_LLM={settings.llm} but it is not configured, so they keep their local form",
            "set MEMORIA_OPENAI_BASE_URL and MEMORIA_OPENAI_MODEL"
            if settings.llm == "openai"
            else "set COHERE_API_KEY",
        )
    ]


def _unreachable(base_url: str, timeout: float = 3.0) -> str | None:
    """Why the endpoint does not answer, or None when it does (any HTTP answer counts, a 401 or 404 to
    ``GET /models`` too: a server is there; but a gateway's 502, 503 or 504 says the one behind it is not)."""
    import http.client
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} from a gateway" if exc.code in (502, 503, 504) else None
    except urllib.error.URLError as exc:
        reason = exc.reason
        return short_reason(reason) if isinstance(reason, BaseException) else str(reason)
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout, a reset, a malformed URL
        return short_reason(exc)


def _http_credentials(settings: Settings) -> list[Check]:
    from server.auth import load_token_file

    if not settings.http.tokens_file:
        return []
    try:
        tokens = load_token_file(Path(settings.http.tokens_file))
    except ConfigError as exc:
        return [
            Check(
                "http tokens", "fail", str(exc), "fix the entry it names; `memoria token` prints a valid one"
            )
        ]
    return [Check("http tokens", "ok", f"{len(tokens)} tokens in {settings.http.tokens_file}")]
