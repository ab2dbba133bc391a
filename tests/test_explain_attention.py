"""wgref explain-attention: the element it explains is the model's (output and LSE bits as printed), every key
block that element's row ran appears in the model's order, and bad arguments are one sentence."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from refmodel.golden import attention as A
from wgref.cli import main


def _doc_qkv():
    rng = np.random.default_rng(20261206)
    return tuple(rng.standard_normal((200, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))


@pytest.mark.parametrize("backend", ["flash", "flex", "efficient"])
@pytest.mark.parametrize("causal", [False, True])
def test_explains_the_models_element(backend, causal, capsys):
    assert main(["explain-attention", "--case", "doc", "--backend", backend] + (["--causal"] if causal else [])) == 0
    text = capsys.readouterr().out
    q, k, v = _doc_qkv()
    model = {"flash": A.fa2_forward, "flex": A.flex_forward,
             "efficient": A.memeff_forward}[backend]
    o, lse = model(q, k, v, is_causal=causal)
    assert f"rounded to bf16: {float(o[150, 3].astype(np.float32))!r}" in text
    assert f"lse {float(lse[150]):.9g} (0x{int(lse[150:151].view(np.uint32)[0]):08x})" in text
    blocks = [int(b) for b in re.findall(r"^key block (\d+)", text, re.M)]
    if backend == "flash":      # row block 128..199: key blocks from the last (causal: up to the diagonal) down
        bn = A.FA2_TRAITS[64][1]
        last = -(-(256 if causal else 200) // bn) - 1
        assert blocks == list(range(min(last, -(-200 // bn) - 1), -1, -1))
    elif backend == "efficient":  # 64-query blocks, 64-key blocks ascending (causal: up to the block's last query)
        assert blocks == list(range(-(-min(192 if causal else 200, 200) // 64)))
    else:
        partial, full = A.flex_kv_order(200, 200, 128, 128, (lambda qi, ki: qi >= ki) if causal else None)[1]
        assert blocks == partial + full


def test_npy_inputs_and_refusals(tmp_path, capsys):
    q, k, v = _doc_qkv()
    for n, x in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{n}.npy", x[None, None].repeat(2, axis=1))
    args = ["explain-attention", "--q", str(tmp_path / "q.npy"), "--k", str(tmp_path / "k.npy"),
            "--v", str(tmp_path / "v.npy"), "--head", "1", "--row", "7", "--col", "5"]
    assert main(args) == 0
    o, _ = A.fa2_forward(q, k, v)
    assert f"rounded to bf16: {float(o[7, 5].astype(np.float32))!r}" in capsys.readouterr().out
    assert main(args[:-2] + ["--col", "64"]) == 2
    assert "--col in 0..63" in capsys.readouterr().err
    assert main(["explain-attention", "--q", str(tmp_path / "q.npy")]) == 2
    assert "give --q, --k and --v" in capsys.readouterr().err
    assert main(["explain-attention", "--case", "doc", "--q", str(tmp_path / "q.npy")]) == 2


def test_fp8_flex_element_and_sdpa_refusal(tmp_path, capsys):
    """e4m3 inputs saved by numpy (|V1): FlexAttention's FP8 template explains its element (e4m3 output); the
    SDPA backends, which the recordings ran in 16-bit types only, refuse in one sentence."""
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((128, 64)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn) for _ in range(3))
    for n, x in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{n}.npy", x)
    args = ["explain-attention", "--q", str(tmp_path / "q.npy"), "--k", str(tmp_path / "k.npy"),
            "--v", str(tmp_path / "v.npy"), "--dtype", "e4m3", "--row", "100", "--col", "9", "--causal"]
    assert main(args + ["--backend", "flex"]) == 0
    text = capsys.readouterr().out
    o, lse = A.flex_forward(q, k, v, is_causal=True)
    assert f"rounded to e4m3: {float(o[100, 9].astype(np.float32))!r}" in text
    assert "draft" not in text
    assert main(args + ["--backend", "flash"]) == 2
    assert "must all be bfloat16 or all float16" in capsys.readouterr().err
