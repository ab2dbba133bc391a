"""Record the standard Triton tiled matmul on the H200, for refmodel's Triton golden model.

    python -m gpu.record.triton --explore DIR     # run every configuration, save inputs, outputs, PTX
    python -m gpu.record.triton --store DIR       # (CPU) check refmodel.golden.triton_matmul, store fixtures

The kernel is gpu.libraries.triton's textbook one: ``acc = tl.zeros(..., tl.float32)``; for each
BLOCK_K slice ``acc = tl.dot(a_blk, b_blk, acc, input_precision=..., max_num_imprecise_acc=...)``;
store ``acc.to(out_dtype)``.  The PTX of every compiled kernel is kept: it says which wgmma form
Triton emits and where it promotes.  :func:`record_batches` re-runs batches of a ``wgref fuzz
lib:triton`` campaign and ``--store-fuzz`` turns them into fixtures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from gpu.libraries.torch_cublas import TorchRunner, bits_view, torch_dtype
from gpu.libraries.triton import tiled_matmul, tiled_matmul_f16acc, tiled_matmul_kernel
from gpu.libraries.triton import version as triton_version

# (name, dtype, BM, BN, BK, warps, input_precision, max_num_imprecise_acc, out).  None runs
# max_num_imprecise_acc=0 (the "fp8_default" names are historical); "none" calls tl.dot without the
# argument, i.e. Triton's per-target default (2**30 on sm_90 per Triton's CUDA backend)
CONFIGS = [
    ("fp8_none_bk128_w4", "e4m3", 128, 128, 128, 4, None, "none", "f32"),
    ("fp8_none_bk64_w8", "e4m3", 128, 128, 64, 8, None, "none", "f32"),
    ("fp8_e5m2_none_bk64_w4", "e5m2", 128, 128, 64, 4, None, "none", "bf16"),
    ("fp8_default_bk128_w4", "e4m3", 128, 128, 128, 4, None, None, "f32"),
    ("fp8_default_bk64_w8", "e4m3", 128, 128, 64, 8, None, None, "f32"),
    ("fp8_imp32_bk128_w4", "e4m3", 128, 128, 128, 4, None, 32, "f32"),
    ("fp8_imp64_bk128_w4", "e4m3", 128, 128, 128, 4, None, 64, "f32"),
    ("fp8_imp128_bk128_w4", "e4m3", 128, 128, 128, 4, None, 128, "f32"),
    ("fp8_imp96_bk128_w4", "e4m3", 128, 128, 128, 4, None, 96, "f32"),
    ("fp8_imp256_bk128_w4", "e4m3", 128, 128, 128, 4, None, 256, "f32"),  # Triton 3.6: CompilationError
    ("fp8_e5m2_imp64_bk64_w4_out16", "e5m2", 128, 128, 64, 4, None, 64, "f16"),
    ("fp8_e5m2_default_bk64_w4", "e5m2", 128, 128, 64, 4, None, None, "bf16"),
    ("f16_bk64_w4", "f16", 128, 128, 64, 4, None, None, "f32"),
    ("f16_bk32_w8_out16", "f16", 128, 128, 32, 8, None, None, "f16"),
    ("bf16_bk64_w4", "bf16", 128, 128, 64, 4, None, None, "bf16"),
    ("tf32_bk32_w4", "f32", 128, 128, 32, 4, "tf32", None, "f32"),
    ("tf32x3_bk32_w4", "f32", 128, 128, 32, 4, "tf32x3", None, "f32"),
    ("ieee_bk32_w4", "f32", 64, 64, 32, 4, "ieee", None, "f32"),
]
M = N = 256
K = 512


def _operands(seed: int, dt: str, exp_lo: int, exp_hi: int, lim: float):
    """A (M, K) and B (K, N) on the GPU: normals times 2**randint(exp_lo, exp_hi), clamped to ±lim."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    scale = 2.0 ** torch.randint(exp_lo, exp_hi, (M, K), device="cuda", generator=g).float()
    a = (torch.randn(M, K, device="cuda", generator=g) * scale).clamp(-lim, lim).to(torch_dtype(dt))
    scale = 2.0 ** torch.randint(exp_lo, exp_hi, (K, N), device="cuda", generator=g).float()
    b = (torch.randn(K, N, device="cuda", generator=g) * scale).clamp(-lim, lim).to(torch_dtype(dt))
    return a, b


def _run_and_save(out: Path, name: str, launch, a, b, config: dict, ptx_words: tuple) -> None:
    """Launch, then save inputs, output and configuration (``<name>.npz``) and the PTX lines that say
    which instructions Triton emitted and where it adds (``<name>.ptx.txt``); a refusal is reported."""
    import torch

    try:
        c, kern = launch(a, b)
        torch.cuda.synchronize()
        ptx = kern.asm.get("ptx", "")
    except Exception as e:  # a configuration Triton refuses is reported, the rest goes on
        print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        return
    np.savez_compressed(out / f"{name}.npz", a=bits_view(a), b=bits_view(b), c=bits_view(c),
                        config=np.array(json.dumps({"name": name, **config, "triton": triton_version(),
                                                    "torch": torch.__version__})))
    wg = sorted({ln.strip().split()[0] for ln in ptx.splitlines() if "wgmma.mma_async" in ln or "mma.sync" in ln})
    keep = [ln for ln in ptx.splitlines() if any(s in ln for s in ptx_words)]
    (out / f"{name}.ptx.txt").write_text("\n".join(wg) + "\n\n" + "\n".join(keep[:3000]))
    print(f"{name}: ok; instructions {wg}", flush=True)


def explore(out: Path, only=None) -> None:
    tiled_matmul_kernel()
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, dt, BM, BN, BK, warps, prec, imp, o) in enumerate(CONFIGS):
        if only and name not in only:
            continue
        a, b = _operands(1000 + i, dt, -4, 5, 400)
        _run_and_save(out, name, lambda x, y: tiled_matmul(x, y, out=o, block_m=BM, block_n=BN, block_k=BK,
                                                           prec=prec or "none", imp=-1 if imp == "none" else (imp or 0),
                                                           num_warps=warps), a, b,
                      {"dtype": dt, "BM": BM, "BN": BN, "BK": BK, "warps": warps, "input_precision": prec, "imp": imp,
                       "out": o}, ("wgmma", "add.f32", "add.rn.f32", "fma.rn.f32", "cvt.rna.tf32", "cvt.rn"))


# f16 accumulation: (name, dtype, BM, BN, BK, warps, out); inputs small enough that f16 sums stay finite
F16ACC_CONFIGS = [
    ("f16acc_f16_bk64_w4", "f16", 128, 128, 64, 4, "f16"),
    ("f16acc_f16_bk32_w8", "f16", 128, 128, 32, 8, "f16"),
    ("f16acc_f16_bk64_w4_out32", "f16", 128, 128, 64, 4, "f32"),
    ("f16acc_e4m3_bk128_w4", "e4m3", 128, 128, 128, 4, "f16"),
    ("f16acc_e5m2_bk64_w4", "e5m2", 128, 128, 64, 4, "f16"),
]


def explore_f16acc(out: Path) -> None:
    """Run :data:`F16ACC_CONFIGS` (Triton's ``tl.dot(..., out_dtype=tl.float16)`` with an f16 ``acc``),
    saving inputs, outputs and PTX as :func:`explore` does."""
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, dt, BM, BN, BK, warps, o) in enumerate(F16ACC_CONFIGS):
        a, b = _operands(3000 + i, dt, -5, 1, 8)
        _run_and_save(out, name, lambda x, y: tiled_matmul_f16acc(x, y, out=o, block_m=BM, block_n=BN, block_k=BK,
                                                                  num_warps=warps), a, b,
                      {"dtype": dt, "BM": BM, "BN": BN, "BK": BK, "warps": warps, "input_precision": None,
                       "imp": None, "acc": "f16", "out": o}, ("wgmma", "add.f16", "add.rn.f16", "cvt"))


ROWS, COLS = 64, 64   # stored sample: D[rows, cols] with the A rows and B columns it depends on


def store(explored: Path, out: Path, log=print) -> int:
    """Turn explored recordings into fixtures (kind ``triton_matmul``): for every configuration
    refmodel.golden.triton_matmul reproduces — checked here on the whole 256 x 256 output — keep
    64 rows and 64 columns of D with exactly the A rows and B columns they depend on."""
    import ml_dtypes

    from refmodel.dtypes import bits_of
    from refmodel.golden import triton_matmul
    from refmodel.verify.fixtures import host_provenance, write_fixture

    fp = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16, "f32": np.float32}
    od = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
    bad = 0
    for f in sorted(explored.glob("*.npz")):
        with np.load(f) as z:
            cfg = json.loads(str(z["config"]))
            a, b, c = z["a"].view(fp[cfg["dtype"]]), z["b"].view(fp[cfg["dtype"]]), z["c"].view(od[cfg["out"]])
        kw = dict(block_k=cfg["BK"], block_m=cfg["BM"], block_n=cfg["BN"], num_warps=cfg["warps"],
                  input_precision=cfg["input_precision"] or "tf32",
                  max_num_imprecise_acc=None if cfg["imp"] == "none" else (cfg["imp"] or 0), out_dtype=od[cfg["out"]])
        if cfg.get("acc") == "f16":        # the f16-accumulator kernel (explore_f16acc)
            kw.update(acc_dtype=np.float16, max_num_imprecise_acc=None)
        try:
            d = triton_matmul(a, b, **kw)
        except Exception as e:  # not modelled: reported, not stored
            log(f"{cfg['name']}: not stored ({str(e)[:100]})")
            continue
        n = int(np.count_nonzero(bits_of(d) != bits_of(c)))
        log(f"{cfg['name']}: {c.size} outputs, {n} mismatches")
        bad += n
        if n:
            continue
        rng = np.random.default_rng(len(cfg["name"]))
        rows = np.sort(rng.choice(a.shape[0], ROWS, replace=False))
        cols = np.sort(rng.choice(b.shape[1], COLS, replace=False))
        prov = {"device": "NVIDIA H200", "triton": cfg["triton"], "torch": cfg["torch"],
                "recorder": "gpu.record.triton", **host_provenance()}
        write_fixture("triton", cfg["name"], {"a": bits_of(a[rows]), "b": bits_of(b[:, cols]),
                                              "d": bits_of(c[np.ix_(rows, cols)]), "rows": rows, "cols": cols},
                      kind="triton_matmul", cases=ROWS * COLS,
                      meta={**{k: cfg[k] for k in ("dtype", "BM", "BN", "BK", "warps", "input_precision", "out")},
                            "imp": kw["max_num_imprecise_acc"] if cfg["dtype"] in ("e4m3", "e5m2") else None,
                            "acc": cfg.get("acc", "f32"),
                            "recorded_shape": [int(a.shape[0]), int(a.shape[1]), int(b.shape[1])]},
                      provenance=prov, root=out)
    return 1 if bad else 0


def record_batches(target: str, seed: int, batches: list[int], path: str | Path) -> None:
    """Re-run batches of a library campaign on the GPU and save the library's output bits (``b<batch>``
    arrays in one npz): how a mismatch found by a campaign becomes a fixture (:func:`store_fuzz`)."""
    from refmodel.verify.library_calls import draw_call, parse_target

    runner = TorchRunner()
    out = {}
    for b in batches:
        t = parse_target(target)
        cfg, _, x = draw_call(t, seed, b)
        o, _ = getattr(runner, t.replace("-", "_"))(x, cfg)
        out[f"b{b}"] = o.view({4: np.uint32, 2: np.uint16}[o.dtype.itemsize])
    np.savez_compressed(path, **out)


FUZZ_ROWS, FUZZ_COLS = 64, 16


def store_fuzz(recorded: Path, seed: int, out: Path, log=print) -> int:
    """Store batches of a ``wgref fuzz lib:triton`` campaign re-recorded on the GPU
    (:func:`record_batches`, a ``b<batch>`` array each) as triton_matmul fixtures
    ``fuzz_s<seed>_b<batch>``: 64 rows and 16 columns of D, those with the most non-finite outputs
    (the special-value cases that found golden-model bugs), with the A rows and B columns they use."""
    from refmodel.dtypes import bits_of
    from refmodel.verify.fixtures import host_provenance, write_fixture

    from refmodel.verify.library_calls import draw_call, golden_triton

    z = np.load(recorded)
    bad = 0
    for key in sorted(z.keys(), key=lambda k: int(k[1:])):
        b = int(key[1:])
        cfg, fam, x = draw_call("triton", seed, b)
        hw = z[key]
        n = int(np.count_nonzero(bits_of(golden_triton(x, cfg)).reshape(hw.shape) != hw))
        log(f"batch {b} ({cfg['dtype']} {cfg['input_precision']} {fam}): {hw.size} outputs, {n} mismatches")
        bad += n
        if n or cfg["M"] < FUZZ_ROWS:
            continue
        exp = (hw >> (23 if hw.dtype == np.uint32 else (10 if cfg["out"] == "f16" else 7)))
        nonfinite = (exp & (0xFF if cfg["out"] in ("f32", "bf16") else 0x1F)) == (0xFF if cfg["out"] in ("f32", "bf16") else 0x1F)
        rows = np.sort(np.argsort(-nonfinite.sum(1), kind="stable")[:FUZZ_ROWS])
        cols = np.sort(np.argsort(-nonfinite.sum(0), kind="stable")[:FUZZ_COLS])
        prov = {"device": "NVIDIA H200", "triton": "3.6.0", "torch": "2.11.0+cu130",
                "recorder": "gpu.record.triton.record_batches", "campaign": f"wgref fuzz lib:triton --seed {seed}",
                **host_provenance()}
        write_fixture("triton", f"fuzz_s{seed}_b{b}", {"a": bits_of(x["a"][rows]), "b": bits_of(x["b"][:, cols]),
                                                       "d": hw[np.ix_(rows, cols)], "rows": rows, "cols": cols},
                      kind="triton_matmul", cases=FUZZ_ROWS * FUZZ_COLS,
                      meta={"dtype": cfg["dtype"], "BM": 64, "BN": 64, "BK": cfg["block_k"], "warps": cfg["num_warps"],
                            "input_precision": cfg["input_precision"], "out": cfg["out"], "imp": cfg["imp"],
                            "recorded_shape": [cfg["M"], cfg["K"], cfg["N"]], "family": fam},
                      provenance=prov, root=out)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--explore", help="run every configuration on the GPU, save to this folder")
    p.add_argument("--store", help="(CPU) turn an --explore folder into fixtures under --out")
    p.add_argument("--out", default="fixtures")
    p.add_argument("--only", default=None, help="comma-separated configuration names (default: all)")
    p.add_argument("--store-fuzz", default=None, metavar="NPZ",
                   help="(CPU) store batches re-recorded by gpu.record.triton.record_batches (with --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--explore-f16acc", default=None, metavar="DIR",
                   help="run the f16-accumulator configurations on the GPU, save to this folder")
    a = p.parse_args(argv)
    if a.explore_f16acc:
        explore_f16acc(Path(a.explore_f16acc))
        return 0
    if a.store_fuzz:
        return store_fuzz(Path(a.store_fuzz), a.seed, Path(a.out))
    if a.explore:
        explore(Path(a.explore), set(a.only.split(",")) if a.only else None)
        return 0
    if a.store:
        return store(Path(a.store), Path(a.out))
    p.error("give --explore DIR (GPU) or --store DIR (CPU)")
    return 2


if __name__ == "__main__":
    sys.exit(main())
