"""Record attention forward passes on the H200 for refmodel.golden.attention (issue: attention, bit for bit):
FlexAttention (torch.compile; Inductor's Triton template, whose generated source is kept) and
``scaled_dot_product_attention``'s flash, efficient and cuDNN backends (through their ATen ops, which return
the log-sum-exp too).

    python -m gpu.record.attention --out DIR [--seconds S]

Inputs: q, k, v (B, H, S, D) bf16 or f16 from refmodel.verify.seeded_mma.tensor_codes (seed :data:`SEED`, index
``CASE_INDEX * case + {0, 1, 2}``) in the families of :data:`FAMILIES`; :data:`CASES` crosses sequence lengths
(a multiple of the tile and not), head dims 64 and 128 and causal or not.  ``DIR/attention_<backend>.npz``
keeps per case ``o_<case>`` (raw bf16 words) and ``lse_<case>`` (float32 words), ``DIR/attention.json`` the
cases, versions, and FlexAttention's generated source per case shape.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

SEED = 20261207
#: every case runs in every family: random (narrow, wide exponent spread) and adversarial (NaN/Inf, cancelling
#: products, all zero, subnormal)
FAMILIES = ("narrow", "wide", "special", "cancel", "zero", "subnormal")
_SMALL = [dict(B=2, H=2, S=s, D=d, causal=c, dtype="bf16")
          for s, d, c in itertools.product((128, 200), (64, 128), (False, True))]
CASES = (_SMALL
         # batch x heads x 64-row blocks above FA2's split-KV threshold (about 211 on 132 SMs): the unsplit kernel
         + [dict(B=4, H=16, S=256, D=d, causal=c, dtype="bf16") for d, c in itertools.product((64, 128), (False, True))]
         + [dict(B=2, H=2, S=200, D=d, causal=c, dtype="f16") for d, c in itertools.product((64, 128), (False, True))]
         # FlexAttention only: a score_mod (relative position bias, score + (q_idx - kv_idx))
         + [dict(B=2, H=2, S=200, D=d, causal=c, dtype="bf16", mod="relbias")
            for d, c in itertools.product((64, 128), (False, True))]
         # FlexAttention only: FP8 e4m3 q, k, v (whether torch 2.11 runs it at all is part of the recording)
         + [dict(B=2, H=2, S=200, D=d, causal=False, dtype="e4m3", only="flex") for d in (64, 128)]
         # FA2's split-KV with 3, 4, 7 and 8 splits (the combine over more than two), one head or two, and a
         # batch x heads x blocks above the threshold at a length no tile divides
         + [dict(B=1, H=1, S=333, D=128, causal=True, dtype="bf16"),
            dict(B=1, H=2, S=777, D=64, causal=False, dtype="bf16"),
            dict(B=1, H=2, S=777, D=128, causal=False, dtype="bf16"),
            dict(B=1, H=1, S=1000, D=128, causal=True, dtype="bf16"),
            dict(B=1, H=1, S=1000, D=64, causal=False, dtype="f16"),
            dict(B=8, H=8, S=333, D=64, causal=True, dtype="bf16")]
         # FlexAttention only: FP8 e4m3 with the causal block mask, and at a length the tile divides
         + [dict(B=2, H=2, S=s, D=d, causal=True, dtype="e4m3", only="flex") for s, d in ((200, 64), (256, 128))]
         # edges: one query, a length below one tile, one past a tile, long causal rows (many masked and
         # unmasked key blocks), odd batch x heads
         + [dict(B=1, H=1, S=1, D=64, causal=False, dtype="bf16"),
            dict(B=2, H=2, S=17, D=64, causal=True, dtype="bf16"),
            dict(B=2, H=2, S=64, D=128, causal=False, dtype="f16"),
            dict(B=3, H=5, S=129, D=128, causal=True, dtype="bf16"),
            dict(B=1, H=4, S=1024, D=128, causal=True, dtype="bf16"),
            dict(B=2, H=8, S=768, D=64, causal=True, dtype="bf16"),
            dict(B=1, H=2, S=96, D=64, causal=True, dtype="e4m3", only="flex")]
         # more keys than queries (a prefill after a cache) and fewer, causal or not (Sk: the keys' length)
         + [dict(B=2, H=2, S=200, Sk=333, D=64, causal=False, dtype="bf16"),
            dict(B=2, H=2, S=200, Sk=333, D=64, causal=True, dtype="bf16"),
            dict(B=1, H=2, S=128, Sk=1000, D=128, causal=True, dtype="bf16"),
            dict(B=2, H=2, S=300, Sk=150, D=128, causal=True, dtype="bf16"),
            dict(B=2, H=2, S=300, Sk=150, D=64, causal=False, dtype="f16")])
CASE_INDEX = 8
BACKENDS = ("flex", "flash", "efficient", "cudnn")
#: outputs of more than this many (batch, head) pairs keep only the first RAW_HEADS heads of batch 0 raw, and the
#: sha256 of the whole O and LSE words (the recording must travel; the model rebuilds the rest)
RAW_HEADS = 4
#: the input types refmodel.golden.attention models per backend (the fixtures keep only these cases)
MODELLED_DTYPES = {"flex": ("bf16", "f16", "e4m3"), "flash": ("bf16", "f16"), "efficient": ("bf16", "f16"),
                   "cudnn": ()}


def case_name(i: int, fam: str) -> str:
    c = CASES[i]
    extra = ("" if c["dtype"] == "bf16" else "_" + c["dtype"]) + (f"_{c['mod']}" if c.get("mod") else "")
    sk = f"_k{c['Sk']}" if c.get("Sk", c["S"]) != c["S"] else ""
    return f"b{c['B']}h{c['H']}_s{c['S']}{sk}_d{c['D']}_{'causal' if c['causal'] else 'full'}{extra}_{fam}"


def qkv_codes(i: int, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes (bf16 or f16, as in the case) of q, k, v of case i, family j (refmodel's rebuild, one definition)."""
    from refmodel.verify.replay_attention import attention_codes

    return attention_codes({"seed": SEED, "families": FAMILIES, "case_index": CASE_INDEX}, {**CASES[i], "index": i}, j)


def _run_backend(backend: str, cases=None, deadline: float = float("inf")) -> tuple[dict, dict]:
    """Every (case, family) of one backend; past ``deadline`` (epoch seconds) the rest are recorded as skipped,
    so a slow backend keeps what it ran instead of losing it all to the parent's timeout."""
    import hashlib

    import torch

    out, codes = {}, {}
    for i, j in itertools.product(range(len(CASES)) if cases is None else cases, range(len(FAMILIES))):
        c = CASES[i]
        if (c.get("mod") or c.get("only")) and backend != "flex":
            continue
        if c["dtype"] == "e4m3":
            q, k, v = (torch.from_numpy(x.astype(np.uint8)).view(torch.float8_e4m3fn).cuda() for x in qkv_codes(i, j))
        else:
            tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[c["dtype"]]
            q, k, v = (torch.from_numpy(x.astype(np.uint16).view(np.int16)).view(tdt).cuda()
                       for x in qkv_codes(i, j))
        name = case_name(i, FAMILIES[j])
        if time.time() > deadline:
            out[f"error_{name}"] = "skipped: the recording's time ran out"
            continue

        def call():
            if backend == "flex":
                return _flex(q, k, v, c, codes)
            if backend == "flash":
                return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, c["causal"], False)[:2]
            if backend == "efficient":
                return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0,
                                                                              c["causal"])[:2]
            return torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, c["causal"],
                                                                      False)[:2]

        try:
            o, lse = call()
        except Exception as e:  # noqa: BLE001 - a backend that refuses a case: recorded as refused
            out[f"error_{name}"] = f"{type(e).__name__}: {e}"[:2000]
            continue
        torch.cuda.synchronize()
        if j == 0:              # which CUDA kernels ran (split-KV or not, the template's tile in the name)
            try:
                codes[f"kernels:{name}"] = _kernels(call)
            except Exception as e:  # noqa: BLE001 - no profiler: said, not fatal
                codes[f"kernels:{name}"] = [f"profiler failed: {type(e).__name__}: {e}"[:500]]
        if o.element_size() == 1:
            ow = o.contiguous().view(torch.uint8).cpu().numpy()
        else:
            ow = o.contiguous().view(torch.int16 if o.element_size() == 2 else torch.int32).cpu().numpy()
            ow = ow.view(np.uint16 if o.element_size() == 2 else np.uint32)
        lw = lse.float().contiguous().cpu().numpy().view(np.uint32)
        if c["B"] * c["H"] > RAW_HEADS:
            out[f"osha_{name}"] = np.array(hashlib.sha256(ow.tobytes()).hexdigest())
            out[f"lsesha_{name}"] = np.array(hashlib.sha256(lw.tobytes()).hexdigest())
            ow, lw = ow[:1, :RAW_HEADS], lw[:1, :RAW_HEADS]
        out[f"o_{name}"], out[f"lse_{name}"] = ow, lw
        out[f"oshape_{name}"] = np.array(o.shape)
        out[f"ostride_{name}"] = np.array(o.stride())
        out[f"lseshape_{name}"] = np.array(lse.shape)
        out[f"odtype_{name}"] = np.array(str(o.dtype))
    return out, codes


def _kernels(call) -> list:
    """The names of the CUDA kernels one more ``call()`` launches, in order (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _ptx_files() -> set:
    import os

    root = os.environ.get("TRITON_CACHE_DIR")
    return set(Path(root).rglob("*.ptx")) if root and Path(root).exists() else set()


def _relbias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx)


_FLEX = {}
_TORCH_DTYPE = {"bf16": "bfloat16", "f16": "float16", "e4m3": "float8_e4m3fn"}


def flex_code_key(c: dict) -> str:
    """The key of a case's FlexAttention generated source in the recording (one per shape, dtype, mask, mod)."""
    sk = f"_k{c['Sk']}" if c.get("Sk", c["S"]) != c["S"] else ""
    return (f"{(c['B'], c['H'], c['S'], c['D'])}{sk}_{_TORCH_DTYPE[c['dtype']]}_{'causal' if c['causal'] else 'full'}"
            + (f"_{c['mod']}" if c.get("mod") else ""))


def _flex(q, k, v, c, codes):
    """FlexAttention of one case; the first call of a (shape, dtype, causal, mod) keeps Inductor's generated
    source and the PTX of every Triton kernel that call compiled (the TRITON_CACHE_DIR files it added)."""
    import torch
    from torch._inductor.utils import run_and_get_code
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    causal, mod = c["causal"], c.get("mod")
    key = (tuple(q.shape), tuple(k.shape), q.dtype, causal, mod)
    if key not in _FLEX:
        sm = _relbias if mod == "relbias" else None
        _FLEX[key] = torch.compile(lambda q, k, v, bm: flex_attention(q, k, v, score_mod=sm, block_mask=bm,
                                                                      return_lse=True), dynamic=False)
    B, H, S, D = q.shape
    bm = None
    if causal:
        bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, B=None, H=None, Q_LEN=S, KV_LEN=k.shape[2],
                               device="cuda")
    name = flex_code_key(c)
    if name not in codes:
        before = _ptx_files()
        (o, lse), srcs = run_and_get_code(_FLEX[key], q, k, v, bm)
        codes[name] = "\n\n# ----- next source -----\n\n".join(srcs)
        for f in sorted(_ptx_files() - before):
            codes[f"ptx:{name}:{f.name}"] = f.read_text()
    else:
        o, lse = _FLEX[key](q, k, v, bm)
    return o, lse


def _child(backend: str, out: str, cases=None, deadline: float = float("inf")) -> int:
    import torch

    arrays, codes = _run_backend(backend, cases, deadline)
    errors = {k[6:]: v for k, v in arrays.items() if k.startswith("error_")}
    np.savez_compressed(Path(out) / f"attention_{backend}.npz", **{k: v for k, v in arrays.items()
                                                                     if not k.startswith("error_")})
    print(json.dumps({"backend": backend, "errors": errors, "codes": codes, "torch": torch.__version__,
                      "triton": __import__("triton").__version__, "device": torch.cuda.get_device_name(),
                      "cudnn": torch.backends.cudnn.version()}))
    return 0


def record(out: str, seconds: float, backends, cases=None) -> int:
    from gpu.record.fresh import run_fresh

    Path(out).mkdir(parents=True, exist_ok=True)
    t0, rows = time.time(), []
    for b in backends:
        left = seconds - (time.time() - t0)
        if left < 20:
            print(f"{b}: skipped (time)", flush=True)
            continue
        extra = ["--cases", ",".join(map(str, cases))] if cases is not None else []
        # the child stops starting cases early enough to save them, leaving 30 s for each backend after it
        later = len(backends) - 1 - backends.index(b)
        extra += ["--deadline", str(time.time() + max(left - 30 * later, 20) - 15)]
        row = run_fresh("gpu.record.attention", ["--child", b, "--out", out, *extra], label=b, timeout=left,
                        error_file=Path(out) / f"attention_{b}_error.txt")
        if row is None:
            continue
        rows.append(row)
        print(f"{b}: ok at {time.time() - t0:.0f} s; refused: {sorted(row['errors'])[:4]}", flush=True)
        (Path(out) / "attention.json").write_text(json.dumps({"seed": SEED, "families": FAMILIES, "cases": CASES,
                                                              "case_index": CASE_INDEX, "runs": rows,
                                                              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                    time.gmtime())}))
    return 0 if rows else 1


class _Arrays(dict):
    """A dict of arrays with ``np.load``'s ``files``."""

    @property
    def files(self):
        return list(self)


def write_fixtures(src, root: str, backends) -> list[str]:
    """Turn a recording directory into fixtures/attention/<backend>.npz (kind attention_seeded,
    refmodel.verify.replay_attention): per recorded case and family the sha256 of the whole O and LSE words,
    the first rows of O and the LSE of batch 0, head 0 raw, FlexAttention's generated sources; the cases a
    backend refused are named in meta."""
    import hashlib

    from refmodel.golden.attention import FLEX_DECODE_BELOW
    from refmodel.verify.fixtures import host_provenance, write_fixture
    from refmodel.verify.replay_attention import ROWS

    srcs = [src] if isinstance(src, (str, Path)) else list(src)
    recs = [json.loads((Path(d) / "attention.json").read_text()) for d in srcs]
    rec = recs[0]
    for d, r in zip(srcs[1:], recs[1:]):
        if any(r[k] != rec[k] for k in ("seed", "families", "case_index")):
            raise SystemExit(f"{d} was recorded with another seed, families or case index than {srcs[0]}")
    written = []
    for backend in backends:
        parts = [(d, next(x for x in r["runs"] if x["backend"] == backend)) for d, r in zip(srcs, recs)
                 if any(x["backend"] == backend for x in r["runs"])]
        if not parts:
            continue
        # several recordings (each of some cases) merge: their arrays, sources, kernel names and refusals
        z, run = {}, {"codes": {}, "errors": {}}
        for d, r in parts:
            with np.load(Path(d) / f"attention_{backend}.npz") as f:
                z.update({k: f[k] for k in f.files})
            run["codes"].update(r["codes"])
            run["errors"].update(r["errors"])
            run.update({k: r[k] for k in ("device", "torch", "triton", "cudnn")})
        z = _Arrays(z)
        cases, osha, lsha, arrays, codes, code_index, unmodelled = [], [], [], {}, [], {}, []
        for i, c in enumerate(CASES):
            names = [case_name(i, f) for f in FAMILIES]
            if not all(f"o_{n}" in z.files for n in names):
                continue
            # recorded, but refmodel refuses it (an input type; FlexAttention's decoding template): named in meta
            if c["dtype"] not in MODELLED_DTYPES.get(backend, ()) or (backend == "flex"
                                                                    and c["S"] < FLEX_DECODE_BELOW):
                unmodelled.append(case_name(i, "")[:-1])
                continue
            lses = []
            o_rows = []
            os_, ls_ = [], []
            for n in names:
                ow, lw = z[f"o_{n}"], z[f"lse_{n}"]
                full = f"osha_{n}" in z.files
                os_.append(bytes.fromhex(str(z[f"osha_{n}"])) if full else hashlib.sha256(ow.tobytes()).digest())
                ls_.append(bytes.fromhex(str(z[f"lsesha_{n}"])) if full else hashlib.sha256(lw.tobytes()).digest())
                o_rows.append(ow[0, 0, :ROWS])
                lses.append(lw[0, 0])
            k = len(cases)
            arrays[f"o{k}"], arrays[f"lse{k}"] = np.stack(o_rows), np.stack(lses)
            osha.append(os_)
            lsha.append(ls_)
            meta_c = {"name": case_name(i, "")[:-1], "index": i, **c,
                      "lse_shape": [int(x) for x in z[f"lseshape_{names[0]}"]]}
            if backend == "flex":
                key = flex_code_key(c)
                if key not in code_index:
                    code_index[key] = len(codes)
                    codes.append(run["codes"][key])
                meta_c["code"] = code_index[key]
            cases.append(meta_c)
        if not cases:
            continue
        arrays["o_sha256"] = np.frombuffer(b"".join(x for r in osha for x in r), np.uint8).reshape(len(cases), -1, 32)
        arrays["lse_sha256"] = np.frombuffer(b"".join(x for r in lsha for x in r), np.uint8).reshape(len(cases), -1, 32)
        if codes:
            arrays["code"] = np.frombuffer("".join(codes).encode(), np.uint8).copy()
        # FlexAttention's call also builds the causal block mask (ATen kernels): only its Triton kernels are kept
        kernels = {k[8:]: [n for n in v if backend != "flex" or n.startswith("triton_")]
                   for k, v in run["codes"].items() if k.startswith("kernels:")}
        meta = {"backend": backend, "seed": rec["seed"], "families": list(rec["families"]),
                "case_index": rec["case_index"], "cases": cases, "codes": [len(c.encode()) for c in codes],
                "refused": run["errors"], "kernels": kernels, "not_modelled": unmodelled,
                "inputs": "refmodel.verify.replay_attention.attention_codes(meta, case, family)"}
        prov = {"device": run["device"], "torch": run["torch"], "triton": run["triton"], "cudnn": run["cudnn"],
                "recorder": "gpu.record.attention", "merged_on": host_provenance(),
                "date": max(r.get("date") or "" for r in recs) or host_provenance()["date"],
                "recordings": len(parts)}
        n_out = sum(int(np.prod([c["B"], c["H"], c["S"], c["D"]])) + int(np.prod(c["lse_shape"])) for c in cases)
        write_fixture("attention", backend, arrays, kind="attention_seeded", cases=n_out * len(rec["families"]),
                      meta=meta, provenance=prov, root=root)
        written.append(f"{backend}.npz: {len(cases)} cases x {len(rec['families'])} families, "
                       f"{n_out * len(rec['families'])} outputs; refused {len(run['errors'])}")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    ap.add_argument("--cases", default=None, help="these CASES indices only (comma-separated; default all)")
    ap.add_argument("--fixture", default=None, nargs="+", metavar="DIR",
                    help="write fixtures/attention from one or more recording DIRs (merged, cases in CASES order)")
    ap.add_argument("--fixtures", default="fixtures", help="fixtures root for --fixture")
    a = ap.parse_args(argv)
    if a.fixture:
        for line in write_fixtures(a.fixture, a.fixtures, a.backends.split(",")):
            print(line)
        return 0
    cases = None
    if a.cases:
        cases = [int(x) for x in a.cases.split(",")]
        if any(not 0 <= x < len(CASES) for x in cases):
            raise SystemExit(f"--cases must be indices in 0..{len(CASES) - 1}, got {a.cases}")
    if a.child:
        return _child(a.child, a.out, cases, a.deadline)
    return record(a.out, a.seconds, a.backends.split(","), cases)


if __name__ == "__main__":
    sys.exit(main())
