"""Command descriptors that family modules (``proofs_check.families.*``) export to the CLI."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from proofs_check.tables import Table


class UsageError(ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


@dataclass(frozen=True)
class SolveCommand:
    """``ncproofs solve NAME ...``: ``run(args)`` returns the common JSON-schema dict."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
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

def float_list(text: str) -> list[float]:
    """Parse "0.1,0.5,1" (argparse type). Errors name the value."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
