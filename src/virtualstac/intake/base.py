"""What the Intake drivers share: the schema from what was opened; read() loads to_dask()."""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import xarray as xr
from intake.source.base import DataSource, Schema

from virtualstac import __version__
from virtualstac.errors import InvalidCatalogArgumentError, VirtualStacError, in_context

__all__ = ["VirtualDataSource", "refused_when_used"]


def refused_when_used[Init: Callable[..., None]](init: Init) -> Init:
    """Make a driver's ``__init__`` keep, not raise, a refused argument of a catalog entry.

    Intake makes the source before it gives it the entry's name, so a refusal raised then
    could not say which entry of the catalog is wrong. The source of a catalog entry (its
    metadata has ``catalog_dir``) raises it, named, when it is used (``discover``,
    ``to_dask``, ``read``); one made in Python raises it at once.
    """

    @functools.wraps(init)
    def checked(self: VirtualDataSource, *args: Any, **kwargs: Any) -> None:
        self._refused = None
        try:
            init(self, *args, **kwargs)
        except InvalidCatalogArgumentError as err:
            metadata = kwargs.get("metadata")
            if not (isinstance(metadata, Mapping) and metadata.get("catalog_dir")):
                raise
            DataSource.__init__(self, metadata=dict(metadata))
            self._refused = err

    return checked  # type: ignore[return-value]


class VirtualDataSource(DataSource):  # type: ignore[misc]
    """An Intake v1 source of one xarray dataset (or tree) opened through chunk references."""

    #: The driver's name; Intake names each source of a catalog after its entry.
    name: str = "virtualstac"
    container = "xarray"
    version = __version__
    partition_access = True
    #: Whether the source gives references (``references: true``) rather than values.
    references: bool = False
    #: An argument of its catalog entry that was refused (see :func:`refused_when_used`).
    _refused: InvalidCatalogArgumentError | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Intake's state (the arguments the source was made with), and the name of its
        catalog entry, which Intake sets after making it: a copy pickled to a dask worker
        still names the entry in its errors."""
        state: dict[str, Any] = super().__getstate__()
        state["entry"] = (self.name, self.description)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        name, description = state.pop("entry", (type(self).name, None))
        super().__setstate__(state)
        self.name, self.description = name, description

    @abstractmethod
    def _parsed(self) -> xr.Dataset | xr.DataTree:
        """The dataset as opened, lazily: values, or references with ``references: true``."""

    @abstractmethod
    def to_dask(self) -> xr.Dataset | xr.DataTree:
        """The dataset, lazy and dask-backed (references with ``references: true``)."""

    @contextmanager
    def naming_entry(self) -> Iterator[None]:
        """Errors raised inside say which catalog entry failed (intake names the source
        after the entry once it is made; a source made in Python keeps the driver's name)."""
        try:
            if self._refused is not None:
                raise self._refused
            yield
        except VirtualStacError as err:
            entry = f"catalog entry {self.name!r}"
            named = None if self.name == type(self).name else in_context(err, entry)
            if named is None:
                raise
            raise named  # noqa: B904  (the same cause: the dependency's error that led to it)

    def _get_schema(self) -> Schema:
        """Describe the dataset from the files' metadata: no chunk data is read."""
        with self.naming_entry():
            opened = self._parsed()
        nodes = (
            {"": opened}
            if isinstance(opened, xr.Dataset)
            else {node.path: node.to_dataset() for node in opened.subtree}
        )
        described = {name: _description(dataset) for name, dataset in nodes.items()}
        return Schema(
            datashape=None,
            dtype=None,
            shape=None,
            npartitions=1,
            extra_metadata=described[""] if set(described) == {""} else {"groups": described},
        )

    def _get_partition(self, i: int) -> xr.Dataset | xr.DataTree:
        opened = self.to_dask()
        # References are not values: there is nothing to load.
        return opened if self.references else opened.load()

    def read(self) -> xr.Dataset | xr.DataTree:
        """The dataset with every value loaded into memory (the references themselves with
        ``references: true``)."""
        return self._get_partition(0)


def _description(dataset: xr.Dataset) -> dict[str, object]:
    return {
        "dims": dict(dataset.sizes),
        "data_vars": {str(n): list(map(str, v.dims)) for n, v in dataset.data_vars.items()},
        "coords": [str(c) for c in dataset.coords],
        "attrs": dict(dataset.attrs),
    }
