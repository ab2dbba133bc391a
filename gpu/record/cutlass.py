"""Explore the CUTLASS Python DSL (CuTe DSL) Hopper dense GEMM examples on the H200.

    python -m gpu.record.cutlass --explore DIR        # GPU: run every configuration, save outputs
    python -m gpu.record.cutlass --compile-only DIR   # CPU or GPU: compile every configuration for
                                                      # sm_90a and keep PTX/cubin (no launch)
    python -m gpu.record.cutlass --store DIR --out fixtures   # (CPU) check refmodel.golden, store

The kernels are NVIDIA's own examples (``dense_gemm.py``: a plain wgmma chain;
``dense_gemm_fp8_2xacc.py``: CUTLASS's FP8 "2xAcc" promotion), imported, compiled and run by
gpu.libraries.cutlass, which says where they come from and what they compute.

Inputs are drawn on the host with numpy from a per-configuration seed (``inputs(i, dtype, M, N,
K, narrow)``), so a CPU can rebuild them exactly; only the outputs (as bit patterns) and the
compiled kernels (PTX, cubin, SASS where a disassembler is there) travel back.

Files written under DIR: ``cutlass.npz`` (one uint8/uint16/uint32 array of output bits per
configuration), ``cutlass.json`` (configurations, versions, the examples' sha256),
``cutlass_kernels.zip`` (PTX / cubin / SASS per configuration).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

import numpy as np

from gpu.libraries.cutlass import EXAMPLE_SOURCE, Dsl, Gemm, example_file, example_sha256, versions

# (name, kernel, ab dtype, acc dtype, out dtype, M, N, K, tile_mn, cluster_mn, promotion, narrow)
#   kernel "dense": dense_gemm.HopperWgmmaGemmKernel, promotion None
#   kernel "2xacc": dense_gemm_fp8_2xacc.HopperFP8WarpSpecialized2xAccGemmKernel,
#                   promotion = mma_promotion_interval (wgmma instructions, a multiple of 4)
#   narrow: inputs drawn small (for f16 accumulators, whose range is 65504)
# The example's own is_valid_dtypes() admits Float16 but not BFloat16 and no bf16 output; the
# kernel class itself takes any 16-bit A == B (make_trivial_tiled_mma builds the bf16 wgmma), so
# the bf16 configurations go through the class directly and may fail: the others run on.
CONFIGS = [
    ("dg_e4m3_f32_f32_t128x128_c1x1", "dense", "e4m3", "f32", "f32", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_e4m3_f32_f32_t128x256_c2x1", "dense", "e4m3", "f32", "f32", 256, 256, 1024, (128, 256), (2, 1), None, False),
    ("dg_e4m3_f32_f32_t64x64_c1x2", "dense", "e4m3", "f32", "f32", 256, 256, 1024, (64, 64), (1, 2), None, False),
    ("dg_e4m3_f32_f32_t128x128_c1x1_k4096", "dense", "e4m3", "f32", "f32", 256, 256, 4096, (128, 128), (1, 1), None, False),
    ("dg_e4m3_f32_f16_t128x128_c1x1", "dense", "e4m3", "f32", "f16", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_e4m3_f32_bf16_t128x128_c1x1", "dense", "e4m3", "f32", "bf16", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_e4m3_f16_f16_t128x128_c1x1", "dense", "e4m3", "f16", "f16", 256, 256, 1024, (128, 128), (1, 1), None, True),
    ("dg_e4m3_f16_f32_t128x256_c1x1", "dense", "e4m3", "f16", "f32", 256, 256, 1024, (128, 256), (1, 1), None, True),
    ("dg_e5m2_f32_f32_t128x128_c1x1", "dense", "e5m2", "f32", "f32", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_bf16_f32_f32_t128x128_c1x1", "dense", "bf16", "f32", "f32", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_bf16_f32_bf16_t128x256_c2x1", "dense", "bf16", "f32", "bf16", 256, 256, 1024, (128, 256), (2, 1), None, False),
    ("dg_bf16_f32_f32_t64x64_c1x2", "dense", "bf16", "f32", "f32", 256, 256, 1024, (64, 64), (1, 2), None, False),
    ("dg_bf16_f32_f32_t128x128_c1x1_k4096", "dense", "bf16", "f32", "f32", 256, 256, 4096, (128, 128), (1, 1), None, False),
    ("dg_f16_f32_f32_t128x128_c1x1", "dense", "f16", "f32", "f32", 256, 256, 1024, (128, 128), (1, 1), None, False),
    ("dg_f16_f16_f16_t128x128_c1x1", "dense", "f16", "f16", "f16", 256, 256, 1024, (128, 128), (1, 1), None, True),
    ("x2_e4m3_f32_f32_t128x128_c1x1_p4", "2xacc", "e4m3", "f32", "f32", 256, 256, 1024, (128, 128), (1, 1), 4, False),
    ("x2_e4m3_f32_f32_t128x128_c1x2_p16", "2xacc", "e4m3", "f32", "f32", 256, 256, 1024, (128, 128), (1, 2), 16, False),
    ("x2_e4m3_f32_f32_t128x256_c1x1_p8_k4096", "2xacc", "e4m3", "f32", "f32", 256, 256, 4096, (128, 256), (1, 1), 8, False),
]


def inputs(i: int, dtype: str, m: int, n: int, k: int, narrow: bool = False):
    """The inputs of configuration ``i``: a (M, K) and b (K, N) as numpy arrays of ``dtype``
    (ml_dtypes: "e4m3", "e5m2", "bf16", "f16").  ``narrow`` draws small values (|x| < ~16)."""
    from refmodel.verify.seeded import library_matrices

    return library_matrices(7000 + i, dtype, m, n, k, exp_range=(-4, 2) if narrow else (-3, 4),
                            lim=16.0 if narrow else {"e4m3": 400.0, "e5m2": 4000.0}.get(dtype, 1e4))


def _config_dict(i, cfg):
    name, kern, dt, acc, out, m, n, k, tile, cluster, prom, narrow = cfg
    return {"name": name, "index": i, "kernel": kern, "example": example_file(kern),
            "dtype": dt, "acc": acc, "out": out, "M": m, "N": n, "K": k, "tile_mn": list(tile),
            "cluster_mn": list(cluster), "mma_promotion_interval": prom, "narrow": narrow,
            "scale_a": 1.0 if kern == "2xacc" else None, "scale_b": 1.0 if kern == "2xacc" else None}


def _wgmma_forms(ptx: str) -> dict:
    forms = {}
    for f in re.findall(r"wgmma\.mma_async[.\w]*", ptx):
        forms[f] = forms.get(f, 0) + 1
    return forms


def _sass(cubin: Path):
    for tool, args in (("cuobjdump", ["--dump-sass"]), ("nvdisasm", ["-c"])):
        exe = shutil.which(tool)
        if exe:
            try:
                r = subprocess.run([exe, *args, str(cubin)], capture_output=True, text=True, timeout=120)
                if r.returncode == 0 and r.stdout:
                    return tool, r.stdout
            except Exception:
                pass
    return None, None


def _collect(compiled, dump: Path, name: str, zf: zipfile.ZipFile, rec: dict) -> None:
    ptx_text = None
    for p in sorted(dump.glob("*")):
        if p.suffix == ".ptx":
            ptx_text = p.read_text(errors="replace")
            zf.writestr(f"{name}.ptx", ptx_text)
        elif p.suffix == ".cubin":
            zf.write(p, f"{name}.cubin")
            tool, sass = _sass(p)
            if sass:
                zf.writestr(f"{name}.sass", sass)
                rec["sass_tool"] = tool
    if ptx_text is None:
        ptx = getattr(compiled, "__ptx__", None)
        if isinstance(ptx, str) and ptx.lstrip().startswith((".version", "//")):
            ptx_text = ptx
            zf.writestr(f"{name}.ptx", ptx_text)
    if ptx_text:
        rec["wgmma_forms"] = _wgmma_forms(ptx_text)
        rec["ptx_target"] = " ".join(re.findall(r"^\.(?:version|target)\s+\S+", ptx_text, re.M))


def _save(out: Path, meta: dict, results: dict, launch: bool) -> None:
    if launch:
        tmp = out / "cutlass.tmp.npz"
        np.savez_compressed(tmp, **results)
        tmp.replace(out / "cutlass.npz")
    (out / "cutlass.json").write_text(json.dumps(meta, indent=1))


def run_all(out: Path, *, launch: bool, only=None) -> int:
    """Compile (and with ``launch`` run) every configuration; write the files under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    dsl = Dsl(launch)
    print(f"cutlass-dsl {dsl.version} imported in {time.time() - t0:.1f}s from {dsl.where}", flush=True)
    dsl.open_device()

    meta = {"mode": "explore" if launch else "compile-only", "gpu": dsl.gpu,
            "example_source": EXAMPLE_SOURCE, "examples": example_sha256(),
            "versions": versions(dsl.cutlass), "cute_dsl_arch": os.environ.get("CUTE_DSL_ARCH"),
            "complete": False, "configs": []}
    if launch:
        drv = dsl.driver_cuda_version()
        if drv is not None:
            meta["driver_cuda_version"] = drv
    results = {}
    scratch = Path(tempfile.mkdtemp(prefix="wgref_cutlass_"))
    zpath = out / "cutlass_kernels.zip"
    zpath.unlink(missing_ok=True)
    for i, cfg in enumerate(CONFIGS):
        name, kern, dt, acc, odt, m, n, k, tile, cluster, prom, narrow = cfg
        if only and name not in only:
            continue
        rec = _config_dict(i, cfg)
        meta["configs"].append(rec)
        t1 = time.time()
        # the zip is reopened per configuration and the json/npz rewritten after each one, so a
        # hang or a crash later (the device call's time limit) still leaves the earlier results
        with zipfile.ZipFile(zpath, "a", zipfile.ZIP_DEFLATED) as zf:
            try:
                a_np, b_np = inputs(i, dt, m, n, k, narrow)
                rec["a_sha256"] = hashlib.sha256(a_np.tobytes()).hexdigest()
                rec["b_sha256"] = hashlib.sha256(b_np.tobytes()).hexdigest()
                g = Gemm(dsl, kern, dt, acc, odt, tile, cluster, prom, a_np, b_np)
                if g.max_active_clusters is not None:
                    rec["max_active_clusters"] = int(g.max_active_clusters)
                dump = scratch / name
                rec["dumps_kept"] = g.compile(dump)
                rec["compile_s"] = round(time.time() - t1, 2)
                rec["kernel_info"] = g.info()
                _collect(g.compiled, dump, name, zf, rec)
                if launch:
                    bits = g.run()
                    g.reset_output()
                    again = g.run()
                    rec["deterministic_rerun"] = bool(np.array_equal(bits, again))
                    rec["sentinel_left"] = int((bits == np.iinfo(bits.dtype).max).sum())
                    results[name] = bits
                rec["ok"] = True
                print(f"{name}: ok {time.time() - t1:.1f}s forms={rec.get('wgmma_forms')} "
                      f"info={rec['kernel_info']} rerun-identical={rec.get('deterministic_rerun')} "
                      f"sentinel_left={rec.get('sentinel_left')}", flush=True)
            except Exception as e:  # reported, the rest goes on
                rec["ok"] = False
                rec["error"] = f"{type(e).__name__}: {str(e)[:2000]}"
                print(f"{name}: FAILED {type(e).__name__}: {str(e)[:1500]}", flush=True)
                traceback.print_exc(limit=6)
                sys.stderr.flush()
        meta["wall_s"] = round(time.time() - t0, 1)
        _save(out, meta, results, launch)
    shutil.rmtree(scratch, ignore_errors=True)
    meta["complete"] = True
    _save(out, meta, results, launch)
    n_ok = sum(r.get("ok", False) for r in meta["configs"])
    print(f"{n_ok}/{len(meta['configs'])} configurations ok; wrote {out}", flush=True)
    return 0 if n_ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--explore", help="(GPU) compile and run every configuration, save to this folder")
    p.add_argument("--compile-only", help="compile every configuration for sm_90a, keep PTX/cubin in this folder")
    p.add_argument("--only", default=None, help="comma-separated configuration names (default: all)")
    p.add_argument("--store", help="(CPU) turn an --explore folder into fixtures under --out")
    p.add_argument("--out", default="fixtures")
    a = p.parse_args(argv)
    if a.store:
        return store(Path(a.store), Path(a.out))
    only = set(a.only.split(",")) if a.only else None
    if a.explore:
        return run_all(Path(a.explore), launch=True, only=only)
    if a.compile_only:
        return run_all(Path(a.compile_only), launch=False, only=only)
    p.error("give --explore DIR (GPU) or --compile-only DIR")
    return 2


SAMPLE = 64   # rows and columns of each recorded 256 x 256 output kept in the fixture


def store(explored: Path, out: Path, log=print) -> int:
    """Turn an --explore folder into fixtures/cutlass/examples.npz (kind ``cutlass_gemm``): every
    configuration refmodel.golden.cutlass_dense_gemm reproduces on the whole output, with the seed
    and sha256 of its inputs and 64 rows x 64 columns of its output."""
    import ml_dtypes

    from refmodel.dtypes import bits_of
    from refmodel.golden import cutlass_dense_gemm
    from refmodel.verify.fixtures import host_provenance, write_fixture
    from refmodel.verify.seeded import matrix_sha256

    info = json.loads((explored / "cutlass.json").read_text())
    z = np.load(explored / "cutlass.npz")
    od = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
    arrays, cfgs, bad, outputs = {}, [], 0, 0
    for c in info["configs"]:
        if not c.get("ok"):
            log(f"{c['name']}: did not run, not stored")
            continue
        a, b = inputs(c["index"], c["dtype"], c["M"], c["N"], c["K"], c["narrow"])
        if (matrix_sha256(a), matrix_sha256(b)) != (c["a_sha256"], c["b_sha256"]):
            log(f"{c['name']}: the rebuilt inputs are not the ones recorded (numpy changed?), not stored")
            bad += 1
            continue
        d = cutlass_dense_gemm(a, b, acc_dtype=c["acc"], out_dtype=od[c["out"]],
                               mma_promotion_interval=c["mma_promotion_interval"])
        hw = z[c["name"]].view(od[c["out"]])
        n = int(np.count_nonzero(bits_of(d) != bits_of(hw)))
        log(f"{c['name']}: {hw.size} outputs, {n} mismatches")
        bad += n
        if n:
            continue
        rng = np.random.default_rng(len(c["name"]))
        rows = np.sort(rng.choice(c["M"], SAMPLE, replace=False))
        cols = np.sort(rng.choice(c["N"], SAMPLE, replace=False))
        k = len(cfgs)
        arrays[f"d{k}"], arrays[f"rows{k}"], arrays[f"cols{k}"] = bits_of(hw[np.ix_(rows, cols)]), rows, cols
        outputs += SAMPLE * SAMPLE
        seed_kw = {"seed": 7000 + c["index"], "exp_range": [-4, 2] if c["narrow"] else [-3, 4],
                   "lim": 16.0 if c["narrow"] else {"e4m3": 400.0, "e5m2": 4000.0}.get(c["dtype"], 1e4)}
        cfgs.append({**{x: c[x] for x in ("name", "kernel", "example", "dtype", "acc", "out", "M", "N", "K", "tile_mn",
                                          "cluster_mn", "mma_promotion_interval", "a_sha256", "b_sha256",
                                          "wgmma_forms")}, **seed_kw, "array": f"d{k}"})
    prov = {"device": info["gpu"], "example_source": info["example_source"], "examples": info["examples"],
            **info["versions"], "driver_cuda_version": info["driver_cuda_version"], "recorder": "gpu.record.cutlass",
            **{f"host_{k}": v for k, v in host_provenance().items()}}
    write_fixture("cutlass", "examples", arrays, kind="cutlass_gemm", cases=outputs, meta={"configs": cfgs},
                  provenance=prov, root=out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
