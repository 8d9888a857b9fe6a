"""Local worker processes that end with the sweep (see the comment below)."""

from __future__ import annotations

import json
import os
import struct
import sys
import time

from proofs_check.sweep.config import Instance
from proofs_check.sweep.registry import Sweepable
from proofs_check.sweep.store import _Claims
from proofs_check.sweep.task import _execute

# ---- local worker processes -------------------------------------------------------------
#
# Each worker is a fresh interpreter (``python -c ...``) started by this process, with two
# pipes: tasks in, results out (length-prefixed pickles). Guarantees:
# - a worker exits when the sweep ends for any reason: on a normal end or an interrupt the
#   sweep closes the task pipe (the worker's reader thread sees EOF and exits at once); when
#   the sweep process dies, even by SIGKILL, the kernel closes the pipe, and on Linux the worker
#   also gets SIGKILL from PR_SET_PDEATHSIG (which works even when the worker is stuck in C
#   code holding the GIL); a watchdog thread also exits when the parent pid changes;
# - there is no forkserver, no resource tracker and no shared semaphore that could outlive the
#   sweep; workers ignore SIGINT (Ctrl-C reaches the whole process group: the sweep decides).

_FRAME = struct.Struct("<Q")
_WORKER_FLAG = "--ncproofs-sweep-worker"
_WORKER_CODE = ("import sys, os, json; p = json.loads(os.environ.pop('NCPROOFS_SWEEP_SYSPATH', '[]')); "
                "sys.path[:] = p + [x for x in sys.path if x not in p]; "
                "from proofs_check.sweep.localpool import _worker_main; _worker_main(sys.argv[1:])")


def _frame(obj) -> bytes:
    import pickle

    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(data)) + data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent dies."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except Exception:  # pragma: no cover - no libc prctl: the pipe and the watchdog remain
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _worker_main(argv: list[str]) -> None:
    """Entry point of a local worker process (see the comment above)."""
    import pickle
    import queue
    import signal
    import threading

    if len(argv) != 4 or argv[0] != _WORKER_FLAG:
        raise SystemExit("proofs_check.sweep worker: started without its pipes")
    task_fd, result_fd, parent = int(argv[1]), int(argv[2]), int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    tasks: queue.SimpleQueue = queue.SimpleQueue()

    def reader() -> None:
        try:
            while True:
                head = _read_exact(task_fd, _FRAME.size)
                body = None if head is None else _read_exact(task_fd, _FRAME.unpack(head)[0])
                if body is None:  # the sweep closed the pipe, or died
                    break
                tasks.put(pickle.loads(body))
        except BaseException:
            pass
        os._exit(0)

    def watchdog() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=watchdog, daemon=True).start()
    while True:
        idx, name, modules, params, seed = tasks.get()
        payload = _execute(name, modules, params, seed)
        try:
            frame = _frame((idx, payload))
        except Exception as exc:  # an unpicklable entry in the result: an ERROR, not a lost instance
            frame = _frame((idx, ({"verdict": "ERROR", "reason": f"result cannot be sent back: "
                                   f"{type(exc).__name__}: {exc}"}, payload[1], payload[2])))
        try:
            _write_all(result_fd, frame)
        except OSError:  # the sweep is gone
            os._exit(1)


class WorkerDied(RuntimeError):
    pass


class _Worker:
    def __init__(self, proc, task_w: int, result_r: int):
        self.proc, self.task_w, self.result_r = proc, task_w, result_r
        self.buf = bytearray()
        self.inflight: dict[int, Instance] = {}
        self.eof = False
        #: monotonic time at which the oldest in-flight instance (the one running) started
        self.running_since: float | None = None


#: A sweep replaces a worker that died (a segfault, the OOM killer, os._exit in user code) and stores its
#: instance as ERROR; it gives up (WorkerDied, the run recorded as interrupted) only after this many deaths
#: in a row without a single result in between (workers that cannot even start).
MAX_DEATHS_IN_A_ROW = 8


class _LocalPool:
    """A fixed number of worker processes fed through pipes (see the comment above). A worker that dies is
    replaced: the instance it was computing comes back from :meth:`poll` as an ERROR result, the instances
    queued behind it go to the replacement."""

    def __init__(self, n: int, time_limit: float | None = None):
        self.time_limit = time_limit
        self.workers: list[_Worker] = []
        self._next = 0
        self._task: tuple[str, list[str]] | None = None  # (sweepable name, modules) of the run
        self._deaths_in_a_row = 0
        self._env = dict(os.environ)
        self._env["NCPROOFS_SWEEP_SYSPATH"] = json.dumps([p for p in sys.path if isinstance(p, str)])
        try:
            for _ in range(n):
                self.workers.append(self._spawn())
        except BaseException:
            self.close()
            raise

    def _spawn(self) -> _Worker:
        import subprocess

        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE, _WORKER_FLAG, str(task_r), str(result_w), str(os.getpid())],
                pass_fds=(task_r, result_w), stdin=subprocess.DEVNULL, env=self._env, close_fds=True)
        except BaseException:
            os.close(task_w)
            os.close(result_r)
            raise
        finally:
            os.close(task_r)
            os.close(result_w)
        return _Worker(proc, task_w, result_r)

    @property
    def inflight(self) -> int:
        return sum(len(w.inflight) for w in self.workers)

    def submit(self, w: _Worker, sw_name: str, modules: list[str], inst: Instance) -> None:
        self._task = (sw_name, list(modules))
        self._next += 1
        if not w.inflight:
            w.running_since = time.monotonic()
        w.inflight[self._next] = inst
        try:
            _write_all(w.task_w, _frame((self._next, sw_name, modules, inst.params, inst.seed)))
        except OSError:  # the worker is gone: poll() sees its end of file and replaces it
            pass

    def _exit_text(self, w: _Worker) -> str:
        try:
            rc = w.proc.wait(timeout=2)
        except Exception:
            rc = None
        return f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"

    def _died(self, w: _Worker, how: str) -> WorkerDied:
        if w.inflight:  # a worker computes its tasks in order: the oldest is the one it was running
            inst = w.inflight[min(w.inflight)]
            shown = ", ".join(f"{k}={v!r}" for k, v in inst.params.items())
            doing = f"while computing instance {inst.key} ({shown}, seed={inst.seed})"
        else:
            doing = "while idle"
        return WorkerDied(f"a worker process died ({how}) {doing}, {self._deaths_in_a_row} deaths in a row without "
                          "a result; the run is recorded as interrupted, finished instances are stored: rerun to "
                          "resume")

    def _replace(self, w: _Worker, timed_out: float | None = None) -> list[tuple[Instance, tuple]]:
        """Replace the dead worker ``w``: its running instance becomes an ERROR result (returned), the ones queued
        behind it are sent to the new worker. Raises WorkerDied after MAX_DEATHS_IN_A_ROW deaths in a row.
        ``timed_out``: the worker was killed by the sweep after its instance ran that many seconds, past the
        per-instance time limit: the instance is INCONCLUSIVE "stopped by the wall-clock safety limit" (not a death of the worker)."""
        how = self._exit_text(w)
        if timed_out is None:
            self._deaths_in_a_row += 1
            if self._deaths_in_a_row >= MAX_DEATHS_IN_A_ROW:
                raise self._died(w, how)
        out = []
        queued = []
        if w.inflight:
            first = min(w.inflight)
            inst = w.inflight.pop(first)
            if timed_out is not None:
                res = {"verdict": "INCONCLUSIVE", "time_limit": True,
                       "reason": f"stopped by the wall-clock safety limit ({self.time_limit:g} s, "
                                 f"sweep.instance_time_limit): the instance ran {timed_out:.0f} s without reaching "
                                 "its work budget; its worker was stopped and replaced"}
                out.append((inst, (res, float(timed_out), f"pid {w.proc.pid}")))
            else:
                reason = (f"the worker process died ({how}) while computing this instance (a crash in native code, "
                          "the out-of-memory killer, or os._exit in the sweepable); the sweep replaced the worker")
                out.append((inst, ({"verdict": "ERROR", "reason": reason}, 0.0, f"pid {w.proc.pid}")))
            queued = [w.inflight[i] for i in sorted(w.inflight)]
            w.inflight.clear()
        for fd in (w.task_w, w.result_r):
            if fd >= 0:
                os.close(fd)
        w.task_w = w.result_r = -1
        new = self._spawn()
        self.workers[self.workers.index(w)] = new
        for inst in queued:
            self.submit(new, *self._task, inst)
        return out

    def poll(self, timeout: float | None) -> list[tuple[Instance, tuple]]:
        """Results that arrived within ``timeout`` seconds (all that are complete)."""
        import pickle
        import selectors

        live = [w for w in self.workers if not w.eof]
        if not live:
            return []
        out = []
        if self.time_limit is not None:
            starts = [w.running_since for w in live if w.inflight and w.running_since is not None]
            if starts:
                left = max(0.0, min(starts) + self.time_limit - time.monotonic())
                timeout = left if timeout is None else min(timeout, left)
        with selectors.DefaultSelector() as sel:
            for w in live:
                sel.register(w.result_r, selectors.EVENT_READ, w)
            events = sel.select(timeout)
        for key, _ in events:
            w = key.data
            chunk = os.read(w.result_r, 1 << 20)
            if not chunk:
                w.eof = True
                out.extend(self._replace(w))
                continue
            self._deaths_in_a_row = 0
            w.buf += chunk
            while len(w.buf) >= _FRAME.size:
                (n,) = _FRAME.unpack_from(w.buf)
                if len(w.buf) < _FRAME.size + n:
                    break
                idx, payload = pickle.loads(bytes(w.buf[_FRAME.size:_FRAME.size + n]))
                del w.buf[:_FRAME.size + n]
                out.append((w.inflight.pop(idx), payload))
                w.running_since = time.monotonic() if w.inflight else None
        out.extend(self._stop_overdue())
        return out

    def _stop_overdue(self) -> list[tuple[Instance, tuple]]:
        """Kill and replace every worker whose running instance is past the per-instance time limit."""
        if self.time_limit is None:
            return []
        out = []
        now = time.monotonic()
        for w in list(self.workers):
            if w.eof or not w.inflight or w.running_since is None:
                continue
            ran = now - w.running_since
            if ran <= self.time_limit:
                continue
            w.proc.kill()
            w.eof = True
            out.extend(self._replace(w, timed_out=ran))
        return out

    def close(self, grace: float = 2.0) -> None:
        """Close the task pipes (idle workers exit at once; busy ones abandon their instance),
        then SIGKILL whatever is still alive after ``grace`` seconds, and reap every worker."""
        for w in self.workers:
            if w.task_w >= 0:
                os.close(w.task_w)
                w.task_w = -1
        deadline = time.monotonic() + grace
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                w.proc.kill()
                w.proc.wait()
            if w.result_r >= 0:
                os.close(w.result_r)
                w.result_r = -1


class _InlineTimeLimit(BaseException):
    """Raised by the alarm inside an inline instance (a BaseException: the sweepable's own
    ``except Exception`` cannot swallow it)."""


def _execute_limited(sw: Sweepable, modules: list[str], inst: Instance, time_limit: float | None) -> tuple:
    """``_execute`` in this process, stopped by SIGALRM after ``time_limit`` seconds (main thread, POSIX)."""
    import signal
    import threading

    usable = (time_limit is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        return _execute(sw.name, modules, inst.params, inst.seed)

    def alarm(signum, frame):
        raise _InlineTimeLimit()

    old = signal.signal(signal.SIGALRM, alarm)
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        return _execute(sw.name, modules, inst.params, inst.seed)
    except _InlineTimeLimit:
        ran = time.monotonic() - t0
        return ({"verdict": "INCONCLUSIVE", "time_limit": True,
                 "reason": f"stopped by the wall-clock safety limit ({time_limit:g} s, sweep.instance_time_limit): the "
                           f"instance ran {ran:.0f} s without reaching its work budget; it was stopped"},
                ran, f"pid {os.getpid()}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run_inline(sw: Sweepable, modules: list[str], claims: _Claims, on_result, time_limit: float | None = None) -> None:
    while True:
        inst = claims.take()
        if inst is None:
            if claims.exhausted():
                return
            claims.wait()
            continue
        on_result(inst, _execute_limited(sw, modules, inst, time_limit))


def _run_local(nworkers: int, sw: Sweepable, modules: list[str], claims: _Claims, on_result,
               per_worker: int = 2, time_limit: float | None = None) -> None:
    pool = _LocalPool(nworkers, time_limit)
    try:
        try:
            while True:
                for w in pool.workers:
                    while len(w.inflight) < per_worker:
                        inst = claims.take()
                        if inst is None:
                            break
                        pool.submit(w, sw.name, modules, inst)
                if not pool.inflight:
                    if claims.exhausted():
                        return
                    claims.wait()
                    continue
                for inst, payload in pool.poll(0.5):
                    on_result(inst, payload)
        except BaseException:
            # results already sent back are stored before the workers go
            try:
                while True:
                    got = pool.poll(0)
                    if not got:
                        break
                    for inst, payload in got:
                        on_result(inst, payload)
            except BaseException:
                pass
            raise
    finally:
        pool.close()

