"""Every store a registry builds for a network prefix carries timeouts and bounded retries.

``tests/storage/test_network.py`` shows what they do against faulty servers; here, which
options each store gets: the defaults, a registry's, a prefix's, and the caller's own.
"""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

from virtualstac import NetworkOptions, ObjectStoreRegistry
from virtualstac.storage import DEFAULT_NETWORK
from virtualstac.storage.http import HttpStore
from virtualstac.storage.signing import SigningRegistry

PATIENT = NetworkOptions(connect_timeout=10, timeout=45, max_retries=6, retry_timeout=600)


def timeouts(store: object) -> tuple[float, float]:
    """The connect and whole-request timeouts of a store, in seconds: an obstore store's
    (printed as ``"5s"``) or an ``HttpStore``'s."""
    if isinstance(store, HttpStore):
        return store.connect_timeout, store.timeout
    options = store.client_options  # type: ignore[attr-defined]
    return tuple(float(options[name].removesuffix("s")) for name in ("connect_timeout", "timeout"))  # type: ignore[return-value]


def test_the_defaults_bound_each_request_and_the_retries() -> None:
    store = ObjectStoreRegistry().register("https://data.example.org/archive/")
    assert timeouts(store) == (5, 30)
    assert store.retry_config["max_retries"] == 3
    assert store.retry_config["retry_timeout"] == timedelta(seconds=60)
    assert store.retry_config["backoff"]["init_backoff"] == timedelta(seconds=0.1)
    assert store.retry_config["backoff"]["max_backoff"] == timedelta(seconds=5)
    assert DEFAULT_NETWORK == NetworkOptions()


@pytest.mark.parametrize(
    "prefix",
    ["https://data.example.org/archive/", "s3://bucket", "gs://bucket", "az://container"],
)
def test_a_registry_applies_its_options_to_every_network_store(prefix: str) -> None:
    registry = ObjectStoreRegistry(network=PATIENT)
    options = {"skip_signature": True} if not prefix.startswith("https") else {}
    if prefix.startswith("az"):
        options["account_name"] = "account"
    store = registry.register(prefix, **options)
    assert timeouts(store) == (10, 45)
    assert store.retry_config["max_retries"] == 6
    assert store.retry_config["retry_timeout"] == timedelta(seconds=600)


def test_a_prefix_may_have_its_own_options() -> None:
    registry = ObjectStoreRegistry(network=PATIENT)
    quick = registry.register("https://fast.example.org/", network=NetworkOptions(timeout=2))
    patient = registry.register("https://slow.example.org/")
    assert timeouts(quick)[1] == 2
    assert timeouts(patient)[1] == 45


def test_for_url_takes_options_too() -> None:
    registry = ObjectStoreRegistry.for_url("https://data.example.org/a/b.nc", network=PATIENT)
    store, _ = registry.resolve("https://data.example.org/a/b.nc")
    assert timeouts(store)[1] == 45
    assert registry.network == PATIENT


def test_client_options_and_retry_config_given_by_the_caller_win() -> None:
    registry = ObjectStoreRegistry(network=PATIENT)
    store = registry.register(
        "https://data.example.org/",
        client_options={"timeout": "7s", "user_agent": "test"},
        retry_config={"max_retries": 1},
    )
    assert timeouts(store) == (10, 7)
    assert store.client_options["user_agent"] == "test"
    assert store.retry_config["max_retries"] == 1


def test_local_prefixes_and_ready_made_stores_take_no_network_options() -> None:
    registry = ObjectStoreRegistry(network=PATIENT)
    registry.register("file:///tmp/")
    with pytest.raises(TypeError, match="only used when no store is given"):
        registry.register("file:///data/", registry.resolve("file:///tmp/x")[0], network=PATIENT)


def sign(url: str) -> str:
    return f"{url}?token=abc"


def test_signed_stores_and_pickled_registries_keep_the_options() -> None:
    registry = SigningRegistry(sign, network=PATIENT)
    registry.register("https://data.example.org/scenes/")
    signed, _ = registry.resolve("https://data.example.org/scenes/B04.tif")
    assert timeouts(signed)[1] == 45
    assert signed.retry_config["max_retries"] == 6

    again = pickle.loads(pickle.dumps(registry))
    assert again.network == PATIENT
    moved, _ = again.resolve("https://data.example.org/scenes/B04.tif")
    assert timeouts(moved)[1] == 45


@pytest.mark.parametrize(
    "bad",
    [{"timeout": 0}, {"connect_timeout": -1}, {"retry_timeout": "60s"}, {"max_retries": -1}],
)
def test_options_must_be_positive_seconds(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="NetworkOptions"):
        NetworkOptions(**bad)  # type: ignore[arg-type]
