"""The lean L-BFGS (solvers/lbfgs.py): its direction, its line search, and its convergence."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import rosen, rosen_der
from scipy.special import expit

from solvers import lbfgs as L


def _two_loop(g, pairs):
    """The textbook two-loop recursion (Nocedal and Wright, Algorithm 7.4), written independently."""
    q = g.copy()
    alphas = []
    for s, y in reversed(pairs):
        a = (s @ q) / (s @ y)
        alphas.append(a)
        q -= a * y
    s, y = pairs[-1]
    r = (s @ y) / (y @ y) * q
    for (s, y), a in zip(pairs, reversed(alphas)):
        b = (y @ r) / (s @ y)
        r += s * (a - b)
    return -r


@settings(max_examples=30)
@given(n=st.integers(1, 12), m=st.integers(1, 6), pushes=st.integers(1, 15), clear_at=st.integers(0, 15),
       seed=st.integers(0, 10**6))
def test_compact_direction_equals_the_two_loop_recursion(n, m, pushes, clear_at, seed):
    rng = np.random.default_rng(seed)
    mem = L._Memory(n, m)
    pairs = []
    for i in range(pushes):
        if i == clear_at:
            mem.clear()
            pairs = []
        A = rng.standard_normal((n, n))
        A = A @ A.T + 0.1 * np.eye(n)  # s^T y > 0
        s = rng.standard_normal(n)
        y = A @ s
        x = rng.standard_normal(n)
        g = rng.standard_normal(n)
        assert mem.push(x + s, x, g + y, g)
        pairs.append((s, y))
        g = rng.standard_normal(n)
        expect = _two_loop(g, pairs[-m:])
        np.testing.assert_allclose(mem.direction(g), expect, rtol=1e-8, atol=1e-10 * np.abs(expect).max())


def test_pairs_without_positive_curvature_are_not_stored():
    mem = L._Memory(2, 2)
    z = np.zeros(2)
    assert mem.push(np.array([1.0, 0.0]), z, np.array([1.0, 0.0]), z)
    assert not mem.push(np.array([0.0, 1.0]), z, np.array([0.0, -1.0]), z)  # s^T y < 0
    assert len(mem.slots) == 1 and mem.gamma == 1.0


def test_empty_memory_gives_steepest_descent():
    g = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(L._Memory(3, 5).direction(g), -g)


def _smooth(a, c):
    """A smooth nonconvex test function: sum log(1 + exp(a x)) + c/2 ||x||^2 - sum cos(x)."""
    def f(x):
        z = a @ x
        return (float(np.sum(np.logaddexp(0.0, z)) + 0.5 * c * x @ x - np.sum(np.cos(x))),
                a.T @ expit(z) + c * x + np.sin(x))
    return f


@settings(max_examples=40)
@given(n=st.integers(1, 8), seed=st.integers(0, 10**6), t0=st.sampled_from([1e-4, 1.0, 50.0]))
def test_accepted_steps_satisfy_the_strong_wolfe_conditions(n, seed, t0):
    rng = np.random.default_rng(seed)
    fun = _smooth(rng.standard_normal((3 * n, n)), 0.5)
    x = rng.standard_normal(n)
    f0, g0 = fun(x)
    d = -g0 + 0.3 * rng.standard_normal(n) * np.abs(g0)
    dg0 = float(d @ g0)
    if not dg0 < -1e-8:
        return
    t, ft, gt, xt, nfev = L._wolfe(fun, x, f0, g0, d, dg0, t0)
    assert t is not None and t > 0
    np.testing.assert_allclose(xt, x + t * d)
    assert ft == pytest.approx(fun(xt)[0])
    assert ft <= f0 + L.C1 * t * dg0  # sufficient decrease
    assert abs(float(gt @ d)) <= -L.C2 * dg0 + 1e-12  # strong curvature condition


@pytest.mark.parametrize("n", [2, 5, 20])
def test_rosenbrock_from_the_standard_start(n):
    x0 = np.full(n, -1.2)
    x0[1::2] = 1.0
    r = L.minimize(lambda x: (rosen(x), rosen_der(x)), x0, gtol=1e-8, maxiter=5000)
    assert r.converged, r.message
    np.testing.assert_allclose(r.x, np.ones(n), atol=1e-6)
    assert r.nfev < 2000


def test_restart_state_and_scale_are_reused():
    fun = lambda x: (rosen(x), rosen_der(x))  # noqa: E731
    r1 = L.minimize(fun, np.full(4, -1.0), gtol=1e-8, maxiter=10)
    assert r1.message.startswith("maximum number of iterations") and r1.state is not None
    r2 = L.minimize(fun, r1.x, gtol=1e-8, maxiter=5000, state=r1.state, gamma0=r1.gamma)
    assert r2.state is r1.state and r2.converged
    np.testing.assert_allclose(r2.x, np.ones(4), atol=1e-6)


def test_a_raised_stop_propagates_and_nonfinite_values_stop():
    class Hit(Exception):
        pass

    def fun(x):
        f, g = rosen(x), rosen_der(x)
        if f < 1.0:
            raise Hit
        return f, g

    with pytest.raises(Hit):
        L.minimize(fun, np.array([-1.2, 1.0]), gtol=1e-8, maxiter=1000)
    r = L.minimize(lambda x: (np.nan, np.ones_like(x)), np.zeros(3), gtol=1e-8, maxiter=10)
    assert not r.converged and "not finite" in r.message


def test_unbounded_below_stops_at_the_iteration_limit_without_claiming_convergence():
    r = L.minimize(lambda x: (float(-x.sum()), -np.ones_like(x)), np.zeros(3), gtol=1e-8, maxiter=20)
    assert not r.converged
