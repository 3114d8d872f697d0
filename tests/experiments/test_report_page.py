"""The report page: self-contained, figures next to their rows, every term defined, counters per origin."""

from __future__ import annotations

import html
import re
from pathlib import Path

from rankcollapse.experiments.contract.verdicts import Claim, origin_heading, tally, tally_line
from rankcollapse.experiments.kit.glossary import GLOSSARY, terms_used
from rankcollapse.experiments.kit.plots import FigureFile
from rankcollapse.pipeline.report import render_report

_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _claim(
    cid: str,
    story: str,
    origin: str,
    verdict: str,
    evidence: str,
    figure: str = "",
    cause: str = "",
    kind: str = "",
    paper: str = "",
) -> Claim:
    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS, MAIN_PAPER

    paper = paper or (next(iter(FOLLOWUPS)) if origin == "follow-up setting" else MAIN_PAPER)
    plotted = {"reproduced": "reproduced", "confirmed (ours)": "reproduced", "untested": "inconclusive"}.get(
        verdict,
        verdict.split(" as plotted")[0]
        .replace(" (ours)", "")
        .replace(" (stand-in)", "")
        .replace("refuted", "not reproduced")
        .replace("otherwise", "not reproduced")
        .replace("as stated", "reproduced")
        .replace("consistent: none found in the search", "consistent"),
    )
    return Claim(
        id=cid,
        story=story,
        key=cid.split(".")[1].split("[")[0],
        experiment=f"{story}.a",
        statement=f"statement {cid}",
        source="paper §5",
        origin=origin,
        verdict=verdict,
        as_plotted=plotted,
        mechanism="n/a",
        rule="rule",
        evidence=evidence,
        figure=figure,
        cause=cause,
        cause_kind=kind,
        paper=paper,
    )


def _page(tmp_path: Path) -> tuple[str, list[Claim]]:
    figs = []
    for name, story in (("fa", "sa"), ("fb", "sb")):
        (tmp_path / "figures").mkdir(exist_ok=True)
        png, pdf, csv = (tmp_path / "figures" / f"{name}.{ext}" for ext in ("png", "pdf", "csv"))
        png.write_bytes(_PNG)
        pdf.write_bytes(b"%PDF-1.4")
        csv.write_text("layer,mu\n0,1.0\n")
        figs.append(FigureFile(name, story, png, pdf, csv, f"caption {name}"))
    claims = [
        _claim("sa.one", "sa", "paper setting", "reproduced", "complete: at floor; vacuous in 2 runs", "fa"),
        _claim(
            "sa.two",
            "sa",
            "stand-in",
            "otherwise (stand-in)",
            "kept (level 0.4)",
            "fa",
            "the stand-in differs",
            "stand-in differs",
        ),
        _claim(
            "sb.one[x]",
            "sb",
            "extension",
            "inconclusive (ours)",
            "SRank 1.2",
            "fb",
            "n too small",
            "sample too small",
        ),
    ]
    experiments = [
        {
            "name": f"{n}.a",
            "story": n,
            "title": f"title {n}",
            "task": "t",
            "base": {},
            "grid": {},
            "verdict": {},
            "source": "paper",
        }
        for n in ("sa", "sb")
    ]
    return render_report(claims, figs, experiments, {"profile": "tiny"}, tmp_path), claims


def test_the_page_links_only_inside_itself_or_to_embedded_data(tmp_path):
    page, _ = _page(tmp_path)
    hrefs = re.findall(r"href='([^']*)'", page) + re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith(("#", "data:")) for h in hrefs), hrefs
    anchors = set(re.findall(r"id='([^']+)'", page))
    assert all(h[1:] in anchors for h in hrefs if h.startswith("#")), "a link points at a missing anchor"
    assert 'src="data:image/png;base64,' in page or "src='data:image/png;base64," in page


def test_each_story_shows_its_figures_next_to_its_rows(tmp_path):
    page, _ = _page(tmp_path)
    a, b = page.index("id='exp-sa'"), page.index("id='exp-sb'")
    section_a, section_b = page[a:b], page[b : page.index("id='glossary'")]
    assert (
        "id='fig-fa'" in section_a
        and "<tr id='sa.one'>" in section_a
        and "<tr id='sb.one[x]'>" not in section_a
    )
    assert "id='fig-fb'" in section_b and "<tr id='sb.one[x]'>" in section_b
    assert "the stand-in differs" in section_a  # the cause sits in the row


def test_every_glossary_term_used_on_the_page_is_defined_there(tmp_path):
    page, _ = _page(tmp_path)
    glossary = page[page.index("id='glossary'") :]
    for term in ("at floor", "vacuous", "kept", "SRank", "stand-in", "extension", "as plotted"):
        assert f"<b>{term}" in glossary, term
    assert "<b>phi(0)</b>" not in glossary  # not used on this page
    assert set(terms_used(["at floor"], GLOSSARY)) >= {"at floor"}


def test_the_counters_are_per_origin_paper_setting_first(tmp_path):
    _, claims = _page(tmp_path)
    counts = tally(claims)
    assert list(counts) == ["paper setting", "stand-in", "extension"]
    assert counts["paper setting"]["as plotted"] == {"reproduced": 1}
    assert counts["stand-in"]["as plotted"] == {"not reproduced": 1}
    assert counts["extension"]["as plotted"] == {"inconclusive": 1}
    assert counts["paper setting"]["mechanism"] == {"n/a": 1}


def test_a_row_reproduced_as_plotted_whose_mechanism_differs_is_counted_apart() -> None:
    rows = [
        _claim("s.a", "s", "paper setting", "reproduced", "e"),
        _claim(
            "s.b",
            "s",
            "paper setting",
            "reproduced as plotted; mechanism differs",
            "e",
            "",
            "c",
            "norm effect",
        ),
        _claim("s.c", "s", "paper setting", "consistent: none found in the search", "e"),
    ]
    rows[1].mechanism = "not reproduced"
    counts = tally(rows)["paper setting"]
    # the old counters put s.b with s.a as plain "reproduced"; now its mechanism shows apart, and a search
    # that found nothing is "consistent", never "reproduced"
    assert counts["as plotted"] == {"reproduced": 2, "consistent": 1}
    assert counts["mechanism"] == {"differs": 1, "n/a": 2}


def test_stand_in_rows_speak_of_the_stand_in_and_are_not_in_the_papers_line(tmp_path):
    page, claims = _page(tmp_path)
    counters = page[: page.index("id='summary'")]
    assert "not the paper&#x27;s tally" in counters or "not the paper's tally" in counters
    assert "otherwise (stand-in)" in page and tally(claims)["paper setting"]["as plotted"] == {
        "reproduced": 1
    }


def test_the_page_and_the_command_line_name_each_origins_count_alike(tmp_path):
    """One tally, one heading per origin: the page's counters and the command line's tally lines
    (``tally_line``) head each origin with ``origin_heading`` (they used to word the stand-ins apart)."""
    page, claims = _page(tmp_path)
    counters = html.unescape(page[: page.index("id='summary'")])
    for origin, counts in tally(claims).items():
        assert origin_heading(origin) in counters
        assert tally_line(origin, counts).startswith(f"{origin_heading(origin)}: as plotted")
    assert "stand-ins' own behaviour" in origin_heading("stand-in")


def test_a_followups_rows_have_their_own_section_and_counters_never_the_main_papers(tmp_path):
    from dataclasses import replace

    import pytest

    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS, MAIN_PAPER

    _, claims = _page(tmp_path)
    follow = next(iter(FOLLOWUPS))
    extra = replace(
        _claim(
            "sc.one",
            "sc",
            "follow-up setting",
            "not reproduced",
            "falls slower",
            "",
            "slow",
            "measured otherwise",
        ),
        paper=follow,
    )
    experiments = [
        {
            "name": f"{n}.a",
            "story": n,
            "title": f"title {n}",
            "task": "t",
            "base": {},
            "grid": {},
            "verdict": {},
            "source": "paper",
        }
        for n in ("sa", "sb", "sc")
    ]
    figs: list[FigureFile] = []
    page = render_report([*claims, extra], figs, experiments, {"profile": "tiny"}, tmp_path)
    assert tally([*claims, extra]) == tally(claims)  # the main paper's counters do not move
    assert tally([*claims, extra], follow)["follow-up setting"]["as plotted"] == {"not reproduced": 1}
    assert "follow-up setting" not in tally([*claims, extra])  # never the NeurIPS paper's origin or counter
    with pytest.raises(ValueError, match="origin 'paper setting' for paper"):
        replace(extra, origin="paper setting")
    top = page[: page.index("id='summary'")]
    assert "not reproduced" not in top.split("<table class='counters'>")[1].split("</table>")[0]
    head = page.index(f"id='paper-{follow}'")
    assert head < page.index("id='exp-sc'") and page.index("id='exp-sb'") < head
    assert "<table class='counters'>" in page[head : page.index("id='exp-sc'")]
    assert "Not reproduced: statement sc.one" not in page[:head]  # the main summary leaves it out
    assert extra.paper != MAIN_PAPER and claims[0].paper == MAIN_PAPER
    with pytest.raises(RankCollapseError, match="unknown paper"):
        replace(claims[0], paper="1234.5678")


def test_a_followups_section_gives_one_line_per_claim_while_the_papers_keep_their_paragraph(tmp_path):
    """A follow-up's section lists each statement once (its qualifiers' verdicts together, the reason in
    one sentence); the main paper's sections keep their paragraph."""
    from dataclasses import replace

    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS
    from rankcollapse.pipeline.summary import claim_bullets

    _, claims = _page(tmp_path)
    follow = next(iter(FOLLOWUPS))

    def row(cid: str, verdict: str, evidence: str, cause: str = "", kind: str = "") -> Claim:
        c = _claim(cid, "sc", "follow-up setting", verdict, evidence, cause=cause, kind=kind)
        qual = f" [{cid.split('[')[1][:-1]}]" if "[" in cid else ""
        return replace(c, paper=follow, statement=f"statement {c.key}{qual}")

    rows = [
        row("sc.one[a]", "not reproduced", "x: not reproduced — falls slower",
            "the data contradict the statement: falls slower", "measured otherwise"),
        row("sc.one[b]", "reproduced", "x: reproduced — falls"),
        row("sc.two", "reproduced", "x: reproduced — span 0.2 floors | more || 4 networks"),
    ]
    assert claim_bullets(rows) == [
        "statement one — not reproduced [a]; reproduced [b]: falls slower",
        "statement two — reproduced: span 0.2 floors",
    ]
    experiments = [{"name": f"{n}.a", "story": n, "title": f"title {n}", "task": "t", "base": {}, "grid": {},
                    "verdict": {}, "source": "paper"} for n in ("sa", "sb", "sc")]
    page = render_report([*claims, *rows], [], experiments, {"profile": "tiny"}, tmp_path)
    section = page[page.index("id='exp-sc'"):]
    items = re.findall(r"<li>(.*?)</li>", section.split("</ul>")[0])
    assert [html.unescape(i) for i in items] == claim_bullets(rows)
    main = page[page.index("id='exp-sa'") : page.index(f"id='paper-{follow}'")]
    assert "<ul class='bullets'>" not in main and "<p class='para'>" in main


def test_a_page_of_follow_up_rows_only_says_so_in_its_summary_and_lists_its_sections_cleanly(tmp_path):
    from dataclasses import replace

    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS

    follow = next(iter(FOLLOWUPS))
    only = replace(_claim("sc.one", "sc", "follow-up setting", "not reproduced", "falls slower", "", "slow",
                          "measured otherwise"), paper=follow)
    experiments = [{"name": "sc.a", "story": "sc", "title": "title sc", "task": "t", "base": {}, "grid": {},
                    "verdict": {}, "source": "paper"}]
    page = render_report([only], [], experiments, {"profile": "tiny"}, tmp_path)
    summary = page[page.index("id='summary'"): page.index("</section>", page.index("id='summary'"))]
    assert "No statement of the NeurIPS paper was judged in this run" in summary
    top = page[: page.index("id='summary'")]
    assert "0 rows" not in top and "counted per origin" not in top  # no empty tally of the paper's rows
    sections = page[page.index("Sections, in the paper's order:"):].split("</p>")[0]
    assert "order:  ·" not in sections and "order: <a href='#paper-" in sections
