"""Who may read and write which scopes over HTTP: bearer tokens and the grants they carry.

Two ways to issue tokens, chosen by configuration:

- **Static tokens** (``MEMORIA_HTTP_TOKENS_FILE``), for a small team: a JSON file lists each token's
  principal and the ``org/project`` scopes it may read and write. The file may hold tokens or only their
  SHA-256 digests (``memoria token`` prints a new token and its entry); the server keeps digests only.
- **OAuth 2.1 resource server** (``MEMORIA_OAUTH_*``), for an existing identity provider: tokens are
  checked by RFC 7662 introspection, must be active, issued by the configured issuer and for this server
  (the RFC 8707 resource / audience, checked by the SDK with ``validate_token_resource``), and carry
  scopes ``memoria:read:<org>/<project>`` and ``memoria:write:<org>/<project>``. The server publishes its
  protected-resource metadata so clients can find the authorization server.

Either way a request without a valid token gets 401, and every tool call is checked against the token's
grant before it runs (``Grant.allows``); writing implies reading the same scope. ``*`` stands for any org
or any project. A grant is split at its first ``/``, so an org whose id contains ``/``, or an org or
project literally named ``*``, cannot be granted on its own (only through a wildcard): a limit on what
an operator can express, not a way for a client to reach further. The principal, not the client's
self-declared name, becomes the memory's agent, so one principal cannot pose as several agents to
inflate corroboration.

Tokens are never logged: only digests are kept, and the log filter redacts bearer values anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import BaseModel, TypeAdapter, ValidationError

from server.config import ConfigError, Settings
from storage.records import Scope
from tools.common import OrgId, ProjectId, ScopeArgs, ToolFailure

log = logging.getLogger(__name__)

MAX_SESSION_ID = 128  # tools.common.Identifier
READ_PREFIX = "memoria:read:"
WRITE_PREFIX = "memoria:write:"
ANY = "*"
Effect = Literal["reads", "writes", "erases"]


_ORG_ID: TypeAdapter[str] = TypeAdapter(OrgId)
_PROJECT_ID: TypeAdapter[str] = TypeAdapter(ProjectId)


@dataclass(frozen=True)
class ScopePattern:
    """``org/project``, where either part may be ``*``; ``org`` alone means every project of the org."""

    org_id: str
    project_id: str

    @classmethod
    def parse(cls, text: str) -> ScopePattern:
        """``org/project`` with each part as calls give it: white space around a part is dropped (ids are,
        everywhere: a trial's " acme / web " granted nothing any call could name), and a part no call's id
        can be (a control character, a line break: the rules of ``tools.common.OrgId`` / ``ProjectId``) is
        refused."""
        org, _, project = (part.strip() for part in text.strip().partition("/"))
        if not org or (_ and not project):
            raise ValueError(f"{text!r} is not a scope: write org/project (either part may be *)")
        for part, adapter in ((org, _ORG_ID), (project, _PROJECT_ID)):
            if part and part != ANY:
                try:
                    adapter.validate_python(part)
                except ValidationError as exc:
                    reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
                    raise ValueError(f"{text!r} is not a scope: {part!r} {reason}") from None
        return cls(org, project or ANY)

    def matches(self, scope: Scope) -> bool:
        return self.org_id in (ANY, scope.org_id) and self.project_id in (ANY, scope.project_id)

    @property
    def concrete(self) -> Scope | None:
        return None if ANY in (self.org_id, self.project_id) else Scope(self.org_id, self.project_id)

    def __str__(self) -> str:
        return f"{self.org_id}/{self.project_id}"


@dataclass(frozen=True)
class Grant:
    """What one token's holder may do: read some scopes, write some (writing implies reading)."""

    principal: str
    read: tuple[ScopePattern, ...]
    write: tuple[ScopePattern, ...]

    def patterns(self, effect: Effect) -> tuple[ScopePattern, ...]:
        """The scopes that allow ``effect``: writing implies reading."""
        return self.write if effect != "reads" else (*self.write, *self.read)

    def allows(self, effect: Effect, scope: Scope) -> bool:
        return any(pattern.matches(scope) for pattern in self.patterns(effect))

    @property
    def home(self) -> Scope | None:
        """The scope a call that names none works in: the first concrete scope written, else read."""
        return next((p.concrete for p in (*self.write, *self.read) if p.concrete is not None), None)

    def home_in(self, default: Scope) -> Scope | None:
        """The scope a call that names none works in: the first concrete scope written, else the first org
        written whole (``acme``, ``acme/*``) with the ``default`` project, else the first project written in
        any org (``*/web``) in the ``default`` org; then the same of the scopes read (an org-wide writer's
        calls work in its org, not in a scope it may only read nor the server's default)."""
        for patterns in (self.write, self.read):
            concrete = next((p.concrete for p in patterns if p.concrete is not None), None)
            whole = next((Scope(p.org_id, default.project_id) for p in patterns if p.org_id != ANY), None)
            anywhere = next(
                (Scope(default.org_id, p.project_id) for p in patterns if p.project_id != ANY), None
            )
            if concrete is not None or whole is not None or anywhere is not None:
                return concrete or whole or anywhere
        return None

    def completed(self, effect: Effect, org_id: str | None, project_id: str | None, default: Scope) -> Scope:
        """The scope of a call that names one part of it: the other part the ``default``'s when the grant
        allows that, else the only one the grant allows with the part named (a trial's token for acme/web
        and acme/mobile, passing project_id "mobile" alone, was refused org "default"); the default's when
        there are several or none (the refusal then names what the token grants)."""
        org, project = org_id or default.org_id, project_id or default.project_id
        if self.allows(effect, Scope(org, project)):
            return Scope(org, project)
        # What the grant allows, else what it names at all: a write to a scope the token may only read is
        # refused naming that scope (a team's trial, with write on acme/web and read on acme/mobile, passing
        # project_id "mobile" alone, was refused org "default", which it never named).
        for patterns in (self.patterns(effect), (*self.write, *self.read)):
            if org_id is None:
                orgs = {p.org_id for p in patterns if p.org_id != ANY and p.project_id in (ANY, project)}
                if len(orgs) == 1:
                    return Scope(orgs.pop(), project)
            else:
                projects = {p.project_id for p in patterns if p.project_id != ANY and p.org_id in (ANY, org)}
                if len(projects) == 1:
                    return Scope(org, projects.pop())
        return Scope(org, project)

    def describe(self, effect: Effect) -> str:
        return ", ".join(dict.fromkeys(str(p) for p in self.patterns(effect))) or "nothing"

    @property
    def scopes(self) -> list[str]:
        """The grant as OAuth-style scope strings (how a static token's grant travels in an AccessToken)."""
        return [READ_PREFIX + str(p) for p in self.read] + [WRITE_PREFIX + str(p) for p in self.write]


def grant_from_token(token: AccessToken) -> Grant:
    """The grant an authenticated token carries: its principal and its ``memoria:`` scopes."""
    read: list[ScopePattern] = []
    write: list[ScopePattern] = []
    for scope in token.scopes:
        for prefix, into in ((READ_PREFIX, read), (WRITE_PREFIX, write)):
            if scope.startswith(prefix):
                try:
                    into.append(ScopePattern.parse(scope.removeprefix(prefix)))
                except ValueError:
                    log.warning("ignoring a malformed scope in a token for %s", principal_of(token))
    return Grant(principal_of(token), tuple(read), tuple(write))


def principal_of(token: AccessToken) -> str:
    """The subject if the issuer names one (a person or service), else ``client:<client_id>``: a client
    without a subject never shares a name with a person."""
    return token.subject if token.subject else f"client:{token.client_id}"


def is_principal_name(name: str) -> bool:
    """A principal becomes the agent in provenance: one printable line of 1-128 characters."""
    return 0 < len(name) <= 128 and name.isprintable()


def session_namespace(principal: str) -> str:
    """The prefix of every session a principal works in: fixed-length, so no principal's sessions can be
    named by another (``a`` + ``b:x`` and ``a:b`` + ``x`` stay apart)."""
    return hashlib.sha256(principal.encode()).hexdigest()[:16] + ":"


def own_session(principal: str, session_id: str) -> str:
    namespace = session_namespace(principal)
    return session_id if session_id.startswith(namespace) else namespace + session_id


# ---------------------------------------------------------------------------------------- static tokens


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class StaticToken:
    digest: str
    grant: Grant


def load_token_file(path: Path) -> list[StaticToken]:
    """Parse the tokens file; every problem names the entry and what to write instead."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"MEMORIA_HTTP_TOKENS_FILE: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"MEMORIA_HTTP_TOKENS_FILE: {path} is not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"MEMORIA_HTTP_TOKENS_FILE: {path} is not UTF-8 JSON ({exc})") from None
    entries = document.get("tokens") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f'MEMORIA_HTTP_TOKENS_FILE: {path} must be {{"tokens": [...]}} with at least one entry; '
            "`memoria token --principal NAME --write ORG/PROJECT` prints one"
        )
    tokens, digests = [], set()
    for number, entry in enumerate(entries, 1):
        try:
            token = _static_token(entry)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ConfigError(f"MEMORIA_HTTP_TOKENS_FILE: entry {number} in {path}: {exc}") from None
        if token.digest in digests:
            raise ConfigError(f"MEMORIA_HTTP_TOKENS_FILE: entry {number} in {path} repeats an earlier token")
        digests.add(token.digest)
        tokens.append(token)
    return tokens


def _static_token(entry: dict[str, Any]) -> StaticToken:
    unknown = set(entry) - {"principal", "token", "token_sha256", "read", "write"}
    if unknown:
        raise ValueError(
            f"unknown keys {sorted(unknown)}; use principal, token_sha256 (or token), read, write"
        )
    principal = str(entry.get("principal", "")).strip()
    if not is_principal_name(principal):
        raise ValueError("`principal` must be a name of 1-128 printable characters")
    if ("token" in entry) == ("token_sha256" in entry):
        raise ValueError("give exactly one of `token_sha256` (recommended) or `token`")
    if "token" in entry:
        if len(str(entry["token"])) < 16:
            raise ValueError("`token` must be at least 16 characters; `memoria token` makes a random one")
        digest = token_digest(str(entry["token"]))
    else:
        digest = str(entry["token_sha256"]).strip().lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("`token_sha256` must be 64 hex digits (sha256 of the token)")
    for key in ("read", "write"):  # a string would be read letter by letter: "acme" granting a/*, c/*, ...
        if not isinstance(entry.get(key, []), list) or not all(
            isinstance(s, str) for s in entry.get(key, [])
        ):
            raise ValueError(f'`{key}` must be a list of "org/project" strings, e.g. "{key}": ["acme/web"]')
    read = tuple(ScopePattern.parse(s) for s in entry.get("read", []))
    write = tuple(ScopePattern.parse(s) for s in entry.get("write", []))
    if not read and not write:
        raise ValueError('grant at least one scope in `read` or `write`, e.g. "write": ["acme/web"]')
    return StaticToken(digest, Grant(principal, read, write))


class StaticTokenVerifier:
    """Checks a bearer token against the digests in the tokens file (constant-time comparisons). With the
    file's ``path``, the file is read again when it changes, looked at once a ``RELOAD_SECONDS`` at most: an
    entry removed revokes its token without a restart (a trial's removed token went on working), an entry
    added serves at once. A file that no longer reads leaves the tokens read before in force, and says why
    in the log, once for each change."""

    RELOAD_SECONDS = 1.0

    # Unknown tokens are said in the log at most once this often (the client's 401 says only that a token
    # is needed: the operator is the one who can tell a mistyped or revoked token from a missing one).
    UNKNOWN_SAID_EVERY = 60.0

    def __init__(self, tokens: list[StaticToken], path: Path | None = None) -> None:
        self._tokens = tokens
        self._path = path
        self._seen = self._stamp()
        self._looked = time.monotonic()
        self._unknown = 0  # requests with a token no entry names, since the log last said so
        self._unknown_said = -self.UNKNOWN_SAID_EVERY

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = self._path.stat() if self._path is not None else None
        except OSError:
            return None
        return (found.st_mtime_ns, found.st_size, found.st_ino) if found is not None else None

    def _reload_if_changed(self) -> None:
        now = time.monotonic()
        if self._path is None or now - self._looked < self.RELOAD_SECONDS:
            return
        self._looked = now
        stamp = self._stamp()
        if stamp == self._seen:
            return
        self._seen = stamp
        try:
            tokens = load_token_file(self._path)
        except ConfigError as exc:
            # Fail closed on what the file no longer says: gone, or an empty list, revokes every token; a
            # file that does not read keeps only the tokens it still names (an operator who removed a
            # leaked token and made a typo in the same edit has revoked it; a review found every token kept).
            text = _text_of(self._path)
            kept = [t for t in self._tokens if t.digest in _digests_named(text)] if text else []
            log.error(
                "%s; of the %d tokens read before, the %d it still names stay in force until it reads again",
                exc,
                len(self._tokens),
                len(kept),
            )
            self._tokens = kept
            return
        self._tokens = tokens
        log.info("MEMORIA_HTTP_TOKENS_FILE changed: %d tokens in force now", len(tokens))

    async def verify_token(self, token: str) -> AccessToken | None:
        self._reload_if_changed()
        digest = token_digest(token)
        match = None
        for entry in self._tokens:  # compare with every entry: the time taken does not say which matched
            if hmac.compare_digest(entry.digest, digest):
                match = entry
        if match is None:
            self._say_unknown()
            return None
        grant = match.grant
        return AccessToken(
            token=token, client_id=grant.principal, subject=grant.principal, scopes=grant.scopes
        )

    def _say_unknown(self) -> None:
        """Count a request whose bearer token no entry names, and say so in the log once a
        ``UNKNOWN_SAID_EVERY`` at most (a team's trial: a mistyped token got the same 401 as none, and
        nothing anywhere said which it was). Never the token, nor any part of it."""
        self._unknown += 1
        now = time.monotonic()
        if now - self._unknown_said < self.UNKNOWN_SAID_EVERY:
            return
        log.warning(
            "%s came with a bearer token that no entry of MEMORIA_HTTP_TOKENS_FILE names (mistyped, revoked, "
            "or for another server), answered 401",
            "a request" if self._unknown == 1 else f"{self._unknown} requests since the last such line",
        )
        self._unknown, self._unknown_said = 0, now


def _text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


_HEX_DIGEST = re.compile(r"\b[0-9a-fA-F]{64}\b")
_QUOTED = re.compile(r'"([^"\\]{16,})"')


def _digests_named(text: str) -> set[str]:
    """The token digests a tokens file's text still names, read or not as JSON: each 64-hex-digit run,
    and the digest of each quoted string long enough to be a token."""
    return {found.lower() for found in _HEX_DIGEST.findall(text)} | {
        token_digest(found) for found in _QUOTED.findall(text)
    }


def new_token() -> str:
    return "mem_tok_" + secrets.token_urlsafe(32)


# ---------------------------------------------------------------------------------------- OAuth 2.1


class IntrospectionTokenVerifier:
    """RFC 7662 token introspection at the identity provider, with a short cache of positive answers.

    A token is accepted when the provider says it is active, was issued by ``issuer`` (when the answer
    names one) and has not expired. The answer's ``aud`` becomes ``AccessToken.resource`` (the entry
    equal to this server's resource URL when it is a list) for the SDK's audience check."""

    CACHE_SECONDS = 30.0
    CACHE_ENTRIES = 4_096

    def __init__(
        self,
        introspection_url: str,
        *,
        issuer: str,
        resource: str,
        client_id: str | None = None,
        client_secret: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = introspection_url
        self._issuer = issuer.rstrip("/")
        self._resource = resource
        self._auth: httpx2.BasicAuth | None = (
            httpx2.BasicAuth(client_id, client_secret or "") if client_id else None
        )
        self._timeout = timeout
        self._transport = transport
        self._cache: OrderedDict[str, tuple[float, AccessToken]] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        key = token_digest(token)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        answer = await self._introspect(token)
        access = self._access_token(token, answer) if answer else None
        if access is not None:
            lifetime = self.CACHE_SECONDS
            if access.expires_at is not None:
                lifetime = min(lifetime, access.expires_at - time.time())
            self._cache[key] = (time.monotonic() + lifetime, access)
            while len(self._cache) > self.CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return access

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        try:
            async with httpx2.AsyncClient(
                timeout=self._timeout, transport=self._transport, auth=self._auth
            ) as client:
                response = await client.post(
                    self._url,
                    data={"token": token, "token_type_hint": "access_token"},
                    headers={"Accept": "application/json"},
                )
        except httpx2.HTTPError as exc:
            log.warning("token introspection at %s failed: %s", self._url, type(exc).__name__)
            return None
        if response.status_code != 200:
            log.warning("token introspection at %s answered HTTP %d", self._url, response.status_code)
            return None
        try:
            answer = response.json()
        except ValueError:
            log.warning("token introspection at %s did not answer JSON", self._url)
            return None
        return answer if isinstance(answer, dict) and answer.get("active") is True else None

    def _access_token(self, token: str, answer: dict[str, Any]) -> AccessToken | None:
        issuer = answer.get("iss")
        if issuer is not None and str(issuer).rstrip("/") != self._issuer:
            log.warning("refused a token from issuer %r (expected %r)", issuer, self._issuer)
            return None
        expires = answer.get("exp")
        if isinstance(expires, (int, float)) and expires <= time.time():
            return None
        audience = answer.get("aud")
        audiences = audience if isinstance(audience, list) else [audience] if audience else []
        resource = next(
            (a for a in audiences if _same_url(a, self._resource)), audiences[0] if audiences else None
        )
        subject = answer.get("sub")
        access = AccessToken(
            token=token,
            client_id=str(answer.get("client_id") or subject or "unknown-client"),
            scopes=str(answer.get("scope") or "").split(),
            expires_at=int(expires) if isinstance(expires, (int, float)) else None,
            resource=str(resource) if resource else None,
            subject=str(subject) if subject else None,
            claims={"iss": issuer} if issuer else None,
        )
        if not is_principal_name(principal_of(access)):
            log.warning("refused a token whose subject is not a printable name of at most 128 characters")
            return None
        return access


def _same_url(left: Any, right: str) -> bool:
    return isinstance(left, str) and left.rstrip("/").lower() == right.rstrip("/").lower()


# ---------------------------------------------------------------------------------------- wiring


@dataclass(frozen=True)
class HttpAuth:
    """What the MCP server is built with when HTTP clients must authenticate."""

    settings: AuthSettings
    verifier: StaticTokenVerifier | IntrospectionTokenVerifier


def http_auth(settings: Settings) -> HttpAuth | None:
    """The configured authentication, or None when HTTP clients are not asked for a token."""
    if settings.http.tokens_file and settings.oauth.issuer_url:
        raise ConfigError(
            "MEMORIA_HTTP_TOKENS_FILE and MEMORIA_OAUTH_ISSUER_URL are both set: choose static tokens or OAuth"
        )
    if settings.http.tokens_file:
        path = Path(settings.http.tokens_file).expanduser()
        tokens = load_token_file(path)
        # The SDK asks for an issuer even without OAuth; static tokens are their own issuer. No resource
        # URL: no metadata routes are published and no audience is checked.
        auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)  # type: ignore[arg-type]
        return HttpAuth(auth, StaticTokenVerifier(tokens, path))
    if settings.oauth.issuer_url:
        missing = [
            name
            for name, value in (
                ("MEMORIA_OAUTH_RESOURCE_URL", settings.oauth.resource_url),
                ("MEMORIA_OAUTH_INTROSPECTION_URL", settings.oauth.introspection_url),
            )
            if not value
        ]
        if missing:
            raise ConfigError(f"OAuth needs {' and '.join(missing)} beside MEMORIA_OAUTH_ISSUER_URL")
        assert settings.oauth.resource_url and settings.oauth.introspection_url
        auth = AuthSettings(
            issuer_url=settings.oauth.issuer_url,  # type: ignore[arg-type]
            resource_server_url=settings.oauth.resource_url,  # type: ignore[arg-type]
            validate_token_resource=True,
            required_scopes=None,
        )
        secret = settings.oauth.client_secret.get_secret_value() if settings.oauth.client_secret else None
        verifier = IntrospectionTokenVerifier(
            settings.oauth.introspection_url,
            issuer=settings.oauth.issuer_url,
            resource=settings.oauth.resource_url,
            client_id=settings.oauth.client_id,
            client_secret=secret,
        )
        return HttpAuth(auth, verifier)
    return None


# ---------------------------------------------------------------------------------------- enforcement


def current_grant() -> Grant | None:
    """The grant of the HTTP request being served; None on stdio and in-process (the local user's own)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return grant_from_token(token) if token is not None else None


def _then(then: str) -> str:
    """What a refusal tells the caller to do last, after a comma ("" when nothing: a prompt's)."""
    return f", then {then}" if then else ""


def authorize(args: BaseModel, effect: Effect, grant: Grant, settings: Settings, then: str) -> BaseModel:
    """``args`` as the grant lets them run: a call naming no scope works in the token's home scope, a
    scope the token does not grant is refused, memories are attributed to the principal and sessions
    named explicitly are the principal's own (another principal's session cannot be reported on).
    ``then``: what a refusal tells the caller to do last ("call recall again", "read the resource again":
    a trial was told to call list_memories, the tool behind a resource, which no client can call)."""
    update: dict[str, Any] = {}
    if isinstance(args, ScopeArgs):
        default = Scope(settings.org_id, settings.project_id)
        home = grant.home_in(default)
        if args.org_id is None and args.project_id is None and home is not None:
            update.update(org_id=home.org_id, project_id=home.project_id)
        elif (args.org_id is None) != (args.project_id is None):
            named = grant.completed(effect, args.org_id, args.project_id, default)
            update.update(org_id=named.org_id, project_id=named.project_id)
        scope = args.model_copy(update=update).scope(settings)
        if not grant.allows(effect, scope):
            verb = "read" if effect == "reads" else "write to"
            raise ToolFailure(
                f"this token ({grant.principal}) may not {verb} org {scope.org_id!r} project {scope.project_id!r}; "
                f"it may {verb.split()[0]}: {grant.describe(effect)}. Pass org_id and project_id of a scope it "
                f"grants, or ask the server's operator for a token that grants this one{_then(then)}."
            )
    declared = [
        None if getattr(args, "agent_id_filters", False) else getattr(args, "agent_id", None),
        *(getattr(i, "agent_id", None) for i in getattr(args, "items", ())),
    ]
    foreign = sorted({name for name in declared if name is not None and name != grant.principal})
    if foreign:
        raise ToolFailure(
            f"with a bearer token, memories and recalls are attributed to the token's principal "
            f"{grant.principal!r}, not to {', '.join(map(repr, foreign))}: omit agent_id (use one token per agent)"
            f"{_then(then)}."
        )
    session = getattr(args, "session_id", None)
    if isinstance(session, str):
        owned = own_session(grant.principal, session)
        if len(owned) > MAX_SESSION_ID:
            raise ToolFailure(
                f"`session_id` is {len(session)} characters; with a bearer token at most "
                f"{MAX_SESSION_ID - len(session_namespace(grant.principal))} are allowed (the server keeps each principal's "
                f"sessions apart under a prefix). Pass a shorter id, or the session_id a recall returned"
                f"{_then(then)}."
            )
        update["session_id"] = owned
    return args.model_copy(update=update) if update else args
