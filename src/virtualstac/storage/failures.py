"""obstore's failures as one-line typed errors, with credentials kept out of messages.

obstore's exceptions carry a multi-line Rust debug dump ("Debug source: ...") after their
first line, and print URLs as they were given, ``user:password@`` and signed queries
included. :func:`describe` and :func:`quiet` keep the first line with secrets redacted;
:func:`network_failure` turns the failures a caller can act on into typed errors: a server
that ignores ``Range`` (:class:`~virtualstac.errors.RangeNotSupportedError`), and requests
that failed on every attempt (:class:`~virtualstac.errors.NetworkError`, or
:class:`~virtualstac.errors.NetworkTimeoutError` when the server never answered in time).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from obstore.exceptions import GenericError

from virtualstac.errors import (
    ChunkReadError,
    NetworkError,
    NetworkTimeoutError,
    RangeNotSupportedError,
    redact,
)

__all__ = [
    "HttpRequestError",
    "describe",
    "is_network_failure",
    "network_failure",
    "quiet",
    "read_failure",
    "redact",
]

_PERFORMED = re.compile(
    r"Error performing \w+ \S+ in (?P<elapsed>[^,\s]+)(?:, after (?P<retries>\d+) retries)?"
)
_STATUS = re.compile(r"status code: (?P<status>\d{3}[^:\n]*)")
_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>ns|µs|us|ms|s)")
_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_KIND = re.compile(r"HttpError \{\s*kind: (?P<kind>\w+)")
# The HTTP client's own words, when a caller (Icechunk) prints them instead of obstore's dump.
_PLAIN_KINDS = (("operation timed out", "Timeout"), ("error sending request", "Request"))


class HttpRequestError(GenericError):
    """A request of virtualstac's own HTTP client (:mod:`virtualstac.storage.http`) failed.

    It is one of obstore's errors, so that callers handle it as they handle obstore's; it
    carries what obstore's errors carry only in their text. ``reason`` is set when the request
    failed on every attempt for a reason of the network or the server (a timeout, a refused or
    dropped connection, a 5xx answer); ``ignores_range`` when the server answered a range with
    the whole object.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        attempts: int = 1,
        elapsed: float = 0.0,
        timed_out: bool = False,
        ignores_range: bool = False,
    ) -> None:
        super().__init__(redact(message))
        self.reason = reason
        self.attempts = attempts
        self.elapsed = elapsed
        self.timed_out = timed_out
        self.ignores_range = ignores_range

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword arguments do not survive pickling by default (failures cross processes).
        return (_rebuild_http_request_error, (str(self), dict(vars(self))))


def _rebuild_http_request_error(message: str, fields: dict[str, Any]) -> HttpRequestError:
    return HttpRequestError(message, **fields)


def quiet[E: BaseException](error: E) -> E:
    """``error`` with its message cut down to the first line, credentials redacted.

    Raise virtualstac errors ``from quiet(err)``: a traceback that shows the obstore error as
    the cause then shows no debug dump and no credentials either.
    """
    lines = str(error).strip().splitlines()
    line = redact(lines[0].strip()) if lines else ""
    if line != str(error):
        error.args = (line,)
    return error


def describe(error: BaseException) -> str:
    """The error's type and the first line of its message, credentials redacted; the error
    itself is cut down the same way (see :func:`quiet`)."""
    line = str(quiet(error))
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def network_failure(
    error: BaseException, url: str, context: str = ""
) -> NetworkError | RangeNotSupportedError | None:
    """The typed error for ``error``, raised while reading ``url``, or None.

    ``context`` goes before the URL in the message (``"chunk 'a/0' from "``). None means that
    ``error`` is no network failure (a missing object, a refused permission, a 416 answer...):
    the caller says what it was doing with :func:`describe`. Either way ``error`` is
    :func:`quiet` ened.
    """
    if isinstance(error, HttpRequestError):
        return _from_http_request_error(error, url, context)
    failure = _classify(str(error), url, context)
    quiet(error)
    return failure


def is_network_failure(error: BaseException) -> bool:
    """Whether :func:`network_failure` would name ``error`` (which is left as it is)."""
    if isinstance(error, HttpRequestError):
        return error.reason is not None or error.ignores_range
    return _classify(str(error), "", "") is not None


def _from_http_request_error(
    error: HttpRequestError, url: str, context: str
) -> NetworkError | RangeNotSupportedError | None:
    if error.ignores_range:
        return _range_not_supported(url, context)
    if error.reason is None:
        return None
    tried = f"{error.attempts} attempt{'s' if error.attempts > 1 else ''} in {error.elapsed:.3g} s"
    message = (
        f"reading {context}{redact(url)!r} failed: {error.reason} ({tried}); the registry's "
        "virtualstac.NetworkOptions set the timeouts and retries"
    )
    return NetworkTimeoutError(message) if error.timed_out else NetworkError(message)


def _range_not_supported(url: str, context: str) -> RangeNotSupportedError:
    where = redact(url)
    host = urlsplit(url).hostname or where
    return RangeNotSupportedError(
        f"cannot read {context}{where!r}: the server at {host} ignores HTTP Range requests "
        "(it answered a request for some bytes with the whole object, status 200 instead "
        "of 206 Partial Content). virtualstac reads byte ranges only: serve the file from "
        "a server that supports Range requests"
    )


#: What obstore says when a response body fails after its headers arrived.
_BODY_ERROR = "request or response body error"


def _classify(text: str, url: str, context: str) -> NetworkError | RangeNotSupportedError | None:
    where = redact(url)
    if "Range request not supported" in text:
        return _range_not_supported(url, context)
    performed = _PERFORMED.search(text)
    if performed is None:
        if _BODY_ERROR in text:
            # The answer's headers came, then its bytes stopped, trickled or broke off. obstore
            # says no more (no attempts, no elapsed time) once the body has begun.
            return NetworkError(
                f"reading {context}{where!r} failed: the connection dropped, or stalled past "
                "the read timeout, while the server sent the bytes; the registry's "
                "virtualstac.NetworkOptions set the timeouts and retries"
            )
        return None
    status = _STATUS.search(text)
    kinds = _kinds(text)
    if status is not None:
        if not status["status"].startswith(("5", "429")):
            return None
        reason = f"the server answered {status['status'].strip()}"
    elif kinds:
        reason = _transport_reason(text, kinds)
    else:
        return None
    attempts = int(performed["retries"] or 0) + 1
    elapsed = _seconds(performed["elapsed"])
    tried = f"{attempts} attempt{'s' if attempts > 1 else ''} in {elapsed}"
    message = (
        f"reading {context}{where!r} failed: {reason} ({tried}); the registry's "
        "virtualstac.NetworkOptions set the timeouts and retries"
    )
    return NetworkTimeoutError(message) if "Timeout" in kinds else NetworkError(message)


def read_failure(error: BaseException, url: str, context: str = "") -> ChunkReadError:
    """The typed error for ``error``, raised while reading ``url``: a network failure as
    :func:`network_failure` names it, otherwise a :class:`~virtualstac.errors.ChunkReadError`
    with :func:`describe`'s line."""
    return network_failure(error, url, context) or ChunkReadError(
        f"reading {context}{redact(url)!r} failed: {describe(error)}"
    )


def _seconds(duration: str) -> str:
    """A Rust ``Duration`` as printed (``61.6ms``, ``1.53s``) in seconds, or as it is."""
    match = _DURATION.fullmatch(duration)
    if match is None:
        return duration
    return f"{float(match['value']) * _UNITS[match['unit']]:.3g} s"


def _kinds(text: str) -> set[str]:
    kinds = {match["kind"] for match in _KIND.finditer(text)}
    return kinds or {kind for words, kind in _PLAIN_KINDS if words in text}


def _transport_reason(text: str, kinds: set[str]) -> str:
    """What went wrong on the connection, from the debug dump of an HTTP error."""
    if "Timeout" in kinds:
        return "the server did not answer within the timeout"
    if "ConnectionRefused" in text:
        return "the connection was refused"
    if "Connect" in kinds:
        return "could not connect to the server"
    if "IncompleteMessage" in text or "connection closed before message completed" in text:
        return "the server closed the connection before answering"
    if "ConnectionReset" in text:
        return "the server reset the connection"
    if "Interrupted" in kinds:
        return "the connection broke while the answer was read"
    return "the request could not be sent"
