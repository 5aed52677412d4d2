"""STAC front end: the ``virtual:`` extension and opening Items and Collections as datasets.

>>> from virtualstac.stac import open_stac  # doctest: +SKIP
>>> ds = open_stac(item)  # its COG/netCDF/HDF5/Zarr assets, lazy values  # doctest: +SKIP
>>> refs = open_stac(items, references=True)  # references, to publish  # doctest: +SKIP
>>> publish(collection, "s3://bucket/scenes.icechunk")  # a store as an asset  # doctest: +SKIP
"""

from virtualstac.stac.extension import (
    SCHEMA_URI,
    VIRTUAL_EXTENSION_HOOKS,
    AssetVirtualExtension,
    CollectionVirtualExtension,
    ItemAssetsVirtualExtension,
    ItemVirtualExtension,
    SummariesVirtualExtension,
    VirtualExtension,
    VirtualExtensionHooks,
    load_schema,
    register_schema,
)
from virtualstac.stac.open import (
    MEDIA_TYPE_PARSERS,
    AssetNotFoundError,
    DuplicateItemError,
    Grid,
    MixedGridsError,
    StacSource,
    UnsupportedAssetError,
    open_asset,
    open_stac,
)
from virtualstac.stac.options import OpenOptions, UnknownOptionError
from virtualstac.stac.packing import PackingError
from virtualstac.stac.publish import PublishError, StoreRecordedElsewhereError, publish
from virtualstac.stac.published import (
    PublishedStoreError,
    PublishedStoreUnreadableError,
    open_published,
    published_asset,
)
from virtualstac.stac.storage import (
    StorageScheme,
    StorageSchemeError,
    stac_registry,
    storage_schemes,
)

__all__ = [
    "MEDIA_TYPE_PARSERS",
    "SCHEMA_URI",
    "VIRTUAL_EXTENSION_HOOKS",
    "AssetNotFoundError",
    "AssetVirtualExtension",
    "CollectionVirtualExtension",
    "DuplicateItemError",
    "Grid",
    "ItemAssetsVirtualExtension",
    "ItemVirtualExtension",
    "MixedGridsError",
    "OpenOptions",
    "PackingError",
    "PublishError",
    "PublishedStoreError",
    "PublishedStoreUnreadableError",
    "StacSource",
    "StorageScheme",
    "StorageSchemeError",
    "StoreRecordedElsewhereError",
    "SummariesVirtualExtension",
    "UnknownOptionError",
    "UnsupportedAssetError",
    "VirtualExtension",
    "VirtualExtensionHooks",
    "load_schema",
    "open_asset",
    "open_published",
    "open_stac",
    "publish",
    "published_asset",
    "register_schema",
    "stac_registry",
    "storage_schemes",
]
