"""Running a sweep on a Dask cluster (optional extra ``dask[distributed]``)."""

from __future__ import annotations

import socket
import time

from proofs_check.commands import UsageError
from proofs_check.sweep.localpool import _FRAME
from proofs_check.sweep.registry import Sweepable
from proofs_check.sweep.store import _Claims
from proofs_check.sweep.task import _execute

#: Seconds to wait for a Dask scheduler before giving up with a clear error.
DEFAULT_CONNECT_TIMEOUT = 5.0


class _QuietDask:
    """Raise every ``distributed*`` logger to CRITICAL for a moment (Dask configures levels per
    logger, e.g. ``distributed.client``, so the parent's level alone is not enough)."""

    def __enter__(self):
        import logging

        names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
        self._old = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
        for log, _ in self._old:
            log.setLevel(logging.CRITICAL)
        return self

    def __exit__(self, *exc):
        for log, level in self._old:
            log.setLevel(level)
        return False


def _close_client(client) -> None:
    """Close a Dask client quietly: after a lost scheduler, closing cancels Dask's reconnect
    attempt, which it would otherwise log as an ERROR with a traceback."""
    with _QuietDask():
        try:
            client.close()
        except Exception:
            pass


# ---- Dask ---------------------------------------------------------------------------------

def _recv_exact(sock, n: int, deadline: float) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(n - len(buf), 65536))
        except (socket.timeout, TimeoutError):
            return None
        if not chunk:
            return b""
        buf += chunk
    return bytes(buf)


def _probe_scheduler(address: str, timeout: float) -> None:
    """Before Dask's own connect (whose handshake read has no time limit): open a TCP connection
    and read the greeting a Dask scheduler sends first (a small length-prefixed msgpack frame
    naming "pickle-protocol"), all within ``timeout``. A silent peer or another service is a
    one-line UsageError instead of a hang or a huge allocation."""
    from distributed.comm.addressing import parse_address, parse_host_port

    fail = f"--scheduler: cannot reach the Dask scheduler at {address} within {timeout:g} s"
    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return  # tls://, ucx://, inproc://: Dask connects; the thread bound in _dask_client applies
        host, port = parse_host_port(loc, default_port=8786)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--scheduler: malformed address {address!r} ({exc})") from None
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (socket.timeout, TimeoutError):
        raise UsageError(f"{fail} (no TCP connection)") from None
    except OSError as exc:
        raise UsageError(f"{fail} ({type(exc).__name__}: {exc.strerror or exc})") from None
    with sock:
        head = _recv_exact(sock, _FRAME.size, deadline)
        if head is None:
            raise UsageError(f"{fail} (the peer accepted the connection but sent nothing: not a Dask scheduler?)")
        if head == b"" or len(head) < _FRAME.size:
            raise UsageError(f"{fail} (the peer closed the connection: not a Dask scheduler?)")
        (n,) = _FRAME.unpack(head)
        body = _recv_exact(sock, n, deadline) if 8 <= n <= 65536 else b""
        if body is None:
            raise UsageError(f"{fail} (the peer stopped answering: not a Dask scheduler?)")
        if b"pickle-protocol" not in body:
            raise UsageError(f"{fail} (the service at that address does not speak the Dask protocol)")


def _dask_client(address: str, timeout: float):
    try:
        import distributed  # noqa: F401
        from distributed import Client
    except ImportError:
        raise UsageError("--scheduler: Dask is not installed; install the optional extra: "
                         "pip install 'dask[distributed]' (or ncproofs[dask])") from None
    import threading

    with _QuietDask():  # a failed connect is reported once, below, not as a log storm
        t0 = time.monotonic()
        _probe_scheduler(address, timeout)
        left = max(timeout - (time.monotonic() - t0), min(timeout, 1.0))
        box: dict = {}
        lock = threading.Lock()

        def connect() -> None:
            try:
                c = Client(address, timeout=f"{left}s", set_as_default=False)
            except BaseException as exc:  # OSError, TimeoutError, MemoryError from a non-Dask peer, ...
                box["error"] = exc
                return
            with lock:
                late = box.get("gave_up", False)
                if not late:
                    box["client"] = c
            if late:  # nobody waits for it any more
                _close_client(c)

        th = threading.Thread(target=connect, name="ncproofs-dask-connect", daemon=True)
        th.start()
        th.join(left + 1.0)  # Dask's connect bounds the TCP connect but not every step after it
        with lock:
            box["gave_up"] = True
            if "client" in box:
                return box["client"]
        exc = box.get("error")
        why = (" ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc is not None
               else "no answer to the Dask handshake")
        raise UsageError(f"--scheduler: cannot reach the Dask scheduler at {address} within {timeout:g} s "
                         f"({why})")


def _dask_window(client) -> int:
    nthreads = sum(client.nthreads().values()) or 1
    return max(2 * nthreads, 4)


def _run_dask(client, sw: Sweepable, modules: list[str], claims: _Claims, on_result, address: str) -> None:
    """Feed leased instances to the cluster, a window at a time, storing each result as it
    arrives. When the scheduler connection is lost, Dask cancels every future at once: that is
    reported as a lost scheduler (RuntimeError; the run stays "interrupted"). An instance whose
    task killed its Dask workers (``KilledWorker``) is stored as ERROR and the sweep goes on.
    Dask's own logging stays quiet meanwhile: the sweep reports what went wrong in one line."""
    with _QuietDask():
        _run_dask_loud(client, sw, modules, claims, on_result, address)


def _run_dask_loud(client, sw: Sweepable, modules: list[str], claims: _Claims, on_result, address: str) -> None:
    import asyncio
    import uuid

    from distributed import as_completed

    window = _dask_window(client)
    tag = uuid.uuid4().hex[:8]
    owner: dict = {}  # future key -> Instance
    ac = as_completed(loop=client.loop)

    def lost(detail: str) -> RuntimeError:
        detail = " ".join(str(detail).split())[:300]  # one line
        return RuntimeError(f"lost the Dask scheduler at {address} ({detail}); the run is recorded as "
                            "interrupted, finished instances are stored: rerun the same command to resume")

    try:
        while True:
            while len(owner) < window:
                inst = claims.take()
                if inst is None:
                    break
                fut = client.submit(_execute, sw.name, modules, inst.params, inst.seed,
                                    key=f"ncproofs-{inst.key[:16]}-{tag}", pure=False)
                owner[fut.key] = inst
                ac.add(fut)
            if not owner:
                if claims.exhausted():
                    return
                claims.wait()
                continue
            if not ac.has_ready():
                if client.status not in ("running", "connecting", "newly-created"):
                    raise lost(f"client status {client.status!r}")
                time.sleep(0.05)
                continue
            fut = next(ac)
            inst = owner.pop(fut.key)
            try:
                payload = fut.result()
            except (Exception, asyncio.CancelledError) as exc:
                if type(exc).__name__ == "KilledWorker" and client.status == "running":
                    why = " ".join(str(exc).split())[:300]
                    on_result(inst, ({"verdict": "ERROR", "reason": f"the instance killed the Dask workers that ran "
                                      f"it (KilledWorker: {why})"}, 0.0, "dask"))
                    continue
                if fut.status == "cancelled" or client.status != "running":
                    raise lost("the connection was lost and Dask cancelled the tasks" if fut.status == "cancelled"
                               else f"{type(exc).__name__}: {exc}") from None
                why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                raise RuntimeError(f"Dask task for instance {inst.key} failed ({why}); "
                                   "the run is recorded as interrupted, finished instances are stored: "
                                   "rerun to resume") from None
            on_result(inst, payload)
    except BaseException:
        try:
            client.cancel(list(ac.futures))
        except Exception:
            pass
        raise

