"""Device: record torch._scaled_mm (cuBLASLt FP8 GEMM) outputs for the golden-model page."""

import sys

import numpy as np
import torch


def main(path):
    out = {}
    dev = "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    for (m, n, k) in ((128, 256, 1024), (256, 512, 4096)):
        a = (torch.randn(m, k, generator=g) * 32).to(torch.float8_e4m3fn)
        b_nk = (torch.randn(n, k, generator=g) * 32).to(torch.float8_e4m3fn)
        key = f"{m}x{n}x{k}"
        out[f"{key}_a"] = a.view(torch.uint8).numpy()
        out[f"{key}_b_nk"] = b_nk.view(torch.uint8).numpy()
        for tag, (sav, sbv) in (("", (0.5, 0.25)), ("np2_", (0.3, 0.7))):
          sa = torch.tensor(sav, dtype=torch.float32)
          sb = torch.tensor(sbv, dtype=torch.float32)
          for fast in (False, True):
            for od in ("f32", "bf16"):
                dt = torch.float32 if od == "f32" else torch.bfloat16
                try:
                    d = torch._scaled_mm(a.to(dev), b_nk.to(dev).t(), sa.to(dev), sb.to(dev),
                                         out_dtype=dt, use_fast_accum=fast)
                    bits = d.cpu().view(torch.int32 if od == "f32" else torch.int16).numpy()
                    out[f"{key}_{tag}tensor_{od}_fast{int(fast)}"] = bits
                    print(key, od, "fast" if fast else "slow", "ok", flush=True)
                except Exception as e:
                    print(key, od, fast, "ERR", str(e)[:200], flush=True)
        # rowwise scales (bf16 out)
        ra = (torch.rand(m, 1, generator=g) + 0.5).float()
        rb = (torch.rand(1, n, generator=g) + 0.5).float()
        out[f"{key}_ra"] = ra.numpy()
        out[f"{key}_rb"] = rb.numpy()
        for fast in (False, True):
            try:
                d = torch._scaled_mm(a.to(dev), b_nk.to(dev).t(), ra.to(dev), rb.to(dev),
                                     out_dtype=torch.bfloat16, use_fast_accum=fast)
                out[f"{key}_row_bf16_fast{int(fast)}"] = d.cpu().view(torch.int16).numpy()
                print(key, "rowwise", fast, "ok", flush=True)
            except Exception as e:
                print(key, "rowwise", fast, "ERR", str(e)[:200], flush=True)
    out["torch_version"] = np.array(torch.__version__)
    out["cuda_version"] = np.array(str(torch.version.cuda))
    np.savez_compressed(path, **out)


if __name__ == "__main__":
    main(sys.argv[1])
