"""Rewrite fixtures/wgmma's raw dumps (kind ``wgmma``: a, b, c, d of every kept tile) as seeds + digests
(kind ``wgmma_seeded``): the tiles' inputs are rebuilt from the job's seed, the fixture keeps the hardware's
D rows :data:`refmodel.verify.replay_wgmma.SEEDED_ROWS` raw and the sha256 of the whole D (and of the
inputs, so a changed generator is named).  Refuses a file whose inputs do not rebuild bit for bit.

    python tools/shrink_wgmma.py [--fixtures fixtures]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def shrink(root: Path) -> tuple[int, int]:
    from refmodel.dtypes import raw_bits
    from refmodel.verify.fixtures import load_manifest, write_fixture
    from refmodel.verify.jobs import Job, make_inputs
    from refmodel.verify.replay_wgmma import to_seeded
    from refmodel.wgmma_forms import parse_wgmma

    d = root / "wgmma"
    man = load_manifest(d)
    before = sum((d / e["file"]).stat().st_size for e in man["entries"])
    for e in man["entries"]:
        if e["kind"] != "wgmma":
            continue
        meta = e["meta"]
        z = np.load(d / e["file"])
        job = Job(meta["instr"], rs=meta["rs"], scale_d=meta["scale_d"], imm_scale_a=meta["imm_scale_a"],
                  imm_scale_b=meta["imm_scale_b"], chain=meta["chain"])
        a, b, c, idx, names = make_inputs(job, np.random.default_rng(meta["seed"]), meta["tiles_per_family"])
        f = parse_wgmma(meta["instr"])
        A, B, C = raw_bits(a, f.dtype_a), raw_bits(b, f.dtype_b), raw_bits(c, f.dtype_d)
        sel = []
        for t in range(z["a"].shape[0]):
            hit = [i for i in range(A.shape[0]) if i not in sel and np.array_equal(A[i], z["a"][t])
                   and np.array_equal(B[i], z["b"][t]) and np.array_equal(C[i], z["c"][t]) and idx[i] == z["family"][t]]
            if not hit:
                raise SystemExit(f"{e['file']}: tile {t} does not rebuild from the seed: left as it is")
            sel.append(hit[0])
        arrays, new_meta = to_seeded(meta, sel, z["a"], z["b"], z["c"], z["d"])
        new_meta["shrunk_from"] = {"kind": "wgmma", "sha256": e["sha256"]}
        write_fixture("wgmma", e["file"][:-4], arrays, kind="wgmma_seeded", cases=e["cases"], meta=new_meta,
                      provenance=e["provenance"], root=root)
    man = load_manifest(d)
    after = sum((d / e["file"]).stat().st_size for e in man["entries"])
    return before, after


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", default=str(ROOT / "fixtures"))
    a = ap.parse_args(argv)
    before, after = shrink(Path(a.fixtures))
    print(json.dumps({"bytes_before": before, "bytes_after": after}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
