"""The wgmma epilogue of seed §5.4: f32 accumulator -> cvt to f16x2/bf16x2 -> stmatrix.x4 loop.

An f32 accumulator cannot go to stmatrix (it has no f32 form, seed §6): each thread
converts its register pairs with ``cvt.rn.{f16x2,bf16x2}.f32 p, d[2j+1], d[2j]`` (the
first source lands in the high half), which gives exactly the register layout of an f16
accumulator.  Then, for each 16-column slice ``s`` of the 64 x N tile, every warp ``w``
stores its 16 x 16 block with one ``stmatrix.x4``: registers ``p[4s .. 4s+3]`` are the
four 8x8 matrices (top-left, bottom-left, top-right, bottom-right: seed §5.3), and lane
``L`` gives the address of row ``16w + L%8 + 8*((L//8)%2)``, columns ``16s + 8*(L//16)``
(a 16-byte row segment) of the destination tile.  N/16 stmatrix per warp: the loop.

The destination is the row-major tile of :func:`refmodel.layouts.smem.rowmajor_offsets`
(column blocks of the swizzle width, swizzled on the absolute address), the layout a
TMA store of the same swizzle reads back.
"""

from __future__ import annotations

import numpy as np

from ..limits import SMEM_ADDRESS, limit
from ..validate import _describe, as_array, check_int
from ..errors import InputError
from ..layouts.fragment import pack_accumulator
from ..layouts.smem import rowmajor_offsets
from ..layouts.swizzle import swizzle_mode
from ..numerics.cvt import cvt
from .stmatrix import stmatrix

STMATRIX_X4 = "stmatrix.sync.aligned.m8n8.x4.shared.b16"


def epilogue_addresses(n: int, mode="none", *, smem_base: int = 0) -> np.ndarray:
    """(N/16, 128) byte offsets each thread gives to the stmatrix.x4 of each slice."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 16 or n > 256 or n % 16:
        raise InputError(f"the epilogue stores 16-column slices: N must be a multiple of 16 in 16..256, got {_describe(n)}")
    n = int(n)
    smem_base = check_int("smem_base", smem_base, 0, SMEM_ADDRESS, multiple=16,
                          rule="the shared address of the tile: stmatrix rows are 16-byte aligned")
    off = rowmajor_offsets(64, n, 2, swizzle_mode(mode), base=smem_base)
    t = np.arange(128)
    w, lane = t // 32, t % 32
    m = lane // 8
    row = 16 * w + lane % 8 + 8 * (m % 2)
    s = np.arange(n // 16)[:, None]
    col = 16 * s + 8 * (m // 2)[None, :]
    return off[row[None, :], col]


def pack_f16x2(acc: np.ndarray, out_type: str) -> np.ndarray:
    """(128, N/2) f32 accumulator registers -> (128, N/4) packed f16x2/bf16x2 registers."""
    if not isinstance(out_type, str) or out_type not in ("f16", "bf16"):
        raise InputError(f"stmatrix stores 16-bit elements: out_type must be f16 or bf16, got {_describe(out_type)}")
    a = as_array("acc", acc)
    r = a.view(np.float32) if a.dtype == np.uint32 else a.astype(np.float32)
    return cvt(f"cvt.rn.{out_type}x2.f32", r[:, 1::2], r[:, 0::2]).astype(np.uint32)


def epilogue_stmatrix(acc, out_type: str = "bf16", mode="none", *, smem_base: int = 0,
                      fill: int = 0xA5) -> tuple[np.ndarray, np.ndarray]:
    """(image, addresses): the shared-memory tile the epilogue writes, and each thread's
    stmatrix address per slice.

    ``acc`` is the 64 x N float32 accumulator (or its (128, N/2) registers, float32 or
    uint32); the image (64 * 2N bytes) starts at ``smem_base`` and holds ``fill`` where
    nothing was written (none: the tile is covered exactly once).
    """
    fill = check_int("fill", fill, 0, limit("byte_value"), rule="the byte left where nothing is written")
    a = as_array("acc", acc)
    if a.ndim == 2 and a.shape[0] == 64 and a.dtype == np.float32:
        n = a.shape[1]
        regs = pack_accumulator(a, "f32").view(np.float32)
    elif a.ndim == 2 and a.shape[0] == 128 and a.dtype in (np.float32, np.uint32):
        n = 2 * a.shape[1]
        regs = a.view(np.float32)
    else:
        raise InputError(f"acc must be a (64, N) float32 accumulator or its (128, N/2) registers, "
                         f"got {a.dtype.name} {a.shape}")
    addrs = epilogue_addresses(n, mode, smem_base=smem_base)
    packed = pack_f16x2(regs, out_type)
    img = np.full(64 * 2 * n, fill, dtype=np.uint8)
    for s in range(n // 16):
        for w in range(4):
            lanes = slice(32 * w, 32 * w + 32)
            img = stmatrix(STMATRIX_X4, packed[lanes, 4 * s:4 * s + 4], addrs[s, lanes], img)
    return img, addrs


def tile_from_image(img: np.ndarray, n: int, out_type: str, mode="none", *, smem_base: int = 0) -> np.ndarray:
    """The 64 x N tile (uint16 codes) a TMA store of the same layout would read from ``img``."""
    off = rowmajor_offsets(64, n, 2, swizzle_mode(mode), base=smem_base)
    im = as_array("img", img).astype(np.uint8)
    return (im[off].astype(np.uint16) | (im[off + 1].astype(np.uint16) << 8))


__all__ = ["epilogue_stmatrix", "epilogue_addresses", "pack_f16x2", "tile_from_image", "STMATRIX_X4"]
