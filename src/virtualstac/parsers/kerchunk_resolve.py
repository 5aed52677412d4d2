"""Reading a Kerchunk reference set: options, metadata documents, URLs and source versions.

What the JSON and Parquet parsers share: the parsing options, reading the reference object,
decoding metadata documents (and consolidated ``.zmetadata``), resolving each distinct
reference URL once (``{{name}}`` templates, ``remote_protocol``, paths relative to the
reference file), the sizes of objects referenced whole (one HEAD each) and the source versions
the references record.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from virtualstac.errors import (
    InvalidPathError,
    SourceNotFoundError,
    UnregisteredURLError,
    VirtualStacError,
)
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.sources import SourceStamp
from virtualstac.parsers.kerchunk_sources import SOURCES_KEY, recorded_sources, verify_sources
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = [
    "NEEDS_URL",
    "TEMPLATE",
    "WHOLE",
    "KerchunkOptions",
    "KerchunkReferenceError",
    "URLResolver",
    "literal_file_url",
    "merge_consolidated",
    "parse_document",
    "with_recorded_sources",
]

#: A ``{{expression}}`` in a template or ``gen`` field.
TEMPLATE = re.compile(r"\{\{(.*?)\}\}")
# What a percent-encoded path holds: what ``urllib.parse.quote`` leaves alone, and escapes.
_ENCODED_PATH = re.compile(r"(?:[A-Za-z0-9_.~/-]|%[0-9A-Fa-f]{2})*")
#: Length placeholder of a whole-object reference, until its size is known.
WHOLE = -1
NEEDS_URL = (
    "a reference needs a URL (null URLs, which fsspec fills from its 'target' option, "
    "are not supported)"
)


class KerchunkReferenceError(VirtualStacError, ValueError):
    """A Kerchunk reference set is malformed, or uses a feature that cannot be represented."""


class KerchunkOptions:
    """Settings shared by both parsers."""

    def __init__(
        self,
        drop_variables: Iterable[str],
        root_array_name: str | None,
        remote_protocol: str | None,
        verify_sources: bool,
        relocate: Mapping[str, str] | None = None,
    ) -> None:
        self.verify_sources = verify_sources
        self.relocate = dict(relocate or {})
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.root_array_name = root_array_name
        self.remote_protocol = remote_protocol.rstrip(":/") if remote_protocol else None

    def array_name_for(self, url: str) -> str:
        """The root array's name: the option, or the reference file name without suffixes."""
        if self.root_array_name:
            return self.root_array_name
        name = url.rstrip("/").rsplit("/", 1)[-1]
        for suffix in (".gz", ".json", ".parquet", ".parq", ".zarr"):
            name = name.removesuffix(suffix)
        return name or "data"


class KerchunkParser:
    """What both Kerchunk parsers share: their options (see each parser's docstring)."""

    def __init__(
        self,
        drop_variables: Iterable[str] = (),
        root_array_name: str | None = None,
        remote_protocol: str | None = None,
        verify_sources: bool = True,
        relocate: Mapping[str, str] | None = None,
    ) -> None:
        """Configure the parser (see the class docstring).

        ``relocate`` maps URL prefixes the references were written with to where those
        objects are now (a moved directory): each resolved URL below an old prefix is read
        below the new one.
        """
        self._options = KerchunkOptions(
            drop_variables, root_array_name, remote_protocol, verify_sources, relocate
        )


def with_recorded_sources(
    group: ManifestGroup,
    document: Mapping[str, Any],
    resolver: URLResolver,
    registry: ObjectStoreRegistry,
    source: str,
    options: KerchunkOptions,
) -> ManifestGroup:
    """Verify (unless told not to) and attach the source versions the references record."""
    _check_recorded_sources(document, source)
    stamps = recorded_sources(
        document,
        lambda path: resolver.resolve(path, lambda: "the list of recorded source versions"),
    )
    if options.verify_sources:
        verify_sources(stamps, registry, source)
    return group.with_source_stamps(stamps) if stamps else group


def _check_recorded_sources(document: Mapping[str, Any], source: str) -> None:
    """Refuse recorded source versions that are not what the writer writes: a size that is
    not an integer would pass for a changed source, a version that is not an object for a
    damaged file."""
    section = document.get(SOURCES_KEY)
    sources = section.get("sources") if isinstance(section, Mapping) else None
    if not isinstance(sources, Mapping):
        return
    for path, stamp in sources.items():
        reason = None
        if not isinstance(stamp, Mapping):
            reason = "is not a JSON object"
        elif stamp.get("size") is not None and (
            type(stamp["size"]) is not int or stamp["size"] < 0
        ):
            reason = f"has size {stamp['size']!r}, not a byte count"
        elif not all(isinstance(stamp.get(k), str | None) for k in ("etag", "last_modified")):
            reason = "has an etag or last_modified that is not a string"
        else:
            try:
                if stamp.get("last_modified"):
                    datetime.fromisoformat(stamp["last_modified"])
            except ValueError:
                reason = f"has last_modified {stamp['last_modified']!r}, not an ISO 8601 time"
        if reason:
            raise KerchunkReferenceError(
                f"{source}: the recorded version of source {path!r} {reason}"
            )


def parse_document(key: str, value: Any, source: str) -> Any:
    """A metadata document: JSON objects as they are, strings parsed as JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        text = value
        if text.startswith("base64:"):
            try:
                text = base64.b64decode(text[7:], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as err:
                raise KerchunkReferenceError(
                    f"{source}: {key!r} is not valid base64-encoded UTF-8: {err}"
                ) from err
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise KerchunkReferenceError(f"{source}: {key!r} is not valid JSON: {err}") from err
        except RecursionError as err:
            raise KerchunkReferenceError(
                f"{source}: {key!r} nests JSON too deeply to read"
            ) from err
    raise KerchunkReferenceError(
        f"{source}: metadata {key!r} must be a JSON document, got {type(value).__name__}"
    )


def merge_consolidated(documents: dict[str, Any], source: str) -> None:
    """Take documents from a consolidated ``.zmetadata`` that are not present on their own."""
    for key in [k for k in documents if k.rpartition("/")[2] == ".zmetadata"]:
        consolidated = documents.pop(key)
        prefix = key[: -len(".zmetadata")]
        inner = consolidated.get("metadata") if isinstance(consolidated, dict) else None
        if not isinstance(inner, dict):
            raise KerchunkReferenceError(f"{source}: {key!r} has no 'metadata' object")
        for name, value in inner.items():
            documents.setdefault(prefix + name, parse_document(prefix + name, value, source))


def literal_file_url(text: str) -> str:
    """A ``file://`` URL that cannot be percent-encoded, as the plain path fsspec reads it as.

    fsspec (and so Kerchunk's own references) takes what follows ``file://`` as the path
    itself: ``file:///data/a#b/x.nc`` names a file in ``a#b``, not ``a`` with a fragment.
    virtualstac wrote percent-encoded ``file://`` URLs before it wrote plain paths; a URL
    made only of what encoding leaves (``my%20data``) is read as one of those, anything else
    (a space, ``#``, ``?``, ``[``, a stray ``%``, non-ASCII) as a plain path.
    """
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() != "file":
        return text
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    if not rest.startswith("/") or _ENCODED_PATH.fullmatch(rest):
        return text
    return rest


class URLResolver:
    """Turns the URLs of references into absolute URLs, each distinct URL once."""

    def __init__(
        self,
        source: str,
        registry: ObjectStoreRegistry,
        options: KerchunkOptions,
        templates: Mapping[str, Any],
    ) -> None:
        self.source = source
        self.root = source.rsplit("/", 1)[0] + "/"
        self.registry = registry
        self.options = options
        self.templates = {str(k): v for k, v in templates.items()}
        for name, value in self.templates.items():
            if not isinstance(value, str) or "{{" in value:
                raise KerchunkReferenceError(
                    f"{source}: template {name!r} must be a plain string (templates that are "
                    "themselves templates need jinja2 and are not supported)"
                )
        self._resolved: dict[str, str] = {}
        self.stamps: dict[str, SourceStamp] = {}  # objects referenced whole, from their HEAD

    def substitute(self, text: str) -> str:
        """Replace ``{{name}}`` by the template's value (fsspec's simple templates)."""

        def replace(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name not in self.templates:
                raise KerchunkReferenceError(
                    f"{self.source}: {text!r} uses template {{{{{name}}}}}, which is not "
                    f"defined (templates: {sorted(self.templates)})"
                )
            return cast(str, self.templates[name])

        return TEMPLATE.sub(replace, text)

    def resolve(self, url: Any, user: Callable[[], str]) -> str:
        """The absolute URL a reference points to; ``user()`` says what uses it, for messages
        (``"chunk 'v/0'"``)."""
        cached = self._resolved.get(url)
        if cached is not None:
            return cached
        if not isinstance(url, str) or not url:
            raise KerchunkReferenceError(f"{self.source}: {user()} references {url!r}; {NEEDS_URL}")
        # fsspec fills templates only in a reference set that defines some: a plain path
        # such as /data/{{x}}/f.nc is read as it is. One that starts with a template uses it.
        templated = "{{" in url and (bool(self.templates) or url.startswith("{{"))
        text = self.substitute(url) if templated else url
        if self.options.remote_protocol and "://" not in text and not text.startswith("/"):
            text = f"{self.options.remote_protocol}://{text}"
        text = literal_file_url(text)
        try:
            resolved = normalize_url(text, root=self.root)
        except InvalidPathError as err:
            raise InvalidPathError(
                f"{self.source}: {user()} references {url!r}, which cannot be resolved: {err}"
            ) from err
        for old, new in self.options.relocate.items():
            if resolved.startswith(old):
                resolved = new + resolved[len(old) :]
                break
        self._resolved[url] = resolved
        return resolved

    def size(self, url: str, key: str) -> int:
        """The size of the object at ``url`` (a HEAD request), for whole-object references."""
        if url not in self.stamps:
            try:
                self.stamps[url] = SourceStamp.from_meta(self.registry.head(url))
            except UnregisteredURLError as err:
                raise UnregisteredURLError(
                    f"{self.source}: chunk {key!r} references the whole object {url!r}, whose "
                    f"size must be looked up through the registry: {err}"
                ) from err
            except FileNotFoundError as err:
                raise SourceNotFoundError(
                    f"{self.source}: chunk {key!r} references the whole object {url!r}, "
                    "which does not exist"
                ) from err
        return int(cast(int, self.stamps[url].size))
