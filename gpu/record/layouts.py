"""Layout campaign: ldmatrix/stmatrix, wgmma through raw descriptors, the stmatrix epilogue,
TMA tile loads — run on the H200, compared with refmodel.machine bit for bit, recorded.

    python -m gpu.record.layouts --out fixtures            # record (fails loudly on any mismatch)
    python -m gpu.record.layouts --out DIR --explore       # save everything, report, never fail

Cases are drawn from a fixed seed (``--seed``).  wgmma cases draw random descriptors for A
and B independently: swizzle mode, major (f16/bf16), canonical or deliberately wrong
LBO/SBO, starts aligned to the swizzle period, advanced by 32-byte K steps inside a
swizzle row, or anywhere (16-byte aligned), base offsets 0..7 — every read kept inside
the image, so the model must predict the hardware's answer for wrong descriptors too.
Every case is compared on the device; ``--store`` says how many of each launch are kept as
fixtures (the rest count in the summary but are not stored, to keep fixtures/ compact).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from refmodel.layouts.stmatrix import parse_matrix_instr
from refmodel.layouts.swizzle import MODES
from refmodel.verify.replay_layouts import epilogue_model, matrix_model, tma_model, wgmma_model
from refmodel.verify.layout_cases import (  # noqa: F401  (the recorder's cases)
    EPILOGUE_CONFIGS, FRAGMENT_INSTRS, IMAGE, MATRIX_IMAGE, MATRIX_INSTRS, SEED, TMA_SMEM,
    WGMMA_VARIANTS, epilogue_cases, fragment_cases, matrix_cases, tma_fault_cases, tma_plan,
    tma_tensor, wgmma_cases)

FEATURE = "layouts"


# ----------------------------------------------------------------------------- ldmatrix / stmatrix


# ----------------------------------------------------------------------------- wgmma via descriptors


# ----------------------------------------------------------------------------- epilogue


# ----------------------------------------------------------------------------- TMA


def _fault_child(case_json: str) -> None:
    """Run one TMA case; print MATCH/DIFF (the process dies with the device on a fault)."""
    from gpu.kernels import layouts as hw
    c = json.loads(case_json)
    t = tma_tensor(c["elem_bytes"])
    imgs, bases = hw.run_tma(t, [c], TMA_SMEM)
    from refmodel.machine.tma import tma_load

    m = tma_load(t, tuple(c["box"]), tuple(c["coords"]), c["mode"], dst=c["dst"], smem_size=TMA_SMEM,
                 smem_base=int(bases[0]))
    print("MATCH" if np.array_equal(imgs[0], m) else "DIFF")


# ----------------------------------------------------------------------------- fragments


# ----------------------------------------------------------------------------- campaign

def _mismatch(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.count_nonzero(np.asarray(got) != np.asarray(want)))


def _take(arrays: dict[str, Any], k: int) -> dict[str, Any]:
    """The first ``k`` cases of every per-case array (the stored subset)."""
    return {key: (v[:k] if isinstance(v, (np.ndarray, list)) else v) for key, v in arrays.items()}


def run(out: Path, *, explore: bool, matrix_n: int, wgmma_n: int, epi_n: int, store: dict[str, int],
        only: list[str] | None, compare: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every part; compare with refmodel; store the first ``store[part]`` cases of each
    launch as fixtures (all of them with ``explore``)."""
    from gpu.kernels import layouts as hw
    from gpu.kernels.runtime import device_info
    from refmodel.layouts.descriptor import BASE_OFFSET_RULE
    from refmodel.verify.fixtures import host_provenance, write_fixture

    prov = {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record.layouts"}
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"outputs": 0, "mismatches": 0, "stored": 0, "items": []}

    def note(name, n_out, mm, info=""):
        summary["outputs"] += n_out
        summary["mismatches"] += mm
        summary["items"].append({"name": name, "outputs": n_out, "mismatches": mm, "info": info})
        log(f"{name:<64} {n_out:>10} outputs  {mm:>8} mismatches {info}")

    def save(part, name, arrays, kind, meta, cases_out):
        if explore:
            np.savez_compressed(out / f"{name}.npz", **arrays)
            (out / f"{name}.json").write_text(json.dumps(meta))
            return
        summary["stored"] += cases_out
        write_fixture(FEATURE, name, arrays, kind=kind, cases=cases_out, meta=meta, provenance=prov, root=out)

    if not only or "matrix" in only:
        for instr in MATRIX_INSTRS:
            f = parse_matrix_instr(instr)
            arr = matrix_cases(instr, matrix_n)
            regs, imgs, bases = hw.run_matrix(instr, arr["images"], arr["addrs"],
                                              arr["regs"] if f.op == "stmatrix" else None)
            mregs, mimgs = matrix_model(instr, arr) if compare else (regs, imgs)
            key, hw_out, model_out = (("hw_regs", regs, mregs) if f.op == "ldmatrix" else ("hw_images", imgs, mimgs))
            # outputs: register halves loaded, or bytes stored (the whole image is compared)
            per_case = 64 * f.num if f.op == "ldmatrix" else 128 * f.num
            note(instr, per_case * matrix_n, _mismatch(hw_out, model_out))
            k = matrix_n if explore else store["matrix"]
            keep = _take({**arr, key: hw_out, "bases": bases}, k)
            save("matrix", f"matrix_{f.op}_x{f.num}{'_trans' if f.trans else ''}", keep, "matrix",
                 {"instr": instr}, per_case * k)

    if not only or "wgmma" in only:
        for vi, v in enumerate(WGMMA_VARIANTS):
            instr, rs, ta, tb, sa, sb = v
            var = hw.WgmmaVariant(instr, rs, ta, tb, sa, sb)
            arr = wgmma_cases(v, wgmma_n)
            notes = arr.pop("notes")
            dregs, bases = hw.run_wgmma_desc(var, arr["images"], arr["desc_a"], arr["desc_b"],
                                             arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
            rules = ("ignore", "subtract", "add", "xor") if explore else (BASE_OFFSET_RULE,)
            per_rule = {}
            for rule in (rules if compare else ()):
                m = wgmma_model(v, arr, bases, rule=rule)
                per_rule[rule] = _mismatch(dregs, m)
                per_rule[rule + "_cases"] = [i for i in range(wgmma_n) if not np.array_equal(dregs[i], m[i])][:20]
            label = f"{instr.split('aligned.')[1]} rs={int(rs)} trans={ta}{tb} scale={sa},{sb}"
            note(label, dregs.size, per_rule.get(BASE_OFFSET_RULE, 0),
                 json.dumps({r: per_rule[r] for r in rules if r in per_rule}) if explore else "")
            k = wgmma_n if explore else store["wgmma"]
            keep = _take({**arr, "hw_d_regs": dregs, "bases": bases}, k)
            meta = {"instr": instr, "rs": rs, "trans_a": ta, "trans_b": tb, "imm_scale_a": sa,
                    "imm_scale_b": sb, "notes": notes[:k]}
            save("wgmma", f"wgmma_desc_{vi:02d}", keep, "wgmma_desc", meta, int(keep["hw_d_regs"].size))

    if not only or "epilogue" in only:
        for cfg in EPILOGUE_CONFIGS:
            n, t, b = cfg
            arr = epilogue_cases(cfg, epi_n)
            imgs, laddr, bases = hw.run_epilogue(arr["acc"], n, t, b)
            mimgs, maddr = epilogue_model(cfg, arr, bases) if compare else (imgs, laddr)
            mm = _mismatch(imgs, mimgs) + _mismatch(laddr, maddr)
            note(f"epilogue n{n} {t} swizzle {[m.name for m in MODES if m.bits == b][0]}", imgs.size + laddr.size, mm)
            k = epi_n if explore else store["epilogue"]
            keep = _take({"acc": arr["acc"], "hw_images": imgs, "hw_addrs": laddr, "bases": bases}, k)
            save("epilogue", f"epilogue_n{n}_{t}_sw{b}", keep, "epilogue",
                 {"n": n, "out_type": t, "swizzle_bits": b}, int(keep["hw_images"].size + keep["hw_addrs"].size))

    if not only or "tma" in only:
        groups = tma_plan()
        tensors = {eb: tma_tensor(eb) for eb in (1, 2, 4)}
        kept_cases, kept_imgs, kept_bases, kept_eb = [], [], [], []
        for g in groups:
            eb = g["elem_bytes"]
            imgs, bases = hw.run_tma(tensors[eb], g["cases"], TMA_SMEM)
            m = tma_model(tensors[eb], g["cases"], bases, TMA_SMEM) if compare else imgs
            bad = [i for i in range(len(imgs)) if not np.array_equal(imgs[i], m[i])]
            c0 = g["cases"][0]
            box_bytes = c0["box"][0] * c0["box"][1] * eb  # bytes written (the whole image is compared)
            note(f"tma e{eb} box {c0['box']} {c0['mode']}", box_bytes * len(imgs), _mismatch(imgs, m),
                 json.dumps(bad) if bad else "")
            k = len(imgs) if explore else store["tma"]
            kept_cases += g["cases"][:k]
            kept_imgs.append(imgs[:k])
            kept_bases.append(bases[:k])
            kept_eb += [eb] * min(k, len(imgs))
        imgs = np.concatenate(kept_imgs)
        save("tma", "tma_loads", {"tensor_1": tensors[1], "tensor_2": tensors[2], "tensor_4": tensors[4],
                                  "hw_images": imgs, "bases": np.concatenate(kept_bases),
                                  "elem_bytes": np.array(kept_eb, np.int32)}, "tma",
             {"cases": kept_cases, "smem": TMA_SMEM},
             int(sum(c["box"][0] * c["box"][1] * e for c, e in zip(kept_cases, kept_eb))))
    if not only or "fragments" in only:
        from refmodel.verify.replay_layouts import fragment_identity_errors

        for instr in FRAGMENT_INSTRS:
            for rs in (False, True):
                v = (instr, rs, 0, 0, 1, 1)
                arr = fragment_cases(instr)
                d, bases = hw.run_wgmma_desc(hw.WgmmaVariant(*v), arr["images"], arr["desc_a"], arr["desc_b"],
                                             arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
                m = wgmma_model(v, arr, bases) if compare else d
                ident = fragment_identity_errors(instr, arr["a_tags"], d)
                note(f"fragments {instr.split('aligned.')[1]} rs={int(rs)} (D = tagged A)", d.size,
                     _mismatch(d, m) + ident)
                save("fragments", f"fragments_{instr.split('aligned.')[1].replace('.', '_')}_{'rs' if rs else 'ss'}",
                     {**arr, "hw_d_regs": d, "bases": bases}, "fragments",
                     {"instr": instr, "rs": rs, "trans_a": 0, "trans_b": 0, "imm_scale_a": 1, "imm_scale_b": 1},
                     int(d.size))

    if not only or "tma_faults" in only:
        import subprocess

        results = []
        for c in tma_fault_cases():
            r = subprocess.run([sys.executable, "-m", "gpu.record.layouts", "--fault-child", json.dumps(c)],
                               capture_output=True, text=True, timeout=120)
            text = r.stdout + r.stderr
            outcome = ("fault" if "cudaErrorIllegalInstruction" in text or "ILLEGAL_INSTRUCTION" in text
                       else "match" if "MATCH" in r.stdout else "diff" if "DIFF" in r.stdout else "error")
            results.append({**c, "outcome": outcome})
            log(f"tma fault probe e{c['elem_bytes']} {c['mode']} col0={c['coords'][1]:>3}: {outcome}")
            if outcome in ("diff", "error"):
                summary["mismatches"] += 1
        summary["outputs"] += len(results)
        if not explore:
            (out / FEATURE).mkdir(parents=True, exist_ok=True)
        save("tma_faults", "tma_faults", {"outcomes": np.array([r["outcome"] for r in results])}, "tma_faults",
             {"cases": results}, len(results))
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--explore", action="store_true", help="save everything; report mismatches, never fail")
    p.add_argument("--matrix-cases", type=int, default=256)
    p.add_argument("--wgmma-cases", type=int, default=256)
    p.add_argument("--epilogue-cases", type=int, default=16)
    p.add_argument("--store", default="matrix=16,wgmma=10,epilogue=1,tma=2",
                   help="cases of each launch kept as fixtures (the rest is compared, not stored)")
    p.add_argument("--only", nargs="*", choices=["matrix", "wgmma", "epilogue", "tma", "tma_faults", "fragments"])
    p.add_argument("--fault-child", help=argparse.SUPPRESS)
    p.add_argument("--no-model", action="store_true", help="(with --explore) record only, compare later")
    a = p.parse_args(argv)
    if a.fault_child:
        _fault_child(a.fault_child)
        return 0
    store = {"matrix": 16, "wgmma": 10, "epilogue": 1, "tma": 2}
    for item in a.store.split(","):
        key, _, val = item.partition("=")
        if key not in store or not val.isdigit():
            p.error(f"--store takes part=count pairs for {', '.join(store)}, got {item!r}")
        store[key] = int(val)
    t0 = time.time()
    s = run(Path(a.out), explore=a.explore, matrix_n=a.matrix_cases, wgmma_n=a.wgmma_cases,
            epi_n=a.epilogue_cases, store=store, only=a.only, compare=not a.no_model)
    print(f"layouts: {s['outputs']} hardware outputs compared, {s['mismatches']} mismatches, "
          f"{s['stored']} stored as fixtures ({time.time() - t0:.0f} s)")
    if a.explore:
        (Path(a.out) / "summary.json").write_text(json.dumps(s, indent=1))
        return 0
    if a.no_model:
        print("layouts: --no-model only records; nothing was compared", file=sys.stderr)
        return 1
    if s["mismatches"]:
        print("layouts: FAILED: refmodel disagrees with the hardware (fixtures written for inspection)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
