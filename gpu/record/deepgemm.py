"""Record DeepGEMM's FP8 GEMM (``deep_gemm.fp8_gemm_nt``) on the H200, for refmodel's DeepGEMM model.

    python -m gpu.record.deepgemm --build [--dg DIR]      # GPU machine: build DeepGEMM's extension in place
    python -m gpu.record.deepgemm --explore OUT [--dg DIR] # GPU: run every shape, save inputs/scales/outputs
    python -m gpu.record.deepgemm --compare OUT            # CPU: compare OUT with refmodel.numerics.gemm

DeepGEMM's build, toolchain, import and call are gpu.libraries.deepgemm's (where DeepGEMM comes from,
how it is built, what the call takes).  Its kernel (``sm90_fp8_gemm_1d2d_impl``): per 128 of K,
``BLOCK_K / 32 = 4`` SS wgmma ``m64nNk32.f32.e4m3.e4m3`` chained in the tensor core (the first with
scale-d = 0); then ``final_accum += (scale_a * scale_b) * accum`` in float32 on the CUDA cores (FMUL,
then FFMA with nvcc's default -fmad=true); at the end ``__float22bfloat162_rn`` and a TMA store.
refmodel's ``refmodel.numerics.gemm.gemm(..., promote_every=4, promote_op="fma", out_dtype="bf16")``
is the model; ``--compare`` checks it against what was recorded.

Inputs are bf16 matrices drawn on the host with numpy (``refmodel.verify.seeded.library_matrices``,
seed and exponent range per shape, sha256 kept); DeepGEMM's own cast helpers make the FP8 codes and
scales on the GPU, and both are recorded as fed (the CPU never redoes the cast).

Files written under OUT: ``deepgemm.npz`` (per shape ``NAME.a`` (M, K) and ``NAME.b`` (N, K) FP8
codes uint8, ``NAME.sfa`` (M, K/128) and ``NAME.sfb`` (ceil(N/128), K/128) float32, ``NAME.d`` (M, N)
bf16 bits uint16), ``deepgemm.json`` (shapes, seeds, sha256, versions, DeepGEMM's printed
configuration / JIT log, PTX / SASS instruction counts, quick numpy checks), ``deepgemm_jit.tar.gz``
(every JIT kernel's ``kernel.cu``, PTX, cubin and SASS), ``deepgemm_stdout.log`` (what DeepGEMM's C++
printed: configurations, nvcc commands, launches).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from gpu.libraries.deepgemm import (CASTS, CUTLASS_COMMIT, DG_COMMIT, DG_DIR, DG_REPO, FMT_COMMIT, FUNCTION,
                                    DeepGEMM, build, capture_fd1, cuda_home, cuda_major, jit_env, nvcc_version,
                                    preload, toolchain, versions)

# (name, M, N, K, seed, exp_range): a (M, K) and b (K, N) bf16 from
# library_matrices(seed, "bf16", M, N, K, exp_range=exp_range); DeepGEMM gets b.T (N, K).
# exp_range (0, 1): plain standard normals (DeepGEMM's own tests use torch.randn); (-3, 4): each
# element times 2**e, e in -3..3, so the per-row/per-block casts also make small and subnormal e4m3.
# Ordered by value: a device call that runs out of time keeps the earlier ones.
SHAPES = [
    ("dg_128x256x1024", 128, 256, 1024, 9100, (0, 1)),
    ("dg_256x512x2048_wide", 256, 512, 2048, 9101, (-3, 4)),
    ("dg_64x128x4096", 64, 128, 4096, 9102, (0, 1)),
    ("dg_128x576x7168", 128, 576, 7168, 9103, (0, 1)),        # DeepSeek's (576, 7168); N % 128 = 64
    ("dg_100x384x1536_wide", 100, 384, 1536, 9104, (-3, 4)),  # M not a multiple of 64
]


def inputs(seed: int, m: int, n: int, k: int, exp_range) -> tuple[np.ndarray, np.ndarray]:
    """a (M, K) and b (K, N) bf16 (ml_dtypes) of one shape."""
    from refmodel.verify.seeded import library_matrices

    return library_matrices(seed, "bf16", m, n, k, exp_range=tuple(exp_range))


def _sha(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- explore


def quick_check(a: np.ndarray, sfa: np.ndarray, b: np.ndarray, sfb: np.ndarray, d_bits: np.ndarray) -> dict:
    """Cheap numpy stand-ins for the kernel and how many bf16 outputs each matches: a sanity check
    of layouts and scales, NOT refmodel.  The wgmma chain's own rounding (its FP8 accumulator
    keeps fewer bits than float32) is replaced by the exact 128-long dot product rounded once to
    float32, so a few percent of outputs differ by a bf16 ulp even when all is right:
    ``fma``: acc = f32(f32(sa*sb) * P + acc) (computed in float64: rare double roundings),
    ``mul_add``: acc = f32(acc + f32(f32(sa*sb) * P)), ``exact``: the exact scaled sum -> bf16."""
    import ml_dtypes

    f8 = ml_dtypes.float8_e4m3fn
    M, K = a.shape
    N = b.shape[0]
    A = a.view(f8).astype(np.float64)
    B = b.view(f8).astype(np.float64)
    sb_cols = np.repeat(sfb.astype(np.float32), 128, axis=0)[:N]  # (N, Kb)
    acc_fma = np.zeros((M, N), np.float32)
    acc_ma = np.zeros((M, N), np.float32)
    exact = np.zeros((M, N), np.float64)
    with np.errstate(all="ignore"):
        for kb in range(K // 128):
            sl = slice(kb * 128, (kb + 1) * 128)
            P = A[:, sl] @ B[:, sl].T                      # exact in float64
            p32 = P.astype(np.float32)
            s = sfa[:, kb].astype(np.float32)[:, None] * sb_cols[:, kb][None, :]  # float32 RN
            acc_fma = (s.astype(np.float64) * p32.astype(np.float64) + acc_fma.astype(np.float64)).astype(np.float32)
            acc_ma = (acc_ma + (s * p32)).astype(np.float32)
            exact += sfa[:, kb].astype(np.float64)[:, None] * sb_cols[:, kb].astype(np.float64)[None, :] * P
    out = {}
    hw = d_bits.astype(np.int64)
    for nm, x in (("fma", acc_fma), ("mul_add", acc_ma), ("exact", exact.astype(np.float32))):
        mb = x.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int64)
        diff = np.abs(np.where(hw >= 0x8000, 0x8000 - hw, hw) - np.where(mb >= 0x8000, 0x8000 - mb, mb))
        out[nm] = {"match": int((mb == hw).sum()), "of": int(hw.size), "max_ulp": int(diff.max()) if diff.size else 0,
                   "off_by_1ulp": int((diff == 1).sum())}
    return out


_SASS_OPS = ("HGMMA", "FFMA", "FMUL", "FADD", "F2FP", "FSEL", "STSM", "UTMASTG", "UTMALDG")


def _sass_summary(text: str) -> dict:
    ops: dict[str, int] = {}
    hgmma: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", line)
        if not m:
            continue
        full = m.group(1)
        base = full.split(".")[0]
        if base in _SASS_OPS:
            ops[base] = ops.get(base, 0) + 1
        if base == "HGMMA":
            hgmma[full] = hgmma.get(full, 0) + 1
    return {"ops": ops, "hgmma": hgmma}


def _ptx_summary(text: str) -> dict:
    """wgmma forms and the float32 arithmetic of the promotion / epilogue, counted in the PTX."""
    out: dict[str, int] = {}
    for pat in (r"wgmma\.mma_async[.\w]*", r"\b(?:fma|mul|add|sub)(?:\.r[nzmp])?(?:\.ftz)?(?:\.sat)?\.f32\b",
                r"\bcvt\.[\w.]*bf16[\w.]*"):
        for f in re.findall(pat, text):
            out[f] = out.get(f, 0) + 1
    return out


def _jit_dirs(cache: Path) -> set:
    return {p.name for p in (cache / "cache").glob("kernel.*")} if (cache / "cache").is_dir() else set()


def _jit_record(cache: Path, names) -> dict:
    rec = {}
    for nm in sorted(names):
        d = cache / "cache" / nm
        r = {"files": {p.name: p.stat().st_size for p in sorted(d.iterdir())}}
        cu = d / "kernel.cu"
        if cu.exists():
            r["kernel_cu"] = cu.read_text(errors="replace")
        sass = d / "kernel.sass"
        if sass.exists():
            r["sass"] = _sass_summary(sass.read_text(errors="replace"))
        ptx = d / "kernel.ptx"
        if ptx.exists():
            r["ptx"] = _ptx_summary(ptx.read_text(errors="replace"))
        rec[nm] = r
    return rec


def _write_jit_tar(cache: Path, path: Path, limit: int = 15 << 20) -> dict:
    tmp = path.with_suffix(".tmp")
    for with_sass in (True, False):
        with tarfile.open(tmp, "w:gz") as tf:
            for p in sorted((cache / "cache").glob("kernel.*/*")) if (cache / "cache").is_dir() else []:
                if p.name.endswith(".sass") and not with_sass:
                    continue
                tf.add(p, arcname=f"{p.parent.name}/{p.name}")
        if tmp.stat().st_size <= limit:
            break
    tmp.replace(path)
    return {"bytes": path.stat().st_size, "with_sass": with_sass}


def _save(out: Path, meta: dict, arrays: dict) -> None:
    tmp = out / "deepgemm.tmp.npz"
    np.savez_compressed(tmp, **arrays)
    tmp.replace(out / "deepgemm.npz")
    (out / "deepgemm.json").write_text(json.dumps(meta, indent=1, default=str))

def explore(out: Path, dg: Path, only=None, budget_s: float | None = None) -> int:
    """Run every shape of :data:`SHAPES` through DeepGEMM; write deepgemm.{npz,json} and the JIT tar."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    (out / "deepgemm_stdout.log").unlink(missing_ok=True)
    meta = {"recorder": "gpu.record.deepgemm", "complete": False, "deepgemm": {
        "repo": DG_REPO, "commit": DG_COMMIT, "cutlass_commit": CUTLASS_COMMIT, "fmt_commit": FMT_COMMIT,
        "dir": str(dg)}, "function": FUNCTION, "casts": list(CASTS),
        "inputs": "refmodel.verify.seeded.library_matrices(seed, 'bf16', M, N, K, exp_range=exp_range); "
                  "DeepGEMM gets a (M, K) and b.T (N, K)",
        "layouts": {"a": "(M, K) e4m3 codes uint8, K-major", "b": "(N, K) e4m3 codes uint8, K-major",
                    "sfa": "(M, K/128) float32: sfa[m, kb] scales a[m, 128kb:128kb+128]",
                    "sfb": "(ceil(N/128), K/128) float32: sfb[nb, kb] scales b[128nb:128nb+128, 128kb:128kb+128]",
                    "d": "(M, N) bf16 bits uint16, row-major"},
        "shapes": []}
    arrays: dict[str, np.ndarray] = {}
    scratch = Path(tempfile.mkdtemp(prefix="wgref_dg_"))
    jit_cache = scratch / "jit"
    try:
        env_up, tc_info = toolchain(scratch)
        os.environ.update(env_up)
        os.environ.update(jit_env(jit_cache))
        meta["toolchain"] = tc_info
        meta["env"] = {k: os.environ.get(k) for k in sorted(os.environ) if k.startswith(("DG_", "CUDA_HOME"))}
        import torch  # noqa: F401  (DeepGEMM runs on torch: without it the setup fails here)

        meta["versions"] = versions()
        meta["versions"]["nvcc"] = nvcc_version(os.environ["CUDA_HOME"]) or nvcc_version(cuda_home())
        meta["preload"] = preload(cuda_home(), cuda_major())
        sink: list[str] = []
        with capture_fd1(sink, out / "deepgemm_stdout.log"):
            dgm = DeepGEMM(dg)
        meta["import_log"] = sink[-1][-20000:]
        meta["deepgemm"].update(dgm.info())
    except Exception as e:
        meta["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
        meta["traceback"] = traceback.format_exc()[-6000:]
        print(f"setup/import FAILED: {meta['error']}", flush=True)
        traceback.print_exc()
        _save(out, meta, arrays)
        return 1
    print(f"deep_gemm {meta['deepgemm'].get('version')} imported from {meta['deepgemm'].get('file')} "
          f"({time.time() - t0:.1f}s); num_sms={meta['deepgemm'].get('get_num_sms')}", flush=True)

    for name, m, n, k, seed, er in SHAPES:
        if only and name not in only:
            continue
        rec = {"name": name, "M": m, "N": n, "K": k, "seed": seed, "exp_range": list(er)}
        meta["shapes"].append(rec)
        if budget_s is not None and time.time() - t0 > budget_s:
            rec.update(ok=False, error="skipped: out of time")
            print(f"{name}: skipped (out of time)", flush=True)
            continue
        t1 = time.time()
        before = _jit_dirs(jit_cache)
        sink = []
        try:
            a_np, b_np = inputs(seed, m, n, k, er)
            rec["a_bf16_sha256"], rec["b_bf16_sha256"] = _sha(a_np), _sha(b_np)
            a8, sfa, b8, sfb = dgm.cast(a_np, b_np)
            rec["fed"] = {nm: {"shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype)}
                          for nm, x in (("a", a8), ("sfa", sfa), ("b", b8), ("sfb", sfb))}
            a_codes, b_codes, sfa_np, sfb_np = dgm.on_host(a8, sfa, b8, sfb)
            outs = []
            with capture_fd1(sink, out / "deepgemm_stdout.log"):
                for rep in range(2):
                    d_bits, secs = dgm.fp8_gemm_nt(a8, sfa, b8, sfb)
                    rec[f"call{rep}_s"] = round(secs, 3)
                    outs.append(d_bits)
            rec["log"] = sink[-1][-30000:]
            d_bits = outs[0]
            rec["deterministic_rerun"] = bool(np.array_equal(outs[0], outs[1]))
            rec["sentinel_left"] = int((d_bits == 0xFFFF).sum())
            rec["nan_or_inf"] = int(((d_bits & 0x7F80) == 0x7F80).sum())
            rec["sha256"] = {"a": _sha(a_codes), "b": _sha(b_codes), "sfa": _sha(sfa_np), "sfb": _sha(sfb_np),
                             "d": _sha(d_bits)}
            rec["scale_ranges"] = {"sfa": [float(sfa_np.min()), float(sfa_np.max())],
                                   "sfb": [float(sfb_np.min()), float(sfb_np.max())]}
            arrays.update({f"{name}.a": a_codes, f"{name}.b": b_codes, f"{name}.sfa": sfa_np,
                           f"{name}.sfb": sfb_np, f"{name}.d": d_bits})
            try:
                rec["quick_check"] = quick_check(a_codes, sfa_np, b_codes, sfb_np, d_bits)
            except Exception as e:
                rec["quick_check"] = f"{type(e).__name__}: {e}"
            rec["ok"] = True
            qc = rec["quick_check"]
            quick = {kk: (v["match"], v["max_ulp"]) for kk, v in qc.items()} if isinstance(qc, dict) else qc
            print(f"{name}: ok {time.time() - t1:.1f}s (calls {rec.get('call0_s')}s, {rec.get('call1_s')}s) "
                  f"rerun-identical={rec['deterministic_rerun']} sentinel_left={rec['sentinel_left']} "
                  f"quick (match, max ulp)={quick}", flush=True)
        except Exception as e:
            rec["ok"] = False
            rec["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
            if sink:
                rec["log"] = sink[-1][-30000:]
            print(f"{name}: FAILED {rec['error'][:1500]}", flush=True)
            traceback.print_exc(limit=8)
            sys.stderr.flush()
        new = _jit_dirs(jit_cache) - before
        rec["jit_kernels"] = sorted(new)
        try:
            meta.setdefault("jit", {}).update(_jit_record(jit_cache, new))
            meta["jit_tar"] = _write_jit_tar(jit_cache, out / "deepgemm_jit.tar.gz")
        except Exception as e:
            meta["jit_error"] = f"{type(e).__name__}: {e}"
        rec["wall_s"] = round(time.time() - t1, 1)
        meta["wall_s"] = round(time.time() - t0, 1)
        _save(out, meta, arrays)
    meta["complete"] = True
    meta["wall_s"] = round(time.time() - t0, 1)
    _save(out, meta, arrays)
    shutil.rmtree(scratch, ignore_errors=True)
    n_ok = sum(r.get("ok", False) for r in meta["shapes"])
    print(f"{n_ok}/{len(meta['shapes'])} shapes ok; wrote {out} ({meta['wall_s']}s)", flush=True)
    return 0 if n_ok else 1


# ----------------------------------------------------------------------------- compare (CPU)


def compare(explored: Path, log=print) -> int:
    """Check refmodel's DeepGEMM model (wgmma k32 chain, promotion every 4 instructions, scales
    applied per promotion, bf16 RNE) against an --explore folder, for each promote_op."""
    from refmodel.golden.deepgemm import fp8_gemm_nt

    info = json.loads((explored / "deepgemm.json").read_text())
    z = np.load(explored / "deepgemm.npz")
    worst = 0
    for rec in info.get("shapes", []):
        if not rec.get("ok"):
            log(f"{rec['name']}: not recorded ({rec.get('error', '?')[:200]})")
            continue
        nm, M, N, K = rec["name"], rec["M"], rec["N"], rec["K"]
        a, b = inputs(rec["seed"], M, N, K, rec["exp_range"])
        if (_sha(a), _sha(b)) != (rec["a_bf16_sha256"], rec["b_bf16_sha256"]):
            log(f"{nm}: note: the rebuilt bf16 inputs differ from the recorded sha256 (numpy changed?); "
                "the FP8 codes and scales fed are in the npz, so the check goes on")
        A, B, sfa, sfb, hw = (z[f"{nm}.{x}"] for x in ("a", "b", "sfa", "sfb", "d"))
        res = {}
        for op in ("fma", "mul_add", "fma_exact"):
            bits = fp8_gemm_nt(A, sfa, B, sfb, promote_op=op).view(np.uint16)
            res[op] = int(np.count_nonzero(bits != hw))
        log(f"{nm} ({M}x{N}x{K}): mismatches of {hw.size}: " + ", ".join(f"{k}={v}" for k, v in res.items()))
        worst = max(worst, res["fma"])
    return 1 if worst else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="store_true", help="(GPU machine) build DeepGEMM's extension in place")
    p.add_argument("--explore", help="(GPU) run every shape, save to this folder")
    p.add_argument("--compare", help="(CPU) compare an --explore folder with refmodel's model")
    p.add_argument("--dg", default=str(DG_DIR), help="the DeepGEMM source folder (default %(default)s)")
    p.add_argument("--only", default=None, help="comma-separated shape names (default: all)")
    p.add_argument("--budget-s", type=float, default=None, help="start no new shape after this many seconds")
    a = p.parse_args(argv)
    dg = Path(a.dg).resolve()
    if a.build:
        return build(dg)
    if a.explore:
        return explore(Path(a.explore), dg, set(a.only.split(",")) if a.only else None, a.budget_s)
    if a.compare:
        return compare(Path(a.compare))
    p.error("give --build, --explore DIR or --compare DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main())
