"""virtualstac.limits: one place to read and raise the size limits, and the bounded gunzip."""

from __future__ import annotations

import gzip
import zlib

import pytest

import virtualstac.limits
from virtualstac.errors import LimitExceededError
from virtualstac.limits import Limits, get_limits, gunzip_metadata, limits, set_limits


def test_the_defaults_hold_real_archives() -> None:
    assert get_limits() == Limits(
        references_per_array=50_000_000,
        references_per_open=50_000_000,
        metadata_bytes=64 * 2**20,
        coordinate_bytes=2**30,
        chunk_bytes=2**30,
        group_depth=100,
        stac_items=1_000_000,
        stac_catalogs=100_000,
    )


def test_a_block_changes_limits_and_restores_them_even_on_error() -> None:
    before = get_limits()

    with pytest.raises(RuntimeError), limits(metadata_bytes=10) as inside:
        assert inside.metadata_bytes == get_limits().metadata_bytes == 10
        raise RuntimeError

    assert get_limits() == before


def test_set_limits_returns_the_previous_ones() -> None:
    previous = set_limits(references_per_open=7)
    try:
        assert get_limits().references_per_open == 7
        assert previous.references_per_open == 50_000_000
    finally:
        set_limits(references_per_open=previous.references_per_open)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"chunks": 1}, TypeError),
        ({"metadata_bytes": -1}, ValueError),
        ({"metadata_bytes": True}, ValueError),
    ],
)
def test_unknown_or_invalid_limits_are_refused(changes: dict[str, int], error: type) -> None:
    with pytest.raises(error):
        set_limits(**changes)


def test_gunzip_reads_several_members_within_the_limit() -> None:
    data = gzip.compress(b"abc") + gzip.compress(b"def")

    assert gunzip_metadata(data, source="x.json.gz") == b"abcdef"


def test_gunzip_stops_one_byte_past_the_limit() -> None:
    bomb = gzip.compress(bytes(10 * 2**20))

    with limits(metadata_bytes=2**20), pytest.raises(LimitExceededError) as raised:
        gunzip_metadata(bomb, source="bomb.json.gz")
    assert "bomb.json.gz: the gzip stream inflates to more than 1,048,576 bytes" in str(
        raised.value
    )
    assert "virtualstac.limits.set_limits(metadata_bytes=...)" in str(raised.value)


def test_gunzip_refuses_a_truncated_stream() -> None:
    with pytest.raises(zlib.error, match="truncated"):
        gunzip_metadata(gzip.compress(b"x" * 100)[:-10], source="cut.json.gz")


def test_references_count_per_open_only_inside_a_counting_block() -> None:
    with limits(references_per_open=10):
        virtualstac.limits.check_references(8, source="a", array="v")
        virtualstac.limits.check_references(8, source="a", array="w")  # not counting: allowed
        with virtualstac.limits.counting_references():
            virtualstac.limits.check_references(8, source="a", array="v")
            with pytest.raises(LimitExceededError, match="16 chunk references"):
                virtualstac.limits.check_references(8, source="a", array="w")
