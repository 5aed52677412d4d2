"""Intake drivers: catalog entries whose files or STAC items become lazy, dask-backed datasets."""

from virtualstac.intake.entries import name_entry_errors
from virtualstac.intake.stac import StacVirtualSource
from virtualstac.intake.virtual import VirtualSource

name_entry_errors()

__all__ = ["StacVirtualSource", "VirtualSource"]
