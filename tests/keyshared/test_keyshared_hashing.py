"""Sticky-key hashing and sticky-key resolution (§2 "Hashing", "Sticky key"; KS-I7)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_impl.keyshared import (
    NONE_KEY,
    STICKY_KEY_HASH_NOT_SET,
    make_sticky_key_hash,
    murmur3_32,
    resolve_sticky_key,
)


def test_murmur3_matches_reference_vectors() -> None:
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("0", 4850),
        ("1", 49322),
        ("2", 58177),
        ("3", 45436),
        ("4", 11707),
        ("5", 35071),
        ("6", 42171),
        ("7", 43539),
        ("8", 15786),
        ("9", 2862),
        ("consumer1\x000\x000", 60442),
        ("consumer2\x000\x001", 63679),
        ("consumer3\x000\x002", 14358),
    ],
)
def test_known_sticky_hashes(key: str, expected: int) -> None:
    assert make_sticky_key_hash(key) == expected
    assert make_sticky_key_hash(key.encode()) == expected


def test_str_keys_are_utf8() -> None:
    assert make_sticky_key_hash("é") == make_sticky_key_hash(b"\xc3\xa9") == 6041


def test_zero_is_reserved_and_mapped_to_one() -> None:
    # murmur3("k0") & 0x7FFFFFFF is a multiple of 10, so the range [0, 9] would give 0.
    assert (murmur3_32(b"k0") & 0x7FFFFFFF) % 10 == 0
    assert make_sticky_key_hash(b"k0", 0, 9) == 1
    assert STICKY_KEY_HASH_NOT_SET == 0


def test_inverted_range_is_rejected() -> None:
    with pytest.raises(ValueError):
        make_sticky_key_hash(b"x", 10, 9)


@given(st.binary(max_size=64))
def test_hash_is_in_1_to_65535(key: bytes) -> None:
    h = make_sticky_key_hash(key)
    assert 1 <= h <= 65535
    assert h == (murmur3_32(key) & 0x7FFFFFFF) % 65535 + 1


@given(st.binary(max_size=16), st.integers(1, 1000))
def test_hash_respects_a_custom_range(key: bytes, range_max: int) -> None:
    assert 1 <= make_sticky_key_hash(key, 1, range_max) <= range_max


def test_sticky_key_priority() -> None:
    assert resolve_sticky_key(ordering_key=b"ok", partition_key="pk", producer_name="prod", sequence_id=7) == b"ok"
    assert resolve_sticky_key(ordering_key="ök") == "ök".encode()
    assert resolve_sticky_key(partition_key="pk", producer_name="prod", sequence_id=7) == b"pk"
    assert resolve_sticky_key(producer_name="prod", sequence_id=7) == b"prod-7"
    assert resolve_sticky_key(producer_name="prod") == NONE_KEY
    assert resolve_sticky_key() == b"NONE_KEY"


def test_partition_key_base64() -> None:
    encoded = base64.b64encode(b"\x00\xffkey").decode()
    assert resolve_sticky_key(partition_key=encoded, partition_key_b64=True) == b"\x00\xffkey"
    assert resolve_sticky_key(partition_key=encoded) == encoded.encode()
    # Upstream catches the decode error and falls back to NONE_KEY.
    assert resolve_sticky_key(partition_key="not base64!", partition_key_b64=True) == NONE_KEY
