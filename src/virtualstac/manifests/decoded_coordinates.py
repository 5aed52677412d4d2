"""Loaded dimension coordinates decoded once for many files that hold the same ones.

The files of one archive mostly repeat their coordinates (the same latitudes and longitudes
in every time step). Decoding one (CF decoding, then xarray's default index) costs about a
fortieth of a small netCDF-4 file's parse; :class:`DecodedCoordinates` keeps the results of
the last few by everything the decoding depends on (name, dimensions, stored values, attributes
in their order, decoding options) and gives each file its own shallow copy: the values (read
only, as an index's are) and the index are shared, the attributes and encoding are the file's
own, as two datasets opened from identical files would have them.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["DecodedCoordinate", "DecodedCoordinates", "decoded_coordinates"]

#: Stored values larger than this are decoded each time: the key holds them.
_MAX_KEYED_BYTES = 64 * 1024
_MAX_ENTRIES = 128


class DecodedCoordinate:
    """A decoded variable and, once asked for, its default index and index variables."""

    __slots__ = ("_index", "variable")

    def __init__(self, variable: xr.Variable) -> None:
        """Keep ``variable`` (decoded) for later files, its values loaded and read-only."""
        variable = variable.load()
        if isinstance(variable.data, np.ndarray):
            variable.data.flags.writeable = False
        self.variable = variable
        self._index: tuple[Any, dict[Hashable, xr.Variable]] | None = None

    def copy(self) -> xr.Variable:
        """The decoded variable, with its own attributes and encoding."""
        return self.variable.copy(deep=False)

    def index(self, name: Hashable) -> tuple[Any, dict[Hashable, xr.Variable]]:
        """xarray's default index of the variable as dimension coordinate ``name``, with its
        index variables (each with its own attributes and encoding)."""
        if self._index is None:
            from xarray.core.indexes import create_default_index_implicit

            self._index = create_default_index_implicit(self.variable.to_index_variable())
        index, variables = self._index
        return index, {key: value.copy(deep=False) for key, value in variables.items()}


class DecodedCoordinates:
    """The last few decoded coordinates, by what their decoding depends on (thread-safe)."""

    def __init__(self, max_entries: int = _MAX_ENTRIES) -> None:
        """Keep at most ``max_entries`` decoded coordinates."""
        self._entries: OrderedDict[tuple[Any, ...], DecodedCoordinate] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def decoded(
        self,
        name: str,
        dims: tuple[Hashable, ...],
        values: np.ndarray[Any, Any],
        attrs: Mapping[str, Any],
        options: tuple[Any, ...],
        decode: Callable[[], xr.Variable],
    ) -> DecodedCoordinate:
        """The coordinate ``decode()`` decodes from ``values`` and ``attrs`` (with decoding
        ``options``), decoded now or taken from an earlier file with the same."""
        key = _key(name, dims, values, attrs, options)
        if key is None:
            return DecodedCoordinate(decode())
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        found = DecodedCoordinate(decode())
        with self._lock:
            self._entries[key] = found
            if len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return found


def _key(
    name: str,
    dims: tuple[Hashable, ...],
    values: np.ndarray[Any, Any],
    attrs: Mapping[str, Any],
    options: tuple[Any, ...],
) -> tuple[Any, ...] | None:
    """What decoding depends on, hashable; None for values too large to key or objects."""
    if values.nbytes > _MAX_KEYED_BYTES or values.dtype.hasobject:
        return None
    try:
        # Attributes are Zarr metadata: JSON (in their order, which the dataset keeps).
        text = json.dumps(attrs)
    except (TypeError, ValueError):
        return None
    return (name, dims, values.dtype.str, values.shape, values.tobytes(), text, options)


#: The process's decoded coordinates.
decoded_coordinates = DecodedCoordinates()
