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

from virtualstac.stac.grouping import GroupBy
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import CF_DECODING

__all__ = ["DECODING_OPTIONS", "OPTION_NAMES", "READING_OPTIONS", "OpenOptions"]


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
    mask_and_scale: bool | None
    """CF decoding of ``_FillValue``/``scale_factor``/``add_offset``, as in ``xr.open_zarr``."""
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
