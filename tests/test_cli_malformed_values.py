"""Malformed option values: one syntax for numbers in every option, refusals that name the option as typed.

The syntax (``ncproofs --help``, README "Commands"): an integer is an optional sign and the ASCII digits 0-9; a
real number is a finite decimal number (ASCII, optional fraction and exponent); ASCII blanks around a value or a
list entry are ignored; a list has no empty entry. Python's int() and float() accept more (``3_0`` is 30, ``٣`` is
3, ``１`` is 1, ``inf``/``nan``): those values were taken silently before.

Contract of every refusal checked here: exit status 2, exactly one line on stderr, naming the option as the user
types it (``-k`` / ``--classes``, not only the API's ``k``) and the constraint; never a traceback or "internal
error". Every call runs in-process (tests/fuzz_cli.py ``call``), or parses only (no solve runs).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import fuzz_cli as F  # noqa: E402

from proofs_check import cli  # noqa: E402
from proofs_check.commands import float_list, int_list  # noqa: E402
from theory._validate import (InputError, as_finite_array, as_int_tuple, as_labels, float_from_text,  # noqa: E402
                              int_from_text)

INT64_MAX = 2 ** 63 - 1


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    files = F.make_files(root / "in")
    cwd = root / "cwd"
    cwd.mkdir()
    return files, cwd


def _one_line(o: F.Outcome) -> str:
    assert o.problem is None, (o.problem, o.argv, o.err[-600:])
    assert o.rc == 2, (o.argv, o.rc, o.out[-300:], o.err[-300:])
    lines = [ln for ln in o.err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert "Traceback" not in o.err and "internal error" not in o.err
    return lines[0]


def _refused(argv, cwd, *needles) -> str:
    line = _one_line(F.call(list(argv), cwd))
    for n in needles:
        assert n in line, (n, line)
    return line


# ---- the syntax, value by value ------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("3", 3), ("+3", 3), ("-3", -3), (" 3 ", 3), ("\t3\n", 3), ("-0", 0), ("007", 7),
    ("9223372036854775807", INT64_MAX), ("-9223372036854775807", -INT64_MAX),
])
def test_integers_accepted(text, value):
    assert int_from_text(text) == value


@pytest.mark.parametrize("text", [
    "3_0", "1_000", "٣", "３", "१", "0x10", "0o7", "0b1", "1e3", "3.0", "3.", "", " ", "+", "-", "--3", "+-3", "3 0",
    "inf", "nan", "abc", "3a", "\x003", "3\x00", "\u00a03", "3\u2003", "１",
])
def test_integers_refused(text):
    with pytest.raises(InputError, match=r"must be an integer \(an optional sign and the digits 0-9\)"):
        int_from_text(text, "--classes")


@pytest.mark.parametrize("text", ["9223372036854775808", "-9223372036854775808", str(10 ** 30), "1" * 5000])
def test_integers_beyond_int64_refused_without_parsing_thousands_of_digits(text):
    with pytest.raises(InputError, match=r"--dim must be an integer of at most 2\^63 - 1 in magnitude"):
        int_from_text(text, "--dim")


@pytest.mark.parametrize("text,value", [
    ("0.5", 0.5), ("+0.5", 0.5), ("-0.5", -0.5), (".5", 0.5), ("2.", 2.0), ("1e-3", 1e-3), ("1E+3", 1000.0),
    (" 3 ", 3.0), ("-0", 0.0), ("1e308", 1e308), ("5e-324", 5e-324), ("1e-400", 0.0), ("007.5", 7.5),
])
def test_reals_accepted(text, value):
    assert float_from_text(text) == value


@pytest.mark.parametrize("text,constraint", [
    ("inf", "finite"), ("-inf", "finite"), ("Infinity", "finite"), ("nan", "finite"), ("-NaN", "finite"),
    ("1e400", "finite"), ("-1e309", "finite"),
    ("1_0", "decimal number"), ("١.٥", "decimal number"), ("０.５", "decimal number"), ("0x1p3", "decimal number"),
    ("", "decimal number"), ("e3", "decimal number"), ("1e", "decimal number"), (".", "decimal number"),
    ("1,5", "decimal number"), ("1.5.2", "decimal number"), ("\u00a00.5", "decimal number"),
])
def test_reals_refused(text, constraint):
    with pytest.raises(InputError, match=constraint) as exc:
        float_from_text(text, "--tau")
    assert str(exc.value).startswith("--tau must be")


@pytest.mark.parametrize("text", ["", ",", "2,,3", "2,", ",2", " , ", "2, ,3"])
def test_list_with_an_empty_entry_refused(text):
    for parse in (int_list, float_list):
        with pytest.raises(argparse.ArgumentTypeError, match="no empty entry"):
            parse(text)


def test_list_entries_follow_the_syntax():
    assert int_list(" 2 , +3,4 ") == [2, 3, 4]
    assert float_list("0.5, 1e-3") == [0.5, 1e-3]
    with pytest.raises(argparse.ArgumentTypeError, match=r"entry 2 \('3_0'\) must be an integer"):
        int_list("2,3_0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"entry 3 \('٣'\)"):
        int_list("2,3,٣")
    with pytest.raises(argparse.ArgumentTypeError, match=r"entry 1 \('1_0'\) must be a finite decimal number"):
        float_list("1_0,2")


# ---- every numeric option of every command uses the syntax ---------------------------------------------

@functools.lru_cache(maxsize=1)
def _numeric_actions() -> tuple:
    out = []
    for cmd, p in F.commands().items():
        for a in F.option_actions(p):
            if a.option_strings and a.nargs != 0 and not a.choices and a.type in (int, float):
                out.append((cmd, p, a))
    return tuple(out)


def test_every_type_int_and_type_float_option_parses_strictly():
    """argparse looks ``type=int`` / ``type=float`` up in the parser's registry (cli._Parser registers the strict
    parsers), so a family that adds an option is covered without naming a parser: every such option refuses what
    Python's int()/float() would take."""
    acts = _numeric_actions()
    assert len(acts) > 100, len(acts)  # every command's options, not a handful
    for cmd, p, a in acts:
        conv = p._registry_get("type", a.type, a.type)
        for text in ("3_0", "٣", "１"):
            with pytest.raises(argparse.ArgumentTypeError):
                conv(text)
        assert conv(" 3 ") == 3
        if a.type is int:
            for text in ("3.0", "1e3", "0x10"):
                with pytest.raises(argparse.ArgumentTypeError):
                    conv(text)


@functools.lru_cache(maxsize=1)
def _cli_parser() -> argparse.ArgumentParser:
    return cli.build_parser()[0]


def _parse(argv: list[str]):
    """Parse only (nothing runs): (namespace or None, exit status, stderr)."""
    parser = _cli_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return parser.parse_args(argv), 0, err.getvalue()
        except SystemExit as exc:
            return None, exc.code, err.getvalue()


# ---- through the CLI: exit 2, one line, the option as typed --------------------------------------------

UFM = ["solve", "ufm-ce", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"]


@pytest.mark.parametrize("argv,needles", [
    (UFM + ["-k", "3_0"], ["-k", "must be an integer", "'3_0'"]),
    (UFM + ["-k", "٣"], ["-k", "must be an integer"]),
    (UFM + ["--classes", "１"], ["--classes", "must be an integer"]),
    (UFM + ["-k", "3.0"], ["-k", "must be an integer"]),
    (UFM + ["-k", "1e3"], ["-k", "must be an integer"]),
    (UFM + ["-k", "0x10"], ["-k", "must be an integer"]),
    (UFM + ["-k", ""], ["-k", "must be an integer"]),
    (UFM + ["-k", str(10 ** 30)], ["-k", "2^63 - 1"]),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-h", "1e-2", "--lambda-w", "1_0"],
     ["--lambda-w", "finite decimal number"]),
    (["solve", "scl", "--counts", "2,,3", "--tau", "0.5", "--dim", "3"], ["--counts", "no empty entry"]),
    (["solve", "scl", "--counts", "2,3,", "--tau", "0.5", "--dim", "3"], ["--counts", "no empty entry"]),
    (["solve", "scl", "--counts", ",", "--tau", "0.5", "--dim", "3"], ["--counts", "no empty entry"]),
    (["solve", "scl", "--counts", "2,3_0", "--tau", "0.5", "--dim", "3"], ["--counts", "'3_0'"]),
    (["solve", "ufm", "--loss", "ce", "--counts", "2,,3", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
     ["--counts", "no empty entry"]),
    (["solve", "ufm", "--loss", "ce", "--counts", "3_0,2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
     ["--counts", "'3_0'"]),
    (["run", "--jobs", "3_0"], ["--jobs", "'3_0'"]),
    (["run", "--seed", "٣"], ["--seed", "must be an integer"]),
    (UFM + ["-k", "3", "--max-memory", "1_0G"], ["--max-memory", "'1_0G'"]),
    (UFM + ["-k", "3", "--max-memory", "٣G"], ["--max-memory"]),
    (UFM + ["-k", "3", "--plot", "x.png", "--plot-dpi", "1_00"], ["--plot-dpi", "'1_00'"]),
    (["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "1e-2", "--decimals", "3_0"], ["--decimals"]),
    (["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "1e-2", "--sig", "k=٣"], ["--sig"]),
    (["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "1e-2", "--columns", "k,,value"],
     ["--columns", "no empty entry"]),
    (["table", "ufm", "--loss", "ce", "--classes", "3,,5", "--lambda", "1e-2"], ["--classes", "no empty entry"]),
    (["table", "scl", "--counts", "2,2", "--tau", "0.5,"], ["--tau", "no empty entry"]),
    (["batching", "--counts", "2,2", "--batches", "0,,1;2,3", "--dim", "2"], ["--batches", "empty entry"]),
    (["batching", "--counts", "2,2", "--batches", "0,1;2,3_0", "--dim", "2"], ["--batches", "digits 0-9"]),
    (["measure", "X.npy", "--batch-size", "1_000"], ["--batch-size", "must be an integer"]),
    (["measure", "X.npy", "--tau", "0x1p3"], ["--tau", "decimal number"]),
    (["sweep", "c.toml", "--workers", "1e3"], ["--workers", "must be an integer"]),
    (["sweep", "c.toml", "--connect-timeout", "1_0"], ["--connect-timeout", "decimal number"]),
])
def test_malformed_values_are_refused_naming_the_option(zoo, argv, needles):
    files, cwd = zoo
    _refused(argv, cwd, *needles)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_non_finite_reals_are_refused_after_parsing(zoo, value, capsys):
    """inf/nan (and 1e400, which float() reads as inf) pass argparse and are refused by the check of every option
    after parsing: main returns 2 (as it always did for these values) with one line naming the option."""
    files, cwd = zoo
    argv = ["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-h", "1e-2", f"--lambda-w={value}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lambda-w must be a finite number" in err, err


@pytest.mark.parametrize("argv,needles", [
    # the instances validate their own parameters and name them by the API's names; the CLI adds the option
    (UFM + ["-k", "1"], ["-k", "--classes", "k (classes) must be >= 2"]),
    (UFM + ["-k", "-3"], ["-k", "must be >= 2"]),
    (["solve", "ufm-ce", "-k", "3", "-n", "0", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
     ["-n", "must be >= 1"]),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-h", "1e-2", "--lambda-w=-1"],
     ["--lambda-w", "lambda_w must be >= 0"]),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-h", "1e-2", "--lambda-w", "0"],
     ["--lambda-w", "--lambda-h", "must be > 0"]),
    (["solve", "scl", "--counts", "2,0", "--tau", "0.5", "--dim", "3"], ["--counts", "counts[1] must be >= 1"]),
    (["solve", "scl", "--counts", "2,2", "--tau", "0", "--dim", "3"], ["--tau", "must be > 0"]),
    (["solve", "scl", "--counts", "2,2", "--tau=-0.0", "--dim", "3"], ["--tau", "must be > 0"]),
    (["solve", "ntk", "--classes", "0", "--per-class", "2"], ["--classes", "must be >= 2"]),
    (["solve", "ntk", "--classes", "2", "--per-class", "2", "--mean-weight=-1"], ["--mean-weight", "e-zero"]),
    (["solve", "deep-ufm", "-L", "0", "-k", "2", "-n", "1", "-D", "2", "--lambda", "0.01"], ["-L", "must be >= 1"]),
    (["table", "scl", "--counts", "2,2", "--tau", "-1"], ["--tau", "must be > 0"]),
])
def test_out_of_range_values_name_the_option_as_typed(zoo, argv, needles):
    files, cwd = zoo
    _refused(argv, cwd, *needles)


@pytest.mark.parametrize("argv,needles,absent", [
    # deep-ufm builds its counts from -k and -n: the limit names them, never --counts (not typed)
    (["solve", "deep-ufm", "-L", "1", "-k", "2", "-n", "100000000", "-D", "2", "--lambda", "0.01"],
     ["--classes/-k x --per-class/-n", "at most 10000000 samples"], "--counts"),
    (["table", "deep-ufm", "--layers", "1", "--classes", "2", "--lambda", "0.01", "--per-class", "100000000"],
     ["--per-class", "at most 10000000 samples"], "counts:"),
    (["solve", "deep-ufm", "-L", "1", "--counts", "2,100000000", "-D", "2", "--lambda", "0.01"],
     ["--counts", "at most 10000000 samples"], "--per-class"),
    # ntk: N = C m is refused naming the options (the solver names C, m and N; C = 2^63 - 1 named the feature
    # dimension n = C + 1 first)
    (["solve", "ntk", "-C", "3", "-m", "400"], ["-C", "-m", "N = C m = 3 x 400 = 1200", "limit 1000"], "n (feature"),
    (["solve", "ntk", "--classes", "9223372036854775807", "--per-class", "2"], ["--classes", "--per-class"],
     "n (feature"),
    (["solve", "ntk", "--classes", "300", "--per-class", "400", "--loss", "ce"], ["--classes", "--per-class"],
     "n (feature"),
    # the solvers' feature-dimension limits, named by --feature-dim
    (["solve", "ntk", "--feature-dim", "100000000"], ["--feature-dim", "exceeds the limit 256"], "argument --classes"),
    (["solve", "ntk", "--feature-dim", "100000000", "--loss", "ce"], ["--feature-dim", "<= 256"], "--classes"),
    # crh's work budget (steps=..., runs=...): named by the options that size the work
    (["solve", "crh", "--quick", "--steps", "100000000", "--null-draws", "10"],
     ["--steps", "--null-draws", "--weight-decay", "flop-equivalents"], "Traceback"),
    (["table", "crh", "--quick", "--steps", "100000000", "--null-draws", "10", "--weight-decays", "0.01"],
     ["--steps", "--weight-decays", "flop-equivalents"], "Traceback"),
])
def test_a_derived_parameter_is_not_blamed_on_an_option_not_typed(zoo, argv, needles, absent):
    files, cwd = zoo
    line = _refused(argv, cwd, *needles)
    assert absent not in line, line


def test_a_message_naming_no_option_of_the_command_is_left_as_it_is():
    p = cli._command_parser(cli.build_parser()[0], argparse.Namespace(command="solve", family="ufm-ce"))
    assert cli._name_the_options("k (classes) must be >= 2, got 1", p).startswith("argument --classes/-k: ")
    for line in ("parameters.k must be >= 2", "a worker process died", "--dim: d must be >= 1, got 0",
                 "the instance needs 3 GB"):
        assert cli._name_the_options(line, p) == line
    # only options the user typed are named
    assert cli._name_the_options("k (classes) must be >= 2, got 1", p, ["-n", "2"]) == "k (classes) must be >= 2, got 1"
    for typed in (["-k", "1"], ["-k1"], ["--classes=1"], ["--cla", "1"]):
        assert cli._name_the_options("k (classes) must be >= 2, got 1", p, typed).startswith("argument --classes/-k"), typed


# ---- hypothesis: numeric option strings -----------------------------------------------------------------

#: characters a fuzzed number is drawn from: ASCII digits and signs, the characters int()/float() also take
#: (underscore, other scripts' digits, unicode blanks), exponent and base letters, separators
NUMBER_CHARS = "0123456789+-._eExXbo ,\t" + "٣१３０\u00a0\u2003" + "inf" + "an"
NUMBER_TEXT = st.one_of(st.text(alphabet=NUMBER_CHARS, max_size=12),
                        st.sampled_from(["3_0", "٣", " 3 ", "+3", "0x10", "1e3", "3.0", "inf", "nan", "-0", "",
                                         "1e400", str(10 ** 30), ",", "2,,3", "2,"]))


def _spec_int(text: str):
    """The integer ``text`` spells under the documented syntax, or None (written from the rule, not the code)."""
    t = text
    while t and t[0] in " \t\r\n":
        t = t[1:]
    while t and t[-1] in " \t\r\n":
        t = t[:-1]
    sign, digits = (t[0], t[1:]) if t[:1] in ("+", "-") else ("+", t)
    if not digits or any(c not in "0123456789" for c in digits):
        return None
    v = int(digits) * (-1 if sign == "-" else 1)
    return v if abs(v) <= INT64_MAX else None


_HYP = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_HYP
@given(text=NUMBER_TEXT)
def test_integer_syntax_matches_its_specification(text):
    want = _spec_int(text)
    if want is None:
        with pytest.raises(InputError):
            int_from_text(text, "-k")
    else:
        assert int_from_text(text, "-k") == want


@_HYP
@given(text=NUMBER_TEXT)
def test_real_syntax_accepts_only_finite_ascii_decimals(text):
    try:
        v = float_from_text(text, "--tau")
    except InputError as exc:
        assert str(exc).startswith("--tau must be a finite"), str(exc)
        return
    core = text.strip(" \t\r\n")
    assert core.isascii() and "_" not in core and all(c in "0123456789+-.eE" for c in core), text
    assert np.isfinite(v) and v == float(core)


def _spec_real(text: str):
    """("ok", value) for a finite ASCII decimal number, ("non-finite", None) for inf / nan / 1e400 (taken by the
    parser, refused after it), ("bad", None) otherwise: written from the documented rule, not the code."""
    core = text
    while core and core[0] in " \t\r\n":
        core = core[1:]
    while core and core[-1] in " \t\r\n":
        core = core[:-1]
    try:
        v = float(core)
    except ValueError:
        return "bad", None
    if core and all(c in "0123456789+-.eE" for c in core):
        return ("ok", v) if np.isfinite(v) else ("non-finite", None)
    if core and all(c in "+-infatyINFATY" for c in core):  # inf, -Infinity, nan
        return "non-finite", None
    return "bad", None


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_numeric_option_strings_through_the_parser(data):
    """A drawn option of a drawn command gets a fuzzed string, parsed only (nothing runs): a value the syntax
    takes is the number it spells (the parse may still stop at a missing required option); any other value
    exits 2 with one stderr line naming the option."""
    cmd, p, a = data.draw(st.sampled_from(_numeric_actions()), label="option")
    text = data.draw(NUMBER_TEXT, label="text")
    ns, rc, err = _parse(list(cmd) + [f"{F.option_string(a)}={text}"])
    if a.type is int:
        want = _spec_int(text)
        kind = "bad" if want is None else "ok"
    else:
        kind, want = _spec_real(text)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if kind == "bad":
        assert ns is None and rc == 2, (text, ns)
        assert len(lines) == 1 and any(s in lines[0] for s in a.option_strings), (text, lines)
        return
    if ns is None:  # the value was taken; the parse stopped at the command's required options
        assert rc == 2 and len(lines) == 1 and "required" in lines[0], (text, lines)
        return
    value = getattr(ns, a.dest)
    if kind == "ok":
        assert value == want and type(value) is a.type, (text, value)
    else:
        assert not np.isfinite(value), (text, value)


# ---- the Python API --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,needle", [
    (np.array(["1.5", "2"]), "strings"),                      # numpy would parse the strings
    (["1.5", 2.0], "strings"),
    (np.array([True, False]), "booleans"),                    # numpy would cast them to 1.0 / 0.0
    (np.array([1 + 2j, 3]), "complex"),                       # numpy would drop the imaginary part (a warning)
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "dates"),
    ([10 ** 400, 1], "beyond the float64 range"),             # an OverflowError before
    (np.array([1.0, None], dtype=object), "real numbers only"),
    ("1,2", "numeric array"),
    (b"12", "numeric array"),
    ([[1.0], [1.0, 2.0]], "numeric array"),
    ([[np.nan, 1.0]], "finite"),
])
def test_as_finite_array_refuses_what_is_not_real_numbers(value, needle):
    with pytest.raises(InputError, match=needle) as exc:
        as_finite_array("H", value)
    assert str(exc.value).startswith("H ")


def test_as_finite_array_keeps_real_inputs():
    from fractions import Fraction

    np.testing.assert_array_equal(as_finite_array("H", [[1, 2], [3, 4]]), [[1.0, 2.0], [3.0, 4.0]])
    assert as_finite_array("H", np.ones(3, np.float32)).dtype == np.float64
    np.testing.assert_array_equal(as_finite_array("H", [Fraction(1, 2), 2]), [0.5, 2.0])
    np.testing.assert_array_equal(as_finite_array("H", np.array([3], dtype=np.uint64)), [3.0])


@pytest.mark.parametrize("labels,needle", [
    (np.array([0, 1, 2 ** 40]), "label 1099511627776 needs more classes than the 3 samples"),  # 8 TiB bincount
    (np.array([0, 1, 2 ** 63 - 1]), "label 9223372036854775807"),                             # OverflowError
    (np.array([0, 2 ** 63], dtype=np.uint64), "label 9223372036854775808"),
    ([0.0, 1e300], "label 1e+300"),                                                          # invalid cast
    ([-1e300, 0.0], "must be >= 0"),
    ([0, 2, 2], "class 1 is empty"),
    (np.array([True, False]), "integer class labels"),
])
def test_as_labels_refuses_before_counting(labels, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        as_labels("labels", labels)


@pytest.mark.parametrize("value,needle", [
    ("123", "got str '123'"),       # was the entries '1', '2', '3'
    (b"\x02\x03", "got bytes"),     # was the integers 2, 3
    ({2: 0, 3: 0}, "got dict"),     # was its keys
    ({2, 3}, "got set"),            # an arbitrary order
])
def test_as_int_tuple_refuses_text_mappings_and_sets(value, needle):
    with pytest.raises(InputError, match=needle):
        as_int_tuple("counts", value)
    assert as_int_tuple("counts", np.array([2, 3])) == (2, 3)


@pytest.mark.parametrize("call,name", [
    (lambda: __import__("theory.scl", fromlist=["x"]).SCLInstance("2,2", 0.5, 3), "counts"),
    (lambda: __import__("theory.scl", fromlist=["x"]).SCLInstance(b"\x02\x02", 0.5, 3), "counts"),
    (lambda: __import__("theory.scl", fromlist=["x"]).parse_batches_text("0,,1;2,3"), "batches[0]"),
    (lambda: __import__("theory.scl", fromlist=["x"]).parse_batches_text("0,1;2,3_0"), "batches[1]"),
    (lambda: __import__("theory.scl", fromlist=["x"]).parse_batches_text("0,1;٢,3"), "batches[1]"),
    (lambda: __import__("theory.geometry", fromlist=["x"]).classify_gram(np.array([["1", "0"], ["0", "1"]])), "G"),
])
def test_api_entry_points_refuse_malformed_values(call, name):
    with pytest.raises(InputError) as exc:
        call()
    assert name in str(exc.value), str(exc.value)


# ---- measure: options that would be ignored ----------------------------------------------------------------

def test_measure_container_keys_on_a_single_array_file_are_refused(zoo):
    files, cwd = zoo
    _refused(["measure", files["X"], "--labels", files["y"], "--features-key", "feats"], cwd,
             "--features-key", ".npy", "container")
    _refused(["measure", files["X"], "--labels", files["y"], "--labels-key", "y"], cwd, "--labels-key")


def test_measure_uint64_label_beyond_int64_is_shown_as_it_is(zoo, tmp_path):
    files, cwd = zoo
    y = tmp_path / "yu.npy"
    np.save(y, np.array([0] * 6 + [1] * 5 + [2 ** 63], dtype=np.uint64))
    _refused(["measure", files["X"], "--labels", str(y)], cwd, "--labels", "label 9223372036854775808")


# ---- options that contradict each other or would do nothing -------------------------------------------------

def test_run_full_and_profile_quick_contradict(zoo):
    files, cwd = zoo
    for argv in (["run", "--profile", "quick", "--full"], ["run", "--full", "--profile=quick"]):
        _refused(argv + ["--only", "geometry", "--quiet", "--report", "", "--json", ""], cwd, "--full",
                 "--profile quick")
    ns, rc, _ = _parse(["run", "--full", "--profile", "full"])
    assert rc == 0 and ns.full and ns.profile == "full"


@pytest.mark.parametrize("extra,needles", [
    (["--plot-dpi", "100"], ["--plot-dpi needs --plot"]),
    (["--plot-size", "4x3"], ["--plot-size needs --plot"]),
    (["--plot-size", "4x3", "--plot-dpi", "100"], ["--plot-size and --plot-dpi need --plot"]),
])
def test_plot_size_and_dpi_without_plot_are_refused(zoo, extra, needles):
    files, cwd = zoo
    _refused(["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2", *extra],
             cwd, *needles)


def test_sweep_summary_refuses_options_of_a_computing_sweep(zoo, tmp_path):
    files, cwd = zoo
    store = tmp_path / "s.sqlite"
    o = F.call(["sweep", files["cfg"], "--store", str(store), "--workers", "1", "--quiet"], cwd)
    assert o.problem is None and o.rc == 0, (o.rc, o.err[-400:])
    _refused(["sweep", files["cfg"], "--store", str(store), "--summary", "--workers", "2"], cwd,
             "--workers", "--summary")
    _refused(["sweep", files["cfg"], "--store", str(store), "--summary", "--scheduler", "tcp://x:1"], cwd,
             "--scheduler", "--summary")
    o = F.call(["sweep", files["cfg"], "--store", str(store), "--summary"], cwd)
    assert o.problem is None and o.rc == 0, (o.rc, o.err[-400:])


@pytest.mark.parametrize("kw,needle", [
    (dict(passes=True), "--passes must be auto, 1 or 2, got True"),  # True == 1 ran the one-pass route
    (dict(progress="yes"), "progress must be True or False"),
    (dict(keep_means="no"), "keep_means must be True or False"),    # 'no' is truthy
    (dict(keys="features"), "keys must be a dict"),                 # an AttributeError before
    (dict(keys={"features": 5}), "--features-key must be a non-empty array name"),
    (dict(keys={"feats": "x"}), "unknown array 'feats'"),
])
def test_measure_api_refuses_malformed_arguments(zoo, kw, needle):
    from proofs_check.measure import measure

    files, cwd = zoo
    with pytest.raises(InputError, match=re.escape(needle)):
        measure(files["X"], files["y"], **kw)


# ---- measure: hostile files for FEATURES / --labels / --weights ---------------------------------------------

@pytest.fixture(scope="module")
def mfiles(tmp_path_factory):
    import pickle

    d = tmp_path_factory.mktemp("measure_files")
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 3))
    y = np.repeat(np.arange(3), 4)
    f = {}

    def save(name, arr, **kw):
        np.save(d / name, arr, **kw)
        f[name] = str(d / name)

    save("X.npy", X)
    save("y.npy", y)
    save("obj.npy", X.astype(object), allow_pickle=True)
    save("yobj.npy", y.astype(object), allow_pickle=True)
    save("X3d.npy", X.reshape(2, 6, 3))
    save("X0.npy", np.zeros((0, 3)))
    save("y0.npy", np.zeros(0, dtype=np.int64))
    save("Xbe.npy", X.astype(">f8"))
    save("ybe.npy", y.astype(">i8"))
    save("Xc.npy", X.astype(complex))
    save("Wwide.npy", rng.standard_normal((3, 5)))
    save("W1d.npy", np.ones(3))
    save("yfrac.npy", y + 0.5)
    np.savez(d / "nokey.npz", foo=X)
    f["nokey.npz"] = str(d / "nokey.npz")
    with open(d / "pickled.npy", "wb") as fh:  # a pickle named .npy: never unpickled
        pickle.dump(X, fh)
    f["pickled.npy"] = str(d / "pickled.npy")
    (d / "data.pkl").write_bytes(pickle.dumps({"features": X, "labels": y}))
    f["data.pkl"] = str(d / "data.pkl")
    (d / "empty.npy").write_bytes(b"")
    f["empty.npy"] = str(d / "empty.npy")
    (d / "garbage.npy").write_bytes(bytes(range(256)))
    f["garbage.npy"] = str(d / "garbage.npy")
    (d / "folder").mkdir()
    f["folder"] = str(d / "folder")
    f["missing"] = str(d / "no" / "such.npy")
    return f


@pytest.mark.parametrize("features,labels,weights,needles", [
    ("obj.npy", "y.npy", None, ["FEATURES", "dtype object"]),
    ("X.npy", "yobj.npy", None, ["--labels", "dtype object"]),
    ("X.npy", "y.npy", "obj.npy", ["--weights", "dtype object"]),
    ("pickled.npy", "y.npy", None, ["FEATURES", "not a valid .npy"]),
    ("data.pkl", None, None, ["FEATURES", "unknown format '.pkl'"]),
    ("X3d.npy", "y.npy", None, ["FEATURES", "2-dimensional"]),
    ("X0.npy", "y.npy", None, ["FEATURES", "0 x 3"]),
    ("X.npy", "y0.npy", None, ["--labels", "empty"]),
    ("X.npy", "yfrac.npy", None, ["--labels", "integers"]),
    ("Xc.npy", "y.npy", None, ["FEATURES", "real numbers"]),
    ("X.npy", "y.npy", "Wwide.npy", ["--weights", "K x d"]),
    ("X.npy", "y.npy", "W1d.npy", ["--weights", "2-dimensional"]),
    ("nokey.npz", None, None, ["FEATURES", "no array 'features'"]),
    ("empty.npy", "y.npy", None, ["FEATURES", "not a valid .npy"]),
    ("X.npy", "garbage.npy", None, ["--labels", "not a valid .npy"]),
    ("X.npy", "folder", None, ["--labels", "is a directory"]),
    ("X.npy", "y.npy", "folder", ["--weights", "is a directory"]),
    ("X.npy", "missing", None, ["--labels", "no such file"]),
    ("X.npy", "y.npy", "missing", ["--weights", "no such file"]),
    ("X.npy", None, None, ["--labels", "needs the labels"]),
])
def test_measure_hostile_files_are_refused_naming_the_argument(zoo, mfiles, features, labels, weights, needles):
    files, cwd = zoo
    argv = ["measure", mfiles[features]]
    argv += ["--labels", mfiles[labels]] if labels else []
    argv += ["--weights", mfiles[weights]] if weights else []
    _refused(argv, cwd, *needles)


def test_measure_big_endian_files_give_the_native_numbers(mfiles):
    from proofs_check.measure import measure

    native = measure(mfiles["X.npy"], mfiles["y.npy"])["metrics"]
    swapped = measure(mfiles["Xbe.npy"], mfiles["ybe.npy"])["metrics"]
    assert native.keys() == swapped.keys() and native["nc1"] is not None
    for k, v in native.items():
        assert swapped[k] == v, (k, v, swapped[k])
