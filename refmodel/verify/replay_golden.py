"""Replayer of the golden-model fixtures of library kernels (fixtures/triton, kind
``triton_matmul``): recorded on the H200 from the library itself (``python -m gpu.record.triton``)."""

from __future__ import annotations

import hashlib
from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import bits_of
from .replay import Result, _count, meta_error, replayer

_FP = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "f16": np.float16,
       "bf16": ml_dtypes.bfloat16, "f32": np.float32}
_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@replayer("triton_matmul")
def replay_triton(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """D[rows, cols] of the recorded Triton matmul against refmodel.golden.triton_matmul on the kept
    A rows and B columns (rows and columns of a matmul are independent)."""
    from ..golden import triton_matmul

    a = arrays["a"].view(_FP[meta["dtype"]])
    b = arrays["b"].view(_FP[meta["dtype"]])
    if a.shape[1] != b.shape[0] or arrays["d"].shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"triton fixture: a {a.shape}, b {b.shape} and d {arrays['d'].shape} do not match")
    d = triton_matmul(a, b, block_k=meta["BK"], block_m=meta["BM"], block_n=meta["BN"], num_warps=meta["warps"],
                      input_precision=meta["input_precision"] or "tf32",
                      max_num_imprecise_acc=meta["imp"] if meta["dtype"] in ("e4m3", "e5m2") else 0, out_dtype=_OUT[meta["out"]],
                      acc_dtype=_OUT[meta.get("acc", "f32")])
    return _count(bits_of(d), arrays["d"], f"triton {meta['dtype']} BK={meta['BK']}", {})


def _digest_rows(arrays: dict[str, np.ndarray], n: int, what: str, unit: str = "jobs", error=ValueError):
    """The (port, hardware) sha256 digests of a device_model fixture, one row of 32 bytes per item."""
    port, hw = arrays["port_sha256"], arrays["hw_sha256"]
    if port.shape != (n, 32) or hw.shape != port.shape:
        raise error(f"{what}: {n} {unit} but digests {port.shape} and {hw.shape}")
    return port, hw


def _sample_step(total: Result, full: bool, n: int, unit: str) -> int:
    """Every item (full) or every 8th, noted in ``total``'s scope."""
    if full:
        return 1
    total.complete, total.scope = False, f"every 8th of {n} {unit}"
    return 8


def _add_digests(total: Result, what: str, size: int, got: bytes, port_row, hw_row, same: bool = True) -> None:
    """refmodel's digest ``got`` against the GPU port's and the hardware's: a differing one counts all
    ``size`` outputs as mismatches."""
    for label, want in (("GPU port", port_row), ("hardware", hw_row)):
        ok = same and got == want.tobytes()
        total.add(Result(size, 0 if ok else size, [] if ok else [f"{what} ({label}): refmodel's digest differs"]))


@replayer("device_model")
def replay_device_model(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The GPU port of the accumulator and the hardware, recorded on the H200 as sha256 digests of
    their outputs on the GPU fuzzer's inputs (every dense form, every family), against the CPU
    refmodel on the same inputs rebuilt by refmodel.verify.seeded.  A form whose digest differs
    counts all its outputs as mismatches."""
    from ..numerics.wgmma import wgmma
    from ..wgmma_forms import parse_wgmma
    from .seeded import generate, typed, variant

    instrs = list(meta.get("instrs") or [])
    port, hw = _digest_rows(arrays, len(instrs), "device_model fixture", "forms")
    total = Result(0, 0)
    step = _sample_step(total, full, len(instrs), "forms")
    for i, instr in enumerate(instrs):
        if i % step:
            continue
        form = parse_wgmma(instr)
        scale_d, imm = variant(i, form.has_imm_scale)
        dts = (form.dtype_a, form.dtype_b, form.dtype_d)
        a, b, c = typed(dts, generate(dts, form.k, form.n, meta["seed"], i, meta["tiles"]))
        d = wgmma(instr, a, b, c, scale_d=scale_d, imm_scale_a=imm[0], imm_scale_b=imm[1])
        raw = np.ascontiguousarray(bits_of(d).reshape(d.shape[0], -1).astype(np.uint32), dtype="<u4")
        _add_digests(total, instr, raw.size, hashlib.sha256(raw.tobytes()).digest(), port[i], hw[i])
    return total



@replayer("device_model_jobs")
def replay_device_model_jobs(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The GPU engine's dense jobs beyond single SS wgmmas (RS operands, chains of 2..128 wgmmas with
    scale-d and imm scales; :func:`refmodel.verify.seeded.dense_jobs`), recorded on the H200 as
    sha256 digests of the GPU port's and the hardware's outputs, against the CPU refmodel's chain
    (:func:`refmodel.verify.jobs.model_chain`) on the inputs rebuilt by refmodel.verify.seeded."""
    from ..numerics.wgmma import wgmma
    from ..wgmma_forms import parse_wgmma
    from .jobs import Job, model_chain
    from .seeded import generate, typed

    jobs = list(meta.get("jobs") or [])
    port, hw = _digest_rows(arrays, len(jobs), "device_model_jobs fixture")
    total = Result(0, 0)
    step = _sample_step(total, full, len(jobs), "jobs")
    for j, jb in enumerate(jobs):
        if j % step:
            continue
        form = parse_wgmma(jb["instr"])
        dts = (form.dtype_a, form.dtype_b, form.dtype_d)
        a, b, c = typed(dts, generate(dts, form.k * jb["chain"], form.n, meta["seed"], j, meta["tiles"]))
        job = Job(jb["instr"], rs=jb["rs"], scale_d=jb["scale_d"], imm_scale_a=jb["imm"][0],
                  imm_scale_b=jb["imm"][1], chain=jb["chain"])
        d = model_chain(wgmma, job, a, b, c)
        raw = np.ascontiguousarray(bits_of(d).reshape(d.shape[0], -1).astype(np.uint32), dtype="<u4")
        what = f"{jb['instr']} {'rs' if jb['rs'] else 'ss'} chain {jb['chain']}"
        _add_digests(total, what, raw.size, hashlib.sha256(raw.tobytes()).digest(), port[j], hw[j])
    return total


def _library_inputs(c: dict[str, Any]):
    """The recorded call's inputs rebuilt from its seed, checked against the recorded sha256."""
    from .fixtures import FixtureError
    from .seeded import library_matrices, matrix_sha256

    a, b = library_matrices(c["seed"], c["dtype"], c["M"], c["N"], c["K"], exp_range=tuple(c["exp_range"]),
                            lim=c["lim"])
    if (matrix_sha256(a), matrix_sha256(b)) != (c["a_sha256"], c["b_sha256"]):
        raise FixtureError(f"{c['name']}: the inputs rebuilt from seed {c['seed']} are not the recorded ones "
                           "(sha256 differs: numpy's Generator stream changed?)", short="inputs not reproducible")
    return a, b


def _sampled(arrays: dict[str, np.ndarray], c: dict[str, Any], k: int):
    d = arrays[c["array"]]
    rows, cols = arrays[f"rows{k}"], arrays[f"cols{k}"]
    if d.shape != (rows.size, cols.size):
        raise ValueError(f"{c['name']}: output sample {d.shape} does not match {rows.size} rows x {cols.size} columns")
    return d, rows, cols


@replayer("cublas_calls")
def replay_cublas(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """cuBLAS calls recorded on the H200 through torch (torch.matmul bf16/f16, torch._scaled_mm e4m3)
    against refmodel.golden.cublas_matmul under cublas_schedule(kernels, M, N, K), on the kept rows and
    columns (all K)."""
    from ..golden import cublas_matmul, cublas_schedule

    total = Result(0, 0)
    out = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32"}
    for k, c in enumerate(meta["calls"]):
        a, b = _library_inputs(c)
        d, rows, cols = _sampled(arrays, c, k)
        got = cublas_matmul(a[rows], b[:, cols], **cublas_schedule(c["kernels"], c["M"], c["N"], c["K"]).kwargs(),
                            out_dtype=out[c["out"]])
        total.add(_count(bits_of(got), d, c["name"], {}))
    return total


@replayer("cutlass_gemm")
def replay_cutlass(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """CUTLASS CuTe-DSL Hopper GEMM examples recorded on the H200 against
    refmodel.golden.cutlass_dense_gemm, on the kept rows and columns (all K)."""
    from ..golden import cutlass_dense_gemm

    total = Result(0, 0)
    for k, c in enumerate(meta["configs"]):
        a, b = _library_inputs(c)
        d, rows, cols = _sampled(arrays, c, k)
        got = cutlass_dense_gemm(a[rows], b[:, cols], acc_dtype=c["acc"], out_dtype=_OUT[c["out"]],
                                 mma_promotion_interval=c["mma_promotion_interval"])
        total.add(_count(bits_of(got), d, c["name"], {}))
    return total


@replayer("device_model_sparse")
def replay_device_model_sparse(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The sparse GPU engine (gpu.kernels.sparse_runner: inputs generated on the GPU, the GPU port of the
    model, the hardware) on every sparse form (:func:`refmodel.verify.seeded_sparse.sparse_jobs_plan`),
    recorded on the H200 as sha256 digests of the port's and the hardware's outputs, against
    refmodel.numerics.sparse.wgmma_sp on the inputs rebuilt by refmodel.verify.seeded_sparse (job
    ``j``: batch ``j`` of the seed).  A job whose digest differs counts all its outputs as mismatches."""
    from .seeded_sparse import digest, generate_sparse, model_bits

    jobs = list(meta.get("jobs") or [])
    port, hw = _digest_rows(arrays, len(jobs), "device_model_sparse fixture")
    total = Result(0, 0)
    step = _sample_step(total, full, len(jobs), "jobs")
    for j, jb in enumerate(jobs):
        if j % step:
            continue
        raw = model_bits(jb, generate_sparse(jb, meta["seed"], j, meta["tiles"]))
        what = (f"{jb['instr']} {'rs' if jb['rs'] else 'ss'} sp-sel {jb['sp_sel']} sd={int(jb['scale_d'])} "
                f"imm={jb['imm_scale_a']},{jb['imm_scale_b']}")
        _add_digests(total, what, raw.size, digest(raw), port[j], hw[j])
    return total


@replayer("device_model_layout")
def replay_device_model_layout(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The GPU layout engine (gpu/fuzz/gpu_layout.py: wgmma through seeded random descriptors, the
    GPU port of the descriptor addressing and of the accumulator) and the hardware, recorded on the
    H200 as sha256 digests of the D registers of each job's defined cases
    (:func:`refmodel.verify.seeded_layout.layout_jobs_plan`), against the CPU refmodel
    (:func:`refmodel.verify.replay_layouts.wgmma_model`) on the cases rebuilt by
    refmodel.verify.seeded_layout at the recorded shared base.  The cases refmodel refuses are
    skipped and must be exactly the ones the port flagged undefined (each job's ``undefined``).
    A job whose digest (or undefined set) differs counts all its outputs as mismatches."""
    from .replay import check_output_arrays, meta_error

    jobs = list(meta.get("jobs") or [])
    check_output_arrays(arrays, ["port_sha256", "hw_sha256"], pattern=r"(port|hw)_sha256")
    if not jobs:
        raise meta_error("device_model_layout fixture: 0 jobs")
    port, hw = _digest_rows(arrays, len(jobs), "device_model_layout fixture", error=meta_error)
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(1)   # one small wgmma a call: more threads only add overhead (and spin under load)
    try:
        return _replay_layout_jobs(meta, jobs, port, hw, full)
    finally:
        numba.set_num_threads(threads)


def _replay_layout_jobs(meta: dict[str, Any], jobs: list, port: np.ndarray, hw: np.ndarray, full: bool) -> Result:
    from .replay_layouts import wgmma_model_batch
    from .seeded_layout import layout_cases

    total = Result(0, 0)
    step = 1 if full else 8
    skipped = 0
    for j, jb in enumerate(jobs):
        if j % step:
            continue
        v = tuple(jb["variant"])
        C, base = int(jb["cases"]), int(jb["base"])
        x = layout_cases(v, meta["seed"], jb["batch"], C, size=meta["image"])
        d_all, errors = wgmma_model_batch(v, x, base)
        refused = sorted(errors)
        skipped += len(refused)
        d = d_all[np.setdiff1d(np.arange(C), refused)]
        raw = np.ascontiguousarray(d.astype(np.uint32), dtype="<u4")
        got = hashlib.sha256(raw.tobytes()).digest()
        what = f"job {j} ({v[0]} rs={int(v[1])} trans={v[2]},{v[3]} imm={v[4]},{v[5]} batch {jb['batch']})"
        flagged = [int(i) for i in jb["undefined"]]
        same = refused == flagged
        if not same:
            total.details.append(f"{what}: refmodel refuses cases {refused[:6]} ({len(refused)}), the port "
                                 f"flagged {flagged[:6]} ({len(flagged)}) undefined")
        _add_digests(total, what, raw.size, got, port[j], hw[j], same)
    checked = len(range(0, len(jobs), step))
    total.complete = full
    total.scope = (f"{'' if full else f'every {step}th: '}{checked} of {len(jobs)} jobs, {skipped} cases "
                   "refmodel refuses skipped")
    return total


@replayer("triton_lowering")
def replay_triton_lowering(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The Triton lowering recordings (fixtures/triton/lowering.npz, gpu.record.triton_lowering): every
    configuration's whole (M, N) output in every family, as sha256 digests, and a corner of each raw,
    against refmodel.golden.triton_matmul given the kernel's configuration (BLOCK_M/N/K, warps, pattern)."""
    from ..golden import triton_matmul
    from .seeded_mma import matrix_codes, typed_matrix

    cfgs, fams, opts = list(meta.get("configs") or []), list(meta.get("families") or []), meta.get("options") or {}
    shape, corner = tuple(meta.get("shape") or ()), int(meta.get("corner", 0))
    hw, cor = arrays.get("hw_sha256"), arrays.get("corner")
    if set(arrays) != {"hw_sha256", "corner"} or len(shape) != 3 or hw is None or cor is None or \
            hw.shape != (len(cfgs), len(fams), 32) or cor.shape != (len(cfgs), len(fams), corner, corner):
        raise meta_error(f"a triton_lowering fixture holds hw_sha256 ({len(cfgs)}, {len(fams)}, 32) and corner "
                         f"({len(cfgs)}, {len(fams)}, {corner}, {corner}) for its meta; got {sorted(arrays)}")
    total = Result(0, 0)
    for i, c in enumerate(cfgs):
        if c["opt"] not in opts:
            raise meta_error(f"configuration {c.get('name')} names option {c['opt']!r}, which meta does not define")
        ta, tb, prec, imp, acc = opts[c["opt"]]
        for j, fam in enumerate(fams):
            ac, bc = matrix_codes(ta, tb, fam, int(meta["seed"]), len(fams) * int(c["index"]) + j,
                                  tuple(c.get("shape") or shape))
            with np.errstate(all="ignore"):
                d = triton_matmul(typed_matrix(ac, ta), typed_matrix(bc, tb), block_k=c["BK"], block_m=c["BM"],
                                  block_n=c["BN"], num_warps=c["warps"], num_stages=c.get("stages"),
                                  pattern=c["pattern"], input_precision="tf32" if prec == "none" else prec,
                                  max_num_imprecise_acc=None if imp == -1 else imp,
                                  acc_dtype=np.float16 if acc == "f16" else np.float32, out_dtype=_OUT[meta["out"]])
            bits = np.ascontiguousarray(bits_of(d), "<u4")
            total.add(_count(bits[:corner, :corner], cor[i, j], f"{c['name']} {fam} corner", {}))
            size = bits.size - corner * corner
            ok = hashlib.sha256(bits.tobytes()).digest() == hw[i, j].tobytes()
            total.add(Result(size, 0 if ok else size, [] if ok else [f"{c['name']} {fam}: refmodel's digest differs"]))
    return total


def inductor_codes(meta: dict[str, Any], arrays: dict[str, np.ndarray], kind: str) -> list[str]:
    """Each call's generated source, after checking the arrays an Inductor fixture holds against its meta."""
    calls, fams = list(meta.get("calls") or []), list(meta.get("families") or [])
    want_keys = {"hw_sha256", "code"} | {f"corner{i}" for i in range(len(calls))}
    if set(arrays) != want_keys or arrays["hw_sha256"].shape != (len(calls), len(fams), 32) or \
            arrays["code"].size != sum(int(c["code_bytes"]) for c in calls):
        raise meta_error(f"an {kind} fixture holds {sorted(want_keys)} for its {len(calls)} calls; got {sorted(arrays)}")
    out, off = [], 0
    for c in calls:
        out.append(arrays["code"][off:off + int(c["code_bytes"])].tobytes().decode())
        off += int(c["code_bytes"])
    return out


def _compare_call(d: np.ndarray, arrays, i: int, j: int, corner: int, label: str) -> Result:
    """A whole output ``d`` (little-endian words; batched: the first batch's corner) against call i, family j."""
    total = Result(0, 0)
    first = d.reshape(-1, d.shape[-2], d.shape[-1])[0]
    total.add(_count(first[:corner, :corner], arrays[f"corner{i}"][j], f"{label} corner", {}))
    size = d.size - corner * corner
    ok = hashlib.sha256(np.ascontiguousarray(d).tobytes()).digest() == arrays["hw_sha256"][i, j].tobytes()
    total.add(Result(size, 0 if ok else size, [] if ok else [f"{label}: refmodel's digest differs"]))
    return total


@replayer("inductor_calls")
def replay_inductor_calls(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """torch.compile max-autotune ``_scaled_mm`` calls (fixtures/inductor, gpu.record.inductor): each call's
    generated source (kept in the fixture) through refmodel.golden.inductor.scaled_mm on the rebuilt inputs,
    against the H200's whole-output digests and a 16 x 16 corner.  Row-wise or tensor-wise scales."""
    from ..golden.inductor import scaled_mm

    codes = inductor_codes(meta, arrays, "inductor_calls")
    corner = int(meta.get("corner", 0))
    total = Result(0, 0)
    for i, (c, code) in enumerate(zip(meta["calls"], codes)):
        for j, fam in enumerate(meta["families"]):
            d = np.ascontiguousarray(bits_of(scaled_mm(*inductor_scaled_mm_args(meta, c, j), code=code)), "<u2")
            total.add(_compare_call(d, arrays, i, j, corner, f"{c['name']} {fam}"))
    return total


def inductor_scaled_mm_args(meta: dict[str, Any], c: dict[str, Any], j: int):
    """(a (M, K), b (K, N) e4m3, scale_a, scale_b float32) of ``_scaled_mm`` call ``c`` (an inductor_calls meta
    entry), family ``j``: scales 0-d (tensor-wise) or (M, 1) and (1, N) (row-wise)."""
    from .seeded_mma import matrix_codes, typed_matrix

    M, K, N = c["shape"]
    fams = meta["families"]
    ac, bc = matrix_codes("e4m3", "e4m3", fams[j], int(meta["seed"]), len(fams) * int(c["index"]) + j, (M, K, N))
    tensor = c.get("scaling", "row") == "tensor"
    sa = np.asarray(c["scale_a"], np.float32).reshape(() if tensor else (M, 1))
    sb = np.asarray(c["scale_b"], np.float32).reshape(() if tensor else (1, N))
    return typed_matrix(ac, "e4m3"), typed_matrix(bc, "e4m3"), sa, sb


def inductor_template_args(meta: dict[str, Any], c: dict[str, Any], j: int) -> dict[str, np.ndarray]:
    """The typed operands of template call ``c`` (an inductor_templates meta entry), family ``j``: ``a``, ``b``
    ((B, M, K) and (B, K, N)) and for addmm ``bias`` (N,)."""
    from .seeded_mma import batch_codes, typed_matrix

    B, M, K, N = c["shape"]
    codes = batch_codes(c["dtype"], meta["families"][j], int(meta["seed"]), int(c["key_base"]) + j, (B, M, K, N),
                        bias=c["op"] == "addmm")
    out = {"a": typed_matrix(codes["a"].reshape(B * M, K), c["dtype"]).reshape(B, M, K),
           "b": typed_matrix(codes["b"].reshape(B * K, N), c["dtype"]).reshape(B, K, N)}
    if "bias" in codes:
        out["bias"] = typed_matrix(codes["bias"][None], c["dtype"])[0]
    return out


@replayer("inductor_templates")
def replay_inductor_templates(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """torch.compile max-autotune mm / addmm / bmm (and fused relu) templates (fixtures/inductor/templates.npz):
    each call's generated source through refmodel.golden.inductor on the rebuilt inputs, against the H200's
    whole-output digests and a 16 x 16 corner."""
    from ..golden import inductor as ind

    codes = inductor_codes(meta, arrays, "inductor_templates")
    corner = int(meta.get("corner", 0))
    total = Result(0, 0)
    for i, (c, code) in enumerate(zip(meta["calls"], codes)):
        for j, fam in enumerate(meta["families"]):
            x = inductor_template_args(meta, c, j)
            if c["op"] == "bmm":
                d = ind.bmm(x["a"], x["b"], code=code)
            elif c["op"] == "addmm":
                d = ind.addmm(x["bias"], x["a"][0], x["b"][0], code=code)
            elif c["op"] in ("mm", "mm_relu"):
                d = ind.mm(x["a"][0], x["b"][0], code=code)
            else:
                raise meta_error(f"call {c['name']}: op {c['op']!r} is not an Inductor template this replayer knows")
            w = "<u4" if c["dtype"] == "f32" else "<u2"
            total.add(_compare_call(np.ascontiguousarray(bits_of(d), w), arrays, i, j, corner, f"{c['name']} {fam}"))
    return total


@replayer("triton_elementwise")
def replay_triton_elementwise(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Triton float32 multiply-add expressions recorded on the GPU (fixtures/triton/elementwise.npz,
    gpu.record.triton_fma): refmodel.golden.triton_elementwise on the rebuilt adversarial pairs, against the
    whole output's sha256 and the first ``sample`` words."""
    from ..golden.triton_elementwise import elementwise
    from ..numerics.sfu.pairs import div_pairs

    exprs, n, k = list(meta.get("exprs") or []), int(meta["n"]), int(meta["sample"])
    if set(arrays) != {"sample", "hw_sha256"} or arrays["sample"].shape != (len(exprs), k) or \
            arrays["hw_sha256"].shape != (len(exprs), 32):
        raise meta_error(f"a triton_elementwise fixture holds 'sample' ({len(exprs)}, {k}) and 'hw_sha256' "
                         f"({len(exprs)}, 32); got {sorted(arrays)}")
    a, b = div_pairs(int(meta["chunk"]), int(meta["seed"]))
    if a.size != n:
        raise meta_error(f"div_pairs gives {a.size} pairs, the fixture recorded {n}")
    x, y = a.view(np.float32), b.view(np.float32)
    total = Result(0, 0)
    for i, e in enumerate(exprs):
        o = np.ascontiguousarray(elementwise(e, x, y).view(np.uint32), "<u4")
        total.add(_count(o[:k], arrays["sample"][i], e, {"x": a[:k], "y": b[:k]}))
        ok = hashlib.sha256(o.tobytes()).digest() == arrays["hw_sha256"][i].tobytes()
        total.add(Result(n - k, 0 if ok else n - k, [] if ok else [f"{e}: refmodel's digest differs"]))
    return total
