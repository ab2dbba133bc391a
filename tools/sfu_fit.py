"""Fit the special-function unit's coefficient tables from raw H200 outputs.

    python -m gpu.record.sfu --stages dumps --dump DUMPS     # on an H200: raw outputs of chosen ranges
    python tools/sfu_fit.py --dumps DUMPS                    # here: solve the tables, write tables.py

The datapath is known (refmodel/numerics/sfu/mufu.py): a segment index from the top fraction bits, a
quadratic ``A << a + B*x + C*sq(x)`` in fixed point with a truncated squarer, a rounding constant and
a shift.  Each recorded output pins the polynomial's value to an integer interval, so every segment's
(A, B, C) is the integer solution of a few hundred thousand linear inequalities: a least-squares
guess, then every (B, C) near it whose interval for A is not empty.  The tool refuses a segment with
no solution or with more than one (the hardware data must determine the table), and writes
``refmodel/numerics/sfu/tables.py``.
"""

from __future__ import annotations

import argparse
import lzma
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refmodel.numerics.sfu.fixed import fmul_rz_f32, revolutions_fixed, square17  # noqa: E402


def load_dumps(folder: str) -> dict[tuple[str, int], np.ndarray]:
    """{(instr, first input word): output words} of every dumps_*.pkl in ``folder``."""
    out = {}
    for p in sorted(Path(folder).glob("dumps_*.pkl")):
        for r in pickle.load(open(p, "rb")):
            d = np.frombuffer(lzma.decompress(r["xz"]), dtype=np.dtype(r["diff"])).astype(np.int64)
            w = np.empty(r["count"], np.int64)
            w[0] = r["first"]
            w[1:] = r["first"] + np.cumsum(d)
            out[(r["name"], r["start"])] = w
    return out


def solve(xl, sq, lo, hi, a_shift, radius=4):
    """Every (A, B, C) with lo <= (A << a_shift) + B*xl + C*sq <= hi at every point."""
    m = np.stack([np.full(xl.shape, float(1 << a_shift)), xl.astype(float), sq.astype(float)], 1)
    guess, *_ = np.linalg.lstsq(m, (lo + hi) / 2.0, rcond=None)
    b0, c0 = int(round(guess[1])), int(round(guess[2]))
    found = []
    for b in range(b0 - radius, b0 + radius + 1):
        for c in range(c0 - radius, c0 + radius + 1):
            s = b * xl + c * sq
            a_lo = -((-(lo - s).max()) >> a_shift)
            a_hi = (hi - s).min() >> a_shift
            found += [(a, b, c) for a in range(int(a_lo), int(a_hi) + 1)]
    return found


def fit_table(name, n, idx, xl, sq, lo, hi, a_shift):
    table = []
    for i in range(n):
        m = idx == i
        sols = solve(xl[m], sq[m], lo[m], hi[m], a_shift)
        if len(sols) != 1:
            raise SystemExit(f"{name}[{i}]: {len(sols)} solutions ({sols[:4]}); record more inputs")
        table.append(sols[0])
    print(f"{name}: {n} segments, each determined by {int(np.bincount(idx).min())}+ outputs")
    return table


def normalised_interval(out, top_bit, keep_shift, e_top):
    """Outputs of a result normalised so that bit ``top_bit`` leads, exponent ``e_top`` before the
    shifts, truncated by ``keep_shift`` -> the interval [lo, hi] of the unnormalised integer."""
    e = (out >> 23) & 0xFF
    f = (out & 0x7FFFFF) | 0x800000
    s = e_top - e                                   # left shifts the normaliser made
    lo = -((-(f << keep_shift)) >> s)               # ceil(f * 2^k / 2^s)
    hi = (((f + 1) << keep_shift) - 1) >> s
    return lo, hi


def fit_all(d) -> dict[str, list]:
    k23 = np.arange(1 << 23, dtype=np.int64)
    tables = {}
    # rcp: x in [1, 2); fx = (A<<13 + B x + C sq(x<<1) + 0x47e7) >> 15, x = 16 fraction bits
    out = d[("rcp.approx.ftz.f32", 0x3F800000)]
    fxo = out - (126 << 23) + 0x800000
    xl = k23 & 0xFFFF
    tables["rcp"] = fit_table("rcp", 128, k23 >> 16, xl, square17(xl << 1), (fxo << 15) - 0x47E7,
                              ((fxo + 1) << 15) - 1 - 0x47E7, 13)
    # rsqrt: x in [1, 4); index = exponent parity and 6 fraction bits
    outs = [d[("rsqrt.approx.ftz.f32", 0x3F800000)], d[("rsqrt.approx.ftz.f32", 0x40000000)]]
    fxp = np.concatenate([k23, k23 | (1 << 23)])
    fxo = np.concatenate(outs) - (126 << 23) + 0x800000
    keep = fxp != 0                                 # 1.0 is exact, outside the polynomial
    xl = fxp & 0x1FFFF
    tables["rsqrt"] = fit_table("rsqrt", 128, (fxp >> 17)[keep], xl[keep], 4 * square17(xl)[keep],
                                ((fxo << 16) - 0x7FFF)[keep], (((fxo + 1) << 16) - 1 - 0x7FFF)[keep], 14)
    # sqrt: x in [1, 4) -> [1, 2); its own table, index as rsqrt's
    outs = [d[("sqrt.approx.ftz.f32", 0x3F800000)], d[("sqrt.approx.ftz.f32", 0x40000000)]]
    fxo = np.concatenate(outs) - (127 << 23) + 0x800000
    tables["sqrt"] = fit_table("sqrt", 128, fxp >> 17, fxp & 0x1FFFF, square17(fxp & 0x1FFFF),
                               (fxo << 17) - 0x7FFF, ((fxo + 1) << 17) - 1 - 0x7FFF, 15)
    # ex2: x in [1, 2) = integer part 1, fraction k
    out = d[("ex2.approx.ftz.f32", 0x3F800000)]
    fxo = out - (128 << 23) + 0x800000
    xl = k23 & 0x1FFFF
    tables["ex2"] = fit_table("ex2", 64, k23 >> 17, xl, square17(xl), (fxo << 15) - 0x77E2,
                              ((fxo + 1) << 15) - 1 - 0x77E2, 13)
    # lg2: x in [1, 2) (res >= 0 normalised) and [0.5, 1) (~(res - 2^36) normalised)
    pos = d[("lg2.approx.ftz.f32", 0x3F800000)]
    neg = d[("lg2.approx.ftz.f32", 0x3F000000)]
    lo_p, hi_p = normalised_interval(pos, 42, 19, 133)
    lo_n, hi_n = normalised_interval(neg & 0x7FFFFFFF, 42, 19, 133)
    lo_n, hi_n = (1 << 36) - 1 - hi_n, (1 << 36) - 1 - lo_n
    keep = np.concatenate([k23 != 0, np.ones(k23.size, bool)])   # lg2(1.0) = 0 is a special case
    kk = np.concatenate([k23, k23])
    lo_r, hi_r = np.concatenate([lo_p, lo_n]), np.concatenate([hi_p, hi_n])
    xl = kk & 0x1FFFF
    tables["lg2"] = fit_table("lg2", 64, (kk >> 17)[keep], xl[keep], 2 * square17(xl)[keep],
                              (4 * lo_r - 0x3345)[keep], (4 * hi_r + 3 - 0x3345)[keep], 12)
    # sin: MUFU.SIN of r = RZ(x * 1/(2 pi)) for x in [0.25, 4); quadrants 0 and 1
    idxs, xls, los, his = [], [], [], []
    for e in (125, 126, 127, 128):
        out = d[("sin.approx.ftz.f32", e << 23)]
        x = (np.int64(e) << 23) | k23
        r = fmul_rz_f32(x.astype(np.uint32), np.uint32(0x3E22F983))
        fx = revolutions_fixed(r)
        q = fx >> 23
        f = np.where(q & 1, ~fx & 0x7FFFFF, fx & 0x7FFFFF)
        keep = (q < 2) & (out & 0x7FFFFFFF != 0)
        lo, hi = normalised_interval(out & 0x7FFFFFFF, 37, 14, 127)
        idxs.append((f >> 17)[keep]); xls.append((f & 0x1FFFF)[keep]); los.append(lo[keep]); his.append(hi[keep])
    xl = np.concatenate(xls)
    tables["sin"] = fit_table("sin", 64, np.concatenate(idxs), xl, square17(xl), np.concatenate(los),
                              np.concatenate(his), 11)
    tables["tanh"] = fit_tanh(d)
    return tables


# MUFU.TANH: index bits per binade k = -8..2 (segments of [2^-8, 8)); the rest is found per segment
TANH_INDEX_BITS = (0, 0, 0, 1, 1, 2, 2, 2, 3, 4, 3)
TANH_GUARD = 15


def fit_tanh(d) -> list:
    """(k, seg, U, A, B, C) per segment: R = (A << 15) + B*xl + C*sq(xl) is the result in units of
    2**-(U+15), truncated to a float32.  Per segment the smallest number of guard bits g with an
    integer solution is searched; that solution must be unique, and is rescaled to g = 15 (exact)."""
    xl = np.arange(1 << 17, dtype=np.int64)
    sq = square17(xl)
    rows = []
    for k in range(-8, 3):
        out = d[("tanh.approx.f32", (127 + k) << 23)]
        nb = TANH_INDEX_BITS[k + 8]
        blocks = out.reshape(-1, 1 << (6 - nb))
        if not (blocks == blocks[:, :1]).all():
            raise SystemExit(f"tanh: binade 2^{k}: the output depends on input bits the model ignores")
        v = blocks[:, 0]
        for seg in range(1 << nb):
            vv = v[seg << 17:(seg + 1) << 17]
            u = 150 - int(((vv >> 23) & 0xFF).min())
            m = (vv & 0x7FFFFF) | 0x800000
            sh = ((vv >> 23) & 0xFF) - 150 + u
            y = m << sh
            for g in range(TANH_GUARD + 1):
                sols = solve(xl, sq, y << g, ((y + (1 << sh)) << g) - 1, 0)
                if sols:
                    break
            if len(sols) != 1 or sols[0][0] % (1 << g):
                raise SystemExit(f"tanh k={k} seg={seg}: {len(sols)} solutions at {g} guard bits")
            a, b, c = sols[0]
            rows.append((k, seg, u, a >> g, b << (TANH_GUARD - g), c << (TANH_GUARD - g)))
    print(f"tanh: {len(rows)} segments over 11 binades")
    return rows


def write_tables(tables, path: Path) -> None:
    lines = ['"""Coefficient tables of the H200\'s special-function unit, solved from its outputs by',
             "tools/sfu_fit.py (generated: do not edit).  One row (A, B, C) per segment; see mufu.py.\"\"\"",
             "", "import numpy as np", ""]
    for name, tab in tables.items():
        if name == "tanh":
            lines.append("# (k, segment, U, A, B, C): binade 2^k, output unit 2^-(U+15)")
            lines.append("TANH = np.array([")
            for i in range(0, len(tab), 3):
                lines.append("    " + " ".join(f"({k:2d}, {g:2d}, {u}, {a:8d}, {b:8d}, {c:7d})," for k, g, u, a, b, c in tab[i:i + 3]))
        else:
            lines.append(f"{name.upper()} = np.array([")
            for i in range(0, len(tab), 4):
                lines.append("    " + " ".join(f"({a:#09x}, {b:6d}, {c:5d})," for a, b, c in tab[i:i + 4]))
        lines.append("], dtype=np.int64)")
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dumps", required=True, help="folder of dumps_*.pkl from gpu.record.sfu --dump")
    ap.add_argument("--out", default=str(ROOT / "refmodel" / "numerics" / "sfu" / "tables.py"))
    args = ap.parse_args(argv)
    tables = fit_all(load_dumps(args.dumps))
    write_tables(tables, Path(args.out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
