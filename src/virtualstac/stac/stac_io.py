"""Reading STAC JSON and STAC API pages over HTTP with timeouts, retries and typed errors.

pystac's default reader sends its requests with no timeout at all, and pystac-client's with
none unless told: a catalog server that accepts a connection and never answers stalls a read
for as long as it likes. Both readers here bound every request by
:class:`~virtualstac.storage.client.NetworkOptions` and name the URL in typed errors:
:func:`bounded_stac_io` for static catalogs (pystac's reader, whose objects follow their links
through it), :func:`bounded_api_io` for STAC APIs (pystac-client's, so searches page through
it). :func:`reading_api` turns the answers a STAC API refuses (pystac-client's ``APIError``)
into typed errors too.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from copy import deepcopy
from typing import Any

import requests
import urllib3
from pystac.stac_io import DefaultStacIO
from pystac.utils import safe_urlparse
from pystac_client.exceptions import APIError
from pystac_client.stac_api_io import StacApiIO
from urllib3.util.retry import Retry

from virtualstac.errors import (
    InvalidCatalogError,
    InvalidPathError,
    NetworkError,
    NetworkTimeoutError,
    RedirectRefusedError,
    SourceNotFoundError,
)
from virtualstac.limits import check_metadata, get_limits
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions
from virtualstac.storage.failures import redact
from virtualstac.storage.http_headers import bound_headers
from virtualstac.storage.registry import refuse_special_file
from virtualstac.storage.urls import normalize_url

__all__ = [
    "BoundedApiIO",
    "BoundedStacIO",
    "bounded_api_io",
    "bounded_stac_io",
    "reading_api",
    "reading_with",
]

#: Answers worth another attempt, as for the registry's stores.
_RETRIED_STATUSES = (429, 500, 502, 503, 504)
_PIECE = 1024 * 1024
# What urllib3's Retry says when a request has used up its redirects.
_REDIRECTS = "too many redirects"
# Methods whose parameters pystac-client sends as a JSON body rather than a query.
_BODY_METHODS = ("POST", "PUT", "PATCH")


class BoundedStacIO(DefaultStacIO):
    """pystac's reader of static STAC JSON, its HTTP requests bounded by ``network``.

    Redirects are followed (a catalog's links may name anything anyway; what its assets
    authorize is decided from the documents). Documents beyond the ``metadata_bytes`` limit,
    local ones included, are refused before they are read whole.
    """

    def __init__(self, network: NetworkOptions = DEFAULT_NETWORK) -> None:
        super().__init__()
        self.network = network
        self._pool = bound_headers(
            urllib3.PoolManager(
                retries=_retry(network),
                timeout=urllib3.Timeout(connect=network.connect_timeout, read=network.timeout),
            )
        )

    def read_text_from_href(self, href: str) -> str:
        """The text of the document at ``href`` (a URL, or a local path)."""
        if "://" not in href or href.startswith("file://"):
            return _local_text(href)
        if not href.lower().startswith(("http://", "https://")):
            raise InvalidPathError(
                f"cannot read STAC JSON from {redact(href)!r}: its URL scheme is not one "
                "virtualstac reads catalogs from (local paths, file://, http:// and https://)"
            )
        try:
            response = self._pool.request(
                "GET", href, headers=dict(self.headers), preload_content=False
            )
        except urllib3.exceptions.MaxRetryError as err:
            if isinstance(err.reason, urllib3.exceptions.ResponseError) and _REDIRECTS in str(
                err.reason
            ):
                raise _redirected_too_often(
                    href,
                    self.network.max_retries,
                    "; the registry's virtualstac.NetworkOptions (max_retries) set how many "
                    "redirects are followed",
                ) from None
            raise _unreached(href, _is_timeout(err.reason), str(err.reason)) from None
        except urllib3.exceptions.LocationValueError as err:
            if not _is_http(href):
                raise
            # The href is a sound HTTP URL: the place refused is where the server sent it.
            if isinstance(err, urllib3.exceptions.URLSchemeUnknown):
                raise _redirected_away(href, f"a {err.scheme}: URL") from None
            raise _redirected_away(href, "a URL without a host (a file: URL?)") from None
        except urllib3.exceptions.HTTPError as err:
            raise _unreached(href, False, str(err)) from None
        with response:
            if response.status >= 400:
                raise _refused(href, response.status, response.reason or "")
            size = response.headers.get("Content-Length")
            if size is not None and size.isdigit():
                check_metadata(int(size), source=redact(href), what="STAC JSON")
            data = _body(response, href, self.network.timeout)
            check_metadata(len(data), source=redact(href), what="STAC JSON")
        return data.decode("utf-8")

    def __getstate__(self) -> dict[str, Any]:
        # Objects read through this reader keep it, and may travel to other processes.
        return {"network": self.network, "headers": dict(self.headers)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["network"])  # type: ignore[misc]
        self.headers = state["headers"]


class BoundedApiIO(StacApiIO):
    """pystac-client's reader, failing to reach a server with a typed error naming the URL.

    Its answers (pages of a search, decoded if the server compressed them) are read no
    further than ``metadata_bytes``, and each within the read timeout of its headers.
    Answers with an error status stay pystac-client's ``APIError`` (with ``status_code``):
    pystac-client reads a ``404`` as "no such collection"; see :func:`reading_api`.
    """

    def request(
        self,
        href: str,
        method: str | None = None,
        headers: dict[str, str] | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> str:
        """The text of the answer to a request for ``href``."""
        # pystac-client's own request reads the answer whole: this one streams it.
        method = (method or "GET").upper()
        if method in _BODY_METHODS:
            request = requests.Request(method, href, headers=headers, json=parameters)
        else:
            query = deepcopy(parameters) or {}
            request = requests.Request(method, href, headers=headers, params=query)
        try:
            modified = self._req_modifier(request) if self._req_modifier else None
            prepared = self.session.prepare_request(modified or request)
            settings = self.session.merge_environment_settings(
                prepared.url or href, proxies={}, stream=True, verify=True, cert=None
            )
            response = self.session.send(prepared, timeout=self.timeout, **settings)
        except requests.TooManyRedirects:
            raise _redirected_too_often(href, self.session.max_redirects) from None
        except requests.exceptions.InvalidSchema as failure:
            if not _is_http(href):
                raise
            target = re.search(r"found for '([^']*)'", str(failure))
            place = f"{redact(target.group(1))!r}" if target else "a URL that is not HTTP"
            raise _redirected_away(href, place) from None
        except requests.RequestException as failure:
            timed_out = isinstance(failure, requests.Timeout) or _timed_out(failure)
            raise _unreached(href, timed_out, str(failure)) from None
        with response:
            response.raw.decode_content = True  # as requests decodes what it reads itself
            data = _body(response.raw, href, _read_seconds(self.timeout))
            if not 200 <= response.status_code < 300:
                error = APIError(data.decode("utf-8", "replace"))
                error.status_code = response.status_code
                raise error
        check_metadata(len(data), source=redact(href), what="STAC JSON")
        return data.decode("utf-8")


#: The network options of STAC reads in this context (see :func:`reading_with`).
_network: ContextVar[NetworkOptions] = ContextVar(
    "virtualstac_stac_network", default=DEFAULT_NETWORK
)


@contextmanager
def reading_with(network: NetworkOptions) -> Iterator[None]:
    """Within the block, readers made without options of their own take ``network``'s: an
    open given a registry reads the STAC JSON it finds on the way (a Collection its Items
    link to) with the registry's timeouts."""
    token = _network.set(network)
    try:
        yield
    finally:
        _network.reset(token)


def bounded_stac_io(network: NetworkOptions | None = None) -> BoundedStacIO:
    """A reader of static STAC JSON whose requests take at most ``network``'s timeouts and
    retries (the block's, see :func:`reading_with`, or the defaults); give it to
    ``pystac.read_dict(..., stac_io=...)`` and links follow through it.

    ``timeout`` bounds the headers of each answer as a whole, and its bytes after them.
    """
    return BoundedStacIO(network or _network.get())


def bounded_api_io(network: NetworkOptions | None = None) -> BoundedApiIO:
    """A STAC API reader (``Client.open(url, stac_io=...)``) bounded as :func:`bounded_stac_io`."""
    network = network or _network.get()
    timeout = (network.connect_timeout, network.timeout)
    reader = BoundedApiIO(timeout=timeout, max_retries=_retry(network))
    for adapter in reader.session.adapters.values():
        if isinstance(adapter, requests.adapters.HTTPAdapter):
            bound_headers(adapter.poolmanager)
    return reader


def _retry(network: NetworkOptions) -> Retry:
    return Retry(
        total=network.max_retries,
        backoff_factor=network.backoff,
        backoff_max=network.max_backoff,
        status_forcelist=_RETRIED_STATUSES,
        allowed_methods=None,  # STAC API searches are POSTs that change nothing
        raise_on_status=False,
    )


def _local_text(href: str) -> str:
    """The text of a local document, read no further than ``metadata_bytes`` (a link may name
    a huge file, or ``/dev/zero``), never from a named pipe, where it would wait for a writer
    for ever. Paths are taken from ``href`` as pystac takes them."""
    path = safe_urlparse(href).path
    refuse_special_file(normalize_url(os.path.abspath(path)))
    with open(path, "rb") as file:
        data = file.read(get_limits().metadata_bytes + 1)
    check_metadata(len(data), source=redact(href), what="STAC JSON")
    return data.decode("utf-8")


def _read_seconds(timeout: Any) -> float:
    """The read timeout of a requests ``timeout`` (a number, or a (connect, read) pair)."""
    seconds = timeout[1] if isinstance(timeout, tuple) else timeout
    return float(seconds) if seconds is not None else DEFAULT_NETWORK.timeout


def _body(response: urllib3.BaseHTTPResponse, href: str, timeout: float) -> bytes:
    """The answer's bytes (decoded), at most ``metadata_bytes`` and one more, all received
    within ``timeout`` of its headers: a read timeout alone lets a server that sends a byte
    now and then hold the read for as long as it likes."""
    limit = get_limits().metadata_bytes + 1
    deadline = time.monotonic() + timeout
    pieces: list[bytes] = []
    received = 0
    while received < limit:
        remaining = deadline - time.monotonic()
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if remaining > 0 and sock is not None:
            sock.settimeout(remaining)
        try:
            piece = response.read1(min(_PIECE, limit - received)) if remaining > 0 else None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            if "timed out" not in str(err):
                raise _unreached(href, False, "") from None
            piece = None
        if piece is None:
            raise NetworkTimeoutError(
                f"reading {redact(href)!r} failed: the server did not send the whole document "
                f"within the timeout ({timeout:g} s); the registry's virtualstac.NetworkOptions "
                "set the timeouts and retries"
            )
        if not piece:
            break
        pieces.append(piece)
        received += len(piece)
    return b"".join(pieces)


def _unreached(href: str, timed_out: bool, reason: str) -> NetworkError:
    if timed_out:
        reason = "the server did not answer within the timeout"
    elif "refused" in reason.lower():
        reason = "the connection was refused"
    else:
        reason = "could not connect to the server, or it closed the connection"
    message = (
        f"reading {redact(href)!r} failed: {reason}; the registry's "
        "virtualstac.NetworkOptions set the timeouts and retries"
    )
    return (NetworkTimeoutError if timed_out else NetworkError)(message)


def _is_http(href: str) -> bool:
    """Whether ``href`` is an HTTP URL a request can be sent to."""
    try:
        parsed = urllib3.util.parse_url(href)
    except urllib3.exceptions.LocationParseError:
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.host)


def _redirected_too_often(href: str, followed: int, advice: str = "") -> NetworkError:
    return NetworkError(
        f"reading {redact(href)!r} failed: the server redirected it more than {followed} "
        f"times in a row (a redirect loop?){advice}"
    )


def _redirected_away(href: str, place: str) -> RedirectRefusedError:
    return RedirectRefusedError(
        f"reading {redact(href)!r} failed: the server redirected it to {place}, which is not "
        "followed: STAC JSON read over HTTP is only redirected to other http(s) URLs"
    )


def _refused(href: str, status: int, answer: str) -> Exception:
    said = f"reading {redact(href)!r} failed: the server answered {status}"
    said += f" ({answer})" if answer else ""
    if status in (404, 410):
        return SourceNotFoundError(said)
    if status in _RETRIED_STATUSES:
        return NetworkError(said)
    return InvalidCatalogError(said)


@contextmanager
def reading_api(url: str) -> Iterator[None]:
    """Turn pystac-client's ``APIError`` raised inside the block into a typed error.

    ``404``/``410`` -> :class:`~virtualstac.errors.SourceNotFoundError`; ``429``/``5xx``
    (after the retries) and failures without an answer ->
    :class:`~virtualstac.errors.NetworkError`; any other refusal ->
    :class:`~virtualstac.errors.InvalidCatalogError`. Each names ``url`` and the answer.
    """
    try:
        yield
    except APIError as err:
        status = getattr(err, "status_code", None)
        answer = " ".join(str(err).split())[:200]
        if status is None:
            raise NetworkError(f"reading {redact(url)!r} failed: {answer}") from err
        raise _refused(url, status, answer) from err


def _timed_out(failure: requests.RequestException) -> bool:
    """Whether urllib3 gave up after attempts that timed out (requests calls that a
    ``ConnectionError``)."""
    retried = failure.args[0] if failure.args else None
    return _is_timeout(getattr(retried, "reason", None))


def _is_timeout(reason: object) -> bool:
    """Whether urllib3's last ``reason`` to give up was a timeout: its refused connections
    (``NewConnectionError``) are connect timeouts too, though they took no time."""
    return isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
        reason, urllib3.exceptions.NewConnectionError
    )
