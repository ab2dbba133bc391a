"""Record the special-function-unit forms on an H200: exhaustive digests, samples, div pair sets,
the compiler spellings (CUDA and Triton) with their PTX/SASS, and optional raw dumps of chosen input
ranges (the material the models are fitted from).

    python -m gpu.record.sfu --out fixtures [--text sfu_text.json] [--dump DIR] [--stages ...]

Every stored output is a hardware result; nothing here computes an expected value.  The replay
(:mod:`refmodel.verify.replay_sfu`) recomputes the same digests from refmodel.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from refmodel.numerics.sfu.digest import CHUNK
from refmodel.numerics.sfu.forms import NEAR_MISSES, SFU_FORMS, SfuForm
from refmodel.numerics.sfu.pairs import PAIR_CHUNK, div_pairs
from refmodel.numerics.sfu.spellings import SPELLINGS
from refmodel.verify.fixtures import host_provenance, write_fixture

from gpu.kernels import sfu as hw
from gpu.kernels.runtime import CompileError, PRELUDE, device_info, nvrtc_cubin, require_device

SEED = 20261202
SAMPLE_STRIDE = 0x9E3779B1          # odd: i * stride mod 2**32 is a permutation of all inputs
SAMPLE_N = 1 << 14
LO_WORDS = (0x00000000, 0xFFFFFFFF, 0x9E3779B9)   # low words of the f64 sweeps (high word swept)
PAIR_CHUNKS = 32                    # 32 * 2**22 = 134,217,728 pairs per binary form


def key(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def sample_inputs() -> np.ndarray:
    return (np.arange(SAMPLE_N, dtype=np.uint64) * SAMPLE_STRIDE % (1 << 32)).astype(np.uint32)


def f64_inputs(rng, n: int) -> np.ndarray:
    """Random f64 words: a quarter random bits, the rest random fractions on exponents 0..2047."""
    w = rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2) \
        + rng.integers(0, 2, n, dtype=np.int64).astype(np.uint64)
    e = rng.integers(0, 2048, n).astype(np.uint64)
    frac = w & np.uint64((1 << 52) - 1)
    s = rng.integers(0, 2, n).astype(np.uint64)
    structured = (s << np.uint64(63)) | (e << np.uint64(52)) | frac
    return np.where(np.arange(n) % 4 == 0, w, structured).astype(np.uint64)


FORMS_SCHEME = ("digests_<form>[c] = sum over input words i in chunk c (i >> 24 == c) of key(i, out(i)) mod 2^64, "
                "key(i, o) = mix64(o + mix64(i)) (refmodel.numerics.sfu.digest); f64 forms: i is the high word, "
                "the low word is each of lo_words; 16-bit forms: the operand is i & 0xffff, and all_<form> holds "
                "every output; sample_<form>[j] = out((j * sample_stride) mod 2^32); a_<form>: the f64 sample inputs")


def forms_cases(meta) -> int:
    """Hardware outputs a forms recording holds: 2^32 per unary 32-bit form, 65536 per 16-bit form,
    2^32 per low word plus the sample per f64 form (the div forms are recorded on pairs)."""
    from refmodel.numerics.sfu import parse_sfu

    n = 0
    for f in map(parse_sfu, meta["forms"]):
        if f.type == "f64":
            n += len(meta["lo_words"]) * (1 << 32) + meta["sample_n"]
        elif f.word_bits == 16:
            n += 1 << 16
        elif f.exhaustive:
            n += 1 << 32
    return n


def stage_compile(log):
    """Every form compiles; every near miss is refused."""
    ok, refused = [], []
    for f in SFU_FORMS:
        hw.cubin(f.instr)
        ok.append(f.instr)
    for s in NEAR_MISSES:
        parts = s.split(".")
        fake = SfuForm(parts[0], parts[1], "ftz" in parts, parts[-1], "")
        try:
            nvrtc_cubin(PRELUDE + hw.form_source(fake))
            log(f"NEAR MISS COMPILED: {s}")
        except CompileError:
            refused.append(s)
    log(f"compile: {len(ok)} forms compile, {len(refused)}/{len(NEAR_MISSES)} near misses refused")
    return {"compiled": ok, "refused": refused}


def _sass(blob: bytes) -> str:
    import shutil

    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(blob)
        path = f.name
    try:
        tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
        r = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=60)
        return r.stdout if r.stdout.strip() else f"cuobjdump printed nothing (rc {r.returncode}): {r.stderr[-500:]}"
    except Exception as e:
        return f"cuobjdump failed: {e}"
    finally:
        os.unlink(path)


def stage_text(log, triton_compiled):
    text = {"forms": {}, "cuda": {}, "triton": {}}
    for f in SFU_FORMS:
        text["forms"][f.instr] = {"sass": _sass(hw.cubin(f.instr))}
    for sp in SPELLINGS:
        if sp.compiler in hw.CUDA_OPTIONS:
            text["cuda"][sp.name] = {"ptx": hw.ptx(sp.name), "sass": _sass(hw.cubin(sp.name)),
                                     "options": list(hw.CUDA_OPTIONS[sp.compiler])}
    for name, c in triton_compiled.items():
        try:
            text["triton"][name] = {"ptx": c.asm.get("ptx", ""), "sass": _sass(c.asm["cubin"])}
        except Exception as e:
            text["triton"][name] = {"error": repr(e)}
    log(f"text: {len(text['forms'])} forms, {len(text['cuda'])} cuda, {len(text['triton'])} triton")
    return text


def stage_sweeps(log, arrays, meta):
    for f in SFU_FORMS:
        if f.exhaustive:
            t0 = time.time()
            sums, _ = hw.sweep(f.instr, 0, 1 << 32)
            arrays[f"digests_{key(f.instr)}"] = sums.get()
            log(f"sweep {f.instr}: {time.time() - t0:.2f}s")
        elif f.type == "f64":
            for lo in LO_WORDS:
                sums, _ = hw.sweep(f.instr, 0, 1 << 32, lo=lo)
                arrays[f"digests_{key(f.instr)}_lo{lo:08x}"] = sums.get()
            log(f"sweep {f.instr} (high words, {len(LO_WORDS)} low words)")
    x = sample_inputs()
    rng = np.random.default_rng(SEED)
    for f in SFU_FORMS:
        k = key(f.instr)
        if f.word_bits == 16:
            arrays[f"all_{k}"] = hw.run_sfu(f.instr, np.arange(1 << 16, dtype=np.uint16))
        elif f.type == "f64":
            a = f64_inputs(rng, SAMPLE_N)
            arrays[f"a_{k}"] = a
            arrays[f"sample_{k}"] = hw.run_sfu(f.instr, a)
        elif f.exhaustive:
            arrays[f"sample_{k}"] = hw.run_sfu(f.instr, x)
    meta.update({"sample_stride": SAMPLE_STRIDE, "sample_n": SAMPLE_N, "lo_words": list(LO_WORDS),
                 "chunk": CHUNK})


def stage_pairs(log, arrays, meta, triton_ok):
    import cupy as cp

    names = [f.instr for f in SFU_FORMS if f.n_operands == 2]
    names += [s.name for s in SPELLINGS if s.arity == 2 and s.compiler in hw.CUDA_OPTIONS]
    tnames = [s.name for s in SPELLINGS if s.arity == 2 and s.compiler == "triton"] if triton_ok else []
    sums = {n: np.zeros(PAIR_CHUNKS, np.uint64) for n in names + tnames}
    t0 = time.time()
    for c in range(PAIR_CHUNKS):
        a, b = div_pairs(c, SEED)
        da, db = cp.asarray(a), cp.asarray(b)
        for n in names:
            out = hw.run_device(n, da, db)
            sums[n][c] = np.uint64(hw.digest_device(out, c * PAIR_CHUNK))
            if c == 0:
                arrays[f"pairs_sample_{key(n)}"] = out[:SAMPLE_N].get()
        if tnames:
            import torch
            from gpu.libraries import triton_sfu

            tx, ty = torch.from_dlpack(da.view(cp.float32)), torch.from_dlpack(db.view(cp.float32))
            for n in tnames:
                o, _ = triton_sfu.run(n.split(":", 1)[1], tx, ty)
                out = cp.from_dlpack(o).view(cp.uint32)
                sums[n][c] = np.uint64(hw.digest_device(out, c * PAIR_CHUNK))
                if c == 0:
                    arrays[f"pairs_sample_{key(n)}"] = out[:SAMPLE_N].get()
    for n, s in sums.items():
        arrays[f"pairs_digests_{key(n)}"] = s
    meta.update({"pair_seed": SEED, "pair_chunks": PAIR_CHUNKS, "pair_chunk": PAIR_CHUNK,
                 "pair_names": names + tnames})
    log(f"pairs: {len(names) + len(tnames)} binary forms/spellings on {PAIR_CHUNKS * PAIR_CHUNK} pairs, "
        f"{time.time() - t0:.1f}s")


def stage_spellings(log, arrays, meta, triton_ok):
    import cupy as cp

    x = sample_inputs()
    done = []
    for sp in SPELLINGS:
        if sp.arity != 1 or sp.compiler not in hw.CUDA_OPTIONS:
            continue
        sums, _ = hw.sweep(sp.name, 0, 1 << 32)
        arrays[f"digests_{key(sp.name)}"] = sums.get()
        arrays[f"sample_{key(sp.name)}"] = hw.run_sfu(sp.name, x)
        done.append(sp.name)
    compiled = {}
    if triton_ok:
        import torch
        from gpu.libraries import triton_sfu

        for sp in SPELLINGS:
            if sp.compiler != "triton":
                continue
            expr = sp.expr
            if sp.arity == 2:
                _, compiled[sp.name] = triton_sfu.run(expr, torch.ones(1024, device="cuda"))
                continue
            sums = np.zeros(256, np.uint64)
            step = 1 << 28
            for base in range(0, 1 << 32, step):
                xs = cp.arange(base, base + step, dtype=cp.uint64).astype(cp.uint32)
                o, c = triton_sfu.run(expr, torch.from_dlpack(xs.view(cp.float32)))
                compiled[sp.name] = c
                out = cp.from_dlpack(o).view(cp.uint32)
                for j in range(step // CHUNK):
                    sums[(base >> 24) + j] = np.uint64(hw.digest_device(out[j * CHUNK:(j + 1) * CHUNK],
                                                                        base + j * CHUNK))
            arrays[f"digests_{key(sp.name)}"] = sums
            o, _ = triton_sfu.run(expr, torch.from_dlpack(cp.asarray(x).view(cp.float32)))
            arrays[f"sample_{key(sp.name)}"] = cp.from_dlpack(o).view(cp.uint32).get()
            done.append(sp.name)
    meta["spellings"] = done
    log(f"spellings: {len(done)} unary swept")
    return compiled


# -------------------------------------------------------------------- raw dumps for model fitting
def binade(e: int, neg: bool = False) -> tuple[int, int]:
    return ((int(neg) << 31) | (e << 23), 1 << 23)


def dump_plan() -> list[tuple[str, int, int]]:
    p = []
    add = lambda instr, ranges: p.extend((instr, s, n) for s, n in ranges)
    add("rcp.approx.ftz.f32", [binade(127)])
    add("rsqrt.approx.ftz.f32", [binade(127), binade(128)])
    add("sqrt.approx.ftz.f32", [binade(127), binade(128)])
    add("lg2.approx.ftz.f32", [binade(126), binade(127), binade(128)])
    add("ex2.approx.ftz.f32", [binade(e, s) for e in (127, 126, 125, 124) for s in (False, True)])
    add("sin.approx.ftz.f32", [binade(e) for e in (125, 126, 127, 128, 129)])
    add("cos.approx.ftz.f32", [binade(e) for e in (125, 126, 127, 128, 129)])
    add("tanh.approx.f32", [binade(e) for e in range(118, 130)])
    add("rcp.approx.f32", [binade(0), binade(253), binade(254)])
    add("rsqrt.approx.f32", [binade(0)])
    add("sqrt.approx.f32", [binade(0)])
    add("lg2.approx.f32", [binade(0)])
    add("ex2.approx.f32", [binade(134, True)])
    add("ex2.approx.ftz.f32", [binade(134, True), binade(133, True), binade(133), binade(123), binade(123, True)])
    add("lg2.approx.ftz.f32", [binade(150), binade(100)])
    add("rcp.approx.ftz.f64", [(0x3FF00000, 1 << 20)])
    add("rsqrt.approx.ftz.f64", [(0x3FF00000, 1 << 21)])
    return p


def _encode(args):
    name, start, out = args
    d = np.diff(out.astype(np.int64)) if out.dtype != np.uint64 else np.diff(out.view(np.int64))
    for dt in (np.int8, np.int16, np.int32, np.int64):
        if d.size == 0 or (d.min() >= np.iinfo(dt).min and d.max() <= np.iinfo(dt).max):
            break
    blob = lzma.compress(d.astype(dt).tobytes(), preset=6)
    return {"name": name, "start": start, "count": out.size, "word": out.dtype.str,
            "first": int(out[0]), "diff": np.dtype(dt).str, "xz": blob}


def stage_dumps(log, dump_dir, budget=56 << 20):
    os.makedirs(dump_dir, exist_ok=True)
    plan = dump_plan()
    files, cur, cur_size, total = [], [], 0, 0
    with ProcessPoolExecutor(max_workers=12) as ex:
        futs = []
        for instr, start, count in plan:
            lo = 0
            _, out = hw.sweep(instr, start, count, lo=lo, raw=True)
            futs.append(ex.submit(_encode, (instr, start, out.get())))
        for f in futs:
            r = f.result()
            size = len(r["xz"])
            if total + size > budget:
                log(f"dump {r['name']} @{r['start']:#x}: {size} bytes over the budget, skipped")
                continue
            if cur_size + size > (14 << 20):
                files.append(cur)
                cur, cur_size = [], 0
            cur.append(r)
            cur_size += size
            total += size
            log(f"dump {r['name']} @{r['start']:#010x} x{r['count']}: {size} bytes ({r['diff']})")
    if cur:
        files.append(cur)
    for i, chunk in enumerate(files):
        with open(os.path.join(dump_dir, f"dumps_{i}.pkl"), "wb") as fh:
            pickle.dump(chunk, fh)
    log(f"dumps: {total} bytes in {len(files)} files")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--text", default=None, help="write PTX/SASS of every form and spelling here (json)")
    ap.add_argument("--dump", default=None, help="write raw dumps for model fitting into this folder")
    ap.add_argument("--stages", default="compile,sweeps,spellings,pairs,text,dumps")
    args = ap.parse_args(argv)
    require_device()
    t_start = time.time()
    log = lambda s: print(f"[{time.time() - t_start:7.1f}s] {s}", flush=True)
    stages = args.stages.split(",")
    prov = {**device_info(), **host_provenance(), "seed": SEED}
    for mod in ("torch", "triton"):
        try:
            prov[mod] = __import__(mod).__version__
        except Exception:
            prov[mod] = None
    log(json.dumps(prov))
    triton_ok = prov.get("triton") is not None and prov.get("torch") is not None
    fails = 0

    def run(name, fn, *a):
        nonlocal fails
        if name not in stages:
            return None
        try:
            return fn(*a)
        except Exception:
            fails += 1
            log(f"stage {name} FAILED:\n{traceback.format_exc()}")
            return None

    meta_c = run("compile", stage_compile, log) or {}
    arrays, meta = {}, {"forms": [f.instr for f in SFU_FORMS], "compile": meta_c}
    run("sweeps", stage_sweeps, log, arrays, meta)
    if any(k.startswith("digests_") or k.startswith("all_") for k in arrays):
        meta["scheme"] = FORMS_SCHEME
        write_fixture("sfu", "forms", arrays, kind="sfu_forms", cases=forms_cases(meta),
                      meta=meta, provenance=prov, root=args.out)
    arrays_s, meta_s = {}, {}
    compiled = run("spellings", stage_spellings, log, arrays_s, meta_s, triton_ok) or {}
    if arrays_s:
        meta_s.update(scheme="as sfu_forms: digests over all 2^32 float32 inputs x, samples at (j * 0x9E3779B1) mod 2^32; "
                             "CUDA spellings built with nvcc (options in spellings_options)",
                      sample_stride=SAMPLE_STRIDE, sample_n=SAMPLE_N,
                      spellings_options={k: list(v) for k, v in hw.CUDA_OPTIONS.items()})
        write_fixture("sfu", "spellings", arrays_s, kind="sfu_spellings", cases=len(meta_s["spellings"]) << 32,
                      meta=meta_s, provenance=prov, root=args.out)
    arrays_p, meta_p = {}, {}
    run("pairs", stage_pairs, log, arrays_p, meta_p, triton_ok)
    if arrays_p:
        meta_p["scheme"] = ("pairs_digests_<name>[c] = sum over j < pair_chunk of key(c * pair_chunk + j, out(a_j, b_j)), "
                            "(a, b) = refmodel.numerics.sfu.pairs.div_pairs(c, pair_seed); pairs_sample_<name>: "
                            "outputs of chunk 0's first pairs")
        write_fixture("sfu", "pairs", arrays_p, kind="sfu_pairs",
                      cases=len(meta_p["pair_names"]) * PAIR_CHUNKS * PAIR_CHUNK, meta=meta_p, provenance=prov,
                      root=args.out)
    if args.text:
        text = run("text", stage_text, log, compiled)
        if text is not None:
            text["compile"] = meta_c
            with open(args.text, "w") as fh:
                json.dump(text, fh, indent=1)
    if args.dump:
        run("dumps", stage_dumps, log, args.dump)
    log(f"done, {fails} stages failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
