"""Real servers on loopback for the tests: HTTP servers with range requests, moto for S3,
rustac for a STAC API.

They behave like the object storage virtualstac reads in production. The HTTP servers answer
``Range`` requests (one range or several) with ``206 Partial Content`` and send
``ETag``/``Last-Modified``, keep connections alive and log every request they answer:

- :class:`UvicornServer`, uvicorn (an HTTP/1.1 server) running Starlette's ``StaticFiles``
  (``http_app.py``) in a child process; the ``test`` extra installs them, so every machine
  has it.
- :class:`NginxServer`, nginx in a child process, where nginx is installed;
  :data:`HTTP_SERVERS` then names both and ``tests/conftest.py`` runs every HTTP test against
  each.

moto's threaded server speaks the S3 REST protocol; :class:`RequesterPaysGateway` stands in
front of it like AWS in front of a requester-pays bucket. rustac's ``serve`` command is a STAC
API (item search, collections) over an in-memory backend loaded from files.
``tests/conftest.py`` starts one of each per test session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from http_app import KEEPALIVE_SECONDS, MAX_CONNECTIONS, SIGNED_TOKEN

__all__ = [
    "HTTP_SERVERS",
    "RUSTAC_MISSING_REASON",
    "SIGNED_TOKEN",
    "HTTPServer",
    "LogEntry",
    "NginxServer",
    "RequesterPaysGateway",
    "S3Server",
    "STACServer",
    "UvicornServer",
    "add_token",
    "nginx_binary",
    "rustac_binary",
]

RUSTAC_MISSING_REASON = (
    "the rustac command (PyPI package rustac, in the test extra) is not installed"
)


def add_token(url: str) -> str:
    """Sign a URL for the ``signed-*`` directories, the way ``planetary_computer.sign`` does."""
    return f"{url}?token={SIGNED_TOKEN}" if url.startswith("http://") else url


def nginx_binary() -> str | None:
    """Path of the nginx executable, or None when nginx is not installed."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


#: The HTTP servers this machine can run (``"uvicorn"``, and ``"nginx"`` if installed).
HTTP_SERVERS = ("uvicorn", *(["nginx"] if nginx_binary() is not None else []))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> bool:
    """Wait until ``port`` accepts connections (True) or ``process`` exits (False)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    process.kill()
    raise RuntimeError(f"{process.args[0]} did not start listening on port {port} within 10 s")


@dataclass(frozen=True)
class LogEntry:
    """One request a server answered, as nginx's access log records it."""

    method: str
    path: str
    #: The request's ``Range`` header, ``"-"`` when it had none.
    range: str
    status: int
    bytes_sent: int


@dataclass
class HTTPServer(ABC):
    """A server of the files below ``root`` at ``url``, with byte-range support.

    Put files anywhere below ``root`` (use :meth:`directory` for a fresh sub-directory per test,
    since the server is shared by the session); :meth:`url_for` gives their URL, and
    :meth:`requests` lists the requests the server answered for them.
    """

    url: str
    root: Path

    @abstractmethod
    def stop(self) -> None:
        """Stop the server and wait until it has stopped."""

    @abstractmethod
    def _entries(self) -> list[LogEntry]:
        """Every request answered so far, oldest first."""

    def directory(self, name: str = "case") -> Path:
        """Create and return a new, uniquely named directory below the served root.

        Files in a directory whose ``name`` starts with ``signed`` are served only to requests
        whose query has ``token=`` :data:`SIGNED_TOKEN`; others get 403 Forbidden.
        """
        path = self.root / f"{name}-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        return path

    def url_for(self, path: Path) -> str:
        """The URL at which the file ``path`` (below :attr:`root`) is served."""
        return f"{self.url}/{path.relative_to(self.root).as_posix()}"

    def requests(self, path: Path | None = None, method: str | None = "GET") -> list[LogEntry]:
        """Requests answered so far (for the file ``path`` only, if given), oldest first.

        ``method`` filters by HTTP method (GET by default; None keeps all).
        """
        wanted = None if path is None else "/" + path.relative_to(self.root).as_posix()
        return [
            entry
            for entry in self._entries()
            if wanted in (None, entry.path) and method in (None, entry.method)
        ]


# -- uvicorn ---------------------------------------------------------------------------------

HTTP_APP = Path(__file__).with_name("http_app.py")


def _start_uvicorn(*arguments: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Run ``http_app.py`` with ``arguments`` on a free loopback port, once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(MAX_CONNECTIONS)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        fd = str(sock.fileno())
        process = subprocess.Popen(
            [sys.executable, str(HTTP_APP), "--fd", fd, *arguments],
            pass_fds=[sock.fileno()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    if not _answers(url, process, any_status=True):
        errors = process.communicate()[1].decode(errors="replace")
        raise RuntimeError(f"{HTTP_APP.name} {arguments[0]} failed to start: {errors}")
    return url, process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.communicate(timeout=15)


@dataclass
class UvicornServer(HTTPServer):
    """uvicorn serving ``root`` with Starlette's ``StaticFiles``, in a child process.

    Starlette answers one range or several (``multipart/byteranges``), ``HEAD``, ``If-Range``
    and conditional requests; ``http_app.py`` adds ``If-Match``/``If-Unmodified-Since``, the
    ``signed-*`` directories and a log; uvicorn speaks HTTP/1.1 with keep-alive.
    """

    access_log: Path = field(repr=False)
    process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(cls, workdir: Path) -> UvicornServer:
        """Start serving ``workdir / "www"`` on a free loopback port."""
        root = workdir / "www"
        root.mkdir(parents=True, exist_ok=True)
        log = workdir / "access.log"
        log.touch()
        url, process = _start_uvicorn("files", str(root), str(log))
        return cls(url, root, log, process)

    def stop(self) -> None:
        """Stop uvicorn and wait for it to exit."""
        _stop(self.process)

    def _entries(self) -> list[LogEntry]:
        # Each line is written before the last bytes of its answer are sent.
        return _parse_log(self.access_log.read_text())


@dataclass
class RequesterPaysGateway:
    """A proxy in front of an S3 server that refuses requests without the
    ``x-amz-request-payer: requester`` header, as AWS does for requester-pays buckets."""

    url: str
    process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(cls, upstream: str) -> RequesterPaysGateway:
        """Start the gateway to the S3 endpoint ``upstream`` on a free loopback port."""
        return cls(*_start_uvicorn("gateway", upstream))

    def stop(self) -> None:
        """Stop the gateway and wait for it to exit."""
        _stop(self.process)


def _parse_log(text: str) -> list[LogEntry]:
    entries = []
    for line in text.splitlines():
        verb, uri, byte_range, status, sent = line.split("\t")
        entries.append(LogEntry(verb, uri, byte_range, int(status), int(sent)))
    return entries


# -- nginx -----------------------------------------------------------------------------------

_NGINX_CONFIG = """\
{user}
worker_processes 1;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections {connections}; }}
http {{
    log_format ranges '$request_method\t$uri\t$http_range\t$status\t$body_bytes_sent';
    access_log {prefix}/access.log ranges;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    default_type application/octet-stream;
    keepalive_requests 100000;
    keepalive_timeout {keepalive}s;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        # Directories named "signed-*" answer only requests carrying ?token=letmein, like
        # storage behind SAS tokens or pre-signed URLs.
        location /signed- {{
            if ($arg_token != "{token}") {{ return 403; }}
        }}
    }}
}}
"""


@dataclass
class NginxServer(HTTPServer):
    """nginx serving ``root`` from a subprocess; its access log records the requests."""

    access_log: Path = field(repr=False)
    process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(cls, workdir: Path) -> NginxServer:
        """Start nginx serving ``workdir / "www"`` on a free loopback port."""
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed")
        root = workdir / "www"
        root.mkdir(parents=True, exist_ok=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (workdir / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        config = workdir / "nginx.conf"
        # As root, nginx workers would run as "nobody", which cannot read pytest's private
        # temporary directories; keep them as root instead.
        user = "user root root;" if os.geteuid() == 0 else ""
        errors = ""
        for _ in range(5):
            port = _free_port()
            config.write_text(
                _NGINX_CONFIG.format(
                    user=user,
                    prefix=workdir,
                    port=port,
                    root=root,
                    token=SIGNED_TOKEN,
                    connections=MAX_CONNECTIONS,
                    keepalive=KEEPALIVE_SECONDS,
                )
            )
            process = subprocess.Popen(
                [binary, "-p", str(workdir), "-c", str(config), "-g", "daemon off;"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            if _wait_for_port(port, process):
                url = f"http://127.0.0.1:{port}"
                return cls(url, root, workdir / "access.log", process)
            # Most likely another process took the port between probing and binding it.
            errors = process.communicate()[1].decode(errors="replace")
        raise RuntimeError(f"nginx failed to start: {errors}")

    def stop(self) -> None:
        """Stop nginx and wait for it to exit."""
        self.process.terminate()
        self.process.communicate(timeout=10)

    def _entries(self) -> list[LogEntry]:
        return _parse_log(self._settled_log())

    def _settled_log(self) -> str:
        """The access log once nginx has stopped appending to it.

        nginx logs a request after sending the response, so a client can finish before the
        line is written; wait until the log has not grown for a few milliseconds.
        """
        text = self.access_log.read_text()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            time.sleep(0.02)
            again = self.access_log.read_text()
            if again == text:
                break
            text = again
        return text


@dataclass
class S3Server:
    """moto's S3 server on a loopback port, with helpers to create buckets and upload files.

    Clients authenticate with the access key and secret ``"testing"`` in region ``us-east-1``;
    :attr:`store_options` holds exactly what ``ObjectStoreRegistry.register`` (and obstore's
    ``S3Store``) need to reach the server.
    """

    endpoint: str
    server: ThreadedMotoServer = field(repr=False)
    region: str = "us-east-1"
    access_key_id: str = "testing"
    secret_access_key: str = "testing"

    @classmethod
    def start(cls) -> S3Server:
        """Start moto's threaded S3 server on a free loopback port."""
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        return cls(f"http://{host}:{port}", server)

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()

    @property
    def store_options(self) -> dict[str, Any]:
        """Keyword arguments for ``registry.register("s3://bucket", **store_options)``."""
        return {
            "endpoint": self.endpoint,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "client_options": {"allow_http": True},
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server (independent of the code under test)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def create_bucket(self, prefix: str = "bucket") -> str:
        """Create a new bucket with a unique name starting with ``prefix``; return its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, bucket: str, key: str, source: Path | bytes, *, public: bool = False) -> str:
        """Upload a local file or bytes as ``s3://bucket/key``; return that URL.

        ``public=True`` makes the object readable without credentials (ACL ``public-read``).
        """
        body = source.read_bytes() if isinstance(source, Path) else source
        acl = "public-read" if public else "private"
        self.client().put_object(Bucket=bucket, Key=key, Body=body, ACL=acl)
        return f"s3://{bucket}/{key}"


def rustac_binary() -> str | None:
    """Path of the ``rustac`` command installed next to this Python, or on the PATH."""
    beside = Path(sys.executable).parent / "rustac"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("rustac")


@dataclass
class STACServer:
    """rustac's STAC API on a loopback port, serving the collections and items it was given."""

    url: str
    process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(cls, *files: Path) -> STACServer:
        """Serve ``files`` (collections without links, and ItemCollections whose features name
        their ``collection``) on a free port, once the API answers."""
        binary = rustac_binary()
        if binary is None:
            raise RuntimeError(RUSTAC_MISSING_REASON)
        errors = ""
        for _ in range(5):
            port = _free_port()
            process = subprocess.Popen(
                [binary, "serve", "--addr", f"127.0.0.1:{port}", *map(str, files)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            url = f"http://127.0.0.1:{port}"
            if _wait_for_port(port, process) and _answers(url, process):
                return cls(url, process)
            # Most likely another process took the port between probing and binding it.
            errors = process.communicate()[1].decode(errors="replace")
        raise RuntimeError(f"rustac serve failed to start: {errors}")

    def stop(self) -> None:
        """Stop the server and wait for it to exit."""
        self.process.terminate()
        self.process.communicate(timeout=10)


def _answers(url: str, process: subprocess.Popen[bytes], *, any_status: bool = False) -> bool:
    """Wait until ``url`` answers 200, or any status with ``any_status`` (True), or ``process``
    exits (False)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return True
        except urllib.error.HTTPError:
            if any_status:
                return True
            time.sleep(0.05)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{url} did not answer within 10 s")
