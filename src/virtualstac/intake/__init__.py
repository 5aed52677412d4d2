"""Intake drivers: catalog entries whose files or STAC items become lazy, dask-backed datasets."""

from virtualstac.intake.stac import StacVirtualSource
from virtualstac.intake.virtual import VirtualSource

__all__ = ["StacVirtualSource", "VirtualSource"]
