"""intake-xarray's arguments, so its users can switch ``driver: netcdf`` to ``virtual``.

An intake-xarray entry spells the options of ``xr.open_(mf)dataset`` in ``xarray_kwargs``
and may name its files with a pattern (``path_as_pattern``), whose fields become coordinates
of each file (:class:`PathPattern`). The options that mean the same
for references are taken (``decode_times``, ``drop_variables``, ``group``, ``combine``, the CF
decoding options, the combine options, ``parallel``); an ``engine`` whose files virtualstac
parses is taken too, since the format is read from the files themselves. Anything else is
refused, saying why, rather than silently ignored. fsspec's spellings of ``storage_options``
are translated to obstore's, and Kerchunk references opened through fsspec's reference
filesystem (``urlpath: "reference://"``) name the references file and its sources' options.
"""

from __future__ import annotations

import os
import re
from typing import Any

import xarray as xr
from intake.readers.utils import pattern_to_glob
from intake.source.utils import reverse_format

from virtualstac.errors import InvalidCatalogArgumentError
from virtualstac.intake.arguments import Arguments
from virtualstac.storage.urls import file_url_to_path
from virtualstac.xarray.unpacking import CF_DECODING

__all__ = [
    "SHARED",
    "PathPattern",
    "from_xarray_kwargs",
    "fsspec_references",
    "obstore_options",
    "pattern_fields",
    "pattern_glob",
]

#: The CF decoding options applied as values are read (``decode_times`` is an argument).
DECODING = tuple(name for name in ("decode_cf", *CF_DECODING) if name != "decode_times")
#: Arguments of the ``virtual`` driver that ``xr.open_mfdataset`` spells the same.
SHARED = ("group", "drop_variables", "decode_times", "combine", "concat_dim", "chunks")
#: Options of ``xr.combine_by_coords``/``combine_nested``, passed to the combine, and the
#: values xarray takes (``data_vars`` and ``coords`` a list of names too).
_COMBINING = {
    "data_vars": ("all", "minimal", "different"),
    "coords": ("all", "minimal", "different"),
    "compat": ("identical", "equals", "broadcast_equals", "no_conflicts", "override"),
    "join": ("outer", "inner", "left", "right", "exact", "override"),
    "combine_attrs": ("drop", "identical", "no_conflicts", "drop_conflicts", "override"),
}
#: xarray engines whose files virtualstac parses (it reads the format from the file).
_ENGINES = ("netcdf4", "h5netcdf", "scipy", "zarr", "rasterio", "kerchunk", "virtualstac")
#: What the others do not mean for references, and what to do instead.
_REFUSED = {
    "preprocess": "a function, which a YAML catalog cannot hold: open the entry with "
    "virtualstac.open_virtual_mfdataset(..., preprocess=...) in Python",
    "backend_kwargs": "options of an xarray backend, which virtualstac does not use",
}
#: intake-xarray's pattern fields in a path: ``{year}`` or ``{date:%Y%m%d}``.
_PATTERN_FIELD = re.compile(r"\{[A-Za-z_]\w*(:[^{}]*)?\}")


def from_xarray_kwargs(arguments: Arguments, given: Any) -> dict[str, Any]:
    """The ``virtual`` driver's arguments that ``xarray_kwargs`` (intake-xarray's spelling of
    ``xr.open_mfdataset``'s options) stand for.

    Returns
    -------
    dict
        Driver arguments (``group``, ``chunks``...), ``parallel``, ``combine_options`` and
        ``decoding`` (the CF decoding options applied as values are read).

    Raises
    ------
    InvalidCatalogArgumentError
        For an option that means nothing for references, or an engine for another format.
    """
    options = arguments.mapping("xarray_kwargs", given) or {}
    mapped: dict[str, Any] = {"combine_options": {}, "decoding": {}}
    for name, value in options.items():
        if name in SHARED:
            mapped[name] = value
        elif name in DECODING:
            value = arguments.rendered_flag(value)
            if not _decoding(name, value):
                raise arguments.refused(
                    "xarray_kwargs", f"has {name}: {value!r}, not true or false"
                )
            mapped["decoding"][name] = value
        elif name in _COMBINING:
            listed = name in ("data_vars", "coords") and isinstance(value, list)
            if not (value in _COMBINING[name] or listed):
                raise arguments.refused(
                    "xarray_kwargs",
                    f"has {name}: {value!r}, not one of {', '.join(_COMBINING[name])}",
                )
            mapped["combine_options"][name] = value
        elif name == "parallel":
            # xarray's parallel=True opens the files as dask.delayed tasks: so do we.
            parallel = arguments.flag("xarray_kwargs: parallel", value)
            mapped["parallel"] = "dask" if parallel else False
        elif name == "storage_options":
            # The kerchunk engine's options of fsspec's reference filesystem.
            mapped["source_options"] = _sources(arguments, value)
        elif name == "consolidated":
            # Which of a Zarr store's metadata xarray reads: the same arrays either way.
            arguments.flag("xarray_kwargs: consolidated", value)
        elif name == "engine":
            if value is not None and value not in _ENGINES:  # None: xarray guesses
                raise arguments.refused(
                    "xarray_kwargs",
                    f"names engine {value!r}, whose files virtualstac does not parse; it reads "
                    f"what engines {', '.join(_ENGINES)} read, finding the format in the file",
                )
        else:
            reason = _REFUSED.get(name) or "an option of xarray that references do not take"
            raise arguments.refused(
                "xarray_kwargs",
                f"has {name!r}: {reason}; it takes {', '.join(_taken())}",
            )
    return mapped


def _decoding(name: str, value: Any) -> bool:
    """Whether ``value`` is what the CF decoding option ``name`` takes: true or false, or
    one for each variable name; ``decode_coords`` also ``coordinates`` or ``all``."""
    if name == "decode_coords":
        return value is None or isinstance(value, bool) or value in ("coordinates", "all")
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, bool) for k, v in value.items())
    return value is None or isinstance(value, bool)


def _taken() -> list[str]:
    return [
        "engine",
        *SHARED,
        *DECODING,
        *_COMBINING,
        "parallel",
        "consolidated",
        "storage_options",
    ]


def pattern_fields(urlpath: str | list[str]) -> list[str]:
    """intake-xarray's pattern fields (``{year}``) in ``urlpath``."""
    paths = [urlpath] if isinstance(urlpath, str) else urlpath
    return [field.group(0) for path in paths for field in _PATTERN_FIELD.finditer(path)]


#: fsspec's (s3fs, gcsfs) spellings of object store options, as obstore spells them.
_FSSPEC_OPTIONS = {
    "anon": "anonymous",
    "requester_pays": "request_payer",
    "endpoint_url": "endpoint",
    "key": "access_key_id",
    "secret": "secret_access_key",
}
#: s3fs's ``client_kwargs`` (botocore's client arguments), as obstore spells them.
_CLIENT_KWARGS = {"endpoint_url": "endpoint", "region_name": "region"}


def obstore_options(arguments: Arguments, given: Any) -> dict[str, Any]:
    """``storage_options`` as obstore takes them, fsspec's spellings in intake-xarray's
    catalogs translated: ``anon: true``, gcsfs's ``token: anon``, ``requester_pays``, s3fs's
    ``client_kwargs: {endpoint_url, region_name}``, ``endpoint_url``, ``key``/``secret``.

    Raises
    ------
    InvalidCatalogArgumentError
        For a key of ``client_kwargs`` obstore has no option for.
    """
    options = arguments.mapping("storage_options", given) or {}
    translated: dict[str, Any] = {}
    for name, value in options.items():
        if name == "token" and value == "anon":
            translated.setdefault("anonymous", True)
        elif name == "client_kwargs" and isinstance(value, dict):
            for key, setting in value.items():
                if key not in _CLIENT_KWARGS:
                    raise arguments.refused(
                        "storage_options",
                        f"has client_kwargs {key!r}, which no object store option stands for; "
                        f"client_kwargs may hold {', '.join(_CLIENT_KWARGS)}",
                    )
                translated.setdefault(_CLIENT_KWARGS[key], setting)
        else:
            translated[_FSSPEC_OPTIONS.get(name, name)] = value
    endpoint = translated.get("endpoint")
    if "client_kwargs" in options and isinstance(endpoint, str) and endpoint.startswith("http:"):
        # s3fs reads the http:// endpoint it is given; obstore needs leave to.
        client = translated.setdefault("client_options", {})
        if isinstance(client, dict):
            client.setdefault("allow_http", True)
    return translated


#: The options of fsspec's reference filesystem, as intake catalogs give them for Kerchunk.
_REFERENCE_OPTIONS = (
    "fo",
    "target_options",
    "remote_options",
    "target_protocol",
    "remote_protocol",
    "skip_instance_cache",
)


def fsspec_references(
    arguments: Arguments, urlpath: Any, storage_options: Any
) -> tuple[Any, Any, dict[str, Any]]:
    """Intake's spelling of Kerchunk references, ``urlpath: "reference://"`` with
    ``storage_options: {fo: refs.json, remote_options: ...}``, as the references file to
    open, the options of its store (``target_options``) and of the sources' stores
    (``remote_options``); any other ``urlpath`` and ``storage_options`` as they are.

    Raises
    ------
    InvalidCatalogArgumentError
        Without ``fo``, or with an option of fsspec's filesystem that means nothing here.
    """
    if not (isinstance(urlpath, str) and urlpath.startswith("reference://")):
        return urlpath, storage_options, {}
    options = arguments.mapping("storage_options", storage_options) or {}
    references = options.get("fo")
    if urlpath != "reference://" or not isinstance(references, str):
        raise arguments.refused(
            "urlpath",
            f"{urlpath!r} is fsspec's reference filesystem: it needs storage_options' fo, "
            "the Kerchunk references file (or name that file as urlpath)",
        )
    unknown = sorted(set(options) - set(_REFERENCE_OPTIONS))
    if unknown:
        raise arguments.refused(
            "storage_options",
            f"has {', '.join(map(repr, unknown))}, which fsspec's reference filesystem takes "
            f"but references read here do not; it takes {', '.join(_REFERENCE_OPTIONS)}",
        )
    # The protocols are in the URLs themselves.
    sources = obstore_options(arguments, options.get("remote_options"))
    return references, options.get("target_options"), sources


def _sources(arguments: Arguments, given: Any) -> dict[str, Any]:
    """The options of the stores of the sources of references, from the kerchunk engine's
    ``storage_options`` (``remote_protocol``, ``remote_options``)."""
    options = arguments.mapping("xarray_kwargs", given) or {}
    taken = ("remote_options", "remote_protocol", "target_protocol", "skip_instance_cache")
    unknown = sorted(set(options) - set(taken))
    if unknown:
        raise arguments.refused(
            "xarray_kwargs",
            f"has storage_options {', '.join(map(repr, unknown))}, which references read here "
            f"do not take (the file's own store options are the entry's storage_options); "
            f"it takes {', '.join(taken)}",
        )
    return obstore_options(arguments, options.get("remote_options"))


def pattern_glob(pattern: str) -> str:
    """The glob of the files a path pattern names, as intake makes it: ``{year:4}`` is four
    ``?``, any other field ``*``."""
    return str(pattern_to_glob(pattern))


class PathPattern:
    """intake-xarray's path pattern (``.../{member}_{date:%Y%m%d}.nc``): called on a file's
    dataset, as ``preprocess``, it gives the dataset the values of the pattern's fields in the
    file's path as scalar coordinates, as intake-xarray does (``{year}`` a string, ``{year:d}``
    an integer, ``{date:%Y%m%d}`` a time).

    A ``file://`` pattern is matched against local paths, which is how a dataset records its
    source (``encoding["source"]``).
    """

    def __init__(self, pattern: str) -> None:
        """The pattern as the catalog gives it, rendered."""
        if pattern.startswith("file://"):
            pattern = file_url_to_path(pattern)
        if "://" not in pattern:
            # As the path was opened: "{{ CATALOG_DIR }}/" may render as "//".
            pattern = os.path.normpath(pattern)
        self.pattern = pattern

    def values(self, source: str) -> dict[str, Any]:
        """The fields' values in the path or URL ``source``.

        Raises
        ------
        InvalidCatalogArgumentError
            If ``source`` does not match the pattern.
        """
        if source.startswith("file://"):
            source = file_url_to_path(source)
        try:
            return dict(reverse_format(self.pattern, source))
        except (ValueError, IndexError) as err:
            raise InvalidCatalogArgumentError(
                f"the file {source!r} does not match the path pattern {self.pattern!r}: {err}"
            ) from err

    def differing(self, sources: list[str]) -> list[str]:
        """The fields whose values differ between the files ``sources``: xarray's default
        (``coords="different"``) concatenates those coordinates, and keeps the others
        scalar."""
        seen: dict[str, set[Any]] = {}
        for source in sources:
            for name, value in self.values(source).items():
                seen.setdefault(name, set()).add(value)
        return [name for name, values in seen.items() if len(values) > 1]

    def __call__(self, dataset: xr.Dataset) -> xr.Dataset:
        """``dataset`` with its file's fields as scalar coordinates."""
        return dataset.assign_coords(self.values(str(dataset.encoding.get("source", ""))))
