"""Exact, compact transport of net input planes between Ray workers.

An encoded chess position is 112 × 8 × 8 float32 (28.7 KB) and a Go position 22 × 19 × 19 (31.8 KB),
yet almost every plane holds only 0 and 1. Shipping float planes from the encoding tasks to the
net actors would make the object store, not the nets, the bottleneck (a 100-game chess chunk is
230 MB of floats), so the encoders' output is packed to bits here and unpacked batch by batch
inside the net actor. Channels that hold other values (Lc0's rule-50 count, …) are found at pack
time and kept as float32, so the round trip is exact whatever the encoder writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass
class PackedPlanes:
    """(N, C, H, W) float32 planes: binary channels as bits, the others as float32."""

    shape: tuple[int, int, int, int]
    bits: np.ndarray  # (N, ceil(Cb·H·W / 8)) uint8, the binary channels in channel order
    binary_channels: np.ndarray  # (Cb,) int32
    float_channels: np.ndarray  # (Cf,) int32
    floats: np.ndarray  # (N, Cf, H, W) float32

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes + self.floats.nbytes

    def rows(self, start: int, stop: int) -> PackedPlanes:
        """Rows ``start:stop`` still packed (views, no copy): a net bank unpacks them where its
        nets run (``pipeline.nets.net_bank``)."""
        stop = min(stop, self.shape[0])
        start = min(start, stop)
        return PackedPlanes(
            (stop - start, *self.shape[1:]),
            self.bits[start:stop],
            self.binary_channels,
            self.float_channels,
            self.floats[start:stop],
        )

    def unpack(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``start:stop`` as (n, C, H, W) float32, exactly the planes that were packed."""
        n_all, c, h, w = self.shape
        stop = n_all if stop is None else min(stop, n_all)
        n = max(stop - start, 0)
        out = np.empty((n, c, h, w), dtype=np.float32)  # (n, C, H, W)
        cb = len(self.binary_channels)
        if cb:
            bits = np.unpackbits(self.bits[start:stop], axis=1, count=cb * h * w)  # (n, Cb·H·W)
            out[:, self.binary_channels] = bits.reshape(n, cb, h, w)
        if len(self.float_channels):
            out[:, self.float_channels] = self.floats[start:stop]
        return out


@njit(cache=True)
def _binary_channels(flat: np.ndarray) -> np.ndarray:
    """(C,) bool: the channels of (N, C, P) planes whose every value is 0 or 1. A channel's scan
    stops at the first row with another value; within a row it has no branch, so it vectorizes."""
    n, c, p = flat.shape
    binary = np.ones(c, np.bool_)
    for ch in range(c):
        for i in range(n):
            src = flat[i, ch]
            other = False
            for q in range(p):
                v = src[q]
                other |= (v != 0.0) & (v != 1.0)
            if other:
                binary[ch] = False
                break
    return binary


@njit(cache=True)
def _pack_bits(flat: np.ndarray, channels: np.ndarray, bits: np.ndarray) -> None:
    """``np.packbits`` of ``flat[:, channels] != 0`` flattened per row, into ``bits``: one pass
    over the floats, most significant bit first, with no (N, Cb, P) temporaries."""
    n, _, p = flat.shape
    for i in range(n):
        row = bits[i]
        byte = 0
        k = 0
        for ch in channels:
            src = flat[i, ch]
            for q in range(p):
                byte = (byte << 1) | (1 if src[q] != 0.0 else 0)
                k += 1
                if k & 7 == 0:
                    row[(k >> 3) - 1] = byte
                    byte = 0
        if k & 7:
            row[k >> 3] = byte << (8 - (k & 7))


def pack_planes(planes: np.ndarray, *, float_channels: np.ndarray | None = None) -> PackedPlanes:
    """Pack (N, C, H, W) planes; channels with any value other than 0 / 1 stay float32.

    ``float_channels`` forces a layout (every channel that is not 0 / 1 must be in it), so packs
    of several batches can be concatenated without unpacking (:func:`concat_packed`). Packing is
    on every encoded position's path (a Go position's 31.8 KB of floats), so it is compiled:
    numpy's select, cast and ``packbits`` took 34.5 µs a Go position, this 10.4 µs
    (``python bench/speed/bench_pack_planes.py``)."""
    n, c, h, w = planes.shape
    flat = np.ascontiguousarray(planes, dtype=np.float32).reshape(n, c, h * w)  # (N, C, H·W)
    is_binary = _binary_channels(flat)  # (C,)
    if float_channels is not None:
        forced = np.zeros(c, dtype=bool)
        forced[float_channels] = True
        if (~is_binary & ~forced).any():
            raise ValueError(
                f"channels {np.flatnonzero(~is_binary & ~forced).tolist()} are not 0 / 1 but"
                f" not among float_channels {np.asarray(float_channels).tolist()}"
            )
        is_binary = ~forced
    binary = np.flatnonzero(is_binary).astype(np.int32)
    other = np.flatnonzero(~is_binary).astype(np.int32)
    bits = np.empty((n, (len(binary) * h * w + 7) // 8), np.uint8)
    _pack_bits(flat, binary, bits)
    floats = np.ascontiguousarray(planes[:, other], dtype=np.float32)
    return PackedPlanes((n, c, h, w), bits, binary, other, floats)


def concat_packed(parts: list[PackedPlanes]) -> PackedPlanes:
    """Rows of several packs of one shape as one pack, e.g. the batches of a chunk's children.

    Packs whose float channels differ (a batch where Lc0's rule-50 count happened to be 0 / 1
    everywhere) are repacked, one at a time, to the union of the float channels.
    """
    first = parts[0]
    if any(p.shape[1:] != first.shape[1:] for p in parts):
        raise ValueError(f"packs of different shapes: {[p.shape for p in parts]!r}")
    union = np.unique(np.concatenate([p.float_channels for p in parts])).astype(np.int32)
    parts = [
        p if np.array_equal(p.float_channels, union)
        else pack_planes(p.unpack(), float_channels=union)
        for p in parts
    ]  # fmt: skip
    n = sum(len(p) for p in parts)
    return PackedPlanes(
        (n, *first.shape[1:]),
        np.concatenate([p.bits for p in parts]),
        parts[0].binary_channels,
        union,
        np.concatenate([p.floats for p in parts]),
    )
