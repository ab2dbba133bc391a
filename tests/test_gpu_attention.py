"""Attention on the device, live, against refmodel.golden.attention: SDPA's flash and efficient backends and
FlexAttention (torch.compile) on shapes and seeds drawn here, outside the recorded grid (fixtures/attention),
in every input family — O and LSE bit for bit, or refused by the model in one sentence, never silently wrong."""

import numpy as np
import pytest

from refmodel.errors import WgrefError

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

FAMILIES = ("narrow", "wide", "special", "cancel", "zero", "subnormal")


def _case(seed: int) -> dict:
    """A shape drawn outside the recorded grid: B x H 1..3 x 1..4, S 128..700, head dim 64 or 128."""
    rng = np.random.default_rng(seed)
    return dict(B=int(rng.integers(1, 4)), H=int(rng.integers(1, 5)), S=int(rng.integers(128, 701)),
                D=int(rng.choice([64, 128])), causal=bool(rng.integers(2)), dtype=str(rng.choice(["bf16", "f16"])),
                index=seed)


def _inputs(c: dict, j: int):
    """(numpy q, k, v typed; torch q, k, v on the device) of family j (the recordings' generator, a new seed)."""
    from refmodel.verify.replay_attention import attention_codes, attention_inputs

    meta = {"seed": 90210 + c["index"], "families": FAMILIES, "case_index": 8}
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[c["dtype"]]
    codes = attention_codes(meta, c, j)
    dev = tuple(torch.from_numpy(x.astype(np.uint16).view(np.int16)).view(tdt).cuda() for x in codes)
    return attention_inputs(meta, c, j), dev


def _words(t) -> np.ndarray:
    t = t.contiguous()
    if t.dtype == torch.float32:
        return t.cpu().numpy().view(np.uint32)
    return t.view(torch.int16).cpu().numpy().view(np.uint16)


def _check(label, got, want):
    g = np.ascontiguousarray(np.asarray(got)).view(want.dtype).reshape(want.shape)
    bad = int(np.count_nonzero(g != want))
    assert bad == 0, f"{label}: {bad} of {want.size} words differ"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backend", ["flash", "efficient"])
def test_sdpa_backend_on_a_drawn_shape(backend, seed):
    from refmodel.golden.attention import sdpa

    c = _case(seed)
    for j, fam in enumerate(FAMILIES):
        (q, k, v), (tq, tk, tv) = _inputs(c, j)
        if backend == "flash":
            o, lse = torch.ops.aten._scaled_dot_product_flash_attention(tq, tk, tv, 0.0, c["causal"], False)[:2]
        else:
            o, lse = torch.ops.aten._scaled_dot_product_efficient_attention(tq, tk, tv, None, True, 0.0,
                                                                            c["causal"])[:2]
        torch.cuda.synchronize()
        try:
            mo, ml = sdpa(q, k, v, is_causal=c["causal"], backend=backend, return_lse=True)
        except WgrefError:
            continue                                                     # refused in one sentence: allowed
        label = f"{backend} {c} {fam}"
        _check(label + " O", mo, _words(o))
        _check(label + " LSE", ml, _words(lse.float()))


@pytest.mark.parametrize("seed", range(3))
def test_flex_attention_on_a_drawn_shape(seed):
    from torch._inductor.utils import run_and_get_code
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from refmodel.golden.attention import flex_attention as model

    c = _case(100 + seed)
    fn = torch.compile(lambda q, k, v, bm: flex_attention(q, k, v, block_mask=bm, return_lse=True), dynamic=False)
    bm = None
    if c["causal"]:
        bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, B=None, H=None, Q_LEN=c["S"], KV_LEN=c["S"],
                               device="cuda")
    code = None
    for j, fam in enumerate(FAMILIES):
        (q, k, v), (tq, tk, tv) = _inputs(c, j)
        if code is None:
            (o, lse), srcs = run_and_get_code(fn, tq, tk, tv, bm)
            code = "\n\n".join(srcs)
        else:
            o, lse = fn(tq, tk, tv, bm)
        torch.cuda.synchronize()
        try:
            mo, ml = model(q, k, v, causal=c["causal"], code=code)
        except WgrefError:
            return
        label = f"flex {c} {fam}"
        _check(label + " O", mo, _words(o))
        _check(label + " LSE", ml, _words(lse.float()))
