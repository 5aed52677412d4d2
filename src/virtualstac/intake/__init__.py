"""Intake drivers: catalog entries whose files become lazy, dask-backed virtual datasets."""

from virtualstac.intake.virtual import VirtualSource

__all__ = ["VirtualSource"]
