"""How virtual datasets are combined: options for ``xr.concat`` and ``xr.combine_by_coords``.

References cannot be reindexed, so coordinates must align exactly (``join="exact"``); their
values cannot be compared without reading them, so variables are taken as they come
(``compat="override"``, ``coords="minimal"``) and every data variable is joined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["EXACT_COMBINE"]

#: Keyword arguments for ``xr.concat`` and ``xr.combine_by_coords`` over virtual datasets.
EXACT_COMBINE: Mapping[str, Any] = {
    "data_vars": "all",
    "coords": "minimal",
    "compat": "override",
    "join": "exact",
    "combine_attrs": "drop_conflicts",
}
