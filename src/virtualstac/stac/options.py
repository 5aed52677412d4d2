"""The options of opening STAC objects, defined once for every entry point.

:func:`~virtualstac.stac.open_stac`, ``to_xarray`` (Items, Collections, Assets),
:func:`~virtualstac.stac.open_asset`, the ``virtualstac`` xarray engine and the Intake
``stac_virtual`` driver all take ``**options: Unpack[OpenOptions]``; the engine's
``open_dataset_parameters`` and the Intake driver's argument checks are derived from
:data:`OPTION_NAMES`. ``group_by`` is the one option named in the signatures themselves,
because it chooses what comes back (a dataset, or a dict of datasets per grid); ``assets``
(which assets to open) is the second positional argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any, Literal, TypedDict

from virtualstac.errors import VirtualStacError
from virtualstac.stac.grouping import GroupBy
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import CF_DECODING

__all__ = [
    "DECODING_OPTIONS",
    "OPTION_NAMES",
    "READING_OPTIONS",
    "InvalidOptionError",
    "OpenOptions",
    "UnknownOptionError",
    "check_option_names",
]


class UnknownOptionError(VirtualStacError, TypeError):
    """An option opening STAC objects does not take (often one of odc-stac's ``load``)."""


class InvalidOptionError(VirtualStacError, ValueError):
    """An option's value does not fit what was opened (``chunks`` naming no dimension)."""


class OpenOptions(TypedDict, total=False):
    """Every option of opening STAC objects (all optional)."""

    registry: ObjectStoreRegistry | None
    """The read allow-list; by default :func:`~virtualstac.stac.stac_registry`: the exact
    location of every asset, with the store settings of their ``storage:schemes``. A registry
    of your own is your authorization: everything it allows may be read."""
    sign: Callable[[str], str] | None
    """Applied to every URL when it is read (e.g. ``planetary_computer.sign``); references
    keep naming the unsigned URL."""
    groupby: GroupBy | None
    """Which Items form one time step: ``"time"`` (the default: equal datetimes),
    ``"solar_day"``, ``"id"``, an Item property name or a function ``item -> key``."""
    parallel: Executor | Literal["dask"] | bool | Any
    """As in :func:`virtualstac.open_virtual_mfdataset`: ``False``, ``True``/``"dask"``, an
    ``Executor`` or a ``dask.distributed.Client``; assets are parsed as parallel tasks."""
    progress: bool
    """A progress bar on stderr while assets are parsed."""
    group: str | None
    """The group of each asset's file to open (HDF5/netCDF-4/Zarr)."""
    loadable_variables: Iterable[str] | None
    """Variables read into memory while parsing; by default the parser's (coordinates)."""
    drop_variables: Iterable[str] | str | None
    """Variables left out."""
    decode_times: bool | None
    """CF time decoding, as in ``xr.open_zarr`` (and of loaded variables while parsing)."""
    concat_dim: str | None
    """The dimension Items are combined along; overrides ``virtual:concat_dim``
    (default ``time``)."""
    use_published: bool | None
    """Open the store published for a Collection (or for an Item) instead of parsing its
    sources; by default yes, unless ``references=True``. ``False`` always parses."""
    overview_level: int | None
    """This COG overview of every raster asset (0: the largest), as rasterio numbers them."""
    authorize: Iterable[str] | str | None
    """URL prefixes you trust the catalog to make us read beyond its own assets."""
    trust_catalog_endpoints: bool
    """Send your credentials to the S3 endpoints the catalog's ``custom-s3`` schemes choose."""
    references: bool
    """Return references (ManifestArrays parsed from the sources, to combine and publish)
    instead of values."""
    chunks: Mapping[str, Any] | str | int | None
    """Dask chunks, as in ``xr.open_zarr``; by default ``{}``: the files' own chunks.
    ``None`` gives lazily indexed arrays without dask."""
    mask_and_scale: bool | Mapping[str, bool] | None
    """CF decoding of ``_FillValue``/``scale_factor``/``add_offset``, as in ``xr.open_zarr``:
    for every variable, or per variable name (``{"qa_pixel": False}`` keeps a bit-field band's
    integers while the reflectances are decoded)."""
    decode_timedelta: bool | None
    """CF decoding of durations, as in ``xr.open_zarr``."""
    use_cftime: bool | None
    """Decode times to ``cftime`` objects, as in ``xr.open_zarr``."""
    concat_characters: bool | None
    """Join character arrays into strings, as in ``xr.open_zarr``."""
    decode_coords: bool | Literal["coordinates", "all"] | None
    """Which attributes become coordinates, as in ``xr.open_zarr``."""


#: Every option's name, ``group_by`` first: what the engine and Intake accept.
OPTION_NAMES: tuple[str, ...] = ("group_by", *OpenOptions.__annotations__)
#: CF decoding options, passed to ``xr.open_zarr`` when values are read.
DECODING_OPTIONS: tuple[str, ...] = CF_DECODING
#: Options that only apply to reading values, never to references.
READING_OPTIONS: tuple[str, ...] = ("chunks", *DECODING_OPTIONS[:1], *DECODING_OPTIONS[2:])

_RESAMPLING = (
    "references cannot resample or reproject: every asset opens on its own grid "
    "(group_by='grid' gives one dataset per grid, each at its native resolution and CRS); "
    "reproject the values afterwards (odc.geo's xr_reproject, rioxarray's .rio.reproject), or "
    "load with odc-stac"
)
_SELECTING = (
    "open, then select lazily in the data's CRS: ds.sel(x=slice(west, east), y=slice(north, "
    "south)); only the chunks you read are fetched"
)
#: odc-stac's ``load`` options, and what to do instead.
_ODC_OPTIONS: Mapping[str, str] = {
    "bands": "name the assets (asset keys, or band names and common names such as 'red') "
    "with assets=[...], the second argument",
    **dict.fromkeys(
        ("resolution", "crs", "geobox", "like", "anchor", "align", "resampling"), _RESAMPLING
    ),
    **dict.fromkeys(("bbox", "geopolygon", "lon", "lat", "x", "y"), _SELECTING),
    "dtype": "values are decoded as CF says (nodata masked, scale and offset applied): cast "
    "them with .astype(...), or pass mask_and_scale=False for the stored type",
    "nodata": "nodata comes from the files and the catalog (raster:bands, bands); pass "
    "mask_and_scale=False and mask the values yourself",
    "patch_url": "pass sign= (a function from URL to URL, applied at every read)",
    "pool": "pass parallel= (an Executor, True or a dask Client)",
}


def check_option_names(options: Mapping[str, Any]) -> None:
    """Refuse options that opening STAC objects does not take, instead of ignoring them (a
    ``resolution=20`` ignored would silently give 10 m data).

    Raises
    ------
    UnknownOptionError
        Naming each unknown option, and what to do instead for odc-stac's.
    """
    unknown = [name for name in options if name not in OPTION_NAMES]
    if not unknown:
        return
    advice = "; ".join(f"{name}=: {_ODC_OPTIONS[name]}" for name in unknown if name in _ODC_OPTIONS)
    raise UnknownOptionError(
        f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
        f"for opening STAC objects{f' ({advice})' if advice else ''}; the options are: "
        f"assets, {', '.join(OPTION_NAMES)}"
    )
