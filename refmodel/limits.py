"""The largest meaningful sizes, as data: one table checked before anything is allocated (the ground of refmodel).

Every size a caller can ask for (a tile's rows, an image's bytes, a trace's events, a
quantization block, a diagram's lines, a file's declared array bytes) is bounded by one row of
:data:`LIMITS`: its value and the one-line reason it is the largest meaningful one (a hardware
limit of the H200 / sm_90a, a field width of an encoding, or a bound on what the CPU model can
compute in reasonable time and memory).  :func:`check_limit` refuses a larger value with one
sentence that names the limit, so a huge integer never reaches ``numpy.zeros`` and a typo
never turns into an exabyte allocation or an hour of work: ``check_limit("smem_rows", 1000000,
"rows")`` raises ``LimitError: rows must be at most 4096 (limit 'smem_rows': a shared-memory tile
has at most 228 KB ...), got 1000000``.

A block along a tensor's axis (a quantization tile's rows or columns, a schedule's scale block, a
promotion group's K) has one rule, :func:`check_block`: at most the tensor's extent along that axis,
or at most the row 'block' (a standard block overhanging a smaller tensor is one ragged block).

The module-level constants (``MAX_ARRAY_BYTES``, ``MAX_NPZ_MEMBERS``, ``MAX_JSON_DEPTH``, ...)
are the same values, for code that only needs the number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InputError


class LimitError(InputError):
    """A size argument is larger than the largest meaningful one (one sentence naming the limit)."""


@dataclass(frozen=True)
class Limit:
    """One row of :data:`LIMITS`: the largest meaningful value and why."""

    name: str
    value: int
    reason: str


def _rows(*rows: tuple[str, int, str]) -> dict[str, Limit]:
    return {name: Limit(name, value, reason) for name, value, reason in rows}


KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

#: name -> :class:`Limit`.  Hardware rows quote the PTX ISA / CUDA programming guide for sm_90.
LIMITS: dict[str, Limit] = _rows(
    # --- wgmma tiles (the form tables, refmodel.wgmma_forms / wgmma_sp_forms, hold the exact sets)
    ("wgmma_m", 64, "every wgmma has M = 64 (one warpgroup: 4 warps x 16 rows)"),
    ("wgmma_n", 256, "the widest wgmma is m64n256"),
    ("wgmma_k_bytes", 32, "a dense wgmma reads 32 bytes of K per row (tf32 K=8, f16/bf16 K=16, 8-bit K=32)"),
    ("wgmma_sp_k_bytes", 64, "a sparse wgmma reads 64 logical bytes of K per row (twice the dense K)"),
    ("acc_regs", 128, "accumulator registers per thread: N/2 for f32/s32, N/4 for f16, at most 128 (m64n256 f32)"),
    ("regs_per_thread", 255, "a thread has at most 255 32-bit registers on sm_90"),
    ("register_bits", 32, "a register holds 32 bits: values 0..2**32-1"),
    ("threads", 128, "a warpgroup is 128 threads"),
    # --- shared memory
    ("smem_bytes", 227 * KIB, "one Hopper CTA can use at most 227 KiB (232448 bytes) of the SM's 228 KB of "
                              "shared memory"),
    ("smem_address", 1 << 18, "a descriptor's 14-bit start field (address >> 4) spans 256 KiB of the shared "
                              "window; the 228 KB of shared memory lie below it"),
    ("smem_rows", 4096, "a shared-memory tile has at most 228 KB: 7264 rows of one wgmma's 32-byte K, and "
                        "real tiles have at most 256 rows (4096 is ample)"),
    ("smem_row_bytes", 16 * KIB, "a row of a shared-memory operand tile: 16 KiB is 512 wgmma K steps, beyond "
                                 "any CTA tile"),
    # --- matrix descriptor fields (PTX ISA "Matrix Descriptor Format")
    ("desc_offset_bytes", (1 << 18) - 16, "start address, LBO and SBO are 14-bit fields of 16-byte units: at "
                                          "most 2**18 - 16 bytes"),
    ("desc_base_offset", 7, "the base-offset field has 3 bits"),
    ("desc_swizzle", 3, "the swizzle field has 2 bits (0 none, 1 128B, 2 64B, 3 32B)"),
    # --- TMA (cuTensorMapEncodeTiled)
    ("tma_box", 256, "cuTensorMapEncodeTiled takes box dimensions of at most 256 elements"),
    ("byte_value", 255, "a fill value is one byte: 0..255"),
    # --- pipeline traces (refmodel.machine.trace)
    ("trace_events", 1_000_000, "a trace of one CTA tile: the canonical mainloop at 4096 k-blocks is ~100k "
                                "events; 10**6 keeps the checker's state bounded"),
    ("trace_bytes", 256 * MIB, "a JSON-lines trace of 10**6 events is well under 256 MiB"),
    ("trace_line_chars", 64 * KIB, "one trace event is a short JSON object; 64 KiB holds any list of ranges "
                                   "or registers it can carry"),
    ("trace_reg_range", 255, "a register range names registers of one thread: at most 255 (d[0:255])"),
    ("trace_reg_index", 65535, "register numbers in a range: 5 digits are more than a PTX kernel declares"),
    ("mbarrier_count", (1 << 20) - 1, "an mbarrier's arrival count and transaction bytes are 20-bit fields "
                                      "(PTX ISA: 1 .. 2**20 - 1)"),
    ("wait_group_n", 255, "wgmma.wait_group N: an in-flight depth beyond 255 groups does not exist"),
    ("trace_address", 1 << 32, "shared addresses are 32-bit"),
    # --- numerics
    ("quantize_tile", 2**31 - 1, "a quantization block's rows/cols index array dimensions (int32 range)"),
    ("block", 4096, "a block along one axis of a tensor (a quantization tile's rows or columns, a "
                    "schedule's scale block, a promotion group's K) that overhangs a smaller tensor is one ragged "
                    "block: meaningful for a recipe's standard block (NVFP4 16, OCP MX 32, DeepGEMM and "
                    "TransformerEngine 128, bitsandbytes up to 4096 elements), never beyond"),
    ("quantize_margin", 64, "a scale margin of 2**64 already overflows every FP8 scale"),
    ("delayed_history", 1 << 16, "an amax history: TransformerEngine's default is 1024; 65536 is ample"),
    ("error_k", 1 << 17, "error_vs_k's largest K: 131072 (8x the default sweep) already takes minutes in the "
                         "CPU model, and the drift is clear long before"),
    ("error_dim", 4096, "error_vs_k's M and N: 4096 is 16 wgmma tiles wide; the error statistics do not need more"),
    ("sweep_items", 64, "a list of K values or promotion intervals to sweep: 64 entries"),
    ("instr_chars", 256, "an instruction string (wgmma / cvt / ldmatrix opcode with its modifiers) is under "
                         "100 characters; 256 is ample"),
    ("elements", 1 << 25, "elements of an array the model builds from size arguments (offset tables): 2**25, "
                          "256 MiB of int64 offsets (a 4096 x 8192 sparse-metadata map)"),
    ("batch_elements", 1 << 28, "elements of a broadcast wgmma batch (batch x 64 x N): 2**28, 16384 m64n256 "
                                "tiles; more is an accident of broadcasting two batch shapes"),
    # --- diagrams (refmodel.render)
    ("diagram_rows", 256, "a diagram draws every row: 256 (a B tile of N = 256) is the most a picture can show"),
    ("diagram_cols", 256, "a diagram draws every column: 256 K elements is 16 swizzle rows of 128 bytes"),
    ("diagram_lines", 256, "swizzle lines drawn: the pattern repeats every 8 lines; 256 is 32 periods"),
    # --- files (refmodel.fileio and the format loaders)
    ("array_bytes", 4 * GIB, "an .npy/.npz array's header-declared size: 4 GiB is far beyond any fixture or "
                             "tile file (a sweep chunk is 16 MiB)"),
    ("npz_members", 4096, "members of an .npz archive: a fixture holds a few dozen"),
    ("json_depth", 64, "nesting of a JSON document (config, manifest, INDEX, journal, trace line): wgref's "
                       "formats nest at most 4 deep"),
    ("json_bytes", 64 * MIB, "a JSON document wgref reads (manifest, INDEX, replay config) is kilobytes"),
)

MAX_ARRAY_BYTES = LIMITS["array_bytes"].value
MAX_NPZ_MEMBERS = LIMITS["npz_members"].value
MAX_JSON_DEPTH = LIMITS["json_depth"].value
MAX_JSON_BYTES = LIMITS["json_bytes"].value
SMEM_BYTES = LIMITS["smem_bytes"].value
SMEM_ADDRESS = LIMITS["smem_address"].value
MAX_ELEMENTS = LIMITS["elements"].value


def show_value(v) -> str:
    """A short text for a value in a message: huge integers by their size, long texts cut."""
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        if v.bit_length() <= 64:
            return str(v)
        return f"an integer of about 10**{int(v.bit_length() * math.log10(2))}"
    try:
        r = repr(v)
    except Exception:  # noqa: BLE001 - a repr that fails is still a value to name
        r = f"a {type(v).__name__}"
    return r if len(r) <= 60 else r[:57] + "..."


def limit(name: str) -> int:
    """The value of one limit."""
    return LIMITS[name].value


def check_block(what: str, size: int, extent: int | None = None, axis: str | None = None) -> int:
    """The one rule for the size of a block along a tensor's axis (a quantization tile's rows or
    columns, a schedule's scale block, a promotion group's K): ``size`` if it is at most the tensor's
    ``extent`` along ``axis`` (a block of the data) or at most the limit 'block' (a recipe's standard
    block on a smaller tensor: one ragged block); where no tensor is at hand (``extent`` None: a recipe
    or a schedule on its own) only the limit applies.  Otherwise one :class:`LimitError` sentence
    naming the extent and the limit, before anything proportional to ``size`` is allocated."""
    lim = LIMITS["block"]
    if (extent is not None and size <= extent) or size <= lim.value:
        return size
    where = "" if extent is None else f"the tensor's extent ({extent}) along {axis} or at most "
    raise LimitError(f"{what} must be at most {where}{lim.value} (limit 'block': a standard block may overhang "
                     f"a smaller tensor as one ragged block, a larger one is no block of it), "
                     f"got {show_value(size)}")


def check_limit(name: str, value: int, what: str) -> int:
    """``value`` if it is at most the limit ``name``; otherwise one :class:`LimitError` sentence
    naming ``what``, the limit and its reason."""
    lim = LIMITS[name]
    if value > lim.value:
        raise LimitError(f"{what} must be at most {lim.value} (limit {name!r}: {lim.reason}), "
                         f"got {show_value(value)}")
    return value


def table() -> list[tuple[str, int, str]]:
    """(name, value, reason) of every limit, in table order (docs and tests read this)."""
    return [(lim.name, lim.value, lim.reason) for lim in LIMITS.values()]


__all__ = ["LIMITS", "Limit", "LimitError", "check_block", "check_limit", "limit", "table", "show_value", "MAX_ARRAY_BYTES",
           "MAX_NPZ_MEMBERS", "MAX_JSON_DEPTH", "MAX_JSON_BYTES", "SMEM_BYTES", "SMEM_ADDRESS", "MAX_ELEMENTS"]
