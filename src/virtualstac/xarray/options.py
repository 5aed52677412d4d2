"""The keyword arguments of the opening functions read as ``xr.open_mfdataset`` reads them
(one variable name, ``concat_dim`` levels), and those of ``xr.open_mfdataset``,
``xr.open_dataset`` and VirtualiZarr that they spell differently, or that mean nothing for
references: each of these is refused with an
:class:`~virtualstac.errors.UnsupportedOptionError` saying what to use instead, never passed
on to xarray (which would fail with a bare ``TypeError``) nor silently ignored."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import xarray as xr

from virtualstac import parsers
from virtualstac.errors import UnsupportedOptionError

__all__ = [
    "COMBINE_OPTIONS",
    "INSTEAD",
    "WRITE_INSTEAD",
    "ConcatDim",
    "check_combine_values",
    "check_parser",
    "concat_levels",
    "dim_name",
    "names",
    "refuse_options",
]

#: One level of ``concat_dim``: a dimension's name, a new dimension with its coordinate, or
#: None (merge, not concatenate).
type ConcatDim = str | xr.DataArray | pd.Index | None

#: The options of ``xr.combine_by_coords`` and ``xr.combine_nested`` that
#: ``open_virtual_mfdataset`` passes on to them.
COMBINE_OPTIONS = frozenset(
    {"data_vars", "coords", "compat", "join", "combine_attrs", "fill_value"}
)

_VALUES = (
    "references hold the file's bytes and attributes as they are, and values are decoded when "
    "read: pass it to xr.open_dataset(path, engine='virtualstac', ...), or to "
    "virtualstac.xarray.unpacking.open_zarr_values(ds.virtual.to_store(registry), ...)"
)
_FORMAT = (
    "the format is detected from the file's first bytes; to choose it, pass parser= "
    "(virtualstac.parsers.HDFParser(), NetCDF3Parser(), TIFFParser(), ZarrParser(), "
    "KerchunkJSONParser(), KerchunkParquetParser())"
)
_PARSER_OPTIONS = (
    "a format's options are given to its parser (parser=HDFParser(...)), storage options to "
    "the registry (registry=ObjectStoreRegistry.for_url(url, region=..., ...) or "
    "registry.register(prefix, ...))"
)
_FILES = "references hold no open file: nothing to lock, cache or close"

#: What to use instead of each option virtualstac does not take.
INSTEAD: Mapping[str, str] = {
    "chunks": (
        "references have no dask chunks: read values with chunks= through "
        "xr.open_dataset(path, engine='virtualstac', chunks=...) or "
        "virtualstac.xarray.unpacking.open_zarr_values(ds.virtual.to_store(registry), "
        "chunks=...)"
    ),
    "engine": _FORMAT,
    "backend": _FORMAT,
    "filetype": _FORMAT,
    **dict.fromkeys(
        (
            "decode_cf",
            "mask_and_scale",
            "decode_coords",
            "decode_timedelta",
            "use_cftime",
            "concat_characters",
            "use_zarr_fill_value_as_mask",
        ),
        _VALUES,
    ),
    **dict.fromkeys(("lock", "cache", "inline_array", "autoclose"), _FILES),
    **dict.fromkeys(
        ("backend_kwargs", "virtual_backend_kwargs", "reader_options", "storage_options"),
        _PARSER_OPTIONS,
    ),
    "indexes": (
        "dimension coordinates are loaded with their indexes by default "
        "(loadable_variables=None); loadable_variables=[] keeps every variable virtual, "
        "without indexes"
    ),
    "cftime_variables": "give them in loadable_variables (decoded unless decode_times=False)",
    "skip_variables": "drop_variables=[...]",
    "virtual_array_class": "virtual variables are virtualstac.manifests.ManifestArray",
}


#: What to use instead of the options of VirtualiZarr's ``.vz`` writers ``.virtual`` does not
#: take.
WRITE_INSTEAD: Mapping[str, str] = {
    "last_updated_at": (
        "each source's references carry the last-modified time recorded when it was parsed as "
        "their Icechunk checksum, so a source changed since is refused when read"
    ),
    "mode": (
        "to_icechunk writes the arrays at group= (replacing those of the same names), or "
        "appends along append_dim="
    ),
    "region": "write whole arrays, or append along append_dim=",
    "write_inherited_coords": (
        "each group is written with its own variables, as the file holds them; readers of "
        "the tree inherit its parents' coordinates"
    ),
    "zarr_format": "Kerchunk references are written with Zarr v2 metadata, as kerchunk writes",
    "categorical_threshold": "parquet references always store each record file's paths once",
}


#: The values xarray's combine functions take for each of :data:`COMBINE_OPTIONS` given as
#: text (``data_vars``/``coords`` also take a list of names, ``combine_attrs`` a function).
_COMBINE_VALUES: Mapping[str, tuple[str, ...]] = {
    "data_vars": ("all", "minimal", "different"),
    "coords": ("all", "minimal", "different"),
    "compat": ("identical", "equals", "broadcast_equals", "no_conflicts", "override"),
    "join": ("outer", "inner", "left", "right", "exact", "override"),
    "combine_attrs": ("drop", "identical", "no_conflicts", "drop_conflicts", "override"),
}


def check_combine_values(options: Mapping[str, Any]) -> None:
    """Refuse a combine option's text that xarray does not know, before any file is read:
    from inside the combining, xarray's refusal would read as files that do not combine.

    Raises
    ------
    ValueError
        Naming the option, the value and those it takes.
    """
    for name, taken in _COMBINE_VALUES.items():
        value = options.get(name)
        if isinstance(value, str) and value not in taken:
            raise ValueError(
                f"{name}={value!r} is not one of {', '.join(map(repr, taken))} "
                "(as xr.open_mfdataset takes them)"
            )


def refuse_options(
    options: Mapping[str, Any],
    allowed: Collection[str],
    where: str,
    instead: Mapping[str, str] = INSTEAD,
    otherwise: str = "it is not one of its parameters",
) -> None:
    """Refuse the first of ``options`` (keyword arguments given to ``where``) that is not one
    of ``allowed``, saying what to use ``instead`` of it (``otherwise`` for an option
    ``instead`` does not name).

    Raises
    ------
    UnsupportedOptionError
        Naming the option and what to use instead.
    """
    for name in options:
        if name in allowed:
            continue
        advice = instead.get(name, otherwise)
        raise UnsupportedOptionError(f"{where} does not take {name}=: {advice}")


#: The libraries whose parsers return stores virtualstac cannot read, by top-level module.
_FOREIGN = {"virtualizarr": "VirtualiZarr's", "virtual_tiff": "virtual-tiff's"}
#: Their parsers named otherwise here.
_SAME_FORMAT = {"VirtualTIFF": "TIFFParser"}


def check_parser(parser: object, url: str) -> None:
    """Refuse a parser of another library (VirtualiZarr's, virtual-tiff's), whose stores
    virtualstac cannot read, naming the virtualstac parser to use instead.

    Raises
    ------
    UnsupportedOptionError
        If ``parser`` is one of those libraries' parsers.
    """
    module = type(parser).__module__.partition(".")[0]
    if module not in _FOREIGN:
        return
    name = type(parser).__name__
    same = _SAME_FORMAT.get(name, name)
    ours = f"virtualstac.parsers.{same}()" if hasattr(parsers, same) else "no parser"
    raise UnsupportedOptionError(
        f"{url}: parser={name}() is {_FOREIGN[module]}, whose stores virtualstac cannot read: "
        f"pass "
        f"{ours} (parser=None detects the format), with its group= as open_virtual_dataset's "
        "group= and its skip_variables or drop_variables as drop_variables="
    )


def names(variables: str | Iterable[str] | None) -> list[str]:
    """Variable names given as xarray takes them (``drop_variables``): one name, or several;
    a name is not a sequence of one-letter names."""
    if variables is None:
        return []
    return [variables] if isinstance(variables, str) else list(variables)


def concat_levels(dims: ConcatDim | Sequence[ConcatDim]) -> list[ConcatDim]:
    """``concat_dim`` as a list of one item per level, as ``xr.open_mfdataset`` reads it."""
    if dims is None or isinstance(dims, str | xr.DataArray | pd.Index):
        return [dims]
    return list(dims)


def dim_name(dim: ConcatDim) -> Hashable | None:
    """The name of the dimension ``xr.concat`` makes of ``dim``."""
    if isinstance(dim, xr.DataArray):
        return dim.dims[0]
    if isinstance(dim, pd.Index):
        return dim.name if dim.name is not None else "concat_dim"
    return dim
