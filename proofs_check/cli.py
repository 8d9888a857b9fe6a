"""The ``ncproofs`` command line: run, list, solve, table (+ family extras)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from proofs_check import html_report, plots
from proofs_check.commands import UsageError, discover, float_arg, int_arg
from proofs_check.core import RunContext, SolveReport, clean
from proofs_check.tables import FORMATS, add_render_arguments, render_from_args
from theory._validate import InputError


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line with exit status 2 (argparse's convention), and reads every
    ``type=int`` / ``type=float`` option in one strict syntax (:func:`proofs_check.commands.int_arg`,
    :func:`~proofs_check.commands.float_arg`; ``NUMBERS_HELP``, shown by ``ncproofs --help``): argparse looks a type up in the parser's
    registry before calling it, so ``int`` and ``float`` are registered to the strict parsers here (every
    subcommand's parser is a ``_Parser``) and the families keep writing ``type=int``. Python's own int() and
    float() accept ``3_0`` (30), other scripts' digits (``٣``), ``inf`` and ``nan``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", int, int_arg)
        self.register("type", float, float_arg)

    def error(self, message):  # pragma: no cover - exercised through the CLI tests
        self.exit(2, f"ncproofs: error: {message}\n")


NUMBERS_HELP = ("Numbers in options: an integer is an optional sign and the digits 0-9 (3, +3, -0, 007; not 3_0, "
                "other scripts' digits, 3.0, 1e3 or 0x10), at most 2^63 - 1 in magnitude; a real number is a finite "
                "decimal number (0.5, -1e-3, .5, 2.; not inf, nan, 1_0 or 1e400); blanks around a value or a list "
                "entry are ignored (' 3 ', '2, 3'); a list has no empty entry ('2,,3', '2,', ','). Bad input: one "
                "line on stderr naming the option and the constraint, exit status 2.")

ONLY_HELP = ("a family (ufm, ufm_general, scl, feature_collapse = feature-collapse, ntk, crh, deep_ufm: exactly that "
             "family), else a claim id or former id, else a glob over ids, else an id substring; repeatable")


class _VersionAction(argparse.Action):
    """``--version``: computed only when asked (the git commit costs a subprocess)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from proofs_check.envelope import SCHEMA_VERSION, git_commit, ncproofs_version

        commit = git_commit()
        print(f"ncproofs {ncproofs_version()}" + (f" (git {commit})" if commit else "")
              + f", JSON schema {SCHEMA_VERSION}")
        parser.exit(0)


def _family_aliases(name: str, solve: bool = False) -> list[str]:
    """Other spellings of a command name: the claim family's (``feature_collapse`` for
    ``feature-collapse``), and ``ufm_general`` for ``solve ufm`` (the any-loss engine, whose claims are
    family ``ufm_general``; ``ufm`` in claims and sweeps is the classic model)."""
    from proofs_check.registry import FAMILIES

    out = [name.replace("-", "_")] if name.replace("-", "_") in FAMILIES and "-" in name else []
    if solve and name == "ufm":
        out.append("ufm_general")
    return out


SAVED_HELP = ("ncproofs solve --rigorous REPORT.json [--json] [--html PATH] [--plot PATH]: re-judge a saved report "
              "(the output of `ncproofs solve FAMILY ... --json`, a file ending in .json) in ball arithmetic, "
              "without solving again (solve ufm: its candidate is solved once); families with a rigorous recipe "
              "(docs/rigorous.md, 'Saved reports')")


def _saved_report_argv(argv: list[str]) -> bool:
    """``solve ... REPORT.json ...``: the positional that is otherwise the family ends in ``.json`` (no family
    does), after the options of :func:`_saved_parser` (``--html PATH`` and ``--plot PATH`` take a value)."""
    if not argv or argv[0] != "solve":
        return False
    takes_value = {"--html", "--plot", "--plot-size", "--plot-dpi"}
    skip = False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a == "--":
            continue
        elif a.startswith("-"):
            skip = a in takes_value
        else:
            return a.lower().endswith(".json")
    return False


def _saved_parser() -> argparse.ArgumentParser:
    """``ncproofs solve --rigorous REPORT.json``: the options of a live ``solve --rigorous`` that need no instance."""
    sp = _Parser(prog="ncproofs solve", description=SAVED_HELP)
    sp.add_argument("report", metavar="REPORT.json", help="a saved `ncproofs solve FAMILY ... --json` report")
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.add_argument("--rigorous", action="store_true", help="needed: re-judge the report in ball arithmetic "
                    "(python-flint; docs/rigorous.md)")
    plots.add_plot_argument(sp)
    html_report.add_html_argument(sp)
    sp.set_defaults(command="solve", family=None)
    return sp


def build_parser(run_only: bool = False) -> tuple[argparse.ArgumentParser, dict, dict, dict]:
    """The parser and the solve, table and extra commands by name. ``run_only``: without the families'
    commands (``ncproofs run ...`` needs none of them; importing them cost 0.05 CPU s of every run's start-up)."""
    solves, tables, extras = ([], [], []) if run_only else discover()
    p = _Parser(prog="ncproofs", description="Check theorems about optimal representations "
                "(neural collapse and relatives), symbolically and numerically.", epilog=NUMBERS_HELP)
    p.add_argument("--version", action=_VersionAction, nargs=0,
                   help="print the version (and the git commit of a checkout) and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    r = sub.add_parser("run", help="run the registered proof checks and write reports")
    r.add_argument("--only", action="append", metavar="PATTERN",
                   help=ONLY_HELP)
    r.add_argument("--profile", choices=("quick", "full"), default=None,
                   help="quick (default, about 8 s on 2 cores) or full (exhaustive, slow)")
    r.add_argument("--full", action="store_true", help="same as --profile full (--profile quick --full is refused)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--report", default="ncproofs-report.md", help="Markdown report path ('' to skip)")
    r.add_argument("--json", dest="json_path", default="ncproofs-report.json", help="JSON report path ('' to skip)")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.add_argument("--jobs", "-j", type=_jobs_option, default=None, metavar="N|auto",
                   help="run claims in N processes (default auto: the CPUs this process may use, at most 8; 1: "
                        "serial); the output order, verdicts and numbers do not depend on N")
    r.add_argument("--no-cache", action="store_true",
                   help="do not read or write the cache of symbolic derivations (default: $NCPROOFS_CACHE_DIR or "
                        "~/.cache/ncproofs, keyed by the source of the modules involved; never stale)")
    r.add_argument("--clear-cache", action="store_true", help="delete the cache of symbolic derivations first")
    r.add_argument("--fail-on", choices=("refuted", "inconclusive"), default="refuted",
                   help="exit 1 when a claim is REFUTED or ERROR (default), or also INCONCLUSIVE (strict CI mode); "
                        "NOT_APPLICABLE never fails")
    r.add_argument("--rigorous", action="store_true",
                   help="re-derive each value certificate in ball arithmetic (python-flint) and judge the value "
                        "statements by the proven bracket (docs/rigorous.md)")
    html_report.add_html_argument(r)

    li = sub.add_parser("list", help="list the registered claims with source and provenance")
    li.add_argument("--only", action="append", metavar="PATTERN", help=ONLY_HELP)
    li.add_argument("--json", action="store_true")
    li.add_argument("--counts-from", metavar="RUN.json", default=None,
                    help="show each claim's independent/consistency check counts from an `ncproofs run --json` "
                         "report (default: ncproofs-report.json when it exists; the counts exist only after a run)")

    s = sub.add_parser("solve", help="solve and check one instance of a family", epilog=SAVED_HELP)
    ssub = s.add_subparsers(dest="family", parser_class=_Parser, metavar="FAMILY")
    smap = {}
    for cmd in solves:
        aliases = _family_aliases(cmd.name, solve=True)
        sp = ssub.add_parser(cmd.name, help=cmd.help, description=cmd.help, aliases=aliases)
        cmd.add_arguments(sp)
        sp.add_argument("--json", action="store_true", help="print one JSON object")
        sp.add_argument("--rigorous", action="store_true",
                        help="re-derive the certificate in ball arithmetic (python-flint) and judge the value "
                             "statements by the proven bracket (docs/rigorous.md)")
        plots.add_plot_argument(sp)
        html_report.add_html_argument(sp)
        smap[cmd.name] = cmd
        smap.update({a: cmd for a in aliases})

    t = sub.add_parser("table", help="tables of predicted constants for papers")
    tsub = t.add_subparsers(dest="family", parser_class=_Parser, metavar="FAMILY")
    tmap = {}
    for cmd in tables:
        aliases = _family_aliases(cmd.name)
        tp = tsub.add_parser(cmd.name, help=cmd.help, description=cmd.help, aliases=aliases)
        cmd.add_arguments(tp)
        tp.add_argument("--format", choices=FORMATS, default=None,
                        help="default: from the --output extension (.md, .tex/.latex, .csv, .json), else md")
        tp.add_argument("--output", "-o", default=None, help="write to a file instead of stdout")
        add_render_arguments(tp)  # --precision --na-rep --label --caption --columns --no-cite
        tmap[cmd.name] = cmd
        tmap.update({a: cmd for a in aliases})

    emap = {}
    for cmd in extras:
        ep = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(ep)
        emap[cmd.name] = cmd
    return p, smap, tmap, emap


def render_solve(out: dict) -> str:
    """Readable summary of a solve result (the common JSON schema)."""
    from proofs_check.runner import _short

    lines = [f"family: {out.get('family')}",
             "instance: " + ", ".join(f"{k}={_short(v)}" for k, v in (out.get("instance") or {}).items())]
    pred = out.get("predicted") or {}
    lines.append("predicted: " + ", ".join(f"{k}={_short(v)}" for k, v in pred.items() if not isinstance(v, (dict,))))
    sol = out.get("solution")
    if sol:
        lines.append("solution: " + ", ".join(f"{k}={_short(v)}" for k, v in sol.items() if not isinstance(v, dict)))
    cert = out.get("certificate")
    lines.append("certificate: " + (", ".join(f"{k}={_short(v)}" for k, v in cert.items() if not isinstance(v, dict))
                                    if cert else "none"))
    geo = out.get("geometry") or {}
    if geo:
        lines.append(f"geometry: {geo.get('classification')}")
        m = geo.get("metrics") or {}
        if m:
            lines.append("metrics: " + ", ".join(f"{k}={_short(v)}" for k, v in m.items()))
        cos = geo.get("class_mean_cosines")
        if cos and len(cos) <= 8:
            lines.append("class-mean cosines:")
            for row in cos:
                lines.append("  " + " ".join("   null" if x is None else f"{x:7.4f}" for x in row))
    lines.extend(render_claims(out))
    return "\n".join(lines)


def render_claims(out: dict) -> list[str]:
    """Per statement one line (reasons of statements that are not VERIFIED, shortened), the
    diagnostics that decided nothing, and the verdict line. Full texts are in ``--json``."""
    from proofs_check.core import shorten

    lines = []
    for c in out.get("claims", []):
        tag = "" if c.get("independent", True) else " (consistency)"
        if c["verdict"] == "VERIFIED":
            lines.append(f"  [{c['verdict']}] {c['id']}{tag}")
        else:
            lines.append(f"  [{c['verdict']}] {c['id']}{tag}: {shorten(c['reason'])}")
    diags = out.get("diagnostics") or []
    if diags:
        lines.append(f"diagnostics ({len(diags)}; decided nothing): " + shorten("; ".join(map(str, diags)), 140))
    lines.append(f"verdict: {out.get('verdict')} ({shorten(out.get('reason') or '', 140)})")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Entry point. Exit status: 0 fine, 1 REFUTED/ERROR or an internal error, 2 bad input.

    The user's mistakes (:class:`theory._validate.InputError`, argparse errors) are one line and
    exit 2. Anything else is a defect of the tool: one line "internal error in <command>: ..."
    and exit 1 (the traceback with ``--debug``, and in the JSON with ``solve --json``).
    """
    import os
    import traceback

    from theory._validate import InputError

    as_program = argv is None  # the console script or ``python -m``: the process ends after this call
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("NCPROOFS_DEBUG") == "1"
    argv = [a for a in argv if a != "--debug"]
    parser, smap, tmap, emap = build_parser(run_only=argv[:1] == ["run"])
    saved = _saved_report_argv(argv)
    args = _saved_parser().parse_args(argv[1:]) if saved else parser.parse_args(argv)
    fmap = {"solve": smap, "table": tmap}.get(getattr(args, "command", None))
    if fmap and getattr(args, "family", None) in fmap:  # an alias (feature_collapse) -> the command's name
        args.family = fmap[args.family].name
    bad = _non_finite_option(args, {**_option_names(parser), **({"report": "REPORT.json"} if saved else {})})
    blank = [p for p in (getattr(args, "only", None) or []) if isinstance(p, str) and not p.strip()]
    if bad is None and blank:
        bad = f"--only must be a non-empty PATTERN (a family, a claim id, a glob or an id substring), got {blank[0]!r}"
    if bad:
        print(f"ncproofs: error: {bad}", file=sys.stderr)
        return 2
    args._argv = tuple(argv)  # the words as typed (after the checks above, which go over every option's value)
    where = " ".join(x for x in (getattr(args, "command", None), getattr(args, "family", None)) if x) or "ncproofs"
    guard = _StdoutGuard(sys.stdout)
    sys.stdout = guard
    try:
        rc = _dispatch(parser, args, smap, tmap, emap)
        sys.stdout.flush()  # a full disk under `> out.txt` is reported here, not in a traceback at exit
        if as_program and args.command == "run":
            _skip_final_collection()
        return rc
    except InputError as exc:
        # the message names the parameter and the constraint; the option as typed is added where the message
        # names the parameter by its API name (``lambda_w must be >= 0`` -> ``argument --lambda-w: ...``)
        print(f"ncproofs: error: "
              f"{_name_the_options(_one_line(exc), _command_parser(parser, args), getattr(args, '_argv', None))}",
              file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover - output piped into head etc.
        return 0
    except KeyboardInterrupt:  # pragma: no cover
        print("ncproofs: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"ncproofs: error: {where}: out of memory (reduce the instance size or pass a smaller budget)",
              file=sys.stderr)
        return 1
    except OSError as exc:
        # an OS error on a path the user named (ENAMETOOLONG, ENOSPC, EACCES, EROFS, ...): the
        # user's environment, not a defect; one line naming the path. Without a path it is a defect.
        line = _os_error_line(exc)
        if line is None and guard.failed is exc:  # `> /dev/full`, a full disk, a closed terminal
            guard.drop()
            line = f"standard output: {exc.strerror or exc} (errno {exc.errno})"
        if line is None:
            return _internal_error(exc, where, debug, args)
        print(f"ncproofs: error: {line}", file=sys.stderr)
        return 2
    except Exception as exc:  # a defect of the tool, never reported as bad input
        return _internal_error(exc, where, debug, args)
    finally:
        if sys.stdout is guard:
            sys.stdout = guard.stream


def _typed(option: str, argv) -> bool:
    """``option`` (or an abbreviation argparse accepts, or ``option=VALUE``) is among the words of ``argv`` (for
    options whose default is a value, e.g. ``--plot-dpi``: given or not is not in the namespace)."""
    for word in argv:
        if word == "--":
            return False
        name = word.split("=", 1)[0]
        if name.startswith("--") and len(name) > 2 and option.startswith(name) and (
                name == option or len(name) > option.rfind("-") + 1):
            return True
    return False


def _typed_action(a: argparse.Action, argv) -> bool:
    """One of ``a``'s option strings is among the words of ``argv`` (``-n 5``, ``-n5``, ``--per-class=5``, an
    abbreviation); a positional counts as typed."""
    if not a.option_strings:
        return True
    for s in a.option_strings:
        if s.startswith("--"):
            if _typed(s, argv):
                return True
        elif any(w == s or (w.startswith(s) and not w.startswith("--")) for w in argv):
            return True
    return False


def _skip_final_collection() -> None:
    """At the end of ``ncproofs run`` as a program: move the live objects out of the garbage collector's
    generations (``gc.freeze``), so that the collections of the interpreter's shutdown do not traverse the
    millions of objects of sympy, scipy and the claims' results again (0.3-0.45 s wall after the reports
    were written, measured on 2 cores; 0.05-0.08 s frozen). The reports and the cache entries are written
    and closed, standard output is flushed; the process's memory goes back to the system as before."""
    import gc

    gc.freeze()


def _internal_error(exc: BaseException, where: str, debug: bool, args) -> int:
    import traceback

    tb = traceback.format_exc()
    if debug:
        sys.stderr.write(tb)
    print(f"ncproofs: internal error in {where}: {type(exc).__name__}: {_one_line(exc)} "
          "(rerun with --debug for the traceback)", file=sys.stderr)
    if getattr(args, "json", False) is True and not isinstance(exc, OSError):
        from proofs_check.envelope import envelope

        print(json.dumps(envelope(getattr(args, "command", None) or "ncproofs", {
            "verdict": "ERROR", "reason": f"internal error: {type(exc).__name__}: {_one_line(exc)}", "traceback": tb})))
    return 1


class _StdoutGuard:
    """sys.stdout during a command: remembers an OS error writing it (``> /dev/full``, a full disk), so that
    it is reported as one line about standard output instead of an internal error; delegates the rest."""

    def __init__(self, stream):
        self.stream = stream
        self.failed: OSError | None = None

    def write(self, text):
        try:
            return self.stream.write(text)
        except OSError as exc:
            self.failed = exc
            raise

    def flush(self):
        try:
            return self.stream.flush()
        except OSError as exc:
            self.failed = exc
            raise

    def drop(self) -> None:
        """Send what is still buffered to /dev/null (fd 1 replaced), so the flush at exit adds no message."""
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
            self.stream.flush()
        except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout (tests): nothing to drop
            pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _os_error_line(exc: OSError) -> str | None:
    """One line for an OS error on a path (the user's file system: a name too long, a full disk, no
    permission, a read-only folder); ``None`` when the error names no path (a defect)."""
    path = exc.filename
    if path is None or not exc.strerror:
        return None
    shown = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    if len(shown) > 80:
        shown = shown[:40] + "…" + shown[-20:]
    return f"{shown}: {exc.strerror} (errno {exc.errno})"


#: ``run --jobs`` at most (processes forked for the claims)
MAX_JOBS = 64


def _jobs_option(text: str):
    """``run --jobs``: ``auto`` or an integer (its range is checked with the other options)."""
    from theory._validate import TEXT_BLANKS, int_from_text

    if text.strip(TEXT_BLANKS).lower() == "auto":
        return "auto"
    try:
        return int_from_text(text)
    except InputError:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, {MAX_JOBS}] or 'auto', got {text!r}"[:200]) from None


#: Largest integer any option accepts: integers are stored as int64 (seeds, counts, sizes).
INT_OPTION_MAX = 2 ** 63 - 1


def _option_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """dest -> the option as the user types it (``lam`` -> ``--lambda``), over every subcommand."""
    names: dict[str, str] = {}
    stack = [parser]
    while stack:
        p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend(a.choices.values())
            elif a.option_strings:
                names.setdefault(a.dest, max(a.option_strings, key=len))
            elif a.dest not in names and a.dest != "help":  # a positional: as the usage line shows it (FEATURES)
                names[a.dest] = str(a.metavar or a.dest.upper())
    return names


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser | None:
    """The (sub)parser of the command that ran (``solve ufm-ce``, ``measure``), or ``None``."""
    p = parser
    for word in (getattr(args, "command", None), getattr(args, "family", None)):
        if word is None:
            break
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            return None
        p = subs[0].choices[word]
    return None if p is parser else p


#: the subject of a message from the validation helpers: ``k (classes) must ...``, ``lambda_w and lambda_h must
#: ...``, ``counts[1] must ...``, ``labels: ...``
_SUBJECT = re.compile(r"(?P<subject>[A-Za-z_][\w\[\]]*(?: \([\w ,-]+\))?(?: and [A-Za-z_][\w\[\]]*)*) "
                      r"(?:must|has|have|is|are|needs|applies)\b"
                      r"|(?P<single>[A-Za-z_]\w*):")


def _name_the_options(line: str, p: argparse.ArgumentParser | None, argv=None) -> str:
    """``line`` with the options it is about, as the user types them, in front (``argument --lambda-w: lambda_w
    must be >= 0, got -1.0``), when it names them only by the API's parameter names (the instance dataclasses
    and the solvers validate their own arguments; their messages name the parameter, e.g. ``k (classes)``). Only
    options the user typed (``argv``, when given) are named: a parameter the command derived from other options
    (deep-ufm's ``counts`` from ``-k`` and ``-n``) is not blamed on an option of the same name. A line that
    already names one of the command's options, or whose subject is no option of the command (a parameter of a
    sweep config, a file's member), is returned as it is."""
    if p is None:
        return line
    acts = [a for a in p._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", line) for a in acts for s in a.option_strings):
        return line
    m = _SUBJECT.match(line)
    if not m:
        return line
    by_name: dict[str, argparse.Action] = {}
    for a in acts:
        names = [a.dest] + [s.lstrip("-").replace("-", "_") for s in a.option_strings]
        for n in names:
            by_name.setdefault(n, a)
    found: list[argparse.Action] = []
    for word in re.findall(r"[A-Za-z_]\w*", m.group("subject") or m.group("single")):
        a = by_name.get(word)
        if a is not None and a not in found and (argv is None or _typed_action(a, argv)):
            found.append(a)
    if not found:
        return line
    shown = " and ".join("/".join(a.option_strings) if a.option_strings else str(a.metavar or a.dest.upper())
                         for a in found)
    return f"argument {shown}: {line}"


def _non_finite_option(args: argparse.Namespace, names: dict[str, str] | None = None) -> str | None:
    """A NaN or infinite number in any option is bad input for every command (no option of
    ncproofs means "unbounded" by inf), as is an integer beyond int64 or a negative seed: the
    message names the option."""
    import math

    for name, value in vars(args).items():
        vals = value if isinstance(value, (list, tuple)) else [value]
        opt = (names or {}).get(name) or f"--{name.replace('_', '-')}"
        for v in vals:
            if isinstance(v, str) and "\x00" in v:  # os.stat & co. raise ValueError("embedded null byte")
                return f"{opt} must not contain a NUL character, got {v!r}"[:300]
            if isinstance(v, float) and not math.isfinite(v):
                return f"{opt} must be a finite number, got {v}"
            if isinstance(v, int) and not isinstance(v, bool):
                if abs(v) > INT_OPTION_MAX:
                    return f"{opt} must be an integer of at most 2^63 - 1 in magnitude, got {v}"
                if "seed" in name and v < 0:
                    return f"{opt} must be a non-negative integer, got {v}"
    return None


#: a numpy scalar's repr (``np.float32(0.5)``, ``np.int64(3)``, ``np.True_``) in a message: the number alone
_NUMPY_REPR = re.compile(r"\bnp\.(?:float|int|uint|complex|longdouble|bool)[0-9_]*\(([^()]*)\)|\bnp\.(True|False)_")


def _plain_numbers(text: str) -> str:
    """Messages show numbers as the user typed them, not numpy reprs (numpy >= 2 prints np.float32(0.5))."""
    return _NUMPY_REPR.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def _one_line(exc: BaseException, limit: int = 600) -> str:
    """One line (whitespace collapsed), at most ``limit`` characters: budget messages give the estimate, the
    limit and the option that raises it (about 400 characters), so 300 cut the option off."""
    text = _plain_numbers(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flint_available() -> bool:
    """python-flint importable; otherwise one line saying how to install it (the caller exits 2)."""
    import importlib.util

    if importlib.util.find_spec("flint") is None:
        print('ncproofs: error: --rigorous needs python-flint: pip install "ncproofs[rigorous]"', file=sys.stderr)
        return False
    return True


def _list_command(args) -> int:
    """``ncproofs list``: the claims (id, provenance, check counts from a report, source)."""
    import os

    from proofs_check import registry
    from theory._validate import InputError

    claims = registry.select(registry.all_claims(), args.only, strict=True)
    src = args.counts_from or ("ncproofs-report.json" if os.path.isfile("ncproofs-report.json") else None)
    counts = None
    if src:
        try:
            counts = registry.counts_from_report(src)
        except InputError as exc:
            if args.counts_from:
                raise InputError(f"--counts-from: {str(exc).removeprefix('report: ')}") from None
            src = None  # an unreadable default report is ignored, an explicit one is an error
    rows = registry.listing(claims, counts)
    if args.json:
        from proofs_check.envelope import envelope

        print(json.dumps(envelope("list", {
            "counts_from": src,
            "claims": [{**{k: r[k] for k in ("id", "aliases", "family", "source", "provenance", "statement")},
                        "independent_checks": r["independent_checks"],
                        "consistency_checks": r["consistency_checks"]} for r in rows]}), indent=2))
    else:
        w = max((len(c.id) for c in claims), default=10)
        for r in rows:
            was = f"  (former id: {', '.join(r['aliases'])})" if r["aliases"] else ""
            print(f"{r['id']:<{w}}  {r['provenance']:<13}  {r['checks']:<34}  {r['source']}{was}")
        print(f"{len(claims)} claims" + (f"; check counts from {src}" if src else
                                         "; check counts: run `ncproofs run` first (or pass --counts-from)"))
    return 0


def _dispatch(parser, args, smap, tmap, emap) -> int:
    from proofs_check import registry

    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "list":
        return _list_command(args)
    if args.command == "run":
        from proofs_check.outputs import check_output_path
        from proofs_check.runner import run_claims, summary_table, write_reports

        from proofs_check.outputs import check_distinct_outputs

        check_distinct_outputs(("--report", args.report), ("--json", args.json_path), ("--html", args.html))
        check_output_path(args.report, "--report")  # before any claim runs
        check_output_path(args.json_path, "--json")
        html_report.check_html_path(args.html)

        claims = registry.select(registry.all_claims(), args.only, strict=True)
        if not claims:
            raise UsageError(f"--only {args.only}: no claim matches (see `ncproofs list`)")
        if args.rigorous and not _flint_available():  # before any claim runs
            return 2
        from proofs_check import runcache
        from proofs_check.runner import default_workers

        if args.full and args.profile == "quick":  # the last one silently won
            raise UsageError("--full and --profile quick contradict each other: give one of them")
        profile = "full" if args.full else (args.profile or "quick")
        jobs = default_workers(len(claims)) if args.jobs in (None, "auto") else args.jobs
        if not 1 <= jobs <= MAX_JOBS:  # --jobs 100000 forked one process per claim
            raise UsageError(f"--jobs must be in [1, {MAX_JOBS}], got {jobs}")
        cache = None if args.no_cache or not runcache.enabled_by_env() else runcache.RunCache()
        if args.clear_cache:
            runcache.RunCache().clear()
        run = run_claims(claims, RunContext(profile, args.seed, args.rigorous), progress=not args.quiet,
                         workers=jobs, cache=cache)
        print(summary_table(run))
        write_reports(run, args.report or None, args.json_path or None)
        if args.html:
            html_report.write_run_html(run, args.html)
        written = [p for p in (args.report, args.json_path, args.html) if p]
        if written:
            print("reports: " + ", ".join(written))
        return run.exit_status_for(args.fail_on)
    if args.command == "solve":
        saved = getattr(args, "report", None)
        if saved is not None and not args.rigorous:
            print("ncproofs: error: solve REPORT.json: re-judging a saved report needs --rigorous", file=sys.stderr)
            return 2
        if args.family is None and saved is None:
            raise UsageError("solve needs a family: " + ", ".join(smap))
        if getattr(args, "rigorous", False) and not _flint_available():  # before any work
            return 2
        if not getattr(args, "plot", None):  # --plot-size / --plot-dpi alone drew nothing and said nothing
            given = [o for o in ("--plot-size", "--plot-dpi") if _typed(o, getattr(args, "_argv", ()))]
            if given:
                raise UsageError(f"{' and '.join(given)} {'need' if len(given) > 1 else 'needs'} --plot PATH "
                                 "(the figure they size)")
        if getattr(args, "plot", None):
            # the options first (bad input is named whether or not the extra is installed), then the extra,
            # all before an expensive solve
            plots.check_plot_path(args.plot)
            plots.check_plot_pixels(getattr(args, "plot_size", None), getattr(args, "plot_dpi", None))
            plots.check_plot_available()
        html_report.check_html_path(args.html)
        from proofs_check.outputs import check_distinct_outputs

        check_distinct_outputs(("--plot", getattr(args, "plot", None)), ("--html", args.html))
        if saved is not None:  # a saved report, read back and re-judged (rigorous.apply on its dict)
            from proofs_check import rigorous

            report = rigorous.read_saved_report(saved, known_families=set(smap))
            cmd = smap.get(report["family"])
            out = rigorous.apply_saved(report, saved)
        else:
            cmd = smap[args.family]
            res = cmd.run(args)  # a live SolveReport (families with a rigorous recipe) or the schema dict
            if getattr(args, "rigorous", False):
                from proofs_check import rigorous

                out = rigorous.apply(res)  # the live report: its candidate bounded, no second solve
            else:
                out = res.to_dict() if isinstance(res, SolveReport) else clean(res)
        plots.maybe_plot(args, out)
        if args.html:
            html_report.write_solve_html(out, args.html)
            print(f"report: {args.html}", file=sys.stderr)
        if args.json:
            from proofs_check.envelope import envelope

            out = envelope("solve", out)
            text = json.dumps(out, separators=(",", ":"), allow_nan=False)
            # indented for reading; compact when large (k = 1000 cosines: 31 MB indented, 20 MB compact)
            print(json.dumps(out, indent=2, allow_nan=False) if len(text) < 1_000_000 else text)
        else:
            print((getattr(cmd, "render", None) or render_solve)(out))
            if getattr(args, "rigorous", False):
                from proofs_check import rigorous

                print(rigorous.render_line(out))
        return 1 if out.get("verdict") in ("REFUTED", "ERROR") else 0
    if args.command == "table":
        if args.family is None:
            raise UsageError("table needs a family: " + ", ".join(tmap))
        from proofs_check.outputs import check_output_path, write_text_atomic

        if getattr(args, "rigorous", False):  # before any work
            from proofs_check.tables import rigorous_tables

            supported = rigorous_tables(tmap)
            if args.family not in supported:
                print(f"ncproofs: error: table {args.family} --rigorous: its rows are not solve reports of a family "
                      f"with a rigorous recipe; --rigorous supports: table {', table '.join(supported) or 'none'}",
                      file=sys.stderr)
                return 2
            if not _flint_available():
                return 2
        if args.format is None:  # `-o t.csv` wrote a Markdown table into t.csv
            from proofs_check.tables import format_for_output

            args.format = format_for_output(args.output)
        check_output_path(args.output, "--output")  # before the table is built
        text = render_from_args(tmap[args.family].build(args), args, family=args.family)
        if args.output:
            write_text_atomic(args.output, text)
        else:
            sys.stdout.write(text)
        return 0
    return emap[args.command].run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
