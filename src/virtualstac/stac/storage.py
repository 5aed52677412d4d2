"""Reading assets the way their catalog says: the storage extension's schemes.

The `storage extension <https://github.com/stac-extensions/storage>`_ v2.0.0 declares
``storage:schemes`` on Item properties, a Collection or a Catalog: named schemes with a
``type`` (``aws-s3``, ``custom-s3``, ``ms-azure``), a ``platform`` URI template, ``region``,
``requester_pays`` and the template's variables (``bucket``, ``account``). Assets name the
schemes they may be read with in ``storage:refs``. Publishers also add ``anonymous: true``
(VEDA, xpystac), which the extension does not define, for buckets read without credentials.

:func:`stac_registry` turns these into the read allow-list: the exact location of every asset,
read through one store per asset directory or bucket, configured with the scheme's region,
requester pays, anonymous access and, for ``custom-s3`` platforms, the endpoint. Credentials
come from the environment (obstore reads ``AWS_ACCESS_KEY_ID`` and the like) unless the scheme
is anonymous, and go only to the provider's own endpoints: an endpoint the catalog chooses
(``custom-s3``) gets unsigned requests unless the user trusts it (see ``docs/security.md``).
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pystac
from obstore.exceptions import BaseError as ObstoreError

from virtualstac.errors import InvalidPathError, VirtualStacError, redact
from virtualstac.stac.authorization import Authorization, check_link, is_remote
from virtualstac.stac.collection_assets import owner_name
from virtualstac.stac.invalid import linked_object
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions
from virtualstac.storage.failures import describe
from virtualstac.storage.registry import ObjectStoreRegistry, store_prefix
from virtualstac.storage.signing import PresignedQueries, SigningRegistry, split_signature
from virtualstac.storage.urls import normalize_url, url_prefix

__all__ = [
    "REFS_PROP",
    "SCHEMA_URI_PREFIX",
    "SCHEMES_PROP",
    "StorageScheme",
    "StorageSchemeError",
    "aws_region",
    "azure_account_name",
    "bucket_scheme",
    "catalog_authorization",
    "declared_registry",
    "declared_schemes",
    "stac_registry",
    "storage_schemes",
]

SCHEMA_URI_PREFIX = "https://stac-extensions.github.io/storage/"
SCHEMES_PROP = "storage:schemes"
REFS_PROP = "storage:refs"

_S3_URL_SCHEMES = frozenset({"s3", "s3a"})
_AZURE_URL_SCHEMES = frozenset({"az", "abfs", "abfss", "azure"})
# Object stores are allowed bucket by bucket, the others directory by directory.
_BUCKET_URL_SCHEMES = _S3_URL_SCHEMES | _AZURE_URL_SCHEMES | {"gs", "gcs", "memory"}
_TEMPLATE_VARIABLE = re.compile(r"\{([^{}]+)\}")
# An AWS region's name (us-east-1, us-gov-west-1, cn-north-1): obstore and Icechunk make it part
# of the host name their requests to AWS go to (s3.REGION.amazonaws.com).
_AWS_REGION = re.compile(r"[a-z]{2}(?:-[a-z0-9]+)+")
# An Azure storage account's name, which is the first label of its host name
# (ACCOUNT.blob.core.windows.net).
_AZURE_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")


class StorageSchemeError(VirtualStacError, ValueError):
    """An asset's ``storage:refs`` names no known scheme, or a scheme cannot be used."""


def aws_region(key: str, kind: str, region: Any) -> str | None:
    """The ``region`` of the storage scheme ``key`` of type ``kind``, None if it names none.

    Raises
    ------
    StorageSchemeError
        For an ``aws-s3`` scheme whose region is no region's name: AWS's host name is made of
        it, so ``attacker.example/x`` would send requests signed with the reader's credentials
        to ``s3.attacker.example``. (A ``custom-s3`` endpoint names its host: its region only
        scopes the signature, and may be any name, such as Garage's ``garage``.)
    """
    if region is None:
        return None
    if kind == "aws-s3" and not (isinstance(region, str) and _AWS_REGION.fullmatch(region)):
        raise StorageSchemeError(
            f"storage scheme {key!r} has region {redact(str(region))!r}, which is no AWS "
            "region's name (such as 'us-west-2'); AWS's host names are made of it"
        )
    return str(region)


def azure_account_name(account: Any, where: str) -> str:
    """``account``, named by ``where`` (a storage scheme, an asset), if it is an Azure storage
    account's name: 3 to 24 lowercase letters and digits.

    Raises
    ------
    StorageSchemeError
        Otherwise: the account's host name is made of it, so ``attacker.example/x`` would send
        requests carrying the reader's Azure credentials to ``attacker.example``.
    """
    if not (isinstance(account, str) and _AZURE_ACCOUNT.fullmatch(account)):
        raise StorageSchemeError(
            f"{where} names the Azure storage account {redact(str(account))!r}, which is no "
            "account's name (3 to 24 lowercase letters and digits); Azure's host names are "
            "made of it"
        )
    return account


@dataclass(frozen=True)
class StorageScheme:
    """One entry of ``storage:schemes``: where and how the objects of a platform are read."""

    key: str
    platform: str
    type: str
    region: str | None = None
    requester_pays: bool = False
    anonymous: bool = False
    variables: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, key: str, fields: Mapping[str, Any]) -> StorageScheme:
        """Read a Storage Scheme Object; ``type`` defaults to what the platform implies."""
        if not isinstance(fields, Mapping) or not isinstance(fields.get("platform"), str):
            raise StorageSchemeError(
                f"storage scheme {key!r} needs a 'platform' URI (template), got {fields!r}"
            )
        platform = fields["platform"]
        kind = fields.get("type") or _implied_type(platform)
        known = {"type", "platform", "region", "requester_pays", "anonymous"}
        return cls(
            key=key,
            platform=platform,
            type=str(kind),
            region=fields.get("region"),
            requester_pays=bool(fields.get("requester_pays", False)),
            anonymous=bool(fields.get("anonymous", False)),
            variables={k: v for k, v in fields.items() if k not in known},
        )

    def endpoint(self, **values: Any) -> str:
        """The platform URI with its template variables filled in (``values`` win).

        Raises
        ------
        StorageSchemeError
            If the template names a variable neither the scheme nor ``values`` define.
        """
        known = {**self.variables, "region": self.region, **values}

        def fill(match: re.Match[str]) -> str:
            value = known.get(match.group(1))
            if value is None:
                raise StorageSchemeError(
                    f"storage scheme {self.key!r}: platform {self.platform!r} needs "
                    f"{{{match.group(1)}}}, which the scheme does not define"
                )
            return str(value)

        return _TEMPLATE_VARIABLE.sub(fill, self.platform)

    def applies_to(self, url: str) -> bool:
        """Whether objects at ``url`` are read through this kind of platform."""
        scheme = url.partition("://")[0].lower()
        if scheme in _S3_URL_SCHEMES:
            return self.type in ("aws-s3", "custom-s3")
        if scheme in _AZURE_URL_SCHEMES:
            return self.type == "ms-azure"
        return False

    def store_options(self, url: str, *, trust_endpoint: bool = False) -> dict[str, Any]:
        """Options for the obstore store that reads ``url`` (``ObjectStoreRegistry.register``).

        Only ``s3://`` (``aws-s3``, ``custom-s3``) and ``az://`` (``ms-azure``) URLs take
        options; ``http(s)://`` URLs are read without signing whatever their scheme says. A
        ``custom-s3`` endpoint is the catalog's choice: requests to it are unsigned (no
        credentials leave) unless ``trust_endpoint``.
        """
        if not self.applies_to(url):
            return {}
        options: dict[str, Any] = {}
        if self.anonymous:
            options["skip_signature"] = True
        if self.type == "ms-azure":
            if "account" in self.variables:
                where = f"storage scheme {self.key!r}"
                options["account_name"] = azure_account_name(self.variables["account"], where)
            return options
        if self.region:
            options["region"] = aws_region(self.key, self.type, self.region)
        if self.requester_pays:
            options["request_payer"] = True
        if self.type == "custom-s3":
            bucket = urlsplit(url).netloc
            endpoint = self.endpoint(bucket=self.variables.get("bucket", bucket))
            options["endpoint"] = endpoint.rstrip("/")
            options["virtual_hosted_style_request"] = "{bucket}" in self.platform
            if endpoint.startswith("http://"):
                options["client_options"] = {"allow_http": True}
            if not trust_endpoint:
                options["skip_signature"] = True
        return options


def azure_account(asset: pystac.Asset, item: pystac.Item | None) -> str | None:
    """The storage account of an Azure asset (``abfs://container/path``) without a storage
    scheme, as the Planetary Computer gives it: ``account_name`` in the asset's
    ``xarray:storage_options`` (or in its ``xarray:open_kwargs``' ``storage_options``), else
    ``msft:storage_account`` on the asset or in the Item's properties; None if none says."""
    open_kwargs = asset.extra_fields.get("xarray:open_kwargs")
    candidates = [
        asset.extra_fields.get("xarray:storage_options"),
        open_kwargs.get("storage_options") if isinstance(open_kwargs, Mapping) else None,
    ]
    where = f"asset {asset.href!r}"
    for options in candidates:
        if isinstance(options, Mapping) and isinstance(options.get("account_name"), str):
            return azure_account_name(options["account_name"], where)
    for fields in (asset.extra_fields, item.properties if item is not None else {}):
        account = fields.get("msft:storage_account")
        if isinstance(account, str) and account:
            return azure_account_name(account, where)
    return None


def _implied_type(platform: str) -> str:
    if "amazonaws.com" in platform:
        return "aws-s3"
    if "blob.core.windows.net" in platform:
        return "ms-azure"
    return "custom-s3"


def _absolute_href(asset: pystac.Asset) -> tuple[str, str] | None:
    """The asset's absolute URL and the query it was signed with, or None if it cannot be
    located or read."""
    href = asset.get_absolute_href() or asset.href
    try:
        return split_signature(normalize_url(href))
    except InvalidPathError:
        return None


class _SchemeFinder:
    """Looks ``storage:refs`` up in the Item, its Collection, then the root Catalog.

    Collections and catalogs are fetched at most once per href: the items of one API search
    each link to the same collection.
    """

    def __init__(self) -> None:
        self._declared: dict[str, Mapping[str, Any]] = {}

    def schemes(self, asset: pystac.Asset, item: pystac.Item | None) -> list[StorageScheme]:
        refs = asset.extra_fields.get(REFS_PROP) or []
        if isinstance(refs, str):
            refs = [refs]
        if not refs:
            return []
        owner = item if item is not None else asset.owner
        found: list[StorageScheme] = []
        declared: Mapping[str, Any] = _declared_on(owner)
        for ref in refs:
            if ref not in declared:
                declared = {**self._inherited(owner), **declared}
            if ref not in declared:
                where = getattr(owner, "id", None)
                raise StorageSchemeError(
                    f"asset {asset.href!r}{f' of {where!r}' if where else ''} refers to storage "
                    f"scheme {ref!r}, but neither it nor its collection or catalog declares it "
                    f"in {SCHEMES_PROP} (declared: {', '.join(declared) or 'none'})"
                )
            found.append(StorageScheme.from_dict(ref, declared[ref]))
        return found

    def _inherited(self, owner: Any) -> Mapping[str, Any]:
        """Schemes declared on the owner's collection and root catalog (the nearest wins)."""
        schemes: dict[str, Any] = {}
        for rel in (pystac.RelType.ROOT, pystac.RelType.COLLECTION):
            link = owner.get_single_link(rel) if owner is not None else None
            href = link.get_absolute_href() if link is not None else None
            if link is None or href is None:
                continue
            if href not in self._declared:
                if not link.is_resolved():
                    check_link(owner, href, rel)
                try:
                    self._declared[href] = _declared_on(linked_object(link))
                except Exception as err:  # any failure to fetch: say which document
                    raise StorageSchemeError(
                        f"could not read {href!r} to look up the storage schemes of "
                        f"{getattr(owner, 'id', owner)!r}: {err}"
                    ) from err
            schemes.update(self._declared[href])
        return schemes


def _declared_on(stac_object: Any) -> Mapping[str, Any]:
    if isinstance(stac_object, pystac.Item):
        fields = stac_object.properties
    elif isinstance(stac_object, pystac.Catalog):  # Collections are Catalogs
        fields = stac_object.extra_fields
    else:
        return {}
    schemes = fields.get(SCHEMES_PROP) or {}
    return schemes if isinstance(schemes, Mapping) else {}


def storage_schemes(asset: pystac.Asset, item: pystac.Item | None = None) -> list[StorageScheme]:
    """The schemes an asset's ``storage:refs`` name, in order.

    They are looked up in the Item's properties (``item``, by default the asset's owner), then
    in its Collection and its root Catalog, which may be fetched.

    Raises
    ------
    StorageSchemeError
        If a reference names no declared scheme, or a scheme has no platform.
    """
    return _SchemeFinder().schemes(asset, item)


def stac_registry(
    items: pystac.Item | Iterable[pystac.Item],
    assets: Iterable[str] | None = None,
    *,
    sign: Callable[[str], str] | None = None,
    network: NetworkOptions = DEFAULT_NETWORK,
    scheme_network: Mapping[str, NetworkOptions] | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> ObjectStoreRegistry:
    """The read allow-list :func:`~virtualstac.stac.open_stac` builds by default.

    It allows the exact location of every asset of the Items (an object, or a directory such
    as a Zarr store and everything below it). A remote Item (read from a URL)
    may not name local files. ``authorize`` adds prefixes the user trusts; the error raised
    for a reference outside the list names the prefix to authorize. ``assets`` names the
    assets whose storage schemes must be usable (an error otherwise); the others are
    allowed when their schemes are. Stores are configured from the storage schemes, one per
    directory (local and HTTP files) or bucket; ``custom-s3`` endpoints chosen by the catalog
    are sent unsigned requests unless ``trust_catalog_endpoints``. With ``sign``, every URL
    is signed before it is read (see :class:`~virtualstac.storage.signing.SigningRegistry`).
    Without it, hrefs that arrive signed (with a query, as pystac-client's ``modifier=``
    leaves them) lend their query to every read below their directory.

    Every store sends its requests with the timeouts and retries of ``network``, or of
    ``scheme_network[key]`` for the assets whose ``storage:refs`` name the scheme ``key``.

    The list holds every Item's assets, but the references of one asset (Kerchunk) may point
    only at the other assets of its own Item and at what ``authorize`` names: ``open_stac``
    parses each asset within its Item's scope and refuses references outside it, with this
    registry made by it or given as ``registry=`` (see ``docs/security.md``).

    Use it to read a virtual dataset ``open_stac`` returned::

        registry = stac_registry(items, sign=sign)
        xr.open_zarr(open_stac(items, registry=registry).virtual.to_store(registry))
    """
    authorization = Authorization.of(authorize, trust_catalog_endpoints=trust_catalog_endpoints)
    registry = ObjectStoreRegistry(network=network)
    per_scheme = dict(scheme_network or {})
    queries: dict[str, str] = {}
    registered: set[str] = set()
    buckets: dict[str, tuple[dict[str, Any], NetworkOptions | None]] = {}
    wanted = None if assets is None else set(assets)
    finder = _SchemeFinder()
    for item in [items] if isinstance(items, pystac.Item) else items:
        remote = is_remote(item)
        for key, asset in item.assets.items():
            located = _absolute_href(asset)
            if located is None:
                continue
            url, query = located
            if remote and url.startswith("file://"):
                continue  # a remote catalog may not make us read local files
            try:
                schemes = finder.schemes(asset, item)
                applicable = next((s for s in schemes if s.applies_to(url)), None)
                trust = authorization.trust_catalog_endpoints
                options = (
                    applicable.store_options(url, trust_endpoint=trust)
                    if applicable is not None
                    else {}
                )
                if applicable is None and url.partition("://")[0].lower() in _AZURE_URL_SCHEMES:
                    account = azure_account(asset, item)
                    if account is not None:
                        options = {"account_name": account}
            except StorageSchemeError:
                if wanted is None or key in wanted:
                    raise
                continue
            # The scheme that configures the store decides; an http(s) asset has none, so the
            # first scheme it names does.
            named = [s.key for s in ([applicable] if applicable else []) + schemes]
            chosen = next((per_scheme[k] for k in named if k in per_scheme), None)
            try:
                _allow(registry, registered, _allowed_prefix(url), url, options, chosen)
            except ObstoreError as err:
                raise StorageSchemeError(
                    f"asset {key!r} of {owner_name(item)}: no store can read {redact(url)}: "
                    f"{describe(err)}. Say how to reach it: storage:schemes with storage:refs "
                    "on the asset (for Azure, type ms-azure with its account), the account in "
                    "xarray:storage_options (account_name), or a registry of your own "
                    "(registry=)"
                ) from err
            if query:
                queries[_allowed_prefix(url)] = query
            for scheme in schemes:
                bucket = scheme.variables.get("bucket")
                if bucket and scheme.type in ("aws-s3", "custom-s3"):
                    # How to reach the bucket, should the user authorize reading there.
                    trust = authorization.trust_catalog_endpoints
                    options = scheme.store_options(f"s3://{bucket}", trust_endpoint=trust)
                    buckets.setdefault(f"s3://{bucket}", (options, per_scheme.get(scheme.key)))
    for prefix in authorization.prefixes:
        bucket = url_prefix(prefix)
        try:
            if bucket in buckets and bucket not in registered:
                _allow(registry, registered, bucket, prefix, *buckets[bucket])
            else:
                registry.allow(prefix)
        except ObstoreError as err:
            raise StorageSchemeError(
                f"authorize=[{redact(prefix)!r}]: no store can read there: {describe(err)}. "
                "Pass a registry of your own whose store for it is configured (e.g. "
                "ObjectStoreRegistry().register(prefix, account_name=...) for Azure)"
            ) from err
    if sign is None and queries:
        sign = PresignedQueries(queries)
    made = registry if sign is None else SigningRegistry.wrap(registry, sign)
    _CATALOG_REGISTRIES[made] = authorization.prefixes
    return made


# The registries stac_registry made, and the prefixes the user authorized in each: given back
# to open_stac (registry=), such a registry is the catalogs' allow-list, not the user's.
_CATALOG_REGISTRIES: weakref.WeakKeyDictionary[ObjectStoreRegistry, tuple[str, ...]] = (
    weakref.WeakKeyDictionary()
)


def catalog_authorization(registry: ObjectStoreRegistry) -> tuple[str, ...] | None:
    """The prefixes the user authorized in a registry :func:`stac_registry` made, or None for
    any other registry (the user's own: everything it allows is authorized)."""
    return _CATALOG_REGISTRIES.get(registry)


def _allowed_prefix(url: str) -> str:
    if url.partition("://")[0] in _BUCKET_URL_SCHEMES:
        return url_prefix(url)
    return store_prefix(url)


def _allow(
    registry: ObjectStoreRegistry,
    registered: set[str],
    prefix: str,
    location: str,
    options: dict[str, Any],
    network: NetworkOptions | None,
) -> None:
    # The first asset to name a directory or bucket decides how it is read.
    if prefix.rstrip("/") not in registered:
        registry.register(prefix, only=[location], network=network, **options)
        registered.add(prefix.rstrip("/"))
    else:
        registry.allow(location)


def declared_schemes(*owners: Any) -> dict[str, dict[str, Any]]:
    """The ``storage:schemes`` the STAC objects declare, by key (the last owner wins)."""
    found: dict[str, dict[str, Any]] = {}
    for owner in owners:
        for key, fields in _declared_on(owner).items():
            if isinstance(fields, Mapping):
                found[str(key)] = dict(fields)
    return found


def bucket_scheme(url: str, declared: Mapping[str, Any]) -> StorageScheme | None:
    """The declared S3 scheme whose ``bucket`` is the bucket of ``url``, or None.

    The first one declared wins, as :func:`stac_registry` reads a bucket through the first
    scheme that configures it.
    """
    if url.partition("://")[0].lower() not in _S3_URL_SCHEMES:
        return None
    bucket = urlsplit(url).netloc
    for key, fields in declared.items():
        try:
            scheme = StorageScheme.from_dict(str(key), fields)
        except StorageSchemeError:
            continue
        if scheme.variables.get("bucket") == bucket and scheme.applies_to(url):
            return scheme
    return None


def declared_registry(declared: Mapping[str, Any]) -> ObjectStoreRegistry:
    """A registry of every bucket the ``declared`` S3 schemes name, configured as they say.

    For a publisher: the catalog is its own, so ``custom-s3`` endpoints are trusted
    (credentials from the environment go there).
    """
    registry = ObjectStoreRegistry()
    for key, fields in declared.items():
        bucket = fields.get("bucket") if isinstance(fields, Mapping) else None
        if not bucket or f"s3://{bucket}" in registry:
            continue
        scheme = bucket_scheme(f"s3://{bucket}", {key: fields})
        if scheme is not None:
            url = f"s3://{bucket}"
            options = scheme.store_options(url, trust_endpoint=True)
            if scheme.type == "custom-s3" and scheme.platform.rstrip("/").endswith("/{bucket}"):
                # Path-style platforms: the endpoint is the server, as Icechunk's S3 storage
                # and containers take it (obstore reaches the same objects either way).
                server = scheme.platform.rstrip("/").removesuffix("/{bucket}")
                options["endpoint"] = dataclasses.replace(scheme, platform=server).endpoint()
                options["virtual_hosted_style_request"] = False
            registry.register(url, **options)
    return registry
