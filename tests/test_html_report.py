"""The self-contained HTML report (`ncproofs run --html`, `ncproofs solve ... --html`).

Browser tests open the page in headless Chromium (Debian's chromium + chromium-driver, driven by
selenium: pip install selenium; never downloads a browser) and check that filtering works, that
the console shows no error and that a screenshot is a valid PNG. Skipped with a message where
chromium is absent outside CI.
"""

from __future__ import annotations

import os
import re
import shutil
import struct

import pytest

from proofs_check import html_report
from proofs_check.cli import main

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and os.path.exists(p)), None)
DRIVER = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver",
                           "/usr/lib/chromium/chromedriver") if p and os.path.exists(p)), None)
needs_browser = pytest.mark.skipif(
    (CHROMIUM is None or DRIVER is None) and not os.environ.get("CI"),
    reason="chromium/chromedriver not installed (apt-get install chromium chromium-driver; pip install selenium); "
           "required in CI")

FAMILIES = {"alpha": ["VERIFIED", "VERIFIED", "REFUTED"], "beta": ["INCONCLUSIVE", "NOT_APPLICABLE"],
            "gamma": ["VERIFIED", "ERROR", "VERIFIED", "VERIFIED"]}


def _run_dict(evidence_size: int = 3, families=FAMILIES) -> dict:
    claims = []
    for fam, verdicts in families.items():
        for i, v in enumerate(verdicts):
            claims.append({
                "id": f"{fam}.claim-{i}", "family": fam,
                "statement": f"statement {i} of {fam} <script>alert('x')</script>",
                "source": "Kini et al., ICLR 2024 (arXiv 2306.07960); docs/scl.md, Theorem 1" if fam == "alpha"
                else "a user's notes, 2025",
                "provenance": "derived" if i % 2 else "reconstructed", "verdict": v,
                "reason": f"reason {i} & <b>not bold</b>", "independent_checks": 1, "consistency_checks": 0,
                "seconds": 0.01, "key_numbers": {"c.lower_bound": 1.25, "c.gap": 3e-13},
                "checks": [{"name": "c", "verdict": v, "reason": "r", "independent": True,
                            "evidence": {"lower_bound": 1.25, "gap": 3e-13,
                                         "array": list(range(evidence_size)),
                                         "matrix": [[0.5] * 50 for _ in range(min(evidence_size, 400))]}}]})
    counts = {v: 0 for v in html_report.VERDICTS}
    for c in claims:
        counts[c["verdict"]] += 1
    return {"tool": "ncproofs", "profile": "quick", "seed": 0, "overall_verdict": "ERROR",
            "overall_reason": "1 claim errored", "counts": counts, "seconds": 1.5,
            "environment": {"python": "3.11"}, "claims": claims}


def _external_references(page: str) -> list[str]:
    """src/href attributes that are not data: URIs or in-page anchors, and url(...) in CSS."""
    bad = [m.group(0) for m in re.finditer(r"""(?:src|href)\s*=\s*['"](?!data:|#)[^'"]*""", page)]
    bad += re.findall(r"url\((?!\s*['\"]?data:)[^)]*\)", page)
    bad += re.findall(r"@import", page)
    return bad


def test_page_is_self_contained_and_escaped():
    page = html_report.run_report_html_fitted(_run_dict())
    assert not _external_references(page)
    assert "default-src 'none'" in page  # CSP: the browser may load nothing from outside
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page
    assert "<b>not bold</b>" not in page
    n = sum(len(v) for v in FAMILIES.values())
    assert page.count("<tbody class='claim'") == n
    for fam, verdicts in FAMILIES.items():
        for i in range(len(verdicts)):
            assert f"{fam}.claim-{i}" in page
    assert "kini2024symmetric" in page and "arXiv:2306.07960" in page  # the reference list
    assert "<svg" in page  # the verdict chart


def test_huge_evidence_is_truncated_under_5_mb():
    fams = {f"fam{j}": ["VERIFIED"] * 20 for j in range(10)}  # 200 claims, 200k-entry arrays each
    data = _run_dict(evidence_size=200_000, families=fams)
    page = html_report.run_report_html_fitted(data)
    size = len(page.encode("utf-8"))
    assert size < html_report.MAX_BYTES, size
    assert "more entries)" in page  # says that entries were left out
    assert page.count("<tbody class='claim'") == 200  # no claim is dropped


def test_truncate():
    t = html_report.truncate({"a": list(range(100)), "s": "x" * 50, "n": float("nan")}, 5, 10, 4)
    assert t["a"][:5] == [0, 1, 2, 3, 4] and t["a"][5] == "… (95 more entries)" and len(t["a"]) == 6
    assert t["s"].startswith("x" * 10) and "40 more characters" in t["s"]
    assert t["n"] is None


def test_cli_run_html_and_bad_path(tmp_path, capsys):
    out = tmp_path / "r.html"
    rc = main(["run", "--only", "ufm-ce", "--quiet", "--report", "", "--json", "", "--html", str(out)])
    assert rc == 0
    page = out.read_text()
    assert "ufm.ce.optimal-value" in page and "Overall verdict" in page
    assert not _external_references(page)
    assert not list(tmp_path.glob(".r.html.*"))  # no temp file left behind
    capsys.readouterr()
    # a bad path is refused before any claim runs (one line, exit 2)
    rc = main(["run", "--only", "ufm-ce", "--quiet", "--report", "", "--json", "",
               "--html", str(tmp_path / "missing" / "r.html")])
    err = capsys.readouterr()
    assert rc == 2 and "--html" in err.err and "ufm-ce" not in err.out


def test_cli_solve_html(tmp_path, capsys):
    out = tmp_path / "s.html"
    rc = main(["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.01", "--lambda-h", "0.01",
               "--html", str(out)])
    assert rc == 0
    page = out.read_text()
    assert "id='certificate'" in page and "lower_bound" in page
    pytest.importorskip("matplotlib")
    assert re.search(r"<img [^>]*src='data:image/png;base64,", page)
    assert not _external_references(page)


# ---- in a browser -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or DRIVER is None:
        pytest.fail("chromium/chromedriver missing in CI: apt-get install chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("selenium not installed (pip install selenium)")

    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager must never download anything
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600",
              "--disable-background-networking", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield drv
    drv.quit()


def _visible_rows(drv) -> int:
    return drv.execute_script(
        "return Array.prototype.filter.call(document.querySelectorAll('tbody.claim'),"
        "function(r){return r.offsetParent!==null && !r.hidden;}).length;")


def _errors(drv) -> list:
    return [e for e in drv.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def _png_ok(path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    assert w > 100 and h > 100


@needs_browser
def test_filtering_in_the_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    path = tmp_path / "report.html"
    html_report.write_run_html(_run_dict(), path)
    browser.get_log("browser")  # drop earlier entries
    browser.get(path.as_uri())
    total = sum(len(v) for v in FAMILIES.values())
    assert _visible_rows(browser) == total
    assert browser.find_element(By.ID, "f-count").text == f"{total} of {total} claims shown"
    fam = Select(browser.find_element(By.ID, "f-family"))
    for name, verdicts in FAMILIES.items():
        fam.select_by_value(name)
        assert _visible_rows(browser) == len(verdicts), name
    fam.select_by_value("")
    Select(browser.find_element(By.ID, "f-verdict")).select_by_value("VERIFIED")
    want = sum(v == "VERIFIED" for vs in FAMILIES.values() for v in vs)
    assert _visible_rows(browser) == want
    fam.select_by_value("gamma")
    assert _visible_rows(browser) == FAMILIES["gamma"].count("VERIFIED")
    browser.find_element(By.ID, "f-reset").click()
    box = browser.find_element(By.ID, "f-text")
    box.send_keys("beta.claim-1")
    assert _visible_rows(browser) == 1
    box.clear()
    box.send_keys("no such claim anywhere")
    assert _visible_rows(browser) == 0
    browser.find_element(By.ID, "f-reset").click()
    Select(browser.find_element(By.ID, "f-provenance")).select_by_value("derived")
    want = sum(i % 2 == 1 for vs in FAMILIES.values() for i in range(len(vs)))
    assert _visible_rows(browser) == want
    assert not _errors(browser)
    shot = tmp_path / "shot.png"
    assert browser.save_screenshot(str(shot))
    _png_ok(shot)
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "Summary" in text and "Overall verdict" in text and "1 claim errored" in text


@needs_browser
def test_real_reports_in_the_browser(tmp_path, browser, capsys):
    from selenium.webdriver.common.by import By

    run = tmp_path / "run.html"
    assert main(["run", "--only", "ufm-ce", "--quiet", "--report", "", "--json", "", "--html", str(run)]) == 0
    browser.get_log("browser")
    browser.get(run.as_uri())
    from proofs_check import registry

    assert _visible_rows(browser) == len(registry.select(registry.all_claims(), ["ufm-ce"]))
    assert not _errors(browser)
    shot = tmp_path / "run.png"
    browser.save_screenshot(str(shot))
    _png_ok(shot)
    assert "Overall verdict" in browser.find_element(By.TAG_NAME, "body").text
    solve = tmp_path / "solve.html"
    assert main(["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.01", "--lambda-h", "0.01",
                 "--html", str(solve)]) == 0
    browser.get(solve.as_uri())
    assert not _errors(browser)
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "Summary" in text and "Certificate" in text
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    ok = browser.execute_script("var i=document.querySelector('#gram-figure img');"
                                "return i!==null && i.complete && i.naturalWidth>0;")
    assert ok, "the Gram figure did not load"


def test_solve_html_figure_has_no_overlapping_labels_at_k_12(monkeypatch):
    """The figure of `solve --html` is the --plot figure (issue 29): at k = 12 no cell numbers (the colour bar
    carries the scale) and no two drawn texts overlap."""
    pytest.importorskip("matplotlib")
    from proofs_check import html_report, plots
    from tests.test_plots import _drawn_texts, _intersections, _journal_out

    figs = []
    real = plots.build_figure
    monkeypatch.setattr(plots, "build_figure", lambda o, **kw: figs.append(real(o, **kw)) or figs[-1])
    html = html_report._figure_html(_journal_out(12))
    assert "data:image/png;base64," in html and len(figs) == 1
    heat = [ax for ax in figs[0].axes if ax.images]
    assert heat and all(not ax.texts for ax in heat)
    assert _intersections(_drawn_texts(figs[0])) == []
