"""Reference computations shared by several test files, written in the tests (never the package's code): the
deep-UFM scalar problem's global minimum in mpmath, the deep-UFM MSE objective at a class-collapsed point in exact
Fractions, and the SCL Eq (2) variant without the l = j term (a false statement the claims must refute). No
optional dependency is imported here (python-flint is not needed)."""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np


def mp_scalar_min(count: int, N: int, lams, L: int, dps: int = 50):
    """Independent global minimum of (s - sqrt(count))^2/(2N) + C s^{2/(L+1)} over s >= 0 in 50-digit mpmath:
    every real positive root of the stationarity polynomial in t (s = t^{L+1}) by mpmath.polyroots, plus s = 0
    and a dense scan (so that nothing rests on the package's root-structure argument)."""
    with mp.workdps(dps):
        y = mp.sqrt(count)
        C = mp.mpf(L + 1) / 2 * mp.exp(mp.fsum(mp.log(mp.mpf(v)) for v in lams) / (L + 1))
        Nn = mp.mpf(N)

        def ph(t):
            return (t ** (L + 1) - y) ** 2 / (2 * Nn) + C * t * t

        # d/dt ph = (t/N) [ (L+1) t^{2L} - (L+1) y t^{L-1} + 2 N C ]
        coeffs = [mp.mpf(0)] * (2 * L + 1)  # highest degree first
        coeffs[0] = mp.mpf(L + 1)
        coeffs[2 * L - (L - 1)] += -(L + 1) * y
        coeffs[2 * L] += 2 * Nn * C
        cands = [(ph(mp.mpf(0)), mp.mpf(0))]
        roots = mp.polyroots(coeffs, maxsteps=400, extraprec=200) if L >= 1 else []
        for r in roots:
            if abs(mp.im(r)) < mp.mpf(10) ** (-dps // 2) and mp.re(r) > 0:
                t = mp.re(r)
                cands.append((ph(t), t ** (L + 1)))
        T_ = y ** (mp.mpf(1) / (L + 1))
        for i in range(1, 400):
            t = T_ * i / 400
            cands.append((ph(t), t ** (L + 1)))
        v, s = min(cands, key=lambda c: c[0])
        return v, s


def fraction_objective(inst, x) -> Fraction:
    """The MSE objective at a class-collapsed point, written out with Fractions and lists (no numpy)."""
    K, D, L = inst.K, inst.width, inst.layers
    shapes = [(D, K)] + [(D, D)] * (L - 1) + [(K, D)]
    mats, i = [], 0
    for a, b in shapes:
        mats.append([[Fraction(float(v)) for v in x[i + r * b:i + (r + 1) * b]] for r in range(a)])
        i += a * b

    def mul(A, B):
        return [[sum((A[r][k] * B[k][c] for k in range(len(B))), Fraction(0)) for c in range(len(B[0]))]
                for r in range(len(A))]

    h = mats[0]
    for l in range(1, L):
        h = mul(mats[l], h)
        if inst.activation == "relu":
            h = [[v if v > 0 else Fraction(0) for v in row] for row in h]
    O = mul(mats[L], h)
    N = inst.N
    loss = sum(inst.counts[c] * sum((O[k][c] - (1 if k == c else 0)) ** 2 for k in range(K)) for c in range(K))
    total = Fraction(loss) / (2 * N)
    total += Fraction(inst.lams[0]) / 2 * sum(inst.counts[c] * sum(mats[0][r][c] ** 2 for r in range(D))
                                              for c in range(K))
    for l in range(1, L + 1):
        total += Fraction(inst.lams[l]) / 2 * sum(v * v for row in mats[l] for v in row)
    return total


def scl_eq2_without_j(H, y, tau):  # drops the l = j term (exp(0) = 1) instead of keeping it
    G = H.T @ H / tau
    tot = 0.0
    for i in range(y.size):
        pos = [j for j in range(y.size) if j != i and y[j] == y[i]]
        for j in pos:
            rest = [l for l in range(y.size) if l not in (i, j)]
            tot += np.logaddexp.reduce(G[i, rest] - G[i, j]) / len(pos)
    return tot
