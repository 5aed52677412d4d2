"""How ``open_virtual_mfdataset`` opens its files and combines their virtual datasets: a batch
at a time where they are parsed when they are alike (:mod:`~virtualstac.xarray.batch_combine`),
else one by one by xarray; with ``errors="warn"`` or ``"ignore"``, the files that cannot be
opened left out, as ``xr.open_mfdataset`` leaves them out."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import xarray as xr

from virtualstac.errors import SourceNotFoundError
from virtualstac.parallel import map_batched, map_batches
from virtualstac.progress import progress as progress_bar
from virtualstac.storage.failures import redact
from virtualstac.xarray.batch_combine import (
    MAX_BATCH_FILES,
    Partial,
    as_partial,
    join_by_coords,
    join_partials,
    open_batch,
)
from virtualstac.xarray.combine import check_time_encodings_agree, explaining_combine_errors
from virtualstac.xarray.grid_mappings import check_grid_mappings_agree
from virtualstac.xarray.options import ConcatDim, dim_name
from virtualstac.xarray.paths import NestedPaths, nest

__all__ = [
    "ERRORS",
    "Unopened",
    "attrs_of",
    "combine_files",
    "open_each",
    "open_joined",
    "open_or_skip",
    "skip_unopened",
]

_log = logging.getLogger(__name__)

#: What ``errors=`` takes, as ``xr.open_mfdataset`` takes it.
ERRORS = ("raise", "warn", "ignore")


@dataclass(frozen=True)
class Unopened:
    """A file that could not be opened (``errors="warn"`` or ``"ignore"``), and why."""

    url: str
    reason: str


def open_or_skip(
    url: str,
    virtualize: Callable[[str], xr.Dataset],
    preprocess: Callable[[xr.Dataset], xr.Dataset] | None,
) -> xr.Dataset | Unopened:
    """The file's virtual dataset, preprocessed; or, when it cannot be opened, why.

    As in ``xr.open_mfdataset``, only opening is forgiven: an error of ``preprocess`` is the
    caller's, and raised.
    """
    try:
        dataset = virtualize(url)
    except Exception as err:
        return Unopened(redact(url), " ".join(str(err).split()) or type(err).__name__)
    return dataset if preprocess is None else preprocess(dataset)


def skip_unopened(
    results: Sequence[xr.Dataset | Unopened],
    urls: list[str],
    layout: NestedPaths | None,
    errors: str,
) -> tuple[list[xr.Dataset], list[str], list[Any] | None]:
    """The datasets of the files opened, their URLs and the nested ``layout`` of those (None:
    flat), a warning for each file left out with ``errors="warn"``.

    Raises
    ------
    SourceNotFoundError
        If no file could be opened, saying why the first could not.
    """
    unopened = [result for result in results if isinstance(result, Unopened)]
    if len(unopened) == len(results):
        raise SourceNotFoundError(
            f"none of the {len(results)} files could be opened: {unopened[0].url}: "
            f"{unopened[0].reason}"
        )
    if errors == "warn":
        for skipped in unopened:
            warnings.warn(
                f"Could not open {skipped.url} due to {skipped.reason}. Ignoring.",
                UserWarning,
                stacklevel=3,
            )
    kept = [(url, r) for url, r in zip(urls, results, strict=True) if isinstance(r, xr.Dataset)]
    marked = [r if isinstance(r, Unopened) else url for url, r in zip(urls, results, strict=True)]
    nested = None if layout is None else _without_unopened(nest(layout, iter(marked)))
    return [r for _, r in kept], [url for url, _ in kept], nested


def _without_unopened(nested: list[Any]) -> list[Any]:
    return [
        _without_unopened(item) if isinstance(item, list) else item
        for item in nested
        if not isinstance(item, Unopened)
    ]


def combine_files(
    datasets: list[xr.Dataset],
    urls: list[str],
    layout: NestedPaths | None,
    combine: str,
    dims: list[ConcatDim],
    options: Mapping[str, Any],
) -> xr.Dataset:
    """The files' virtual datasets combined by xarray, its errors naming the files."""
    labels = [redact(url) for url in urls]
    check_time_encodings_agree(datasets, labels)
    check_grid_mappings_agree(datasets, labels)
    if combine == "nested":
        arranged = datasets if layout is None else nest(layout, iter(datasets))
        names = [dim_name(dim) for dim in dims]
        how = f"along {', '.join(str(name) for name in names)}"
        along = [name for name in names if name is not None]
        with explaining_combine_errors(datasets, labels, how, along=along, advise=True):
            nested: xr.Dataset = xr.combine_nested(arranged, concat_dim=dims, **options)
        return nested
    with explaining_combine_errors(datasets, labels, "by coordinates", advise=True):
        combined = xr.combine_by_coords(datasets, **options)
    assert isinstance(combined, xr.Dataset)
    return combined


def attrs_of(
    url: str,
    urls: list[str],
    datasets: list[xr.Dataset] | None,
    virtualize: Callable[[str], xr.Dataset],
) -> dict[Any, Any]:
    """The global attributes of the file ``url`` (``attrs_file``), as opened and preprocessed:
    from its dataset when the files were combined one by one, else opened again (the batches
    joined where they were parsed keep no file's own attributes)."""
    if url not in urls:
        raise ValueError(f"attrs_file {redact(url)} is not one of the files opened")
    dataset = datasets[urls.index(url)] if datasets is not None else virtualize(url)
    return dict(dataset.attrs)


def open_each[T](
    executor: Executor, virtualize: Callable[[str], T], urls: list[str], progress: bool
) -> list[T]:
    """Every file's virtual dataset (or what ``virtualize`` gives for it), in order."""
    results = map_batched(executor, virtualize, urls)
    bar = progress_bar(results, total=len(urls), label="virtualizing", enabled=progress)
    return list(bar)


def open_joined(
    executor: Executor,
    virtualize: Callable[[str], xr.Dataset],
    urls: list[str],
    dim: str | None,
    options: Mapping[str, Any],
    progress: bool,
) -> xr.Dataset | list[xr.Dataset]:
    """The files joined along ``dim`` (None: by coordinates) a batch at a time where they are
    parsed (:mod:`~virtualstac.xarray.batch_combine`); or, when they are not alike, every
    file's virtual dataset, in order, for xarray to combine."""
    task = functools.partial(open_batch, virtualize=virtualize, dim=dim, options=options)
    results = map_batches(executor, task, urls, max_batch=MAX_BATCH_FILES)
    done = list(
        progress_bar(
            results,
            total=len(urls),
            label="virtualizing",
            enabled=progress,
            size=lambda result: len(result[0]),
        )
    )
    partials = [as_partial(batch, result) for batch, result in done]
    if all(partial is not None for partial in partials):
        joinable = [partial for partial in partials if partial is not None]
        if dim is None:
            joined = join_by_coords(joinable, options)
        else:
            joined = join_partials(joinable, dim, options)
        if joined is not None:
            return joined
    # Some batches were joined and others could not be, or the batches differ from each
    # other: xarray combines the files one by one, so the joined batches are parsed again.
    again = [url for batch, result in done if isinstance(result, Partial) for url in batch]
    _log.info("the files are not alike: combining %d files one by one", len(urls))
    reparsed = iter(map_batched(executor, virtualize, again))
    datasets: list[xr.Dataset] = []
    for batch, result in done:
        if isinstance(result, Partial):
            datasets.extend(next(reparsed) for _ in batch)
        else:
            datasets.extend(result)
    return datasets
