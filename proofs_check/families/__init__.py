"""CLI commands per result family.

Each module here defines ``COMMANDS``: a list of :class:`proofs_check.commands.SolveCommand`,
:class:`~proofs_check.commands.TableCommand` or :class:`~proofs_check.commands.ExtraCommand`.
The CLI discovers them, so a family adds one module and edits nothing shared.
"""
