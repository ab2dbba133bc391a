"""One wgmma test case (a chain of instructions on one or more tiles) and its replay file.

A replay file (``.npz``) holds the operands as raw bits, the configuration, the
hardware's output (raw bits) when known, and free-form notes (seed, how it was
shrunk).  ``wgref replay FILE`` recomputes refmodel and diffs it against the stored
hardware output (and re-runs the hardware when a GPU is present).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..dtypes import bits_of, element_dtype
from ..wgmma_forms import M, WgmmaForm, parse_wgmma

@dataclass
class WgmmaCase:
    """``chain`` wgmmas along K: a (T, 64, K*chain), b (T, K*chain, N), c (T, 64, N)."""

    instr: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    rs: bool = False
    scale_d: bool = True
    imm_scale_a: int = 1
    imm_scale_b: int = 1
    chain: int = 1
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def form(self) -> WgmmaForm:
        return parse_wgmma(self.instr)

    def with_(self, **changes) -> "WgmmaCase":
        return replace(self, **changes)

    def config(self) -> dict[str, Any]:
        return {"instr": self.instr, "rs": self.rs, "scale_d": self.scale_d,
                "imm_scale_a": self.imm_scale_a, "imm_scale_b": self.imm_scale_b,
                "chain": self.chain}

    def model(self) -> np.ndarray:
        """refmodel's D: the chain of instructions, each one's D the next one's C."""
        from ..numerics.wgmma import wgmma

        f = self.form
        d = self.c
        for s in range(self.chain):
            ks = slice(s * f.k, (s + 1) * f.k)
            d = wgmma(self.instr, self.a[..., ks], self.b[..., ks, :], d,
                      scale_d=self.scale_d if s == 0 else True,
                      imm_scale_a=self.imm_scale_a, imm_scale_b=self.imm_scale_b)
        return d

    def nonzeros(self) -> int:
        return int(sum(np.count_nonzero(bits_of(x)) for x in (self.a, self.b, self.c)))


def save_case(path: str | Path, case: WgmmaCase, *, hardware: Optional[np.ndarray] = None) -> Path:
    """Write a replay file (raw bits + JSON configuration)."""
    path = Path(path)
    arrays = {"a": bits_of(case.a), "b": bits_of(case.b), "c": bits_of(case.c),
              "config": np.array(json.dumps({**case.config(), "notes": case.notes}))}
    if hardware is not None:
        arrays["hardware"] = bits_of(hardware)
    np.savez_compressed(path, **arrays)
    return path


def load_case(path: str | Path) -> tuple[WgmmaCase, Optional[np.ndarray]]:
    """Read a replay file: (case, hardware D or None)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            cfg = json.loads(str(z["config"]))
            f = parse_wgmma(cfg["instr"])
            a = z["a"].view(element_dtype(f.dtype_a))
            b = z["b"].view(element_dtype(f.dtype_b))
            c = z["c"].view(element_dtype(f.dtype_d))
            hw = z["hardware"].view(element_dtype(f.dtype_d)) if "hardware" in z.files else None
    except (OSError, KeyError, ValueError) as e:
        raise InputError(f"{path} is not a wgref replay file: {e}") from None
    notes = cfg.pop("notes", {})
    return WgmmaCase(a=a, b=b, c=c, notes=notes, **cfg), hw
