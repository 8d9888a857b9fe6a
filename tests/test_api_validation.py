"""Bad calls to the public Python API (theory.geometry, proofs_check.user, proofs_check.tables,
proofs_check.registry) raise InputError (a ValueError) or TypeError whose message names the
parameter: never an AttributeError, a numpy broadcasting error, a ZeroDivisionError, or a
silently accepted value."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import numpy as np
import pytest

from proofs_check import registry
from proofs_check.core import Check, Claim, Verdict
from proofs_check.tables import Table
from proofs_check.user import (Bounds, Measured, ProvenPoint, UserClaim, UserContext, classes, configure,
                               current_context, user_claim)
from theory import geometry as G
from theory._validate import InputError

NAN, INF = float("nan"), float("inf")
ETF3 = G.etf_gram(3)
H = G.simplex_etf(3, 4)[:, np.repeat(np.arange(3), 2)]  # d x N = 4 x 6, features in columns
Y = np.repeat(np.arange(3), 2)


def _claim(**over):
    kw = dict(id="t.c", statement="s", source="src", params={"k": st.integers(2, 4)}, predict=lambda p: 0.0,
              solve=lambda p: 0.0, atol=1e-9)
    kw.update(over)
    return UserClaim(**kw)


GOOD = _claim()
A_CLAIM = Claim("t.x", "fam", "s", "src", "derived", lambda ctx: [Check("c", Verdict.VERIFIED, "ok")])

# (id, call, the parameter name the message must contain)
BAD_CALLS = [
    # ---- theory.geometry: constructors --------------------------------------------------------
    ("simplex_etf k=1", lambda: G.simplex_etf(1), "k"),
    ("simplex_etf k=-3", lambda: G.simplex_etf(-3), "k"),
    ("simplex_etf k=2.5", lambda: G.simplex_etf(2.5), "k"),
    ("simplex_etf k='3'", lambda: G.simplex_etf("3"), "k"),
    ("simplex_etf k=None", lambda: G.simplex_etf(None), "k"),
    ("simplex_etf k=True", lambda: G.simplex_etf(True), "k"),
    ("simplex_etf d=0", lambda: G.simplex_etf(3, 0), "d"),
    ("simplex_etf d<k-1", lambda: G.simplex_etf(5, 3), "d"),
    ("simplex_etf r=-1", lambda: G.simplex_etf(3, r=-1), "r"),
    ("simplex_etf r=0", lambda: G.simplex_etf(3, r=0), "r"),
    ("simplex_etf r=nan", lambda: G.simplex_etf(3, r=NAN), "r"),
    ("simplex_etf r=inf", lambda: G.simplex_etf(3, r=INF), "r"),
    ("simplex_etf r='1'", lambda: G.simplex_etf(3, r="1"), "r"),
    ("simplex_etf k huge", lambda: G.simplex_etf(10**6), "k"),
    ("orthogonal_frame k=0", lambda: G.orthogonal_frame(0), "k"),
    ("orthogonal_frame d<k", lambda: G.orthogonal_frame(4, 3), "d"),
    ("orthogonal_frame r=-2", lambda: G.orthogonal_frame(3, r=-2.0), "r"),
    ("orthogonal_frame memory", lambda: G.orthogonal_frame(10**5, 10**5), "memory"),
    ("etf_gram k=1", lambda: G.etf_gram(1), "k"),
    ("etf_gram r=nan", lambda: G.etf_gram(3, NAN), "r"),
    ("centering_matrix k=0", lambda: G.centering_matrix(0), "k"),
    ("centering_matrix k=1.5", lambda: G.centering_matrix(1.5), "k"),
    ("centering_matrix memory", lambda: G.centering_matrix(10**6), "memory"),
    # ---- theory.geometry: Gram matrices and the classifier ---------------------------------------
    ("classify_gram tol=-1", lambda: G.classify_gram(ETF3, tol=-1), "tol"),
    ("classify_gram tol=nan", lambda: G.classify_gram(ETF3, tol=NAN), "tol"),
    ("classify_gram tol='x'", lambda: G.classify_gram(ETF3, tol="x"), "tol"),
    ("classify_gram zero_tol=-1", lambda: G.classify_gram(ETF3, zero_tol=-1.0), "zero_tol"),
    ("classify_gram non-square", lambda: G.classify_gram(np.ones((3, 4))), "G"),
    ("classify_gram 1-D", lambda: G.classify_gram(np.ones(3)), "G"),
    ("classify_gram empty", lambda: G.classify_gram(np.zeros((0, 0))), "G"),
    ("classify_gram nan entry", lambda: G.classify_gram(np.array([[1.0, NAN], [NAN, 1.0]])), "G"),
    ("classify_gram not symmetric", lambda: G.classify_gram(np.array([[1.0, 0.5], [-0.5, 1.0]])), "G"),
    ("classify_gram negative diagonal", lambda: G.classify_gram(-np.eye(3)), "G"),
    ("classify_gram string", lambda: G.classify_gram("gram"), "G"),
    ("classify_gram None", lambda: G.classify_gram(None), "G"),
    ("classify_gram ragged", lambda: G.classify_gram([[1.0, 0.0], [0.0]]), "G"),
    ("distance_to_etf non-square", lambda: G.distance_to_etf(np.ones((2, 3))), "G"),
    ("distance_to_of non-square", lambda: G.distance_to_of(np.ones((3, 2))), "G"),
    ("is_simplex_etf_gram tol=-1", lambda: G.is_simplex_etf_gram(ETF3, -1), "tol"),
    ("is_orthogonal_frame_gram tol=inf", lambda: G.is_orthogonal_frame_gram(np.eye(3), INF), "tol"),
    ("GeometryClass bad classification", lambda: G.GeometryClass("etf", 0.0, 1.0, 1e-3), "classification"),
    ("cosine_matrix 1-D", lambda: G.cosine_matrix(np.ones(3)), "vectors"),
    ("cosine_matrix empty", lambda: G.cosine_matrix(np.zeros((3, 0))), "vectors"),
    ("cosine_matrix inf", lambda: G.cosine_matrix(np.array([[1.0, INF]])), "vectors"),
    ("cosine_matrix string", lambda: G.cosine_matrix("abc"), "vectors"),
    ("cosine_matrix too many columns", lambda: G.cosine_matrix(np.ones((1, 8000))), "vectors"),
    # ---- theory.geometry: features and labels -------------------------------------------------------
    ("nc_metrics N x d layout", lambda: G.nc_metrics(H.T, Y), "transpose"),
    ("nc_metrics label count", lambda: G.nc_metrics(H, Y[:5]), "labels"),
    ("nc_metrics labels 2-D", lambda: G.nc_metrics(H, Y[None, :]), "labels"),
    ("nc_metrics labels float", lambda: G.nc_metrics(H, Y + 0.5), "labels"),
    ("nc_metrics labels negative", lambda: G.nc_metrics(H, Y - 1), "labels"),
    ("nc_metrics labels empty class", lambda: G.nc_metrics(H, np.array([0, 0, 2, 2, 3, 3])), "labels"),
    ("nc_metrics label huge", lambda: G.nc_metrics(H, np.array([0, 1, 2, 0, 1, 10**12])), "labels"),
    ("nc_metrics labels string", lambda: G.nc_metrics(H, "001122"), "labels"),
    ("nc_metrics labels None", lambda: G.nc_metrics(H, None), "labels"),
    ("nc_metrics H empty", lambda: G.nc_metrics(np.zeros((0, 6)), Y), "H"),
    ("nc_metrics H 3-D", lambda: G.nc_metrics(np.zeros((2, 3, 6)), Y), "H"),
    ("nc_metrics H nan", lambda: G.nc_metrics(np.where(H == H.max(), NAN, H), Y), "H"),
    ("nc_metrics H None", lambda: G.nc_metrics(None, Y), "H"),
    ("nc_metrics W transposed", lambda: G.nc_metrics(H, Y, np.ones((4, 3))), "W"),
    ("nc_metrics W wrong shape", lambda: G.nc_metrics(H, Y, np.ones((2, 4))), "W"),
    ("nc_metrics b wrong length", lambda: G.nc_metrics(H, Y, np.ones((3, 4)), np.ones(4)), "b"),
    ("nc_metrics b without W", lambda: G.nc_metrics(H, Y, None, np.ones(3)), "b"),
    ("nc_metrics center_w='yes'", lambda: G.nc_metrics(H, Y, center_w="yes"), "center_w"),
    ("nc_metrics NC4 memory budget", lambda: G.nc_metrics(np.zeros((1, 200000)), np.arange(200000) % 100000,
                                                          np.zeros((100000, 1))), "memory"),
    ("class_means N x d", lambda: G.class_means(H.T, Y), "transpose"),
    ("within_class_max_deviation labels", lambda: G.within_class_max_deviation(H, [0, 1]), "labels"),
    # ---- proofs_check.user --------------------------------------------------------------------------
    ("UserClaim id=''", lambda: _claim(id=""), "id"),
    ("UserClaim id=3", lambda: _claim(id=3), "id"),
    ("UserClaim statement=None", lambda: _claim(statement=None), "statement"),
    ("UserClaim source=''", lambda: _claim(source=" "), "source"),
    ("UserClaim params list", lambda: _claim(params=[1, 2]), "params"),
    ("UserClaim params value not a strategy", lambda: _claim(params={"k": 3}), "params['k']"),
    ("UserClaim solve not callable", lambda: _claim(solve=3.0), "solve"),
    ("UserClaim predict not callable", lambda: _claim(predict=1.0), "predict"),
    ("UserClaim predict missing", lambda: _claim(predict=None), "predict"),
    ("UserClaim requires not callable", lambda: _claim(requires="k >= 2"), "requires"),
    ("UserClaim kind typo", lambda: _claim(kind="lowerbound"), "kind"),
    ("UserClaim kind=None", lambda: _claim(kind=None), "kind"),
    ("UserClaim rtol=-1", lambda: _claim(rtol=-1), "rtol"),
    ("UserClaim atol=nan", lambda: _claim(atol=NAN), "atol"),
    ("UserClaim atol='0'", lambda: _claim(atol="0"), "atol"),
    ("UserClaim geometry_tol=inf", lambda: _claim(kind="geometry", geometry_tol=INF), "geometry_tol"),
    ("UserClaim no tolerance", lambda: _claim(atol=None), "rtol= and/or atol="),
    ("UserClaim provenance", lambda: _claim(provenance="made up"), "provenance"),
    ("UserClaim on_inconclusive", lambda: _claim(on_inconclusive="skip"), "on_inconclusive"),
    ("UserClaim max_examples=0", lambda: _claim(max_examples=0), "max_examples"),
    ("UserClaim max_examples=2.5", lambda: _claim(max_examples=2.5), "max_examples"),
    ("UserClaim examples dict", lambda: _claim(examples={"k": 3}), "examples"),
    ("UserClaim examples of ints", lambda: _claim(examples=[3]), "examples[0]"),
    ("UserClaim family=''", lambda: _claim(family=""), "family"),
    ("UserClaim tags str", lambda: _claim(tags="mine"), "tags"),
    ("UserClaim tags of ints", lambda: _claim(tags=[1]), "tags[0]"),
    ("UserClaim custom with predict", lambda: _claim(kind="custom"), "predict"),
    ("check_instance params list", lambda: GOOD.check_instance([("k", 3)]), "params"),
    ("check_instance params None", lambda: GOOD.check_instance(None), "params"),
    ("check_instance ctx", lambda: GOOD.check_instance({"k": 3}, ctx="quick"), "ctx"),
    ("checks ctx", lambda: GOOD.checks({"k": 3}, ctx={"seed": 1}), "ctx"),
    ("assert_instance record", lambda: GOOD.assert_instance({"k": 3}, record="yes"), "record"),
    ("as_claim no instances", lambda: GOOD.as_claim([]), "instances"),
    ("as_claim instances dict", lambda: GOOD.as_claim({"k": 3}), "instances"),
    ("as_claim instance not a dict", lambda: GOOD.as_claim([3]), "instances[0]"),
    ("as_test name", lambda: GOOD.as_test(name="not an identifier"), "name"),
    ("failure_message res", lambda: GOOD.failure_message("REFUTED", {"k": 3}), "res"),
    ("UserContext profile", lambda: UserContext(profile="fast"), "profile"),
    ("UserContext seed=-1", lambda: UserContext(seed=-1), "seed"),
    ("UserContext seed='1'", lambda: UserContext(seed="1"), "seed"),
    ("UserContext solver=''", lambda: UserContext(solver=""), "solver"),
    ("UserContext max_k=1", lambda: UserContext(max_k=1), "max_k"),
    ("configure max_k=1", lambda: configure(max_k=1), "max_k"),
    ("configure max_k=3.0", lambda: configure(max_k=3.0), "max_k"),
    ("configure seed='abc'", lambda: configure(seed="abc"), "seed"),
    ("configure profile", lambda: configure(profile="slow"), "profile"),
    ("configure solver=3", lambda: configure(solver=3), "solver"),
    ("classes min_value=0", lambda: classes(0, 5), "min_value"),
    ("classes max<min", lambda: classes(5, 3), "max_value"),
    ("classes float", lambda: classes(2.0, 5), "min_value"),
    ("Measured evidence list", lambda: Measured(1.0, [1, 2]), "evidence"),
    ("Bounds nothing", lambda: Bounds(), "Bounds"),
    ("Bounds feasible str", lambda: Bounds(feasible="1.3"), "feasible"),
    ("Bounds feasible empty", lambda: Bounds(feasible=[]), "feasible"),
    ("Bounds proven_lower str", lambda: Bounds(proven_lower="1"), "proven_lower"),
    ("ProvenPoint no proof", lambda: ProvenPoint(ETF3, how="x"), "unique=True or radius="),
    ("ProvenPoint how empty", lambda: ProvenPoint(ETF3, how="", unique=True), "how"),
    ("ProvenPoint radius<0", lambda: ProvenPoint(ETF3, how="x", radius=-1.0), "radius"),
    ("ProvenPoint radius nan", lambda: ProvenPoint(ETF3, how="x", radius=NAN), "radius"),
    ("ProvenPoint lipschitz=0", lambda: ProvenPoint(ETF3, how="x", radius=0.1, lipschitz=0), "lipschitz"),
    ("ProvenPoint gram non-square", lambda: ProvenPoint(np.ones((2, 3)), how="x", unique=True), "gram"),
    ("ProvenPoint unique='yes'", lambda: ProvenPoint(ETF3, how="x", unique="yes"), "unique"),
    ("user_claim bad kind", lambda: user_claim(id="x", statement="s", source="s", params={}, kind="eq",
                                               predict=lambda p: 0, atol=0), "kind"),
    ("user_claim decorating a non-callable", lambda: user_claim(id="x", statement="s", source="s", params={},
                                                                predict=lambda p: 0, atol=0)(3), "fn"),
    # ---- proofs_check.tables -----------------------------------------------------------------------
    ("Table columns str", lambda: Table("abc", []), "columns"),
    ("Table columns empty", lambda: Table([], []), "columns"),
    ("Table columns of ints", lambda: Table([1, 2], []), "columns[0]"),
    ("Table rows not a list", lambda: Table(["a"], "rows"), "rows"),
    ("Table row length", lambda: Table(["a", "b"], [[1, 2], [3]]), "rows[1]"),
    ("Table row a dict", lambda: Table(["a"], [{"a": 1}]), "rows[0]"),
    ("Table caption", lambda: Table(["a"], [[1]], caption=None), "caption"),
    ("Table latex_columns length", lambda: Table(["a", "b"], [], latex_columns=["$a$"]), "latex_columns"),
    ("Table digits=0", lambda: Table(["a"], [], digits=0), "digits"),
    ("Table digits=40", lambda: Table(["a"], [], digits=40), "digits"),
    ("Table digits=2.0", lambda: Table(["a"], [], digits=2.0), "digits"),
    ("Table meta", lambda: Table(["a"], [], meta=[1]), "meta"),
    ("Table.render format", lambda: Table(["a"], [[1]]).render("xlsx"), "format"),
    ("Table.render format None", lambda: Table(["a"], [[1]]).render(None), "fmt"),
    ("Table.render row appended later", lambda: _appended().render("md"), "rows[1]"),
    # ---- proofs_check.registry ----------------------------------------------------------------------
    ("select patterns int", lambda: registry.select([A_CLAIM], 3), "patterns"),
    ("select pattern not str", lambda: registry.select([A_CLAIM], ["ufm", 3]), "patterns[1]"),
    ("select empty pattern", lambda: registry.select([A_CLAIM], [""]), "patterns[0]"),
    ("select claims str", lambda: registry.select("ufm", None), "claims"),
    ("select claims of str", lambda: registry.select(["t.x"], None), "claims[0]"),
    ("get claim_id int", lambda: registry.get(3), "claim_id"),
    ("get unknown", lambda: registry.get("no.such-claim"), "claim_id"),
    ("check_counts str", lambda: registry.check_counts("VERIFIED"), "result"),
    ("check_counts dict without checks", lambda: registry.check_counts({"verdict": "VERIFIED"}), "result"),
    ("check_counts bad verdict", lambda: registry.check_counts({"checks": [{"verdict": "OK"}]}), "result"),
    ("counts_from_report missing file", lambda: registry.counts_from_report("/nonexistent/run.json"), "report"),
    ("counts_from_report not a report", lambda: registry.counts_from_report({"claims": 3}), "report"),
    ("listing counts list", lambda: registry.listing([A_CLAIM], counts=[1]), "counts"),
]


def _appended() -> Table:
    t = Table(["a", "b"], [[1, 2]])
    t.rows.append([3])
    return t


def test_enough_bad_calls():
    assert len(BAD_CALLS) >= 60
    assert len({c[0] for c in BAD_CALLS}) == len(BAD_CALLS)


@pytest.mark.parametrize("name,call,param", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_input_or_type_error_naming_the_parameter(name, call, param):
    old = current_context()
    try:
        with pytest.raises((InputError, TypeError)) as ei:
            call()
    finally:
        configure(max_k=old.max_k, solver=old.solver, profile=old.profile, seed=old.seed)
    assert param in str(ei.value), f"{name}: {type(ei.value).__name__}: {ei.value}"
    assert "\n" not in str(ei.value).strip(), "one line"


def test_unknown_claim_is_also_a_key_error():
    with pytest.raises(KeyError):
        registry.get("no.such-claim")


def test_layout_message_says_what_was_expected():
    with pytest.raises(InputError) as ei:
        G.nc_metrics(np.zeros((64, 1000)).T + np.arange(64), np.arange(1000) % 10)
    msg = str(ei.value)
    assert "H must be d x N (features in columns" in msg and "got 1000 x 64 with 1000 labels" in msg
    assert "did you pass N x d? transpose it" in msg


def test_good_calls_still_work():
    assert G.simplex_etf(3.0).shape == (3, 3)  # integral floats are accepted as sizes
    assert G.classify_gram(ETF3 + 1e-18 * np.arange(9).reshape(3, 3).T @ np.ones((3, 3))).classification \
        == "simplex-etf"
    assert registry.select([A_CLAIM], "t.x") == [A_CLAIM]  # one pattern as a string
    t = Table(["a"], [(1.5,)], digits=3)
    assert t.render("csv") == "a\n1.5\n"
    assert UserContext(seed=np.int64(3)).seed == 3
    assert math.isclose(G.etf_gram(3, 2)[0, 0], 4.0)
