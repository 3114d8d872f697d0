"""Story ``theorem2``: its statements say what the paper says (issue 40, item 8)."""

from __future__ import annotations

from rankcollapse.experiments.stories.theorem2 import STATEMENTS


def test_corollary_1s_n_center_rate_is_stated_as_the_upper_bound_the_paper_gives() -> None:
    """``theorem2.cor1n`` once read "the rate of Corollary 1 is ..."; the paper bounds mu, so the rate is at
    most that (the rule already tests it so: measured tail rate <= the bound's rate)."""
    st = next(s for s in STATEMENTS if s.key == "cor1n")
    assert "at most" in st.text and "upper bound" in st.text and "rate of Corollary 1 is" not in st.text
