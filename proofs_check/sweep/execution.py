"""Running a sweep: :func:`run_sweep` (leases, local processes, in-process or Dask), signals,
interrupts and the run record."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import TextIO

from proofs_check.sweep.config import MAX_WORKERS, Instance, SweepSpec
from proofs_check.sweep.dask_backend import DEFAULT_CONNECT_TIMEOUT, _close_client, _dask_client, _dask_window, _run_dask
from proofs_check.sweep.localpool import _run_inline, _run_local
from proofs_check.sweep.progress import SweepProgress
from proofs_check.sweep.registry import RIGOROUS_SUFFIX
from proofs_check.sweep.store import Store, _Claims, _lease_owner, _LeaseKeeper


@dataclass
class SweepOutcome:
    total: int
    skipped: int
    computed: int  # by this process (this run)
    status: str  # "finished" | "interrupted"
    store: str
    run_id: int
    elsewhere: int = 0  # pending at the start, then computed by another sweep on the same store


def _scheduler_address(scheduler: str | None) -> str | None:
    """The scheduler address (--scheduler, else $DASK_SCHEDULER_ADDRESS), checked before Dask sees it:
    ``tcp://host:port`` or ``host:port`` only. Other schemes (tls://, ucx://, inproc://, ws://, http://)
    are refused with one line: without their configuration Dask fails inside a half-built Client that
    prints tracebacks at exit (and tls/ucx need settings ncproofs does not pass)."""
    from proofs_check.commands import UsageError

    option = "--scheduler"
    address = scheduler
    if not address:
        address = os.environ.get("DASK_SCHEDULER_ADDRESS") or None
        option = "DASK_SCHEDULER_ADDRESS"
    if address is None:
        return None
    if len(address) > MAX_ADDRESS_CHARS:
        raise UsageError(f"{option}: an address of at most {MAX_ADDRESS_CHARS} characters (a host name has at most "
                         f"253), got {len(address)} characters")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme != "tcp":
        raise UsageError(f"{option}: only tcp://HOST:PORT addresses are supported, got scheme {scheme!r} in {address!r}")
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port:  # no port (host, or [IPv6]): Dask's default 8786
        host, port = rest, "8786"
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{option}: expected tcp://HOST[:PORT] with a port in 1..65535, got {address!r}")
    if len(host.strip("[]")) > 253:
        raise UsageError(f"{option}: a host name has at most 253 characters, got {len(host)}")
    if not _host_syntax_ok(host.strip("[]")):  # '../' reached Dask's IDNA encoder: UnicodeError, internal error
        raise UsageError(f"{option}: {host[:80]!r} is not a host name (labels of letters, digits, '-' and '_') or an "
                         "IP address")
    return address


def _host_syntax_ok(host: str) -> bool:
    import ipaddress
    import re

    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return re.fullmatch(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*"
                        r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?", host) is not None


class SweepSignal(KeyboardInterrupt):
    """SIGTERM / SIGHUP during a sweep, turned into an interrupt so the sweep stops cleanly."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """While a sweep runs (main thread only): SIGTERM and SIGHUP interrupt it like Ctrl-C, so
    the workers are stopped, the store says "interrupted" and the leases are released."""

    def __enter__(self):
        import signal
        import threading

        self._old = {}
        if threading.current_thread() is threading.main_thread():
            def handler(signum, frame):
                raise SweepSignal(signum)

            for name in ("SIGTERM", "SIGHUP"):
                sig = getattr(signal, name, None)
                if sig is not None:
                    try:
                        self._old[sig] = signal.signal(sig, handler)
                    except (ValueError, OSError):  # pragma: no cover
                        pass
        return self

    def __exit__(self, *exc):
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


#: Longest wait for a Dask scheduler (--connect-timeout): an hour; 1e300 overflowed the socket timeout.
MAX_CONNECT_TIMEOUT = 3600.0
#: Longest scheduler address: scheme + a host name (<= 253 characters, RFC 1035) + a port.
MAX_ADDRESS_CHARS = 300


def _check_run_args(spec, store_path, scheduler, workers, connect_timeout) -> None:
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"run_sweep: spec must be a SweepSpec (see load_config/parse_config), got {type(spec).__name__}")
    if not isinstance(store_path, (str, os.PathLike)) or not os.fspath(store_path):
        raise TypeError(f"run_sweep: store_path must be a non-empty path, got {store_path!r}")
    if scheduler is not None and not isinstance(scheduler, str):
        raise TypeError(f"run_sweep: scheduler must be an address string or None, got {scheduler!r}")
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise TypeError(f"run_sweep: workers must be an int or None, got {workers!r}")
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"run_sweep: workers must be in [1, {MAX_WORKERS}], got {workers}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, (int, float)):
        raise TypeError(f"run_sweep: connect_timeout must be a number of seconds, got {connect_timeout!r}")
    if not (math.isfinite(connect_timeout) and connect_timeout > 0):
        raise ValueError(f"--connect-timeout must be a finite number > 0, got {connect_timeout}")
    if connect_timeout > MAX_CONNECT_TIMEOUT:
        from proofs_check.commands import UsageError

        raise UsageError(f"--connect-timeout must be at most {MAX_CONNECT_TIMEOUT:g} s, got {connect_timeout:g}")
    if scheduler is not None and len(scheduler) > MAX_ADDRESS_CHARS:
        from proofs_check.commands import UsageError

        raise UsageError(f"--scheduler: an address of at most {MAX_ADDRESS_CHARS} characters (a host name has at "
                         f"most 253), got {len(scheduler)} characters")


def run_sweep(spec: SweepSpec, store_path: str, *, scheduler: str | None = None, workers: int | None = None,
              progress: bool = True, stream: TextIO | None = None,
              connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> SweepOutcome:
    """Run the pending instances of ``spec`` and store each one as it finishes.

    ``scheduler``: a Dask scheduler address (else ``DASK_SCHEDULER_ADDRESS``, else local processes).
    ``workers``: local worker processes (1 = in this process).
    Another sweep on the same store may run at the same time: instances are leased in the
    store, so each is computed once; this sweep waits for the ones the other is computing.
    SIGINT, SIGTERM and SIGHUP stop it (``SweepInterrupted``), workers included; the run is
    recorded as "interrupted", as it is when the Dask scheduler or a worker is lost.

    Returns a :class:`SweepOutcome` (totals, computed, status "finished", run id). Raises
    ``SweepInterrupted`` (a KeyboardInterrupt; ``exit_status`` 128 + signal) when stopped by a
    signal; ``RuntimeError`` (``WorkerDied``, a lost Dask scheduler or task) after which the run
    is recorded as interrupted; ``UsageError`` for an unusable store, an unreachable scheduler or
    a missing Dask; ``TypeError`` / ``ValueError`` for bad arguments.
    """
    _check_run_args(spec, store_path, scheduler, workers, connect_timeout)
    store_path = os.fspath(store_path)
    sw = spec.sweepable
    if sw.fn is None:
        raise ValueError(f"run_sweep: sweepable {sw.name!r} has no function (a record from a store)")
    check_rigorous(spec)  # before any work
    # the task name tells the workers (local or Dask) to judge the report in ball arithmetic
    task_sw = dataclasses.replace(sw, name=sw.name + RIGOROUS_SUFFIX) if spec.rigorous else sw
    instances = spec.instances()
    address = _scheduler_address(scheduler)
    client = _dask_client(address, connect_timeout) if address else None  # fail fast, before touching the store
    try:
        store = Store(store_path)
    except BaseException:
        if client is not None:
            _close_client(client)
        raise
    owner = _lease_owner()
    keeper = None
    try:
        done = store.done_keys(i.key for i in instances)
        pending = [i for i in instances if i.key not in done]
        nworkers = workers or spec.workers or (os.cpu_count() or 1)
        nworkers = min(nworkers, max(len(pending), 1))
        if client is None and nworkers > 1 and os.name != "posix":  # pragma: no cover - pipes + pass_fds
            print("ncproofs: sweep: local worker processes need a POSIX system; computing in this process",
                  file=sys.stderr)
            nworkers = 1
        sched_name = f"dask:{address}" if address else f"local:{nworkers}"
        run_id = store.begin_run(spec, sched_name, len(instances), len(done), sw)
        prog = SweepProgress(len(instances), len(done), stream, progress)
        prog.start()
        claims = _Claims(store, owner, pending, batch=_dask_window(client) if client is not None else nworkers,
                         on_elsewhere=prog.elsewhere)
        keeper = _LeaseKeeper(store_path, owner).start()

        def on_result(inst: Instance, payload: tuple[dict, float, str]) -> None:
            res, secs, worker = payload
            store.put(inst, sw.name, sw.version, res, secs, run_id, worker, owner)
            prog.update(res["verdict"])

        status, signum = "interrupted", None
        try:
            with _Signals():
                if client is not None:
                    _run_dask(client, task_sw, spec.modules, claims, on_result, address)
                elif nworkers <= 1:
                    _run_inline(task_sw, spec.modules, claims, on_result, time_limit=spec.instance_time_limit)
                else:
                    _run_local(nworkers, task_sw, spec.modules, claims, on_result,
                               time_limit=spec.instance_time_limit)
            status = "finished"
        except SweepSignal as exc:
            signum = exc.signum
        except KeyboardInterrupt:
            import signal

            signum = int(signal.SIGINT)
        finally:
            # a lost scheduler or worker (an exception) leaves status "interrupted": resume continues it
            keeper.stop()
            prog.finish()
            computed = store.computed_by_run(run_id)  # exact, also when an interrupt hit between store and count
            store.release(owner)
            store.end_run(run_id, status, computed)
        stored_now = store.done_keys(i.key for i in pending)
        elsewhere = len(stored_now) - computed
        if status == "interrupted":
            raise SweepInterrupted(len(instances), len(done) + len(stored_now), store_path, signum)
        return SweepOutcome(len(instances), len(done), computed, status, store_path, run_id, elsewhere)
    finally:
        if keeper is not None:
            keeper.stop()
        store.close()
        if client is not None:
            _close_client(client)


def check_rigorous(spec: SweepSpec) -> None:
    """For ``rigorous = true``: the sweepable has solve reports (``report``/``from_report``) and python-flint is
    installed. Raises UsageError (one line; the CLI exits 2) otherwise; returns None for a plain sweep."""
    import importlib.util

    from proofs_check.commands import UsageError
    from proofs_check.sweep.registry import rigorous_sweepables

    if not spec.rigorous:
        return
    if spec.sweepable.report is None:
        raise UsageError(f"sweep.rigorous: sweepable {spec.family!r} has no solve report with a rigorous recipe; "
                         f"rigorous sweeps support: {', '.join(rigorous_sweepables()) or 'none'}")
    if importlib.util.find_spec("flint") is None:
        raise UsageError('sweep.rigorous (--rigorous) needs python-flint: pip install "ncproofs[rigorous]"')


class SweepInterrupted(KeyboardInterrupt):
    def __init__(self, total: int, stored: int, store: str, signum: int | None = None):
        import signal

        signum = int(signal.SIGINT) if signum is None else int(signum)
        how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        super().__init__(f"{how}: {stored}/{total} instances stored in {store}; rerun the same command to resume")
        self.total, self.stored, self.store, self.signum = total, stored, store, signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

