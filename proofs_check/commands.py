"""Command descriptors that family modules (``proofs_check.families.*``) export to the CLI."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from proofs_check.tables import Table


from theory._validate import InputError


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
    """The comma-separated entries of ``text``; an empty entry ("2,,3", "2,") is an error, never dropped."""
    parts = [x.strip() for x in text.split(",")]
    if any(not x for x in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} with no empty entry, got {text!r}")
    return parts


def float_list(text: str) -> list[float]:
    """Parse "0.1,0.5,1" (argparse type). Errors name the value."""
    parts = _entries(text, "numbers")
    try:
        return [float(x) for x in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def int_list(text: str) -> list[int]:
    parts = _entries(text, "integers")
    try:
        return [int(x) for x in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


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
