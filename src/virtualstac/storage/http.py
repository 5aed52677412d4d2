"""Objects below an ``http(s)://`` URL, read by a client that never follows a redirect.

The registry is the read allow-list, and a redirect would step around it: obstore's HTTP
client (object_store's) follows ``301``/``302``/``307`` answers by itself, with no option to
refuse them, so an authorized server could send a read to another host or path, addresses
inside the reader's network included. :class:`HttpStore` sends its requests with urllib3
instead, refuses every redirect (:class:`~virtualstac.errors.RedirectRefusedError`), asks for
bytes as stored (``Accept-Encoding: identity``), and bounds each request by the
:class:`~virtualstac.storage.client.NetworkOptions` it is built with: a connect timeout, a
timeout for the whole request from connecting to the last byte, and retries with backoff. A
read may be conditional (:class:`~virtualstac.storage.conditions.ReadCondition`): a server's
refusal, or an answer showing another version, raises
:class:`~virtualstac.errors.SourceChangedError`.

:mod:`virtualstac.storage.objects` reads from it with the same calls as from obstore's stores.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit
from urllib.request import getproxies, proxy_bypass

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from virtualstac.errors import InvalidPathError, RedirectRefusedError
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions
from virtualstac.storage.coalescing import DEFAULT_COALESCE, merge_ranges, split_ranges
from virtualstac.storage.conditions import ReadCondition
from virtualstac.storage.failures import HttpRequestError, redact
from virtualstac.storage.http_headers import bound_headers

__all__ = ["HttpStore"]

#: Requests in flight at once in a process, and connections kept per host: reads wait on the
#: network, so a thread each costs little, and with 100 ms of latency 64 of them still fetch
#: 640 ranges a second.
_PARALLEL = 64
_PIECE = 1024 * 1024
_CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "timeout",
        "default_headers",
        "user_agent",
        "proxy_url",
        "http1_only",
    }
)
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|m|min|mins|h|hr|hrs)?\s*")
_UNIT_SECONDS = {
    None: 1.0, "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "h": 3600.0, "hr": 3600.0, "hrs": 3600.0,
}  # fmt: skip
_CONDITIONS = frozenset({"If-Match", "If-Unmodified-Since"})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


class _Fetched:
    """What one GET returned: its bytes, the object's metadata and the range they cover."""

    __slots__ = ("data", "meta", "range")

    def __init__(self, data: bytes, meta: dict[str, Any], byte_range: tuple[int, int]) -> None:
        self.data = data
        self.meta = meta
        self.range = byte_range

    def bytes(self) -> bytes:
        """The bytes, as obstore's ``GetResult.bytes()`` gives them."""
        return self.data


class HttpStore:
    """Objects below ``url``, read with GETs that never follow a redirect.

    Parameters
    ----------
    url
        The base URL; object paths are joined below it. A query on it (a SAS token) is sent
        with every request.
    network
        Timeouts and retries (``client_options`` and ``retry_config`` entries win over it).
    client_options
        obstore-style ``ClientConfig`` entries: ``allow_http`` (required for ``http://``),
        ``allow_invalid_certificates``, ``connect_timeout``, ``timeout`` (seconds, a
        ``timedelta`` or a string such as ``"30s"``), ``default_headers``, ``user_agent``,
        ``proxy_url``, ``http1_only``.
    retry_config
        obstore-style ``RetryConfig`` (``max_retries``, ``backoff``, ``retry_timeout``).

    Examples
    --------
    >>> store = HttpStore("https://data.example.org/archive", client_options={"timeout": "10s"})
    >>> store.url
    'https://data.example.org/archive'
    """

    def __init__(
        self,
        url: str,
        *,
        network: NetworkOptions = DEFAULT_NETWORK,
        client_options: Mapping[str, Any] | None = None,
        retry_config: Mapping[str, Any] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidPathError(f"{redact(url)!r} is not an http(s) URL")
        options = dict(client_options or {})
        unknown = sorted(set(options) - _CLIENT_OPTIONS)
        if unknown:
            raise TypeError(
                f"HTTP stores take the client options {sorted(_CLIENT_OPTIONS)}, not {unknown}"
            )
        if parts.scheme == "http" and not _truthy(options.get("allow_http")):
            raise InvalidPathError(
                f"{redact(url)!r} is plain HTTP: pass client_options={{'allow_http': True}}"
            )
        self.url = url
        self._connect_timeout = _seconds(options.get("connect_timeout", network.connect_timeout))
        self._timeout = _seconds(options.get("timeout", network.timeout))
        # Kept in full and as obstore shows them: a pickled store keeps its timeouts, and
        # Icechunk's container configs take them as they are.
        options["connect_timeout"] = _duration_text(self._connect_timeout)
        options["timeout"] = _duration_text(self._timeout)
        self.client_options = options
        self.retry_config = dict(retry_config or network.retry_config())
        self._base = urlunsplit(parts._replace(path=parts.path.rstrip("/"), query="", fragment=""))
        self._query = parts.query
        backoff = dict(self.retry_config.get("backoff") or {})
        self._max_retries = int(self.retry_config.get("max_retries", network.max_retries))
        self._retry_timeout = _seconds(self.retry_config.get("retry_timeout", 180))
        self._init_backoff = _seconds(backoff.get("init_backoff", 0.1))
        self._max_backoff = _seconds(backoff.get("max_backoff", 15))
        self._base_backoff = float(backoff.get("base", 2.0))
        self._headers = {
            **{str(k): _text(v) for k, v in dict(options.get("default_headers") or {}).items()},
            "Accept-Encoding": "identity",
        }
        if options.get("user_agent"):
            self._headers["User-Agent"] = str(options["user_agent"])
        self._pool: urllib3.PoolManager | None = None
        self._pool_lock = threading.Lock()

    @property
    def connect_timeout(self) -> float:
        """Seconds to open a connection."""
        return self._connect_timeout

    @property
    def timeout(self) -> float:
        """Seconds for a whole request, from connecting to the last byte of the answer."""
        return self._timeout

    def __repr__(self) -> str:
        return f"HttpStore({redact(self.url)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "client_options": self.client_options,
            "retry_config": self.retry_config,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["url"],
            client_options=state["client_options"],
            retry_config=state["retry_config"],
        )

    def url_of(self, path: str) -> str:
        """The URL of the object at ``path``, its segments percent-encoded."""
        encoded = quote(path.lstrip("/"), safe="/!$&'()*+,;=:@-._~")
        url = f"{self._base}/{encoded}" if encoded else self._base
        return f"{url}?{self._query}" if self._query else url

    def head(self, path: str) -> dict[str, Any]:
        """The object's metadata (``path``, ``size``, ``last_modified``, ``e_tag``,
        ``version``), from a ``HEAD`` request. Raises FileNotFoundError when there is none."""
        url = self.url_of(path)
        _, headers, _ = self._send("HEAD", url, {}, None)
        if "content-length" not in headers:
            raise HttpRequestError(f"HEAD {redact(url)} was answered without a Content-Length")
        return _meta(path, headers, int(headers["content-length"]))

    def get(
        self,
        path: str,
        byte_range: tuple[int, int] | None = None,
        condition: ReadCondition | None = None,
    ) -> _Fetched:
        """The object's bytes, or those of ``byte_range`` (start, end); fewer when the object
        ends before the range does. Raises FileNotFoundError when there is no object, and
        :class:`~virtualstac.errors.SourceChangedError` when it no longer meets ``condition``.
        """
        url = self.url_of(path)
        asked = {} if condition is None else condition.http_headers()
        start, end = byte_range or (0, 0)
        if byte_range is not None:
            if end <= start:
                raise ValueError(f"empty range {byte_range} of {redact(url)!r}")
            asked["Range"] = f"bytes={start}-{end - 1}"
        limit = None if byte_range is None else end - start
        try:
            _, headers, data = self._send("GET", url, asked, limit)
        except _PreconditionFailedError:
            assert condition is not None  # only conditional requests are refused so
            raise condition.refused(url, "the server answered 412 Precondition Failed") from None
        if condition is not None:
            condition.check(url, _meta(path, headers, len(data)))
        if byte_range is None:
            return _Fetched(data, _meta(path, headers, len(data)), (0, len(data)))
        match = _CONTENT_RANGE.fullmatch(headers.get("content-range", "").strip())
        if match is None or int(match[1]) != start or int(match[2]) - start + 1 != len(data):
            raise HttpRequestError(
                f"GET {redact(url)} answered bytes {headers.get('content-range')!r} "
                f"to a request for bytes {start}-{end - 1}"
            )
        size = len(data) + start if match[3] == "*" else int(match[3])
        return _Fetched(data, _meta(path, headers, size), (start, start + len(data)))

    def get_ranges(
        self,
        path: str,
        starts: list[int],
        ends: list[int],
        coalesce: int = DEFAULT_COALESCE,
        condition: ReadCondition | None = None,
    ) -> list[bytes | memoryview]:
        """The bytes of each range ``[starts[i], ends[i])``: ranges closer than ``coalesce``
        bytes are fetched together, and the requests run in parallel, each with
        ``condition`` (see :meth:`get`)."""
        merged = merge_ranges(starts, ends, coalesce)
        if len(merged) == 1:
            fetched = [self.get(path, merged[0], condition).data]
        else:
            count = len(merged)
            fetched = list(_pool().map(self._get_data, [path] * count, merged, [condition] * count))
        return split_ranges(starts, ends, merged, fetched)

    async def get_ranges_async(
        self,
        path: str,
        starts: list[int],
        ends: list[int],
        coalesce: int = DEFAULT_COALESCE,
        condition: ReadCondition | None = None,
    ) -> list[bytes | memoryview]:
        """:meth:`get_ranges`, its requests run on threads while the event loop goes on."""
        loop = asyncio.get_running_loop()
        merged = merge_ranges(starts, ends, coalesce)
        fetched = await asyncio.gather(
            *(loop.run_in_executor(_pool(), self._get_data, path, r, condition) for r in merged)
        )
        return split_ranges(starts, ends, merged, list(fetched))

    async def get_async(self, path: str, byte_range: tuple[int, int] | None = None) -> _Fetched:
        """:meth:`get`, run on a thread while the event loop goes on."""
        return await asyncio.get_running_loop().run_in_executor(_pool(), self.get, path, byte_range)

    async def head_async(self, path: str) -> dict[str, Any]:
        """:meth:`head`, run on a thread while the event loop goes on."""
        return await asyncio.get_running_loop().run_in_executor(_pool(), self.head, path)

    def _get_data(
        self, path: str, byte_range: tuple[int, int], condition: ReadCondition | None
    ) -> bytes:
        return self.get(path, byte_range, condition).data

    def _send(
        self, method: str, url: str, headers: dict[str, str], limit: int | None
    ) -> tuple[int, dict[str, str], bytes]:
        """Send a request, retrying what may pass; the status, lower-cased headers and body."""
        first = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._attempt(method, url, headers, limit)
            except _RetryableError as failure:
                elapsed = time.monotonic() - first
                wait = self._backoff(attempt)
                if attempt > self._max_retries or elapsed + wait > self._retry_timeout:
                    raise HttpRequestError(
                        f"{method} {redact(url)} failed: {failure.reason}",
                        reason=failure.reason,
                        attempts=attempt,
                        elapsed=time.monotonic() - first,
                        timed_out=failure.timed_out,
                    ) from None
                time.sleep(wait)

    def _attempt(
        self, method: str, url: str, headers: dict[str, str], limit: int | None
    ) -> tuple[int, dict[str, str], bytes]:
        deadline = time.monotonic() + self._timeout
        try:
            response = self._client().urlopen(
                method,
                url,
                headers={**self._headers, **headers},
                redirect=False,
                retries=False,
                preload_content=False,
                decode_content=False,
                timeout=urllib3.Timeout(connect=self._connect_timeout, read=self._timeout),
            )
        except SSLError as err:
            raise HttpRequestError(
                f"{method} {redact(url)} failed: the TLS handshake failed ({err})"
            ) from None
        # urllib3's NewConnectionError is a ConnectTimeoutError too: it goes first.
        except NewConnectionError as err:
            refused = isinstance(err.__cause__, ConnectionRefusedError) or "refused" in str(err)
            raise _RetryableError(
                "the connection was refused" if refused else "could not connect to the server"
            ) from None
        except (ConnectTimeoutError, ReadTimeoutError):
            raise _RetryableError(
                "the server did not answer within the timeout", timed_out=True
            ) from None
        except (ProtocolError, HTTPError) as err:
            raise _RetryableError(
                _broken(err, "the server closed the connection before answering")
            ) from None
        complete = False
        try:
            status = response.status
            fields = {name.lower(): value for name, value in response.headers.items()}
            if 300 <= status < 400:
                raise RedirectRefusedError(
                    f"{redact(url)!r}: the server answered {status} to send the read to "
                    f"{redact(fields.get('location', '(no location)'))!r}. virtualstac never "
                    "follows redirects, which could lead outside what you authorized: name "
                    "the location the server sends you to, and authorize it"
                )
            if status in (404, 410):
                raise FileNotFoundError(f"{method} {redact(url)}: not found ({status})")
            if status == 412 and _CONDITIONS.intersection(headers):
                raise _PreconditionFailedError
            answer = f"{status} {response.reason or ''}".strip()
            if status >= 500 or status == 429:
                raise _RetryableError(f"the server answered {answer}")
            if status >= 400:
                raise HttpRequestError(f"{method} {redact(url)} was answered {answer}")
            if limit is not None and status == 200:
                raise HttpRequestError(
                    f"{method} {redact(url)} answered 200 to a range request",
                    ignores_range=True,
                )
            encoding = fields.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise HttpRequestError(
                    f"{method} {redact(url)} was answered with Content-Encoding {encoding!r}: "
                    "those are not the object's stored bytes, so its ranges cannot be read"
                )
            data = b"" if method == "HEAD" else _body(response, deadline, limit)
            # The connection goes back to the pool: its next request gets the whole timeout,
            # not what this one left.
            _read_timeout(response, self._timeout)
            complete = True
            return status, fields, data
        finally:
            if not complete:  # the connection holds unread bytes (a whole file, maybe): drop it
                response.close()
            response.release_conn()

    def _client(self) -> urllib3.PoolManager:
        with self._pool_lock:
            if self._pool is None:
                self._pool = _pool_manager(urlsplit(self._base), self.client_options)
            return self._pool

    def _backoff(self, attempt: int) -> float:
        wait = min(self._init_backoff * self._base_backoff ** (attempt - 1), self._max_backoff)
        return random.uniform(wait / 2, wait)


class _PreconditionFailedError(Exception):
    """A conditional request the server refused: the object no longer meets the condition."""


class _RetryableError(Exception):
    """A failed attempt that another attempt may get past."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


def _body(response: urllib3.BaseHTTPResponse, deadline: float, limit: int | None) -> bytes:
    """The response's body, read before ``deadline``, and no longer than ``limit``."""
    pieces: list[bytes] = []
    received = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _RetryableError(_STALLED, timed_out=True)
        _read_timeout(response, remaining)
        try:
            piece = response.read1(_PIECE)  # type: ignore[attr-defined]
        except (ProtocolError, ReadTimeoutError, HTTPError, OSError):
            raise _RetryableError(_STALLED) from None
        if not piece:
            return b"".join(pieces)
        received += len(piece)
        if limit is not None and received > limit:
            raise HttpRequestError(f"the server sent more than the {limit} bytes asked for")
        pieces.append(piece)


_STALLED = "the connection dropped, or stalled past the timeout, while the server sent the bytes"


def _read_timeout(response: urllib3.BaseHTTPResponse, seconds: float) -> None:
    """Bound the next read of the response's socket by the request's time left."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _broken(error: BaseException, default: str) -> str:
    text = str(error)
    if "reset" in text.lower():
        return "the server reset the connection"
    return default


def _meta(path: str, headers: Mapping[str, str], size: int) -> dict[str, Any]:
    """obstore-shaped object metadata from a response's headers."""
    last_modified: datetime | None = None
    if "last-modified" in headers:
        try:
            last_modified = parsedate_to_datetime(headers["last-modified"])
        except (TypeError, ValueError):
            last_modified = None
        if last_modified is not None and last_modified.tzinfo is None:
            last_modified = None
    return {
        "path": path,
        "last_modified": last_modified,
        "size": size,
        "e_tag": headers.get("etag"),
        "version": None,
    }


def _pool() -> ThreadPoolExecutor:
    """The threads that fetch the merged ranges of every store in this process."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_PARALLEL, thread_name_prefix="virtualstac-http")
        return _executor


def _pool_manager(base: Any, options: Mapping[str, Any]) -> urllib3.PoolManager:
    keywords: dict[str, Any] = {"maxsize": _PARALLEL, "block": False}
    if _truthy(options.get("allow_invalid_certificates")):
        keywords["cert_reqs"] = "CERT_NONE"
    proxy = options.get("proxy_url")
    if proxy is None and not proxy_bypass(base.hostname or ""):
        proxy = getproxies().get(base.scheme)
    if proxy:
        return bound_headers(urllib3.ProxyManager(str(proxy), num_pools=16, **keywords))
    return bound_headers(urllib3.PoolManager(num_pools=16, **keywords))


def _seconds(value: Any) -> float:
    """Seconds from a number, a ``timedelta`` or a duration such as ``"30s"`` or ``"1m 30s"``."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        total, position = 0.0, 0
        for match in _DURATION.finditer(value):
            if match.start() != position or not match.group(0).strip():
                break
            total += float(match[1]) * _UNIT_SECONDS[match[2]]
            position = match.end()
        if position == len(value) and value.strip():
            return total
    raise ValueError(f"{value!r} is not a duration")


def _duration_text(seconds: float) -> str:
    milliseconds = round(seconds * 1000)
    return f"{milliseconds // 1000}s" if milliseconds % 1000 == 0 else f"{milliseconds}ms"


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1"))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
