import logging

import pytest

from retrieval.redaction import RedactingFilter, redact

# Shaped like the real thing, made up for the test (never valid credentials).
AWS_KEY_ID = "AKIA" + "Z7Q2X5V8N3M6K4J1"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiJhbGljZSIsImV4cCI6MTl9" + ".Zm9vYmFyYmF6cXV4MTIzNDU2"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1x\nq2w3e4r5t6y7u8i9o0p\n-----END RSA PRIVATE KEY-----"

CASES = [
    (f"the deploy user has key {AWS_KEY_ID} in CI", "aws-access-key", AWS_KEY_ID),
    (f"aws_secret_access_key = {AWS_SECRET}", "aws-secret-key", AWS_SECRET),
    (f"session cookie was {JWT} before logout", "jwt", JWT),
    (f"key file:\n{PEM}\nrotate it yearly", "private-key", "MIIEowIBAAKCAQEA7v1x"),
    (
        "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://api",
        "authorization-header",
        "abcdef0123456789abcdef",
    ),
    (
        "send it with bearer Zm9vYmFyYmF6MTIzNDU2Nzg5MA== as the header",
        "bearer-token",
        "Zm9vYmFyYmF6MTIzNDU2Nzg5MA==",
    ),
    ("DATABASE_URL=postgres://app:hunter2secret@db.internal:5432/app", "url-password", "hunter2secret"),
    ("the staging password: Tr0ub4dor&3x is shared", "password", "Tr0ub4dor&3x"),
    ("db:\n  user: app\n  password: changeme\n  host: db.internal", "password", "changeme"),  # a line's end
    ('{"password": "changeme", "user": "app"}', "password", "changeme"),  # quoted
    ("client_secret: abc-def-ghi for the bot", "password", "abc-def-ghi"),  # a symbol in it
    ("api_key=abcdefgh in the env file", "password", "abcdefgh"),
    ("password : Tr0ub4dor&3x", "password", "Tr0ub4dor&3x"),  # a space before the colon (.properties)
    ("secret\t: s3cr3t-value", "password", "s3cr3t-value"),
    ("db:\n  password: changeme  # the default\n", "password", "changeme"),  # a YAML comment after it
    ("{password: changeme, user: app}", "password", "changeme"),  # a flow mapping
    ("password:\tchangeme\tnext", "password", "changeme"),  # tab-separated
    ("access_token: abcdefghijklmnop more", "password", "abcdefghijklmnop"),  # no word of prose
    ("run it with --password hunter2 --user app", "password", "hunter2"),  # a command line's flag
    ("DB_PASSWORD=hunter2xyz in the env", "password", "hunter2xyz"),
    ("POSTGRES_PASSWORD: s3cretpw", "password", "s3cretpw"),
    (
        "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + " for the bot",
        "github-token",
        "a1B2c3D4e5F6g7H8",
    ),
    (
        "maps key AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q" + " in the app",
        "google-api-key",
        "SyA1b2C3d4E5f6G7",
    ),
    ("slack xoxb-" + "123456789012-abcdefABCDEF" + " posts alerts", "slack-token", "123456789012-abcdef"),
    ("stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + " is prod", "stripe-key", "4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "anthropic sk-ant-" + "api03-abcdefghijklmnopqrstuv" + " in .env",
        "anthropic-key",
        "api03-abcdefghijklmnop",
    ),
    ("AccountKey=" + "a" * 86 + "== for blob storage", "azure-account-key", "a" * 86),
    ("the CI token mem_tok_" + "AbC-dEf_" * 6 + " is in the vault", "memoria-token", "AbC-dEf_AbC-dEf_"),
    (f"export AWS_SECRET_ACCESS_KEY {AWS_SECRET}", "aws-secret-key", AWS_SECRET),
    (f"the aws secret key: {AWS_SECRET}", "aws-secret-key", AWS_SECRET),
    (f"the bot's AWS secret key is {AWS_SECRET}.", "aws-secret-key", AWS_SECRET),
    (f"rotate the CI bot's secret {AWS_SECRET} monthly", "aws-secret-key", AWS_SECRET),
    ("the db password is hunter2xyz", "password", "hunter2xyz"),
    ("The admin password for staging is hunter2", "password", "hunter2"),  # what it is for, then the value
    ("the password of the admin account on staging was Tr0ub4dor&3", "password", "Tr0ub4dor&3"),
    ("the password for Alice's laptop is Hunter22!", "password", "Hunter22"),
    ("the password for db.prod.internal is Hunter22!", "password", "Hunter22"),
    ("The root password for the new staging box at Hetzner is Hunter22!", "password", "Hunter22"),
    (f"pass --aws-secret-access-key {AWS_SECRET} to the CLI", "aws-secret-key", AWS_SECRET),
    # A new user's trial (stop 73): each of these was stored as written.
    ("SECRET_KEY=django-insecure-8x!k2m#p0q9z", "password", "django-insecure-8x"),
    ("secret_key_base: 9f8e7d6c5b4a39281706", "password", "9f8e7d6c5b4a39281706"),
    ("PGPASSWORD=Hunter22pw psql -h db", "password", "Hunter22pw"),
    ("GITHUB_TOKEN=abc123def456ghi789 in CI", "password", "abc123def456ghi789"),
    ("curl -H 'x-api-key: 9f8e7d6c5b4a3928' https://api", "password", "9f8e7d6c5b4a3928"),
    ("REDIS_URL=redis://:Hunter22pw@cache:6379/0", "url-password", "Hunter22pw"),  # no user name
    ("The wifi password is correct-horse-battery-staple.", "password", "correct-horse-battery-staple"),
    ("docker login -u bob -p Hunter22pw registry.example.com", "password", "Hunter22pw"),
    ("mysql -uroot -pHunter22pw app", "password", "Hunter22pw"),
    (
        "alerts post to https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/" + "x1Y2z3" * 4,
        "slack-webhook",
        "x1Y2z3x1Y2z3",
    ),
    ("HF token hf_" + "aB3" * 12 + " for the model hub", "huggingface-token", "aB3aB3aB3aB3"),
    ("mail via SG." + "aB3_" * 5 + "." + "cD4-" * 10 + " key", "sendgrid-key", "aB3_aB3_aB3_"),
    # A new user's trial (stop 102): keys and tokens said in prose with their values were stored as written.
    ("The ops console API key is 9f8e7d6c5b4a39281726354453627181", "secret", "9f8e7d6c5b4a3928"),
    ("Contact the DBA, API key sk-live-abc123def456ghi789jkl000 for the ops console.", "secret", "abc123def"),
    ("the CI token for the deploy bot was 3fa85f64-5717-4562-b3fc-2c963f66afa6.", "secret", "3fa85f64-5717"),
    ("token abc123def456ghi789jkl", "secret", "abc123def456"),
    ("The API key is ABCD1234EFGH5678IJKL", "secret", "ABCD1234EFGH"),
    # A review: after a colon or "=", with "now", and named in the plural.
    ("The staging API key: 9f8e7d6c5b4a39281726354453627181", "secret", "9f8e7d6c5b4a3928"),
    ("API key for staging = 9f8e7d6c5b4a39281726354453627181", "secret", "9f8e7d6c5b4a3928"),
    ("The API key is now 9f8e7d6c5b4a39281726354453627181", "secret", "9f8e7d6c5b4a3928"),
    # Keys that are credentials by their name, and a Stripe webhook's signing secret.
    ("The deploy key is xK9mQ2pL7vR4tN8wZ3 for the release bot.", "secret", "xK9mQ2pL7vR4tN8wZ3"),
    ("license key: ABCD1-EFGH2-IJKL3-MNOP4", "secret", "ABCD1-EFGH2"),
    ("the master key 7f3a9c2e1b8d4f6a0c5e opens the backups", "secret", "7f3a9c2e1b8d4f6a"),
    ("Stripe signs webhooks with whsec_4f8a9B2c3d1e7f6a5b0cX9y8", "stripe-webhook-secret", "4f8a9B2c3d1e7"),
    # A second trial: a login with its password, and what an AWS secret key is for before "is".
    (
        "orders_db login is orders_app with password hunter2hunter2, only from the bastion.",
        "password",
        "hunter2",
    ),
    (
        f"AWS secret access key for the backup job is {AWS_SECRET} and rotated yearly",
        "aws-secret-key",
        AWS_SECRET,
    ),
    # A fifth trial: a Vault token (its dot kept it from reading as a key), a user and password joined by a
    # colon on curl's command line or after "basic auth", a password after "and", after "... for X:", "pw=".
    ("The vault root token is hvs.CAESIJlU9JMYEhOPYv4igdhm9PnZ", "vault-token", "CAESIJlU9JMYEhOPYv4ig"),
    ("check it: curl -u admin:Pa55w0rd! https://api.example.com/admin", "password", "Pa55w0rd"),
    ("Use basic auth harbor:Pa55w0rd! against the admin API", "password", "Pa55w0rd"),
    ("login with user admin and password hunter2", "password", "hunter2"),
    ("the password for the staging admin: hunter2", "password", "hunter2"),
    ("pw=Sup3rS3cret", "password", "Sup3rS3cret"),
]


@pytest.mark.parametrize(("text", "kind", "secret"), CASES, ids=[case[1] for case in CASES])
def test_each_kind_of_secret_is_replaced_by_its_marker_and_reported_without_its_value(text, kind, secret):
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert dict(result.found) == {kind: 1}
    assert secret not in result.summary() and kind in result.summary()


def test_the_text_around_a_secret_is_kept_as_it_was():
    result = redact(f"The CI key {AWS_KEY_ID} lives in vault, path ci/aws.")
    assert result.text == "The CI key [REDACTED:aws-access-key] lives in vault, path ci/aws."
    url = redact("clone https://deploy:s3cr3tPa55@git.example.com/repo.git")
    assert url.text == "clone https://deploy:[REDACTED:url-password]@git.example.com/repo.git"


@pytest.mark.parametrize(
    "prose",
    [
        "The password policy requires 12 characters and a rotation every 90 days.",
        "We use a token bucket rate limiter in front of the API.",
        "He was the bearer of bad news about the release.",
        "The secret to fast builds is caching node_modules.",
        "Authorization is handled by the gateway, not the service.",
        "Postgres runs at postgres://db.internal:5432/app with no credentials in the URL.",
        "The commit eyJ is not a token; nor is sk-short.",
        "The password is required and the password is stored in vault, not here.",
        "The secret is that the release process has 40 steps nobody reads.",
        "Keep the secret key in the vault; the secret is rotated every 90 days.",
        "The password is case-sensitive, re-used nowhere and auto-generated; it is stored/rotated by CI.",
        "The passphrase is sha-hashed and user-defined.",
        "The password for staging is required; the password for the admin UI is rotated by CI.",
        "Reverted the commit that leaked the secret 9fceb02d0ae598e95dc970b74767f19372d61af8 last week.",
        # A new user's trial: "update" was redacted as the secret's value.
        "To rotate the Stripe webhook secret: update /orderly/prod/stripe in the vault and redeploy.",
        "The one rule about the password: rotate it whenever someone leaves.",
        "Then rotate the webhook secret: update.",
        "Pass --password-file /etc/app/pw to the CLI.",
        # Settings that only look like secrets, and "-p" as a port or a parent folder.
        "Set max_tokens=4096 and sort_key: created_at; primary_key: id_column.",
        "The csrf_token: required for every POST.",
        "ssh -p 2222 deploy@host, docker run -p 8080:80 app, mkdir -p build, mysql -P 3306 -u app -p app_db",
        "The wifi password is case-sensitive and auto-generated.",
        # A review: tokens that are no credential, values that are code, and "-p" after another command.
        "tokenizer.pad_token = tokenizer.eos_token; next_token = self.lexer.peek()",
        '{"pad_token": "<|endoftext|>", "mask_token": "[MASK]"}',
        'cancel_token = CancellationToken() and csrf_token = request.form["csrf_token"]',
        "The id_token: optional. The encryption_key_id: alias/app-data",
        "docker login ghcr.io && docker run -p 8080:80 ghcr.io/acme/api",
        "podman login quay.io; podman run -d -p 5432:5432 postgres",
        "The mysql service: docker run -d -p3306:3306 mysql:8",
        "The password is one-time-use-only for now; it is re-generated-every-night.",
        # Keys and tokens in prose whose value is no key: a word, a size, a commit, a version.
        "Embedding tokens are 2048-dimensional vectors; the refresh token is valid for 3600 seconds.",
        "The API key is stored in Vault under ops/2024/keys; we pass the API key v2 header.",
        "Reverted the commit that leaked the token 9fceb02d0ae598e95dc970b74767f19372d61af8 last week.",
        "The access key rotation-policy-2024 applies; the token ttl2024 expires.",
        # A review: a UUID naming a row, a version, an API version, a variable's name, a file name, words.
        "The access token 3fa85f64-5717-4562-b3fc-2c963f66afa6 row was deleted.",
        "The token is 1.2.3-beta.4+build.20240101; the API key is v2024-01-01-preview for Azure.",
        "The API key is AWS_SECRET_ACCESS_KEY_2024_PROD in the env.",
        "The private key is id_ed25519.pub-2024-backup.pem; the client secret is base64-encoded-v2.",
        "Log in with password rotation enabled, or sign in with the password from 1Password.",
        "The AWS secret access key is rotated every 90 days.",
        # Keys that are no credential: a primary, sort or object key, and a credential's name without one.
        "The primary key is the id column; the sort key is created_at; the S3 key is backups/2024/11/29/db.tar.gz",
        "The deploy key is stored in the vault; the session key expires after 3600 seconds.",
        # A user and password by colon that are no value: shell variables, a URL, a port; "and password" words.
        "curl -u $USER:$TOKEN https://api.example.com and curl -u admin https://api.example.com",
        "Basic auth https://registry.example.com:8443/v2 is on; basic auth db.internal:5432 too.",
        "The password for the admin UI: rotated by CI. Users and password rotation are audited.",
    ],
)
def test_ordinary_prose_about_secrets_is_left_alone(prose):
    result = redact(prose)
    assert result.text == prose and result.count == 0


def test_a_key_pair_written_in_prose_loses_both_halves():
    result = redact(f"Our AWS key for the CI bot is {AWS_KEY_ID} and secret {AWS_SECRET}")
    assert (
        result.text
        == "Our AWS key for the CI bot is [REDACTED:aws-access-key] and secret [REDACTED:aws-secret-key]"
    )
    assert dict(result.found) == {"aws-access-key": 1, "aws-secret-key": 1}


def test_a_quoted_password_is_replaced_whole_with_its_last_character_and_its_spaces():
    """A trial: the prose pattern ends a value before trailing punctuation, which left a quoted password's
    "!" visible, and a quoted passphrase kept all but its first word."""
    assert (
        redact('The NAS root password is "Winter2024!"').text
        == 'The NAS root password is "[REDACTED:password]"'
    )
    assert (
        redact("wifi password: 'correct horse battery staple'").text == "wifi password: '[REDACTED:password]'"
    )
    assert redact('the password field says "Enter password"').count == 0  # no "is" or colon before it


def test_a_vault_token_of_the_older_form_is_replaced_but_not_a_file_or_a_short_name():
    token = "s." + "AbCdEfGh1jKlMnOpQrStUvWx"
    assert redact(f"Vault token for CI: {token}").text == "Vault token for CI: [REDACTED:vault-token]"
    assert redact(f"The token is {token}.").text == "The token is [REDACTED:vault-token]."  # a sentence's end
    assert redact(f"see {token}.txt, s.py and s.T0ken_name").count == 0


def test_a_password_in_prose_keeps_the_punctuation_after_it():
    assert redact("The db password is hunter2xyz.").text == "The db password is [REDACTED:password]."
    assert redact("(the password is hunter2xyz)").text == "(the password is [REDACTED:password])"


def test_several_secrets_are_counted_by_kind_and_redacting_twice_changes_nothing_more():
    text = f"{AWS_KEY_ID} and {AWS_KEY_ID[:-1]}X and {JWT}"
    once = redact(text)
    assert dict(once.found) == {"jwt": 1, "aws-access-key": 2}
    twice = redact(once.text)
    assert twice.text == once.text and twice.count == 0


def test_a_private_key_cut_off_before_its_end_line_is_still_removed():
    truncated = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAEbm9uZQ"
    assert redact(truncated).text == "[REDACTED:private-key]"


def test_the_log_filter_redacts_messages_arguments_and_exceptions():
    record = logging.LogRecord(
        "memoria", logging.INFO, __file__, 1, "query was %s", (f"key {AWS_KEY_ID}",), None
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "query was key [REDACTED:aws-access-key]"
    try:
        raise ValueError(f"bad token {JWT}")
    except ValueError as exc:
        failing = logging.LogRecord(
            "memoria", logging.ERROR, __file__, 1, "failed", (), (ValueError, exc, None)
        )
    RedactingFilter().filter(failing)
    formatted = logging.Formatter("%(message)s").format(failing)
    assert JWT not in formatted and "[REDACTED:jwt]" in formatted


def test_a_long_token_after_a_setting_is_read_in_one_pass():
    """A review: a lookahead with nested repeats took 180 s on 100 KB ("the api_key: bbbb..."), and a
    remember redacts before it checks the content's length. Each lookahead now scans the value once."""
    long_word = "a" * 1_000_000
    assert redact(f"password: {long_word} x").text == f"password: {long_word} x"  # no digit or symbol in it
    assert redact(f"the api_key: {long_word}").text == "the api_key: [REDACTED:password]"


def test_a_long_run_after_a_user_and_password_or_a_short_name_is_read_in_one_pass():
    """A review: the "@" that makes "user:password@host" a URL's was looked for after each length the password
    could have, so "curl -u a:xxxx...@" took time in the square of its length (3 s for 20,000 characters);
    "pw=pw=pw=..." scanned the rest of the run from every "pw". At 200,000 characters each would take minutes."""
    run = "x" * 200_000
    assert redact(f"curl -u a:{run}@").text == "curl -u a:[REDACTED:password]"  # no host after -u
    assert redact(f"basic auth u:{run}@").text == f"basic auth u:{run}@"  # a URL's user and password
    assert redact("pw=" * 70_000).count == 0  # no digit in it


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("curl -u alice@example.com:AtlToken9xYz https://acme.atlassian.net", "AtlToken9xYz"),
        ("curl -u admin:P@ssw0rd https://registry.example.com", "P@ssw0rd"),
        ('curl -u "$USER:Pa55w0rd" https://api.example.com', "Pa55w0rd"),
        ("basic auth for the registry: admin:Pa55w0rd!", "Pa55w0rd"),
        ("DB creds admin:Pa55word99 on db.internal", "Pa55word99"),
        ("credentials for the registry: ci:Tok3nTok3n", "Tok3nTok3n"),
        ("The staging login is user admin, password Tr0ub4dor&3!", "Tr0ub4dor&3"),
    ],
)
def test_a_password_joined_to_its_user_by_a_colon_is_replaced_in_the_forms_people_write(text, secret):
    result = redact(text)
    assert secret not in result.text and dict(result.found) == {"password": 1}


@pytest.mark.parametrize(
    "prose",
    [
        # A review: identifiers after "and password", a variable's name or a date after "password for X:",
        # other things called PW.
        "OAuth and password grant_types are enabled; add rate limits to login and password reset_request.",
        "Check username and password v1.2.3 compatibility.",
        "Password for Postgres: POSTGRES_PASSWORD in .env; password for the CI user: ${CI_PASSWORD}.",
        "We rotated the password for all service accounts: 2024-05-01.",
        "Servo PW=1500us; alias pw=playwright; PW: GitHub Actions runs the e2e suite.",
        # A review: where a credential is looked up, a scope's name, a setting after a user's profile, a call.
        "Credentials: env:DATABASE_URL; DB credentials: vault:secret/data/orders-db.",
        "The GitHub credentials with repo:status scope; Docker creds for ghcr: docker:login-action.",
        "For the user profile, password min_length is 12; call s.getDeclaredConstructors2 on it.",
    ],
)
def test_words_next_to_the_new_forms_that_are_no_secret_are_left_alone(prose):
    assert redact(prose).text == prose
