"""wgref.triton.interpret(): Triton's CPU interpreter, patched with the H200's numerics, runs the very kernel
recorded on the GPU (gpu.libraries.triton's lowering kernel) and gives the recorded bits; Triton's own
interpreter does not; what cannot be modelled is refused in one sentence.

Triton builds its library functions for the interpreter only when TRITON_INTERPRET=1 is set before it is
first imported, so each check runs in a fresh Python process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
if not triton.__version__.startswith("3.6"):
    pytest.skip("wgref.triton models Triton 3.6", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_interpreter_gives_the_recorded_bits_of_every_configuration_and_family():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "wgref.triton", "replay", "--only", only], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for only in ("lowering", "inductor,spellings,elementwise")]       # the two halves side by side
    outs = [p.communicate(timeout=900) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[0][-2000:] + o[1][-2000:] for o in outs]
    r = subprocess.CompletedProcess([], 0, "".join(o[0] for o in outs), "".join(o[1] for o in outs))
    assert "268 interpreted runs of the recorded kernel, 268 bit-identical to the H200, 0 differ" in r.stdout
    # Inductor's generated template source (fixtures/inductor keeps it), run without torch
    # (the FP8 same-call repeats: three calls, two families each, beyond the first 52)
    assert "58 interpreted Inductor template calls, 58 bit-identical to the H200, 0 differ" in r.stdout
    # the Triton spellings of the special-function recordings, and the recorded contracted multiply-adds
    assert "14 recorded Triton spellings interpreted on their samples, 14 bit-identical, 0 differ" in r.stdout
    assert "7 recorded Triton multiply-add kernels interpreted, 7 bit-identical, 0 differ" in r.stdout
    import json

    doc = json.loads((ROOT / "docs" / "data" / "triton_interpret.json").read_text())   # what docs/triton.md says
    assert doc["patched"] == {"runs": 268, "differ": 0, "families": ["narrow", "cancel", "wide", "special"]}
    assert doc["inductor"] == {"runs": 52, "differ": 0}
    assert doc["spellings"] == {"runs": 14, "differ": 0} and doc["elementwise"] == {"runs": 7, "differ": 0}


def test_tritons_own_interpreter_does_not():
    r = subprocess.run([sys.executable, "-m", "wgref.triton", "replay", "--plain", "--family", "narrow"], cwd=ROOT,
                       capture_output=True, text=True, timeout=900,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1
    last = r.stdout.strip().splitlines()[-1]
    differ = int(last.split(", ")[-1].split()[0])
    assert differ >= 40, last                  # np.matmul, numpy's order, no tf32, no 13-bit FP8 window
    import json

    doc = json.loads((ROOT / "docs" / "data" / "triton_interpret.json").read_text())   # what docs/triton.md says
    assert doc["plain"]["differ"] == differ and doc["plain"]["runs"] == int(last.split()[0])


def test_numpy_arguments_and_the_launch_configuration():
    r = _python("""
        import numpy as np, ml_dtypes, triton.language as tl
        import gpu.libraries.triton as GT, wgref.triton as WT
        from refmodel.golden import triton_matmul
        k = GT.lowering_matmul_kernel()
        rng = np.random.default_rng(2)
        a = (rng.standard_normal((64, 64)) * 4).astype(ml_dtypes.float8_e4m3fn)
        b = (rng.standard_normal((64, 16)) * 4).astype(ml_dtypes.float8_e4m3fn)
        outs = []
        with WT.interpret():
            for bm, w in ((32, 2), (64, 4)):          # MMAv2 (f16 mma.sync) and MMAv3 (wgmma): different bits
                out = np.zeros((64, 16), np.float32)
                k[(64 // bm, 1)](a, b, out, 64, 16, 64, 64, 1, 16, 1, 16, 1, BM=bm, BN=16, BK=64, PREC="none",
                                 IMP=-1, OUT=tl.float32, ACC="f32", PATTERN="dot_acc", num_warps=w)
                want = triton_matmul(a, b, block_k=64, block_m=bm, block_n=16, num_warps=w)
                assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), (bm, w)
                outs.append(out.copy())
        assert not np.array_equal(outs[0], outs[1])
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_elementwise_ops_follow_tritons_ptx_and_the_rest_is_refused():
    """tl.exp is mul.f32 by log2(e) then ex2.approx.f32 (the PTX; checked here against refmodel's instruction
    model, independently of the spelling model the interpreter runs), the contractions are fma.rn.f32, and
    tl.erf is refused; nothing warns: every op the interpreter models was recorded."""
    r = _python("""
        import warnings
        import numpy as np, triton, triton.language as tl, refmodel, wgref.triton as WT
        from refmodel.numerics.promotion import fma_f32_array

        @triton.jit
        def exp_kernel(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(y_ptr + r, tl.exp(tl.load(x_ptr + r)))

        @triton.jit
        def ops_kernel(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            x = tl.load(x_ptr + r)
            tl.store(y_ptr + r, x * x + x)
            tl.store(y_ptr + N + r, x - x * x)
            tl.store(y_ptr + 2 * N + r, x / (x - 0.5))
            tl.store(y_ptr + 3 * N + r, tl.sqrt(x))
            xz = x * x
            t = tl.abs(xz)                  # the product used first elsewhere: still contracted into the add
            tl.store(y_ptr + 4 * N + r, xz + t)

        @triton.jit
        def erf_kernel(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(y_ptr + r, tl.erf(tl.load(x_ptr + r)))

        x = np.concatenate([np.linspace(-90, 90, 60), [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
        y = np.zeros(64, np.float32)
        with WT.interpret(), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            exp_kernel[(1,)](x, y, N=64)
            log2e = np.array([0x3FB8AA3B], np.uint32).view(np.float32)[0]
            want = refmodel.sfu("ex2.approx.f32", (x * log2e).astype(np.float32))
            assert np.array_equal(y.view(np.uint32), np.asarray(want, np.float32).view(np.uint32))
            y4 = np.zeros(320, np.float32)
            ops_kernel[(1,)](x, y4, N=64)
            assert np.array_equal(y4[:64].view(np.uint32), fma_f32_array(x, x, x).view(np.uint32))
            assert np.array_equal(y4[64:128].view(np.uint32), fma_f32_array(-x, x, x).view(np.uint32))
            with np.errstate(all="ignore"):
                d = refmodel.sfu("div.full.f32", x, (x - np.float32(0.5)).astype(np.float32))
            assert np.array_equal(y4[128:192].view(np.uint32), np.asarray(d, np.float32).view(np.uint32))
            with np.errstate(all="ignore"):
                xx = np.abs(np.float32(x) * np.float32(x))
            assert np.array_equal(y4[256:].view(np.uint32), fma_f32_array(x, x, xx).view(np.uint32))
            assert np.array_equal(y4[192:256].view(np.uint32),
                                  np.asarray(refmodel.sfu("sqrt.approx.ftz.f32", x), np.float32).view(np.uint32))
            assert not w, [str(i.message) for i in w]        # every op it ran was recorded: nothing to warn
            try:
                erf_kernel[(1,)](x, y, N=64)
                raise SystemExit("tl.erf not refused")
            except Exception as e:
                assert "tl.erf" in str(e) and "not modelled" in str(e), str(e)
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout[-1000:] + r.stderr[-3000:]


def test_the_elementwise_table_is_what_triton_compiles():
    """wgref.triton.ELEMENTWISE_PTX against Triton 3.6's own PTX for sm_90 (compiled here, no GPU)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", "import json; from wgref.triton import ELEMENTWISE_PTX, elementwise_ptx; "
                        "print(json.dumps({e: elementwise_ptx(e) for e in ELEMENTWISE_PTX}))"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    from wgref.triton import ELEMENTWISE_PTX

    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert {e: sorted(v) for e, v in ELEMENTWISE_PTX.items()} == got


def test_interpret_needs_the_environment_variable_before_triton_is_imported():
    r = _python("""
        import os
        del os.environ["TRITON_INTERPRET"]
        import triton
        os.environ["TRITON_INTERPRET"] = "1"
        import wgref.triton as WT
        try:
            with WT.interpret():
                pass
        except Exception as e:
            print(e)
    """)
    assert "before the first `import triton`" in r.stdout, r.stdout + r.stderr[-2000:]


def test_the_pytest_fixture(tmp_path):
    (tmp_path / "conftest.py").write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\n")
    (tmp_path / "test_k.py").write_text(textwrap.dedent("""
        import numpy as np, triton, triton.language as tl

        @triton.jit
        def add(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            x = tl.load(x_ptr + r)
            tl.store(y_ptr + r, x + x)

        def test_add(wgref_triton):
            x = np.array([1.5, np.nan, -np.inf, 3e38], np.float32)
            y = np.zeros(4, np.float32)
            add[(1,)](x, y, N=4)
            assert y.view(np.uint32).tolist() == [0x40400000, 0x7FFFFFFF, 0xFF800000, 0x7F800000]
    """))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_float_reductions_are_refused_integer_ones_run():
    """numpy's summation order is not the GPU's: tl.sum / tl.max / tl.cumsum over floats are refused in one
    sentence; over integers (exact) they run."""
    r = _python("""
        import numpy as np, triton, triton.language as tl, wgref.triton as WT

        @triton.jit
        def rsum(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(y_ptr, tl.sum(tl.load(x_ptr + r), 0))

        @triton.jit
        def rmax(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(y_ptr, tl.max(tl.load(x_ptr + r), 0))

        @triton.jit
        def rscan(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(y_ptr + r, tl.cumsum(tl.load(x_ptr + r), 0))

        @triton.jit
        def atom(x_ptr, y_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.atomic_add(y_ptr + r * 0, tl.load(x_ptr + r))

        with WT.interpret():
            for k in (rsum, rmax, rscan):
                try:
                    k[(1,)](np.ones(16, np.float32), np.zeros(16, np.float32), N=16)
                    raise SystemExit(f"{k.fn.__name__}: a float reduction was not refused")
                except Exception as e:
                    assert "not modelled" in str(e) and "fp32" in str(e), str(e)
            y = np.zeros(16, np.int32)
            rsum[(1,)](np.arange(16, dtype=np.int32), y, N=16)
            assert y[0] == 120
            try:
                atom[(2,)](np.ones(16, np.float32), np.zeros(1, np.float32), N=16)
                raise SystemExit("a float atomic was not refused")
            except Exception as e:
                assert "float atomic" in str(e), str(e)
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout[-1000:] + r.stderr[-3000:]
