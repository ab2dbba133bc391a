"""Sparse wgmma campaign on the H200: probes of the sp-meta layout, the numerics and illegal
metadata, recorded raw (``--explore``) or compared with refmodel and stored as fixtures.

    python -m gpu.record.sparse --out DIR --explore      # record everything, compare later
    python -m gpu.record.sparse --out fixtures           # compare with refmodel, store fixtures

Probes use *tags*: the compressed A holds distinct small values, B is the identity
(K x N with N = K) and C = 0, so D[m, n] is the tag of the compressed element the hardware
placed at K index n (a sum when two land there): the metadata the hardware read can be read
back from D.  Numerics cases use random operand families with legal metadata.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from refmodel.wgmma_sp_forms import parse_wgmma_sp
from refmodel.verify.sparse_cases import (  # noqa: F401  (the recorder's cases)
    B_OFFSET, CHAINS, IMAGE, LEGAL_24, LEGAL_TF32, NUMERICS, PROBES, SEED, TILES, _rng, chain_cases,
    descriptors, images_for, inputs_from_math, job_inputs, numerics_cases, plan_jobs, probe_cases,
    tf32_probe_cases)


def explore(out: Path, cases: int) -> None:
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    out.mkdir(parents=True, exist_ok=True)

    def run(v, arr):
        return run_wgmma_sp(v, arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"], arr["c_regs"],
                            arr["scale_d"], arr["a_regs"] if v.rs else None)

    for i, (instr, rs, sel) in enumerate(PROBES):
        v = SpVariant(instr, rs, sel)
        for illegal in (False, True):
            arr = probe_cases(instr, cases, illegal=illegal, tag="x")
            d, bases = run(v, arr)
            d2, _ = run(v, arr)  # repeat: deterministic?
            np.savez_compressed(out / f"probe_{i:02d}_{'illegal' if illegal else 'legal'}.npz", **arr, hw=d, hw2=d2,
                                bases=bases, config=np.array(json.dumps({"instr": instr, "rs": rs, "sp_sel": sel})))
            print(f"probe {instr.split('aligned.')[1]} rs={int(rs)} sel={sel} illegal={illegal}: "
                  f"repeat identical={np.array_equal(d, d2)}", flush=True)
    for i, (instr, rs, sel, sa, sb) in enumerate(NUMERICS):
        v = SpVariant(instr, rs, sel, 0, 0, sa, sb)
        arr = numerics_cases(instr, cases, "x")
        d, bases = run(v, arr)
        np.savez_compressed(out / f"num_{i:02d}.npz", **arr, hw=d, bases=bases,
                            config=np.array(json.dumps({"instr": instr, "rs": rs, "sp_sel": sel,
                                                        "imm_scale_a": sa, "imm_scale_b": sb})))
        print(f"numerics {instr.split('aligned.')[1]} rs={int(rs)}: {d.size} outputs", flush=True)


# ----------------------------------------------------------------------------- recording

ROWS, COLS = 8, 8           # per stored tile: D[rows, cols] with A_c rows, meta rows, B columns, C


def record(out: Path, *, workers: int = 16, log=print) -> int:
    """Run every job on the GPU, compare every output with refmodel.wgmma_sp, store compact
    samples (fixtures/sparse/forms_<family>.npz) and the probes (fixtures/sparse/probe_*.npz)."""

    from refmodel.dtypes import bits_of
    from refmodel.layouts.fragment import unpack_accumulator
    from refmodel.verify.fixtures import host_provenance, write_fixture
    from refmodel.verify.replay_sparse import probe_model

    from gpu.kernels.runtime import device_info
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp, sp_kernel_source

    prov = {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record.sparse"}
    jobs = plan_jobs()
    variants = [SpVariant(j["instr"], j["rs"], j["sp_sel"], 0, 0, j["imm_scale_a"], j["imm_scale_b"]) for j in jobs]
    if workers > 0:  # NVRTC in a process pool fills the disk cubin cache; launches then load from it
        from gpu.kernels.runtime import compile_in_processes

        secs = compile_in_processes([sp_kernel_source(v) for v in variants], workers, chunksize=8)
        log(f"compiled {len(variants)} sparse kernels in {secs:.1f}s")
    from refmodel.numerics.sparse import wgmma_sp

    groups: dict[str, dict[str, list]] = {}
    compared = mismatches = 0
    per_form: dict[str, int] = {}
    for job, v in zip(jobs, variants):
        f = parse_wgmma_sp(job["instr"])
        x = job_inputs(job)
        d_regs, bases = run_wgmma_sp(v, x["images"], x["desc_a"], x["desc_b"], x["meta_regs"], x["c_regs"],
                                     np.full(TILES, job["scale_d"], np.int32), x["a_regs"] if job["rs"] else None)
        hw = unpack_accumulator(d_regs, f.n, f.dtype_d)
        model = wgmma_sp(job["instr"], x["a"], x["meta"], x["b"], x["c"], sp_sel=job["sp_sel"],
                         scale_d=bool(job["scale_d"]), imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"])
        bad = int(np.count_nonzero(bits_of(hw) != bits_of(model)))
        compared += hw.size
        mismatches += bad
        per_form[job["instr"]] = per_form.get(job["instr"], 0) + hw.size
        if bad:
            log(f"MISMATCH {job}: {bad} of {hw.size}")
        rng = _rng("sample", job["instr"], job["rs"])
        g = groups.setdefault(f"{f.family}_{f.dtype_d}", {k: [] for k in ("a", "meta", "b", "c", "d", "rows", "cols")})
        g.setdefault("jobs", []).append(job)
        for t in (0, 5):
            rows = np.sort(rng.choice(64, ROWS, replace=False))
            cols = np.sort(rng.choice(f.n, min(f.n, COLS), replace=False))
            g["a"].append(bits_of(x["a"][t])[rows])
            g["meta"].append(x["meta"][t][rows])
            g["b"].append(bits_of(x["b"][t])[:, cols])
            g["c"].append(bits_of(x["c"][t])[np.ix_(rows, cols)])
            g["d"].append(bits_of(hw[t])[np.ix_(rows, cols)])
            g["rows"].append(rows.astype(np.uint8))
            g["cols"].append(cols.astype(np.uint16))
    log(f"{len(jobs)} jobs, {len(per_form)} sparse forms, {compared} hardware outputs compared with refmodel: "
        f"{mismatches} mismatches")
    if mismatches:
        log("sparse: FAILED: refmodel disagrees with the hardware; nothing written")
        return 1
    for name, g in groups.items():
        arrays = {}
        for k in ("a", "meta", "b", "c", "d"):   # ragged across forms: concatenated flat, shapes in meta
            arrays[k] = np.concatenate([x.ravel() for x in g[k]])
        arrays["rows"] = np.concatenate(g["rows"])
        arrays["cols"] = np.concatenate(g["cols"])
        stored = int(sum(x.size for x in g["d"]))
        write_fixture("sparse", f"forms_{name}", arrays, kind="sparse_forms", cases=stored,
                      meta={"jobs": g["jobs"], "tiles_per_job": 2, "rows": ROWS, "cols": COLS,
                            "compared_on_device": int(sum(per_form[j["instr"]] for j in g["jobs"]) // 2)},
                      provenance=prov, root=out)
        log(f"wrote sparse/forms_{name}.npz: {len(g['jobs'])} jobs, {stored} outputs")
    # probes: the sp-meta layout, illegal nibbles, tf32 with random tags
    nprobe = 0
    for i, (instr, rs, sel) in enumerate(PROBES):
        v = SpVariant(instr, rs, sel)
        for illegal in (False, True):
            arr = probe_cases(instr, 4, illegal=illegal, tag="rec")
            d, bases = run_wgmma_sp(v, arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"], arr["c_regs"],
                                    arr["scale_d"], arr["a_regs"] if rs else None)
            cfg = {"instr": instr, "rs": rs, "sp_sel": sel}
            m = probe_model(cfg, arr, bases)
            bad = int(np.count_nonzero(m != d))
            log(f"probe {instr.split('aligned.')[1]} rs={int(rs)} sel={sel} illegal={illegal}: {bad} mismatches")
            mismatches += bad
            write_fixture("sparse", f"probe_{i:02d}_{'any' if illegal else 'legal'}", {**arr, "hw": d, "bases": bases},
                          kind="sparse_probe", cases=int(d.size), meta=cfg, provenance=prov, root=out)
            nprobe += d.size
    for illegal in (False, True):
        instr = "wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32"
        arr = tf32_probe_cases(8, illegal=illegal)
        v = SpVariant(instr, False, 0)
        d, bases = run_wgmma_sp(v, arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"], arr["c_regs"],
                                arr["scale_d"], None)
        cfg = {"instr": instr, "rs": False, "sp_sel": 0}
        m = probe_model(cfg, arr, bases)
        bad = int(np.count_nonzero(m != d))
        log(f"probe tf32 random tags illegal={illegal}: {bad} mismatches")
        mismatches += bad if not illegal else 0   # the illegal tf32 rule is being established
        write_fixture("sparse", f"probe_tf32_random_{'any' if illegal else 'legal'}", {**arr, "hw": d, "bases": bases},
                      kind="sparse_probe", cases=int(d.size), meta={**cfg, "established": not illegal},
                      provenance=prov, root=out)
    log(f"probes: {nprobe} outputs")
    return 1 if mismatches else 0


def record_chains(out: Path | None, cases: int = 8, log=print) -> int:
    """Sparse chains on the GPU vs refmodel.numerics.sparse.gemm_sp; stored as fixtures when ``out``."""
    from refmodel.dtypes import bits_of
    from refmodel.layouts.fragment import unpack_accumulator
    from refmodel.numerics.sparse import gemm_sp

    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    bad_total = 0
    prov = None
    for instr, rs, sel, chain in CHAINS:
        f = parse_wgmma_sp(instr)
        x = chain_cases(instr, rs, sel, chain, cases)
        v = SpVariant(instr, rs, sel, chain=chain)
        d, _ = run_wgmma_sp(v, x["images"], x["desc_a"], x["desc_b"], x["meta_regs"], x["c_regs"],
                            np.ones(cases, np.int32), x["a_regs"] if rs else None, a_step=x["a_step"], b_step=x["b_step"])
        hw = unpack_accumulator(d, f.n, f.dtype_d)
        model = np.stack([gemm_sp(instr, x["a"][i], x["meta"][i], x["b"][i], x["c"][i], sp_sel=sel) for i in range(cases)])
        bad = int(np.count_nonzero(bits_of(hw) != bits_of(model.astype(hw.dtype))))
        bad_total += bad
        log(f"chain {chain} x {instr.split('aligned.')[1]} rs={int(rs)} sel={sel}: {hw.size} outputs, {bad} mismatches")
        if out is not None and not bad:
            from refmodel.verify.fixtures import host_provenance, write_fixture

            from gpu.kernels.runtime import device_info

            prov = prov or {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record.sparse"}
            write_fixture("sparse", f"chain_{instr.split('aligned.')[1].replace('.', '_')}",
                          {"a": bits_of(x["a"]), "meta": x["meta"], "b": bits_of(x["b"]), "c": bits_of(x["c"]),
                           "d": bits_of(hw)}, kind="sparse_chain", cases=int(hw.size),
                          meta={"instr": instr, "rs": rs, "sp_sel": sel, "chain": chain}, provenance=prov, root=out)
    return 1 if bad_total else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--explore", action="store_true")
    p.add_argument("--cases", type=int, default=32)
    p.add_argument("--chains", action="store_true", help="only the chain check (and its fixtures)")
    a = p.parse_args(argv)
    if a.chains:
        from refmodel.numerics.sparse import gemm_sp  # noqa: F401  the model must exist

        return record_chains(Path(a.out))
    t0 = time.time()
    if a.explore:
        explore(Path(a.out), a.cases)
        print(f"sparse explore: done in {time.time() - t0:.0f} s")
        return 0
    from refmodel.verify.replay_sparse import probe_model  # noqa: F401  the model must exist (fail loudly)

    rc = record(Path(a.out))
    print(f"sparse: done in {time.time() - t0:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
