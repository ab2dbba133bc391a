"""SASS control words of sm_90 cubins, and the one rewrite wgref applies to them: FFMA yield.

An sm_90 instruction is 16 bytes, two little-endian 64-bit words.  The low word's bits 0-11 are the
opcode (``0x223`` is ``FFMA R, R, R, R``; checked against ``cuobjdump -sass`` for every instruction of
the FP8 GEMM kernel in ``tests/test_sass.py``); bits 16-23 the destination register.  The high word's
bits 41-61 are the scheduling control the compiler sets::

    bit 41-44  stall cycles        bit 52-57  wait-barrier mask
    bit 45     yield               bit 58-61  operand reuse flags (a, b, c, -)
    bit 46-48  write barrier       bit 49-51  read barrier

``ffma_yield`` is the rewrite DeepGEMM applies to its promotion FFMAs (``deep_gemm/jit/interleave_ffma.py``,
read for the idea, not copied): in a run of at least 8 consecutive FFMAs, the leading ``sixteenths``/16 of
them that carry an operand-reuse flag lose it and get bit 45 cleared, the state the compiler gives the
FFMAs of the same run that reuse nothing.  A warp then lets the scheduler switch to another warp between
them (a reused operand is only kept for the same warp's next instruction, so reuse goes with it), which in
the GEMM's promotion means the other consumer warpgroup's wgmmas are issued while one warpgroup's FFMA
burst runs.  The arithmetic of each FFMA is untouched; only when it issues changes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from itertools import groupby

from refmodel.errors import InputError

OPCODE_MASK = 0xFFF
FFMA = 0x223                  # FFMA R, R, R, R (register form)
YIELD_BIT = 1 << 45           # of the high word
REUSE_MASK = 0xF << 58        # of the high word
MIN_RUN = 8                   # a run of fewer FFMAs is left alone

_SHF_EXECINSTR = 0x4


class SassError(InputError):
    """The bytes are not an sm_90 cubin this module can rewrite."""


@dataclass(frozen=True)
class Section:
    name: str
    offset: int
    size: int


def code_sections(cubin: bytes) -> list[Section]:
    """The executable sections (``.text.<kernel>``) of an ELF64 cubin."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise SassError("a cubin must be a little-endian ELF64 file (it starts with 7f 45 4c 46 02 01)")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    stroff = heads[shstrndx][4]

    def name(at: int) -> str:
        end = cubin.index(b"\0", stroff + at)
        return cubin[stroff + at:end].decode()

    out = []
    for sh_name, _type, flags, _addr, offset, size in heads:
        if flags & _SHF_EXECINSTR and size:
            if size % 16:
                raise SassError(f"code section {name(sh_name)} is {size} bytes, not a whole number of 16-byte instructions")
            out.append(Section(name(sh_name), offset, size))
    return out


def instructions(cubin: bytes, section: Section) -> list[tuple[int, int]]:
    """The ``(low, high)`` 64-bit words of each instruction of ``section``."""
    return [struct.unpack_from("<QQ", cubin, section.offset + i) for i in range(0, section.size, 16)]


def is_ffma(low: int) -> bool:
    """True for the register form of FFMA (opcode 0x223)."""
    return low & OPCODE_MASK == FFMA


def ffma_runs(words: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(start, length)`` of each run of at least MIN_RUN consecutive FFMAs in ``words``."""
    runs, at = [], 0
    for ffma, group in groupby(words, key=lambda w: is_ffma(w[0])):
        n = sum(1 for _ in group)
        if ffma and n >= MIN_RUN:
            runs.append((at, n))
        at += n
    return runs


def check_sixteenths(sixteenths) -> None:
    """Raise SassError unless ``sixteenths`` (the share of each FFMA run to rewrite) is an int in 0..16."""
    if not isinstance(sixteenths, int) or isinstance(sixteenths, bool) or not 0 <= sixteenths <= 16:
        raise SassError(f"ffma_yield is in sixteenths of each FFMA run, an integer in 0..16, got {sixteenths!r}")


@dataclass(frozen=True)
class YieldReport:
    runs: int          # FFMA runs of at least MIN_RUN instructions
    ffmas: int         # FFMAs in those runs
    changed: int       # FFMAs whose reuse flags and yield bit were cleared


def ffma_yield(cubin: bytes, sixteenths: int) -> tuple[bytes, YieldReport]:
    """The cubin with the FFMA-yield rewrite applied to the leading ``sixteenths``/16 of every FFMA run
    (0: unchanged; 9: DeepGEMM's share; 16: whole runs), and what changed."""
    check_sixteenths(sixteenths)
    buf = bytearray(cubin)
    runs = ffmas = changed = 0
    for sec in code_sections(cubin):
        words = instructions(cubin, sec)
        for start, n in ffma_runs(words):
            runs += 1
            ffmas += n
            seen: set[int] = set()
            for i in range(start, start + n * sixteenths // 16):
                lo, hi = words[i]
                dst = (lo >> 16) & 0xFF
                if hi & REUSE_MASK and dst not in seen:     # (a repeated destination is a dependent chain: left alone)
                    hi &= ~(REUSE_MASK | YIELD_BIT)
                    struct.pack_into("<Q", buf, sec.offset + 16 * i + 8, hi)
                    changed += 1
                seen.add(dst)
    return bytes(buf), YieldReport(runs, ffmas, changed)
