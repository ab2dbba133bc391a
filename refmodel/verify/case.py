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

from ..errors import WgrefError, InputError
from ..dtypes import bits_of, element_dtype
from ..fileio import load_npz, save_npz
from ..validate import check_flag, check_int
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
    save_npz(path, **arrays)  # atomically: a killed writer leaves no partial file
    return path


_CONFIG_KEYS = {"instr", "rs", "scale_d", "imm_scale_a", "imm_scale_b", "chain", "notes"}


def _typed(path, z: dict, key: str, type_name: str, shape: tuple) -> np.ndarray:
    if key not in z:
        raise InputError(f"{path} is not a wgref replay file: it has no array {key!r}")
    dt = element_dtype(type_name)
    raw = z[key]
    if raw.dtype.kind != "u" or raw.dtype.itemsize != dt.itemsize:
        raise InputError(f"{path}: array {key!r} must hold the raw {dt.itemsize * 8}-bit patterns of "
                         f".{type_name} data, got {raw.dtype}")
    if raw.shape != shape:
        want = "(" + ", ".join(str(d) for d in shape) + ")"
        raise InputError(f"{path}: array {key!r} must have shape {want} for this configuration, "
                         f"got {raw.shape}")
    return raw.view(dt)


def load_case(path: str | Path) -> tuple[WgmmaCase, Optional[np.ndarray]]:
    """Read a replay file: (case, hardware D or None).  Every field is checked: a
    configuration that does not match the arrays (a chain of 0, extra K columns, a
    wrong tile count) is refused, never replayed as a vacuous match."""
    z = load_npz(path)
    if "config" not in z:
        raise InputError(f"{path} is not a wgref replay file: it has no 'config' entry")
    try:
        cfg = json.loads(str(z["config"]))
    except ValueError:
        raise InputError(f"{path}: the 'config' entry is not valid JSON") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: the 'config' entry must be a JSON object, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - _CONFIG_KEYS)
    if unknown or "instr" not in cfg:
        raise InputError(f"{path}: config must have 'instr' and only the keys "
                         f"{', '.join(sorted(_CONFIG_KEYS))}; got {', '.join(sorted(cfg))}")
    try:
        f = parse_wgmma(cfg["instr"])
        kw = {"instr": f.instr,
              "rs": check_flag("rs", cfg.get("rs", False)),
              "scale_d": check_flag("scale_d", cfg.get("scale_d", True)),
              "imm_scale_a": check_int("imm_scale_a", cfg.get("imm_scale_a", 1), -1, 1),
              "imm_scale_b": check_int("imm_scale_b", cfg.get("imm_scale_b", 1), -1, 1),
              "chain": check_int("chain", cfg.get("chain", 1), 1, 1 << 20)}
        for k in ("imm_scale_a", "imm_scale_b"):
            if kw[k] == 0:
                raise InputError(f"{k} must be 1 or -1, got 0")
    except WgrefError as e:
        raise InputError(f"{path}: bad replay configuration: {e}") from None
    notes = cfg.get("notes", {})
    if not isinstance(notes, dict):
        raise InputError(f"{path}: config 'notes' must be a JSON object")
    if "a" not in z or z["a"].ndim != 3:
        raise InputError(f"{path}: array 'a' must be 3-D (tiles, 64, K * chain)")
    t, kc = z["a"].shape[0], f.k * kw["chain"]
    a = _typed(path, z, "a", f.dtype_a, (t, M, kc))
    b = _typed(path, z, "b", f.dtype_b, (t, kc, f.n))
    c = _typed(path, z, "c", f.dtype_d, (t, M, f.n))
    hw = _typed(path, z, "hardware", f.dtype_d, (t, M, f.n)) if "hardware" in z else None
    return WgmmaCase(a=a, b=b, c=c, notes=notes, **kw), hw
