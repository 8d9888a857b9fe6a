"""The one JSON envelope of every ``ncproofs ... --json`` output and report file.

Every JSON object ncproofs writes starts with the same four keys (docs/DEVELOPING.md, "JSON
outputs"; the JSON Schema is ``proofs_check/schema/ncproofs-output.schema.json``):

- ``schema_version``: :data:`SCHEMA_VERSION`, ``"MAJOR.MINOR"``; MINOR grows when keys are added,
  MAJOR when a key changes meaning or disappears;
- ``ncproofs_version``: the installed package version;
- ``git_commit``: the commit of the checkout the package runs from (``null`` for an installed
  wheel or when git is not available), with ``+dirty`` when tracked files differ from it;
- ``command``: what produced it (``run``, ``solve``, ``list``, ``batching``, ``table``, ``measure``).

Commands about one instance (``solve FAMILY``, ``batching``) share the solve report's keys:
``family``, ``instance``, ``predicted``, ``solution``, ``certificate``, ``geometry``, ``routes``,
``claims``, ``diagnostics``, ``verdict``, ``reason``.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any, Mapping

#: version of the JSON layout (not of the package): see the module docstring
# 1.1: run reports gained cpu_seconds (per claim and in all) and jobs; 1.2: the checks about every minimiser
# carry evidence.statement (an EveryMinimiser statement, what `--rigorous` dispatches on)
SCHEMA_VERSION = "1.2"
ENVELOPE_KEYS = ("schema_version", "ncproofs_version", "git_commit", "command")
#: the keys that ``solve FAMILY --json`` and ``batching --json`` have in common
INSTANCE_KEYS = ("family", "instance", "predicted", "solution", "certificate", "geometry", "routes", "claims",
                 "diagnostics", "verdict", "reason")


@functools.lru_cache(maxsize=1)
def ncproofs_version() -> str:
    """The installed version (package metadata); the version in pyproject.toml for a bare checkout."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("ncproofs")
    except Exception:  # not installed (run from a checkout on sys.path)
        pass
    try:
        import re

        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the checkout this package runs from, ``+dirty`` when tracked files changed; None
    outside a checkout (an installed wheel), without git, or when git does not answer within 5 s."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() or os.environ.get("NCPROOFS_NO_GIT") == "1":
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(head) != 40:
        return None
    return head + ("+dirty" if dirty else "")


def envelope(command: str, payload: Mapping[str, Any]) -> dict:
    """``payload`` under the envelope keys (which come first; a payload key of the same name is replaced)."""
    head = {"schema_version": SCHEMA_VERSION, "ncproofs_version": ncproofs_version(), "git_commit": git_commit(),
            "command": command}
    return {**head, **{k: v for k, v in payload.items() if k not in head}}


def schema_path() -> Path:
    """The JSON Schema (draft 2020-12) of the envelope and of the run, solve, list and batching outputs."""
    return Path(__file__).resolve().parent / "schema" / "ncproofs-output.schema.json"
