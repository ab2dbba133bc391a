"""Read the sm_90 SASS of PyTorch's built-in attention kernels (the evidence behind refmodel.golden.attention's
FA2 and memory-efficient schedules): which cubins of ``libtorch_cuda.so`` hold them, and in each kernel the
float instructions the schedule depends on: the FFMAs whose addend is a MUFU.LG2 result (the LSE contracted),
the FFMAs feeding on a MUFU.EX2 result of the rescale (the row-sum contraction), and the op counts.

    python tools/attention_sass.py LIBTORCH_CUDA.so|TORCH_WHEEL [--kernels flash_fwd,fmha_cutlassF] [--dump DIR]

A torch wheel is opened as a zip (only ``torch/lib/libtorch_cuda.so`` is read).  Needs ``cuobjdump`` (CUDA, or
the copy Triton ships in ``triton/backends/nvidia/bin``).  Prints one block per kernel; ``--dump`` keeps each
kernel's SASS.  A development tool: nothing in the tests depends on it.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OPS = ("FFMA", "FMUL", "FADD", "FMNMX", "MUFU.EX2", "MUFU.LG2", "MUFU.RCP", "F2FP.BF16.F32.PACK_AB",
       "F2FP.F16.F32.PACK_AB", "HMMA.16816.F32.BF16", "HMMA.1688.F32.BF16", "SHFL.BFLY")


def cuobjdump() -> str:
    exe = shutil.which("cuobjdump")
    if exe:
        return exe
    try:
        import triton

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if cand.exists():
            return str(cand)
    except ImportError:
        pass
    raise SystemExit("cuobjdump not found: put CUDA's bin on PATH or install triton")


def library(src: str, work: Path) -> Path:
    """The libtorch_cuda.so of ``src`` (itself, or extracted from a wheel)."""
    if src.endswith(".whl"):
        with zipfile.ZipFile(src) as z:
            z.extract("torch/lib/libtorch_cuda.so", work)
        return work / "torch" / "lib" / "libtorch_cuda.so"
    return Path(src)


def sm90_cubins(exe: str, lib: Path) -> list[str]:
    out = subprocess.run([exe, "-lelf", str(lib)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"ELF file\s+\d+:\s+(\S+\.sm_90\.cubin)", out)


def functions(sass: str) -> dict[str, list[str]]:
    """Function name -> its instruction lines (without addresses), from cuobjdump -sass text."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if cur and m:
            out[cur].append(m.group(1))
    return out


def summary(name: str, lines: list[str]) -> list[str]:
    """Op counts, and the FFMAs whose operands come from MUFU.LG2 / MUFU.EX2 results (by register, within a
    short window: the pattern of an LSE or row-sum contraction)."""
    counts = collections.Counter()
    for ln in lines:
        op = ln.split()[0] if not ln.startswith("@") else ln.split()[1]
        for o in OPS:
            if op == o or op.startswith(o + "."):
                counts[o] += 1
    found = []
    recent: dict[str, str] = {}
    for ln in lines:
        body = ln.split(None, 1)[1] if ln.startswith("@") else ln
        parts = body.replace(",", " ").split()
        if not parts:
            continue
        op, regs = parts[0], parts[1:]
        if op.startswith("FFMA") and any(r.rstrip(".reuse") in recent for r in regs[1:]):
            src = [recent[r.rstrip(".reuse")] for r in regs[1:] if r.rstrip(".reuse") in recent]
            found.append(f"    {body}    <- {', '.join(sorted(set(src)))}")
        if op in ("MUFU.LG2", "MUFU.EX2") and regs:
            recent[regs[0]] = op
        elif op.startswith("FMUL") and regs and regs[1].rstrip(".reuse") in recent:
            recent[regs[0]] = recent[regs[1].rstrip(".reuse")] + "·FMUL"
        elif op.startswith("FADD") and len(regs) > 1 and regs[0] == regs[1] and regs[0] in recent:
            pass                        # the denormal fix-up of __logf (x + -24): still the LG2 result
        elif regs and regs[0] in recent and not op.startswith("FMUL"):
            recent.pop(regs[0], None)
    out = [name, "  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    out += ["  FFMAs fed by a MUFU.LG2 / MUFU.EX2 result:"] + (found[:12] or ["    none"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="libtorch_cuda.so or a torch wheel")
    ap.add_argument("--kernels", default="flash_fwd,fmha_cutlassF", help="substrings of kernel names")
    ap.add_argument("--dump", default=None, help="write each kernel's SASS here")
    a = ap.parse_args(argv)
    exe, keys = cuobjdump(), a.kernels.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lib = library(a.src, work)
        for cub in sm90_cubins(exe, lib):
            subprocess.run([exe, "-xelf", cub, str(lib)], cwd=work, capture_output=True, check=True)
            path = work / cub
            sass = subprocess.run([exe, "-sass", str(path)], capture_output=True, text=True).stdout
            path.unlink(missing_ok=True)
            if not any(k in sass for k in keys):
                continue
            for name, lines in functions(sass).items():
                if any(k in name for k in keys):
                    print(f"[{cub}]")
                    print("\n".join(summary(name, lines)))
                    if a.dump:
                        Path(a.dump).mkdir(parents=True, exist_ok=True)
                        (Path(a.dump) / f"{name[:120]}.sass").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
