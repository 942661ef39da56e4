"""Secrets out before anything is embedded, stored or logged.

A memory server keeps what agents paste into it for months, shows it to other agents and sends it to
embedding and rerank providers; a cloud key or a bearer token caught in a remembered log line would
leak all of those ways. Every text that enters (memory content, tags, queries, outcome notes) passes
through ``redact`` first, and the server's log handler runs every record through it too.

Each finding is replaced by ``[REDACTED:<kind>]``; only the kinds and counts are reported, never the
values. The patterns look for what has a recognisable shape (cloud and SaaS key formats, JWTs, PEM
private keys, ``Authorization``/``Bearer`` headers, passwords in URLs, ``password=...`` style
assignments), so ordinary prose is left alone.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field

# What a key or token said in prose looks like: 16 characters or more of a key's alphabet (no dot: "1.2.3-beta",
# "id_ed25519.pub" are a version and a file), with at least two digits and a letter; no run of eight
# lower-case letters nor a part between hyphens or underscores that is a word of five ("2048-dimensional",
# "v2024-01-01-preview", "base64-encoded-v2" are no keys; a random key seldom has one); not a variable's
# name in capitals ("AWS_SECRET_ACCESS_KEY_2024"). It ends before trailing punctuation.
# The keys named: those that are credentials by their name ("the deploy key is ...", "license key: ..."; a
# trial found them stored as written), not "the key" alone nor a primary, sort, cache or object key.
_KEY_WORDS = (
    r"(?:api|access|secret|private|signing|deploy|license|licence|master|encryption|webhook|shared|admin|root"
    r"|app|service|integration|auth|session)[\s_-]?key|client[\s_-]?secret|token"
)
_CREDENTIAL = (
    r"(?=(?:[^\s\"'`,;()\[\]]*?[0-9]){2})(?=[^\s\"'`,;()\[\]]*[A-Za-z])(?![^\s\"'`,;()\[\]]*(?-i:[a-z]{8}))"
    r"(?!(?:[A-Za-z0-9+/=~]*[-_])*(?-i:[a-z]{5,})(?![A-Za-z0-9+/=~]))"
    r"(?!(?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w-]))"
    r"[A-Za-z0-9_\-+/=~]{15,}[A-Za-z0-9=](?![\w-]|\.\w)"
)
# A user and the colon before a password in prose ("basic auth harbor:...", "creds admin:..."): not a URL's
# scheme, a shell variable, a port, nor a URL's user (the "@" is looked for once, right after the colon).
_USER_COLON = r"[^\s:\"'/@$]+:(?!\$|//|\d+(?![^\s\"'@]))(?![^\s\"']*@)"
# A UUID right after a key's or token's name is more often the id of a row or a request than the key.
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![\w-])"

# (kind, pattern, the group that holds the secret: 0 = the whole match). Order matters: earlier, more
# specific patterns replace their matches first, so a later generic one does not see them again.
_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,\-]*)",
            re.DOTALL,
        ),
        0,
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    (
        "aws-access-key",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        0,
    ),
    (
        # named: aws_secret_access_key=..., AWS_SECRET_ACCESS_KEY ..., aws secret key is ..., and what it is
        # for before "is" ("AWS secret access key for the backup job is ...": a new user's trial)
        "aws-secret-key",
        re.compile(
            r"(?i)\baws[_ -]?secret(?:[_ -]?access)?[_ -]?key[\"']?"
            r"(?:\s*[:=]\s*|(?:\s+(?:for|of|on|in|used\s+by)(?:\s+[^\s\"',;:=]+){1,8}?)?\s+(?:is|was)\s+|\s+)[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        1,
    ),
    (
        # In prose: "... and secret <40 characters of a secret key's alphabet, mixed case, with a digit or a
        # slash>" (a git SHA after "secret" is lower-case hex, and stays).
        "aws-secret-key",
        re.compile(
            r"(?i:\bsecret(?:\s+(?:access\s+)?key)?)(?:\s*[:=]\s*|\s+(?:is\s+)?)[\"']?"
            r"((?=[A-Za-z0-9/+]*[0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])[A-Za-z0-9/+]{40})"
            r"(?![A-Za-z0-9/+])"
        ),
        1,
    ),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), 0),
    ("google-oauth-token", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), 0),
    (
        "azure-account-key",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey)\s*=\s*([A-Za-z0-9+/]{40,}={0,2})"),
        1,
    ),
    ("azure-sas-signature", re.compile(r"(?i)[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})"), 1),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})"), 0),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), 0),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{20,}"), 0),
    ("stripe-webhook-secret", re.compile(r"\bwhsec_[0-9A-Za-z]{20,}"), 0),  # a webhook's signing secret
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}"), 0),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    # HashiCorp Vault's service, batch and recovery tokens, a PyPI upload token, a DigitalOcean token (a new
    # user's trial: a Vault token was stored as written, its dot keeping it from reading as a key).
    ("vault-token", re.compile(r"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}"), 0),
    # Vault's tokens before 1.10: "s." (service) and 24 characters of base62, "b." (batch) and 80 or more,
    # mixed case with a digit (a trial: "Vault token for CI: s.AbC..." was stored as written); not a call
    # ("s.getDeclaredConstructors2", a review). A full stop may end the sentence after it.
    (
        "vault-token",
        re.compile(
            r"(?<![\w.])(?:s\.(?=[A-Za-z0-9]{0,23}[0-9])(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}[a-z])"
            r"(?![A-Za-z0-9]{0,16}[a-z]{8})"  # no word in it (a random token seldom has eight lower-case letters)
            r"[A-Za-z0-9]{24}|b\.(?=[A-Za-z0-9]{0,299}[0-9])(?=[A-Za-z0-9]{0,299}[A-Z])[A-Za-z0-9]{80,})"
            r"(?![\w\-]|\.\w)"
        ),
        0,
    ),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"), 0),
    ("digitalocean-token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b"), 0),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 0),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), 0),
    # An incoming webhook's URL is its own credential: whoever holds it posts to the channel.
    (
        "slack-webhook",
        re.compile(r"(?i)\bhooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_\-]{20,})"),
        1,
    ),
    ("memoria-token", re.compile(r"\bmem_tok_[A-Za-z0-9_\-]{40,}"), 0),  # `memoria token`'s bearer tokens
    (
        "authorization-header",
        re.compile(
            r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*[\"']?(?:basic|bearer|token|digest)\s+([^\s\"',;]{8,})"
        ),
        1,
    ),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{16,}=*)"), 1),
    # A URL scheme is short (at most 32 characters here): unbounded, "a.a.a.a..." took time in the square
    # of its length (1.5 s for 20,000 characters, the longest content), every letter a scheme's start.
    # The user may be empty ("redis://:password@cache:6379").
    ("url-password", re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{0,31}://[^\s:/@\"'<>]*:([^\s@/\"'<>]+)@"), 1),
    (
        # A setting whose compound name ends in a secret's word, which no prose spells: "GITHUB_TOKEN=...",
        # "SECRET_KEY=...", "secret_key_base: ...", "PGPASSWORD=...", an "x-api-key:" header. Not a name
        # that only contains "key" ("sort_key: created_at", "encryption_key_id: ..." stay), nor a token
        # that is no credential: a tokenizer's ("pad_token", "eos_token"), a parser's ("next_token"), a
        # cancellation's, a page's, an OpenID id token's or a form's CSRF token. The value is a literal:
        # not a call or an attribute ("= tokenizer.eos_token", "= CancellationToken()" stay).
        "password",
        re.compile(
            r"(?i)(?<![a-z0-9_\-])(?:pgpassword|mysql_pwd|x-api-key|x-auth-token"
            r"|(?:[a-z0-9]+[_\-])*(?:secret[_\-]key|api[_\-]?key|access[_\-]key|private[_\-]key|signing[_\-]key"
            r"|encryption[_\-]key|master[_\-]key)(?:[_\-](?:base|value))?"
            r"|(?:[a-z0-9]+[_\-])*(?!(?:pad|eos|bos|unk|mask|sep|cls|next|prev|page|cancel|cancellation|csrf|xsrf"
            r"|id|start|end|max|min|num|special|sentence|word|first|last)[_\-]token)[a-z0-9]+[_\-]"
            r"(?:token|secret|password|passwd|pwd))"
            # after "=" any literal; after a colon a quoted one, or one with a digit or a symbol inside it
            # ("csrf_token: required for POST", "... token: optional." stay)
            r"(?:[\"']?\s*=\s*[\"']?|[\"']?\s*:\s*[\"']"
            r"|[\"']?\s*:\s*(?=[^\s\"',;]*[0-9!@#$%^&*_+=/~\\\-]|[^\s\"',;]*\.[^\s\"',;.]))"
            r"(?![A-Za-z_][\w.]*[(\[])(?![a-z_]+(?:\.[a-z_]+)+(?![\w.]))"
            r"((?!\[REDACTED:)[^\s\"',;]{6,})"
        ),
        1,
    ),
    (
        # A user and password joined by a colon on curl's command line: "-u admin:Pa55w0rd!", "--user
        # ci:...", "-u alice@example.com:<token>" (a new user's trial: stored as written). No host follows
        # "-u", so "@" may stand in either part. The password ends before trailing punctuation; a shell
        # variable ("-u $USER:$TOKEN") is no value.
        "password",
        re.compile(
            r"\bcurl\b[^\n;&|]{0,120}?\s(?:-u\s*|--user[=\s]\s*)[\"']?[^\s:\"']+:(?!\$|//)"
            r"([^\s\"']{1,}[^\s\"'.,;:)])"
        ),
        1,
    ),
    (
        # The same after "basic auth" in prose ("basic auth harbor:Pa55w0rd!", "basic auth for the registry:
        # admin:..."); not a URL, a host and port, or a shell variable. (The "@" that would make it a URL's
        # is looked for once, right after the colon: after the value, every shorter value would look again.)
        "password",
        re.compile(
            r"(?i:\bbasic[\s-]?auth(?:entication)?(?:\s+(?:credentials|creds|login))?"
            r"(?:\s+(?:for|of|on)(?:\s+[^\s:\"']+){1,4}?)?(?:\s+(?:is|are|with))?\s*:?\s+)"
            rf"[\"']?{_USER_COLON}([^\s\"'@]{{2,}}[^\s\"'@.,;:)])"
        ),
        1,
    ),
    (
        # After "credentials" or "creds" ("DB creds admin:Pa55word99", a trial), a value with a digit or a
        # symbol: not a lookup of where a secret is ("Credentials: env:DATABASE_URL", "vault:secret/...") nor a
        # name ("repo:status", "docker:login-action").
        "password",
        re.compile(
            r"(?i:\b(?:credentials|creds)(?:\s+(?:for|of|on)(?:\s+[^\s:\"']+){1,4}?)?(?:\s+(?:is|are))?\s*:?\s+)"
            r"[\"']?(?!(?i:env|vault|ssm|secrets?|k8s|repo|docker|aws|gcp|azure|op|arn|file|keychain):)"
            rf"{_USER_COLON}"
            r"((?=[^\s\"'@]{0,99}[0-9!#%^&*+=~])[^\s\"'@]{2,}[^\s\"'@.,;:)])"
        ),
        1,
    ),
    (
        # A password on a login's command line: "docker login -u bob -p ...", "mysql -uroot -p..." (a "-p"
        # elsewhere is a port or a parent folder: "ssh -p 2222", "mkdir -p build"), within 120 characters of
        # the command and not past the next command ("docker login ghcr.io && docker run -p 8080:80" keeps its port;
        # a bound: a text of "mysql mysql ..." would otherwise take time in the square of its length).
        "password",
        re.compile(
            r"(?:\b(?:docker|podman|nerdctl|buildah)\s+login\b[^\n;&|,]{0,120}?\s-p\s+"
            r"|\bmysql(?:dump|admin|import|check)?\b[^\n;&|,]{0,120}?\s-p(?=[^\s-]))"
            r"(?![\d.]+:\d)"  # a port mapping ("-p3306:3306", "-p 127.0.0.1:5432:5432") is no password
            r"[\"']?([^\s\"']{4,})"
        ),
        1,
    ),
    (
        # A setting whose name is no word of prose: "api_key: ...", "client_secret=...", "access_token ...".
        "password",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:client_secret|api_?key|apikey|access_?token|auth_?token|refresh_?token"
            r"|private_?key)[\"']?\s*[:=]\s*[\"']?([^\s\"',;]{6,})"
        ),
        1,
    ),
    (
        # A quoted password said in prose or after a colon: the whole of what is between the quotes, its last
        # character and its spaces too ('the root password for the NAS is "Winter2024!"' left the "!",
        # 'the wifi password: "correct horse battery staple"' kept all but its first word).
        "password",
        re.compile(
            r"(?i)\b(?:password|passwd|passphrase)(?:\s+(?:for|of|on|to|in|at)(?:\s+[^\s\"',;.:]+){1,8}?)?"
            r"(?:\s+(?:is|was)\s+|\s*[:=]\s*)([\"'`])(?!\[REDACTED:)([^\"'`\n]{4,100})\1"
        ),
        2,
    ),
    (
        # A setting named by a word of prose, "password", "secret" (also "DB_PASSWORD"): after "=", after a
        # colon with no space or a tab, a quoted value, or a value that ends its line (before a "#" comment
        # too; "password: changeme" in YAML), or one followed by another setting ("{password: changeme,
        # user: app}"); not a word that ends a sentence ("... secret: update."). After ": " in the middle
        # of a sentence the value must look like one, with a digit, a symbol, a point or hyphen inside it
        # or a capital after its first letter: a sentence goes on there ("to rotate the webhook secret:
        # update the vault entry" keeps "update"; a new user's trial found it redacted). Each lookahead
        # scans the value once (no nested repeats: linear time).
        "password",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|pwd|passphrase|secret)[\"']?\s*"
            r"(?:=\s*[\"']?|:(?=[^\s])[\"']?|:\t[ \t]*[\"']?|:\s*[\"']"
            r"|:\s*(?=[^\s\"',;]*[0-9!@#$%^&*_+=/~\\]|[^\s\"',;]*[.\-][^\s\"',;.\-]|[^\s\"',;]+(?-i:[A-Z]))"
            r"|:[ \t]*(?=[^\s\"',;]{5,}[^\s\"',;.!?:](?:[ \t]*(?:\r?\n|$)|[ \t]+#|[}\]]|,\s*[\w\"']+\s*:)))"
            r"([^\s\"',;]{6,})"
        ),
        1,
    ),
    (
        # "pw=Sup3rS3cret" (a trial): a value of eight characters or more with a letter and a digit, as a short
        # name reads as other things too ("PW=1500us" a pulse width, "alias pw=playwright").
        "password",
        re.compile(
            r"(?i)(?<![a-z0-9_\-])pw[\"']?\s*[=:]\s*[\"']?"
            # (each look bounded: "pw=pw=pw=..." would otherwise scan the rest of the run from every "pw")
            r"((?=[^\s\"',;]{0,99}[A-Za-z])(?=[^\s\"',;]{0,99}[0-9])[^\s\"',;]{7,99}[^\s\"',;.!?:])(?![^\s\"',;])"
        ),
        1,
    ),
    (
        # In prose, a login with its password: "orders_db login is orders_app with password hunter2hunter2"
        # (a new user's trial: stored as written). After "with", "using", "via" or a user's name and "and"
        # only, and a value with a letter and a digit or a symbol ("with password rotation" stays).
        "password",
        re.compile(
            r"(?i)(?:\b(?:with|using|via)|\b(?:user(?:name)?|login)\s+[^\s\"',;]+\s+and)\s+(?:the\s+)?"
            r"(?:password|passwd|passphrase)\s+[\"'(]?"
            r"((?=[^\s\"',;()\[\]]*[A-Za-z])(?=[^\s\"',;()\[\]]*[0-9!@#$%^&*_+=])[^\s\"',;()\[\]]{5,}"
            r"[^\s\"',;.!?:()\[\]])(?![\w-])"
        ),
        1,
    ),
    (
        # A user's name, a comma, then the password: "user admin, password Tr0ub4dor&3" (a trial), a value
        # with a letter and a digit ("For the user profile, password min_length is 12" stays).
        "password",
        re.compile(
            r"(?i)\b(?:user(?:name)?|login)\s+[^\s\"',;]+,\s+(?:the\s+)?(?:password|passwd|passphrase)\s+[\"'(]?"
            r"((?=[^\s\"',;()\[\]]{0,99}[A-Za-z])(?=[^\s\"',;()\[\]]{0,99}[0-9])[^\s\"',;()\[\]]{5,}"
            r"[^\s\"',;.!?:()\[\]])(?![\w-])"
        ),
        1,
    ),
    (
        # A command line's flag: "--password hunter2", "--api-key=...", "--token abc123".
        "password",
        re.compile(
            r"(?i)(?<![\w-])--(?:password|passwd|passphrase|secret|token|api-?key|access-?token)(?:=|\s+)"
            r"[\"']?([^\s\"',;]{4,})"
        ),
        1,
    ),
    (
        # In prose, a key, token or secret said with its value: "The ops console API key is 9f8e7d6c...", "the
        # CI token for the deploy bot was 3fa85f64-...", and a key or token named right before its value:
        # "API key sk-live-abc123...", "token abc123def456ghi789jkl" (a new user's trial: both were stored as
        # written). The value must look like one (``_CREDENTIAL``); "the secret" right before a value names
        # what a commit leaked more often than the secret ("leaked the secret 9fceb02...").
        "secret",
        re.compile(
            rf"(?i)\b(?:{_KEY_WORDS}|secret|credential|passkey)s?"
            r"(?:\s+(?:for|of|on|to|in|at)(?:\s+[^\s\"',;:=]+){1,8}?)?"
            rf"(?:\s+(?:is|was)(?:\s+now)?\s+|\s*[:=]\s*)[\"'`(]?({_CREDENTIAL})"
        ),
        1,
    ),
    (
        "secret",
        re.compile(
            rf"(?i)\b(?:{_KEY_WORDS})s?\s+[\"'`(]?(?![0-9a-f]{{40}}(?![\w-]))(?!{_UUID})({_CREDENTIAL})"
        ),
        1,
    ),
    (
        # In prose: "the db password is hunter2xyz", "the admin password for staging is hunter2" (up to
        # eight words of what it is for: "Alice's laptop", "db.prod.internal"). The value must hold a digit or a symbol other than a hyphen or a
        # slash ("the password is required", "is case-sensitive", "is stored/rotated" stay), and ends
        # before trailing punctuation ("... is hunter2xyz." keeps its full stop).
        "password",
        re.compile(
            r"(?i)\b(?:password|passwd|passphrase)(?:\s+(?:for|of|on|to|in|at)(?:\s+[^\s\"',;.:]+(?:['.][^\s\"',;.:]+)*){1,8}?)?"
            # (after a colon, not a variable's name or a date: "Password for Postgres: POSTGRES_PASSWORD in .env")
            r"(?:\s+(?:is|was)\s+|(?<=[^\s\"',;.:])\s*:\s+(?![$%]|(?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w-])"
            r"|\d{4}-\d{2}-\d{2}(?![\w-])))[\"'(]?"
            r"((?=[^\s\"',;()\[\]]*[0-9!@#$%^&*_+=])[^\s\"',;()\[\]]{5,}[^\s\"',;.!?:()\[\]]"
            # or a passphrase of four words or more of four letters or more, joined by hyphens
            # ("correct-horse-battery-staple"; "case-sensitive", "one-time-use-only" stay)
            r"|[a-z]{4,}(?:-[a-z]{4,}){3,})(?![\w-])"
        ),
        1,
    ),
)


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Redacted:
    text: str
    found: tuple[tuple[str, int], ...] = field(default=())  # (kind, how many), in pattern order

    @property
    def count(self) -> int:
        return sum(number for _, number in self.found)

    def summary(self) -> str:
        """ "2 aws-access-key, 1 jwt" (never the values)."""
        return ", ".join(f"{number} {kind}" for kind, number in self.found)


def redact(text: str) -> Redacted:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, and what was found."""
    found: Counter[str] = Counter()
    for kind, pattern, group in _PATTERNS:

        def substitute(match: re.Match[str], kind: str = kind, group: int = group) -> str:
            if match.group(group).startswith("[REDACTED:"):  # replaced by a more specific pattern already
                return match.group(0)
            found[kind] += 1
            whole, offset = match.group(0), match.start(0)
            return whole[: match.start(group) - offset] + _marker(kind) + whole[match.end(group) - offset :]

        text = pattern.sub(substitute, text)
    return Redacted(text, tuple(found.items()))


def redact_text(text: str) -> str:
    return redact(text).text


class RedactingFilter(logging.Filter):
    """A log filter that redacts each record's rendered message (and drops its arguments), so a secret in
    a logged query, error or exception text never reaches a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            text = redact_text(str(record.exc_info[1]))
            if text != str(record.exc_info[1]):
                record.exc_text = f"{type(record.exc_info[1]).__name__}: {text}"
                record.exc_info = None
        return True
