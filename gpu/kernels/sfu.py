"""Hardware side of the special-function-unit forms: inline-PTX kernels generated from
:data:`refmodel.numerics.sfu.forms.SFU_FORMS`, and kernels of the CUDA spellings of
:data:`refmodel.numerics.sfu.spellings.SPELLINGS`.

``run_sfu(instr, a, b=None)`` runs one form elementwise on operand words (uint16 / uint32 / uint64
bit patterns, as :func:`refmodel.sfu` takes them) and returns the H200's result words.
``sweep(instr, base, count, lo=0)`` runs a unary form on every input word ``base .. base+count-1``
(for f64 forms: on ``(hi << 32) | lo`` for each high word ``hi`` in that range) and returns the
chunk sums of :mod:`refmodel.numerics.sfu.digest` and optionally the raw outputs.
"""

from __future__ import annotations

import functools

import numpy as np

from refmodel.numerics.sfu.digest import CHUNK_BITS, MIX64_CUDA
from refmodel.numerics.sfu.forms import SfuForm, parse_sfu
from refmodel.numerics.sfu.spellings import SPELLINGS, Spelling

from gpu.kernels.runtime import PRELUDE, compile_module, nvrtc_cubin, require_device

# PTX operand type -> (C type of the word, asm constraint, C type of the register)
_REG = {
    "f32": ("u32", "f", "float"),
    "f64": ("u64", "d", "double"),
    "f16": ("u16", "h", "u16"),
    "bf16": ("u16", "h", "u16"),
    "f16x2": ("u32", "r", "u32"),
    "bf16x2": ("u32", "r", "u32"),
}
_TO_REG = {
    "float": "__uint_as_float({})", "double": "__longlong_as_double((long long)({}))",
    "u16": "(u16)({})", "u32": "(u32)({})",
}
_TO_WORD = {"float": "__float_as_uint({})", "double": "(u64)__double_as_longlong({})",
            "u16": "({})", "u32": "({})"}

BLOCK = 256
PER_THREAD = 16
PER_BLOCK = BLOCK * PER_THREAD     # inputs a sweep block covers; divides a digest chunk

#: the two CUDA settings the spellings are built with: nvcc's defaults, and --use_fast_math
CUDA_OPTIONS = {
    "cuda": ("-arch=sm_90a", "-std=c++17"),
    "cuda-fast": ("-arch=sm_90a", "-std=c++17", "--use_fast_math"),
}


def _apply(form: SfuForm, dst: str, srcs: list[str]) -> str:
    """C++ computing word ``dst`` from operand words ``srcs`` with the form's instruction."""
    word, con, reg = _REG[form.type]
    ops = ", ".join(f"%{i}" for i in range(1 + len(srcs)))
    ins = ", ".join(f'"{con}"({_TO_REG[reg].format(s)})' for s in srcs)
    return (f"{{ {reg} r_; asm volatile(\"{form.instr} {ops};\" : \"={con}\"(r_) : {ins}); "
            f"{dst} = {_TO_WORD[reg].format('r_')}; }}")


def _spelled(sp: Spelling, dst: str, srcs: list[str]) -> str:
    x = f"__uint_as_float({srcs[0]})"
    y = f"__uint_as_float({srcs[1]})" if len(srcs) > 1 else "0.0f"
    return f"{{ float x = {x}; float y = {y}; (void)y; float r_ = {sp.expr}; {dst} = __float_as_uint(r_); }}"


def elementwise_source(kname: str, word: str, apply: str) -> str:
    return f"""
extern "C" __global__ void {kname}(const {word}* __restrict__ a, const {word}* __restrict__ b,
                                   {word}* __restrict__ d, u64 n) {{
    u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    {word} r;
    {apply}
    d[j] = r;
}}"""


def sweep_source(kname: str, word: str, load: str, apply: str) -> str:
    """A kernel that runs ``apply`` (word ``w`` -> word ``r``) on input index ``idx`` = base ..,
    adds key(idx, r) into ``sums[idx >> 24]`` and optionally stores ``r`` to ``raw[idx - base]``."""
    return f"""
extern "C" __global__ void {kname}(u64 base, u64 lo, unsigned long long* __restrict__ sums,
                                   {word}* __restrict__ raw) {{
    __shared__ u64 part[{BLOCK // 32}];
    u64 first = base + (u64)blockIdx.x * {PER_BLOCK};
    u64 s = 0;
    #pragma unroll 4
    for (int k = 0; k < {PER_THREAD}; ++k) {{
        u64 idx = first + (u64)k * {BLOCK} + threadIdx.x;
        {word} w = ({word})({load});
        {word} r;
        {apply}
        s += wgref_mix64((u64)r + wgref_mix64(idx));
        if (raw) raw[idx - base] = r;
    }}
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {{
        u64 t = 0;
        for (int q = 0; q < {BLOCK // 32}; ++q) t += part[q];
        atomicAdd(sums + (first >> {CHUNK_BITS}), (unsigned long long)t);
    }}
}}"""


DIGEST_SOURCE = MIX64_CUDA + r"""
extern "C" __global__ void wgref_digest32(const u32* __restrict__ out, u64 n, u64 start,
                                          unsigned long long* __restrict__ slot) {
    u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 s = 0;
    if (j < n) s = wgref_mix64((u64)out[j] + wgref_mix64(start + j));
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(slot, (unsigned long long)s);
}
"""


def form_source(form: SfuForm) -> str:
    word = _REG[form.type][0]
    src = MIX64_CUDA + elementwise_source("sfu_k", word, _apply(form, "r", ["a[j]", "b[j]"][:form.n_operands]))
    if form.exhaustive or form.type == "f64":
        load = "(((u64)idx) << 32) | lo" if form.type == "f64" else "idx"
        src += sweep_source("sfu_sweep", word, load, _apply(form, "r", ["w"]))
    return src


def spelling_source(sp: Spelling) -> str:
    src = MIX64_CUDA + elementwise_source("sfu_k", "u32", _spelled(sp, "r", ["a[j]", "b[j]"][:sp.arity]))
    if sp.arity == 1:
        src += sweep_source("sfu_sweep", "u32", "idx", _spelled(sp, "r", ["w"]))
    return src


def _cuda_spelling(name: str) -> Spelling | None:
    return next((s for s in SPELLINGS if s.name == name and s.compiler in CUDA_OPTIONS), None)


@functools.lru_cache(maxsize=None)
def nvcc_cubin(code: str, options: tuple[str, ...]) -> bytes:
    """The cubin ``nvcc -cubin`` makes of ``code`` with ``options`` (what a CUDA user's build does).
    The spellings are built with nvcc, not NVRTC: the first H200 recording of the --use_fast_math
    spellings through NVRTC ran code identical to the default build's (gpu/record/sfu.py)."""
    import os
    import shutil
    import subprocess
    import tempfile

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(src, "w") as fh:
            fh.write(code)
        r = subprocess.run([nvcc, "-cubin", *options, "-o", out, src], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"nvcc failed: {r.stderr[-2000:]}")
        with open(out, "rb") as fh:
            return fh.read()


@functools.lru_cache(maxsize=None)
def _module(name: str):
    """The compiled module of a form (its PTX spelling, NVRTC) or a CUDA spelling (nvcc)."""
    sp = _cuda_spelling(name)
    if sp is not None:
        import hashlib
        import os
        import tempfile

        cp = require_device()
        blob = nvcc_cubin(PRELUDE + spelling_source(sp), CUDA_OPTIONS[sp.compiler])
        path = os.path.join(tempfile.gettempdir(), f"wgref_sfu_{hashlib.sha256(blob).hexdigest()[:24]}.cubin")
        with open(path, "wb") as fh:
            fh.write(blob)
        return cp.RawModule(path=path)
    return compile_module(form_source(parse_sfu(name)))


def cubin(name: str) -> bytes:
    """The sm_90a cubin of a form (NVRTC) or CUDA spelling (nvcc), for disassembly."""
    sp = _cuda_spelling(name)
    if sp is not None:
        return nvcc_cubin(PRELUDE + spelling_source(sp), CUDA_OPTIONS[sp.compiler])
    return nvrtc_cubin(PRELUDE + form_source(parse_sfu(name)))


def ptx(name: str) -> str:
    """nvcc's PTX of a CUDA spelling (what the C++ became before ptxas)."""
    import os
    import shutil
    import subprocess
    import tempfile

    sp = _cuda_spelling(name)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
        with open(src, "w") as fh:
            fh.write(PRELUDE + spelling_source(sp))
        subprocess.run([nvcc, "-ptx", *CUDA_OPTIONS[sp.compiler], "-o", out, src], check=True, capture_output=True)
        with open(out) as fh:
            return fh.read()


def _word_dtype(bits: int):
    return {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]


def run_sfu(name: str, a, b=None) -> np.ndarray:
    """The H200's result words of a form (or CUDA spelling) on operand words ``a`` (and ``b``)."""
    cp = require_device()
    sp = next((s for s in SPELLINGS if s.name == name), None)
    bits = 32 if sp is not None else parse_sfu(name).word_bits
    w = _word_dtype(bits)
    a_w = np.ascontiguousarray(np.asarray(a)).view(w)
    b_w = np.ascontiguousarray(np.asarray(b)).view(w) if b is not None else a_w
    a_w, b_w = np.broadcast_arrays(a_w, b_w)
    shape, n = a_w.shape, a_w.size
    d = cp.empty(max(n, 1), dtype=w)
    if n:
        k = _module(name).get_function("sfu_k")
        k(((n + 255) // 256,), (256,), (cp.asarray(np.ascontiguousarray(a_w).reshape(-1)),
                                       cp.asarray(np.ascontiguousarray(b_w).reshape(-1)), d, np.uint64(n)))
    return cp.asnumpy(d[:n]).reshape(shape)


def run_device(name: str, a, b=None):
    """Like :func:`run_sfu` on cupy operand words already on the device; returns a cupy array."""
    cp = require_device()
    n = a.size
    d = cp.empty(max(n, 1), dtype=a.dtype)
    k = _module(name).get_function("sfu_k")
    k(((n + 255) // 256,), (256,), (a, a if b is None else b, d, np.uint64(n)))
    return d[:n]


def sweep(name: str, base: int, count: int, lo: int = 0, raw: bool = False):
    """(chunk sums, one per 2**24 inputs of the whole space, as a cupy uint64 array; raw outputs or None)
    of a unary form or spelling on input words ``base .. base + count - 1`` (multiples of 4096)."""
    cp = require_device()
    sp = next((s for s in SPELLINGS if s.name == name), None)
    bits = 32 if sp is not None else parse_sfu(name).word_bits
    if count % PER_BLOCK or base % PER_BLOCK:
        raise ValueError(f"sweep ranges are multiples of {PER_BLOCK} inputs")
    sums = cp.zeros(1 << (32 - CHUNK_BITS), dtype=cp.uint64)
    out = cp.empty(count, dtype=_word_dtype(bits)) if raw else None
    k = _module(name).get_function("sfu_sweep")
    k((count // PER_BLOCK,), (BLOCK,), (np.uint64(base), np.uint64(lo), sums,
                                        out if raw else np.uint64(0)))
    return sums, out


@functools.lru_cache(maxsize=1)
def _digest_kernel():
    return compile_module(DIGEST_SOURCE).get_function("wgref_digest32")


def digest_device(out, start: int) -> int:
    """key-sum of a cupy uint32 array of outputs for input indices start .. (one Python int)."""
    cp = require_device()
    slot = cp.zeros(1, dtype=cp.uint64)
    n = out.size
    _digest_kernel()(((n + 255) // 256,), (256,), (out.reshape(-1), np.uint64(n), np.uint64(start), slot))
    return int(slot.get()[0])
