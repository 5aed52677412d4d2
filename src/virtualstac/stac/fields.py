"""The ``virtual:`` field vocabulary: schema URI, field names and their allowed values.

Every module of :mod:`virtualstac.stac` that reads or writes these fields imports them from
here; this module imports nothing of :mod:`virtualstac.stac`, so the extension classes,
opening and publishing can all depend on it without depending on each other.
"""

from __future__ import annotations

__all__ = [
    "CONCAT_DIM_PROP",
    "CONTAINERS_PROP",
    "DROP_VARIABLES_PROP",
    "FORMAT_PROP",
    "GROUP_PROP",
    "ITEMS_PROP",
    "LOADABLE_VARIABLES_PROP",
    "PARSERS",
    "PARSER_PROP",
    "PREFIX",
    "PUBLISHED_FORMATS",
    "ROOT_LEVELS_PROP",
    "ROOT_PROP",
    "SCHEMA_URI",
    "VARIABLE_PROP",
    "VERSION_PROP",
]

SCHEMA_URI: str = "https://virtualstac.org/stac/virtual/v1.0.0/schema.json"
PREFIX: str = "virtual:"

# Source asset fields
PARSER_PROP: str = PREFIX + "parser"
GROUP_PROP: str = PREFIX + "group"
LOADABLE_VARIABLES_PROP: str = PREFIX + "loadable_variables"
DROP_VARIABLES_PROP: str = PREFIX + "drop_variables"
VARIABLE_PROP: str = PREFIX + "variable"
CONCAT_DIM_PROP: str = PREFIX + "concat_dim"
# Published asset fields
FORMAT_PROP: str = PREFIX + "format"
VERSION_PROP: str = PREFIX + "version"
CONTAINERS_PROP: str = PREFIX + "containers"
ITEMS_PROP: str = PREFIX + "items"
#: The directory a relocatable catalog was published in.
ROOT_PROP: str = PREFIX + "root"
#: How many directories above the root catalog's directory ``virtual:root`` is (0 if absent).
ROOT_LEVELS_PROP: str = PREFIX + "root_levels"

#: Values of ``virtual:parser``.
PARSERS: tuple[str, ...] = ("tiff", "hdf", "netcdf3", "zarr", "kerchunk-json", "kerchunk-parquet")
#: Values of ``virtual:format``.
PUBLISHED_FORMATS: tuple[str, ...] = ("icechunk", "kerchunk")
