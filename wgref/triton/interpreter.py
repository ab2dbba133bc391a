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
