"""Writers: persisting virtual groups as Icechunk repositories or Kerchunk references."""

from virtualstac.writers.icechunk import IcechunkWriteError, WriteSummary, write_icechunk
from virtualstac.writers.icechunk_containers import (
    ContainerSpec,
    authorize_containers,
    container_for,
    ensure_containers,
    required_containers,
)
from virtualstac.writers.kerchunk import kerchunk_refs, write_kerchunk

__all__ = [
    "ContainerSpec",
    "IcechunkWriteError",
    "WriteSummary",
    "authorize_containers",
    "container_for",
    "ensure_containers",
    "kerchunk_refs",
    "required_containers",
    "write_icechunk",
    "write_kerchunk",
]
