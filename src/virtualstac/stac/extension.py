"""The Virtual Zarr STAC extension, written the way pystac's own extensions are.

Schema: ``https://virtualstac.org/stac/virtual/v1.0.0/schema.json``, shipped in this package
(``virtualstac/stac/schema/v1.0.0/schema.json``) and pre-loaded into pystac's default
validator, so ``item.validate()`` works offline.

Fields
------
On a *source* asset (or on an Item's properties, as defaults for all its assets), how to open it:

``virtual:parser``
    ``"tiff"``, ``"hdf"``, ``"netcdf3"``, ``"zarr"``, ``"kerchunk-json"`` or
    ``"kerchunk-parquet"``; by default the media type (and, when it is ambiguous, the file's
    magic bytes) decides.
``virtual:group``, ``virtual:loadable_variables``, ``virtual:drop_variables``
    As the options of :func:`virtualstac.open_virtual_dataset`.
``virtual:variable``
    Name to give the asset's data variable (for example a band name).
``virtual:concat_dim``
    Dimension along which the assets of several items are concatenated (``"time"``).

On a *published* asset (a virtual store made from source items), what it holds:

``virtual:format``
    ``"icechunk"`` or ``"kerchunk"``.
``virtual:version``
    The version of the store, for Icechunk a snapshot id.
``virtual:containers``
    URL prefixes of the virtual chunks, which a reader must authorize.
``virtual:items``
    Ids of the source items the store covers.

pystac's ``item.ext`` namespace is closed to third parties, so the extension is used as
``VirtualExtension.ext(item)``; ``VirtualExtension.ext(item).to_xarray()`` opens the item.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib.resources import files
from typing import Any, Generic, Literal, TypeVar, overload

import pystac
from pystac.extensions.base import (
    ExtensionManagementMixin,
    PropertiesExtension,
    SummariesExtension,
)
from pystac.extensions.hooks import ExtensionHooks

from virtualstac.stac.extension_open import AssetOpener, StacOpener
from virtualstac.stac.fields import (
    CONCAT_DIM_PROP,
    CONTAINERS_PROP,
    DROP_VARIABLES_PROP,
    FORMAT_PROP,
    GROUP_PROP,
    ITEMS_PROP,
    LOADABLE_VARIABLES_PROP,
    PARSER_PROP,
    PARSERS,
    PREFIX,
    PUBLISHED_FORMATS,
    SCHEMA_URI,
    VARIABLE_PROP,
    VERSION_PROP,
)

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
    "SCHEMA_URI",
    "VARIABLE_PROP",
    "VERSION_PROP",
    "VIRTUAL_EXTENSION_HOOKS",
    "AssetVirtualExtension",
    "CollectionVirtualExtension",
    "ItemAssetsVirtualExtension",
    "ItemVirtualExtension",
    "SummariesVirtualExtension",
    "VirtualExtension",
    "VirtualExtensionHooks",
    "load_schema",
    "register_schema",
]

#: Generalized version of :class:`~pystac.Item`, :class:`~pystac.Collection`,
#: :class:`~pystac.Asset` or :class:`~pystac.ItemAssetDefinition`.
T = TypeVar("T", pystac.Item, pystac.Collection, pystac.Asset, pystac.ItemAssetDefinition)

_SCHEMA_RESOURCE = "schema/v1.0.0/schema.json"


def load_schema() -> dict[str, Any]:
    """Return the JSON schema of the extension, as shipped in the package."""
    text = files("virtualstac.stac").joinpath(_SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def register_schema(validator: Any = None) -> None:
    """Pre-load the shipped schema into a pystac validator so validation needs no network.

    ``validator`` defaults to pystac's registered validator. Validators that are not
    :class:`pystac.validation.JsonSchemaSTACValidator` (or pystac without ``jsonschema``) are
    left alone: they resolve schemas their own way.
    """
    try:
        from pystac.validation import JsonSchemaSTACValidator, RegisteredValidator
    except ImportError:  # pystac without the validation extra has no validator to fill
        return
    if validator is None:
        try:
            validator = RegisteredValidator.get_validator()
        except Exception:  # raised when jsonschema is missing: nothing validates, nothing to do
            return
    if isinstance(validator, JsonSchemaSTACValidator):
        validator.schema_cache.setdefault(SCHEMA_URI, load_schema())


# The layout of pystac's own extensions: a module-level constrained TypeVar T, and Generic[T].
class VirtualExtension(
    Generic[T],  # noqa: UP046
    PropertiesExtension,
    ExtensionManagementMixin[pystac.Item | pystac.Collection],
):
    """Extends an Item, Collection, Asset or item asset definition with ``virtual:`` fields.

    This class is generic over the type of STAC object extended. Use :meth:`ext` to get a
    concrete instance:

    >>> VirtualExtension.ext(item, add_if_missing=True).parser = "tiff"  # doctest: +SKIP
    """

    name: Literal["virtual"] = "virtual"

    def apply(
        self,
        *,
        parser: str | None = None,
        group: str | None = None,
        loadable_variables: Sequence[str] | None = None,
        drop_variables: Sequence[str] | None = None,
        variable: str | None = None,
        concat_dim: str | None = None,
        format: str | None = None,
        version: str | None = None,
        containers: Sequence[str] | None = None,
        items: Sequence[str] | None = None,
    ) -> None:
        """Set the given fields (``None`` removes a field)."""
        self.parser = parser
        self.group = group
        self.loadable_variables = None if loadable_variables is None else list(loadable_variables)
        self.drop_variables = None if drop_variables is None else list(drop_variables)
        self.variable = variable
        self.concat_dim = concat_dim
        self.format = format
        self.version = version
        self.containers = None if containers is None else list(containers)
        self.items = None if items is None else list(items)

    @property
    def parser(self) -> str | None:
        """The parser that reads the asset (``virtual:parser``), one of :data:`PARSERS`."""
        return self._get_property(PARSER_PROP, str)

    @parser.setter
    def parser(self, v: str | None) -> None:
        if v is not None and v not in PARSERS:
            raise ValueError(f"virtual:parser must be one of {', '.join(PARSERS)}; got {v!r}")
        self._set_property(PARSER_PROP, v)

    @property
    def group(self) -> str | None:
        """The group to open (``virtual:group``)."""
        return self._get_property(GROUP_PROP, str)

    @group.setter
    def group(self, v: str | None) -> None:
        self._set_property(GROUP_PROP, v)

    @property
    def loadable_variables(self) -> list[str] | None:
        """Variables read into memory (``virtual:loadable_variables``)."""
        return self._get_property(LOADABLE_VARIABLES_PROP, list[str])

    @loadable_variables.setter
    def loadable_variables(self, v: list[str] | None) -> None:
        self._set_property(LOADABLE_VARIABLES_PROP, v)

    @property
    def drop_variables(self) -> list[str] | None:
        """Variables left out (``virtual:drop_variables``)."""
        return self._get_property(DROP_VARIABLES_PROP, list[str])

    @drop_variables.setter
    def drop_variables(self, v: list[str] | None) -> None:
        self._set_property(DROP_VARIABLES_PROP, v)

    @property
    def variable(self) -> str | None:
        """Name of the asset's data variable (``virtual:variable``)."""
        return self._get_property(VARIABLE_PROP, str)

    @variable.setter
    def variable(self, v: str | None) -> None:
        if v is not None and (not v or "/" in v):
            raise ValueError(f"virtual:variable must be a non-empty name without '/'; got {v!r}")
        self._set_property(VARIABLE_PROP, v)

    @property
    def concat_dim(self) -> str | None:
        """Dimension the assets of several items are concatenated along (``virtual:concat_dim``)."""
        return self._get_property(CONCAT_DIM_PROP, str)

    @concat_dim.setter
    def concat_dim(self, v: str | None) -> None:
        self._set_property(CONCAT_DIM_PROP, v)

    @property
    def format(self) -> str | None:
        """Format of a published virtual store (``virtual:format``): icechunk or kerchunk."""
        return self._get_property(FORMAT_PROP, str)

    @format.setter
    def format(self, v: str | None) -> None:
        if v is not None and v not in PUBLISHED_FORMATS:
            raise ValueError(
                f"virtual:format must be one of {', '.join(PUBLISHED_FORMATS)}; got {v!r}"
            )
        self._set_property(FORMAT_PROP, v)

    @property
    def version(self) -> str | None:
        """Version of a published store, for Icechunk a snapshot id (``virtual:version``)."""
        return self._get_property(VERSION_PROP, str)

    @version.setter
    def version(self, v: str | None) -> None:
        self._set_property(VERSION_PROP, v)

    @property
    def containers(self) -> list[str] | None:
        """URL prefixes a reader must authorize (``virtual:containers``)."""
        return self._get_property(CONTAINERS_PROP, list[str])

    @containers.setter
    def containers(self, v: list[str] | None) -> None:
        self._set_property(CONTAINERS_PROP, v)

    @property
    def items(self) -> list[str] | None:
        """Ids of the source items a published store covers (``virtual:items``)."""
        return self._get_property(ITEMS_PROP, list[str])

    @items.setter
    def items(self, v: list[str] | None) -> None:
        self._set_property(ITEMS_PROP, v)

    @classmethod
    def ensure_has_extension(
        cls, obj: pystac.Item | pystac.Collection, add_if_missing: bool = False
    ) -> None:
        """Raise unless ``obj`` declares the extension (declare it with ``add_if_missing``).

        pystac's own message suggests ``obj.ext.add('virtual')``, which third-party extensions
        cannot offer; this one says what works.
        """
        try:
            super().ensure_has_extension(obj, add_if_missing)
        except pystac.ExtensionNotImplemented as err:
            raise pystac.ExtensionNotImplemented(
                f"{type(obj).__name__} {obj.id!r} does not declare the virtual: extension "
                f"({SCHEMA_URI}): declare it with VirtualExtension.add_to(obj) or "
                "VirtualExtension.ext(obj, add_if_missing=True), or open it with "
                "virtualstac.stac.open_stac(obj), which needs no declaration"
            ) from err

    @classmethod
    def get_schema_uri(cls) -> str:
        """The schema URI of the extension, :data:`SCHEMA_URI`."""
        return SCHEMA_URI

    # The overloads give each STAC type its concrete class, so that type checkers know that
    # ``VirtualExtension.ext(item).to_xarray()`` exists.
    @overload
    @classmethod
    def ext(cls, obj: pystac.Item, add_if_missing: bool = False) -> ItemVirtualExtension: ...

    @overload
    @classmethod
    def ext(
        cls, obj: pystac.Collection, add_if_missing: bool = False
    ) -> CollectionVirtualExtension: ...

    @overload
    @classmethod
    def ext(cls, obj: pystac.Asset, add_if_missing: bool = False) -> AssetVirtualExtension: ...

    @overload
    @classmethod
    def ext(
        cls, obj: pystac.ItemAssetDefinition, add_if_missing: bool = False
    ) -> ItemAssetsVirtualExtension: ...

    @classmethod
    def ext(
        cls,
        obj: pystac.Item | pystac.Collection | pystac.Asset | pystac.ItemAssetDefinition,
        add_if_missing: bool = False,
    ) -> VirtualExtension[Any]:
        """Extend an Item, Collection, Asset or ItemAssetDefinition with ``virtual:`` fields.

        Raises
        ------
        pystac.ExtensionTypeError
            If ``obj`` is of another type.
        pystac.ExtensionNotImplemented
            If the object (or the asset's owner) does not declare the extension and
            ``add_if_missing`` is false.
        """
        if isinstance(obj, pystac.Item):
            cls.ensure_has_extension(obj, add_if_missing)
            return ItemVirtualExtension(obj)
        if isinstance(obj, pystac.Collection):
            cls.ensure_has_extension(obj, add_if_missing)
            return CollectionVirtualExtension(obj)
        if isinstance(obj, pystac.Asset):
            cls.ensure_owner_has_extension(obj, add_if_missing)
            return AssetVirtualExtension(obj)
        if isinstance(obj, pystac.ItemAssetDefinition):
            cls.ensure_owner_has_extension(obj, add_if_missing)
            return ItemAssetsVirtualExtension(obj)
        if isinstance(obj, pystac.ItemCollection):
            # A search's results declare no extensions of their own (their Items do): say
            # what opens them rather than only that the extension does not apply.
            raise pystac.ExtensionTypeError(
                f"{cls._ext_error_message(obj)}: an ItemCollection (a search's results) has no "
                "stac_extensions of its own; open it with virtualstac.stac.open_stac(items), "
                "or VirtualExtension.ext(item).to_xarray() for each Item"
            )
        raise pystac.ExtensionTypeError(cls._ext_error_message(obj))

    @classmethod
    def summaries(
        cls, obj: pystac.Collection, add_if_missing: bool = False
    ) -> SummariesVirtualExtension:
        """Return the extended summaries of a collection."""
        cls.ensure_has_extension(obj, add_if_missing)
        return SummariesVirtualExtension(obj)


class ItemVirtualExtension(StacOpener, VirtualExtension[pystac.Item]):
    """:class:`VirtualExtension` on an :class:`~pystac.Item`; fields are item properties.

    Use :meth:`VirtualExtension.ext` rather than instantiating it.
    """

    item: pystac.Item
    """The :class:`~pystac.Item` being extended."""

    properties: dict[str, Any]
    """The Item properties, including extension properties."""

    def __init__(self, item: pystac.Item) -> None:
        self.item = item
        self.properties = item.properties

    def _stac_object(self) -> pystac.Item:
        return self.item

    def __repr__(self) -> str:
        return f"<ItemVirtualExtension Item id={self.item.id}>"


class CollectionVirtualExtension(StacOpener, VirtualExtension[pystac.Collection]):
    """:class:`VirtualExtension` on a :class:`~pystac.Collection` (its extra fields).

    Use :meth:`VirtualExtension.ext` rather than instantiating it.
    """

    collection: pystac.Collection
    """The :class:`~pystac.Collection` being extended."""

    properties: dict[str, Any]
    """The Collection's extra fields, including extension properties."""

    def __init__(self, collection: pystac.Collection) -> None:
        self.collection = collection
        self.properties = collection.extra_fields

    def _stac_object(self) -> pystac.Collection:
        return self.collection

    def __repr__(self) -> str:
        return f"<CollectionVirtualExtension Collection id={self.collection.id}>"


class AssetVirtualExtension(AssetOpener, VirtualExtension[pystac.Asset]):
    """:class:`VirtualExtension` on an :class:`~pystac.Asset`.

    Fields missing on the asset are read from the owning Item's properties.
    Use :meth:`VirtualExtension.ext` rather than instantiating it.
    """

    asset: pystac.Asset
    """The :class:`~pystac.Asset` being extended."""

    properties: dict[str, Any]
    """The Asset fields, including extension properties."""

    additional_read_properties: Iterable[dict[str, Any]] | None = None
    """The owning Item's properties, if the asset belongs to an Item."""

    def __init__(self, asset: pystac.Asset) -> None:
        self.asset = asset
        self.properties = asset.extra_fields
        if asset.owner is not None and isinstance(asset.owner, pystac.Item):
            self.additional_read_properties = [asset.owner.properties]

    def __repr__(self) -> str:
        return f"<AssetVirtualExtension Asset href={self.asset.href}>"


class ItemAssetsVirtualExtension(VirtualExtension[pystac.ItemAssetDefinition]):
    """:class:`VirtualExtension` on a Collection's item asset definition."""

    asset_defn: pystac.ItemAssetDefinition
    """The definition being extended."""

    properties: dict[str, Any]
    """The definition's fields, including extension properties."""

    def __init__(self, item_asset: pystac.ItemAssetDefinition) -> None:
        self.asset_defn = item_asset
        self.properties = item_asset.properties

    def __repr__(self) -> str:
        return "<ItemAssetsVirtualExtension>"


class SummariesVirtualExtension(SummariesExtension):
    """The ``virtual:`` fields in a Collection's summaries.

    Use :meth:`VirtualExtension.summaries` rather than instantiating it.
    """

    @property
    def parser(self) -> list[str] | None:
        """The parsers used by the collection's assets."""
        return self.summaries.get_list(PARSER_PROP)

    @parser.setter
    def parser(self, v: list[str] | None) -> None:
        self._set_summary(PARSER_PROP, v)

    @property
    def format(self) -> list[str] | None:
        """The formats of the collection's published virtual stores."""
        return self.summaries.get_list(FORMAT_PROP)

    @format.setter
    def format(self, v: list[str] | None) -> None:
        self._set_summary(FORMAT_PROP, v)

    @property
    def variable(self) -> list[str] | None:
        """The data variable names of the collection's assets."""
        return self.summaries.get_list(VARIABLE_PROP)

    @variable.setter
    def variable(self, v: list[str] | None) -> None:
        self._set_summary(VARIABLE_PROP, v)


class VirtualExtensionHooks(ExtensionHooks):
    """pystac hooks of the extension, advertised through the ``pystac.extensions`` entry point.

    Loading them (pystac does so when it first reads a STAC object) also pre-loads the schema
    into pystac's validator.
    """

    schema_uri: str = SCHEMA_URI
    # Class attributes overriding ExtensionHooks' abstract properties, as pystac's hooks do.
    prev_extension_ids: set[str] = set()  # noqa: RUF012
    stac_object_types = {pystac.STACObjectType.ITEM, pystac.STACObjectType.COLLECTION}  # noqa: RUF012


VIRTUAL_EXTENSION_HOOKS: ExtensionHooks = VirtualExtensionHooks()

register_schema()
