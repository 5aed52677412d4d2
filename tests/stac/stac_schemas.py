"""Validating STAC offline: pystac's validator with a schema cache filled from local files.

The official extension schemas live in ``../shared/stac-schemas`` (relative to the repository
root), pystac ships the core schemas, virtualstac ships its own. A schema missing from the cache
fails validation instead of being fetched, so a test can never reach the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyproj
from pystac.validation import JsonSchemaSTACValidator

from virtualstac.stac import register_schema

SCHEMAS = Path(__file__).resolve().parents[2].parent / "shared" / "stac-schemas"
MISSING_REASON = (
    f"the official STAC extension schemas are not at {SCHEMAS} (the shared folder next to the "
    "repository); offline validation needs them"
)
# The datacube 2.2.0 schema allows a PROJJSON reference system by $ref to PROJJSON v0.4, which
# the shared folder lacks; PROJ ships v0.7. Our reference systems are EPSG codes or WKT2
# strings, which no PROJJSON version accepts, so the version makes no difference here.
PROJJSON_V04 = "https://proj.org/schemas/v0.4/projjson.schema.json"


class OfflineValidator(JsonSchemaSTACValidator):
    """pystac's validator that refuses to fetch any schema it was not given."""

    def _get_schema(self, schema_uri: str) -> dict[str, Any]:
        if schema_uri not in self.schema_cache:
            raise KeyError(f"schema {schema_uri} is not available offline")
        return self.schema_cache[schema_uri]


def offline_validator() -> OfflineValidator:
    """A validator knowing the shared extension schemas, PROJJSON and virtualstac's own."""
    validator = OfflineValidator()
    for path in SCHEMAS.rglob("*.json"):
        schema = json.loads(path.read_text())
        canonical = "https://stac-extensions.github.io/" + path.relative_to(SCHEMAS).as_posix()
        validator.schema_cache[canonical] = schema
        if "$id" in schema:
            validator.schema_cache[schema["$id"].rstrip("#")] = schema
    projjson = Path(pyproj.datadir.get_data_dir()) / "projjson.schema.json"
    validator.schema_cache[PROJJSON_V04] = json.loads(projjson.read_text())
    register_schema(validator)
    return validator
