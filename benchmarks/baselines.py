"""Baselines the benchmark compares ncproofs against, written here from their descriptions.

- ``peer_gd``: full-batch gradient descent with momentum 0.9 and learning rate 0.1, as the public
  neural-collapse repositories train the UFM (run in float64 so it can reach the target).
- ``plain_lbfgs``: scipy's L-BFGS-B on a direct numpy implementation of the same objective and
  gradient, from the same start; with default options (as usually called; its own stopping test
  often ends the run before the target) or with tight tolerances (``tight=True``).

Both stop as soon as the objective is within ``target`` of the certified optimum, or at the
time cap, and report (seconds, objective evaluations, best value, why they stopped: "target", "cap", or
"own-convergence-test" when scipy's default tolerances end the run before the target).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax


def plain_objective(x, k, d, N, y, lw, lh, loss):
    W = x[: k * d].reshape(k, d)
    H = x[k * d: k * d + d * N].reshape(d, N)
    b = x[k * d + d * N:]
    U = W @ H + b[:, None]
    Y = np.zeros((k, N))
    Y[y, np.arange(N)] = 1.0
    if loss == "ce":
        f = np.mean(logsumexp(U, axis=0) - np.sum(Y * U, axis=0))
        G = (softmax(U, axis=0) - Y) / N
    else:
        f = 0.5 * np.sum((U - Y) ** 2) / N
        G = (U - Y) / N
    f += 0.5 * lw * np.sum(W ** 2) + 0.5 * lh * np.sum(H ** 2)
    g = np.concatenate([(G @ H.T + lw * W).ravel(), (W.T @ G + lh * H).ravel(), G.sum(axis=1)])
    return f, g


class _Stop(Exception):
    pass


def plain_lbfgs(x0, args, f_target, time_cap, tight=False):
    t0 = time.perf_counter()
    state = {"best": np.inf, "it": 0, "nfev": 0, "reached": False}

    def cb(xk):
        state["it"] += 1
        if time.perf_counter() - t0 > time_cap:
            raise _Stop

    def fun(x):
        state["nfev"] += 1
        f, g = plain_objective(x, *args)
        state["best"] = min(state["best"], f)
        if f <= f_target:
            state["reached"] = True
            raise _Stop
        return f, g

    capped = False
    try:
        opts = {"ftol": 0.0, "gtol": 1e-12, "maxiter": 10**7, "maxfun": 10**7} if tight else {}
        minimize(fun, x0, jac=True, method="L-BFGS-B", callback=cb, options=opts)
    except _Stop:
        capped = not state["reached"]
    stop = "target" if state["reached"] else ("cap" if capped else "own-convergence-test")
    return time.perf_counter() - t0, state["nfev"], state["best"], stop


def peer_gd(x0, args, f_target, time_cap, lr=0.1, momentum=0.9, max_iter=10**7):
    t0 = time.perf_counter()
    x = x0.copy()
    v = np.zeros_like(x)
    best = np.inf
    for it in range(1, max_iter + 1):
        f, g = plain_objective(x, *args)
        best = min(best, f)
        if f <= f_target:
            return time.perf_counter() - t0, it, best, "target"
        if time.perf_counter() - t0 > time_cap:
            break
        v = momentum * v + g  # heavy-ball momentum as in torch.optim.SGD
        x = x - lr * v
    return time.perf_counter() - t0, it, best, "cap"
