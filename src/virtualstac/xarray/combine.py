"""How virtual datasets are combined: options for ``xr.concat`` and ``xr.combine_by_coords``.

References cannot be reindexed, so coordinates must align exactly (``join="exact"``); their
values cannot be compared without reading them, so variables are taken as they come
(``compat="override"``, ``coords="minimal"``) and every data variable is joined.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import xarray as xr
from xarray.coding.times import infer_calendar_name
from xarray.core.indexes import PandasIndex
from xarray.structure.merge import merge_attrs

from virtualstac.errors import (
    IncompatibleArraysError,
    IncompatibleCalendarsError,
    UnsupportedIndexingError,
    UnsupportedOperationError,
    VirtualStacError,
)
from virtualstac.manifests import ManifestArray
from virtualstac.manifests.metadata import check_combinable
from virtualstac.manifests.time_units import calendar_meaning, units_meaning

__all__ = [
    "EXACT_COMBINE",
    "check_labels_agree",
    "check_time_encodings_agree",
    "concat_along_existing",
    "concat_virtual",
    "explaining_combine_errors",
    "incompatible_variable",
    "partial_chunk",
]

#: Keyword arguments for ``xr.concat`` and ``xr.combine_by_coords`` over virtual datasets.
EXACT_COMBINE: Mapping[str, Any] = {
    "data_vars": "all",
    "coords": "minimal",
    "compat": "override",
    "join": "exact",
    "combine_attrs": "drop_conflicts",
}


def concat_virtual(
    datasets: Sequence[xr.Dataset], dim: str, *, labels: Sequence[str] | None = None
) -> xr.Dataset:
    """``xr.concat`` of virtual datasets with :data:`EXACT_COMBINE`.

    Raises
    ------
    IncompatibleArraysError
        When two datasets' arrays of one variable cannot become one array (codecs, data type,
        fill value, chunks or CF packing differ): the message names the variable, the
        datasets by their ``labels`` (an item, a file; by default their position) and the
        files their arrays reference.
    """
    check_labels_agree(datasets, {dim}, labels)
    with explaining_combine_errors(datasets, labels, along=(dim,)):
        fast = concat_along_existing(datasets, dim, EXACT_COMBINE)
        return fast if fast is not None else xr.concat(list(datasets), dim=dim, **EXACT_COMBINE)


@contextmanager
def explaining_combine_errors(
    datasets: Sequence[xr.Dataset],
    labels: Sequence[str] | None = None,
    how: str | None = None,
    along: Collection[Hashable] = (),
    advise: bool = False,
) -> Iterator[None]:
    """Errors of combining ``datasets`` raised again naming the variable and the datasets (by
    their ``labels``, by default their position), of the same type.

    ``along`` names the dimensions they are concatenated on, when known (otherwise those
    whose coordinates differ between the datasets). With ``advise``, a variable whose arrays
    cannot be joined is named with the ``loadable_variables`` that would load it instead (for
    the datasets of files being opened).

    Arrays meet deep inside xarray's combining, where neither the variable nor the datasets
    are known: an :class:`~virtualstac.errors.IncompatibleArraysError` (codecs, data type,
    chunks, packing differ) and the :class:`~virtualstac.errors.UnsupportedIndexingError` of
    reindexing (xarray fills a variable missing from some datasets, or aligns unequal
    coordinates with ``join="outer"``/``"inner"``, by indexing) would not say which, nor
    the :class:`~virtualstac.errors.UnsupportedOperationError` of comparing virtual values.
    Given ``how`` the datasets were combined (``"by coordinates"``), xarray's own refusals
    (sizes that do not align, no coordinate to order by) become an
    :class:`~virtualstac.errors.IncompatibleArraysError` naming the datasets, how and why.
    """
    try:
        yield
    except IncompatibleArraysError as err:
        culprit = incompatible_variable(datasets, labels, advise) or partial_chunk(
            datasets, labels, along, advise
        )
        if culprit is None:
            raise
        raise type(err)(culprit) from err
    except UnsupportedIndexingError as err:
        reason = reindexed(datasets, labels, along)
        if reason is None:
            raise
        raise UnsupportedIndexingError(reason) from err
    except UnsupportedOperationError as err:
        compared = _compared(datasets)
        if not compared:
            raise
        raise UnsupportedOperationError(
            f"combining compares the values of {', '.join(compared)}, which references do not "
            "hold (compat other than 'override', or data_vars/coords='different'): give "
            "compat='override' (the first file's) with data_vars='all' and coords='minimal', "
            "or load those variables (loadable_variables=[...])"
        ) from err
    except VirtualStacError:
        raise
    except (ValueError, IndexError, NotImplementedError) as err:
        if how is None or labels is None:
            raise
        shown = list(labels[:3]) + [f"{len(labels) - 3} more"] * (len(labels) > 3)
        reason = " ".join(str(err).split()) or type(err).__name__
        raise IncompatibleArraysError(
            f"the {len(labels)} files cannot be combined {how} ({', '.join(shown)}): {reason}"
        ) from err


def _compared(datasets: Sequence[xr.Dataset]) -> list[str]:
    """The virtual variables xarray would compare rather than join: those along no dimension
    whose coordinates differ between the datasets."""
    joined = _differing(datasets)
    return [
        repr(str(name))
        for name, variable in datasets[0].variables.items()
        if isinstance(variable._data, ManifestArray) and not joined & set(variable.dims)
    ]


def _differing(datasets: Sequence[xr.Dataset]) -> set[Hashable]:
    """The indexes of the first dataset that some other dataset lacks or has other values of."""
    first = datasets[0]
    return {
        name
        for name, index in first.xindexes.items()
        if any(not _same_index(index, d.xindexes.get(name)) for d in datasets[1:])
    }


def reindexed(
    datasets: Sequence[xr.Dataset],
    labels: Sequence[str] | None = None,
    along: Collection[Hashable] = (),
) -> str | None:
    """Why combining ``datasets`` reindexes references: a variable some of them lack, or
    coordinates that differ between them besides those of the dimensions ``along`` which they
    are concatenated; or None."""
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    for name in dict.fromkeys(n for dataset in datasets for n in dataset.variables):
        having = [label for label, d in zip(names, datasets, strict=True) if name in d.variables]
        if len(having) < len(datasets):
            lacking = next(label for label, d in zip(names, datasets, strict=True) if name not in d)
            return (
                f"variable {str(name)!r} is in {having[0]} but not in {lacking}: xarray fills "
                "it with missing values there, which references cannot hold; drop it "
                f"(drop_variables=[{str(name)!r}]) or open those files apart"
            )
    changed = _differing(datasets)
    differing = [str(name) for name in datasets[0].xindexes if name in changed]
    # Coordinates of the dimensions concatenated on differ by design: name the others.
    differing = [name for name in differing if name not in along] or differing
    if not differing:
        return None
    return (
        f"the coordinates {', '.join(differing)} differ between {', '.join(names)}, and "
        "xarray aligns them by reindexing the variables (join='outer' or 'inner'), which "
        "references cannot express: they join whole files along the concatenated dimensions, "
        "with join='exact' (or 'override', which keeps the first file's coordinates)"
    )


def check_labels_agree(
    datasets: Sequence[xr.Dataset],
    joined: Collection[Hashable],
    labels: Sequence[str] | None = None,
) -> None:
    """Refuse datasets that label one element of an index differently (a band's
    ``common_name``), as they would be joined along the dimensions ``joined``.

    ``compat="override"`` keeps the first dataset's coordinates that the join does not extend,
    so the others' labels would be lost without a word. Compared: in-memory 1-D coordinates on
    an index of another dimension, where that index is the same (different indexes do not
    join at all).

    Raises
    ------
    IncompatibleArraysError
        Naming the coordinate, the element, both values and the datasets by their ``labels``.
    """
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    first = datasets[0]
    for name, coordinate in first.coords.items():
        (dim,) = coordinate.dims if coordinate.ndim == 1 else (None,)
        if name in first.xindexes or dim is None or dim in joined or dim not in first.xindexes:
            continue
        if not isinstance(coordinate.data, np.ndarray):
            continue  # lazy values: comparing them would read them
        index = first.indexes[dim]
        for label, dataset in zip(names[1:], datasets[1:], strict=True):
            other = dataset.coords.get(name)
            if other is None or other.dims != coordinate.dims or dim not in dataset.indexes:
                continue
            if not isinstance(other.data, np.ndarray) or not dataset.indexes[dim].equals(index):
                continue
            differ = np.flatnonzero(~_same_values(coordinate.values, other.values))
            if differ.size:
                at = int(differ[0])
                raise IncompatibleArraysError(
                    f"{names[0]} and {label} disagree on the {name} of {dim} "
                    f"{_plain(index[at])!r}: {_plain(coordinate.values[at])!r} in {names[0]}, "
                    f"{_plain(other.values[at])!r} in {label}. One {dim} has one {name}: "
                    "correct the metadata that gives it (a catalog's band metadata), or open "
                    "them separately"
                )


def check_time_encodings_agree(
    datasets: Sequence[xr.Dataset], labels: Sequence[str] | None = None
) -> None:
    """Refuse datasets whose loaded times would mean other dates joined: undecoded ones
    (``decode_times=False``) that count in other units or calendars, decoded ones that are
    dates of other calendars.

    Combining keeps one ``units`` and ``calendar`` for the joined numbers (the first
    dataset's, or none when ``combine_attrs="drop_conflicts"`` drops them), so the others'
    numbers would decode as other dates without a word; decoded dates of two calendars make
    one coordinate of mixed types, which xarray refuses by coordinates and, nested, encodes
    as the first calendar's. Virtual variables are compared when their arrays are joined
    (:func:`~virtualstac.manifests.metadata.check_combinable`).

    Raises
    ------
    IncompatibleCalendarsError
        For decoded dates (also a ``TypeError``, as xarray raises), naming the variable, both
        calendars and the datasets by their ``labels``.
    IncompatibleArraysError
        For undecoded times, naming the variable, both encodings and the datasets.
    """
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    first: dict[Hashable, tuple[str, tuple[str, str]]] = {}
    calendars: dict[Hashable, tuple[str, str]] = {}
    for label, dataset in zip(names, datasets, strict=True):
        for name, variable in dataset.variables.items():
            if isinstance(variable._data, ManifestArray):
                continue
            calendar = _decoded_calendar(variable)
            if calendar is not None:
                seen_calendar = calendars.setdefault(name, (label, calendar))
                if seen_calendar[1] != calendar:
                    raise IncompatibleCalendarsError(
                        f"variable {str(name)!r} holds dates of the {calendar} calendar in "
                        f"{label} but of the {seen_calendar[1]} calendar in "
                        f"{seen_calendar[0]}: one coordinate cannot hold dates of both "
                        "(xarray refuses them as mixed types); open the files of each "
                        "calendar apart"
                    )
                continue
            units = variable.attrs.get("units")
            if not isinstance(units, str):
                continue
            if " since " not in units:
                continue
            calendar = str(calendar_meaning(variable.attrs.get("calendar")))
            encoding = (units, calendar)
            seen = first.setdefault(name, (label, encoding))
            if units_meaning(seen[1][0]) != units_meaning(units) or seen[1][1] != calendar:
                raise IncompatibleArraysError(
                    f"variable {str(name)!r} counts {encoding[0]!r} in the "
                    f"{encoding[1]} calendar in {label} but {seen[1][0]!r} in the {seen[1][1]} "
                    f"calendar in {seen[0]}: joined undecoded, part of its numbers would mean "
                    "other dates; open with decode_times=True (the default), or the files apart"
                )


def _decoded_calendar(variable: xr.Variable) -> str | None:
    """The calendar of a loaded variable of decoded dates, else None: a cftime calendar's
    name, or NumPy datetime64's (which cftime dates of the same calendar do not mix with)."""
    if variable.dtype.kind == "M":
        return "standard (as NumPy datetime64)"
    if variable.dtype.kind != "O" or not variable.size:
        return None
    try:
        return str(infer_calendar_name(np.asarray(variable.data).ravel()[:1]))
    except ValueError:  # objects, but no cftime dates
        return None


def _same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality, NaN equal to NaN."""
    same = np.asarray(a == b)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        same |= np.isnan(a) & np.isnan(b)
    return same


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds, for messages (``'red'``, not
    ``np.str_('red')``)."""
    return value.item() if isinstance(value, np.generic) else value


#: The options :func:`concat_along_existing` implements; any other falls back to ``xr.concat``.
#: ``coords`` and ``compat`` must be given: xarray is changing their defaults. Any ``join``
#: gives the same result when the indexes are equal, which the fast path requires.
_FAST_OPTIONS: Mapping[str, tuple[str | None, ...]] = {
    "coords": ("minimal",),
    "compat": ("override",),
    "join": ("exact", "outer", "inner", "left", "right", "override"),
    "data_vars": ("all", "minimal", None),
    "combine_attrs": ("drop_conflicts", "override", "drop"),
}


def concat_along_existing(
    datasets: Sequence[xr.Dataset], dim: Hashable, options: Mapping[str, Any]
) -> xr.Dataset | None:
    """``xr.concat(datasets, dim, **options)`` of datasets alike along a dimension they all have.

    ``xr.concat`` copies, aligns and inspects every dataset variable by variable (about 2,000
    Python calls per dataset), which dominates combining tens of thousands of small files.
    Datasets that share their variables, dimensions and coordinates, whose data variables all
    have ``dim`` and whose other indexes are equal, are joined here with one concatenation per
    variable and one per index: the result is what ``xr.concat`` returns (same variables,
    attributes, encodings and indexes, in the same order). Returns None when the datasets or
    the options do not have that shape, so that ``xr.concat`` handles them (and raises its
    errors).
    """
    if len(datasets) < 2 or not _joinable(datasets[0], dim, options):
        return None
    first = datasets[0]
    layout = {name: var.dims for name, var in first.variables.items()}
    coord_names = set(first.coords)
    others = {name: index for name, index in first.xindexes.items() if name != dim}
    for dataset in datasets[1:]:
        their = dataset.variables
        if their.keys() != layout.keys() or set(dataset.coords) != coord_names:
            return None
        if any(their[name].dims != dims for name, dims in layout.items()):
            return None
        indexes = dataset.xindexes
        if indexes.keys() != first.xindexes.keys() or not isinstance(indexes[dim], PandasIndex):
            return None
        if any(not _same_index(index, indexes[name]) for name, index in others.items()):
            return None
    combine_attrs = options.get("combine_attrs", "override")
    variables: dict[Hashable, xr.Variable] = {}
    for name, dims in layout.items():
        if dim not in dims:
            variables[name] = first.variables[name]  # compat="override": the first one's
        elif name == dim:
            index = first.xindexes[dim].concat([d.xindexes[dim] for d in datasets], dim)
            variable = index.create_variables({dim: first.variables[dim]})[dim]
            variable.attrs = _merge_attrs([d.variables[dim].attrs for d in datasets], combine_attrs)
            variables[name] = variable
            others[dim] = index
        else:
            variables[name] = xr.Variable.concat(  # type: ignore[no-untyped-call]
                [d.variables[name] for d in datasets], dim, combine_attrs=combine_attrs
            )
    coords = xr.Coordinates(
        {name: variables[name] for name in first.coords},
        indexes={name: others[name] for name in first.xindexes},
    )
    result = xr.Dataset(
        {name: variables[name] for name in first.data_vars},
        coords=coords,
        attrs=_merge_attrs([d.attrs for d in datasets], combine_attrs),
    )
    result.encoding = first.encoding
    return result


def _joinable(dataset: xr.Dataset, dim: Hashable, options: Mapping[str, Any]) -> bool:
    """Whether :func:`concat_along_existing` joins ``dataset`` with datasets alike along
    ``dim`` with ``options``: every data variable has ``dim``, indexed by a ``PandasIndex``,
    and no other index has it."""
    if not _fast_options(options):
        return False
    if dim not in dataset.dims or not isinstance(dataset.xindexes.get(dim), PandasIndex):
        return False
    if any(dim not in dataset.variables[name].dims for name in dataset.data_vars):
        return False
    return not any(dim in dataset.variables[name].dims for name in dataset.xindexes if name != dim)


def _merge_attrs(attrs: list[Mapping[Any, Any]], combine_attrs: str) -> dict[Any, Any]:
    """Attributes combined exactly as ``xr.concat`` combines them."""
    merged: dict[Any, Any] = merge_attrs(attrs, combine_attrs)  # type: ignore[no-untyped-call]
    return merged


def _fast_options(options: Mapping[str, Any]) -> bool:
    if not {"coords", "compat"} <= options.keys():
        return False
    return all(
        key in _FAST_OPTIONS and isinstance(value, str | None) and value in _FAST_OPTIONS[key]
        for key, value in options.items()
    )


def _same_index(a: Any, b: Any) -> bool:
    """Whether two indexes are equal, as ``join="exact"`` requires (identical ones at once)."""
    if a is b or (isinstance(a, PandasIndex) and a.index is getattr(b, "index", None)):
        return True
    return bool(type(a) is type(b) and a.equals(b))


def incompatible_variable(
    datasets: Sequence[xr.Dataset], labels: Sequence[str] | None = None, advise: bool = False
) -> str | None:
    """Which variable of ``datasets`` cannot be joined, and in which two of them (with
    ``advise``, how to load it instead); or None."""
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    for name in datasets[0].variables:
        arrays = [
            (label, dataset.variables[name].data)
            for label, dataset in zip(names, datasets, strict=True)
            if name in dataset.variables
        ]
        virtual = [(label, a) for label, a in arrays if isinstance(a, ManifestArray)]
        if len(virtual) < 2:
            continue
        first_label, first = virtual[0]
        for label, array in virtual[1:]:
            try:
                check_combinable([first.metadata, array.metadata], what="join")
            except IncompatibleArraysError as err:
                return (
                    f"variable {str(name)!r} of {_named(label, array)} cannot be joined "
                    f"with that of {_named(first_label, first)}, array 0 below: {err}"
                ) + _way_out(
                    ". References keep the bytes and attributes of each file as they are",
                    datasets[0],
                    name,
                    advise,
                )
    return None


def partial_chunk(
    datasets: Sequence[xr.Dataset],
    labels: Sequence[str] | None = None,
    along: Collection[Hashable] = (),
    advise: bool = False,
) -> str | None:
    """Which variable of ``datasets`` ends on a partial chunk before another dataset's part of
    it, along the dimensions ``along`` which they are concatenated in the order given (by
    default: those whose coordinates differ, the datasets in the order of those coordinates, as
    ``xr.combine_by_coords`` orders them), with ``advise`` how to load it instead; or None.

    One Zarr array has one regular chunk grid: the chunks of the datasets after a short last
    chunk would be read at the wrong positions.
    """
    names = labels if labels is not None else [f"dataset {i}" for i in range(len(datasets))]
    for dim in along or _differing(datasets):
        order = list(range(len(datasets))) if along else _by_first_value(datasets, dim)
        for name, variable in datasets[0].variables.items():
            if dim not in variable.dims or not isinstance(variable._data, ManifestArray):
                continue
            axis = variable.dims.index(dim)
            for i in order[:-1]:
                other = datasets[i].variables.get(name)
                array = None if other is None else other._data
                if (
                    not isinstance(array, ManifestArray)
                    or not array.shape[axis] % array.chunks[axis]
                ):
                    continue
                return (
                    f"variable {str(name)!r} of {_named(names[i], array)} is "
                    f"{array.shape[axis]} long along {dim} in chunks of {array.chunks[axis]}, so "
                    "its last chunk is partial; one Zarr array has one regular chunk grid, in "
                    f"which the chunks after it would be read at the wrong {dim} positions"
                ) + _way_out("", datasets[0], name, advise)
    return None


def _by_first_value(datasets: Sequence[xr.Dataset], dim: Hashable) -> list[int]:
    """The positions of ``datasets`` in the order of their first ``dim`` coordinate, as
    ``xr.combine_by_coords`` orders them: descending where every one's decreases (latitudes
    from north to south, a raster's y); as given where some have none, or the values do not
    compare."""
    indexes = [dataset.indexes.get(dim) for dataset in datasets]
    if any(index is None or not index.size for index in indexes):
        return list(range(len(datasets)))
    firsts = [index[0] for index in indexes if index is not None]
    increasing = all(index is not None and index.is_monotonic_increasing for index in indexes)
    try:
        return sorted(range(len(datasets)), key=firsts.__getitem__, reverse=not increasing)
    except TypeError:
        return list(range(len(datasets)))


def _way_out(reason: str, dataset: xr.Dataset, name: Hashable, advise: bool) -> str:
    """With ``advise``, ``reason`` and the ``loadable_variables`` that load ``name`` besides
    what ``dataset`` has loaded (its values read, not referenced); else nothing."""
    if not advise:
        return ""
    loaded = [
        str(n) for n, v in dataset.variables.items() if not isinstance(v._data, ManifestArray)
    ]
    return (
        f"{reason}: load {str(name)!r} instead (loadable_variables={[*loaded, str(name)]!r}, "
        "which reads its values), or open those files apart"
    )


def _named(label: str, array: ManifestArray) -> str:
    """A dataset's label, with the files its array references unless the label is the file
    (an empty label: the files alone)."""
    files = _files(array)
    return label if files == label else f"{label} ({files})" if label else files


def _files(array: ManifestArray) -> str:
    paths = array.manifest.path_table
    shown = ", ".join(paths[:2]) + (f" and {len(paths) - 2} more" if len(paths) > 2 else "")
    return shown or "values inlined in its references"
