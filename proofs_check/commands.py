"""Command descriptors that family modules (``proofs_check.families.*``) export to the CLI."""

from __future__ import annotations

import argparse
import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from proofs_check.tables import Table


from theory._validate import TEXT_BLANKS, InputError, float_from_text, int_from_text


class UsageError(InputError):
    """Bad command-line input: printed as one line, exit status 2."""


@dataclass(frozen=True)
class SolveCommand:
    """``ncproofs solve NAME ...``: ``run(args)`` returns the live :class:`~proofs_check.core.SolveReport`
    (``solve --rigorous`` bounds the candidate it holds: no second solve) or the common JSON-schema dict."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Any]
    render: Callable[[dict], str] | None = None


@dataclass(frozen=True)
class TableCommand:
    """``ncproofs table NAME ... --format md|latex|csv|json``: ``build(args)`` returns a Table."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace], Table]


@dataclass(frozen=True)
class ExtraCommand:
    """A top-level subcommand (e.g. ``ncproofs batching``); ``run(args)`` returns the exit status."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def discover() -> tuple[list[SolveCommand], list[TableCommand], list[ExtraCommand]]:
    import proofs_check.families as pkg

    solves, tables, extras = [], [], []
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"proofs_check.families.{m.name}")
        for cmd in getattr(mod, "COMMANDS", []):
            {SolveCommand: solves, TableCommand: tables, ExtraCommand: extras}[type(cmd)].append(cmd)
    return solves, tables, extras


# ---- argument parsing helpers shared by the family modules ---------------------------------

def _entries(text: str, what: str) -> list[str]:
    """The comma-separated entries of ``text`` (ASCII blanks around each ignored); an empty entry ("2,,3", "2,",
    ",") is an error, never dropped."""
    parts = [x.strip(TEXT_BLANKS) for x in text.split(",")]
    if any(not x for x in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} with no empty entry, got {text!r}"[:300])
    return parts


def int_arg(text: str) -> int:
    """An integer option (argparse type): the syntax of :func:`theory._validate.int_from_text` (ASCII digits with
    an optional sign; no ``3_0``, ``٣``, ``3.0``, ``1e3``, ``0x10``), at most 2^63 - 1 in magnitude. The CLI's
    parser uses it for every ``type=int`` option (``cli._Parser``)."""
    try:
        return int_from_text(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(_invalid("int", text, exc)) from None


def _invalid(kind: str, text: str, exc: InputError) -> str:
    """argparse's own wording (``invalid int value: '3_0'``) and the constraint."""
    shown = repr(text) if len(text) <= 60 else repr(text[:40]) + f"... ({len(text)} characters)"
    return f"invalid {kind} value: {shown}: {str(exc).rsplit(', got ', 1)[0]}"


def float_arg(text: str) -> float:
    """A real option (argparse type): the syntax of :func:`theory._validate.float_from_text` (a finite decimal
    number, ASCII only; no ``inf``, ``nan``, ``1_0``, ``1e400``). The CLI's parser uses it for every
    ``type=float`` option (``cli._Parser``)."""
    try:
        return float_from_text(text)
    except InputError as exc:
        nonfinite = _non_finite_text(text)
        if nonfinite is not None:
            return nonfinite
        raise argparse.ArgumentTypeError(_invalid("float", text, exc)) from None


def _non_finite_text(text: str) -> float | None:
    """``inf``, ``nan``, ``1e400`` (ASCII, no underscore): the float they spell, which the CLI's check of every
    option after parsing refuses with the option's name (``cli._non_finite_option``: ``main`` returns 2, as it
    always did for these values); ``None`` for anything else."""
    t = text.strip(TEXT_BLANKS)
    if not t.isascii() or "_" in t:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return None if math.isfinite(v) else v


def _list_of(text: str, what: str, parse) -> list:
    parts = _entries(text, what)
    out = []
    for i, x in enumerate(parts):
        try:
            out.append(parse(x))
        except InputError as exc:
            if parse is float_from_text and _non_finite_text(x) is not None:
                out.append(_non_finite_text(x))  # refused after parsing, naming the option (see float_arg)
                continue
            shown = repr(text) if len(text) <= 60 else f"{len(parts)} entries"
            constraint = str(exc).rsplit(", got ", 1)[0]
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {shown}: entry {i + 1} ({x!r})"
                                             f" {constraint}"[:300]) from None
    return out


def float_list(text: str) -> list[float]:
    """Parse "0.1,0.5,1" (argparse type): entries in the syntax of :func:`float_arg`. Errors name the value."""
    return _list_of(text, "numbers", float_from_text)


def int_list(text: str) -> list[int]:
    """Parse "2,3,5" (argparse type): entries in the syntax of :func:`int_arg`. Errors name the value."""
    return _list_of(text, "integers", int_from_text)


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """--backend/--device/--dtype for factored solvers (torch optional)."""
    p.add_argument("--backend", choices=("numpy", "torch"), default="numpy",
                   help="factored solver backend (torch needs the [torch] extra; falls back to numpy with a message)")
    p.add_argument("--device", default=None, help="torch device: cpu or cuda (falls back to cpu with a message)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64", help="torch dtype (default float64)")


def backend_from_args(args: argparse.Namespace) -> dict:
    """Resolve the backend now so that fallbacks are announced on stderr before solving."""
    import sys

    from solvers.backends import resolve

    choice = resolve(args.backend, args.device, args.dtype)
    for m in choice.messages:
        print(f"ncproofs: note: {m}", file=sys.stderr)
    return {"backend": args.backend, "device": args.device, "dtype": args.dtype}
