"""wgref reference model: bit-exact CPU model of Hopper (sm_90a) warpgroup MMA features.

Pure CPU (numpy, ml_dtypes, numba); never imports cupy.
"""

import numpy as np

from ._numba_cache import ensure_cache_dir as _ensure_cache_dir

_ensure_cache_dir()  # before any cache=True kernel is defined

from .errors import WgrefError, FormError, InputError, DTypeError, DeviceError
from .numerics.formats import FormatSpec, FORMATS, E4M3, E5M2, F16, BF16, F32, format_spec
from .numerics.fp8 import (encode, decode, round_to_format, pack_x2, unpack_x2, pack_x4,
                  unpack_x4, POLICIES)
from .numerics.cvt import cvt, CVT_FORMS, parse_cvt
from .numerics.scaling import (quantize, dequantize, DelayedScaling, describe_recipe, scale_from_amax,
                      decode_e8m0)
from .wgmma_forms import WGMMA_FORMS, parse_wgmma

from .verify.differ import diff
from .numerics.accumulate import (AccumParams, IntAccumParams, BINDING, params_for, with_params, fdpa,
                         fma_f32, PROMOTE_OPS)
from .numerics.wgmma import wgmma, wgmma_reference
from .numerics.gemm import gemm
from .numerics.error_report import error_vs_k
from .golden.torch_scaled_mm import scaled_mm   # the unsplit model, kernel=/schedule=, warnings
from .layouts.swizzle import Swizzle, SwizzleMode, MODES as SWIZZLE_MODES, swizzle_mode, swizzle_address
from .layouts.smem import SmemLayout, dense_strides, tile_image, rowmajor_offsets
from .layouts.descriptor import MatrixDescriptor, operand_addresses
from .layouts.fragment import (accumulator_layout, a_fragment_layout, pack_accumulator, unpack_accumulator,
                               pack_a_fragment, unpack_a_fragment)
from .layouts.stmatrix import MATRIX_FORMS, parse_matrix_instr
from .machine.stmatrix import stmatrix, ldmatrix
from .machine.wgmma import wgmma_smem, wgmma_registers
from .machine.epilogue import epilogue_stmatrix
from .machine.tma import tma_load
from .wgmma_sp_forms import WGMMA_SP_FORMS, parse_wgmma_sp
from .numerics.sparse import compress, decompress, prune_2_4, kept_positions, wgmma_sp, wgmma_sp_reference, gemm_sp
from .layouts.sparse_meta import meta_holders, pack_meta, unpack_meta
from .machine.sparse import wgmma_sp_registers
from .numerics.sfu.unit import sfu
from .numerics.sfu.forms import SFU_FORMS, parse_sfu
from .mma_sync_forms import MMA_SYNC_FORMS, parse_mma_sync
from .numerics.mma_sync import mma_sync
from .interop import accepts_frameworks as _accepts_frameworks
from .validate import check_real_scalar as _check_real_scalar

_fma_f32_kernel = fma_f32


def fma_f32(x, y, z):
    """RN32(x * y + z) with one rounding (see :func:`refmodel.numerics.accumulate.fma_f32`);
    the three arguments must be real numbers."""
    for name, v in (("x", x), ("y", y), ("z", z)):
        _check_real_scalar(name, v)
    with np.errstate(over="ignore"):
        args = [float(np.float64(v)) for v in (x, y, z)]    # the checked values as floats (2**64 included)
    return _fma_f32_kernel(*args)


# public entry points take numpy, ml_dtypes, PyTorch or cupy arrays (see refmodel.interop)
cvt = _accepts_frameworks(cvt)
encode = _accepts_frameworks(encode)
decode = _accepts_frameworks(decode)
round_to_format = _accepts_frameworks(round_to_format)
quantize = _accepts_frameworks(quantize)
dequantize = _accepts_frameworks(dequantize)
diff = _accepts_frameworks(diff)
wgmma = _accepts_frameworks(wgmma)
gemm = _accepts_frameworks(gemm)
scaled_mm = _accepts_frameworks(scaled_mm)
stmatrix = _accepts_frameworks(stmatrix)
ldmatrix = _accepts_frameworks(ldmatrix)
wgmma_smem = _accepts_frameworks(wgmma_smem)
wgmma_registers = _accepts_frameworks(wgmma_registers)
epilogue_stmatrix = _accepts_frameworks(epilogue_stmatrix)
tma_load = _accepts_frameworks(tma_load)
compress = _accepts_frameworks(compress)
decompress = _accepts_frameworks(decompress)
prune_2_4 = _accepts_frameworks(prune_2_4)
kept_positions = _accepts_frameworks(kept_positions)
wgmma_sp = _accepts_frameworks(wgmma_sp)
wgmma_sp_reference = _accepts_frameworks(wgmma_sp_reference)
pack_meta = _accepts_frameworks(pack_meta)
unpack_meta = _accepts_frameworks(unpack_meta)
wgmma_sp_registers = _accepts_frameworks(wgmma_sp_registers)

__version__ = "0.1.0"

__all__ = [
    "WgrefError", "FormError", "InputError", "DTypeError", "DeviceError",
    "FormatSpec", "FORMATS", "E4M3", "E5M2", "F16", "BF16", "F32", "format_spec",
    "encode", "decode", "round_to_format", "pack_x2", "unpack_x2", "pack_x4", "unpack_x4",
    "POLICIES", "cvt", "CVT_FORMS", "parse_cvt",
    "quantize", "dequantize", "DelayedScaling", "describe_recipe", "scale_from_amax", "decode_e8m0",
    "WGMMA_FORMS", "parse_wgmma", "diff", "wgmma", "wgmma_reference", "gemm", "error_vs_k",
    "AccumParams", "IntAccumParams", "BINDING", "params_for", "with_params", "fdpa", "fma_f32",
    "PROMOTE_OPS", "scaled_mm",
    # layouts
    "Swizzle", "SwizzleMode", "SWIZZLE_MODES", "swizzle_mode", "swizzle_address", "SmemLayout", "dense_strides",
    "tile_image", "rowmajor_offsets", "MatrixDescriptor", "operand_addresses", "accumulator_layout",
    "a_fragment_layout", "pack_accumulator", "unpack_accumulator", "pack_a_fragment", "unpack_a_fragment",
    "MATRIX_FORMS", "parse_matrix_instr",
    # machine
    "stmatrix", "ldmatrix", "wgmma_smem", "wgmma_registers", "epilogue_stmatrix", "tma_load",
    # sparse wgmma
    "WGMMA_SP_FORMS", "parse_wgmma_sp", "compress", "decompress", "prune_2_4", "kept_positions", "wgmma_sp", "gemm_sp",
    "wgmma_sp_reference", "pack_meta", "unpack_meta", "meta_holders", "wgmma_sp_registers",
    # warp-level mma.sync
    "MMA_SYNC_FORMS", "parse_mma_sync", "mma_sync",
]
