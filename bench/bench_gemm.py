"""Throughput of refmodel.numerics.gemm (products per second) next to numpy float64 matmul.

    python bench/bench_gemm.py                     # e4m3 m64n256k32 chain, K = 4096
    python bench/bench_gemm.py --k 8192 --promote 4 --scales block
    python bench/bench_gemm.py --avx2              # as on a host without AVX-512 (see below)
    python bench/bench_gemm.py --json ''           # print only, write no JSON

Measures, in one run and warm (the first call compiles or loads the numba cache and is
not counted), the best of ``--repeat`` calls of

* ``gemm`` with the fast chain kernel (the default, refmodel.numerics.fdpa_fast),
* the same ``gemm`` with the previous integer kernel (``fdpa_chain(kernel="int")``),
* with ``--promote``, the same ``gemm`` unpromoted (the promoted / unpromoted rate),
* numpy's float64 matmul (BLAS) on the same shapes, in this process and, with
  ``--other-blas`` (the default), in a worker process whose OpenBLAS runs its other kernel
  (``OPENBLAS_CORETYPE=Haswell``, the AVX2 kernel, where this process runs the one OpenBLAS
  picked for the host, and the host's where this one runs Haswell's),

checks that both kernels give the same bits, prints G products/s (M*N*K per second) and
the ratios, the host's vector extensions and the ISA numba compiles for, and writes them
with the machine (CPU model, cores, load, numpy / numba versions, date) to
bench/results/cpu_gemm/ (``--json``).  Other processes on the machine make the numbers
noisy: the best of many repeats is the least disturbed one; the three are interleaved, and
each batch of BLAS calls is followed by a rest (``--blas-rest``), because OpenBLAS's worker
threads spin for a while after a call and would take the CPU from the next refmodel call.

AVX2 emulation (``--avx2``; or by hand, before numpy and numba load)::

    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=<haswell_features()> OPENBLAS_CORETYPE=Haswell

numba compiles for the CPU NUMBA_CPU_NAME names only with the features NUMBA_CPU_FEATURES
lists: with the name alone it keeps the host's features (AVX-512 included), so the flag
passes an explicit list, every host feature not in Haswell's set disabled
(:func:`haswell_features`).  The kernels' assembly then holds no zmm register and no
AVX-512 instruction.  OpenBLAS (numpy's bundled one) honours OPENBLAS_CORETYPE.
"""

from __future__ import annotations

import os
import sys

#: LLVM's features of the Haswell CPU (x86-64-v3): AVX2, FMA, BMI1/2, F16C, MOVBE ...
HASWELL = ("64bit avx avx2 bmi bmi2 cmov crc32 cx16 cx8 f16c fma fsgsbase fxsr invpcid lzcnt mmx movbe "
           "pclmul popcnt rdrnd sahf sse sse2 sse3 sse4.1 sse4.2 ssse3 xsave xsaveopt").split()


def haswell_features() -> str:
    """NUMBA_CPU_FEATURES for an AVX2-only (Haswell) target on this host: Haswell's features
    on, every other feature LLVM knows of on this host off (AVX-512, AMX, AVX-VNNI ...)."""
    import llvmlite.binding as ll

    names = set(ll.get_host_cpu_features()) | set(HASWELL)
    return ",".join(("+" if f in HASWELL else "-") + f for f in sorted(names))


def avx2_env() -> dict:
    return {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": haswell_features(),
            "OPENBLAS_CORETYPE": "Haswell"}


if __name__ == "__main__" and "--avx2" in sys.argv[1:]:
    # numba and OpenBLAS read their settings when they load: set them and start again
    _env = avx2_env()
    if any(os.environ.get(k) != v for k, v in _env.items()):
        os.environ.update(_env)
        os.execv(sys.executable, [sys.executable] + sys.argv)

import argparse  # noqa: E402
import ctypes  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numba  # noqa: E402

import refmodel.numerics.gemm as gemm_module  # noqa: E402
from refmodel.dtypes import element_dtype  # noqa: E402
from refmodel.numerics.accumulate import fdpa_chain  # noqa: E402
from refmodel.numerics.fp8 import encode  # noqa: E402
from refmodel.numerics.gemm import gemm  # noqa: E402
from refmodel.wgmma_forms import parse_wgmma  # noqa: E402

#: /proc/cpuinfo flags worth naming: the vector extensions
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq", "avx512cd",
                "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni",
                "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16", "avx512_fp16", "amx_tile")


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of all threads) of ``repeat`` calls."""
    best = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return best, cpu


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_vector_extensions() -> list[str]:
    """The vector extensions /proc/cpuinfo lists (empty where it cannot be read)."""
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    except (OSError, StopIteration):
        return []
    have = set(flags.split(":", 1)[1].split())
    return [f for f in VECTOR_FLAGS if f in have]


def numba_target() -> dict:
    """The CPU numba compiles for (NUMBA_CPU_NAME or the host's) and the vector features it
    enables (NUMBA_CPU_FEATURES or the host's)."""
    import llvmlite.binding as ll
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    name = config.CPU_NAME or ll.get_host_cpu_name()
    feats = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    on = [f[1:] for f in feats.split(",") if f.startswith("+")]
    vec = [f for f in on if f.startswith(("sse4", "avx", "fma", "f16c", "amx"))]
    return {"cpu": name, "vector_features": vec, "features_from_env": config.CPU_FEATURES is not None,
            "avx512": any(f.startswith("avx512") for f in on)}


def blas_core() -> str:
    """The kernel set numpy's OpenBLAS runs (``openblas_get_corename`` of the library in
    numpy.libs, not another package's OpenBLAS), or 'unknown'."""
    try:
        libs = [ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines()
                if "openblas" in ln.lower() and ".so" in ln.split()[-1]]
        path = next((p for p in libs if "numpy.libs" in p), libs[0])
        lib = ctypes.CDLL(path)
        for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                    "openblas_get_corename"):
            if hasattr(lib, sym):
                f = getattr(lib, sym)
                f.restype = ctypes.c_char_p
                return f().decode()
    except (OSError, IndexError, ValueError):
        pass
    return "unknown"


def machine(emulated: bool) -> dict:
    """What the numbers were measured on."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    ext = host_vector_extensions()
    return {"cpu": _cpu_model(), "cpus": os.cpu_count(), "avx512f": "avx512f" in ext,
            "vector_extensions": ext, "numba_target": numba_target(), "avx2_emulation": emulated,
            "openblas_core": blas_core(), "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
            "numba_threads": numba.get_num_threads(),
            "numpy": np.__version__, "numba": numba.__version__, "python": platform.python_version(),
            "load_average_1_5_15": load,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


_WORKER_LOOP = r"""
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
a @ b
print(blas_core(), flush=True)
for line in sys.stdin:
    n = int(line)
    w = c = float("inf")
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        a @ b
        w, c = min(w, time.perf_counter() - t0), min(c, time.process_time() - c0)
    print(w, c, flush=True)
"""


def _worker_source() -> str:
    import inspect

    return ("import ctypes, sys, time\nfrom pathlib import Path\nimport numpy as np\n"
            + inspect.getsource(blas_core) + _WORKER_LOOP)


class OtherBlas:
    """numpy float64 matmul timed in a worker process whose OpenBLAS runs the other kernel
    set: Haswell's (AVX2) where this process runs another, else the one OpenBLAS picks for
    the host (OPENBLAS_CORETYPE unset)."""

    def __init__(self, a64, b64, here: str):
        self.dir = tempfile.TemporaryDirectory()
        pa, pb = (os.path.join(self.dir.name, n) for n in ("a.npy", "b.npy"))
        np.save(pa, a64)
        np.save(pb, b64)
        env = dict(os.environ)
        if here.lower() == "haswell":
            env.pop("OPENBLAS_CORETYPE", None)
        else:
            env["OPENBLAS_CORETYPE"] = "Haswell"
        self.proc = subprocess.Popen([sys.executable, "-c", _worker_source(), pa, pb], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.core = self.proc.stdout.readline().strip()

    def best(self, n: int) -> tuple[float, float]:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        w, c = self.proc.stdout.readline().split()
        return float(w), float(c)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.dir.cleanup()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--promote", type=int, default=None, help="promote_every (default: none)")
    ap.add_argument("--scales", choices=("none", "block"), default="none",
                    help="with --promote: 'block' = DeepGEMM's 1x128 scales of A, 128x128 of B")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-int", action="store_true", help="skip the previous (integer) kernel")
    ap.add_argument("--avx2", action="store_true",
                    help="emulate a host without AVX-512: numba compiles for Haswell (AVX2, FMA), OpenBLAS "
                         "runs its Haswell kernels (the process restarts itself with the settings)")
    ap.add_argument("--other-blas", action=argparse.BooleanOptionalAction, default=True,
                    help="also time BLAS with OpenBLAS's other kernel set in a worker process (default: on)")
    ap.add_argument("--blas-rest", type=float, default=0.2,
                    help="seconds of rest after each batch of BLAS calls (OpenBLAS's threads spin)")
    ap.add_argument("--json", default=None,
                    help="results file (default bench/results/cpu_gemm/<types>_m<M>n<N>k<K>[_p<n>][_blockscales]"
                         "[_avx2emu].json; '' = none)")
    args = ap.parse_args(argv)
    if args.scales != "none" and not args.promote:
        ap.error("--scales needs --promote")
    target = numba_target()
    emulated = args.avx2 and not target["avx512"] and target["cpu"] == "haswell"
    if args.avx2 and not emulated:
        raise SystemExit("--avx2: numba still targets AVX-512 (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES not taken)")

    form = parse_wgmma(args.instr)
    M, K, N = args.m, args.k, form.n
    rng = np.random.default_rng(0)

    def draw(name, shape):
        x = rng.standard_normal(shape)
        if name in ("e4m3", "e5m2"):
            return encode(x, name).view(element_dtype(name))
        if name in ("s8", "u8"):
            return rng.integers(0, 100, shape).astype(element_dtype(name))
        return x.astype(np.float32).astype(element_dtype(name))

    a, b = draw(form.dtype_a, (M, K)), draw(form.dtype_b, (K, N))
    sa = sb = None
    if args.scales == "block":
        sa = rng.uniform(0.5, 2.0, (M, K // 128)).astype(np.float32)
        sb = rng.uniform(0.5, 2.0, (K // 128, -(-N // 128))).astype(np.float32)
    run = lambda: gemm(a, b, instr=args.instr, promote_every=args.promote, scale_a=sa, scale_b=sb)  # noqa: E731
    run_plain = lambda: gemm(a, b, instr=args.instr)  # noqa: E731

    def run_int():
        # the same public gemm, its chain run by the previous integer kernel
        gemm_module.fdpa_chain = functools.partial(fdpa_chain, kernel="int")
        try:
            return gemm(a, b, instr=args.instr, promote_every=args.promote, scale_a=sa, scale_b=sb)
        finally:
            gemm_module.fdpa_chain = fdpa_chain

    t0 = time.perf_counter()
    d_fast = run()  # compile (or load the numba cache) and warm up
    first = time.perf_counter() - t0
    if args.promote:
        run_plain()
    floating = form.family != "int8"
    if floating and not args.no_int:
        d_int = run_int()
        if not np.array_equal(np.ascontiguousarray(d_fast).view(np.uint8), np.ascontiguousarray(d_int).view(np.uint8)):
            raise SystemExit("the fast and the integer kernel disagree: a bug, please report it")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    a64 @ b64
    here = blas_core()
    other = OtherBlas(a64, b64, here) if args.other_blas else None
    # interleave them so that a burst of other load hits them alike
    inf = float("inf")
    t_fast = t_int = t_np = t_plain = t_other = c_fast = c_int = c_np = c_plain = c_other = inf
    rounds = max(1, args.repeat // 3)
    try:
        for _ in range(rounds):
            w, c = _best(run, 3)
            t_fast, c_fast = min(t_fast, w), min(c_fast, c)
            if args.promote:
                w, c = _best(run_plain, 3)
                t_plain, c_plain = min(t_plain, w), min(c_plain, c)
            if floating and not args.no_int:
                w, c = _best(run_int, 3)
                t_int, c_int = min(t_int, w), min(c_int, c)
            w, c = _best(lambda: a64 @ b64, 3)
            t_np, c_np = min(t_np, w), min(c_np, c)
            time.sleep(args.blas_rest)
            if other is not None:
                w, c = other.best(3)
                t_other, c_other = min(t_other, w), min(c_other, c)
                time.sleep(args.blas_rest)
    finally:
        if other is not None:
            other.close()

    prods = M * N * K
    gps = lambda t: prods / t / 1e9  # noqa: E731
    mach = machine(emulated)
    print(f"instr     {args.instr}  M={M} N={N} K={K}  promote_every={args.promote}  scales={args.scales}")
    print(f"machine   {_cpu_model()}, {os.cpu_count()} cpus, numba {numba.get_num_threads()} threads "
          f"(first call {first:.2f} s)")
    print(f"host      vector extensions: {' '.join(mach['vector_extensions']) or 'unknown'}")
    print(f"numba     compiles for cpu={target['cpu']}: {' '.join(target['vector_features'])}"
          + ("  [AVX2 emulation]" if emulated else ""))
    print(f"refmodel gemm (fast kernel)  {t_fast * 1e3:9.2f} ms  {gps(t_fast):8.2f} G products/s")
    if t_plain < inf:
        print(f"  unpromoted, same run       {t_plain * 1e3:9.2f} ms  {gps(t_plain):8.2f} G products/s"
              f"   promoted / unpromoted: {t_plain / t_fast:.2f}x")
    if t_int < inf:
        print(f"refmodel gemm (int kernel)   {t_int * 1e3:9.2f} ms  {gps(t_int):8.2f} G products/s"
              f"   fast / int: {t_int / t_fast:.2f}x")
    print(f"numpy float64 @ (BLAS, {here})".ljust(29) + f"{t_np * 1e3:9.2f} ms  {gps(t_np):8.2f} G products/s"
          f"   fast / BLAS: {t_np / t_fast:.3f}")
    if t_other < inf:
        print(f"numpy float64 @ (BLAS, {other.core})".ljust(29) + f"{t_other * 1e3:9.2f} ms  "
              f"{gps(t_other):8.2f} G products/s   fast / BLAS: {t_other / t_fast:.3f}  (worker process)")
    print(f"CPU time of all threads per call: fast {c_fast * 1e3:.2f} ms, "
          + (f"int {c_int * 1e3:.2f} ms, " if c_int < inf else "") + f"numpy {c_np * 1e3:.2f} ms "
          "(a busy machine stretches wall time more than CPU time)")

    timing = lambda t, c: {"seconds": t, "cpu_seconds": c, "g_products_per_s": gps(t)}  # noqa: E731
    blas = [dict(timing(t_np, c_np), core=here, process="this", ratio_fast_to_blas=t_np / t_fast)]
    if t_other < inf:
        blas.append(dict(timing(t_other, c_other), core=other.core, process="worker",
                         ratio_fast_to_blas=t_other / t_fast))
    res = {"instr": args.instr, "M": M, "N": N, "K": K, "promote_every": args.promote, "scales": args.scales,
           "repeat": rounds * 3, "products": prods,
           "fast": timing(t_fast, c_fast),
           "unpromoted": timing(t_plain, c_plain) if t_plain < inf else None,
           "ratio_promoted_to_unpromoted": t_plain / t_fast if t_plain < inf else None,
           "int": timing(t_int, c_int) if t_int < inf else None,
           "numpy_float64": timing(t_np, c_np),
           "blas_baselines": blas,
           "ratio_fast_to_numpy": t_np / t_fast,
           "ratio_fast_to_int": t_int / t_fast if t_int < inf else None,
           "first_call_seconds": first,
           "machine": mach}
    path = args.json
    if path is None:
        tag = (f"{form.dtype_a}_{form.dtype_b}_{form.dtype_d}_m{M}n{N}k{K}" + (f"_p{args.promote}" if args.promote else "")
               + ("_blockscales" if args.scales == "block" else "") + ("_avx2emu" if emulated else ""))
        path = str(ROOT / "bench" / "results" / "cpu_gemm" / f"{tag}.json")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
