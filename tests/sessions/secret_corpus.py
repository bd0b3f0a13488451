"""A corpus of secret formats and of look-alikes that are not secrets (decision 0052).

Every secret is made up here, in the documented shape of its vendor's format (prefix,
alphabet, length), from a seeded generator: none is a real credential. ``secrets(seed)``
gives other values of the same shapes for another seed, so two corpora differ only in their
secrets.
"""

from __future__ import annotations

import base64
import random
import string

__all__ = ["LOOK_ALIKES", "secrets"]

_UP, _LOW, _DIG = string.ascii_uppercase, string.ascii_lowercase, string.digits
_ALNUM = _UP + _LOW + _DIG
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def secrets(seed: int) -> list[tuple[str, str, str]]:
    """(format, secret, text holding it): the text is what a transcript line would show."""
    rnd = random.Random(seed)

    def r(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    def pw() -> str:  # a made-up password: letters, digits, a symbol
        return r(_LOW, 5) + r(_DIG, 3) + "-" + r(_UP, 3) + r(_LOW, 3)

    aws_id, aws_secret = "AKIA" + r(_UP + _DIG, 16), r(_B64, 40)
    pem = "\n".join(r(_B64, 64) for _ in range(4))
    b64user = base64.b64encode(f"deploy:{pw()}".encode()).decode()
    jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + r(_ALNUM, 40) + "." + r(_ALNUM, 43)
    out: list[tuple[str, str, str]] = []

    def add(name: str, secret: str, text: str) -> None:
        out.append((name, secret, text.replace("SECRET", secret)))

    add("aws access key id", aws_id, "aws configure set aws_access_key_id SECRET")
    add("aws credentials file", aws_secret, "[default]\naws_secret_access_key = SECRET\n")
    add("aws secret beside its key id", r(_B64, 40), f"use {aws_id} SECRET for the bucket")
    add("aws session token", r(_B64, 120), "aws_session_token = SECRET")
    add("github classic pat", "ghp_" + r(_ALNUM, 36), "git push with SECRET")
    add("github oauth token", "gho_" + r(_ALNUM, 36), "GH token SECRET")
    add("github fine-grained pat", "github_pat_" + r(_ALNUM, 22) + "_" + r(_ALNUM, 59), "SECRET")
    add("gitlab pat", "glpat-" + r(_ALNUM, 20), "gitlab SECRET")
    add(
        "slack bot token", "xoxb-" + r(_DIG, 12) + "-" + r(_DIG, 13) + "-" + r(_ALNUM, 24), "SECRET"
    )
    add("slack user token", "xoxp-" + r(_DIG, 12) + "-" + r(_DIG, 12) + "-" + r(_HEX, 32), "SECRET")
    add(
        "slack webhook",
        "T" + r(_UP + _DIG, 10) + "/B" + r(_UP + _DIG, 10) + "/" + r(_ALNUM, 24),
        "curl -X POST https://hooks.slack.com/services/SECRET -d '{}'",
    )
    add(
        "slack app token",
        "xapp-1-A" + r(_UP + _DIG, 10) + "-" + r(_DIG, 13) + "-" + r(_HEX, 64),
        "SLACK_APP_TOKEN is SECRET",
    )
    add("stripe secret key", "sk_live_" + r(_ALNUM, 24), "stripe.api_key = 'SECRET'")
    add("stripe restricted key", "rk_live_" + r(_ALNUM, 24), "key SECRET")
    add("stripe webhook secret", "whsec_" + r(_ALNUM, 32), "endpoint secret is SECRET")
    add("sendgrid", "SG." + r(_ALNUM, 22) + "." + r(_ALNUM + "-_", 43), "sendgrid SECRET")
    add("hugging face", "hf_" + r(_ALNUM.strip(_DIG), 34), "HF token SECRET")
    add(
        "azure storage connection string",
        r(_B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=SECRET;EndpointSuffix=core",
    )
    add(
        "azure sas signature",
        r(_ALNUM, 43) + "%3D",
        "https://acme.blob.core.windows.net/c?sv=2022&sig=SECRET",
    )
    add("redis url password", pw(), "REDIS_URL=redis://:SECRET@cache.internal:6379/0")
    add("postgres url password", pw(), "postgresql://app:SECRET@db.internal:5432/app")
    add("mongodb srv password", pw(), "mongodb+srv://admin:SECRET@cluster0.example.net/db")
    add(".env DB_PASS", pw(), "DB_PASS=SECRET")
    add(".env API_KEY", r(_ALNUM, 32), "API_KEY=SECRET")
    add("export TOKEN", r(_ALNUM, 40), "export SERVICE_TOKEN=SECRET")
    add("PGPASSWORD", pw(), "PGPASSWORD=SECRET psql -h db -U app")
    add("authorization basic", b64user, "-H 'Authorization: Basic SECRET'")
    add("authorization bearer", r(_ALNUM, 40), "Authorization: Bearer SECRET")
    add("curl -u", "deploy:" + pw(), "curl -u SECRET https://api.example.com/v1/x")
    add("mysql -p", pw(), "mysql -u root -pSECRET app < dump.sql")
    add("docker login -p", pw(), "docker login -u ci -p SECRET registry.example.com")
    add("docker login --password", pw(), "docker login --username ci --password SECRET")
    add("sshpass -p", pw(), "sshpass -p SECRET ssh deploy@10.0.0.5")
    add("--token= flag", r(_ALNUM, 32), "cli deploy --token=SECRET --yes")
    add("x-api-key header", r(_ALNUM, 40), "curl -H 'x-api-key: SECRET' https://api.example.com")
    add("api-key header (no curl)", r(_ALNUM, 40), "headers: {'api-key': 'SECRET'}")
    add("google oauth client secret", "GOCSPX-" + r(_ALNUM + "-_", 28), "client_secret: SECRET")
    add("google api key", "AIza" + r(_ALNUM + "-_", 35), "maps key SECRET")
    add("vault service token", "hvs." + r(_ALNUM + "_-", 95), "VAULT_TOKEN is SECRET")
    add("digitalocean pat", "dop_v1_" + r(_HEX, 64), "doctl auth init -t SECRET")
    add("shopify access token", "shpat_" + r(_HEX, 32), "shopify SECRET")
    add("age secret key", "AGE-SECRET-KEY-1" + r(_BECH32, 58), "# key:\nSECRET\n")
    add("anthropic api key", "sk-ant-api03-" + r(_ALNUM + "-_", 93) + "AA", "ANTHROPIC key SECRET")
    add(
        "openai project key",
        "sk-proj-" + r(_ALNUM + "-_", 58) + "T3BlbkFJ" + r(_ALNUM, 58),
        "SECRET",
    )
    add("npm token", "npm_" + r(_ALNUM, 36), "//registry.npmjs.org/:_authToken=SECRET")
    add(
        "pypi upload token", "pypi-AgEIcHlwaS5vcmc" + r(_ALNUM + "-_", 70), "twine upload -p SECRET"
    )
    add("jwt", jwt, "Cookie: session=SECRET")
    add(
        "rsa private key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{pem}\n-----END RSA PRIVATE KEY-----",
        "id_rsa:\nSECRET\n",
    )
    add("google oauth access token", "ya29.a0" + r(_ALNUM + "-_", 120), "token:\nSECRET\n")
    add(
        "cookie header",
        r(_ALNUM, 32),
        "curl -H 'Cookie: sessionid=SECRET; csrftoken=abc' https://app.example.com/admin",
    )
    add("set-cookie header", r(_HEX, 40), "< Set-Cookie: sid=SECRET; Path=/; HttpOnly; Secure")
    # decision 0118: a cookie given to curl by flag
    add(
        "curl -b cookie", r(_ALNUM, 32), "curl -sS -b 'sessionid=SECRET' https://app.example.com/me"
    )
    add("curl --cookie", r(_HEX, 40), 'curl --cookie "sid=SECRET; theme=dark" https://x.example')
    add("pwd= argument", pw(), "pyodbc.connect(server=db, uid=app, pwd=SECRET)")
    add("MY_PWD=", pw(), "export MY_PWD=SECRET")
    # decision 0113: gitleaks' global allowlist let through any secret holding "false" or
    # ending in "null" (a regex without its group: ^true|false|null$)
    add(".env password holding 'false'", r(_UP, 3) + "9false" + r(_ALNUM, 4), "DB_PASSWORD=SECRET")
    add("url password holding 'False'", "Falsetto" + r(_DIG, 2), "postgres://app:SECRET@db/x")
    add("bearer token ending in 'null'", r(_ALNUM, 30) + "null", "Authorization: Bearer SECRET")
    add("password in json", pw(), '{"user": "app", "password": "SECRET"}')
    add("password in yaml", pw(), "database:\n  password: SECRET\n")
    add("password literal in python", pw(), 'password = "SECRET"')
    add("databricks token", "dapi" + r(_HEX, 32), "databricks SECRET")
    add("twilio api key", "SK" + r(_HEX, 32), "twilio SECRET")
    add("sentry user token", "sntryu_" + r(_HEX, 64), "SECRET")
    add("grafana service account", "glsa_" + r(_ALNUM, 32) + "_" + r(_HEX, 8), "SECRET")
    add("pulumi token", "pul-" + r(_HEX, 40), "pulumi login with SECRET")
    add("postman api key", "PMAK-" + r(_HEX, 24) + "-" + r(_HEX, 34), "SECRET")
    add("doppler token", "dp.pt." + r(_ALNUM, 43), "doppler SECRET")
    add("linear api key", "lin_api_" + r(_ALNUM, 40), "SECRET")
    add("notion token", "ntn_" + r(_DIG, 11) + r(_ALNUM, 35), "SECRET")
    add("perplexity key", "pplx-" + r(_ALNUM, 48), "SECRET")
    add("rubygems key", "rubygems_" + r(_HEX, 48), "SECRET")
    add("heroku v2 key", "HRKU-AA" + r(_ALNUM + "_-", 58), "SECRET")
    add("new relic user key", "NRAK-" + r(_UP + _DIG, 27), "newrelic key: SECRET")
    add("fly.io token", "fo1_" + r(_ALNUM + "_-", 43), "SECRET")
    add("planetscale password", "pscale_pw_" + r(_ALNUM, 43), "SECRET")
    add("prefect key", "pnu_" + r(_ALNUM, 36), "SECRET")
    add(
        "telegram bot token",
        r(_DIG, 10) + ":AA" + r(_ALNUM + "_-", 33),
        "TELEGRAM_BOT_TOKEN=SECRET",
    )
    add("cloudflare origin ca key", "v1.0-" + r(_HEX, 24) + "-" + r(_HEX, 146), "SECRET")
    add(
        "gcp service account key",
        "-----BEGIN PRIVATE KEY-----\n" + pem + "\n-----END PRIVATE KEY-----\n",
        '{"type": "service_account", "private_key": "SECRET"}',
    )
    # last: a key block without its end is redacted to the end of the text
    add(
        "openssh private key, cut off",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{pem}",
        "cat ~/.ssh/id_ed25519\nSECRET",
    )
    return out


# Code and identifiers that look like secrets and are not: they must stay as they are.
LOOK_ALIKES = [
    "password: SecretStr",
    'api_key = os.environ["X"]',
    "token: str",
    "api_key: SecretStr = Field(default=None)",
    "token = sign(user)",
    "password = getpass.getpass()",
    "api_key=self.config.api_key",
    '"input_tokens": 18210, "max_tokens": 4096',
    "tokenizer: gpt2",
    "DB_PASSWORD=${DB_PASSWORD}",
    "Authorization: Bearer $GITHUB_TOKEN",
    "echo $CR_PAT | docker login ghcr.io -u octo --password-stdin",
    "commit 3f9a1c2e7b4d8f0a6c5e9b1d2f3a4c5e6b7d8f9a",
    "session 7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f",
    "entry 403ba775847eb9bddc331751d9ac45afac96bb80e2a4c682a9126067d2eb5ad1",
    'data = base64.b64encode(b"hello world").decode()  # aGVsbG8gd29ybGQ=',
    "git clone https://github.com/gitleaks/gitleaks.git",
    "the token budget is spent; refresh_token_url: https://auth.example.com/token",
    "def rotate_secret(secret_id: str) -> None:",
    "PWD=/home/alice/src/api OLDPWD=/tmp",
    "cd /srv/app && pwd",
    "cookie_jar = http.cookiejar.CookieJar()",
    "curl -sS -b cookies.txt -c cookies.txt https://example.com/login",
    "git checkout -b fix/cookie=handling",
    "DEBUG=false\nCACHE=null",
]
