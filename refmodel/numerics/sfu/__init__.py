"""The special-function unit of sm_90a: forms as data (:mod:`.forms`), the digests the recordings are
checked with (:mod:`.digest`), the operand pairs of the binary forms (:mod:`.pairs`) and the compiler
spellings (:mod:`.spellings`)."""

from .forms import SFU_FORMS, SfuForm, parse_sfu

__all__ = ["SFU_FORMS", "SfuForm", "parse_sfu"]
