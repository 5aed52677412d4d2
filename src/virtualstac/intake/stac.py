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
:func:`~virtualstac.stac.open_stac` (so a collection's published virtual store is preferred
where open_stac does so), and read through their references.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

import pystac
import xarray as xr
from pystac_client import Client, ItemSearch

from virtualstac.intake.arguments import Arguments
from virtualstac.intake.base import VirtualDataSource
from virtualstac.stac.dataset import StacReferences, open_stac_references
from virtualstac.stac.invalid import reading_stac

__all__ = ["StacVirtualSource"]

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
        Keys of the assets to open (a list, or a template rendering one, such as
        ``"{{ bands }}"`` for a list parameter); by default the Items' data assets a parser
        reads.
    collections, bbox, datetime, ids, query, filter, max_items
        Search parameters, as for ``pystac_client.Client.search``. ``bbox`` may be a list
        of numbers or a ``"west,south,east,north"`` string.
    sign
        A function applied to every URL read, or its import path as a string
        (``"planetary_computer.sign"`` or ``"package.module:function"``).
    parallel, group, loadable_variables, drop_variables, concat_dim, overview_level
        As for :func:`~virtualstac.stac.open_stac` (``overview_level``: a COG overview, 0 the
        largest; a template may render it as text).
    chunks
        Dask chunks of the dataset; ``{}`` (the default) keeps the files' own chunks.
    authorize, trust_catalog_endpoints
        What the STAC catalog may make us read beyond its own assets, and whether your
        credentials may go to the S3 endpoints it chooses, as for
        :func:`~virtualstac.stac.open_stac` (see ``docs/security.md``).
    metadata
        Catalog metadata.
    """

    name = "stac_virtual"

    def __init__(
        self,
        url: str,
        assets: Sequence[str] | str | None = None,
        collections: Sequence[str] | str | None = None,
        bbox: Sequence[float | str] | str | None = None,
        datetime: str | dt.date | None = None,
        ids: Sequence[str] | str | None = None,
        query: dict[str, Any] | None = None,
        filter: dict[str, Any] | str | None = None,
        max_items: int | str | None = None,
        sign: Callable[[str], str] | str | None = None,
        parallel: bool | str | Any = False,
        group: str | None = None,
        loadable_variables: Sequence[str] | None = None,
        drop_variables: Sequence[str] | None = None,
        concat_dim: str | None = None,
        overview_level: int | str | None = None,
        chunks: dict[str, int] | None = None,
        metadata: dict[str, Any] | None = None,
        authorize: Sequence[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
        **unknown: Any,
    ) -> None:
        """Check the arguments as a catalog gives them.

        Raises
        ------
        InvalidCatalogArgumentError
            If an argument is unknown or of the wrong type.
        """
        arguments = Arguments(self.name, metadata)
        arguments.unknown(unknown, StacVirtualSource.__init__)
        super().__init__(metadata=arguments.mapping("metadata", metadata))
        if not isinstance(url, str) or not url.strip():
            raise arguments.error("url", url, "the path or URL of STAC JSON or a STAC API")
        self.url = url
        self.assets = _names(arguments.names("assets", assets))
        self.search_parameters = _search_parameters(
            collections=_names(arguments.names("collections", collections)),
            bbox=arguments.numbers("bbox", bbox),
            datetime=arguments.moment("datetime", datetime),
            ids=_names(arguments.names("ids", ids)),
            query=arguments.mapping("query", query),
            filter=filter if isinstance(filter, str) else arguments.mapping("filter", filter),
            max_items=arguments.whole("max_items", max_items),
        )
        if not (sign is None or callable(sign) or isinstance(sign, str)):
            raise arguments.error("sign", sign, "a function or its import path")
        self.sign = _signer(sign)
        if isinstance(parallel, str) and parallel != "dask":
            raise arguments.error("parallel", parallel, "true, false or 'dask'")
        self.parallel = parallel
        self.group = arguments.text("group", group)
        self.loadable_variables = arguments.variables("loadable_variables", loadable_variables)
        self.drop_variables = arguments.variables("drop_variables", drop_variables)
        self.concat_dim = arguments.text("concat_dim", concat_dim)
        self.overview_level = arguments.overview_level(overview_level)
        self.chunks = arguments.chunks(chunks)
        authorized = arguments.names("authorize", authorize)
        self.authorize = [authorized] if isinstance(authorized, str) else list(authorized or ())
        self.trust_catalog_endpoints = bool(
            arguments.flag("trust_catalog_endpoints", trust_catalog_endpoints)
        )
        self._references: StacReferences | None = None

    def stac(self) -> pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch:
        """The STAC object ``url`` names, or the search it and the parameters describe."""
        if self.search_parameters:
            return Client.open(self.url).search(**self.search_parameters)
        # A relative path would be resolved against whatever the working directory is later.
        url = self.url if "://" in self.url else os.path.abspath(self.url)
        with reading_stac(url):
            document = pystac.StacIO.default().read_json(url)
            if document.get("type") == "FeatureCollection":
                return pystac.ItemCollection.from_dict(document)
            if "conformsTo" in document and any(
                link.get("rel") == "search" for link in document.get("links", [])
            ):
                return Client.open(url).search()
            found = pystac.read_dict(document, href=url)
        if not isinstance(found, pystac.Item | pystac.Catalog):
            raise ValueError(f"{url!r} is a {type(found).__name__}, not STAC Items")
        return found

    def _open_references(self) -> StacReferences:
        """Parse the assets once (headers and chunk indexes); later calls reuse them."""
        if self._references is None:
            self._references = open_stac_references(
                self.stac(),
                self.assets,
                sign=self.sign,
                parallel=self.parallel,
                group=self.group,
                loadable_variables=self.loadable_variables,
                drop_variables=self.drop_variables,
                concat_dim=self.concat_dim,
                overview_level=self.overview_level,
                authorize=self.authorize,
                trust_catalog_endpoints=self.trust_catalog_endpoints,
            )
        return self._references

    def _parsed(self) -> xr.Dataset:
        return self._open_references().virtual

    def to_dask(self) -> xr.Dataset:
        """The dataset, lazy and dask-backed, read through the references."""
        return self._open_references().to_dataset(self.chunks)

    def _close(self) -> None:
        self._references = None


def _names(value: Sequence[str] | str | None) -> list[str] | None:
    """A list of names from a list, or from what a template renders: ``"['red', 'nir']"``
    (a list parameter), ``"red,nir"`` or ``"red"``."""
    if value is None or not isinstance(value, str):
        return None if value is None else [str(name) for name in value]
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError) as err:
            raise ValueError(f"cannot read a list of names from {value!r}: {err}") from err
        return [str(name) for name in parsed]
    return [name.strip() for name in text.split(",") if name.strip()]


def _search_parameters(**given: Any) -> dict[str, Any]:
    """The search parameters given, with catalog templating's strings turned into values."""
    found = {name: value for name, value in given.items() if value not in (None, "", [])}
    bbox = found.get("bbox")
    if isinstance(bbox, str):
        bbox = bbox.split(",")
    if bbox is not None:
        try:
            found["bbox"] = [float(v) for v in bbox]
        except ValueError as err:
            raise ValueError(
                f"bbox must be four numbers (west, south, east, north): {err}"
            ) from err
    if "max_items" in found:
        found["max_items"] = int(found["max_items"])
    return found


def _signer(sign: Callable[[str], str] | str | None) -> Callable[[str], str] | None:
    """A sign function, imported when given as ``"module.function"`` or ``"module:function"``."""
    if sign is None or callable(sign):
        return sign
    module, _, name = sign.rpartition(":") if ":" in sign else sign.rpartition(".")
    if not module:
        raise ValueError(
            f"sign must be a function or its import path like 'package.sign', not {sign!r}"
        )
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"sign {sign!r} cannot be imported: {err}") from err
    if not callable(function):
        raise ValueError(f"sign {sign!r} is not a function")
    signer: Callable[[str], str] = function
    return signer
