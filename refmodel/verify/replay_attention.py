"""Replay the attention recordings (fixtures/attention, gpu.record.attention): every recorded case of a backend
through refmodel.golden.attention on inputs rebuilt from the seed, against the hardware's whole-output sha256
(O and LSE) and the raw first rows of the first head.

A fixture of kind ``attention_seeded`` holds, for C cases and F families:

* ``o_sha256``, ``lse_sha256`` (C, F, 32): the sha256 of the whole O words (B, H, S, D little-endian 16-bit,
  or bytes for e4m3, contiguous) and LSE words (B, H, S float32);
* ``o<i>`` (F, ROWS, D) and ``lse<i>`` (F, S): the first ROWS rows of O and the whole LSE of batch 0, head 0
  of case i, raw (which words differ, when one does);
* ``code``: FlexAttention's generated sources, concatenated (``meta['codes']``: each one's byte count; a case's
  ``code`` is its index there).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .replay import Result, _count, meta_error, replayer

#: the raw rows of O a fixture keeps per case (batch 0, head 0)
ROWS = 8
#: a quick replay (``full=False``: CI's, ``wgref verify --quick``) models only batch 0, head 0 of a case of
#: several heads whose B·H·Sq·Sk·D exceeds this, and compares its raw words (not the whole-tensor digests); ``wgref verify`` (full)
#: checks every word
QUICK_COST = 2 ** 24


def o_words(o) -> np.ndarray:
    """The words of an attention output as the recorder keeps them: uint16 (bf16, f16) or uint8 (e4m3)."""
    o = np.asarray(o)
    return np.ascontiguousarray(o.view(np.uint8 if o.dtype.itemsize == 1 else np.uint16))


def _slow(c: dict[str, Any]) -> bool:
    return c["B"] * c["H"] > 1 and c["B"] * c["H"] * c["S"] * c.get("Sk", c["S"]) * c["D"] > QUICK_COST


def attention_codes(meta: dict[str, Any], case: dict[str, Any], j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes (uint64) of q, k, v (B, H, S, D) of one recorded case in family ``j``: the tensors of
    refmodel.verify.seeded_mma.tensor_codes at index ``case_index · (F · case + j) + {0, 1, 2}``."""
    from .seeded_mma import tensor_codes

    sk = int(case.get("Sk", case["S"]))           # the keys' length (Sk), when it is not the queries'
    shapes = [(case["B"], case["H"], case["S"], case["D"])] + [(case["B"], case["H"], sk, case["D"])] * 2
    base = int(meta["case_index"]) * (len(meta["families"]) * int(case["index"]) + j)
    return tuple(tensor_codes(case["dtype"], meta["families"][j], int(meta["seed"]), base + t, shapes[t])
                 for t in range(3))


def attention_inputs(meta: dict[str, Any], case: dict[str, Any], j: int):
    """Typed q, k, v (B, H, S, D: bf16 or f16 numpy arrays) of one recorded case in family ``j``."""
    from .seeded_mma import typed_matrix

    return tuple(typed_matrix(x.reshape(-1, case["D"]), case["dtype"]).reshape(x.shape)
                 for x in attention_codes(meta, case, j))


def fixture_codes(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[str]:
    """The generated sources an attention fixture keeps (FlexAttention; none for the SDPA backends)."""
    sizes = [int(n) for n in meta.get("codes") or []]
    code = arrays.get("code", np.zeros(0, np.uint8))
    if code.size != sum(sizes):
        raise meta_error(f"an attention fixture's 'code' holds {code.size} bytes, its meta names {sum(sizes)}")
    out, off = [], 0
    for n in sizes:
        out.append(code[off:off + n].tobytes().decode())
        off += n
    return out


def _model(backend: str):
    """(q, k, v, case, code) -> (o, lse) for (B, H, S, D) tensors of one recorded case (all its heads, or some:
    the case's B·H still decides FA2's split choice)."""
    from ..golden import attention as A

    if backend == "flex":
        return lambda q, k, v, c, code: A.flex_attention(q, k, v, causal=c["causal"], code=code)
    if backend in A.BACKENDS:
        return lambda q, k, v, c, code: A.sdpa(q, k, v, is_causal=c["causal"], backend=backend, return_lse=True,
                                               batch_heads=c["B"] * c["H"])
    raise meta_error(f"backend {backend!r} is not an attention backend refmodel.golden.attention names")


@replayer("attention_seeded")
def replay_attention(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """One backend's recorded attention forwards (module doc) through refmodel.golden.attention."""
    cases, fams = list(meta.get("cases") or []), list(meta.get("families") or [])
    want = {"o_sha256", "lse_sha256"} | {f"{w}{i}" for i in range(len(cases)) for w in ("o", "lse")}
    if meta.get("codes"):
        want.add("code")
    if set(arrays) != want or arrays["o_sha256"].shape != (len(cases), len(fams), 32) or \
            arrays["lse_sha256"].shape != (len(cases), len(fams), 32):
        raise meta_error(f"an attention_seeded fixture holds {sorted(want)} for {len(cases)} cases in "
                         f"{len(fams)} families; got {sorted(arrays)}")
    codes = fixture_codes(meta, arrays)
    model = _model(meta["backend"])
    quick = [c["name"] for c in cases if not full and _slow(c)]
    total = Result(0, 0, complete=not quick)
    if quick:
        total.scope = (f"attention: batch 0, head 0 only (raw words, no whole-tensor digest) of {len(quick)} large "
                       f"cases of {len(cases)}")
    for i, c in enumerate(cases):
        code = codes[c["code"]] if c.get("code") is not None else None
        for j, fam in enumerate(fams):
            q, k, v = attention_inputs(meta, c, j)
            if c["name"] in quick:
                q, k, v = (x[:1, :1] for x in (q, k, v))
            o, lse = model(q, k, v, c, code)
            ow = o_words(o)
            lw = np.ascontiguousarray(np.asarray(lse, np.float32).view(np.uint32), "<u4")
            label = f"{meta['backend']} {c['name']} {fam}"
            total.add(_count(ow[0, 0, :ROWS], arrays[f"o{i}"][j], f"{label} O", {}))
            total.add(_count(lw[0, 0], arrays[f"lse{i}"][j], f"{label} LSE", {}))
            if c["name"] in quick:
                continue
            for what, words, sha in (("O", ow, "o_sha256"), ("LSE", lw, "lse_sha256")):
                rest = words.size - (ow[0, 0, :ROWS].size if what == "O" else lw[0, 0].size)
                ok = hashlib.sha256(words.tobytes()).digest() == arrays[sha][i, j].tobytes()
                total.add(Result(rest, 0 if ok else rest, [] if ok else [f"{label}: refmodel's {what} digest differs"]))
    return total
