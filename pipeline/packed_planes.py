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
        nets run (``pipeline.net_bank``)."""
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


def pack_planes(planes: np.ndarray) -> PackedPlanes:
    """Pack (N, C, H, W) planes; channels with any value other than 0 / 1 stay float32."""
    n, c, h, w = planes.shape
    flat = planes.reshape(n, c, h * w)  # (N, C, H·W)
    is_binary = ((flat == 0) | (flat == 1)).all(axis=(0, 2))  # (C,)
    binary = np.flatnonzero(is_binary).astype(np.int32)
    other = np.flatnonzero(~is_binary).astype(np.int32)
    bits = np.packbits(flat[:, binary].reshape(n, -1).astype(np.uint8), axis=1)
    floats = np.ascontiguousarray(planes[:, other], dtype=np.float32)
    return PackedPlanes((n, c, h, w), bits, binary, other, floats)


def concat_packed(parts: list[PackedPlanes]) -> PackedPlanes:
    """Rows of several packs (same layout) as one pack, e.g. positions and their children."""
    first = parts[0]
    for p in parts[1:]:
        if p.shape[1:] != first.shape[1:] or not np.array_equal(
            p.float_channels, first.float_channels
        ):
            return pack_planes(np.concatenate([q.unpack() for q in parts]))
    n = sum(len(p) for p in parts)
    return PackedPlanes(
        (n, *first.shape[1:]),
        np.concatenate([p.bits for p in parts]),
        first.binary_channels,
        first.float_channels,
        np.concatenate([p.floats for p in parts]),
    )
