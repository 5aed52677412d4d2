"""The ``stac_virtual`` Intake driver: STAC Items, Collections and API searches as datasets.

Registered under the ``intake.drivers`` entry point, so a catalog entry says::

    sources:
      scenes:
        driver: stac_virtual
        parameters:
          start: {description: first day, type: str, default: "2024-05-01"}
        args:
          url: https://earth-search.aws.element84.com/v1
          collections: [sentinel-2-l2a]
          bbox: [14.9, 36.0, 15.1, 36.2]
          datetime: "{{ start }}/2024-05-31"
          assets: [red, nir]

``url`` is a STAC Item, Collection or Catalog JSON (a path or URL, e.g.
``{{ CATALOG_DIR }}/stac/collection.json``), an ItemCollection (``FeatureCollection``) JSON, or
the root of a STAC API, searched with ``collections``, ``bbox``, ``datetime``, ``ids``,
``query``, ``filter`` and ``max_items``. The items are opened with
:func:`~virtualstac.stac.open_stac`, which takes every other argument: values (from a
collection's published virtual store where open_stac prefers it, or read through the
references), or with ``references: true`` the references.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, get_type_hints

import pystac
import xarray as xr
from pystac_client import Client, ItemSearch
from pystac_client.errors import ClientTypeError

from virtualstac.errors import InvalidCatalogArgumentError
from virtualstac.intake.arguments import Arguments
from virtualstac.intake.base import VirtualDataSource, refused_when_used
from virtualstac.stac.backend import grid_names
from virtualstac.stac.documents import read_stac
from virtualstac.stac.invalid import reading_stac
from virtualstac.stac.open import _open_stac
from virtualstac.stac.options import OPTION_NAMES, OpenOptions
from virtualstac.stac.stac_io import bounded_api_io, reading_api
from virtualstac.storage.client import DEFAULT_NETWORK

__all__ = ["StacVirtualSource"]

#: What the GeoJSON ``type`` of a static STAC document pystac-client refuses to search is.
_STATIC = {"Feature": "Item", "FeatureCollection": "ItemCollection"}
#: Arguments that make ``url`` the root of a STAC API to search.
SEARCH_PARAMETERS = ("collections", "bbox", "datetime", "ids", "query", "filter", "max_items")


class StacVirtualSource(VirtualDataSource):
    """STAC Items opened as one lazy, dask-backed dataset (the ``stac_virtual`` driver).

    Parameters
    ----------
    url
        A STAC Item, Collection, Catalog or ItemCollection JSON (path or URL), or the root
        of a STAC API (searched when any search parameter is given, or when it is an API
        landing page).
    assets
        Keys of the assets to open (a list, one key, or a template rendering a list, such as
        ``"{{ bands }}"`` for a list parameter); by default the Items' data assets a parser
        reads.
    collections, bbox, datetime, ids, query, filter, max_items
        Search parameters, as for ``pystac_client.Client.search``. ``bbox`` may be a list
        of numbers or a ``"west,south,east,north"`` string.
    metadata
        Catalog metadata.
    **options
        Every option of :func:`~virtualstac.stac.open_stac`
        (:class:`~virtualstac.stac.options.OpenOptions`), checked as the catalog gives them.
        ``sign`` may be a function's import path (``"planetary_computer.sign"`` or
        ``"package.module:function"``); ``overview_level`` the text a template rendered.
        ``chunks``: ``{}`` (the default) keeps the files' own chunks. ``references: true``
        makes ``read()`` and ``to_dask()`` return the references (ManifestArrays) instead of
        values. ``group_by: grid`` makes them return an ``xr.DataTree`` with one group per
        raster grid, named as by the engine's ``open_datatree``.
    """

    name = "stac_virtual"

    @refused_when_used
    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        assets: Sequence[str] | str | None = None,
        collections: Sequence[str] | str | None = None,
        bbox: Sequence[float | str] | str | None = None,
        datetime: str | dt.date | None = None,
        ids: Sequence[str] | str | None = None,
        query: dict[str, Any] | None = None,
        filter: dict[str, Any] | str | None = None,
        max_items: int | str | None = None,
        metadata: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """Check the arguments as a catalog gives them.

        Raises
        ------
        InvalidCatalogArgumentError
            If an argument is unknown or of the wrong type, or ``url`` a relative path.
        """
        arguments = Arguments(self.name, metadata)
        arguments.unknown(
            [name for name in options if name not in OPTION_NAMES],
            StacVirtualSource.__init__,
            also=OPTION_NAMES,
        )
        super().__init__(metadata=arguments.mapping("metadata", metadata))
        if url is None:
            # A required argument Python would refuse unnamed, before the entry is known.
            raise arguments.refused("url", "is missing: the path or URL of STAC JSON or a STAC API")
        location = arguments.paths("url", url) if isinstance(url, str | os.PathLike) else url
        if not isinstance(location, str) or not location.strip():
            raise arguments.error("url", url, "the path or URL of STAC JSON or a STAC API")
        url = self.url = location
        self.assets = _names(arguments, "assets", arguments.names("assets", assets))
        self.search_parameters = _search_parameters(
            arguments,
            collections=_names(
                arguments, "collections", arguments.names("collections", collections)
            ),
            bbox=arguments.numbers("bbox", bbox),
            datetime=arguments.moment("datetime", datetime),
            ids=_names(arguments, "ids", arguments.names("ids", ids)),
            query=arguments.mapping("query", query),
            filter=filter if isinstance(filter, str) else arguments.mapping("filter", filter),
            max_items=arguments.whole("max_items", max_items),
        )
        self.options = _checked_options(arguments, options)
        self.references = bool(self.options.get("references"))
        if "://" not in url and not url.startswith("/"):
            # Relative to the catalog, or to wherever Python runs? As for urlpath, say which.
            raise arguments.relative("url", url)
        self._opened: xr.Dataset | xr.DataTree | None = None

    def stac(self) -> pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch:
        """The STAC object ``url`` names, or the search it and the parameters describe.

        Every request is bounded by the timeouts and retries of the ``registry`` option's
        ``network`` (the defaults without one), links followed later included.
        """
        registry = self.options.get("registry")
        network = registry.network if registry is not None else DEFAULT_NETWORK
        if self.search_parameters:
            where = Arguments(StacVirtualSource.name, self.metadata).where
            searched = ", ".join(self.search_parameters)
            with reading_stac(self.url, "STAC API"), reading_api(self.url):
                try:
                    client = Client.open(self.url, stac_io=bounded_api_io(network))
                except ClientTypeError as err:
                    found = str(err).rpartition("found type=")[2]
                    found = _STATIC.get(found, found or "document")
                    raise InvalidCatalogArgumentError(
                        f"{where}: the search parameters ({searched}) need the root of a STAC "
                        f"API, and {self.url} is a static {found}: leave them out to open "
                        "all of its Items, or name the JSON of the Item to open"
                    ) from err
            try:
                return client.search(**self.search_parameters)
            except Exception as err:  # pystac-client refuses parameters with bare Exceptions
                raise InvalidCatalogArgumentError(
                    f"{where}: the search parameters ({searched}) "
                    f"make no search of {self.url}: {str(err).splitlines()[0]}"
                ) from err
        return read_stac(self.url, network)

    def _parsed(self) -> xr.Dataset | xr.DataTree:
        """Open the items once (headers and chunk indexes); later calls reuse them."""
        if self._opened is None:
            options = dict(self.options)
            group_by = options.pop("group_by", None)
            opened = _open_stac(self.stac(), self.assets, group_by=group_by, **options)
            if isinstance(opened, dict):
                names = grid_names(opened)
                self._opened = xr.DataTree.from_dict({names[g]: opened[g] for g in opened})
            else:
                self._opened = opened
        return self._opened

    def to_dask(self) -> xr.Dataset | xr.DataTree:
        """The dataset, lazy and dask-backed (references with ``references: true``)."""
        with self.naming_entry():
            # A copy: read() loads what it is given in place, and a caller may add variables;
            # neither may change what the next to_dask() gives.
            return self._parsed().copy()

    def _close(self) -> None:
        self._opened = None


def _checked_options(arguments: Arguments, given: dict[str, Any]) -> dict[str, Any]:
    """The options of :class:`OpenOptions` as a catalog gives them, checked against their
    types there; a few are converted from the text a YAML catalog or a template holds."""
    hints = get_type_hints(OpenOptions)
    checked: dict[str, Any] = {}
    for name, value in given.items():
        if name in hints and arguments.fits(True, hints[name]):
            value = arguments.rendered_flag(value)
        if name == "sign":
            if not (value is None or callable(value) or isinstance(value, str)):
                raise arguments.error(name, value, "a function or its import path")
            value = _signer(arguments, value)
        elif name == "parallel" and isinstance(value, str) and value != "dask":
            raise arguments.error(name, value, "true, false or 'dask'")
        elif name == "overview_level":
            value = arguments.overview_level(value)
        elif name == "chunks":
            value = arguments.chunks(value)
        elif name == "authorize":
            value = arguments.prefixes(name, value)
        elif name in ("loadable_variables", "drop_variables"):
            value = arguments.variables(name, value)
        elif name == "group_by":
            if value not in (None, "grid"):
                raise arguments.error(name, value, "'grid'")
        elif not arguments.fits(value, hints[name]):
            raise arguments.error(name, value, arguments.described(hints[name]))
        checked[name] = value
    return checked


def _names(arguments: Arguments, name: str, value: Sequence[str] | str | None) -> list[str] | None:
    """A list of names from a list, or from what a template renders: ``"['red', 'nir']"``
    (a list parameter), ``"red,nir"`` or ``"red"``."""
    if value is None or not isinstance(value, str):
        return None if value is None else [str(name) for name in value]
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError) as err:
            raise arguments.refused(
                name, f"{value!r} is no list of names: {str(err).splitlines()[0]}"
            ) from err
        if not isinstance(parsed, list | tuple):
            raise arguments.refused(name, f"{value!r} is no list of names")
        return [str(entry) for entry in parsed]
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def _search_parameters(arguments: Arguments, **given: Any) -> dict[str, Any]:
    """The search parameters given, with catalog templating's strings turned into values."""
    found = {name: value for name, value in given.items() if value not in (None, "", [])}
    bbox = found.get("bbox")
    if isinstance(bbox, str):
        # "14.9,36.0,15.1,36.2", or "[14.9, 36.0, 15.1, 36.2]" a list parameter renders
        bbox = bbox.strip().removeprefix("[").removesuffix("]").split(",")
    if bbox is not None:
        try:
            found["bbox"] = [float(v) for v in bbox]
        except ValueError as err:
            raise arguments.refused(
                "bbox", f"must be four numbers (west, south, east, north): {err}"
            ) from err
        if len(found["bbox"]) not in (4, 6):
            raise arguments.refused(
                "bbox", f"must be four numbers (west, south, east, north), not {bbox!r}"
            )
    if isinstance(found.get("datetime"), str):
        found["datetime"] = "/".join(map(_rendered_moment, found["datetime"].split("/")))
    if "max_items" in found:
        found["max_items"] = int(found["max_items"])
    if isinstance(found.get("query"), dict):
        found["query"] = {name: _ordered(test) for name, test in found["query"].items()}
    return found


#: The text of a decimal number, as a template renders an int or float parameter.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
#: The comparisons of the query extension that order numbers (``eq`` may compare text, such
#: as a Landsat path "042", which a number would not equal).
_ORDERING = ("lt", "lte", "gt", "gte")


def _ordered(test: Any) -> Any:
    """A property's query test, its ordering bounds as numbers: ``{"lt": "{{ clouds }}"}``
    of an int or float parameter renders as the text "20", which a server compares as text."""
    if not isinstance(test, dict):
        return test
    ordered = dict(test)
    for operator in _ORDERING:
        bound = ordered.get(operator)
        # Only the text of a number: a date, or other text, orders as text.
        if isinstance(bound, str) and _NUMBER.fullmatch(bound.strip()):
            number = float(bound)
            whole = number.is_integer() and bound.strip().lstrip("+-").isdigit()
            ordered[operator] = int(number) if whole else number
    return ordered


def _rendered_moment(text: str) -> str:
    """One end of a datetime interval, ``"2024-05-01 00:00:00"`` (as a template renders a
    ``datetime`` parameter) written as RFC 3339 asks, ``"2024-05-01T00:00:00"``; any other
    text as it is (a date alone still means the whole day to pystac-client)."""
    if " " not in text.strip():
        return text
    try:
        return dt.datetime.fromisoformat(text.strip()).isoformat()
    except ValueError:
        return text


def _signer(
    arguments: Arguments, sign: Callable[[str], str] | str | None
) -> Callable[[str], str] | None:
    """A sign function, imported when given as ``"module.function"`` or ``"module:function"``."""
    if sign is None or callable(sign):
        return sign
    module, _, name = sign.rpartition(":") if ":" in sign else sign.rpartition(".")
    if not module:
        raise arguments.error("sign", sign, "a function or its import path like 'package.sign'")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise arguments.refused("sign", f"{sign!r} cannot be imported: {err}") from err
    if not callable(function):
        raise arguments.refused("sign", f"{sign!r} is not a function")
    signer: Callable[[str], str] = function
    return signer
