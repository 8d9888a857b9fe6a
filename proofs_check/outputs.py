"""Output files: checked before any work, written atomically.

Every command that writes a file (``run --report/--json``, ``table --output``, ``solve --plot``,
``sweep --export``) calls :func:`check_output_path` before it computes anything, so a typo in
a folder name costs a one-line error (exit 2) instead of a finished computation, and writes
with :func:`write_text_atomic` / :func:`write_bytes_atomic`: the data go to a temporary file
beside the target, are flushed to disk (fsync) and then renamed over the target
(``os.replace``), so a reader never sees a half-written file and a crash leaves the old file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from theory._validate import InputError

__all__ = ["check_output_path", "write_text_atomic", "write_bytes_atomic"]


def _describe(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (fifo)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _shorten(shown: str) -> str:
    return shown if len(shown) <= 80 else shown[:40] + "…" + shown[-20:]


def _target(path) -> Path:
    """The file that will be replaced: a symlink is followed (its target is rewritten)."""
    p = Path(os.fspath(path)).expanduser()
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    return p


def check_output_path(path, option: str) -> Path | None:
    """Check, before any work, that ``path`` can be written; return it as a Path.

    ``None`` or ``""`` means "no output" and returns ``None``. Raises :class:`InputError`
    naming ``option`` when the folder does not exist, is not a folder or is not writable,
    when a temporary file cannot be created beside the target (checked by creating and
    deleting one), or when the path exists and is not a regular file (a directory, a device,
    a fifo).
    """
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{option}: path must be a string or os.PathLike, got {type(path).__name__}")
    shown = os.fspath(path)
    if shown == "":
        return None
    if "\x00" in str(shown):
        raise InputError(f"{option}: the path contains a NUL character")
    try:
        p = _target(path)  # is_symlink() raises for a name too long (ENAMETOOLONG), a loop (ELOOP), ...
    except OSError as exc:
        raise InputError(f"{option}: cannot inspect {_shorten(shown)} ({exc.strerror or exc})") from None
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # a parent is a file: reported below
    except OSError as exc:
        raise InputError(f"{option}: cannot inspect {shown} ({exc.strerror or exc})") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(f"{option}: {shown} is {_describe(st.st_mode)}, not a file that can be written")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"{option}: directory {parent} does not exist")
    if not parent.is_dir():
        raise InputError(f"{option}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option}: directory {parent} is not writable")
    if st is not None and not os.access(p, os.W_OK):
        raise InputError(f"{option}: {shown} exists and is not writable")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"{option}: cannot create a file in directory {parent} "
                         f"({exc.strerror or type(exc).__name__})") from None
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:  # pragma: no cover - created a moment ago by us
        pass
    return p


def check_distinct_outputs(*pairs) -> None:
    """Refuse two output options naming the same file (compared as resolved paths, so ``./r.json`` and a
    symlink to it count as the same): one would silently replace the other. ``pairs``: (option, path or
    None/''); empty ones are skipped. Raises UsageError naming both options."""
    import os

    from proofs_check.commands import UsageError

    seen: dict[str, str] = {}
    for option, path in pairs:
        if not path:
            continue
        key = os.path.realpath(os.fspath(path))
        if key in seen:
            raise UsageError(f"{option}: same file as {seen[key]} ({os.fspath(path)}): one report would replace the "
                             "other; give them different paths")
        seen[key] = option


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - not supported on this platform / file system
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, os.replace.

    The new file gets the permissions of the file it replaces, else the usual ones for a new
    file (0o666 minus the umask). On any error the temp file is removed and the old file is
    left as it was."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    p = _target(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        mode = stat.S_IMODE(os.stat(p).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(parent)
    return p


def write_text_atomic(path, text: str, encoding: str = "utf-8") -> Path:
    """:func:`write_bytes_atomic` for text (UTF-8 by default)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return write_bytes_atomic(path, text.encode(encoding))
