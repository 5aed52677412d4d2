"""Malformed STAC JSON: pystac's, json's and Python's own errors as one-line typed errors.

pystac reads linked items lazily while a catalog is walked, and fails on a broken file with
whatever its ``from_dict`` meets: ``KeyError`` for a missing ``assets`` or asset ``href``,
``ValueError`` for a bad datetime, ``JSONDecodeError``, ``FileNotFoundError`` for a dangling
link, or its own ``STACError``. None of them says which file. :func:`catalog_items` walks the
links one by one, and :func:`reading_stac` turns those errors into an
:class:`~virtualstac.errors.InvalidCatalogError` (or a
:class:`~virtualstac.errors.SourceNotFoundError` for a missing file) naming the file, with the
original exception chained. virtualstac's own errors pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pystac

from virtualstac.errors import InvalidCatalogError, SourceNotFoundError, VirtualStacError
from virtualstac.limits import check_stac_catalogs, check_stac_items
from virtualstac.parsers.corrupt import FOREIGN_ERRORS
from virtualstac.stac.authorization import check_link
from virtualstac.stac.stac_io import bounded_stac_io
from virtualstac.storage.failures import describe, redact

__all__ = ["PYSTAC_ERRORS", "catalog_items", "collection_of", "linked_object", "reading_stac"]


#: What pystac raises for JSON that is no valid STAC (its exceptions share no base class).
PYSTAC_ERRORS: tuple[type[Exception], ...] = (
    pystac.STACError,
    pystac.STACTypeError,
    pystac.errors.DuplicateObjectKeyError,
    pystac.errors.RequiredPropertyMissing,
)


@contextmanager
def reading_stac(
    href: str, what: str = "STAC JSON", linked_from: str | None = None
) -> Iterator[None]:
    """Raise a typed error naming ``href`` for a foreign exception raised inside the block.

    ``what`` says what the file should be (``"STAC Item"``); ``linked_from`` names the file
    whose link led there.
    """
    place = redact(href) + (f" (linked from {redact(linked_from)})" if linked_from else "")
    try:
        yield
    except VirtualStacError:
        raise
    except (*PYSTAC_ERRORS, *FOREIGN_ERRORS) as err:
        # pystac hides why a link does not resolve behind a STACError of its own.
        cause = err.__cause__ if isinstance(err, pystac.STACError) else None
        original = cause if isinstance(cause, Exception) else err
        if isinstance(original, VirtualStacError):
            raise original from None  # already typed and named: a link's read that failed
        if isinstance(original, FileNotFoundError):
            raise SourceNotFoundError(f"{what} {place} does not exist") from original
        raise InvalidCatalogError(f"invalid {what} {place}: {_reason(original)}") from original
    except FileNotFoundError as err:
        raise SourceNotFoundError(f"{what} {place} does not exist") from err
    except IsADirectoryError as err:
        raise InvalidCatalogError(
            f"{what} {place} is a directory, not a JSON document: name the JSON file in it"
        ) from err


def _reason(error: BaseException) -> str:
    """One line saying what is wrong with the document."""
    if isinstance(error, KeyError) and error.args:
        return f"the required field {error.args[0]!r} is missing"
    if isinstance(error, UnicodeDecodeError):
        # A data file named where its catalog was meant, most often: say so, not the codec's
        # words.
        byte = error.object[error.start : error.start + 1].hex()
        return f"it is not UTF-8 JSON text (byte 0x{byte} at offset {error.start}; a data file?)"
    moment = _unparsed_datetime(error)
    if moment is not None:
        return f"the datetime {moment!r} is not RFC 3339 ({describe(error)})"
    return describe(error)


def _unparsed_datetime(error: BaseException) -> object | None:
    """The text pystac failed to read as a datetime, if that is where ``error`` arose."""
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if frame.f_code.co_name == "str_to_datetime" and "s" in frame.f_locals:
            text: object = frame.f_locals["s"]
            return text
        trace = trace.tb_next
    return None


def catalog_items(catalog: pystac.Catalog) -> list[pystac.Item]:
    """The items of ``catalog`` and of its children, recursively, as ``get_items`` finds them.

    Raises
    ------
    InvalidCatalogError
        If a linked file is no valid STAC JSON of the kind its link says, or child links
        lead back to a catalog above.
    LimitExceededError
        If the walk gathers more than ``stac_items`` Items or reads more than
        ``stac_catalogs`` catalogs.
    SourceNotFoundError
        If a linked file does not exist.
    """
    if type(catalog).get_items is not pystac.Catalog.get_items:
        # A STAC API's collection (pystac-client) lists its items by searching, not by links.
        with reading_stac(catalog.get_self_href() or f"catalog {catalog.id!r}", "STAC Catalog"):
            return list(catalog.get_items(recursive=True))
    items: list[pystac.Item] = []
    # Depth first without recursion (a chain of catalogs may be deeper than Python's stack),
    # keeping the hrefs of the catalogs above the current one, so that a loop is caught.
    pending: list[tuple[pystac.Catalog, int]] = [(catalog, 0)]
    above: list[str] = []
    walked = 1  # catalogs read: each child is a request, Items or not
    while pending:
        current, depth = pending.pop()
        del above[depth:]
        where = current.get_self_href() or f"catalog {current.id!r} at {id(current):#x}"
        if where in above:
            loop = " -> ".join(redact(href) for href in (*above[above.index(where) :], where))
            raise InvalidCatalogError(
                f"the child links of STAC catalogs form a loop, which has no end to walk: {loop}"
            )
        above.append(where)
        for link in list(current.links):
            if link.rel == pystac.RelType.ITEM:
                items.append(_resolve(link, current, pystac.Item))
                check_stac_items(len(items), source=f"the catalog {redact(where)!r}")
        children = []
        for link in list(current.links):
            if link.rel == pystac.RelType.CHILD:
                walked += 1
                check_stac_catalogs(walked, source=f"the catalog {redact(where)!r}")
                children.append(_resolve(link, current, pystac.Catalog))
        pending.extend((child, depth + 1) for child in reversed(children))
    return items


def _resolve[T: pystac.STACObject](link: pystac.Link, owner: pystac.Catalog, kind: type[T]) -> T:
    """The object ``link`` of ``owner`` points at, read if need be."""
    # A link of a catalog built in memory holds its object and may have no href at all.
    if link.is_resolved():
        href = link.get_href() or f"{link.rel} link"
    else:
        href = link.get_absolute_href() or link.href
    linking = owner.get_self_href() or f"catalog {owner.id!r}"
    what = f"STAC {kind.__name__}"
    if not link.is_resolved():
        check_link(owner, href, link.rel)
    with reading_stac(href, what, linking):
        _read_link(link, owner)
    target = link.target
    if not isinstance(target, kind):
        raise InvalidCatalogError(
            f"invalid {what} {redact(href)} (linked from {redact(linking)}): it is a "
            f"{type(target).__name__}"
        )
    return target


def _read_link(link: pystac.Link, owner: pystac.Catalog) -> None:
    """Resolve ``link``: over HTTP with timeouts and retries unless the catalog's root reads
    with a reader of its user's own (pystac's default one would wait for ever)."""
    root_link = owner.get_root_link()
    if root_link is not None and not root_link.is_resolved():
        check_link(owner, root_link.get_absolute_href() or root_link.href, "root")
    root = owner.get_root()
    href = None if link.is_resolved() else link.get_absolute_href()
    own_reader = getattr(root, "_stac_io", None)
    if (
        href is None
        or not href.startswith(("http://", "https://"))
        or (own_reader is not None and type(own_reader) is not pystac.stac_io.DefaultStacIO)
    ):
        link.resolve_stac_object(root=root)
        return
    stac_io = bounded_stac_io()
    link.target = pystac.read_dict(stac_io.read_json(href), href=href, root=root, stac_io=stac_io)


def linked_object(link: pystac.Link) -> pystac.STACObject:
    """The object ``link`` points at, read if need be: over HTTP with the timeouts, retries
    and ``metadata_bytes`` of :func:`~virtualstac.stac.stac_io.bounded_stac_io` (pystac
    reads a link without a reader of its own with no timeout at all)."""
    if not link.is_resolved():
        href = link.get_absolute_href()
        if href is not None and href.startswith(("http://", "https://")):
            stac_io = bounded_stac_io()
            link.target = pystac.read_dict(stac_io.read_json(href), href=href, stac_io=stac_io)
        else:
            link.resolve_stac_object()
    target = link.target
    assert isinstance(target, pystac.STACObject)  # resolved above
    return target


def collection_of(item: pystac.Item) -> pystac.Collection | None:
    """The Collection ``item`` links to, read if need be, or None if it links to none.

    Raises
    ------
    InvalidCatalogError, SourceNotFoundError
        As :func:`catalog_items`, for the Collection file.
    """
    link = item.get_single_link(pystac.RelType.COLLECTION)
    if link is None or link.is_resolved():
        return item.get_collection()
    href = link.get_absolute_href() or link.href
    check_link(item, href, "collection")
    with reading_stac(href, "STAC Collection", item.get_self_href() or f"item {item.id!r}"):
        # Read with timeouts and retries (pystac's own reader would wait for ever), then kept
        # on the link, as pystac keeps what it resolves.
        stac_io = bounded_stac_io()
        found = pystac.read_dict(stac_io.read_json(href), href=href, stac_io=stac_io)
        if not isinstance(found, pystac.Collection):
            raise ValueError(f"the Item's collection link leads to a {type(found).__name__}")
        link.target = found
        return found
