"""The SQLite results store: one row per finished instance, leases shared by concurrent sweeps."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from datetime import datetime, timezone
from typing import Iterable

from proofs_check.commands import UsageError
from proofs_check.core import clean
from proofs_check.sweep.config import Instance, SweepSpec
from proofs_check.sweep.registry import Sweepable

#: The verdicts a stored row may hold (anything else is a damaged row).
_VERDICTS = frozenset(("VERIFIED", "NOT_APPLICABLE", "INCONCLUSIVE", "REFUTED", "ERROR"))

SCHEMA_VERSION = "1"
_SEVERITY_SQL = ("CASE verdict WHEN 'ERROR' THEN 4 WHEN 'REFUTED' THEN 3 WHEN 'INCONCLUSIVE' THEN 2 "
                 "WHEN 'NOT_APPLICABLE' THEN 1 ELSE 0 END")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


#: Seconds a lease on an instance lasts unless renewed. A sweep renews its leases every
#: LEASE_SECONDS / 4 (a background thread), so a lease expires only when its sweep stopped;
#: a lease of a dead process on the same host is taken over at once (its pid is gone).
LEASE_SECONDS = 60.0


def _lease_owner() -> str:
    import uuid

    return f"{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex[:12]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:  # a zombie (killed, not yet reaped) is dead for our purpose
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _lease_stale(owner: str, expires: float, now: float) -> bool:
    if expires < now:
        return True
    host, _, rest = owner.partition("|")
    pid = rest.partition("|")[0]
    if host == socket.gethostname() and pid.isdigit():
        return not _pid_alive(int(pid))
    return False


#: Seconds a connection waits for another one's lock (SQLite busy timeout).
_BUSY_TIMEOUT = 30.0


def _retry_locked(fn, timeout: float = _BUSY_TIMEOUT):
    """Call ``fn`` again while SQLite says "database is locked" without waiting for the busy
    timeout, as ``PRAGMA journal_mode=WAL`` does when sweeps open a new store at the same
    moment (seen with 2-4 processes: about one start in ten failed before this retry)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.2)


class Store:
    """SQLite store: one row per finished instance (primary key = instance key).

    Every result is committed on its own transaction as soon as it arrives (WAL journal,
    synchronous=FULL), so a SIGKILL loses at most the instances still being computed.
    Several sweeps may share a store: each claims the instances it computes with a lease
    (table ``leases``: key, owner, expiry), taken in an ``IMMEDIATE`` transaction, so an
    instance is computed by one sweep at a time.
    """

    def __init__(self, path: str, *, readonly: bool = False):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise TypeError(f"Store: path must be a non-empty str or os.PathLike, got {type(path).__name__} {path!r}")
        self.path = os.fspath(path)
        self.db = None
        if readonly:
            self._open_readonly()
            return
        try:
            # isolation_level=None: autocommit; multi-statement writes use explicit
            # BEGIN IMMEDIATE ... COMMIT (the write lock is taken at BEGIN: no lock upgrades).
            self.db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None)
            self._refuse_foreign()
            _retry_locked(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript("""
            CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS runs (
                run_id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
                family TEXT NOT NULL, config_hash TEXT NOT NULL, config TEXT NOT NULL, scheduler TEXT NOT NULL,
                total INTEGER NOT NULL, skipped INTEGER NOT NULL, computed INTEGER NOT NULL DEFAULT 0,
                status TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS results (
                key TEXT PRIMARY KEY, family TEXT NOT NULL, version TEXT NOT NULL, params TEXT NOT NULL,
                seed INTEGER NOT NULL, verdict TEXT NOT NULL, reason TEXT, score REAL, result TEXT NOT NULL,
                seconds REAL, run_id INTEGER NOT NULL, finished_at TEXT NOT NULL, worker TEXT);
            CREATE INDEX IF NOT EXISTS results_family ON results(family, verdict);
            CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
            CREATE INDEX IF NOT EXISTS leases_owner ON leases(owner);
            CREATE TABLE IF NOT EXISTS sweepables (
                family TEXT NOT NULL, version TEXT NOT NULL, defaults TEXT NOT NULL, recorded_at TEXT NOT NULL,
                PRIMARY KEY (family, version));
            """)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        except sqlite3.DatabaseError as exc:
            self.close()
            raise UsageError(f"--store {self.path}: not a usable SQLite store ({exc})") from None
        self._check_schema("writes")

    def _check_schema(self, verb: str) -> None:
        """The store's schema version is this ncproofs' (and its results table can be read: a damaged file fails
        here); else UsageError, the connection closed."""
        try:
            row = self.db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            self.db.execute("SELECT count(*) FROM results").fetchone()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise UsageError(f"--store {self.path}: not a usable SQLite store ({exc})") from None
        schema = row[0] if row else None
        if schema != SCHEMA_VERSION:
            self.close()
            raise UsageError(f"--store {self.path}: schema {schema}, this ncproofs {verb} schema {SCHEMA_VERSION}")

    def _refuse_foreign(self) -> None:
        """A SQLite file with tables but no ncproofs ``meta`` table is somebody else's database: refuse it rather
        than add the store's tables to it (a mistyped --store must not modify a file)."""
        names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names and "meta" not in names:
            shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
            self.close()
            raise UsageError(f"--store {self.path}: a SQLite file that is not an ncproofs store (tables {shown}, no "
                             "'meta' table); give the path of a sweep store or of a new file")

    def _open_readonly(self) -> None:
        """Open an existing store for reading only (--summary, --export, to_dataframe): nothing is created or
        written, so a store on a read-only share, or somebody else's, can be read."""
        from urllib.parse import quote

        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.access(folder, os.W_OK):
            # WAL readers must create PATH-shm beside the store: impossible in a read-only folder. With no
            # write-ahead log left to merge nobody can be writing there, so the file is opened immutable.
            wal = f"{self.path}-wal"
            if os.path.exists(wal) and os.path.getsize(wal) > 0:
                raise UsageError(f"--store {self.path}: its folder is read-only and it has an unmerged write-ahead log "
                                 f"({wal}); copy the store and its -wal file to a writable folder to read it")
            uri += "&immutable=1"
        try:
            self.db = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT, isolation_level=None)
            self._refuse_foreign()
            names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            self.close()
            raise UsageError(f"--store {self.path}: not a usable SQLite store ({exc})") from None
        if "meta" not in names:
            self.close()
            raise UsageError(f"--store {self.path}: an empty file, not an ncproofs store (run the sweep first)")
        self._check_schema("reads")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def _begin(self) -> None:
        if self.db.in_transaction:  # left open by an interrupt (Ctrl-C, SIGTERM) inside a write
            self.db.rollback()
        self.db.execute("BEGIN IMMEDIATE")

    def _write(self, fn):
        self._begin()
        try:
            out = fn()
            self.db.execute("COMMIT")
            return out
        except BaseException:
            if self.db is not None and self.db.in_transaction:
                self.db.rollback()
            raise

    def done_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        rows = self.db.execute("SELECT key FROM results").fetchall()
        have = {r[0] for r in rows}
        return have if keys is None else have & set(keys)

    def begin_run(self, spec: SweepSpec, scheduler: str, total: int, skipped: int,
                  sweepable: Sweepable | None = None) -> int:
        def write():
            cur = self.db.execute(
                "INSERT INTO runs (started_at, family, config_hash, config, scheduler, total, skipped, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                (_now(), spec.family, spec.config_hash(), json.dumps(spec.raw, default=str), scheduler, total,
                 skipped))
            if sweepable is not None:  # lets --summary compute keys without importing the config's modules
                self.db.execute("INSERT OR REPLACE INTO sweepables VALUES (?, ?, ?, ?)",
                                (sweepable.name, sweepable.version,
                                 json.dumps(dict(sweepable.defaults), sort_keys=True), _now()))
            return int(cur.lastrowid)

        return self._write(write)

    def end_run(self, run_id: int, status: str, computed: int) -> None:
        self._write(lambda: self.db.execute("UPDATE runs SET finished_at=?, status=?, computed=? WHERE run_id=?",
                                            (_now(), status, computed, run_id)))

    def computed_by_run(self, run_id: int) -> int:
        return int(self.db.execute("SELECT count(*) FROM results WHERE run_id=?", (run_id,)).fetchone()[0])

    def sweepable_record(self, family: str) -> Sweepable | None:
        """The (version, defaults) a sweep of ``family`` last recorded here, as a Sweepable that can
        compute instance keys but not results (``fn`` is None)."""
        row = self.db.execute("SELECT version, defaults FROM sweepables WHERE family=? ORDER BY rowid DESC LIMIT 1",
                              (family,)).fetchone()
        if row is None:
            return None
        return Sweepable(family, None, None, json.loads(row[1]), None, row[0], "recorded in the store")

    def claim(self, keys: list[str], owner: str, ttl: float = LEASE_SECONDS) -> tuple[set[str], set[str], set[str]]:
        """Lease the given instances to ``owner`` in one IMMEDIATE transaction.

        Returns ``(claimed, done, busy)``: leased now (or already ours), already stored, and
        leased by another live sweep. A lease that expired, or whose owner process on this
        host is gone, is taken over."""
        keys = list(dict.fromkeys(keys))

        def write():
            now = time.time()
            claimed, done, busy = set(), set(), set()
            for i in range(0, len(keys), 400):
                chunk = keys[i:i + 400]
                marks = ",".join("?" * len(chunk))
                done |= {r[0] for r in self.db.execute(f"SELECT key FROM results WHERE key IN ({marks})", chunk)}
                held = {r[0]: (r[1], r[2]) for r in
                        self.db.execute(f"SELECT key, owner, expires FROM leases WHERE key IN ({marks})", chunk)}
                for k in chunk:
                    if k in done:
                        continue
                    if k in held and held[k][0] != owner and not _lease_stale(held[k][0], held[k][1], now):
                        busy.add(k)
                        continue
                    self.db.execute("INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)",
                                    (k, owner, now + ttl))
                    claimed.add(k)
            return claimed, done, busy

        return self._write(write)

    def renew(self, owner: str, ttl: float = LEASE_SECONDS) -> None:
        self._write(lambda: self.db.execute("UPDATE leases SET expires=? WHERE owner=?", (time.time() + ttl, owner)))

    def release(self, owner: str) -> None:
        self._write(lambda: self.db.execute("DELETE FROM leases WHERE owner=?", (owner,)))

    def put(self, inst: Instance, family: str, version: str, result: dict, seconds: float, run_id: int,
            worker: str, owner: str | None = None) -> bool:
        """Write one finished instance and drop its lease (one transaction, committed at once).
        Returns False if it was already stored."""
        result = clean(result)
        score = result.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        row = (inst.key, family, version, json.dumps(inst.params, sort_keys=True), inst.seed, result["verdict"],
               result.get("reason"), score, json.dumps(result, allow_nan=False), seconds, run_id, _now(), worker)

        def write():
            cur = self.db.execute(
                "INSERT INTO results (key, family, version, params, seed, verdict, reason, score, result, seconds, "
                "run_id, finished_at, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO NOTHING", row)
            if owner is not None:
                self.db.execute("DELETE FROM leases WHERE key=? AND owner=?", (inst.key, owner))
            return cur.rowcount == 1

        return self._write(write)

    def rows(self, keys: Iterable[str] | None = None, family: str | None = None, *,
             with_result: bool = False) -> list[dict]:
        """Stored instances, worst first (verdict, then score, larger first; then key).

        ``keys``: only these instances; ``family``: only this sweepable's. Each row is a dict
        with key, family, params, seed, verdict, reason, score, seconds, run_id, and with
        ``with_result=True`` also ``result`` (the whole dict the sweepable returned, checks and
        evidence included: what :func:`proofs_check.sweep.export.flat_table` reads)."""
        # the result column is always read and parsed: a damaged result must not show as a clean row in
        # --summary while --export refuses it
        q = "SELECT key, family, params, seed, verdict, reason, score, seconds, run_id, result FROM results"
        args: tuple = ()
        if family is not None:
            q += " WHERE family = ?"
            args = (family,)
        q += f" ORDER BY {_SEVERITY_SQL} DESC, score IS NULL, score DESC, key"
        out = []
        wanted = None if keys is None else set(keys)
        for key, fam, params, seed, verdict, reason, score, secs, run_id, result in self.db.execute(q, args):
            if wanted is not None and key not in wanted:
                continue
            try:  # a row that does not parse is a damaged store (bad input), not a defect of the tool
                if verdict not in _VERDICTS:
                    raise ValueError(f"verdict {verdict!r} is not one of {', '.join(sorted(_VERDICTS))}")
                row = {"key": key, "family": fam, "params": json.loads(params), "seed": seed, "verdict": verdict,
                       "reason": reason, "score": score, "seconds": secs, "run_id": run_id}
                parsed = json.loads(result) if isinstance(result, (str, bytes)) else None
                if not isinstance(parsed, dict):
                    raise ValueError("the stored result is not a JSON object")
                if with_result:
                    row["result"] = parsed
            except (ValueError, TypeError, RecursionError) as exc:
                raise UsageError(f"--store {self.path}: damaged row {key!r}: {' '.join(str(exc).split())[:200]}") \
                    from None
            out.append(row)
        return out


class _LeaseKeeper:
    """Renews this sweep's leases every LEASE_SECONDS / 4 from a thread with its own SQLite
    connection, so a long instance (or a computation in the main thread) keeps its lease."""

    def __init__(self, path: str, owner: str, ttl: float = LEASE_SECONDS):
        import threading

        self.path, self.owner, self.ttl = path, owner, ttl
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ncproofs-sweep-leases", daemon=True)

    def start(self) -> "_LeaseKeeper":
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.Error:  # pragma: no cover - the main connection works, so does this one
            return
        try:
            while not self._stop.wait(self.ttl / 4):
                try:
                    db.execute("UPDATE leases SET expires=? WHERE owner=?", (time.time() + self.ttl, self.owner))
                except sqlite3.Error:  # busy beyond 30 s, etc.: try again at the next tick
                    pass
        finally:
            db.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Claims:
    """Hands out the pending instances to compute, leasing them in small batches; instances
    leased by another live sweep are retried every RECHECK seconds until stored or free."""

    RECHECK = 0.5

    def __init__(self, store: Store, owner: str, pending: list[Instance], batch: int, on_elsewhere=None):
        from collections import deque

        self.store, self.owner, self.batch = store, owner, max(1, int(batch))
        self.todo = deque(pending)
        self.ready: deque = deque()
        self.busy: dict[str, Instance] = {}
        self.elsewhere = 0
        self._on_elsewhere = on_elsewhere
        self._next_recheck = 0.0

    def take(self) -> Instance | None:
        """The next instance leased to this sweep, or None if none can be taken now."""
        while not self.ready:
            if self.todo:
                batch = [self.todo.popleft() for _ in range(min(self.batch, len(self.todo)))]
            elif self.busy and time.monotonic() >= self._next_recheck:
                batch = list(self.busy.values())
                self.busy.clear()
                self._next_recheck = time.monotonic() + self.RECHECK
            else:
                return None
            claimed, done, busy = self.store.claim([i.key for i in batch], self.owner)
            for inst in batch:
                if inst.key in claimed:
                    self.ready.append(inst)
                elif inst.key in done:
                    self.elsewhere += 1
                    if self._on_elsewhere is not None:
                        self._on_elsewhere(1)
                else:
                    self.busy[inst.key] = inst
        return self.ready.popleft()

    def exhausted(self) -> bool:
        return not (self.todo or self.ready or self.busy)

    def wait(self) -> None:
        """Sleep until the instances leased elsewhere are worth checking again."""
        time.sleep(max(0.05, min(self.RECHECK, self._next_recheck - time.monotonic())))

