"""Would Winograd F(4x4, 3x3) lift the Maia nets past the CPU's arithmetic bound?

A Maia net already runs at ~89 % of this CPU's fp32 matmul peak (``bench_chess_nets.py``), so
only fewer FLOPs could make it faster. Winograd F(4x4, 3x3) (Lavin & Gray 2016; lc0's BLAS
backend uses it) does a 3x3 convolution with 4x fewer multiplications. This measures, in one
run, one 64->64 3x3 convolution on an 8x8 board (the Maia tower's layer) at batch 256: PyTorch's
direct convolution (channels-last, the evaluator's layout) against Winograd built from PyTorch
primitives (tile gather, input/output transforms as 36x36 and 16x36 matmuls, 36 batched GEMMs),
and checks that both give the same output.

Run: ``python bench/speed/bench_winograd.py [--threads 1] [--batch 256] [--repeats 10]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from bench_chess_nets import median_seconds

# Lavin & Gray's F(4x4, 3x3) matrices: Y = A^T [(G g G^T) ⊙ (B^T d B)] A.
B_T = torch.tensor(
    [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
     [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=torch.float64
)  # fmt: skip
G = torch.tensor(
    [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
     [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=torch.float64
)  # fmt: skip
A_T = torch.tensor(
    [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    dtype=torch.float64,
)
TILE_ROWS = torch.tensor([list(range(0, 6)), list(range(4, 10))])  # 2 input tiles per axis


def winograd_conv(weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """(B, 8, 8, C) NHWC -> (B, 8, 8, K): the 3x3 convolution with padding 1 of ``weight``."""
    k, c = weight.shape[:2]
    u = torch.einsum("ij,kcjm,lm->ilck", G, weight.double(), G).reshape(36, c, k).float()
    to_tiles = torch.kron(B_T, B_T).float()  # (36, 36): vec(B^T d B) = kron · vec(d)
    from_tiles = torch.kron(A_T, A_T).float()  # (16, 36)

    def conv(x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        padded = torch.nn.functional.pad(x, (0, 0, 1, 1, 1, 1))  # (B, 10, 10, C)
        tiles = padded[:, TILE_ROWS][:, :, :, TILE_ROWS]  # (B, 2, 6, 2, 6, C)
        d = tiles.permute(2, 4, 0, 1, 3, 5).reshape(36, -1)  # (36, B*2*2*C)
        v = (to_tiles @ d).view(36, b * 4, c)
        m = torch.bmm(v, u).view(36, -1)  # (36, B*4*K)
        y = (from_tiles @ m).view(4, 4, b, 2, 2, k)  # (row, col, b, tile row, tile col, K)
        return y.permute(2, 3, 0, 4, 1, 5).reshape(b, 8, 8, k)

    return conv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = args.channels
    weight = 0.05 * torch.randn(c, c, 3, 3)
    x = torch.randn(args.batch, c, 8, 8).contiguous(memory_format=torch.channels_last)
    x_nhwc = x.permute(0, 2, 3, 1).contiguous()
    conv = winograd_conv(weight)
    with torch.inference_mode():
        direct = torch.nn.functional.conv2d(x, weight, padding=1)
        wino = conv(x_nhwc).permute(0, 3, 1, 2)
        error = float((wino - direct).abs().max())
        direct_ms = 1e3 * median_seconds(
            lambda: torch.nn.functional.conv2d(x, weight, padding=1), args.repeats
        )
        wino_ms = 1e3 * median_seconds(lambda: conv(x_nhwc), args.repeats)
    print(f"{c}->{c} 3x3 conv, 8x8 board, batch {args.batch}, {args.threads} thread(s)")
    print(f"max |winograd - direct| = {error:.1e} (outputs up to {float(direct.abs().max()):.1f})")
    print(f"direct (channels-last)   {direct_ms:7.2f} ms")
    print(f"winograd F(4x4,3x3)      {wino_ms:7.2f} ms")
    print(f"ratio direct / winograd  {direct_ms / wino_ms:7.2f}x")


if __name__ == "__main__":
    main()
