"""gpu.kernels.sass: the ELF walk and the FFMA-yield rewrite change exactly the control bits they name.

The synthetic cubins below need no toolkit (CI); where nvcc and cuobjdump are on PATH, the FP8 GEMM
kernel's own cubin is checked against cuobjdump's listing: opcode 0x223 is FFMA on every instruction,
and the rewrite removes ``.reuse`` from FFMA lines and changes nothing else the listing shows."""

import re
import shutil
import struct
import subprocess

import pytest
from host_cxx import assemble_sm90a, needs_nvcc

from gpu.kernels import sass
from refmodel.errors import InputError

FFMA_LO = 0x000000D658D37223          # FFMA R211, R88, R214, R211 (from the GEMM kernel)
FFMA_REUSE_HI = 0x080FE200000000D3    # ... R214.reuse: reuse flag b, bit 45 set
FFMA_PLAIN_HI = 0x000FC200000000D3    # no reuse, bit 45 clear
OTHER_LO = 0x00000000000079C5         # WARPGROUP.ARRIVE


def _cubin(words: list[tuple[int, int]]) -> bytes:
    """A minimal ELF64 with a null section, .shstrtab and one executable .text.k holding ``words``."""
    names = b"\0.shstrtab\0.text.k\0"
    text = b"".join(struct.pack("<QQ", lo, hi) for lo, hi in words)
    off_names, off_text = 64, 64 + len(names)
    off_text += (-off_text) % 16
    shoff = off_text + len(text)
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, 3, 1)
    body = bytearray(head + names)
    body += b"\0" * (off_text - len(body)) + text

    def sh(name, typ, flags, off, size):
        return struct.pack("<IIQQQQIIQQ", name, typ, flags, 0, off, size, 0, 0, 16, 0)

    body += sh(0, 0, 0, 0, 0) + sh(1, 3, 0, off_names, len(names)) + sh(11, 1, 0x6, off_text, len(text))
    return bytes(body)


def _words(cubin: bytes) -> list[tuple[int, int]]:
    (sec,) = sass.code_sections(cubin)
    return sass.instructions(cubin, sec)


def test_code_sections_and_runs():
    words = [(OTHER_LO, 0)] + [(FFMA_LO + (i << 16), FFMA_REUSE_HI) for i in range(10)] + [(OTHER_LO, 0)] + \
            [(FFMA_LO, FFMA_REUSE_HI)] * 7
    cub = _cubin(words)
    (sec,) = sass.code_sections(cub)
    assert sec.name == ".text.k" and sec.size == 16 * len(words)
    assert _words(cub) == words
    assert sass.ffma_runs(words) == [(1, 10)]          # the run of 7 is below MIN_RUN


def test_ffma_yield_clears_reuse_and_yield_on_the_leading_share():
    # 16 FFMAs with distinct destinations, alternating reuse / plain as the compiler emits them
    words = [(FFMA_LO + (i << 16), FFMA_REUSE_HI if i % 2 == 0 else FFMA_PLAIN_HI) for i in range(16)]
    cub = _cubin([(OTHER_LO, 0)] + words + [(OTHER_LO, 0x000FEA0003800000)])
    for n, changed in ((0, 0), (9, 5), (16, 8)):
        new, rep = sass.ffma_yield(cub, n)
        assert (rep.runs, rep.ffmas, rep.changed) == (1, 16, changed)
        out = _words(new)
        assert out[0] == (OTHER_LO, 0) and out[-1] == (OTHER_LO, 0x000FEA0003800000)
        for i, ((lo0, hi0), (lo1, hi1)) in enumerate(zip(words, out[1:-1])):
            assert lo1 == lo0                                   # the operation is untouched
            if i < 16 * n // 16 and hi0 & sass.REUSE_MASK:
                assert hi1 == hi0 & ~(sass.REUSE_MASK | sass.YIELD_BIT) == FFMA_PLAIN_HI
            else:
                assert hi1 == hi0
        assert len(new) == len(cub) and new[:sec_off(cub)] == cub[:sec_off(cub)]


def sec_off(cub: bytes) -> int:
    return sass.code_sections(cub)[0].offset


def test_repeated_destination_is_left_alone():
    words = [(FFMA_LO, FFMA_REUSE_HI)] * 8          # one destination: a dependent chain
    new, rep = sass.ffma_yield(_cubin(words), 16)
    assert rep.changed == 1 and _words(new)[1:] == words[1:]


def test_errors():
    with pytest.raises(sass.SassError, match="ELF64"):
        sass.code_sections(b"not an elf" * 8)
    for bad in (17, -1, 1.5, True):
        with pytest.raises(InputError, match="sixteenths"):
            sass.ffma_yield(_cubin([(FFMA_LO, 0)]), bad)


@needs_nvcc
@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not on PATH")
def test_against_cuobjdump_on_the_gemm_kernel(tmp_path):
    from gpu.kernels.gemm_fp8 import GemmConfig, kernel_source

    r = assemble_sm90a(kernel_source(GemmConfig()), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    cub = (tmp_path / "k.cubin").read_bytes()
    new, rep = sass.ffma_yield(cub, 9)
    (tmp_path / "y.cubin").write_bytes(new)

    def listing(p):
        out = subprocess.run(["cuobjdump", "-sass", str(p)], check=True, capture_output=True, text=True).stdout
        return re.findall(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", out)

    before, after = listing(tmp_path / "k.cubin"), listing(tmp_path / "y.cubin")
    words = _words_all(cub)
    assert len(before) == len(words)
    for text, (lo, _) in zip(before, words):
        op = text.split()[1] if text.startswith("@") else text.split()[0]
        assert (op == "FFMA") == sass.is_ffma(lo), text
    diff = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(diff) == rep.changed > 0
    assert all(b.startswith("FFMA") and a == b.replace(".reuse", "") for b, a in diff)


def _words_all(cub: bytes) -> list[tuple[int, int]]:
    return [w for sec in sass.code_sections(cub) for w in sass.instructions(cub, sec)]
