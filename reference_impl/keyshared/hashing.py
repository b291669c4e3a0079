"""Sticky keys and sticky-key hashes (spec §2 "Hashing" and "Sticky key").

The hash is murmur3 x86_32 (seed 0, unsigned) masked to 31 bits and folded into [start, end].
0 is reserved as STICKY_KEY_HASH_NOT_SET, so a result of 0 becomes 1.
"""

from __future__ import annotations

import base64
import binascii

import mmh3

STICKY_KEY_HASH_NOT_SET = 0
DEFAULT_RANGE_MAX = 65535
NONE_KEY = b"NONE_KEY"


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Unsigned murmur3 x86_32, as Pulsar's Murmur3_32Hash computes it before masking."""
    return int(mmh3.hash(data, seed, signed=False))


def _as_bytes(key: bytes | str) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


def make_sticky_key_hash(key: bytes | str, start: int = 1, end: int = DEFAULT_RANGE_MAX) -> int:
    """Hash of a sticky key in [start, end]; never 0. A `str` key is encoded as UTF-8."""
    if start > end:
        raise ValueError(f"hash range start {start} must be <= end {end}")
    value = (murmur3_32(_as_bytes(key)) & 0x7FFFFFFF) % (end - start + 1) + start
    return 1 if value == STICKY_KEY_HASH_NOT_SET else value


def resolve_sticky_key(
    ordering_key: bytes | str | None = None,
    partition_key: str | None = None,
    partition_key_b64: bool = False,
    producer_name: str | None = None,
    sequence_id: int | None = None,
) -> bytes:
    """The sticky key of a message, as Pulsar's `Commands.peekStickyKey` picks it."""
    if ordering_key is not None:
        return _as_bytes(ordering_key)
    if partition_key is not None:
        if not partition_key_b64:
            return partition_key.encode("utf-8")
        try:
            return base64.b64decode(partition_key, validate=True)
        except (binascii.Error, ValueError):
            # Upstream: the decode error is caught by peekStickyKey, which then falls back to NONE_KEY.
            return NONE_KEY
    if producer_name is not None and sequence_id is not None:
        return f"{producer_name}-{sequence_id}".encode()
    return NONE_KEY
