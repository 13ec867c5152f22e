"""Well-known secret files: names that hold credentials by convention, whatever is in them today.

A call that reads or changes such a file asks first in every mode (`permissions.policy`: refused in `read-only`),
because once a value is read, no redaction can follow it through a transform (`tr`, base64, pieces shorter than a
redacted run). The runtime adds files that hold the value of a configured secret under any name
(`runtime.secret_files`); this module only knows names, so it is pure and table-tested.

The list (docs/secrets.md repeats it for users), chosen from what the tools that write these files document and from
what secret scanners (gitleaks, GitGuardian, trufflehog) flag by file name:
- environment files: `.env`, `.env.*` (`.env.local`, `.env.production`), `*.env`, `.envrc` (direnv); templates meant
  to be committed (`.env.example`, `.env.sample`, `.env.template`, `.env.dist`, `.env.defaults`) are not;
- private keys and key stores: `*.pem`, `*.key`, `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `*.ppk`, `id_rsa`,
  `id_dsa`, `id_ecdsa`, `id_ed25519` and any other `id_*` without `.pub`, `secring.*`;
- package-registry and login credentials: `.npmrc`, `.yarnrc.yml`, `.pypirc`, `.netrc`, `_netrc`, `.pgpass`,
  `.my.cnf`, `.git-credentials`, `.htpasswd`, `.dockercfg`, `.docker/config.json`, `.cargo/credentials`,
  `.cargo/credentials.toml`, `.gem/credentials`, `.composer/auth.json`, `gh/hosts.yml` (GitHub CLI), `.vault-token`;
- cloud credentials: `.aws/credentials`, `.aws/config`, `.azure/accessTokens.json`, `.azure/msal_token_cache.json`,
  `application_default_credentials.json`, `credentials.json`, `client_secret*.json`, `service-account*.json`,
  `.boto`, `.s3cfg`;
- cluster and infrastructure state: `.kube/config`, `kubeconfig`, `*.kubeconfig`, `*.tfstate`, `*.tfstate.backup`,
  `*.tfvars`, `terraform.rc`, `.terraformrc`;
- application secret stores: `secrets.json`, `secrets.yml`, `secrets.yaml`, `secrets.toml`, `.secrets`.
"""

from __future__ import annotations

import re

_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist", "defaults", "schema"})
_NAMES = frozenset(
    {
        ".envrc",
        ".npmrc",
        ".yarnrc.yml",
        ".pypirc",
        ".netrc",
        "_netrc",
        ".pgpass",
        ".my.cnf",
        ".git-credentials",
        ".htpasswd",
        ".dockercfg",
        ".vault-token",
        "application_default_credentials.json",
        "credentials.json",
        "kubeconfig",
        "terraform.rc",
        ".terraformrc",
        ".boto",
        ".s3cfg",
        "secrets.json",
        "secrets.yml",
        "secrets.yaml",
        "secrets.toml",
        ".secrets",
    }
)
_SUFFIXES = (
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".ppk",
    ".kubeconfig",
    ".tfstate",
    ".tfstate.backup",
    ".tfvars",
    ".env",
)
# A file of this name inside a directory of that name (the last two path components).
_IN_DIR = frozenset(
    {
        (".docker", "config.json"),
        (".cargo", "credentials"),
        (".cargo", "credentials.toml"),
        (".gem", "credentials"),
        (".composer", "auth.json"),
        ("gh", "hosts.yml"),
        (".aws", "credentials"),
        (".aws", "config"),
        (".azure", "accesstokens.json"),
        (".azure", "msal_token_cache.json"),
        (".kube", "config"),
    }
)
_PREFIXED = re.compile(r"(client_secret|service-account|service_account).*\.json\Z|secring\..+\Z")


def is_secret_file_name(path: str) -> bool:
    """Whether `path` (as written or resolved; `/`-separated) names a well-known secret file (see the module)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return bool(parts) and is_secret_name(parts[-1], parts[-2] if len(parts) >= 2 else "")


def is_secret_name(name: str, parent: str = "") -> bool:
    """`is_secret_file_name` of a file `name` in a directory named `parent` (cheap enough for a tree walk). Names
    compare without case: on a file system that ignores case (macOS, a Windows drive under WSL) `.ENV` is `.env`."""
    name, parent = name.lower(), parent.lower()
    if name.startswith(".env"):
        if name == ".env":
            return True
        if name.startswith(".env."):
            return name.rsplit(".", 1)[-1] not in _ENV_TEMPLATES
    if name in _NAMES:
        return True
    if name.startswith("id_"):
        return not name.endswith(".pub")
    if name.endswith(_SUFFIXES) and name not in _SUFFIXES or (parent, name) in _IN_DIR:
        return True
    return name[:1] in "cs" and _PREFIXED.match(name) is not None


def why_secret_name(shown: str) -> str:
    """The reason a question gives for a well-known secret file, `shown` as the user should read it."""
    return f"`{shown}` may hold secrets"
