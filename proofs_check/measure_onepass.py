"""``ncproofs measure``'s one-pass engine (docs/measure.md, "One pass"): chunk size, worker threads over
fixed segments, single-threaded BLAS around the hot loop, the progress line, and the passes
themselves (:func:`_one_pass`, :func:`_nc4_pass`). Every name is re-exported by
:mod:`proofs_check.measure`.
"""

from __future__ import annotations

import os
import sys
import time

from theory import metrics as MT


# ---------------------------------------------------------------------------------------------
# One pass (docs/measure.md, "One pass"): shifted sums and scatter, segments on worker threads
# ---------------------------------------------------------------------------------------------

#: Bytes of float64 shifted rows per chunk of the one-pass route: measured on the 2-core VM (d = 512,
#: K = 10 and 1000, single-threaded BLAS, CPU time per MB): chunks of 1024-4096 rows (4-16 MB, the
#: size of the shared L3 cache) are within 10% of each other and best; 512 rows lose 10-20% to the
#: per-call overheads, 16384 rows (64 MB) lose 25-30% to memory traffic (docs/benchmarks.md).
ONE_PASS_CHUNK_BYTES = 1 << 23

#: Rows per segment: the unit of work of a worker thread. Fixed (a multiple of the chunk), so the
#: order of every floating-point sum, hence every number, is the same for any number of workers.
SEGMENT_CHUNKS = 16


def one_pass_chunk_rows(d: int) -> int:
    return max(256, int(ONE_PASS_CHUNK_BYTES // (8 * max(d, 1))))


def _workers(workers) -> int:
    if workers is not None:
        return int(workers)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def _two_pass_reason(dev, dtype, d, nworkers) -> str:
    if dev is not None:
        return "the torch device path accumulates in two passes"
    if dtype != "float64":
        return "float32 accumulation uses the two-pass route"
    return (f"the one-pass accumulators at d = {d} (four d x d and four K x d float64 matrices each, "
            f"{nworkers + 1} of them) do not fit the budget ({MT.ONE_PASS_MAX_SCATTER_BYTES / 1e6:.0f} MB per d x d "
            f"matrix, {MT.ONE_PASS_TOTAL_BYTES / 1e6:.0f} MB in all): the scatter is accumulated about the final "
            "class means in a second pass (N Sigma_W when d <= K, its K x K projection when d > K)")


class _single_threaded_blas:
    """threadpoolctl's limit of 1 BLAS thread around the hot loop (the chunk products are small: threaded
    BLAS on them collapses when the other cores are busy; the workers parallelise over segments instead)."""

    def __enter__(self):
        # threadpoolctl limits the BLAS libraries loaded when the limit is set: scipy's BLAS (a separate
        # OpenBLAS from numpy's) is loaded first, else its syrk would still run on every core
        import scipy.linalg.blas  # noqa: F401
        import scipy.sparse  # noqa: F401

        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / the [measure] extra
            self.ctx = None
            return self
        self.ctx = threadpool_limits(limits=1, user_api="blas")
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self.ctx is not None:
            self.ctx.__exit__(*exc)
        return False


#: Below this many flops of the metrics stage (the min(d, K)^3 eigendecomposition, about 10 min(d, K)^3 flops,
#: plus the K x K tiles, K^2 d), :func:`theory.metrics.collapse_metrics` runs on one BLAS thread: measured on
#: the loaded 2-core VM (load 4-6), a threaded 512 x 512 ``eigh`` took 0.76-1.25 s wall against 0.10 s on one
#: thread (K = 1000, d = 512: the metrics stage took 1.7-7.1 s wall, docs/benchmarks.md). Above it (K = 10^4
#: and more) the tiles' GEMMs are large enough for threads to pay.
METRICS_ONE_THREAD_MAX_FLOPS = 2e10


def metrics_blas(K: int, d: int):
    """The BLAS context for the metrics stage: one thread below :data:`METRICS_ONE_THREAD_MAX_FLOPS`."""
    import contextlib

    work = 10.0 * min(K, d) ** 3 + float(K) * K * d
    return _single_threaded_blas() if work <= METRICS_ONE_THREAD_MAX_FLOPS else contextlib.nullcontext()


def _reader(inp, axis: int, prog=None):
    def read(s: int, e: int):
        X = inp.features.read(s, e, axis)
        if axis == 1:
            X = X.T
        y = inp.labels.read(s, e, 0)
        if prog is not None:
            prog.add(e - s)
        return X, y

    return read


class Progress:
    """One progress line on stderr, rewritten in place (``\\r``) at most every 0.5 s; only when enabled
    (the CLI enables it when stderr is a terminal). Thread-safe (the workers report their chunks)."""

    def __init__(self, total: int, enabled: bool = False, stream=None, every: float = 0.5):
        import threading

        self.total, self.enabled, self.every = max(int(total), 1), bool(enabled), float(every)
        self.stream = stream if stream is not None else sys.stderr
        self.done_rows, self.name, self.t0, self.last = 0, "", time.perf_counter(), 0.0
        self.lock = threading.Lock()
        self.shown = False

    def stage(self, name: str) -> None:
        self.name = name
        self._show(force=True)

    def add(self, rows: int) -> None:
        with self.lock:
            self.done_rows += int(rows)
        self._show()

    def _show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        frac = min(1.0, self.done_rows / self.total)
        el = now - self.t0
        eta = f", ~{el * (1 - frac) / frac:.0f} s left" if frac > 0.02 else ""
        self.stream.write(f"\rncproofs measure: {self.name}: {100 * frac:5.1f}% of the samples read, {el:.0f} s{eta}   ")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.enabled and self.shown:
            self._show(force=True)
            self.stream.write("\n")
            self.stream.flush()


def _segments(start: int, N: int, step: int):
    seg = step * SEGMENT_CHUNKS
    return [(s, min(N, s + seg)) for s in range(start, N, seg)]


def _in_order(fn, items, nworkers: int):
    """fn(item) for every item, results yielded in order, at most nworkers + 1 in flight."""
    if nworkers <= 1 or len(items) <= 1:
        for it in items:
            yield fn(it)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=nworkers) as ex:
        pending = deque()
        it = iter(items)
        for x in it:
            pending.append(ex.submit(fn, x))
            if len(pending) > nworkers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _one_pass(reader, N: int, K: int, d: int, step: int, nworkers: int, where: str,
              scatter: bool = True) -> "MT.ClassStats":
    """The one-pass statistics of rows [0, N). The shifts are fixed by a sequential prefix (chunks are read
    in order until every class has a shift: the class's mean in the first chunk where it appears); the
    rest is cut into fixed segments, accumulated about the same shifts on worker threads and added in
    segment order (so the numbers do not depend on the number of workers)."""
    total = MT.ClassStats(K, d, where=where, scatter=scatter)
    pos = 0
    while pos < N and not total.has_shift.all():
        e = min(N, pos + step)
        X, y = reader(pos, e)
        total.update(X, y)
        pos = e
    if pos >= N:
        return total
    shift = total.shift

    def work(seg):
        acc = MT.ClassStats(K, d, shift=shift, where=where, scatter=scatter)
        for s in range(seg[0], seg[1], step):
            X, y = reader(s, min(seg[1], s + step))
            acc.update(X, y)
        return acc

    for acc in _in_order(work, _segments(pos, N, step), nworkers):
        total.merge(acc)
    return total


def _second_pass(reader, N: int, total, fresh, step: int, nworkers: int):
    """A pass that needs the first pass's results: fixed segments, each into ``fresh()`` on a worker thread,
    merged into ``total`` in segment order (the numbers do not depend on the number of workers)."""
    def work(seg):
        acc = fresh()
        for s in range(seg[0], seg[1], step):
            X, y = reader(s, min(seg[1], s + step))
            acc.update(X, y)
        return acc

    for acc in _in_order(work, _segments(0, N, step), nworkers):
        total.merge(acc)
    return total


def _nc4_pass(reader, N: int, stats, weights, bias, step: int, nworkers: int, loss: str | None = None):
    total = MT.NC4Pass(stats, weights, bias, loss=loss)

    def fresh():
        acc = MT.NC4Pass.__new__(MT.NC4Pass)
        acc.__dict__.update(total.__dict__)
        acc.N = acc.disagree = 0
        acc.loss_sum = 0.0
        return acc

    return _second_pass(reader, N, total, fresh, step, nworkers)


def _projected_pass(reader, N: int, stats, step: int, nworkers: int, weights=None, bias=None,
                    loss: str | None = None) -> "MT.ProjectedScatter":
    """The second pass of the projected route (:class:`theory.metrics.ProjectedScatter`, with NC4 in the same
    read when there are weights): fixed segments on the worker threads, added in segment order (the numbers do
    not depend on the number of workers)."""
    nc4 = None if weights is None else MT.NC4Pass(stats, weights, bias, loss=loss)
    total = MT.ProjectedScatter(stats, nc4=nc4)
    return _second_pass(reader, N, total, total._fresh, step, nworkers)


def _cpu_passes(inp, axis: int, N: int, K: int, d: int, step: int, nworkers: int, where: str, projected: bool,
                loss, progress: bool):
    """The CPU (numpy float64) routes of measure: one pass (plus the NC4 pass with weights), or the projected
    route (a scatter-free pass, then :func:`_projected_pass`). Returns (stats, second-pass accumulator or None,
    the route's description, the perf_counter time at the end of pass 1)."""
    prog = Progress(N * (2 if (inp.weights is not None or projected) else 1), enabled=progress)
    reader = _reader(inp, axis, prog)
    with _single_threaded_blas():
        prog.stage("pass 1 (sums)" if projected else "pass 1 (sums and scatter)")
        acc = _one_pass(reader, N, K, d, step, nworkers, where, scatter=not projected)
        t2 = time.perf_counter()
        sc = None
        if projected:
            prog.stage("pass 2 (projected scatter" + (" and NC4)" if inp.weights is not None else ")"))
            sc = _projected_pass(reader, N, acc, step, nworkers, inp.weights, inp.bias, loss)
        elif inp.weights is not None:
            prog.stage("pass 2 (NC4)")
            sc = _nc4_pass(reader, N, acc, inp.weights, inp.bias, step, nworkers, loss=loss)
    prog.done()
    if projected:
        route = (f"two passes (shifted sums, then the K x K projection of the within-class scatter about the final "
                 f"class means: 2 d K + K^2 = {2 * d * K + K * K} flops per sample instead of the d^2 = {d * d} of the "
                 f"one-pass d x d scatter, at K = {K} < d = {d}" + ("; NC4 in the same second read" if
                                                                      inp.weights is not None else "") +
                 "; --passes 1 forces one pass)")
    else:
        route = ("one pass (shifted sums and d x d scatter, compensated)" +
                 ("; a second pass for NC4 (it needs the final class means)" if sc is not None else ""))
    return acc, sc, route, t2
