"""Well-known secret file names (`permissions.secret_files`): a table of names that are, and names that look alike
but are not (templates meant to be committed, public keys, ordinary configuration)."""

from __future__ import annotations

import pytest

from permissions.secret_files import is_secret_file_name

SECRET = [
    ".env",
    "sub/dir/.env",
    ".env.local",
    ".env.production",
    "deploy.env",
    ".envrc",
    "server.pem",
    "tls/private.key",
    "config/master.key",
    "cert.p12",
    "store.jks",
    "putty.ppk",
    "id_rsa",
    "/home/u/.ssh/id_ed25519",
    "id_ecdsa_sk",
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".dockercfg",
    ".docker/config.json",
    "/root/.aws/credentials",
    ".aws/config",
    ".kube/config",
    "kubeconfig",
    "prod.kubeconfig",
    "credentials.json",
    "client_secret_1234.apps.googleusercontent.com.json",
    "service-account-prod.json",
    "application_default_credentials.json",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".config/gh/hosts.yml",
    ".vault-token",
    "terraform.tfstate",
    "terraform.tfstate.backup",
    "prod.tfvars",
    "secrets.yml",
    "secring.gpg",
    # A file system that ignores case (macOS, a Windows drive under WSL) opens `.env` for these.
    ".ENV",
    ".Env.Local",
    "ID_RSA",
    ".NPMRC",
    ".AWS/Credentials",
    "Server.PEM",
    "Credentials.json",
    "Client_Secret_x.json",
    ".azure/accessTokens.json",
]
NOT_SECRET = [
    ".env.example",
    ".env.sample",
    ".env.template",
    ".env.local.example",
    ".ENV.EXAMPLE",
    "ID_RSA.PUB",
    "id_rsa.pub",
    "README.md",
    "config.json",
    "env.py",
    ".environment",
    "venv",
    "key",
    ".key",
    "keys.py",
    "docker/config.json",
    "kube/config",
    "credentials.py",
    "hosts.yml",
    "",
    "/",
]


@pytest.mark.parametrize("path", SECRET)
def test_a_well_known_secret_file_is_named_so(path):
    assert is_secret_file_name(path)


@pytest.mark.parametrize("path", NOT_SECRET)
def test_a_look_alike_is_not(path):
    assert not is_secret_file_name(path)
