"""Research-workflow commands: ``ncproofs sweep`` (resumable grid/random sweeps, local or Dask)."""

from __future__ import annotations

from proofs_check.commands import ExtraCommand


def _add_arguments(p) -> None:
    from proofs_check.sweep.cli import add_arguments

    add_arguments(p)


def _run(args) -> int:
    from proofs_check.sweep.cli import main_from_args

    return main_from_args(args)


COMMANDS = [
    ExtraCommand(
        name="sweep",
        help="resumable grid/random sweep of one registered sweepable over many instances "
             "(local processes or a Dask cluster), stored per instance in SQLite; exports for pandas "
             "(CSV, JSON, Parquet) and --group-by tables",
        add_arguments=_add_arguments,
        run=_run,
    ),
]
