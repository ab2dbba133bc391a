"""The recorded Triton kernels run in wgref's bit-exact interpreter (:mod:`wgref.triton`) and compared with the
H200's bits: the lowering matmul, Inductor's templates, the special-function spellings and the contracted
multiply-adds (``python -m wgref.triton replay``).  Each needs TRITON_INTERPRET=1 set before Triton was
imported."""

from __future__ import annotations

import numpy as np

from .interpreter import interpret
from .inductor import interpret_scaled_mm, interpret_template


def replay_fixtures(families=None, root=None, log=print, numerics: bool = True) -> tuple[int, int]:
    """Run the kernel recorded in fixtures/triton/lowering*.npz (gpu.libraries.triton's lowering kernel: the
    same source) in the patched interpreter on every recorded configuration and family, and compare each
    whole output's sha256 with the H200's.  Returns (runs, mismatching runs).  Needs TRITON_INTERPRET=1 set
    before Triton was imported (``python -m wgref.triton replay`` does that)."""
    import hashlib
    from pathlib import Path

    import triton.language as tl

    import gpu.libraries.triton as GT
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest
    from refmodel.verify.seeded_mma import matrix_codes, typed_matrix

    saved, GT._KERNEL_LOWERING = GT._KERNEL_LOWERING, None
    try:
        kernel = GT.lowering_matmul_kernel()
    finally:
        GT._KERNEL_LOWERING = saved
    d = Path(root or default_root()) / "triton"
    runs = bad = 0
    with interpret(numerics=numerics):
        for e in load_manifest(d)["entries"]:
            if e["kind"] != "triton_lowering":
                continue
            meta, arrays = e["meta"], load_arrays(d, e)
            for i, c in enumerate(meta["configs"]):
                ta, tb, prec, imp, acc = meta["options"][c["opt"]]
                for j, fam in enumerate(meta["families"]):
                    if families and fam not in families:
                        continue
                    ac, bc = matrix_codes(ta, tb, fam, meta["seed"], len(meta["families"]) * c["index"] + j,
                                          tuple(c.get("shape") or meta["shape"]))
                    a, b = typed_matrix(ac, ta), typed_matrix(bc, tb)
                    M, K = a.shape
                    N = b.shape[1]
                    out = np.zeros((M, N), np.float32)
                    kw = {} if c.get("stages") is None else {"num_stages": c["stages"]}
                    kernel[(M // c["BM"], N // c["BN"])](a, b, out, M, N, K, K, 1, N, 1, N, 1, BM=c["BM"], BN=c["BN"],
                                                         BK=c["BK"], PREC=prec, IMP=imp, OUT=tl.float32, ACC=acc,
                                                         PATTERN=c["pattern"], num_warps=c["warps"], **kw)
                    got = hashlib.sha256(np.ascontiguousarray(out.view(np.uint32), "<u4").tobytes()).digest()
                    ok = got == arrays["hw_sha256"][i, j].tobytes()
                    runs += 1
                    bad += not ok
                    if not ok:
                        log(f"{e['file']} {c['name']} {fam}: the interpreter's output differs from the H200's")
    log(f"{runs} interpreted runs of the recorded kernel, {runs - bad} bit-identical to the H200, {bad} differ")
    return runs, bad


def replay_inductor(root=None, log=print) -> tuple[int, int]:
    """Every recorded Inductor call of fixtures/inductor (``_scaled_mm`` and the mm/addmm/bmm templates) run in
    the patched interpreter from its generated source, against the H200's digests."""
    import hashlib
    from pathlib import Path

    from refmodel.golden.inductor import parse_template
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest
    from refmodel.verify.replay_golden import inductor_codes, inductor_scaled_mm_args, inductor_template_args

    d = Path(root or default_root()) / "inductor"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        if e["kind"] not in ("inductor_calls", "inductor_templates"):
            continue
        meta, arrays = e["meta"], load_arrays(d, e)
        for i, (c, code) in enumerate(zip(meta["calls"], inductor_codes(meta, arrays, e["kind"]))):
            for j, fam in enumerate(meta["families"]):
                if e["kind"] == "inductor_calls":
                    a, b, sa, sb = inductor_scaled_mm_args(meta, c, j)
                    out = interpret_scaled_mm(code, a, b.T, sa, sb)
                else:
                    x = inductor_template_args(meta, c, j)
                    A, B = (x["a"], x["b"]) if c["op"] == "bmm" else (x["a"][0], x["b"][0])
                    inputs = {parse_template(code).inputs[0]: x["bias"]} if "bias" in x else None
                    out = interpret_template(code, A, B, inputs)
                w = "<u4" if out.dtype.itemsize == 4 else "<u2"
                ok = hashlib.sha256(np.ascontiguousarray(out.view(w[1:]), w).tobytes()).digest() == \
                    arrays["hw_sha256"][i, j].tobytes()
                runs += 1
                bad += not ok
                if not ok:
                    log(f"{c['name']} {fam}: the interpreter's output differs from the H200's")
    log(f"{runs} interpreted Inductor template calls, {runs - bad} bit-identical to the H200, {bad} differ")
    return runs, bad


def _elementwise_run(expr: str, x: np.ndarray, y: np.ndarray, block: int = 1 << 14) -> np.ndarray:
    """gpu.libraries.triton_sfu's kernel (``o = expr`` over x and y: the source the recordings ran) in the
    patched interpreter; returns o's words."""
    from gpu.libraries import triton_sfu

    kernel = triton_sfu.triton_kernel(expr)
    xs, ys = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(y, np.float32)
    o = np.zeros(xs.size, np.float32)
    with interpret():
        kernel[(-(-xs.size // block),)](xs, ys, o, xs.size, BLOCK=block)
    return o.view(np.uint32)


def replay_spellings(root=None, log=print) -> tuple[int, int]:
    """The Triton spellings of the special-function recordings (fixtures/sfu: ``tl.exp`` ... ``x / y``, each
    the very kernel run on the H200) in the patched interpreter on the recorded sample inputs, compared word
    for word with the H200's samples.  Returns (spellings, differing spellings)."""
    from pathlib import Path

    from refmodel.numerics.sfu.pairs import div_pairs
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

    d = Path(root or default_root()) / "sfu"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        meta = e["meta"]
        if e["kind"] == "sfu_spellings":
            names = [n for n in meta["spellings"] if n.startswith("triton:")]
            x = (np.arange(meta["sample_n"], dtype=np.uint64) * meta["sample_stride"] % (1 << 32)).astype(np.uint32)
            pairs = {n: (x, x) for n in names}
            prefix = "sample_"
        elif e["kind"] == "sfu_pairs":
            names = [n for n in meta["pair_names"] if n.startswith("triton:")]
            a, b = div_pairs(0, meta["pair_seed"])
            pairs = {n: (a, b) for n in names}
            prefix = "pairs_sample_"
        else:
            continue
        arrays = load_arrays(d, e)
        for n in names:
            want = arrays[prefix + _sfu_key(n)]
            x, y = pairs[n]
            got = _elementwise_run(n.split(":", 1)[1], x[:want.size].view(np.float32), y[:want.size].view(np.float32))
            differ = int(np.count_nonzero(got != want))
            runs += 1
            bad += differ > 0
            if differ:
                log(f"{n}: {differ} of {want.size} interpreted outputs differ from the H200's")
    log(f"{runs} recorded Triton spellings interpreted on their samples, {runs - bad} bit-identical, {bad} differ")
    return runs, bad


def _sfu_key(name: str) -> str:
    """The array-name form of a spelling (gpu.record.sfu's ``key``)."""
    return "".join(c if c.isalnum() else "_" for c in name)


def replay_elementwise(root=None, log=print) -> tuple[int, int]:
    """fixtures/triton/elementwise.npz's expressions (Triton's contracted multiply-adds), each run in the
    patched interpreter on the recorded 4M adversarial pairs, against the H200's whole-output sha256."""
    import hashlib
    from pathlib import Path

    from refmodel.numerics.sfu.pairs import div_pairs
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

    d = Path(root or default_root()) / "triton"
    runs = bad = 0
    for e in load_manifest(d)["entries"]:
        if e["kind"] != "triton_elementwise":
            continue
        meta, arrays = e["meta"], load_arrays(d, e)
        a, b = div_pairs(meta["chunk"], meta["seed"])
        for i, expr in enumerate(meta["exprs"]):
            got = _elementwise_run(expr, a.view(np.float32), b.view(np.float32), block=1 << 16)
            ok = hashlib.sha256(np.ascontiguousarray(got, "<u4").tobytes()).digest() == arrays["hw_sha256"][i].tobytes()
            runs += 1
            bad += not ok
            if not ok:
                log(f"{expr}: the interpreter's output differs from the H200's")
    log(f"{runs} recorded Triton multiply-add kernels interpreted, {runs - bad} bit-identical, {bad} differ")
    return runs, bad
