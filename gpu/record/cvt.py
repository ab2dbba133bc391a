"""Record the cvt fixtures on an H200 and compare them with refmodel on the spot.

    python -m gpu.record.cvt --out fixtures            # everything (about a minute on an H200)

Writes fixtures/cvt/*.npz + manifest.json with provenance and prints a table of
outputs compared and mismatches per form.  Mismatching inputs (if any) are saved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from refmodel.numerics.cvt import CVT_FORMS
from refmodel.verify.families.f32 import adversarial_f32
from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.numerics.sweep import CHUNK, N_CHUNKS, SWEEP_FORMS, combine_digests, sweep_instr

from gpu.kernels import cvt as hw
from gpu.record.model_check import ModelMissingError, require_model
from gpu.kernels.runtime import device_info, require_device

model_cvt = None     # refmodel.numerics.cvt.cvt, set by main() (require_model)
sweep_digests = None  # refmodel.numerics.sweep.sweep_digests, set by main()

SEED = 20261129
SAMPLE_STRIDE = 16411  # sample x = i * stride mod 2**32 (odd: a permutation of all inputs)
SAMPLE_N = 1 << 18


def _diff(name, hw_out, ref, rows, bad_store, inputs):
    mism = np.flatnonzero(hw_out.reshape(-1) != ref.reshape(-1))
    rows.append((name, hw_out.size, mism.size))
    if mism.size:
        bad_store[name] = {k: v.reshape(-1)[mism[:4096]] for k, v in inputs.items()}
        bad_store[name]["hw"] = hw_out.reshape(-1)[mism[:4096]]
        bad_store[name]["ref"] = ref.reshape(-1)[mism[:4096]]
    return mism.size


def _hw_digests(cp, run, workers):
    """Hash the GPU's sweep output chunk by chunk; returns (digests, halves_bad)."""
    buf = cp.empty(CHUNK * 16, dtype=cp.uint8)
    digests = [None] * N_CHUNKS
    halves_bad = 0
    with ThreadPoolExecutor(max_workers=workers) as ex:
        futs = []
        for c0 in range(0, N_CHUNKS, 16):
            out, bad = run(c0 * CHUNK, CHUNK * 16, buf)
            host = cp.asnumpy(out)
            halves_bad += int(bad.get()[0])
            for j in range(16):
                futs.append((c0 + j, ex.submit(lambda b: hashlib.sha256(b).hexdigest(),
                                               host[j * CHUNK:(j + 1) * CHUNK])))
        for c, f in futs:
            digests[c] = f.result()
    return digests, halves_bad


def record_sweeps(prov, out_dir, rows, bad_store, workers, nosat=True):
    cp = require_device()
    sample_x = (np.arange(SAMPLE_N, dtype=np.uint64) * SAMPLE_STRIDE % (1 << 32)).astype(np.uint32)
    arrays, meta_forms = {}, []
    plans = [(fmt, relu, True) for fmt, relu in SWEEP_FORMS]
    if nosat:
        try:
            hw.sweep_nosat("e4m3", 0, 16)
            plans += [("e4m3", False, False), ("e5m2", False, False)]
        except Exception as e:  # cuda_fp8.h not reachable by NVRTC here
            print(f"cuda_fp8.h NOSAT reference skipped: {e.__class__.__name__}: {str(e)[:300]}")
    for fmt, relu, sat in plans:
        if sat:
            instr = sweep_instr(fmt, relu)
            run = lambda base, n, buf, instr=instr: hw.sweep_f32(instr, base, n, buf)
        else:
            instr = f"cuda_fp8.h __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_{fmt.upper()})"
            run = lambda base, n, buf, fmt=fmt: hw.sweep_nosat(fmt, base, n, buf)
        t0 = time.time()
        digests, halves_bad = _hw_digests(cp, run, workers)
        total = combine_digests(digests)
        t_hw = time.time() - t0
        t0 = time.time()
        ref_digests, _ = sweep_digests(fmt, relu, workers=workers, saturate=sat)
        t_ref = time.time() - t0
        bad_chunks = [c for c in range(N_CHUNKS) if digests[c] != ref_digests[c]]
        rows.append((f"{instr[:46]} (2^32)", 1 << 32, len(bad_chunks) * CHUNK if bad_chunks else 0))
        print(f"{instr}: hw {t_hw:.1f}s ref {t_ref:.1f}s halves-differ {halves_bad} "
              f"chunk mismatches {len(bad_chunks)} {bad_chunks[:16]}", flush=True)
        key = f"{fmt}{'_relu' if relu else ''}{'' if sat else '_nosat'}"
        for c in bad_chunks[:4]:  # keep the exact mismatching inputs of the first bad chunks
            got = cp.asnumpy(run(c * CHUNK, CHUNK, cp.empty(CHUNK, dtype=cp.uint8))[0])
            from refmodel.numerics.sweep import sweep_chunk
            ref = sweep_chunk(fmt, relu, c, saturate=sat)
            x = (np.arange(CHUNK, dtype=np.uint64) + c * CHUNK).astype(np.uint32)
            _diff(f"{key} chunk {c}", got, ref, [], bad_store, {"a": x})
        arrays[f"digests_{key}"] = np.frombuffer(b"".join(bytes.fromhex(d) for d in digests),
                                                 dtype=np.uint8).reshape(N_CHUNKS, 32)
        if sat:
            arrays[f"sample_{key}"] = (hw.run_cvt(instr, sample_x, sample_x) >> 8).astype(np.uint8)
        meta_forms.append({"instr": instr, "key": key, "fmt": fmt, "relu": relu, "saturate": sat,
                           "sha256": total, "halves_differ": halves_bad,
                           "hw_seconds": round(t_hw, 2)})
    meta = {"forms": meta_forms, "chunk": CHUNK, "sample_stride": SAMPLE_STRIDE,
            "sample_n": SAMPLE_N,
            "scheme": "out[x] = cvt(x, x) >> 8 for x = 0..2^32-1; sha256 per 2^24 chunk; "
                      "total = sha256(concatenated chunk digests); sample_<key>[i] = out[i*stride mod 2^32]"}
    write_fixture("cvt", "f32_fp8_sweep", arrays, kind="cvt_sweep",
                  cases=len(plans) << 32, meta=meta, provenance=prov, root=out_dir)


def record_elementwise(prov, out_dir, rows, bad_store, name, forms, a, b=None, extra_meta=None):
    arrays = {"a": a}
    if b is not None:
        arrays["b"] = b
    instrs = []
    for i, f in enumerate(forms):
        got = hw.run_cvt(f.instr, a, b)
        ref = model_cvt(f.instr, a, b)
        inputs = {"a": a} if b is None else {"a": a, "b": b}
        _diff(f.instr, got, ref, rows, bad_store, inputs)
        arrays[f"d{i}"] = got
        instrs.append(f.instr)
    meta = {"forms": instrs}
    meta.update(extra_meta or {})
    write_fixture("cvt", name, arrays, kind="cvt", cases=len(forms) * a.size, meta=meta,
                  provenance=prov, root=out_dir)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="fixtures", help="fixtures root to write into")
    ap.add_argument("--no-sweep", action="store_true", help="skip the 2^32 sweeps")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--bad", default=None, help="where to save mismatching inputs (.npz)")
    args = ap.parse_args(argv)
    global model_cvt, sweep_digests
    try:
        model_cvt = require_model("refmodel.numerics.cvt", "cvt")
        sweep_digests = require_model("refmodel.numerics.sweep", "sweep_digests")
    except ModelMissingError as e:
        print(f"gpu.record.cvt: error: {e}", file=sys.stderr)
        return 2
    info = device_info()
    prov = {**info, **host_provenance(), "seed": SEED}
    print(json.dumps(prov), flush=True)
    rows, bad_store = [], {}
    rng = np.random.default_rng(SEED)
    t0 = time.time()

    # f16x2 -> f8x2: every f16 value through both halves (second half a permutation)
    v = np.arange(1 << 16, dtype=np.uint32)
    w = (v * 0x9E37 + 0x1234) & 0xFFFF
    a16 = (v << 16) | w
    f16_forms = [f for f in CVT_FORMS if f.src == "f16x2"]
    record_elementwise(prov, args.out, rows, bad_store, "f16x2_to_f8x2", f16_forms, a16,
                       extra_meta={"inputs": "a = v<<16 | (v*0x9E37+0x1234)&0xFFFF, v = 0..65535"})
    # f8x2 -> f16x2: every byte pair
    a8 = np.arange(1 << 16, dtype=np.uint16)
    f8_forms = [f for f in CVT_FORMS if f.dst == "f16x2" and f.src != "f32"]
    record_elementwise(prov, args.out, rows, bad_store, "f8x2_to_f16x2", f8_forms, a8,
                       extra_meta={"inputs": "every 16-bit pattern"})
    # f32 -> f8x2 and f32 -> f16x2/bf16x2 on adversarial pairs
    n = 1 << 17
    a = adversarial_f32(rng, n)
    b = adversarial_f32(rng, n)
    f32_f8 = [f for f in CVT_FORMS if f.src == "f32" and f.dst in ("e4m3x2", "e5m2x2")]
    record_elementwise(prov, args.out, rows, bad_store, "f32_to_f8x2", f32_f8, a, b,
                       extra_meta={"inputs": "adversarial_f32 pairs", "seed": SEED})
    f32_h2 = [f for f in CVT_FORMS if f.src == "f32" and f.dst in ("f16x2", "bf16x2")]
    record_elementwise(prov, args.out, rows, bad_store, "f32_to_f16x2_bf16x2", f32_h2, a, b,
                       extra_meta={"inputs": "adversarial_f32 pairs", "seed": SEED})
    # a larger unrecorded sample, compared on the spot
    big_a = adversarial_f32(rng, 1 << 23)
    big_b = adversarial_f32(rng, 1 << 23)
    for f in f32_f8 + f32_h2:
        _diff(f.instr + " (2^23 unrecorded)", hw.run_cvt(f.instr, big_a, big_b),
              model_cvt(f.instr, big_a, big_b), rows, bad_store, {"a": big_a, "b": big_b})
    print(f"elementwise done in {time.time() - t0:.1f}s", flush=True)
    if not args.no_sweep:
        record_sweeps(prov, args.out, rows, bad_store, args.workers)
    print(f"\n{'form':<58} {'outputs':>12} {'mismatches':>11}")
    total_bad = 0
    for name, cnt, bad in rows:
        print(f"{name:<58} {cnt:>12} {bad:>11}")
        total_bad += bad if isinstance(bad, int) else int(str(bad).split()[0])
    if bad_store and args.bad:
        flat = {f"{k}|{kk}": vv for k, d in bad_store.items() for kk, vv in d.items()}
        np.savez_compressed(args.bad, **flat)
    print(f"TOTAL mismatches: {total_bad}  ({time.time() - t0:.1f}s)")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
