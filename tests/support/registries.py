"""Package registries on loopback for toolchain tests: a static PEP 503 index serving a wheel built here, and a
minimal npm registry serving one packument and its tarball. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

PY_NAME, PY_VERSION, PY_VALUE = "demo-pkg", "1.0", "demo-pkg-from-the-local-index"
NPM_NAME, NPM_VERSION, NPM_VALUE = "demo-lib", "1.0.0", "demo-lib-from-the-local-registry"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel() -> tuple[str, bytes]:
    """A pure-Python wheel of `demo_pkg` (file name, bytes): a module, its metadata and a RECORD with hashes."""
    module = PY_NAME.replace("-", "_")
    info = f"{module}-{PY_VERSION}.dist-info"
    files = {
        f"{module}/__init__.py": f"VALUE = {PY_VALUE!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PY_NAME}\nVersion: {PY_VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: gatewright-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{info}/RECORD,,\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", record)
    return f"{module}-{PY_VERSION}-py3-none-any.whl", out.getvalue()


def build_tarball() -> bytes:
    """An npm package tarball (`package/package.json`, `package/index.js`)."""
    files = {
        "package/package.json": json.dumps({"name": NPM_NAME, "version": NPM_VERSION, "main": "index.js"}).encode(),
        "package/index.js": f"module.exports = {json.dumps(NPM_VALUE)};\n".encode(),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size, member.mode, member.mtime = len(data), 0o644, 1_700_000_000
            t.addfile(member, io.BytesIO(data))
    return out.getvalue()


class Registries:
    """`with Registries() as r:` serves `r.pypi` (a PEP 503 simple index) and `r.npm` (a registry base URL); `hits`
    lists the paths asked for."""

    def __init__(self) -> None:
        wheel_name, wheel = build_wheel()
        tarball = build_tarball()
        self.hits: list[str] = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server = server
        base = f"http://127.0.0.1:{server.server_address[1]}"
        self.pypi = f"{base}/simple/"
        self.npm = f"{base}/npm/"
        sha = hashlib.sha256(wheel).hexdigest()
        tgz = f"{NPM_NAME}-{NPM_VERSION}.tgz"
        packument = {
            "name": NPM_NAME,
            "dist-tags": {"latest": NPM_VERSION},
            "versions": {
                NPM_VERSION: {
                    "name": NPM_NAME,
                    "version": NPM_VERSION,
                    "main": "index.js",
                    "dist": {
                        "tarball": f"{self.npm}{NPM_NAME}/-/{tgz}",
                        "shasum": hashlib.sha1(tarball, usedforsecurity=False).hexdigest(),
                        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode(),
                    },
                }
            },
        }
        self._files: dict[str, tuple[str, bytes]] = {
            "/simple/": ("text/html", f'<a href="{PY_NAME}/">{PY_NAME}</a>'.encode()),
            f"/simple/{PY_NAME}/": (
                "text/html",
                f'<a href="/files/{wheel_name}#sha256={sha}">{wheel_name}</a>'.encode(),
            ),
            f"/files/{wheel_name}": ("application/octet-stream", wheel),
            f"/npm/{NPM_NAME}": ("application/json", json.dumps(packument).encode()),
            f"/npm/{NPM_NAME}/-/{tgz}": ("application/octet-stream", tarball),
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registries = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, *, body: bool) -> None:
                path = self.path.split("?", 1)[0]
                registries.hits.append(path)
                found = registries._files.get(path)
                if found is None:
                    self.send_error(404)
                    return
                kind, data = found
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "max-age=600")  # pip keeps only what may be cached
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> Registries:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
