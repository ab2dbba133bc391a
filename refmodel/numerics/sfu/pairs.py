"""The structured operand pairs the binary SFU forms (``div``) are recorded and replayed on.

``div_pairs(chunk, seed)`` deterministically draws :data:`PAIR_CHUNK` pairs of float32 bit
patterns for chunk ``chunk`` of a recording; chunks are independent, so a replay can redraw any
subset.  Each chunk mixes eight families in equal shares (by index mod 8):

0. random bit patterns (specials and subnormals appear at their natural rate);
1. equal exponents (random signs and fractions);
2. adjacent exponents (a's exponent one above or below b's);
3. fractions close: b's fraction within +-2**8 ulps of a's, exponents random in 100..154;
4. huge and tiny divisors: b's exponent in {0, 1, 2, 125..129, 252, 253, 254}, a random finite;
5. specials against everything: one operand from :data:`SPECIALS`, the other random;
6. both operands from :data:`SPECIALS`;
7. wide spread: exponents uniform over 0..254 independently, random fractions.
"""

from __future__ import annotations

import numpy as np

PAIR_CHUNK = 1 << 22

SPECIALS = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,               # +-0, +-Inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFC12345,   # NaNs: quiet, signalling, payloads
    0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,               # subnormals
    0x00800000, 0x80800000, 0x00FFFFFF,                           # smallest normals
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7E800000,               # largest values, 2^127, 2^126
    0x3F800000, 0xBF800000, 0x40000000, 0x3F000000,               # 1, -1, 2, 0.5
    0x3F7FFFFF, 0x3F800001, 0x3FFFFFFF, 0x34000000,               # 1-ulp, 1+ulp, 2-ulp, 2^-23
    0x5F800000, 0x1F800000, 0x7E7FFFFF, 0x01000000,               # 2^64, 2^-64, near 2^126, 2^-125
], dtype=np.uint32)


def _bits(sign, exp, frac):
    return ((sign.astype(np.uint32) << 31) | (exp.astype(np.uint32) << 23)
            | (frac.astype(np.uint32) & 0x7FFFFF)).astype(np.uint32)


def div_pairs(chunk: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) uint32 bit patterns of chunk ``chunk`` (PAIR_CHUNK pairs) of the recording ``seed``."""
    rng = np.random.default_rng([int(seed), int(chunk)])
    n = PAIR_CHUNK
    m = n // 8
    u = lambda hi, size=m: rng.integers(0, hi, size=size, dtype=np.int64)
    fams = []
    # 0 random bits
    fams.append((rng.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.uint32),
                 rng.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.uint32)))
    # 1 equal exponents
    e = u(255)
    fams.append((_bits(u(2), e, u(1 << 23)), _bits(u(2), e, u(1 << 23))))
    # 2 adjacent exponents
    e = 1 + u(253)
    fams.append((_bits(u(2), e + (2 * u(2) - 1), u(1 << 23)), _bits(u(2), e, u(1 << 23))))
    # 3 fractions close
    fa = u(1 << 23)
    fb = np.clip(fa + u(513) - 256, 0, (1 << 23) - 1)
    fams.append((_bits(u(2), 100 + u(55), fa), _bits(u(2), 100 + u(55), fb)))
    # 4 huge and tiny divisors
    eb = np.array([0, 1, 2, 125, 126, 127, 128, 129, 252, 253, 254])[u(11)]
    fams.append((_bits(u(2), u(255), u(1 << 23)), _bits(u(2), eb, u(1 << 23))))
    # 5 specials against everything
    s = SPECIALS[u(SPECIALS.size)]
    r = rng.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.uint32)
    first = u(2).astype(bool)
    fams.append((np.where(first, s, r), np.where(first, r, s)))
    # 6 specials against specials
    fams.append((SPECIALS[u(SPECIALS.size)], SPECIALS[u(SPECIALS.size)]))
    # 7 wide spread
    fams.append((_bits(u(2), u(255), u(1 << 23)), _bits(u(2), u(255), u(1 << 23))))
    a = np.empty(n, np.uint32)
    b = np.empty(n, np.uint32)
    for k, (fa_, fb_) in enumerate(fams):
        a[k::8] = fa_
        b[k::8] = fb_
    return a, b
