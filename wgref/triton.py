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

* ``tl.exp``, ``tl.exp2``, ``/``, ``tl.sqrt``, ``tl.rsqrt`` (and ``div_rn``, ``sqrt_rn``) are what Triton 3.6's
  PTX for sm_90 says (:data:`ELEMENTWISE_PTX`: ``mul.f32`` by log2(e) then ``ex2.approx.f32``, ``div.full.f32``,
  ``sqrt.approx.ftz.f32`` ...) through :func:`refmodel.sfu`'s bit-exact instruction models, and a float32
  multiply feeding an add is the ``fma.rn.f32`` Triton's compiler contracts it to; these warn once
  (:class:`NotRecordedWarning`): no kernel using them was recorded on the H200 yet;

and everything it cannot model exactly is refused with one sentence naming it (:class:`NotModelled`):
``tl.log``/``log2``/``sin``/``cos``/``erf`` (libdevice sequences), float min/max and ``%``, f16 multiply-adds,
FP8 casts in the kernel body, f64 and integer dots.

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
        """x * y + z (or - z, or z - x * y) with the product unused before: Triton's compiler contracts it to
        fma.rn (seen in its PTX); float32 only."""
        from refmodel.numerics.promotion import fma_f32_array

        for m, other, sign_m, sign_o in ((lhs, rhs, 1, 1 if name == "add" else -1), (rhs, lhs, 1 if name == "add" else -1, 1)):
            if isinstance(m, PendingMul) and m._data is None:
                if m.dtype != tl.float32:
                    raise NotModelled(f"a {m.dtype} multiply feeding an add (contracted to an FMA by Triton's "
                                      f"compiler) is not modelled (float32 is)")
                x, y = m._xy
                xs = x.data if sign_m == 1 else -x.data
                zs = other.data if sign_o == 1 else -other.data
                _note("a float32 multiply feeding an add", "fma.rn.f32 (the contraction in Triton 3.6's PTX)")
                return TensorHandle(fma_f32_array(xs, y.data, zs), tl.float32)
        return None

    def sfu_op(what, forms, pre=None):
        def op(self, *args):
            import refmodel

            t = args[0].dtype.scalar
            if t != tl.float32:
                raise NotModelled(f"{what} on {t} is not modelled (float32 is)")
            xs = [np.ascontiguousarray(a.data, np.float32) for a in args]
            if pre is not None:
                xs[0] = pre(xs[0])
            _note(what, " then ".join(forms))
            r = refmodel.sfu(forms[-1], *xs)
            return TensorHandle(np.asarray(r, np.float32), tl.float32)
        return op

    def rn_op(what, fn):
        def op(self, *args):
            t = args[0].dtype.scalar
            if t != tl.float32:
                raise NotModelled(f"{what} on {t} is not modelled (float32 is)")
            with np.errstate(all="ignore"):
                return TensorHandle(_canon(fn(*(a.data for a in args)).astype(np.float32)), tl.float32)
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
    patch(B, "create_fadd", float_binary(np.add, "add"))
    patch(B, "create_fsub", float_binary(np.subtract, "sub"))
    patch(B, "create_fmul", float_binary(np.multiply, "mul"))
    patch(B, "create_fma", create_fma)
    patch(B, "cast_impl", cast)
    patch(B, "create_fp_to_fp", fp_to_fp)
    log2e = np.float32(np.array([0x3FB8AA3B], np.uint32).view(np.float32)[0])
    # Triton 3.6's PTX on sm_90 (ELEMENTWISE_PTX; tests/test_triton_interpret.py compiles and checks it)
    patch(B, "create_exp", sfu_op("tl.exp", ("mul.f32 by log2(e)", "ex2.approx.f32"),
                                  pre=lambda x: (x * log2e).astype(np.float32)))
    patch(B, "create_exp2", sfu_op("tl.exp2", ("ex2.approx.ftz.f32",)))
    patch(B, "create_fdiv", sfu_op("float '/'", ("div.full.f32",)))
    patch(B, "create_sqrt", sfu_op("tl.sqrt", ("sqrt.approx.ftz.f32",)))
    patch(B, "create_rsqrt", sfu_op("tl.rsqrt", ("rsqrt.approx.ftz.f32",)))
    patch(B, "create_precise_divf", rn_op("tl.math.div_rn", np.divide))
    patch(B, "create_precise_sqrt", rn_op("tl.sqrt_rn", np.sqrt))
    for name, what in (("create_frem", "float %"),
                       ("create_log", "tl.log (a libdevice sequence)"), ("create_log2", "tl.log2 (a libdevice sequence)"),
                       ("create_sin", "tl.sin"), ("create_cos", "tl.cos"), ("create_erf", "tl.erf"),
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

#: how Triton 3.6 lowers float32 elementwise ops on sm_90 (read from its PTX; the interpreter runs these)
ELEMENTWISE_PTX = {
    "tl.exp(x)": ("mul.f32", "ex2.approx.f32"), "tl.exp2(x)": ("ex2.approx.ftz.f32",), "x / z": ("div.full.f32",),
    "tl.sqrt(x)": ("sqrt.approx.ftz.f32",), "tl.rsqrt(x)": ("rsqrt.approx.ftz.f32",),
    "tl.math.div_rn(x, z)": ("div.rn.f32",), "tl.sqrt_rn(x)": ("sqrt.rn.f32",), "x * z + x": ("fma.rn.f32",),
    "x * z - x": ("fma.rn.f32",), "x - x * z": ("fma.rn.f32",),
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


def template_kernel(code: str):
    """The Triton kernel of an Inductor template, from the source ``run_and_get_code`` returned, as a kernel of
    this (interpreting) process: the ``@triton.jit`` function's text, without Inductor's decorator and runtime
    imports (the template uses ``tl`` only), written to a private module and imported."""
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
    d = Path(tempfile.mkdtemp(prefix="wgref_inductor_"))
    path = d / f"{name.group(1)}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + src)
    spec = importlib.util.spec_from_file_location(name.group(1), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name.group(1))


def interpret_scaled_mm(code: str, a: np.ndarray, b_nk: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray):
    """Run Inductor's ``_scaled_mm`` template (from its generated source) in the patched interpreter: ``a``
    (M, K) and ``b_nk`` (N, K) e4m3, row-wise ``scale_a`` (M, 1) and ``scale_b`` (1, N) float32; returns the
    bf16 output.  Needs TRITON_INTERPRET=1 set before Triton was imported."""
    import ml_dtypes

    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    kernel = template_kernel(code)
    M, N = a.shape[0], b_nk.shape[0]
    out = np.zeros((M, N), ml_dtypes.bfloat16)
    grid = (-(-M // t.block_m) * -(-N // t.block_n), 1, 1)
    with interpret():
        kernel[grid](np.ascontiguousarray(a), np.ascontiguousarray(b_nk), np.ascontiguousarray(scale_a, np.float32),
                     np.ascontiguousarray(scale_b, np.float32), out, num_warps=t.num_warps, num_stages=t.num_stages)
    return out


def replay_inductor(root=None, log=print) -> tuple[int, int]:
    """:func:`interpret_scaled_mm` on every recorded call of fixtures/inductor, against the H200's digests."""
    import hashlib
    from pathlib import Path

    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest
    from refmodel.verify.seeded_mma import matrix_codes, typed_matrix

    d = Path(root or default_root()) / "inductor"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        if e["kind"] != "inductor_calls":
            continue
        meta, arrays = e["meta"], load_arrays(d, e)
        fams, off = meta["families"], 0
        for i, c in enumerate(meta["calls"]):
            code = arrays["code"][off:off + c["code_bytes"]].tobytes().decode()
            off += c["code_bytes"]
            M, K, N = c["shape"]
            for j, fam in enumerate(fams):
                ac, bc = matrix_codes("e4m3", "e4m3", fam, meta["seed"], len(fams) * c["index"] + j, (M, K, N))
                a, b = typed_matrix(ac, "e4m3"), typed_matrix(bc, "e4m3")
                out = interpret_scaled_mm(code, a, np.ascontiguousarray(b.T),
                                          np.asarray(c["scale_a"], np.float32).reshape(M, 1),
                                          np.asarray(c["scale_b"], np.float32).reshape(1, N))
                ok = hashlib.sha256(np.ascontiguousarray(out.view(np.uint16), "<u2").tobytes()).digest() == \
                    arrays["hw_sha256"][i, j].tobytes()
                runs += 1
                bad += not ok
                if not ok:
                    log(f"{c['name']} {fam}: the interpreter's output differs from the H200's")
    log(f"{runs} interpreted Inductor template calls, {runs - bad} bit-identical to the H200, {bad} differ")
    return runs, bad


def _main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m wgref.triton", description="wgref's bit-exact Triton interpreter")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="run the recorded Triton kernel in the patched interpreter on every "
                       "configuration of fixtures/triton/lowering*.npz and compare with the H200's bits")
    r.add_argument("--family", action="append", default=None, help="only this input family (repeatable)")
    r.add_argument("--plain", action="store_true", help="Triton's own interpreter, unpatched (for contrast)")
    a = ap.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
    runs, bad = replay_fixtures(a.family, numerics=not a.plain)
    if not a.plain and not a.family:
        r2, b2 = replay_inductor()
        bad += b2
    return 1 if bad else 0


if __name__ == "__main__":
    import sys

    sys.exit(_main())
