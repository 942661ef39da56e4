"""Tokens, grants and the HTTP checks, without a server: what each token may do, how the tokens file and
introspection answers are read, and which Host/Origin headers a binding accepts."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

import anyio
import pytest
from mcp.server.auth.provider import AccessToken

from server.auth import (
    Grant,
    IntrospectionTokenVerifier,
    ScopePattern,
    StaticTokenVerifier,
    authorize,
    grant_from_token,
    http_auth,
    load_token_file,
    own_session,
    token_digest,
)
from server.config import ConfigError, Settings
from server.http import refuse_open_endpoint, transport_security
from storage.records import Scope
from tests.identity_provider import IdentityProvider
from tools.common import ToolFailure
from tools.recall import RecallInput
from tools.remember import RememberInput
from tools.remember_many import RememberManyInput
from tools.report_outcome import ReportOutcomeInput

SETTINGS = Settings.from_env({}, db_uri="/tmp/unused", org_id="default", project_id="default")
ACME_WEB = Scope("acme", "web")


def grant(read: tuple[str, ...] = (), write: tuple[str, ...] = ()) -> Grant:
    return Grant("alice", tuple(map(ScopePattern.parse, read)), tuple(map(ScopePattern.parse, write)))


# ------------------------------------------------------------------------------------------ grants


def test_a_scope_pattern_matches_its_scope_and_wildcards_match_any_part():
    assert ScopePattern.parse("acme/web").matches(ACME_WEB)
    assert not ScopePattern.parse("acme/web").matches(Scope("acme", "api"))
    assert ScopePattern.parse("acme/*").matches(Scope("acme", "api"))
    assert ScopePattern.parse("acme").matches(Scope("acme", "api"))  # org alone: every project
    assert not ScopePattern.parse("acme/*").matches(Scope("acme2", "web"))
    assert ScopePattern.parse("*/web").matches(Scope("other", "web"))


@pytest.mark.parametrize("text", ["", "/web", "acme/"])
def test_a_malformed_scope_pattern_says_how_to_write_one(text):
    with pytest.raises(ValueError, match="org/project"):
        ScopePattern.parse(text)


def test_writing_implies_reading_but_reading_does_not_imply_writing():
    reader = grant(read=("acme/web",))
    writer = grant(write=("acme/web",))
    assert reader.allows("reads", ACME_WEB) and not reader.allows("writes", ACME_WEB)
    assert not reader.allows("erases", ACME_WEB)
    assert writer.allows("reads", ACME_WEB) and writer.allows("writes", ACME_WEB)
    assert writer.allows("erases", ACME_WEB)
    assert not writer.allows("reads", Scope("other", "web"))


def test_the_home_scope_is_the_first_concrete_scope_written_then_read():
    assert grant(read=("acme/web",), write=("acme/*", "acme/api")).home == Scope("acme", "api")
    assert grant(read=("acme/web",)).home == ACME_WEB
    assert grant(write=("*/*",)).home is None


def test_a_token_grant_is_read_from_its_memoria_scopes_and_its_subject():
    token = AccessToken(
        token="t",
        client_id="ide-client",
        subject="alice@example.com",
        scopes=["openid", "memoria:read:acme/*", "memoria:write:acme/web", "memoria:write:/bad"],
    )
    found = grant_from_token(token)
    assert found.principal == "alice@example.com"
    assert found.read == (ScopePattern("acme", "*"),)
    assert found.write == (ScopePattern("acme", "web"),)  # the malformed one is ignored
    # A client without a subject never shares a name with a person.
    assert grant_from_token(AccessToken(token="t", client_id="svc", scopes=[])).principal == "client:svc"


# ------------------------------------------------------------------------------------------ authorize


def test_a_call_naming_no_scope_runs_in_the_tokens_home_scope():
    args = authorize(
        RecallInput(query="deploys"), "reads", grant(write=("acme/web",)), SETTINGS, "call recall again"
    )
    assert args.scope(SETTINGS) == ACME_WEB


def test_an_org_wide_tokens_call_naming_no_scope_runs_in_its_org_not_the_servers_default_org():
    """A trial: a token granting `acme` wrote to org 'default' and was refused."""
    for written in (("acme",), ("acme/*",), ("*/*", "acme/*")):
        args = authorize(
            RememberInput(content="x"), "writes", grant(write=written), SETTINGS, "call remember again"
        )
        assert args.scope(SETTINGS) == Scope("acme", SETTINGS.project_id)
    # A scope it writes, whole, comes before one it only reads (a review: it wrote to the one it read).
    writer = grant(write=("acme/*",), read=("beta/web",))
    args = authorize(RememberInput(content="x"), "writes", writer, SETTINGS, "call remember again")
    assert args.scope(SETTINGS) == Scope("acme", SETTINGS.project_id)
    args = authorize(RecallInput(query="x"), "reads", grant(write=("*/*",)), SETTINGS, "call recall again")
    assert args.scope(SETTINGS) == Scope(SETTINGS.org_id, SETTINGS.project_id)  # no org of its own


def test_a_call_naming_one_part_of_its_scope_takes_the_other_from_the_grant_when_only_one_fits():
    """A trial: a token for acme/web and acme/mobile passing project_id "mobile" alone was refused org
    'default', and a `*/web` reader naming no scope was refused default/default."""
    team = grant(write=("acme/web",), read=("acme/mobile",))
    args = authorize(
        RecallInput(query="x", project_id="mobile"), "reads", team, SETTINGS, "call recall again"
    )
    assert args.scope(SETTINGS) == Scope("acme", "mobile")
    args = authorize(
        RecallInput(query="x", org_id="acme"),
        "reads",
        grant(read=("acme/mobile",)),
        SETTINGS,
        "call recall again",
    )
    assert args.scope(SETTINGS) == Scope("acme", "mobile")
    web_anywhere = grant(read=("*/web",))
    args = authorize(RecallInput(query="x"), "reads", web_anywhere, SETTINGS, "call recall again")
    assert args.scope(SETTINGS) == Scope(SETTINGS.org_id, "web")
    # The default part stays when the grant allows it; with two orgs that fit, the call must say which.
    both = grant(read=(f"{SETTINGS.org_id}/mobile", "beta/mobile"))
    args = authorize(
        RecallInput(query="x", project_id="mobile"), "reads", both, SETTINGS, "call recall again"
    )
    assert args.scope(SETTINGS) == Scope(SETTINGS.org_id, "mobile")
    with pytest.raises(
        ToolFailure,
        match="may not read org 'default' project 'mobile'; it may read: acme/mobile, beta/mobile",
    ):
        authorize(
            RecallInput(query="x", project_id="mobile"),
            "reads",
            grant(read=("acme/mobile", "beta/mobile")),
            SETTINGS,
            "call recall again",
        )
    # Writing to a scope read alone is refused naming that scope, not the server's default org, which the
    # call never named (a team's trial).
    with pytest.raises(
        ToolFailure, match="may not write to org 'acme' project 'mobile'; it may write: acme/web"
    ):
        authorize(
            RememberInput(content="x", project_id="mobile"), "writes", team, SETTINGS, "call remember again"
        )


def test_a_scope_the_token_does_not_grant_is_refused_with_what_it_does_grant():
    with pytest.raises(ToolFailure) as refused:
        authorize(
            RememberInput(content="x", org_id="other", project_id="web"),
            "writes",
            grant(read=("other/web",), write=("acme/web",)),
            SETTINGS,
            "call remember again",
        )
    message = str(refused.value)
    assert "may not write to org 'other' project 'web'" in message
    assert "it may write: acme/web" in message and "call remember again" in message
    # A prompt says nothing of what to call (a review: "" was read as "call recall again").
    with pytest.raises(ToolFailure) as refused:
        authorize(
            RecallInput(query="x", org_id="other", project_id="web"),
            "reads",
            grant(read=("acme/web",)),
            SETTINGS,
            "",
        )
    assert str(refused.value).endswith("ask the server's operator for a token that grants this one.")


def test_a_read_only_token_cannot_write_its_own_scope():
    with pytest.raises(ToolFailure, match="may not write to org 'acme' project 'web'"):
        authorize(
            RememberInput(content="x"), "writes", grant(read=("acme/web",)), SETTINGS, "call remember again"
        )


@pytest.mark.parametrize(
    "args",
    [
        RememberInput(content="x", agent_id="mallory"),
        RecallInput(query="x", agent_id="mallory"),
        RememberManyInput(items=[{"content": "x", "agent_id": "mallory"}]),
    ],
)
def test_a_token_cannot_attribute_memories_or_recalls_to_another_agent(args):
    with pytest.raises(ToolFailure, match="attributed to the token's principal 'alice', not to 'mallory'"):
        authorize(args, "writes", grant(write=("acme/web",)), SETTINGS, "call remember again")


def test_naming_the_principal_itself_as_agent_is_allowed():
    args = authorize(
        RememberInput(content="x", agent_id="alice"),
        "writes",
        grant(write=("acme/web",)),
        SETTINGS,
        "call r again",
    )
    assert args.agent_id == "alice"


def test_explicit_sessions_are_the_principals_own():
    reported = authorize(
        ReportOutcomeInput(outcome="success", session_id="ses_1"),
        "writes",
        grant(write=("acme/web",)),
        SETTINGS,
        "call r again",
    )
    namespace = hashlib.sha256(b"alice").hexdigest()[:16] + ":"
    assert reported.session_id == namespace + "ses_1"
    again = authorize(reported, "writes", grant(write=("acme/web",)), SETTINGS, "call r again")
    assert again.session_id == namespace + "ses_1"  # a session id the server returned is used as it is


def test_no_principal_can_name_another_principals_session():
    # "a" + "b:x" and "a:b" + "x" would meet under a plain "principal:" prefix.
    first = own_session("a", "b:x")
    second = own_session("a:b", "x")
    assert first != second
    assert own_session("a:b", first) != first  # passing a's session id does not reach it


def test_a_session_id_too_long_for_its_namespace_is_refused_with_the_limit():
    with pytest.raises(ToolFailure, match="with a bearer token at most 111 are allowed"):
        authorize(
            ReportOutcomeInput(outcome="success", session_id="s" * 120),
            "writes",
            grant(write=("acme/web",)),
            SETTINGS,
            "report_outcome",
        )


# ------------------------------------------------------------------------------------------ tokens file


def write_tokens(tmp_path, entries: Any) -> Any:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(entries))
    return path


def test_the_tokens_file_keeps_only_digests_and_the_verifier_accepts_the_token(tmp_path):
    secret = "a-long-random-token-0123456789"
    entries = {
        "tokens": [
            {"principal": "alice", "token": secret, "write": ["acme/web"]},
            {"principal": "bob", "token_sha256": token_digest("bob-token-0123456789"), "read": ["acme/*"]},
        ]
    }
    loaded = load_token_file(write_tokens(tmp_path, entries))
    assert all(secret not in repr(entry) for entry in loaded)
    verifier = StaticTokenVerifier(loaded)
    alice = anyio.run(verifier.verify_token, secret)
    bob = anyio.run(verifier.verify_token, "bob-token-0123456789")
    assert alice is not None and alice.subject == "alice" and alice.scopes == ["memoria:write:acme/web"]
    assert bob is not None and grant_from_token(bob).read == (ScopePattern("acme", "*"),)
    assert anyio.run(verifier.verify_token, "not-a-token-at-all") is None
    assert anyio.run(verifier.verify_token, "") is None


def test_the_tokens_file_is_read_again_when_it_changes_so_a_removed_token_is_revoked(tmp_path, caplog):
    """A trial removed a token from the file of a running server, and it went on working."""
    alice = {"principal": "alice", "token": "alice-token-0123456789", "write": ["acme/web"]}
    bob = {"principal": "bob", "token": "bob-token-0123456789ab", "read": ["acme/web"]}
    path = write_tokens(tmp_path, {"tokens": [alice, bob]})
    verifier = StaticTokenVerifier(load_token_file(path), path)
    verifier.RELOAD_SECONDS = 0.0  # looked at on every request here (once a second in a server)
    assert anyio.run(verifier.verify_token, bob["token"]) is not None
    write_tokens(tmp_path, {"tokens": [alice]})
    assert anyio.run(verifier.verify_token, bob["token"]) is None
    assert anyio.run(verifier.verify_token, alice["token"]) is not None
    # Half written, or a typo: the tokens read before that it still names stay in force.
    path.write_text(json.dumps({"tokens": [alice]})[:-1])
    with caplog.at_level("ERROR", logger="server.auth"):
        assert anyio.run(verifier.verify_token, alice["token"]) is not None
        assert anyio.run(verifier.verify_token, alice["token"]) is not None
    assert [r.getMessage().split(";")[0] for r in caplog.records if r.levelno >= logging.ERROR] == [
        f"MEMORIA_HTTP_TOKENS_FILE: {path} is not JSON (Expecting ',' delimiter, line 1)"
    ]  # once for the change, not once a request
    write_tokens(tmp_path, {"tokens": [bob]})
    assert anyio.run(verifier.verify_token, alice["token"]) is None
    assert anyio.run(verifier.verify_token, bob["token"]) is not None


def test_a_tokens_file_emptied_deleted_or_broken_keeps_no_token_it_no_longer_names(tmp_path, caplog):
    """A review: an empty list, a deleted file, or a typo made while removing a leaked token's entry kept
    every token in force."""
    alice = {"principal": "alice", "token": "alice-token-0123456789", "write": ["acme/web"]}
    bob = {"principal": "bob", "token_sha256": token_digest("bob-token-0123456789ab"), "read": ["acme/web"]}
    path = write_tokens(tmp_path, {"tokens": [alice, bob]})
    verifier = StaticTokenVerifier(load_token_file(path), path)
    verifier.RELOAD_SECONDS = 0.0

    def valid(token: str) -> bool:
        return anyio.run(verifier.verify_token, token) is not None

    # Bob's entry removed, and a typo made in the same edit: Bob is revoked, Alice (still named) stays.
    path.write_text(json.dumps({"tokens": [alice]})[:-2] + ",]}")
    with caplog.at_level("ERROR", logger="server.auth"):
        assert valid("alice-token-0123456789") and not valid("bob-token-0123456789ab")
    assert "of the 2 tokens read before, the 1 it still names stay in force" in caplog.text
    write_tokens(tmp_path, {"tokens": [alice, bob]})
    assert valid("bob-token-0123456789ab")
    path.write_bytes(b'{"tokens": [{"principal": "\xff')  # cut inside a character: no 500, named nothing
    assert not valid("alice-token-0123456789") and not valid("bob-token-0123456789ab")
    write_tokens(tmp_path, {"tokens": [alice, bob]})
    assert valid("alice-token-0123456789")
    write_tokens(tmp_path, {"tokens": []})
    assert not valid("alice-token-0123456789") and not valid("bob-token-0123456789ab")
    write_tokens(tmp_path, {"tokens": [alice]})
    assert valid("alice-token-0123456789")
    path.unlink()
    assert not valid("alice-token-0123456789")


def test_a_grants_scope_is_read_as_calls_give_ids_and_one_no_id_can_be_is_refused():
    assert ScopePattern.parse(" acme / web ") == ScopePattern("acme", "web")
    # What a call's org_id / project_id takes, a grant takes (a review: the first version refused these).
    assert ScopePattern.parse("acme/acme\xa0corp") == ScopePattern("acme", "acme\xa0corp")
    RecallInput(query="x", org_id="acme", project_id="acme\xa0corp")
    for text in ("ac\tme/web", "acme/we\nb"):
        with pytest.raises(ValueError, match="must not contain control characters"):
            ScopePattern.parse(text)
        with pytest.raises(ValueError, match="must not contain control characters"):
            org, project = text.split("/")
            RecallInput(query="x", org_id=org, project_id=project)


def test_a_grant_written_as_a_string_is_refused_not_read_letter_by_letter(tmp_path):
    """A review: "write": "acme" granted a/*, c/*, m/* and e/*."""
    path = write_tokens(tmp_path, {"tokens": [{"principal": "a", "token": "x" * 20, "write": "acme"}]})
    with pytest.raises(ConfigError, match='`write` must be a list of "org/project" strings'):
        load_token_file(path)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"tokens": []}, "at least one entry"),
        ([1, 2], "at least one entry"),
        ({"tokens": [{"principal": "a", "token": "short", "write": ["a/b"]}]}, "at least 16 characters"),
        ({"tokens": [{"principal": "a", "write": ["a/b"]}]}, "exactly one of `token_sha256`"),
        ({"tokens": [{"principal": "a", "token_sha256": "abc", "write": ["a/b"]}]}, "64 hex digits"),
        ({"tokens": [{"principal": "a", "token": "x" * 20}]}, "grant at least one scope"),
        ({"tokens": [{"principal": "a", "token": "x" * 20, "write": ["/b"]}]}, "org/project"),
        ({"tokens": [{"principal": "", "token": "x" * 20, "write": ["a/b"]}]}, "`principal`"),
        (
            {"tokens": [{"principal": "a", "token": "x" * 20, "write": ["a/b"], "admin": True}]},
            "unknown keys",
        ),
        (
            {"tokens": [{"principal": "a", "token": "x" * 20, "write": ["a/b"]}] * 2},
            "entry 2 .* repeats an earlier token",
        ),
    ],
)
def test_a_bad_tokens_file_stops_start_up_naming_the_entry_and_the_fix(tmp_path, document, problem):
    with pytest.raises(ConfigError, match=problem):
        load_token_file(write_tokens(tmp_path, document))


def test_an_unreadable_tokens_file_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="MEMORIA_HTTP_TOKENS_FILE: cannot read"):
        load_token_file(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ConfigError, match="is not JSON"):
        load_token_file(tmp_path / "bad.json")


def test_static_tokens_and_oauth_cannot_both_be_configured(tmp_path):
    path = write_tokens(tmp_path, {"tokens": [{"principal": "a", "token": "x" * 20, "write": ["a/b"]}]})
    settings = Settings.from_env(
        {}, db_uri=str(tmp_path), http_tokens_file=str(path), oauth_issuer_url="https://id.example.com"
    )
    with pytest.raises(ConfigError, match="choose static tokens or OAuth"):
        http_auth(settings)


def test_oauth_needs_a_resource_url_and_an_introspection_endpoint(tmp_path):
    settings = Settings.from_env({}, db_uri=str(tmp_path), oauth_issuer_url="https://id.example.com")
    with pytest.raises(ConfigError, match="MEMORIA_OAUTH_RESOURCE_URL and MEMORIA_OAUTH_INTROSPECTION_URL"):
        http_auth(settings)


def test_oauth_urls_must_be_https_beyond_loopback():
    with pytest.raises(ConfigError, match="must be an https:// URL"):
        Settings.from_env({"MEMORIA_OAUTH_ISSUER_URL": "http://id.example.com"}, db_uri="/tmp/x")
    assert Settings.from_env({"MEMORIA_OAUTH_ISSUER_URL": "http://127.0.0.1:9000"}, db_uri="/tmp/x")


# ------------------------------------------------------------------------------------------ introspection


ISSUER = "https://id.example.com"
RESOURCE = "http://127.0.0.1:8765/mcp"


@pytest.mark.slow
def test_introspection_accepts_an_active_token_for_this_server_and_reads_its_grant():
    provider = IdentityProvider(
        {
            "good": {
                "iss": ISSUER,
                "sub": "alice",
                "client_id": "cursor",
                "aud": ["https://other.example.com", RESOURCE],
                "scope": "memoria:write:acme/web",
                "exp": int(time.time()) + 600,
            }
        }
    )
    with provider.serving() as base:
        verifier = IntrospectionTokenVerifier(
            f"{base}/introspect",
            issuer=ISSUER,
            resource=RESOURCE,
            client_id="memoria",
            client_secret="s3cret",
        )
        token = anyio.run(verifier.verify_token, "good")
        again = anyio.run(verifier.verify_token, "good")
    assert token is not None and token.resource == RESOURCE and token.subject == "alice"
    assert grant_from_token(token) == Grant("alice", (), (ScopePattern("acme", "web"),))
    assert again == token and len(provider.requests) == 1  # the second check came from the cache
    form, authorization = provider.requests[0]
    assert form["token"] == ["good"] and form["token_type_hint"] == ["access_token"]
    assert authorization is not None and authorization.startswith("Basic ")


@pytest.mark.parametrize(
    "claims",
    [
        None,  # inactive (unknown) token
        {"iss": "https://evil.example.com", "sub": "alice", "aud": RESOURCE},
        {"iss": ISSUER, "sub": "alice", "aud": RESOURCE, "exp": int(time.time()) - 5},
        {"iss": ISSUER, "sub": "alice\nforged log line", "aud": RESOURCE},
        {"iss": ISSUER, "sub": "x" * 129, "aud": RESOURCE},
    ],
    ids=["inactive", "other-issuer", "expired", "unprintable-subject", "long-subject"],
)
@pytest.mark.slow
def test_introspection_refuses_inactive_foreign_and_expired_tokens(claims):
    provider = IdentityProvider({"tok": claims} if claims else {})
    with provider.serving() as base:
        verifier = IntrospectionTokenVerifier(f"{base}/introspect", issuer=ISSUER, resource=RESOURCE)
        assert anyio.run(verifier.verify_token, "tok") is None


def test_an_unreachable_identity_provider_refuses_the_token_instead_of_failing_open():
    verifier = IntrospectionTokenVerifier("http://127.0.0.1:9/introspect", issuer=ISSUER, resource=RESOURCE)
    assert anyio.run(verifier.verify_token, "tok") is None


# ------------------------------------------------------------------------------------------ Host / Origin


def test_loopback_accepts_loopback_hosts_and_origins_only():
    security = transport_security("127.0.0.1", 8000, SETTINGS)
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    assert security.allowed_origins == ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    assert transport_security("127.0.0.2", 8000, SETTINGS).allowed_hosts[-1] == "127.0.0.2:*"


def test_ipv6_and_unspecified_addresses_are_recognised_however_they_are_written():
    settings = SETTINGS.replace(http_allowed_hosts=["memory.example.com:*"])
    assert transport_security("2001:DB8:0::1", 8000, settings).allowed_hosts[0] == "[2001:db8::1]:8000"
    for everywhere in ("::", "::0", "0:0::0", "0.0.0.0"):
        with pytest.raises(ConfigError, match="MEMORIA_HTTP_ALLOWED_HOSTS"):
            transport_security(everywhere, 8000, SETTINGS)


def test_a_specific_address_beyond_loopback_accepts_itself_and_the_configured_hosts():
    settings = SETTINGS.replace(http_allowed_hosts=["memory.example.com:*"])
    security = transport_security("10.0.0.5", 8000, settings)
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == ["10.0.0.5:8000", "memory.example.com:*"]
    assert security.allowed_origins == []


def test_every_interface_needs_the_host_names_clients_use():
    with pytest.raises(ConfigError, match="MEMORIA_HTTP_ALLOWED_HOSTS"):
        transport_security("0.0.0.0", 8000, SETTINGS)
    settings = SETTINGS.replace(http_allowed_hosts=["memory.example.com:*"])
    assert transport_security("0.0.0.0", 8000, settings).allowed_hosts == ["memory.example.com:*"]


def test_an_open_endpoint_beyond_loopback_is_refused_unless_the_operator_says_a_proxy_checks():
    refuse_open_endpoint("127.0.0.1", SETTINGS, authenticated=False)
    refuse_open_endpoint("10.0.0.5", SETTINGS, authenticated=True)
    with pytest.raises(ConfigError, match="without authentication"):
        refuse_open_endpoint("10.0.0.5", SETTINGS, authenticated=False)
    proxied = SETTINGS.replace(http_allow_unauthenticated=True)
    refuse_open_endpoint("10.0.0.5", proxied, authenticated=False)


def test_allowed_hosts_read_from_the_environment_as_a_comma_list_or_json():
    assert Settings.from_env(
        {"MEMORIA_HTTP_ALLOWED_HOSTS": "a.example:*, b.example:443"}, db_uri="/x"
    ).http.allowed_hosts == [
        "a.example:*",
        "b.example:443",
    ]
    assert Settings.from_env(
        {"MEMORIA_HTTP_ALLOWED_ORIGINS": '["https://app.example"]'}, db_uri="/x"
    ).http.allowed_origins == ["https://app.example"]


def test_a_token_no_entry_names_is_said_in_the_log_once_a_minute_never_the_token(caplog):
    """A team's trial: a mistyped token got the same 401 as none, and nothing said which it was."""
    verifier = StaticTokenVerifier([])
    with caplog.at_level(logging.WARNING, logger="server.auth"):
        for _ in range(3):
            assert anyio.run(verifier.verify_token, "mem_tok_mistyped_secret_value") is None
    [said] = [r.getMessage() for r in caplog.records]
    assert "a request came with a bearer token that no entry of MEMORIA_HTTP_TOKENS_FILE names" in said
    assert "mistyped_secret" not in said
    verifier._unknown_said -= StaticTokenVerifier.UNKNOWN_SAID_EVERY  # a minute later
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="server.auth"):
        assert anyio.run(verifier.verify_token, "another") is None
    assert "3 requests since the last such line" in caplog.records[0].getMessage()
