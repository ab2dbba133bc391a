"""Record torch.compile(mode="max-autotune") FP8 ``torch._scaled_mm`` calls on the H200: Inductor's generated
source and the outputs, for refmodel.golden.inductor.

    python -m gpu.record.inductor --out DIR [--seconds S] [--only NAME,...]

Each call (:data:`CALLS`: tensor-wise scales with and without fast accumulation, row-wise scales; small and
large M) runs in a fresh process (Inductor's autotuner keeps no state across them) with Triton templates only
(``max_autotune_gemm_backends="TRITON"``), on inputs from refmodel.verify.seeded_mma.matrix_codes (the narrow
and cancel families) and seeded scales.  ``DIR/inductor_calls.json`` keeps, per call, the generated source,
the output's raw bits (hex of the little-endian bytes), and the versions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

# (name, scaling, use_fast_accum, M, K, N): the FP8 _scaled_mm calls (their seed index is 2 * position)
CALLS = [
    ("tensor_fast_m32", "tensor", True, 32, 512, 256),
    ("tensor_precise_m32", "tensor", False, 32, 512, 256),
    ("row_m32", "row", False, 32, 512, 256),
    ("tensor_fast_m256", "tensor", True, 256, 512, 256),
    ("tensor_precise_m256", "tensor", False, 256, 512, 256),
    ("row_m256", "row", False, 256, 512, 256),
    # the same call as tensor_precise_m256 (same inputs and scales) in fresh processes: does the pick change?
    ("tensor_precise_m256_rep1", "tensor", False, 256, 512, 256),
    ("tensor_precise_m256_rep2", "tensor", False, 256, 512, 256),
    ("tensor_precise_m256_rep3", "tensor", False, 256, 512, 256),
]
FAMILIES = ("narrow", "cancel")
SEED = 20261206

#: mm / addmm / bmm templates (and an activation epilogue, the persistent TMA template, and the same call in
#: fresh processes): name -> (op, dtype, shape (B, M, K, N), options).  Seed index base 100 + 8 * position.
TEMPLATE_CALLS = {
    "mm_bf16_m32": ("mm", "bf16", (1, 32, 512, 256), {}),
    "mm_f16_m256": ("mm", "f16", (1, 256, 512, 256), {}),
    "mm_tf32_m64": ("mm", "f32", (1, 64, 512, 256), {"allow_tf32": True}),
    "addmm_bf16_m64": ("addmm", "bf16", (1, 64, 512, 256), {}),
    "bmm_bf16_b4": ("bmm", "bf16", (4, 64, 256, 128), {}),
    "mm_relu_bf16_m64": ("mm_relu", "bf16", (1, 64, 512, 256), {}),
    "mm_bf16_m256_tma": ("mm", "bf16", (1, 256, 512, 256), {"persistent_tma": True}),
    "mm_bf16_m128_rep0": ("mm", "bf16", (1, 128, 1024, 256), {}),
    "mm_bf16_m128_rep1": ("mm", "bf16", (1, 128, 1024, 256), {}),
    "mm_bf16_m128_rep2": ("mm", "bf16", (1, 128, 1024, 256), {}),
}
TEMPLATE_FAMILIES = ("narrow", "cancel", "special", "wide")
_TORCH = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def template_key_base(name: str) -> int:
    """The seed index base of a :data:`TEMPLATE_CALLS` call (matrix_codes index = base + 8 * batch + family)."""
    import re

    return 100 + 64 * list(TEMPLATE_CALLS).index(re.sub(r"_rep\d+$", "_rep0", name))   # repeats: same inputs


def template_inputs(name: str, family_index: int) -> dict[str, np.ndarray]:
    """Codes (uint64) of a template call's operands in family ``family_index`` of TEMPLATE_FAMILIES: ``a``
    (B, M, K), ``b`` (B, K, N) and, for addmm, ``bias`` (N,) (refmodel.verify.seeded_mma.batch_codes)."""
    from refmodel.verify.seeded_mma import batch_codes

    op, dt, shape, _ = TEMPLATE_CALLS[name]
    return batch_codes(dt, TEMPLATE_FAMILIES[family_index], SEED, template_key_base(name) + family_index, shape,
                       bias=op == "addmm")


def scales(name: str, scaling: str, M: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 scales of a call: tensor-wise scalars (not powers of two) or row-wise (M, 1) and (1, N)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    if scaling == "tensor":
        return (np.float32(rng.uniform(0.1, 2.0)).reshape(()), np.float32(rng.uniform(0.1, 2.0)).reshape(()))
    return (rng.uniform(0.1, 2.0, (M, 1)).astype(np.float32), rng.uniform(0.1, 2.0, (1, N)).astype(np.float32))


def same_as(i: int) -> int:
    """The CALLS index whose inputs and scales call ``i`` uses (a ``_repN`` repeat: the call it repeats)."""
    import re

    base = re.sub(r"_rep\d+$", "", CALLS[i][0])
    return [c[0] for c in CALLS].index(base)


def inputs(i: int, j: int, M: int, K: int, N: int, family: str):
    """e4m3 codes of A (M, K) and B (K, N) of call i, family j."""
    from refmodel.verify.seeded_mma import matrix_codes

    return matrix_codes("e4m3", "e4m3", family, SEED, len(FAMILIES) * same_as(i) + j, (M, K, N))


def _inductor_config(opts: dict) -> dict:
    """Set Inductor's options for a recording (Triton templates only); returns what was set."""
    import torch
    import torch._inductor.config as cfg

    cfg.max_autotune_gemm_backends = "TRITON"
    done = {"max_autotune_gemm_backends": "TRITON"}
    torch.backends.cuda.matmul.allow_tf32 = bool(opts.get("allow_tf32", False))
    done["allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    if opts.get("persistent_tma"):
        cfg.triton.enable_persistent_tma_matmul = True
        done["enable_persistent_tma_matmul"] = True
    return done


def _joined(codes) -> str:
    return "\n\n# ----- next source -----\n\n".join(codes)


def _one(i: int) -> dict:
    """Run CALLS[i] in this process: compile with max-autotune (Triton templates only), run every family."""
    import torch
    from torch._inductor.utils import run_and_get_code

    _inductor_config({})
    name, scaling, fast, M, K, N = CALLS[i]
    sa, sb = scales(CALLS[same_as(i)][0], scaling, M, N)
    if scaling == "tensor":     # 0-d float32 tensors (np.ascontiguousarray would make them (1,): the 2026-12-06 run failed)
        tsa = torch.tensor(float(sa), dtype=torch.float32, device="cuda")
        tsb = torch.tensor(float(sb), dtype=torch.float32, device="cuda")
    else:
        tsa = torch.from_numpy(np.ascontiguousarray(sa)).cuda()
        tsb = torch.from_numpy(np.ascontiguousarray(sb)).cuda()

    def f(a, b):
        return torch._scaled_mm(a, b, tsa, tsb, out_dtype=torch.bfloat16, use_fast_accum=fast)

    comp = torch.compile(f, mode="max-autotune", dynamic=False)
    outs, code = [], None
    for j, fam in enumerate(FAMILIES):
        a, b = inputs(i, j, M, K, N, fam)
        ta = torch.from_numpy(a.astype(np.uint8)).cuda().view(torch.float8_e4m3fn)
        tb = torch.from_numpy(np.ascontiguousarray(b.astype(np.uint8).T)).cuda().view(torch.float8_e4m3fn).t()
        if code is None:
            d, codes = run_and_get_code(comp, ta, tb)
            code = _joined(codes)
        else:
            d = comp(ta, tb)
        torch.cuda.synchronize()
        outs.append(d.view(torch.int16).cpu().numpy().astype("<u2").tobytes().hex())
    return {"name": name, "scaling": scaling, "use_fast_accum": fast, "shape": [M, K, N], "families": list(FAMILIES),
            "scale_a": np.asarray(sa).ravel().tolist(), "scale_b": np.asarray(sb).ravel().tolist(),
            "code": code, "d_hex": outs, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "triton": __import__("triton").__version__}


def _to_torch(codes: np.ndarray, dt: str):
    import torch

    w = {"bf16": np.uint16, "f16": np.uint16, "f32": np.uint32}[dt]
    t = torch.from_numpy(np.ascontiguousarray(codes.astype(w)).view(np.int16 if w is np.uint16 else np.int32))
    return t.view(getattr(torch, _TORCH[dt])).cuda()


def _one_template(name: str) -> dict:
    """Run TEMPLATE_CALLS[name] in this process (max-autotune, Triton templates only), every family."""
    import torch
    from torch._inductor.utils import run_and_get_code

    op, dt, (B, M, K, N), opts = TEMPLATE_CALLS[name]
    done = _inductor_config(opts)
    fns = {"mm": lambda a, b: torch.mm(a, b), "mm_relu": lambda a, b: torch.relu(torch.mm(a, b)),
           "bmm": lambda a, b: torch.bmm(a, b), "addmm": lambda a, b, bias: torch.addmm(bias, a, b)}
    comp = torch.compile(fns[op], mode="max-autotune", dynamic=False)
    outs, code = [], None
    for j in range(len(TEMPLATE_FAMILIES)):
        ins = template_inputs(name, j)
        a, b = (ins["a"], ins["b"]) if op == "bmm" else (ins["a"][0], ins["b"][0])
        args = [_to_torch(a, dt), _to_torch(b, dt)] + ([_to_torch(ins["bias"], dt)] if "bias" in ins else [])
        if code is None:
            d, codes = run_and_get_code(comp, *args)
            code = _joined(codes)
        else:
            d = comp(*args)
        torch.cuda.synchronize()
        w = d.contiguous().view(torch.int16 if d.element_size() == 2 else torch.int32).cpu().numpy()
        outs.append(w.astype("<u2" if d.element_size() == 2 else "<u4").tobytes().hex())
    return {"name": name, "op": op, "dtype": dt, "shape": [B, M, K, N], "options": done,
            "families": list(TEMPLATE_FAMILIES), "code": code, "d_hex": outs, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(), "triton": __import__("triton").__version__}


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def record(out: str, seconds: float, only=None) -> int:
    """Every call in a fresh process with a fresh Inductor and Triton cache (so no autotune pick is reused):
    CALLS into DIR/inductor_calls.json, TEMPLATE_CALLS into DIR/inductor_templates.json."""
    from gpu.record.fresh import run_fresh

    Path(out).mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [("scaled_mm", i, c[0]) for i, c in enumerate(CALLS)] + [("template", n, n) for n in TEMPLATE_CALLS]
    rows: dict[str, list] = {"scaled_mm": [], "template": []}
    if only:      # in the order given
        jobs = [j for n in only for j in jobs if j[2] == n]
    for kind, i, name in jobs:
        left = seconds - (time.time() - t0)
        if left < 20:
            print(f"{name}: skipped (time)", flush=True)
            continue
        row = run_fresh("gpu.record.inductor", ["--one" if kind == "scaled_mm" else "--template", str(i)],
                        label=name, timeout=left, error_file=Path(out) / f"{name}_error.txt")
        if row is None:
            continue
        rows[kind].append(row)
        print(f"{name}: ok at {time.time() - t0:.0f} s", flush=True)
        for k, fn in (("scaled_mm", "inductor_calls.json"), ("template", "inductor_templates.json")):
            if rows[k]:
                (Path(out) / fn).write_text(json.dumps({"seed": SEED, "calls": rows[k], "date": _now()}, indent=0))
    return 0 if rows["scaled_mm"] or rows["template"] else 1


def _template_meta(code: str) -> dict:
    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    return {"BLOCK_M": t.block_m, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k, "num_warps": t.num_warps,
            "num_stages": t.num_stages, "pattern": t.pattern}


def _pack(calls: list[dict], width: int) -> tuple[dict, list[dict]]:
    """Arrays (code bytes, whole-output sha256 per call and family, a 16 x 16 corner of each) and per-call
    meta of recorded calls."""
    import hashlib

    code = b"".join(c["code"].encode() for c in calls)
    sums = np.zeros((len(calls), len(calls[0]["d_hex"]), 32), np.uint8)
    arrays = {"code": np.frombuffer(code, np.uint8).copy()}
    for i, c in enumerate(calls):
        corners = []
        for j, h in enumerate(c["d_hex"]):
            raw = bytes.fromhex(h)
            sums[i, j] = np.frombuffer(hashlib.sha256(raw).digest(), np.uint8)
            w = np.frombuffer(raw, f"<u{width(c)}")
            n = c["shape"][-1]
            corners.append(w.reshape(-1, n)[:CORNER, :CORNER])
        arrays[f"corner{i}"] = np.stack(corners)
    arrays["hw_sha256"] = sums
    return arrays, [{"code_bytes": len(c["code"].encode()), "template": _template_meta(c["code"])} for c in calls]


CORNER = 16


def _merged(srcs, fn: str) -> dict | None:
    """The recordings ``fn`` of several recording directories as one (calls in recording order, a call recorded
    twice refused), or None when none has it."""
    recs = [json.loads((Path(d) / fn).read_text()) for d in srcs if (Path(d) / fn).exists()]
    if not recs:
        return None
    if len({r["seed"] for r in recs}) != 1:
        raise SystemExit(f"{fn}: recordings with different seeds {sorted({r['seed'] for r in recs})}")
    calls = [c for r in recs for c in r["calls"]]
    names = [c["name"] for c in calls]
    if len(set(names)) != len(names):
        raise SystemExit(f"{fn}: a call recorded in more than one directory: {sorted(names)}")
    return {"seed": recs[0]["seed"], "calls": calls, "date": max(r.get("date") or "" for r in recs) or None}


def write_fixtures(src, root: str, triton_version: str, suffix: str = "") -> list[str]:
    """Turn recording directories (inductor_calls.json, inductor_templates.json; one directory or several,
    whose calls are merged) into fixtures/inductor: ``scaled_mm_tensor.npz`` (kind inductor_calls: the
    tensor-wise calls and their repeats) and ``templates.npz`` (kind inductor_templates).  Row-wise calls are
    in scaled_mm.npz already.  ``suffix``: write ``scaled_mm_tensor_<suffix>.npz`` / ``templates_<suffix>.npz``
    instead (calls recorded later, on another device or without the earlier recording at hand)."""
    from refmodel.verify.fixtures import host_provenance, write_fixture

    written = []
    names = [c[0] for c in CALLS]
    for fn, kind, file in (("inductor_calls.json", "inductor_calls", "scaled_mm_tensor"),
                           ("inductor_templates.json", "inductor_templates", "templates")):
        rec = _merged([src] if isinstance(src, (str, Path)) else src, fn)
        if rec is None:
            continue
        calls = [c for c in rec["calls"] if kind == "inductor_templates" or c["scaling"] == "tensor"]
        if not calls:
            continue
        dev = {calls[0]["device"]} | {c["device"] for c in calls}
        if len(dev) != 1:
            raise SystemExit(f"{fn}: calls from several devices {sorted(dev)}")
        width = (lambda c: 2) if kind == "inductor_calls" else (lambda c: 4 if c["dtype"] == "f32" else 2)
        arrays, per = _pack(calls, width)
        metas = []
        for c, extra in zip(calls, per):
            m = {k: v for k, v in c.items() if k not in ("code", "d_hex", "torch", "device", "families", "triton")}
            if kind == "inductor_calls":
                m["index"] = same_as(names.index(c["name"]))
            else:
                m["key_base"] = template_key_base(c["name"])
            metas.append({**m, **extra})
        fams = calls[0]["families"]
        cases = sum(len(h) // (2 * width(c)) for c in calls for h in c["d_hex"])
        inputs = ("refmodel.verify.seeded_mma.matrix_codes('e4m3', 'e4m3', family, seed, families * index + family, "
                  "(M, K, N))" if kind == "inductor_calls" else
                  "refmodel.verify.seeded_mma.batch_codes(dtype, family, seed, key_base + family, (B, M, K, N), "
                  "bias=op == 'addmm')")
        prov = {"device": dev.pop(), "torch": calls[0]["torch"], "triton": triton_version, "recorder": "gpu.record.inductor",
                "autotune": "torch.compile(mode='max-autotune'), max_autotune_gemm_backends='TRITON', one process "
                            "and a fresh Inductor/Triton cache per call", "merged_on": host_provenance(),
                "date": rec.get("date") or host_provenance()["date"]}
        file = f"{file}_{suffix}" if suffix else file
        write_fixture("inductor", file, arrays, kind=kind, cases=cases,
                      meta={"seed": rec["seed"], "families": fams, "corner": CORNER, "inputs": inputs, "calls": metas},
                      provenance=prov, root=root)
        written.append(f"{file}.npz: {len(calls)} calls, {cases} outputs")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--seconds", type=float, default=400)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--template", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--only", default=None, help="these call names only (comma-separated)")
    ap.add_argument("--fixture", default=None, nargs="+", metavar="DIR",
                    help="write fixtures/inductor from recording DIRs (their calls merged)")
    ap.add_argument("--fixtures", default="fixtures", help="fixtures root for --fixture")
    ap.add_argument("--triton-version", default="3.6.0", help="the recording device's Triton (for --fixture)")
    ap.add_argument("--suffix", default="", help="--fixture: write scaled_mm_tensor_SUFFIX.npz / templates_SUFFIX.npz")
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(_one(a.one)))
        return 0
    if a.fixture is not None:
        if a.suffix and not re.fullmatch(r"[a-z0-9_]{1,32}", a.suffix):
            raise SystemExit(f"--suffix must be 1-32 of a-z, 0-9 and _, got {a.suffix!r}")
        for line in write_fixtures(a.fixture, a.fixtures, a.triton_version, a.suffix):
            print(line)
        return 0
    if a.template is not None:
        print(json.dumps(_one_template(a.template)))
        return 0
    return record(a.out, a.seconds, a.only.split(",") if a.only else None)


if __name__ == "__main__":
    sys.exit(main())
