"""``wgref.triton.interpret()``: Triton's CPU interpreter with the H200's numerics.

Triton's interpreter (``TRITON_INTERPRET=1``) runs a kernel on the CPU with numpy, and never reproduces the
GPU's bits: its ``tl.dot`` is ``np.matmul`` (no tensor-core alignment, no tf32, numpy's summation order), its
FP8 and bf16 casts truncate or round half up, and its f32 arithmetic keeps NaN payloads.  Inside
``with wgref.triton.interpret():`` the interpreter's builder is patched so that

* every ``tl.dot`` is :func:`refmodel.golden.triton_lowering.tl_dot`: the path Triton 3.6 emits on sm_90 for
  the dot's block shapes and the launch's ``num_warps`` (wgmma, or mma.sync with FP8 upcast), its K order, its
  ``max_num_imprecise_acc`` promotions (sm_90's default 2**30 for FP8), tf32 and tf32x3;
* ``acc += tl.dot(a, b)`` is folded into ``tl.dot(a, b, acc)`` exactly where Triton folds it
  (``max_num_imprecise_acc`` 0: every non-FP8 dot), and otherwise a fresh dot plus ``add.f32``;
* float32 ``+``, ``-``, ``*`` and ``tl.fma`` are the GPU's (one rounding, NaN written as 0x7FFFFFFF);
* ``.to()`` between f32, f16 and bf16 is ``cvt.rn`` (an f16 NaN widened to f32 is 0x7FFFFFFF, as the H200's
  ``cvt.f32.f16`` writes it);

* ``tl.exp``, ``exp2``, ``log``, ``log2``, ``sin``, ``cos``, ``sqrt``, ``rsqrt``, ``sqrt_rn``, ``/``, ``fdiv`` and
  ``div_rn`` are the instruction sequences Triton 3.6 compiles them to on sm_90
  (:data:`refmodel.numerics.sfu.spelled.SPELLED`, the ``triton:`` spellings: recorded on the H200 over all
  2**32 inputs, or 134M adversarial pairs for the divisions; :func:`replay_spellings` runs the recorded
  kernel in the interpreter on the recorded samples), and ``tl.sigmoid`` is their composition;
* a float32 multiply feeding an add or subtract is the ``fma.rn.f32`` Triton's compiler contracts it to
  (recorded: fixtures/triton/elementwise.npz, :func:`replay_elementwise`);

and everything it cannot model exactly is refused with one sentence naming it (:class:`NotModelled`):
float reductions and scans (``tl.sum``, ``tl.max``, ``tl.cumsum`` ... over floats: their order on the GPU is
not modelled yet), float atomics, ``tl.erf`` and other libdevice calls, float min/max and ``%``, f16 multiply-adds, FP8 casts in the kernel body,
f64 and integer dots.  Inductor's templates (:func:`interpret_template`) run with Inductor's own
``triton_helpers.maximum``/``minimum`` semantics.

Kernels must be defined with ``TRITON_INTERPRET=1`` set (before ``@triton.jit`` runs).  Arguments may be
numpy arrays (ml_dtypes for bf16 and FP8; no torch needed) or CPU torch tensors::

    os.environ["TRITON_INTERPRET"] = "1"
    @triton.jit
    def kernel(...): ...
    with wgref.triton.interpret():
        kernel[grid](a, b, c, ..., BM=32, BN=64, BK=64, num_warps=4)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Any, Iterator

import numpy as np

from refmodel.errors import InputError

_LAUNCH: contextvars.ContextVar = contextvars.ContextVar("wgref_triton_launch", default=None)
_NAN16 = np.uint16(0x7FFF)


class NotModelled(InputError):
    """A kernel uses an operation wgref's interpreter cannot run bit-exactly."""


# ----------------------------------------------------------------------------- numpy arguments


class _Storage:
    def __init__(self, arr: np.ndarray):
        self.arr = arr

    def data_ptr(self) -> int:
        return self.arr.ctypes.data

    def cpu(self) -> "_Storage":
        return self

    def copy_(self, other) -> "_Storage":     # host and "device" are the same memory
        return self


class HostArray:
    """A numpy array with the surface of a CPU torch tensor that Triton's interpreter uses (``data_ptr``,
    ``dtype``, ``untyped_storage`` ...): the interpreter reads and writes its memory in place."""

    def __init__(self, arr: np.ndarray | None):
        if arr is not None and not arr.flags.c_contiguous:
            raise InputError("numpy arguments must be C-contiguous (the kernel addresses them by strides)")
        self.arr = arr

    def data_ptr(self) -> int:
        return self.arr.ctypes.data

    @property
    def dtype(self):
        return self.arr.dtype

    def untyped_storage(self) -> _Storage:
        return _Storage(self.arr)

    def new_empty(self, *_, **__) -> "HostArray":
        return HostArray(None)

    def set_(self, storage: _Storage, *_):
        self.arr = storage.arr
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self):
        return self.arr.shape

    def stride(self):
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def copy_(self, other):      # the same memory: nothing to copy back
        return self


# ----------------------------------------------------------------------------- patched builder


def _tl():
    import triton.language as tl

    return tl


def _np_typed(h) -> np.ndarray:
    """The typed numpy values of an interpreter TensorHandle (its bf16 and FP8 are stored as raw integers)."""
    import ml_dtypes

    tl = _tl()
    t = h.dtype.scalar if hasattr(h.dtype, "scalar") else h.dtype
    view = {tl.bfloat16: ml_dtypes.bfloat16, tl.float8e4nv: ml_dtypes.float8_e4m3fn, tl.float8e5: ml_dtypes.float8_e5m2}
    if t in view:
        return np.ascontiguousarray(h.data).view(view[t])
    if t in (tl.float16, tl.float32):
        return h.data
    raise NotModelled(f"tl.dot on {t} operands is not modelled (f16, bf16, f32, e4m3 and e5m2 are)")


def _precision(p) -> str:
    name = str(getattr(p, "name", p)).lower()
    for key in ("tf32x3", "ieee", "tf32"):
        if key in name:
            return key
    raise NotModelled(f"input_precision {name} is not modelled (tf32, tf32x3 and ieee are)")


def _canon(x: np.ndarray) -> np.ndarray:
    """The GPU's NaN (0x7FFFFFFF, 0x7FFF) for every NaN of a float32 or float16 array."""
    from refmodel.numerics.promotion import canonical_nan_f32

    x = np.ascontiguousarray(x)
    if x.dtype == np.float32:
        return canonical_nan_f32(x)
    if x.dtype == np.float16:
        u = x.view(np.uint16).copy()
        u[np.isnan(x)] = _NAN16
        return u.view(np.float16)
    return x


def _make_pending(TensorHandle):
    class PendingDot(TensorHandle):
        """A ``tl.dot`` whose accumulator was zero, held until its first use: an add folds it (when Triton
        does), anything else materialises it."""

        def __init__(self, a, b, d, precision, imp, dtype):
            self._args = (a, b, d, precision, imp)
            self._data = None
            self.dtype = dtype
            self.attr = {}

        def compute(self, c: np.ndarray | None = None) -> np.ndarray:
            from refmodel.golden.triton_lowering import tl_dot

            a, b, d, precision, imp = self._args
            cfg = _LAUNCH.get() or {"num_warps": 4, "num_stages": None}
            acc = d.data if c is None else c
            with np.errstate(all="ignore"):
                return tl_dot(_np_typed(a), _np_typed(b), np.ascontiguousarray(acc, d.data.dtype),
                              num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], input_precision=precision,
                              max_num_imprecise_acc=imp)

        @property
        def data(self):
            if self._data is None:
                self._data = self.compute()
            return self._data

        @data.setter
        def data(self, v):
            self._data = v

        def foldable(self) -> bool:
            a, b, d, precision, imp = self._args
            return self._data is None and imp == 0 and not np.any(d.data)

    return PendingDot


def _make_pending_mul(TensorHandle):
    class PendingMul(TensorHandle):
        """A float32 product held until its first use: an add would be contracted to an FMA by Triton."""

        def __init__(self, x, y, dtype):
            self._xy = (x, y)
            self._data = None
            self.dtype = dtype
            self.attr = {}

        @property
        def data(self):
            if self._data is None:
                x, y = self._xy
                with np.errstate(all="ignore"):
                    self._data = _canon(np.multiply(x.data, y.data))
            return self._data

        @data.setter
        def data(self, v):
            self._data = v

    return PendingMul


def _float_refusing(orig, what: str):
    def apply_impl(self, input):
        for x in input:
            if x.dtype.scalar.is_floating():
                raise NotModelled(f"{what} over {x.dtype.scalar} is not modelled by wgref's Triton interpreter (the "
                                  f"reduction order Triton compiles for the tensor's layout was not recorded); run the "
                                  f"kernel on the GPU")
        return orig(self, input)
    return apply_impl


def _refuse(what: str):
    def op(self, *args, **kwargs):
        raise NotModelled(f"{what} is not modelled by wgref's Triton interpreter (its lowering on sm_90 was not "
                          f"recorded); run the kernel on the GPU")
    return op


@contextlib.contextmanager
def interpret(*, numerics: bool = True) -> Iterator[None]:
    """Patch Triton's interpreter with the H200's numerics for the ``with`` block (see the module doc).
    ``numerics=False`` keeps Triton's own numerics and patches only what running on numpy arguments needs
    (for contrast)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise InputError("set TRITON_INTERPRET=1 before the kernels are defined (before @triton.jit runs), then "
                         "use wgref.triton.interpret()")
    try:
        import triton
        import triton.runtime.interpreter as I
    except ImportError:
        raise InputError("wgref.triton needs Triton 3.6: pip install 'triton==3.6.0'") from None
    if not triton.__version__.startswith("3.6"):
        raise InputError(f"wgref.triton models Triton 3.6's lowering, found Triton {triton.__version__}")
    import triton.language.standard as _std

    if type(_std.zeros).__name__ != "InterpretedFunction":
        raise InputError("Triton was imported before TRITON_INTERPRET=1 was set: set it before the first "
                         "`import triton` (its own library functions are built at import)")
    tl = _tl()
    B, G = I.InterpreterBuilder, I.GridExecutor
    TensorHandle = I.TensorHandle
    PendingDot, PendingMul = _make_pending(TensorHandle), _make_pending_mul(TensorHandle)
    saved: dict[tuple[Any, str], Any] = {}

    def patch(owner, name, value):
        saved[(owner, name)] = owner.__dict__.get(name, _MISSING)
        setattr(owner, name, value)

    def restore():
        for (owner, name), value in saved.items():
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)

    orig_call = G.__call__

    def call(self, *args, **kwargs):
        cfg = {"num_warps": int(kwargs.get("num_warps", 4)), "num_stages": kwargs.get("num_stages")}
        args = [HostArray(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x for x in args]
        kwargs = {k: HostArray(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        token = _LAUNCH.set(cfg)
        try:
            return orig_call(self, *args, **kwargs)
        finally:
            _LAUNCH.reset(token)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return PendingDot(a, b, d, _precision(input_precision), int(max_num_imprecise_acc), d.dtype)

    def float_binary(np_op, name):
        def op(self, lhs, rhs):
            if name in ("add", "sub"):
                fused = _contract(lhs, rhs, name)
                if fused is not None:
                    return fused
            if name == "add":
                for x, other in ((rhs, lhs), (lhs, rhs)):
                    if isinstance(x, PendingDot) and x.foldable():
                        x.data = x.compute(np.asarray(other.data))     # acc += tl.dot(a, b): folded
                        return TensorHandle(x.data, x.dtype)
            t = lhs.dtype.scalar
            if t not in (tl.float32, tl.float16):
                raise NotModelled(f"{name} on {t} is not modelled (float32 and float16 are)")
            if name == "mul":
                return PendingMul(lhs, rhs, t)
            with np.errstate(all="ignore"):
                if t == tl.float16:    # exact in float64, then one rounding (numpy's float16 ops round twice)
                    out = np_op(lhs.data.astype(np.float64), rhs.data.astype(np.float64)).astype(np.float16)
                else:
                    out = np_op(lhs.data, rhs.data)
            return TensorHandle(_canon(out.astype(lhs.data.dtype)), t)
        return op

    def _contract(lhs, rhs, name):
        """x * y + z (or - z, or z - x * y): Triton's compiler contracts it to fma.rn (seen in its PTX and
        recorded), also when the product has other uses; float32 only."""
        from refmodel.numerics.promotion import fma_f32_array

        for m, other, sign_m, sign_o in ((lhs, rhs, 1, 1 if name == "add" else -1), (rhs, lhs, 1 if name == "add" else -1, 1)):
            # LLVM's NVPTX backend fuses aggressively: a product feeds an FMA even when it has other uses
            # (which keep their mul.f32): Triton 3.6's PTX of x * z + tl.abs(x * z) is mul + fma
            if isinstance(m, PendingMul):
                if m.dtype != tl.float32:
                    raise NotModelled(f"a {m.dtype} multiply feeding an add (contracted to an FMA by Triton's "
                                      f"compiler) is not modelled (float32 is)")
                x, y = m._xy
                xs = x.data if sign_m == 1 else -x.data
                zs = other.data if sign_o == 1 else -other.data
                return TensorHandle(fma_f32_array(xs, y.data, zs), tl.float32)
        return None

    def spelled_op(spelling):
        def op(self, *args):
            t = args[0].dtype.scalar
            if t != tl.float32:
                raise NotModelled(f"{spelling.split(':', 1)[1]} on {t} is not modelled (float32 is)")
            return TensorHandle(run_spelling(spelling, *(a.data for a in args)), tl.float32)
        return op

    def create_fma(self, x, y, z):
        from refmodel.numerics.promotion import fma_f32_array

        if z.dtype.scalar != tl.float32:
            raise NotModelled(f"tl.fma on {z.dtype.scalar} is not modelled (float32 is)")
        return TensorHandle(fma_f32_array(x.data, y.data, z.data), tl.float32)

    def cast(self, src, dst_type):
        s, t = src.dtype.scalar, dst_type.scalar
        floats = (tl.float32, tl.float16, tl.bfloat16)
        if s in floats and t in floats:
            return TensorHandle(_fp_cast(src, s, t), t)
        if s.is_int() and t == tl.float32 and np.all(np.abs(src.data.astype(np.int64)) <= 1 << 24):
            return TensorHandle(src.data.astype(np.float32), t)        # exactly representable: cvt.rn is exact
        if (s.is_floating() or t.is_floating()) and s != t:
            raise NotModelled(f"the cast from {s} to {t} is not modelled (f32, f16 and bf16 among themselves are)")
        return orig_cast(self, src, dst_type)

    def fp_to_fp(self, src, dst_type, rounding_mode):
        return cast(self, src, dst_type)

    def _fp_cast(src, s, t):
        import ml_dtypes

        from refmodel.numerics.gemm import _convert

        x = _np_typed(src) if s != tl.float32 else src.data
        if s == tl.float16 and t == tl.float32:
            return _canon(x.astype(np.float32))           # cvt.f32.f16: NaN -> 0x7FFFFFFF (recorded)
        if t == tl.float32:
            return x.astype(np.float32)                    # bf16 -> f32: exact
        if s != tl.float32:
            raise NotModelled(f"the cast from {s} to {t} is not modelled (through f32 it is)")
        out = _convert(np.asarray(x, np.float32), np.dtype(np.float16 if t == tl.float16 else ml_dtypes.bfloat16))
        return np.ascontiguousarray(out).view(np.uint16) if t == tl.bfloat16 else out

    orig_patch_tensor = I._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        # NumPy >= 2.5 refuses int() and bool() of a 1-element 1-d array, which Triton 3.6's interpreter does
        # for every scalar (`range(0, K, BK)`, `if M * N == 0`): read the one element instead
        orig_patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))
        scope.set_attr(tensor, "__bool__", lambda self: bool(np.asarray(self.handle.data).reshape(-1)[0])
                       if self.handle.data.size == 1 else True)

    orig_cast = B.cast_impl
    saved[(I, "_patch_lang_tensor")] = orig_patch_tensor    # a module function: restored like the methods
    I._patch_lang_tensor = patch_lang_tensor
    patch(G, "__call__", call)
    if not numerics:
        try:
            yield
        finally:
            restore()
        return
    patch(B, "create_dot", create_dot)
    # float reductions and scans: the order Triton compiles (per thread, then warp shuffles, then shared memory)
    # is not modelled yet, and numpy's order is not the GPU's: refused (integer ones are exact and run)
    for cls, what in ((I.ReduceOps, "tl.sum / tl.max / tl.min / tl.reduce"),
                      (I.ScanOps, "tl.cumsum / tl.associative_scan")):
        patch(cls, "apply_impl", _float_refusing(cls.apply_impl, what))
    orig_rmw = B.create_atomic_rmw

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        if val.dtype.scalar.is_floating():
            raise NotModelled(f"a float atomic ({val.dtype.scalar}) is not modelled by wgref's Triton interpreter: the "
                              f"order the GPU applies them in is not deterministic")
        return orig_rmw(self, rmwOp, ptr, val, mask, sem, scope)

    patch(B, "create_atomic_rmw", create_atomic_rmw)
    patch(B, "create_fadd", float_binary(np.add, "add"))
    patch(B, "create_fsub", float_binary(np.subtract, "sub"))
    patch(B, "create_fmul", float_binary(np.multiply, "mul"))
    patch(B, "create_fma", create_fma)
    patch(B, "cast_impl", cast)
    patch(B, "create_fp_to_fp", fp_to_fp)
    # the instruction sequences Triton 3.6 compiles these to on sm_90, recorded on the H200 (refmodel.sfu's
    # triton: spellings; ELEMENTWISE_PTX and tests/test_triton_interpret.py check the PTX they start from)
    for name, spelling in SPELLINGS.items():
        patch(B, name, spelled_op(spelling))
    for name, what in (("create_frem", "float %"), ("create_erf", "tl.erf"),
                       ("create_minnumf", "float minimum/maximum"), ("create_maxnumf", "float minimum/maximum"),
                       ("create_minimumf", "float minimum/maximum"), ("create_maximumf", "float minimum/maximum")):
        patch(B, name, _refuse(what))
    opts = I.interpreter_builder.options
    saved_imp = opts.max_num_imprecise_acc_default
    try:
        object.__setattr__(opts, "max_num_imprecise_acc_default", 2 ** 30)    # sm_90's default
    except Exception:       # noqa: BLE001 - a frozen options object: set on its class
        patch(type(opts), "max_num_imprecise_acc_default", 2 ** 30)
    try:
        yield
    finally:
        restore()
        with contextlib.suppress(Exception):
            object.__setattr__(opts, "max_num_imprecise_acc_default", saved_imp)


_MISSING = object()

#: the interpreter builder's float ops and the recorded Triton spelling (refmodel.sfu) each one is
SPELLINGS = {
    "create_exp": "triton:tl.exp(x)", "create_exp2": "triton:tl.exp2(x)", "create_log": "triton:tl.log(x)",
    "create_log2": "triton:tl.log2(x)", "create_sin": "triton:tl.sin(x)", "create_cos": "triton:tl.cos(x)",
    "create_sqrt": "triton:tl.sqrt(x)", "create_rsqrt": "triton:tl.math.rsqrt(x)",
    "create_precise_sqrt": "triton:tl.sqrt_rn(x)", "create_fdiv": "triton:x / y",
    "create_precise_divf": "triton:tl.math.div_rn(x, y)",
}


def run_spelling(spelling: str, *xs) -> np.ndarray:
    """float32 result of a recorded Triton spelling (refmodel.numerics.sfu.spelled) on float32 arrays."""
    from refmodel.numerics.sfu.unit import spelled_f32

    return spelled_f32(spelling, *xs)


#: how Triton 3.6 lowers float32 elementwise ops on sm_90 (read from its PTX; the interpreter runs these)
ELEMENTWISE_PTX = {
    "tl.exp(x)": ("mul.f32", "ex2.approx.f32"), "tl.exp2(x)": ("ex2.approx.ftz.f32",), "x / z": ("div.full.f32",),
    "tl.sqrt(x)": ("sqrt.approx.ftz.f32",), "tl.rsqrt(x)": ("rsqrt.approx.ftz.f32",),
    "tl.math.div_rn(x, z)": ("div.rn.f32",), "tl.sqrt_rn(x)": ("sqrt.rn.f32",), "x * z + x": ("fma.rn.f32",),
    "x * z - x": ("fma.rn.f32",), "x - x * z": ("fma.rn.f32",),
    "x * z + tl.abs(x * z)": ("fma.rn.f32", "mul.f32"),       # a product with another use still feeds the FMA
}


class NotRecordedWarning(UserWarning):
    """An op the interpreter runs from Triton's PTX and refmodel's instruction models, whose use in a Triton kernel
    was not itself recorded on the H200."""


_NOTED: set = set()


def _note(what: str, how: str) -> None:
    import warnings

    if what not in _NOTED:
        _NOTED.add(what)
        warnings.warn(NotRecordedWarning(f"{what} runs as {how} (Triton 3.6's PTX on sm_90, refmodel's bit-exact "
                                         f"instruction models); no Triton kernel using it was recorded on the H200"),
                      stacklevel=3)


def elementwise_ptx(expr: str) -> list[str]:
    """The float arithmetic opcodes of Triton 3.6's PTX for sm_90 of a kernel storing ``expr`` over float32 ``x``
    and ``z`` (compiled on this machine: no GPU needed)."""
    import importlib.util
    import re
    import tempfile
    from pathlib import Path

    import triton
    from triton.backends.compiler import GPUTarget

    d = Path(tempfile.mkdtemp(prefix="wgref_ptx_"))
    (d / "k.py").write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                            "def k(x_ptr, z_ptr, y_ptr, N: tl.constexpr):\n    r = tl.arange(0, N)\n"
                            "    x = tl.load(x_ptr + r)\n    z = tl.load(z_ptr + r)\n"
                            f"    tl.store(y_ptr + r, {expr})\n")
    spec = importlib.util.spec_from_file_location("wgref_ptx_k", d / "k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = triton.compiler.ASTSource(fn=mod.k, signature={"x_ptr": "*fp32", "z_ptr": "*fp32", "y_ptr": "*fp32",
                                                         "N": "constexpr"}, constexprs={"N": 128})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    ops = set(re.findall(r"\b((?:ex2|lg2|sqrt|rsqrt|div|rcp|mul|add|fma|sub)\.[\w.]*f32)\b", ptx))
    return sorted(ops)


def replay_fixtures(families=None, root=None, log=print, numerics: bool = True) -> tuple[int, int]:
    """Run the kernel recorded in fixtures/triton/lowering*.npz (gpu.libraries.triton's lowering kernel: the
    same source) in the patched interpreter on every recorded configuration and family, and compare each
    whole output's sha256 with the H200's.  Returns (runs, mismatching runs).  Needs TRITON_INTERPRET=1 set
    before Triton was imported (``python -m wgref.triton replay`` does that)."""
    import hashlib
    from pathlib import Path

    import triton.language as tl

    import gpu.libraries.triton as GT
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest
    from refmodel.verify.seeded_mma import matrix_codes, typed_matrix

    saved, GT._KERNEL_LOWERING = GT._KERNEL_LOWERING, None
    try:
        kernel = GT.lowering_matmul_kernel()
    finally:
        GT._KERNEL_LOWERING = saved
    d = Path(root or default_root()) / "triton"
    runs = bad = 0
    with interpret(numerics=numerics):
        for e in load_manifest(d)["entries"]:
            if e["kind"] != "triton_lowering":
                continue
            meta, arrays = e["meta"], load_arrays(d, e)
            for i, c in enumerate(meta["configs"]):
                ta, tb, prec, imp, acc = meta["options"][c["opt"]]
                for j, fam in enumerate(meta["families"]):
                    if families and fam not in families:
                        continue
                    ac, bc = matrix_codes(ta, tb, fam, meta["seed"], len(meta["families"]) * c["index"] + j,
                                          tuple(c.get("shape") or meta["shape"]))
                    a, b = typed_matrix(ac, ta), typed_matrix(bc, tb)
                    M, K = a.shape
                    N = b.shape[1]
                    out = np.zeros((M, N), np.float32)
                    kw = {} if c.get("stages") is None else {"num_stages": c["stages"]}
                    kernel[(M // c["BM"], N // c["BN"])](a, b, out, M, N, K, K, 1, N, 1, N, 1, BM=c["BM"], BN=c["BN"],
                                                         BK=c["BK"], PREC=prec, IMP=imp, OUT=tl.float32, ACC=acc,
                                                         PATTERN=c["pattern"], num_warps=c["warps"], **kw)
                    got = hashlib.sha256(np.ascontiguousarray(out.view(np.uint32), "<u4").tobytes()).digest()
                    ok = got == arrays["hw_sha256"][i, j].tobytes()
                    runs += 1
                    bad += not ok
                    if not ok:
                        log(f"{e['file']} {c['name']} {fam}: the interpreter's output differs from the H200's")
    log(f"{runs} interpreted runs of the recorded kernel, {runs - bad} bit-identical to the H200, {bad} differ")
    return runs, bad


#: Inductor's ``triton_helpers.maximum``/``minimum`` (torch/_inductor/runtime/triton_helpers.py) as the
#: interpreter runs them: ``where(a > b (a < b), or a float a that is NaN, a, b)``
_HELPERS = """
@triton.jit
def _wgref_maximum(a, b):
    mask = a > b
    if a.dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)


@triton.jit
def _wgref_minimum(a, b):
    mask = a < b
    if a.dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)


class triton_helpers:
    maximum = _wgref_maximum
    minimum = _wgref_minimum

"""


def template_kernel(code: str):
    """The Triton kernel of an Inductor template, from the source ``run_and_get_code`` returned, as a kernel of
    this (interpreting) process: the ``@triton.jit`` function's text, without Inductor's decorator and runtime
    imports (the template uses ``tl`` and ``triton_helpers.maximum``/``minimum`` only), written to a private
    module and imported."""
    import importlib.util
    import re
    import tempfile
    from pathlib import Path

    if not isinstance(code, str) or "@triton.jit" not in code:
        raise InputError("code must be Inductor's generated source, with its Triton template")
    i = code.index("@triton.jit")
    j = code.find("\'\'\'", i)
    src = code[i:j if j > 0 else None]
    name = re.search(r"def (\w+)\(", src)
    if not name:
        raise InputError("no kernel function after @triton.jit in the source")
    used = set(re.findall(r"triton_helpers\.(\w+)", src)) - {"maximum", "minimum"}
    if used:
        raise NotModelled(f"triton_helpers.{sorted(used)[0]} is not modelled by wgref's Triton interpreter "
                          "(maximum and minimum are)")
    d = Path(tempfile.mkdtemp(prefix="wgref_inductor_"))
    path = d / f"{name.group(1)}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + _HELPERS + src)
    spec = importlib.util.spec_from_file_location(name.group(1), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name.group(1))


def _launch(code: str) -> tuple[list[str], tuple[int, int, int], dict[str, tuple]]:
    """The template launch in the generated wrapper: the kernel's positional arguments (wrapper names), its
    grid, and each wrapper argument's (size, stride) from ``assert_size_stride``."""
    import re

    m = re.search(r"triton_tem_\w+\.run\(([^)]*)\)", code)
    if not m:
        raise InputError("the source has no launch of its template (`<kernel>.run(...)`)")
    parts = [p.strip() for p in m.group(1).split(",") if "=" not in p]
    grid = tuple(int(p) for p in parts[-3:])
    strides = {n: (tuple(ast_tuple(a)), tuple(ast_tuple(b)))
               for n, a, b in re.findall(r"assert_size_stride\((\w+), (\([^)]*\)), (\([^)]*\))\)", code)}
    return parts[:-3], grid, strides


def ast_tuple(text: str) -> tuple:
    import ast

    v = ast.literal_eval(text)
    return v if isinstance(v, tuple) else (v,)


def _memory(x: np.ndarray, size: tuple, stride: tuple) -> np.ndarray:
    """The flat buffer a tensor of logical value ``x`` (shape ``size``) occupies with ``stride``."""
    x = np.asarray(x)
    if tuple(x.shape) != tuple(size):
        raise InputError(f"the template was compiled for an input of shape {tuple(size)}, got {x.shape}")
    n = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if x.size else 0
    buf = np.zeros(n, x.dtype)
    idx = sum(np.arange(s).reshape((-1,) + (1,) * (len(size) - k - 1)) * st
              for k, (s, st) in enumerate(zip(size, stride)))
    buf[np.asarray(idx).reshape(-1)] = x.reshape(-1)
    return buf


def interpret_template(code: str, a: np.ndarray, b: np.ndarray, inputs: dict | None = None) -> np.ndarray:
    """Run an Inductor GEMM template (from its generated source) in the patched interpreter on ``a`` (M, K) and
    ``b`` (K, N) — (B, M, K) and (B, K, N) for bmm — and the epilogue's ``in_ptr`` arrays ``inputs`` (by the
    kernel's names, as :func:`refmodel.golden.inductor.template_output` takes them); returns the output.  The
    operands are laid out with the strides the call was compiled for.  Needs TRITON_INTERPRET=1 set before
    Triton was imported."""
    import ml_dtypes

    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    kernel = template_kernel(code)
    names, grid, strides = _launch(code)
    sig = [n for n, _ in t.signature]
    if len(names) != len(sig):
        raise InputError(f"the launch passes {len(names)} arguments, the kernel takes {len(sig)}")
    given = {"arg_A": np.asarray(a), "arg_B": np.asarray(b), **(inputs or {})}
    out_name = next(n for n in sig if n.startswith("out_ptr"))
    out_t = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}[t.out]
    size, stride = strides.get(names[sig.index("arg_A")], (a.shape, None))
    out_shape = tuple(np.shape(a)[:-1]) + (np.shape(b)[-1],)
    out = np.zeros(int(np.prod(out_shape)), out_t)
    args = []
    for n, w in zip(sig, names):
        if n == out_name:
            args.append(out)
            continue
        if n not in given:
            raise InputError(f"the template reads {n}, which was not given")
        x = np.asarray(given[n])
        if w in strides:
            x = _memory(x.reshape(strides[w][0]) if x.size == int(np.prod(strides[w][0])) else x, *strides[w])
        args.append(np.ascontiguousarray(x).reshape(-1))
    with interpret():
        kernel[grid](*args, num_warps=t.num_warps, num_stages=t.num_stages)
    return out.reshape(out_shape)


def interpret_scaled_mm(code: str, a: np.ndarray, b_nk: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray):
    """Run Inductor's ``_scaled_mm`` template (from its generated source) in the patched interpreter: ``a``
    (M, K) and ``b_nk`` (N, K) e4m3, row-wise ``scale_a`` (M, 1) and ``scale_b`` (1, N) or tensor-wise (one
    element each) float32 scales; returns the bf16 output.  Needs TRITON_INTERPRET=1 set before Triton was
    imported."""
    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    return interpret_template(code, a, np.asarray(b_nk).T, dict(zip(t.inputs, (np.asarray(scale_a, np.float32),
                                                                         np.asarray(scale_b, np.float32)))))


def replay_inductor(root=None, log=print) -> tuple[int, int]:
    """Every recorded Inductor call of fixtures/inductor (``_scaled_mm`` and the mm/addmm/bmm templates) run in
    the patched interpreter from its generated source, against the H200's digests."""
    import hashlib
    from pathlib import Path

    from refmodel.golden.inductor import parse_template
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest
    from refmodel.verify.replay_golden import inductor_codes, inductor_scaled_mm_args, inductor_template_args

    d = Path(root or default_root()) / "inductor"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        if e["kind"] not in ("inductor_calls", "inductor_templates"):
            continue
        meta, arrays = e["meta"], load_arrays(d, e)
        for i, (c, code) in enumerate(zip(meta["calls"], inductor_codes(meta, arrays, e["kind"]))):
            for j, fam in enumerate(meta["families"]):
                if e["kind"] == "inductor_calls":
                    a, b, sa, sb = inductor_scaled_mm_args(meta, c, j)
                    out = interpret_scaled_mm(code, a, b.T, sa, sb)
                else:
                    x = inductor_template_args(meta, c, j)
                    A, B = (x["a"], x["b"]) if c["op"] == "bmm" else (x["a"][0], x["b"][0])
                    inputs = {parse_template(code).inputs[0]: x["bias"]} if "bias" in x else None
                    out = interpret_template(code, A, B, inputs)
                w = "<u4" if out.dtype.itemsize == 4 else "<u2"
                ok = hashlib.sha256(np.ascontiguousarray(out.view(w[1:]), w).tobytes()).digest() == \
                    arrays["hw_sha256"][i, j].tobytes()
                runs += 1
                bad += not ok
                if not ok:
                    log(f"{c['name']} {fam}: the interpreter's output differs from the H200's")
    log(f"{runs} interpreted Inductor template calls, {runs - bad} bit-identical to the H200, {bad} differ")
    return runs, bad


def _elementwise_run(expr: str, x: np.ndarray, y: np.ndarray, block: int = 1 << 14) -> np.ndarray:
    """gpu.libraries.triton_sfu's kernel (``o = expr`` over x and y: the source the recordings ran) in the
    patched interpreter; returns o's words."""
    from gpu.libraries import triton_sfu

    kernel = triton_sfu.triton_kernel(expr)
    xs, ys = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(y, np.float32)
    o = np.zeros(xs.size, np.float32)
    with interpret():
        kernel[(-(-xs.size // block),)](xs, ys, o, xs.size, BLOCK=block)
    return o.view(np.uint32)


def replay_spellings(root=None, log=print) -> tuple[int, int]:
    """The Triton spellings of the special-function recordings (fixtures/sfu: ``tl.exp`` ... ``x / y``, each
    the very kernel run on the H200) in the patched interpreter on the recorded sample inputs, compared word
    for word with the H200's samples.  Returns (spellings, differing spellings)."""
    from pathlib import Path

    from refmodel.numerics.sfu.pairs import div_pairs
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

    d = Path(root or default_root()) / "sfu"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        meta = e["meta"]
        if e["kind"] == "sfu_spellings":
            names = [n for n in meta["spellings"] if n.startswith("triton:")]
            x = (np.arange(meta["sample_n"], dtype=np.uint64) * meta["sample_stride"] % (1 << 32)).astype(np.uint32)
            pairs = {n: (x, x) for n in names}
            prefix = "sample_"
        elif e["kind"] == "sfu_pairs":
            names = [n for n in meta["pair_names"] if n.startswith("triton:")]
            a, b = div_pairs(0, meta["pair_seed"])
            pairs = {n: (a, b) for n in names}
            prefix = "pairs_sample_"
        else:
            continue
        arrays = load_arrays(d, e)
        for n in names:
            want = arrays[prefix + _sfu_key(n)]
            x, y = pairs[n]
            got = _elementwise_run(n.split(":", 1)[1], x[:want.size].view(np.float32), y[:want.size].view(np.float32))
            differ = int(np.count_nonzero(got != want))
            runs += 1
            bad += differ > 0
            if differ:
                log(f"{n}: {differ} of {want.size} interpreted outputs differ from the H200's")
    log(f"{runs} recorded Triton spellings interpreted on their samples, {runs - bad} bit-identical, {bad} differ")
    return runs, bad


def _sfu_key(name: str) -> str:
    """The array-name form of a spelling (gpu.record.sfu's ``key``)."""
    return "".join(c if c.isalnum() else "_" for c in name)


def replay_elementwise(root=None, log=print) -> tuple[int, int]:
    """fixtures/triton/elementwise.npz's expressions (Triton's contracted multiply-adds), each run in the
    patched interpreter on the recorded 4M adversarial pairs, against the H200's whole-output sha256."""
    import hashlib
    from pathlib import Path

    from refmodel.numerics.sfu.pairs import div_pairs
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

    d = Path(root or default_root()) / "triton"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        if e["kind"] != "triton_elementwise":
            continue
        meta, arrays = e["meta"], load_arrays(d, e)
        a, b = div_pairs(meta["chunk"], meta["seed"])
        for i, expr in enumerate(meta["exprs"]):
            got = _elementwise_run(expr, a.view(np.float32), b.view(np.float32), block=1 << 16)
            ok = hashlib.sha256(np.ascontiguousarray(got, "<u4").tobytes()).digest() == arrays["hw_sha256"][i].tobytes()
            runs += 1
            bad += not ok
            if not ok:
                log(f"{expr}: the interpreter's output differs from the H200's")
    log(f"{runs} recorded Triton multiply-add kernels interpreted, {runs - bad} bit-identical, {bad} differ")
    return runs, bad


def _main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m wgref.triton", description="wgref's bit-exact Triton interpreter")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="run the recorded Triton kernels (the lowering matmul on every configuration "
                       "of fixtures/triton/lowering*.npz, the Inductor templates, the special-function and "
                       "multiply-add kernels) in the patched interpreter and compare with the H200's bits")
    r.add_argument("--family", action="append", default=None, help="only this input family (repeatable)")
    r.add_argument("--plain", action="store_true", help="Triton's own interpreter, unpatched (for contrast)")
    r.add_argument("--only", default=None, help="these replays only, comma-separated: lowering, inductor, spellings, "
                   "elementwise (default: all)")
    a = ap.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
    parts = ("lowering", "inductor", "spellings", "elementwise")
    only = a.only.split(",") if a.only else list(parts)
    if set(only) - set(parts):
        ap.error(f"--only takes {', '.join(parts)}, got {a.only!r}")
    bad = 0
    if "lowering" in only:
        bad += replay_fixtures(a.family, numerics=not a.plain)[1]
    if not a.plain and not a.family:
        for name, fn in (("inductor", replay_inductor), ("spellings", replay_spellings),
                         ("elementwise", replay_elementwise)):
            if name in only:
                bad += fn()[1]
    return 1 if bad else 0


if __name__ == "__main__":
    import sys

    sys.exit(_main())
