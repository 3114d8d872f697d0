"""The report page: self-contained, figures next to their claims, every evidence term defined, each
statement counted once."""

from __future__ import annotations

import re
from pathlib import Path

from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim
from rankcollapse.experiments.glossary import GLOSSARY, terms_used
from rankcollapse.experiments.plotting import FigureFile
from rankcollapse.reports.html import render_report, tally

_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _claim(cid: str, exp: str, verdict: str, evidence: str, figure: str = "") -> Claim:
    return Claim(cid, exp, f"statement {cid}", "paper §5", evidence, verdict, "rule", figure=figure)


def _page(tmp_path: Path) -> tuple[str, list[Claim]]:
    figs = []
    for name, exp in (("fa", "exp_a"), ("fb", "exp_b")):
        (tmp_path / "figures").mkdir(exist_ok=True)
        png, pdf, csv = (tmp_path / "figures" / f"{name}.{ext}" for ext in ("png", "pdf", "csv"))
        png.write_bytes(_PNG)
        pdf.write_bytes(b"%PDF-1.4")
        csv.write_text("layer,mu\n0,1.0\n")
        figs.append(FigureFile(name, exp, png, pdf, csv, f"caption {name}"))
    claims = [
        _claim("a.1", "exp_a", REPRODUCED, "complete: at floor; vacuous in 2 runs", "fa"),
        _claim("a.2", "exp_a", NOT_REPRODUCED, "kept (level 0.4)", "fa"),
        _claim("b.1", "exp_b", INCONCLUSIVE, "t_0.1 = 8", "fb"),
    ]
    experiments = [{"name": n, "title": f"title {n}", "task": "t", "base": {}, "grid": {}, "verdict": {},
                    "source": "paper"} for n in ("exp_a", "exp_b")]
    return render_report(claims, figs, experiments, {"profile": "tiny"}, tmp_path), claims


def test_the_page_links_only_inside_itself_or_to_embedded_data(tmp_path):
    page, _ = _page(tmp_path)
    hrefs = re.findall(r"href='([^']*)'", page) + re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith(("#", "data:")) for h in hrefs), hrefs
    anchors = set(re.findall(r"id='([^']+)'", page))
    assert all(h[1:] in anchors for h in hrefs if h.startswith("#")), "a link points at a missing anchor"
    assert "src=\"data:image/png;base64," in page or "src='data:image/png;base64," in page


def test_each_experiment_shows_its_figures_next_to_its_claims(tmp_path):
    page, _ = _page(tmp_path)
    a, b = page.index("id='exp-exp_a'"), page.index("id='exp-exp_b'")
    section_a, section_b = page[a:b], page[b:page.index("id='glossary'")]
    assert "id='fig-fa'" in section_a and "<tr id='a.1'>" in section_a and "<tr id='b.1'>" not in section_a
    assert "id='fig-fb'" in section_b and "<tr id='b.1'>" in section_b


def test_every_glossary_term_used_in_the_evidence_is_defined_on_the_page(tmp_path):
    page, _ = _page(tmp_path)
    glossary = page[page.index("id='glossary'"):]
    for term in ("at floor", "vacuous", "kept", "t_0.1"):
        assert f"<b>{term}</b>" in glossary, term
    assert "<b>Spearman</b>" not in glossary  # not used on this page
    assert set(terms_used(["at floor"], GLOSSARY)) >= {"at floor"}


def test_the_tally_counts_each_statement_once():
    rows = [_claim("x", "e", REPRODUCED, "ev"), _claim("x", "e", NOT_REPRODUCED, "ev"),
            _claim("y", "e", REPRODUCED, "ev")]
    assert tally(rows) == {REPRODUCED: 1, NOT_REPRODUCED: 1, INCONCLUSIVE: 0}
