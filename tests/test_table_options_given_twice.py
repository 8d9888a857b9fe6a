"""`ncproofs table` options that name a column or a number twice are bad input (exit 2, one line naming the
option), never "the last one wins": before the fix `--sig 3,5` used 5, `--decimals gap=2,gap=3` used 3,
`--sig =3` was read as every column, and `--columns counts,tau,counts` wrote a csv with two `counts` headers
(docs/outputs.md)."""

from __future__ import annotations

import pytest

from proofs_check.cli import main
from proofs_check.tables import InputError, Table, parse_column_digits

SCL = ["table", "scl", "--counts", "3,3", "--tau", "1"]


@pytest.mark.parametrize("opt,value,needle", [("--sig", "3,5", "N is given twice"),
                                              ("--sig", "3,gap=2,gap=4", "column 'gap' is given twice"),
                                              ("--decimals", "gap=2,gap=3", "column 'gap' is given twice"),
                                              ("--decimals", "lambda = 2, lambda=3", "column 'lambda' is given twice"),
                                              ("--sig", "=3", "names no column"),
                                              ("--decimals", " =2", "names no column")])
def test_digit_options_given_twice_are_refused(capsys, opt, value, needle):
    rc = main(["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "0.01", "--format", "latex", opt, value])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and opt in err and len(err.strip().splitlines()) == 1


def test_parse_column_digits_keeps_the_valid_forms():
    assert parse_column_digits("4,gap=2") == {"*": 4, "gap": 2}
    assert parse_column_digits("gap=2, lambda=3") == {"gap": 2, "lambda": 3}
    assert parse_column_digits("3") == {"*": 3}
    with pytest.raises(InputError):
        parse_column_digits("2,2")


@pytest.mark.parametrize("cols", ["counts,tau,counts", "counts,1", "2,tau"])
def test_columns_named_twice_are_refused(capsys, cols):
    rc = main([*SCL, "--format", "csv", "--columns", cols])
    err = capsys.readouterr().err
    assert rc == 2 and "named twice" in err and "--columns" in err


def test_columns_distinct_still_select_in_order(capsys):
    assert main([*SCL, "--format", "csv", "--columns", "tau,counts"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["tau,counts", '1.0,"3,3"']
    t = Table(["a", "b", "c"], [[1, 2, 3]])
    assert t.select(["c", "1"]).columns == ["c", "a"]
    with pytest.raises(InputError):
        t.select(["a", "1"])
