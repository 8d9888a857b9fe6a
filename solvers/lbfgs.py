"""A lean L-BFGS for smooth unconstrained problems (the factored UFM objective).

Why not scipy's L-BFGS-B here: on small instances (k = 10: under 1000 variables, a gradient in
50 microseconds) scipy's per-iteration bookkeeping (the bound-constrained Cauchy point, the
ScalarFunction wrapper copying x and checking it against a cache) cost about 130 microseconds
per evaluation, more than twice the objective itself. This implementation does per iteration:
one objective evaluation in the common case, three passes over the stored pairs, and O(m^2)
work on m x m matrices; it is measured in benchmarks/run.py and never trusted blindly (the
callers re-evaluate the final gradient in float64 and certify the value independently).

Method: the compact representation of the L-BFGS inverse Hessian (Byrd, Nocedal and Schnabel,
"Representations of quasi-Newton matrices and their use in limited memory methods", Math.
Programming 63, 1994, eq. (3.1)) with the scaling gamma = s^T y / y^T y of the newest pair, and
a line search for the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9) by bracketing and
safeguarded cubic interpolation (Nocedal and Wright, Numerical Optimization, 2nd ed., Algorithms
3.5 and 3.6). The unit step is tried first (after the first iteration); the curvature condition
gives s^T y > 0, and a pair without it (a step accepted on sufficient decrease alone, when the
bracket collapses at rounding level) is not stored, so the matrix stays positive definite.

Flat values (``flat_rtol`` > 0, opt-in): near a minimiser the decrease C1 t |f'(0)| that the
sufficient-decrease test asks for falls below the rounding error of f itself, the test then
fails at random, and every line search spends its 20-30 evaluations shrinking the bracket to
rounding level (measured on the grouped UFM objective: ~23 evaluations per iteration, f frozen
to the last bit while the gradient, and hence the dual certificate, still improved). With
``flat_rtol`` a trial whose value is within flat_rtol |f(0)| of f(0) is judged by its
directional derivative alone, as in the "approximate Wolfe" conditions of Hager and Zhang
(SIAM J. Optim. 16, 2005, eq. (23)): accepted when |f'(t)| <= C2 |f'(0)| (the curvature
condition, so s^T y > 0 still holds), otherwise it becomes the lower (f'(t) < 0) or upper
(f'(t) > 0) end of the bracket, and the next trial is the secant step on the derivatives
(f values there carry no information). f may then rise by at most flat_rtol |f| per step; the
callers certify their results independently, so nothing rests on monotone values.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np

C1, C2 = 1e-4, 0.9
MAX_LINE_SEARCH = 30
#: Stored numbers (2 m n) from which the passes over the memory run on every core.
LARGE_MEMORY = 10_000_000


@dataclass
class Result:
    x: np.ndarray
    f: float
    g: np.ndarray
    nit: int
    nfev: int
    message: str
    gamma: float = 1.0
    state: "_Memory | None" = None

    @property
    def converged(self) -> bool:
        return self.message.startswith("converged")


class _Memory:
    """The last m pairs (s, y): rows of one (2m x n) array [S; Y] in circular storage (one pass
    over memory per product), and the small matrices S^T Y and Y^T Y in chronological order."""

    def __init__(self, n: int, m: int):
        from scipy.linalg.lapack import dtrtrs  # LAPACK directly: numpy.linalg.solve's checks cost more here

        self._trtrs = dtrtrs
        self.m = m
        self.SY = np.zeros((2 * m, n))  # zeros: unused rows enter products with coefficient 0
        self.StY = np.zeros((m, m))  # s_i^T y_j, oldest first
        self.YtY = np.zeros((m, m))
        self.slots: list[int] = []  # storage row of each pair, oldest first
        self.perm = np.zeros(0, dtype=np.intp)
        self.gamma = 1.0
        self._coef = np.zeros(2 * m)
        # Passes over a large memory are bandwidth-bound: give them every core even where the
        # caller made BLAS single-threaded (measured at n = 6.1e6, m = 10: 0.40 s -> 0.10 s).
        if 2 * m * n >= LARGE_MEMORY:
            from solvers.common import blas_all_threads

            self._threads = blas_all_threads
        else:
            self._threads = contextlib.nullcontext

    def clear(self):
        self.slots, self.perm, self.gamma = [], np.zeros(0, dtype=np.intp), 1.0

    def push(self, x_new: np.ndarray, x: np.ndarray, g_new: np.ndarray, g: np.ndarray) -> bool:
        """Store s = x_new - x, y = g_new - g (written in place: no temporaries) if s^T y > 0.

        With a full memory the oldest pair is dropped first, also when the new one is rejected.
        """
        m, c = self.m, len(self.slots)
        if c == m:  # drop the oldest pair: shift the small matrices, reuse its storage row
            j = self.slots.pop(0)
            self.StY[:-1, :-1] = self.StY[1:, 1:].copy()
            self.YtY[:-1, :-1] = self.YtY[1:, 1:].copy()
            self.perm = np.array(self.slots, dtype=np.intp)
            c -= 1
        else:
            j = c
        s, y = self.SY[j], self.SY[m + j]
        np.subtract(x_new, x, out=s)
        np.subtract(g_new, g, out=y)
        sy, yy = float(s @ y), float(y @ y)
        if not sy > 1e-12 * yy:  # no positive curvature along s (nonconvex region or rounding)
            return False
        self.slots.append(j)
        self.perm = np.array(self.slots, dtype=np.intp)
        with self._threads():
            Ps = self.SY @ s  # S s, Y s (storage order)
            Py = self.SY @ y  # S y, Y y
        self.StY[c, : c + 1] = Ps[m + self.perm]  # s_new^T y_i
        self.StY[: c + 1, c] = Py[self.perm]  # s_i^T y_new
        self.YtY[c, : c + 1] = self.YtY[: c + 1, c] = Py[m + self.perm]
        self.StY[c, c] = sy
        self.YtY[c, c] = yy
        self.gamma = sy / yy
        return True

    def direction(self, g: np.ndarray) -> np.ndarray:
        """-H g with the compact form H = gamma I + [S gamma Y] M [S^T; gamma Y^T]."""
        c = len(self.slots)
        if c == 0:
            return -g
        m, perm, gam = self.m, self.perm, self.gamma
        with self._threads():
            ab = self.SY @ g
        a, b = ab[perm], ab[m + perm]
        StY = self.StY[:c, :c]
        t, _ = self._trtrs(StY, a, lower=0)  # R^{-1} S^T g, R = upper triangle of S^T Y
        rhs = gam * (self.YtY[:c, :c] @ t - b)
        rhs += StY.diagonal() * t
        p1, _ = self._trtrs(StY, rhs, lower=0, trans=1)
        coef = self._coef
        coef.fill(0.0)  # rows of dropped pairs (after clear()) must not contribute
        coef[perm] = p1
        coef[m + perm] = -gam * t
        with self._threads():
            d = coef @ self.SY
        d += gam * g
        d *= -1.0
        return d


def minimize(fun, x0: np.ndarray, *, gtol: float, maxiter: int, memory: int = 10, maxfun: int | None = None,
             gamma0: float | None = None, state: "_Memory | None" = None, flat_rtol: float = 0.0,
             deadline: float | None = None, stall_iters: int | None = None) -> Result:
    """Minimise ``fun`` (x -> (f, g)) from x0 until max|g| <= gtol or ``maxiter`` iterations.

    ``gamma0``: initial inverse-Hessian scale while no pair is stored (a restart passes the last
    run's ``Result.gamma``); without it the first step has length 1/||g||, as in L-BFGS-B.
    ``state``: a previous ``Result.state`` to reuse its storage (its pairs are dropped).
    ``fun`` may raise to stop early (the caller's target-value stop); any exception propagates.
    ``flat_rtol``: values within flat_rtol |f| of f(x) are compared by their derivatives only (see the
    module docstring, "Flat values"); 0 (the default) keeps the strong Wolfe line search unchanged.
    ``deadline``: a ``time.perf_counter()`` value; the run stops after the first iteration that ends past it
    (message "time budget reached"), so a caller's wall-clock budget holds inside one run too.
    ``stall_iters``: stop (message "stalled: ...") after that many consecutive iterations in which neither the
    value fell by more than 4 units in the last place of |f| nor the best max |g| fell by 1%: a gtol below the
    rounding floor of the gradient at this point otherwise costs every remaining evaluation (opt-in; None keeps
    the run going to maxiter / maxfun).
    """
    maxfun = 4 * maxiter + 20 if maxfun is None else maxfun
    x = np.array(x0, dtype=np.float64)
    f, g = fun(x)
    nfev = 1
    if state is not None and state.SY.shape == (2 * memory, x.size):
        mem = state
        mem.clear()
    else:
        mem = _Memory(x.size, memory)
    gamma0 = gamma0 if gamma0 is not None and gamma0 > 0 and math.isfinite(gamma0) else None

    def result(nit, message):
        return Result(x, f, g, nit, nfev, message, mem.gamma if mem.slots else (gamma0 or 1.0), mem)

    best_f, best_g, stalled = f, math.inf, 0
    for nit in range(maxiter):
        if not math.isfinite(f):
            return result(nit, "objective is not finite")
        gmax = max(float(g.max()), -float(g.min()))  # max |g| without a temporary
        if gmax <= gtol:
            return result(nit, "converged: max |gradient| <= gtol")
        if gmax == 0.0:  # gtol < 0 asked for more than a stationary point
            return result(nit, "converged: the gradient is exactly zero")
        if stall_iters is not None:
            if f < best_f - 4.0 * math.ulp(abs(best_f)) or gmax < 0.99 * best_g:
                stalled = 0
            else:
                stalled += 1
                if stalled >= stall_iters:
                    return result(nit, f"stalled: no decrease of the value above rounding and of max |gradient| "
                                       f"({gmax:.3g}, gtol {gtol:.3g}) in {stall_iters} iterations")
            best_f, best_g = min(best_f, f), min(best_g, gmax)
        d = mem.direction(g)
        dg = float(d @ g)
        if not dg < 0.0:  # lost descent (rounding): restart from steepest descent
            mem.clear()
            d, dg = -g, -float(g @ g)
        if mem.slots:
            t0 = 1.0
        elif gamma0 is not None:
            t0 = gamma0
        else:
            gg = float(g @ g)
            # entries ~1e-170 square to 0 (ZeroDivisionError: the geometry polish at gtol = 0 of an instance at
            # Z = 0 crashed); the norm scaled by max |g| does not underflow
            gn = math.sqrt(gg) if 0.0 < gg < math.inf else gmax * math.sqrt(float(np.dot(g / gmax, g / gmax)))
            t0 = min(1.0, 1.0 / gn)
        ls = _wolfe(fun, x, f, g, d, dg, t0, flat_rtol * abs(f))
        nfev += ls[4]
        if ls[0] is None:
            if mem.slots:  # retry once along -g with a fresh memory
                mem.clear()
                continue
            return result(nit, "line search failed")
        f_new, g_new, x_new = ls[1], ls[2], ls[3]
        mem.push(x_new, x, g_new, g)
        x, f, g = x_new, f_new, g_new
        if nfev >= maxfun:
            return result(nit + 1, "maximum number of evaluations reached")
        if deadline is not None and time.perf_counter() > deadline:
            return result(nit + 1, "time budget reached")
    return result(maxiter, "maximum number of iterations reached")


def _wolfe(fun, x, f0, g0, d, dg0, t, flat: float = 0.0):
    """Step t with f(x + t d) <= f0 + C1 t dg0 and |f'(t)| <= C2 |dg0| (strong Wolfe).

    Nocedal and Wright, Algorithms 3.5 and 3.6: [t_lo, t_hi] brackets acceptable steps once t_hi
    is known (t_lo: the best point so far with sufficient decrease). ``flat`` > 0: a trial with
    |f(t) - f0| <= flat is judged by f'(t) alone (module docstring, "Flat values"). Returns
    (t, f, g, x, nfev); t is None when no step with sufficient decrease was found.
    """
    nfev = 0
    t_lo, f_lo, dg_lo = 0.0, f0, dg0
    t_hi = f_hi = dg_hi = None
    best = None
    secant = False
    for _ in range(MAX_LINE_SEARCH):
        xt = x + t * d
        ft, gt = fun(xt)
        nfev += 1
        dgt = float(gt @ d)
        if flat > 0.0 and math.isfinite(ft) and math.isfinite(dgt) and abs(ft - f0) <= flat:
            # values at rounding level: the derivative decides (approximate Wolfe)
            if abs(dgt) <= -C2 * dg0:
                return t, ft, gt, xt, nfev
            secant = True
            if dgt * (t - t_lo) > 0.0:  # the derivative changed sign between t_lo and t
                t_hi, f_hi, dg_hi = t, ft, dgt
            else:
                t_lo, f_lo, dg_lo = t, ft, dgt
                best = (t, ft, gt, xt)
                if t_hi is None:
                    t = 4.0 * t
                    continue
        elif not math.isfinite(ft) or ft > f0 + C1 * t * dg0 or (t_lo > 0.0 and ft >= f_lo):
            t_hi, f_hi, dg_hi = t, (ft if math.isfinite(ft) else math.inf), dgt
        else:
            if abs(dgt) <= -C2 * dg0:
                return t, ft, gt, xt, nfev
            if t_hi is None and dgt < 0.0:  # still descending: extend the search
                t_lo, f_lo, dg_lo = t, ft, dgt
                best = (t, ft, gt, xt)
                t = 4.0 * t
                continue
            if dgt * ((t_hi if t_hi is not None else math.inf) - t_lo) >= 0.0:
                t_hi, f_hi, dg_hi = t_lo, f_lo, dg_lo
            t_lo, f_lo, dg_lo = t, ft, dgt
            best = (t, ft, gt, xt)
        if abs(t_hi - t_lo) <= 1e-16 * max(1.0, abs(t_hi)):  # the bracket collapsed (rounding)
            break
        if secant and math.isfinite(dg_hi) and abs(f_hi - f_lo) <= 2.0 * flat:
            t = _secant_step(t_lo, dg_lo, t_hi, dg_hi)
        else:
            t = _cubic_step(t_lo, f_lo, dg_lo, t_hi, f_hi, dg_hi)
    if best is not None:  # sufficient decrease held: accept it even without the curvature condition
        return (*best, nfev)
    return None, f0, g0, x, nfev


def _secant_step(t_lo, dg_lo, t_hi, dg_hi) -> float:
    """Zero of the linear interpolant of the derivative (values unusable), safeguarded into the
    middle 80% of the bracket."""
    lo, hi = min(t_lo, t_hi), max(t_lo, t_hi)
    w = hi - lo
    den = dg_hi - dg_lo
    t = t_lo - dg_lo * (t_hi - t_lo) / den if den != 0.0 else math.nan
    if not math.isfinite(t):
        return t_lo + 0.5 * (t_hi - t_lo)
    return min(max(t, lo + 0.1 * w), hi - 0.1 * w)


def _cubic_step(t_lo, f_lo, dg_lo, t_hi, f_hi, dg_hi) -> float:
    """Minimiser of the cubic through both ends, safeguarded into the middle 80% of the bracket."""
    lo, hi = min(t_lo, t_hi), max(t_lo, t_hi)
    w = hi - lo
    t = None
    if math.isfinite(f_hi) and math.isfinite(dg_hi):
        d1 = dg_lo + dg_hi - 3.0 * (f_lo - f_hi) / (t_lo - t_hi)
        disc = d1 * d1 - dg_lo * dg_hi
        if disc >= 0.0:
            d2 = math.copysign(math.sqrt(disc), t_hi - t_lo)
            den = dg_hi - dg_lo + 2.0 * d2
            if den != 0.0:
                t = t_hi - (t_hi - t_lo) * (dg_hi + d2 - d1) / den
    if t is None or not math.isfinite(t) or not (lo + 0.1 * w <= t <= hi - 0.1 * w):
        t = t_lo + 0.5 * (t_hi - t_lo) if t is None or not math.isfinite(t) else min(max(t, lo + 0.1 * w), hi - 0.1 * w)
    return t
