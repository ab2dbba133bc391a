"""Record whole FP8 layers on the GPU: every ``torch._scaled_mm`` mode, cuBLAS epilogues and batches,
and torchao's float8 layers (the calls of :mod:`refmodel.verify.layer_calls`).

    python -m gpu.record.layers --out fixtures [--dump DIR] [--only scaled_mm,linear,...]

Each call's inputs are rebuilt from its seed (refmodel.verify.layer_calls), run through torch on the
GPU under torch's profiler, and stored as the spec, the CUDA kernels that ran, and the sha256 of the
output bits (fixtures/layers/calls.npz + manifest) — or torch's refusal, in one line.  ``--dump``
writes the raw outputs (and, for torchao, every ``torch._scaled_mm`` call the layer made, with its
operands) for fitting the models; they are not fixtures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from refmodel.verify import layer_calls as L
from refmodel.verify.fixtures import host_provenance, write_fixture

from gpu.libraries.torch_cublas import _torch, bits_view, profiled, to_gpu, torch_dtype


def _t(x, dtype):
    return to_gpu(np.asarray(x), dtype)


def _scales(torch, scaling, sa, sb):
    """Scale tensors with the strides torch wants: 1x128 A scales outer-dim-major ((M, Kb) with
    stride (1, M)), 128x128 B scales (Kb, Nb) with stride (1, Kb); the others contiguous."""
    from refmodel.numerics.scaled_mm import SCALINGS

    ga, gb = SCALINGS[scaling]
    ta = torch.from_numpy(np.ascontiguousarray(np.asarray(sa, np.float32).T if ga == "1x128" else sa)).cuda()
    tb = torch.from_numpy(np.ascontiguousarray(np.asarray(sb, np.float32).T if gb == "128x128" else sb)).cuda()
    return (ta.t() if ga == "1x128" else ta), (tb.t() if gb == "128x128" else tb)


def run_scaled_mm(torch, spec):
    x = L.scaled_mm_inputs(spec)
    a = _t(x["a"], spec["fmt_a"])
    b = _t(x["b_nk"], spec["fmt_b"]).t()
    sa, sb = _scales(torch, spec["scaling"], x["scale_a"], x["scale_b"])
    bias = None if x["bias"] is None else _t(x["bias"], spec["bias"])
    od = torch_dtype(spec["out"])
    d, kernels = profiled(lambda: torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=od,
                                                   use_fast_accum=spec["fast"]))
    return {"d": bits_view(d)}, kernels


def run_triton(torch, spec):
    from gpu.libraries.triton import tiled_matmul, tiled_matmul_kernel

    tiled_matmul_kernel()
    x = L.triton_inputs(spec)
    a, b = _t(x["a"], spec["fmt_a"]), _t(x["b"], spec["fmt_b"])
    imp = -1 if spec["imp"] is None else spec["imp"]
    c, _ = tiled_matmul(a, b, out=spec["out"], block_m=64, block_n=64, block_k=spec["block_k"], prec="none", imp=imp,
                        num_warps=4)
    torch.cuda.synchronize()
    return {"d": bits_view(c)}, ["triton tiled_matmul bm64 bn64 w4"]


def _set_tf32(torch, dtype):
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"


def run_cublas(torch, spec):
    x = L.cublas_inputs(spec)
    dt = "f32" if spec["dtype"] in ("tf32", "f32") else spec["dtype"]
    _set_tf32(torch, spec["dtype"])
    op = spec["op"]
    g = {k: (None if v is None else _t(v, dt)) for k, v in x.items()}
    if op == "linear":
        call = lambda: torch.nn.functional.linear(g["x"], g["w"], g["bias"])  # noqa: E731
    elif op == "addmm":
        call = lambda: torch.addmm(g["c"], g["a"], g["b"], beta=spec["beta"], alpha=spec["alpha"])  # noqa: E731
    elif op == "baddbmm":
        call = lambda: torch.baddbmm(g["c"], g["a"], g["b"], beta=spec["beta"], alpha=spec["alpha"])  # noqa: E731
    elif op == "bmm":
        call = lambda: torch.bmm(g["a"], g["b"])  # noqa: E731
    else:
        call = lambda: torch.matmul(g["a"], g["b"])  # noqa: E731
    d, kernels = profiled(call)
    _set_tf32(torch, "f32")
    return {"d": bits_view(d)}, kernels


class _Capture:
    """Wraps ``torch._scaled_mm`` and ``torch.mm`` to keep every call's operands and output bits."""

    def __init__(self, torch):
        self.torch, self.calls = torch, []

    def __enter__(self):
        torch = self.torch
        self.orig = torch._scaled_mm
        self.orig_mm = torch.mm

        def wrapped(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
            d = self.orig(a, b, scale_a, scale_b, bias=bias, scale_result=scale_result, out_dtype=out_dtype,
                          use_fast_accum=use_fast_accum)
            if not all(type(t) is torch.Tensor for t in (a, b, d)):    # a tensor subclass: not raw data
                return d
            self.calls.append({"op": "scaled_mm", "a": bits_view(a.contiguous()), "a_dtype": str(a.dtype),
                               "a_stride": list(a.stride()), "b": bits_view(b.t().contiguous()),
                               "b_dtype": str(b.dtype), "b_stride": list(b.stride()),
                               "scale_a": scale_a.float().cpu().numpy(), "scale_b": scale_b.float().cpu().numpy(),
                               "bias": None if bias is None else bits_view(bias), "out_dtype": str(out_dtype),
                               "fast": bool(use_fast_accum), "d": bits_view(d)})
            return d

        def wrapped_mm(a, b, *args, **kw):
            d = self.orig_mm(a, b, *args, **kw)
            if not all(type(t) is torch.Tensor for t in (a, b, d)):
                return d
            self.calls.append({"op": "mm", "a": bits_view(a), "a_dtype": str(a.dtype), "b": bits_view(b),
                               "b_dtype": str(b.dtype), "d": bits_view(d)})
            return d
        torch._scaled_mm = wrapped
        torch.mm = wrapped_mm
        return self

    def __exit__(self, *exc):
        self.torch._scaled_mm = self.orig
        self.torch.mm = self.orig_mm


def run_float8(torch, spec):
    x = L.float8_inputs(spec)
    K, N = spec["K"], spec["N"]
    lin = torch.nn.Linear(K, N, bias=bool(spec.get("bias")), dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        lin.weight.copy_(_t(x["w"], "bf16"))
        if spec.get("bias"):
            lin.bias.copy_(_t(x["bias"], "bf16"))
    model = torch.nn.Sequential(lin)
    if spec["op"] == "float8_linear":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(spec["recipe"]))
        xt = _t(x["x"], "bf16").requires_grad_(True)
        gy = _t(x["grad_y"], "bf16")
        with _Capture(torch) as cap:
            y = model(xt)
            y.backward(gy)
        torch.cuda.synchronize()
        out = {"y": bits_view(y.detach()), "grad_x": bits_view(xt.grad), "grad_w": bits_view(model[0].weight.grad)}
    else:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_

        gran = PerTensor() if spec["granularity"] == "per_tensor" else PerRow()
        quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=gran))
        xt = _t(x["x"], "bf16")
        with _Capture(torch) as cap, torch.no_grad():
            y = model(xt)
        torch.cuda.synchronize()
        out = {"y": bits_view(y)}
    kernels = None
    with torch.no_grad():
        _, kernels = profiled(lambda: model(_t(x["x"], "bf16")))
    return out, kernels, cap.calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--dump", default=None, help="directory for the raw outputs (not fixtures)")
    ap.add_argument("--only", default=None, help="comma-separated ops (default: all)")
    ap.add_argument("--limit", type=int, default=None, help="record only the first N calls of each op (a smoke test)")
    args = ap.parse_args(argv)
    try:
        torch = _torch()
    except ImportError as e:
        print(f"gpu.record.layers: error: torch is needed ({e})", file=sys.stderr)
        return 2
    from gpu.kernels.runtime import device_info

    specs = L.all_specs()
    if args.only:
        ops = set(args.only.split(","))
        specs = [s for s in specs if s["op"] in ops]
    if args.limit:
        seen: dict[str, int] = {}
        keep = []
        for s in specs:
            seen[s["op"]] = seen.get(s["op"], 0) + 1
            if seen[s["op"]] <= args.limit:
                keep.append(s)
        specs = keep
    prov = {**device_info(), **host_provenance(), "torch": torch.__version__, "torch_cuda": str(torch.version.cuda),
            "cublaslt": str(getattr(torch._C, "_cuda_getCompiledVersion", lambda: "")()),
            "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}
    try:
        import torchao

        prov["torchao"] = torchao.__version__
    except Exception as e:      # noqa: BLE001 - recorded, the float8 calls then record the refusal
        prov["torchao"] = f"not importable: {type(e).__name__}: {str(e)[:100]}"
    dump = Path(args.dump) if args.dump else None
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
    records, raw, part, raw_bytes = [], {}, 0, 0
    t0 = time.time()
    for i, spec in enumerate(specs):
        rec = {"spec": spec}
        captured = []
        try:
            if spec["op"] == "scaled_mm":
                outs, kernels = run_scaled_mm(torch, spec)
            elif spec["op"] == "triton":
                outs, kernels = run_triton(torch, spec)
            elif spec["op"] in ("float8_linear", "float8_inference"):
                outs, kernels, captured = run_float8(torch, spec)
            else:
                outs, kernels = run_cublas(torch, spec)
            rec.update(status="ok", outputs=sorted(outs), digest=L.digest(*(outs[k] for k in sorted(outs))),
                       kernels=[k[:240] for k in kernels if not k.startswith(("Memset", "Memcpy"))])
        except Exception as e:      # noqa: BLE001 - torch's refusal is data
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            rec.update(status="refused", error=f"{type(e).__name__}: {msg[:300]}")
            if not isinstance(e, (RuntimeError, ValueError, NotImplementedError, TypeError)):
                rec["traceback"] = traceback.format_exc()[-800:]
            outs = {}
        torch.cuda.synchronize()
        records.append(rec)
        if dump:
            for k, v in outs.items():
                raw[f"c{i}_{k}"] = v
                raw_bytes += v.nbytes
            for j, c in enumerate(captured):
                for k, v in c.items():
                    if isinstance(v, np.ndarray):
                        raw[f"c{i}_cap{j}_{k}"] = v
                        raw_bytes += v.nbytes
                raw[f"c{i}_cap{j}_meta"] = np.frombuffer(json.dumps(
                    {k: v for k, v in c.items() if not isinstance(v, np.ndarray)}).encode(), np.uint8)
            if raw_bytes > 14 << 20:
                np.savez_compressed(dump / f"raw{part}.npz", **raw)
                raw, part, raw_bytes = {}, part + 1, 0
        st = rec["status"] if rec["status"] == "ok" else rec["error"][:90]
        print(f"[{i:4d}] {L.label(spec)[:110]:<110} {st}", flush=True)
    if dump and raw:
        np.savez_compressed(dump / f"raw{part}.npz", **raw)
    if dump:
        (dump / "records.json").write_text(json.dumps(records, indent=0))
    ok = sum(r["status"] == "ok" for r in records)
    print(f"{len(records)} calls, {ok} ran, {len(records) - ok} refused by torch, {time.time() - t0:.0f} s")
    if not args.only and not args.limit:
        dig = np.array([bytes.fromhex(r.get("digest", "0" * 64)) for r in records], dtype="S32")
        kept = [{k: v for k, v in r.items() if k not in ("digest", "traceback")} for r in records]
        write_fixture("layers", "calls", {"digests": dig.view(np.uint8).reshape(-1, 32),
                                          "records": L.records_array(kept)}, kind="layer_calls",
                      cases=ok, meta=L.records_summary(kept), provenance=prov, root=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
