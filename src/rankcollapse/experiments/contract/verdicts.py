"""Verdicts, origins and claim rows: the one vocabulary every story's rows are written in.

A *partial verdict* (:class:`Verdict`) answers one question about one statement: ``reproduced``
(the data satisfy the rule), ``not reproduced`` (they contradict it) or ``inconclusive`` (no data,
too few samples, evidence pointing both ways). :func:`combine_verdicts` is the only way to merge
partial verdicts (per mask, per model, per dtype ...): any ``not reproduced`` wins; ``reproduced``
needs at least one part and every part reproduced; anything else (an empty list included) is
``inconclusive``. No evidence never yields ``reproduced``.

A stand-in row (other pretrained weights in place of the paper's checkpoint) describes the stand-in's
own behaviour, not the paper: its words are "as stated (stand-in)" / "otherwise (stand-in)", never
the paper's "reproduced", and it is counted apart from the paper's tally. A ``search`` statement (a
conjecture that nothing of a kind exists) that the search did not contradict reads "consistent: none
found in the search", and a ``proof`` statement (the same, settled by a proof the row names) reads
"consistent: proven": their own class, and their ``as_plotted`` is ``consistent``, never "reproduced".
A row of a later paper (``Claim.paper`` a follow-up) has its own origin, ``follow-up setting``, and its
own counters (:func:`assign_paper`), never the NeurIPS paper's.

Every claim row answers two questions: ``as_plotted`` (the quantity the paper plots, raw μ or σ_min,
in the paper's dtype) and ``mechanism`` (μ_rel against the precision floor, float64 beside
float32; ``n/a`` where a statement has no separate mechanism). Its one ``verdict`` word comes from
the fixed table :func:`verdict_word`, which never reads "not reproduced" where the plotted quantity
reproduces. Each row has an :class:`Origin`: the paper's setting, a stand-in (other weights in
place of the paper's, named), or our own extension, whose words are "confirmed (ours)" /
"refuted (ours)", never the paper's "reproduced". A row whose only stand-in would be a random
init for a pretrained model is ``untested``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote


class Verdict(str, Enum):
    """A partial verdict on one question (a ``str``: ``Verdict.REPRODUCED == "reproduced"``)."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    #: Only a ``search`` or ``proof`` statement's row carries it (:func:`row_plotted`): a conjecture that
    #: nothing of a kind exists, not contradicted. Rules never return it; :func:`combine_verdicts` refuses it.
    CONSISTENT = "consistent"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: str | Verdict) -> Verdict:
        """The verdict named ``value`` (RankCollapseError for anything else)."""
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(v.value for v in cls)
            raise RankCollapseError(f"unknown verdict {quote(str(value), 40)}; allowed: {allowed}") from None


REPRODUCED = Verdict.REPRODUCED
NOT_REPRODUCED = Verdict.NOT_REPRODUCED
INCONCLUSIVE = Verdict.INCONCLUSIVE
#: The partial verdicts a rule returns.
VERDICTS: tuple[Verdict, ...] = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
#: The mechanism column of a statement that has no separate mechanism check.
NA = "n/a"


def combine_verdicts(verdicts: Iterable[str | Verdict]) -> Verdict:
    """One verdict from several partial ones (see the module docstring for the rule).

    >>> str(combine_verdicts([]))
    'inconclusive'
    >>> str(combine_verdicts(["reproduced", "inconclusive"]))
    'inconclusive'
    >>> str(combine_verdicts(["reproduced", "not reproduced", "inconclusive"]))
    'not reproduced'
    """
    parts = [Verdict.of(v) for v in verdicts]
    if Verdict.CONSISTENT in parts:
        raise RankCollapseError("'consistent' is a search or proof row's as_plotted, not a partial verdict")
    if NOT_REPRODUCED in parts:
        return NOT_REPRODUCED
    if parts and all(v is REPRODUCED for v in parts):
        return REPRODUCED
    return INCONCLUSIVE


#: The paper this project reproduces (its arXiv id). Every story judges it unless it names a follow-up
#: (``Story.paper``); its rows alone make the counters that open the report, the CLI's and results.md's.
MAIN_PAPER = "2405.18781"
#: Papers after it whose statements stories judge on the same engine, each with its own section and
#: counters, never in the main paper's tally: arXiv id -> citation.
FOLLOWUPS: dict[str, str] = {
    "2502.01951": 'Wu, Wang, Jegelka, Jadbabaie, "On the Emergence of Position Bias in Transformers", '
    "ICML 2025 (arXiv 2502.01951)",
    "2602.16837": "Herasimchyk, Labryga, Prusina, Laue, residual-aware attention rollout and position bias "
    "(arXiv 2602.16837, 2026; known from its abstract)",
    "2604.23681": "Cirrincione, LayerNorm, the affine rank and the span of attention-only stacks "
    "(arXiv 2604.23681, 2026; known from its abstract)",
    "2510.22026": 'Karagodin, Ge, Polyanskiy, Rigollet, "Normalization in Attention Dynamics", NeurIPS 2025 '
    "(arXiv 2510.22026; known from its abstract)",
    "2503.10622": 'Zhu, Chen, He, LeCun, Liu, "Transformers without Normalization" (DyT), CVPR 2025 '
    "(arXiv 2503.10622; known from its abstract)",
    "2502.05795": 'Sun et al., "The Curse of Depth in Large Language Models" (LayerNorm Scaling), '
    "NeurIPS 2025 (arXiv 2502.05795; known from its abstract)",
    "2502.02732": 'Kim et al., "Peri-LN: Revisiting Layer Normalization in the Transformer Architecture", '
    "ICML 2025 (arXiv 2502.02732; known from its abstract, its formula second-hand)",
    "2607.14018": "Everett, rank collapse in residual MLP stacks at initialisation, Post-Norm against "
    "Pre-Norm (arXiv 2607.14018; known from its abstract)",
    "2505.24333": 'Giorlandino, Goldt, "Two failure modes of deep transformers and how to avoid them: a '
    'unified theory of signal propagation at initialisation" (arXiv 2505.24333; known from its abstract)',
    "2410.10609": "Joseph et al., Y = LN(lam X + SA(X)) and rank collapse (arXiv 2410.10609; known from its "
    "abstract)",
    "2606.09951": 'Li, Guo, "Hasse Diagrams for Attention" (arXiv 2606.09951; known from its abstract; no '
    "experiments in the paper)",
    "2603.10123": 'Chowdhury, "Lost in the Middle at Birth" (arXiv 2603.10123; known from its abstract)',
    "2410.10781": 'Gu et al., "When Attention Sink Emerges in Language Models", ICLR 2025 (arXiv 2410.10781; '
    "second-hand)",
}
#: Every paper a row can be about: arXiv id -> citation.
PAPERS: dict[str, str] = {
    MAIN_PAPER: 'Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the Role of Attention Masks and LayerNorm in '
    'Transformers", NeurIPS 2024 (arXiv 2405.18781)',
    **FOLLOWUPS,
}


def check_paper(paper: str) -> str:
    """``paper`` if it is an arXiv id of :data:`PAPERS`, else RankCollapseError naming the allowed ids."""
    if paper not in PAPERS:
        raise RankCollapseError(f"unknown paper {quote(str(paper), 40)}; allowed: {', '.join(PAPERS)}")
    return paper


class Origin(str, Enum):
    """Where a claim row comes from."""

    PAPER = "paper setting"  # the paper's configuration (experiments) or the theorem's hypotheses
    FOLLOWUP = "follow-up setting"  # a later paper's statement in its own setting (Claim.paper says which)
    STAND_IN = "stand-in"  # other pretrained weights in place of the paper's checkpoint, named
    EXTENSION = "extension"  # our own setting or our own statement

    def __str__(self) -> str:
        return self.value


ORIGINS: tuple[Origin, ...] = tuple(Origin)
UNTESTED = "untested"

#: The combined word of a paper row (paper setting or stand-in) from (as_plotted, mechanism);
#: ``None`` = the statement has no separate mechanism. Pinned by a test; never "not reproduced"
#: where the plotted quantity reproduces.
PAPER_WORDS: dict[tuple[Verdict, Verdict | None], str] = {
    (REPRODUCED, None): "reproduced",
    (REPRODUCED, REPRODUCED): "reproduced",
    (REPRODUCED, NOT_REPRODUCED): "reproduced as plotted; mechanism differs",
    (REPRODUCED, INCONCLUSIVE): "reproduced as plotted; mechanism inconclusive",
    (NOT_REPRODUCED, None): "not reproduced",
    (NOT_REPRODUCED, NOT_REPRODUCED): "not reproduced",
    (NOT_REPRODUCED, REPRODUCED): "not reproduced as plotted; mechanism holds",
    (NOT_REPRODUCED, INCONCLUSIVE): "not reproduced as plotted; mechanism inconclusive",
    (INCONCLUSIVE, None): "inconclusive",
    (INCONCLUSIVE, INCONCLUSIVE): "inconclusive",
    (INCONCLUSIVE, REPRODUCED): "inconclusive as plotted; mechanism holds",
    (INCONCLUSIVE, NOT_REPRODUCED): "inconclusive as plotted; mechanism differs",
}
#: The same for our own extensions: their own words, never the paper's "reproduced".
EXTENSION_WORDS: dict[tuple[Verdict, Verdict | None], str] = {
    (REPRODUCED, None): "confirmed (ours)",
    (REPRODUCED, REPRODUCED): "confirmed (ours)",
    (REPRODUCED, NOT_REPRODUCED): "confirmed (ours) as plotted; mechanism differs",
    (REPRODUCED, INCONCLUSIVE): "confirmed (ours) as plotted; mechanism inconclusive",
    (NOT_REPRODUCED, None): "refuted (ours)",
    (NOT_REPRODUCED, NOT_REPRODUCED): "refuted (ours)",
    (NOT_REPRODUCED, REPRODUCED): "refuted (ours) as plotted; mechanism holds",
    (NOT_REPRODUCED, INCONCLUSIVE): "refuted (ours) as plotted; mechanism inconclusive",
    (INCONCLUSIVE, None): "inconclusive (ours)",
    (INCONCLUSIVE, INCONCLUSIVE): "inconclusive (ours)",
    (INCONCLUSIVE, REPRODUCED): "inconclusive (ours) as plotted; mechanism holds",
    (INCONCLUSIVE, NOT_REPRODUCED): "inconclusive (ours) as plotted; mechanism differs",
}
#: The same for a stand-in: the stand-in's own behaviour, not a verdict on the paper.
STAND_IN_WORDS: dict[tuple[Verdict, Verdict | None], str] = {
    (REPRODUCED, None): "as stated (stand-in)",
    (REPRODUCED, REPRODUCED): "as stated (stand-in)",
    (REPRODUCED, NOT_REPRODUCED): "as stated (stand-in) as plotted; mechanism differs",
    (REPRODUCED, INCONCLUSIVE): "as stated (stand-in) as plotted; mechanism inconclusive",
    (NOT_REPRODUCED, None): "otherwise (stand-in)",
    (NOT_REPRODUCED, NOT_REPRODUCED): "otherwise (stand-in)",
    (NOT_REPRODUCED, REPRODUCED): "otherwise (stand-in) as plotted; mechanism holds",
    (NOT_REPRODUCED, INCONCLUSIVE): "otherwise (stand-in) as plotted; mechanism inconclusive",
    (INCONCLUSIVE, None): "inconclusive (stand-in)",
    (INCONCLUSIVE, INCONCLUSIVE): "inconclusive (stand-in)",
    (INCONCLUSIVE, REPRODUCED): "inconclusive (stand-in) as plotted; mechanism holds",
    (INCONCLUSIVE, NOT_REPRODUCED): "inconclusive (stand-in) as plotted; mechanism differs",
}
#: The agreeing word of a ``search`` statement (a conjecture a search did not contradict).
CONSISTENT = "consistent: none found in the search"
#: The agreeing word of a ``proof`` statement (a conjecture that a proof, named in the row, settles).
PROVEN = "consistent: proven"
#: Statement kinds -> their agreeing word (a ``claim`` agrees in its origin's own words).
CONJECTURE_WORDS: dict[str, str] = {"search": CONSISTENT, "proof": PROVEN}
#: Every word a row's ``verdict`` can hold.
WORDS: tuple[str, ...] = (
    *dict.fromkeys([*PAPER_WORDS.values(), *EXTENSION_WORDS.values(), *STAND_IN_WORDS.values()]),
    CONSISTENT,
    PROVEN,
    UNTESTED,
)


def verdict_word(
    origin: Origin | str,
    as_plotted: str | Verdict,
    mechanism: str | Verdict | None,
    untested: bool = False,
    kind: str = "claim",
) -> str:
    """The row's one word (see :data:`PAPER_WORDS`, :data:`EXTENSION_WORDS`, :data:`STAND_IN_WORDS`);
    ``untested`` wins; a ``search`` (``proof``) statement that is not contradicted reads
    :data:`CONSISTENT` (:data:`PROVEN`)."""
    if untested:
        return UNTESTED
    mech = None if mechanism is None or mechanism == NA else Verdict.of(mechanism)
    plotted = Verdict.of(as_plotted)
    agrees = plotted in (REPRODUCED, Verdict.CONSISTENT) and mech in (None, REPRODUCED)
    if kind in CONJECTURE_WORDS and agrees:
        return CONJECTURE_WORDS[kind]
    if plotted is Verdict.CONSISTENT:
        raise RankCollapseError(f"'consistent' is the word of a search or proof statement, not of a {kind}")
    table = {Origin.EXTENSION: EXTENSION_WORDS, Origin.STAND_IN: STAND_IN_WORDS}.get(
        Origin(origin), PAPER_WORDS
    )
    return table[(plotted, mech)]


#: The counters' class of an inconclusive row whose interval still straddles its threshold (or whose
#: sample is below the rule's minimum): more samples would decide it (``Claim.undecided``).
UNDECIDED = "undecided"
#: The counters' class of a search statement's agreeing word.
CONSISTENT_CLASS = "consistent"


def verdict_class(word: str) -> str:
    """The class of a verdict *word* alone, for colouring a word where no row is at hand (the report's
    badges): reproduced / not reproduced / inconclusive / consistent / untested (``confirmed (ours)`` and
    ``as stated (stand-in)`` are reproduced in their own origin's words). Rows are counted by
    ``Claim.verdict_class``, which reads the row's fields."""
    if word == UNTESTED:
        return UNTESTED
    if word in CONJECTURE_WORDS.values():
        return CONSISTENT_CLASS
    head = word.split(" as plotted")[0].split(";")[0]
    if head.startswith(("not reproduced", "refuted", "otherwise")):
        return NOT_REPRODUCED.value
    if head.startswith(("reproduced", "confirmed", "as stated")):
        return REPRODUCED.value
    return INCONCLUSIVE.value


@dataclass
class Claim:
    """One row of the claims table (``claims.csv``): one statement, one model, one origin.

    ``key``: the statement's key in its story; ``id``: ``<story>.<key>[<model or qualifier>]``.
    ``as_plotted`` / ``mechanism``: the two partial verdicts (``mechanism`` may be ``n/a``);
    ``verdict``: their word (:func:`verdict_word`); ``cause``: one sentence saying why a row is not
    plainly reproduced, of the kind ``cause_kind`` (``kit.causes.CAUSES``). ``evidence`` /
    ``mechanism_evidence``: the numbers behind each. ``thresholds``: every threshold the rule used, with
    its documented range; ``threshold_sensitive``: the verdict changes inside those ranges
    (``sensitivity`` says how).
    ``n``: samples per condition; ``provisional``: judged at the rule's minimum sample size;
    ``undecided``: inconclusive because the sample does not decide (an interval straddles its
    threshold, or fewer than ``min_samples``), with ``needed_n`` (the n that would decide it at the
    observed spread, None if unknown) and ``interval`` (the first open comparison, in words);
    ``sampling``: why a sequential run stopped sampling this row (``reproduce --until-decided``);
    ``axes``: the grid values the row's runs share (e.g. ``{"model": "random:bert-base-uncased"}``).
    ``unit``: what ``n`` counts (``samples``, or ``networks`` where the weights are a random draw);
    ``decided_by``: the condition that decided each half of the row; ``scope``: where the verdict was
    actually tested when narrower than the statement (``tested at r = 1 only``).
    ``model``: the weights judged; ``stand_in``: what stood in for what, and why it may differ.
    ``paper``: the arXiv id of the paper whose statement the row judges (:data:`PAPERS`; the story's
    ``Story.paper``): the main paper's rows and each follow-up's are counted apart (:func:`tally`).
    """

    id: str
    story: str
    key: str
    experiment: str
    statement: str
    source: str
    origin: str
    verdict: str
    as_plotted: str
    mechanism: str
    rule: str
    evidence: str
    mechanism_evidence: str = ""
    cause_kind: str = ""
    cause: str = ""
    thresholds: str = ""
    threshold_sensitive: bool = False
    sensitivity: str = ""
    n: int | None = None
    provisional: bool = False
    model: str = ""
    stand_in: str = ""
    conditions: str = ""
    seeds: list[int] = field(default_factory=list)
    figure: str = ""
    undecided: bool = False
    needed_n: int | None = None
    interval: str = ""
    sampling: str = ""
    axes: dict[str, Any] = field(default_factory=dict)
    unit: str = "samples"
    decided_by: str = ""
    scope: str = ""
    paper: str = MAIN_PAPER

    def __post_init__(self) -> None:
        Origin(self.origin)
        check_paper(self.paper)
        if self.verdict not in WORDS:
            raise ValueError(f"claim {self.id}: unknown verdict word {self.verdict!r}")
        Verdict.of(self.as_plotted)
        if (self.verdict in CONJECTURE_WORDS.values()) != (self.as_plotted == Verdict.CONSISTENT):
            raise ValueError(
                f"claim {self.id}: as_plotted {self.as_plotted!r} with the word {self.verdict!r} (a search "
                "or proof that agrees is 'consistent', never 'reproduced')"
            )
        followup = self.paper != MAIN_PAPER
        if (self.origin == Origin.PAPER and followup) or (self.origin == Origin.FOLLOWUP and not followup):
            raise ValueError(
                f"claim {self.id}: origin {self.origin!r} for paper {self.paper} (a later paper's rows are "
                "'follow-up setting', the NeurIPS paper's 'paper setting'; see assign_paper)"
            )
        if self.mechanism != NA:
            Verdict.of(self.mechanism)
        self.as_plotted = str(self.as_plotted)
        self.mechanism = str(self.mechanism)
        if self.as_plotted == REPRODUCED and not self.evidence.strip():
            raise ValueError(f"claim {self.id}: 'reproduced' needs evidence")

    @property
    def verdict_class(self) -> str:
        """The row's class for the counters, from its fields (never parsed from its word): untested,
        consistent (a search that found nothing), else the plotted verdict, ``undecided`` for an
        inconclusive row the sample leaves open."""
        if self.verdict == UNTESTED:
            return UNTESTED
        if self.verdict in CONJECTURE_WORDS.values():
            return CONSISTENT_CLASS
        return UNDECIDED if self.undecided and self.as_plotted == INCONCLUSIVE.value else self.as_plotted

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def claim_from_record(row: dict[str, Any]) -> Claim:
    """A :class:`Claim` from a stored row (``claims.json``), an earlier release's included: its follow-up
    rows read ``paper setting`` and its agreeing searches ``as_plotted: reproduced``; both are upgraded to
    today's fields (the verdict word is unchanged). TypeError / ValueError for a row that is no claim."""
    row = dict(row)
    paper = row.get("paper", MAIN_PAPER)
    if paper != MAIN_PAPER and row.get("origin") == Origin.PAPER.value:
        row["origin"] = Origin.FOLLOWUP.value
    if row.get("verdict") in CONJECTURE_WORDS.values() and row.get("as_plotted") == REPRODUCED.value:
        row["as_plotted"] = Verdict.CONSISTENT.value
    return Claim(**row)


def row_plotted(plotted: Verdict, word: str) -> str:
    """A row's ``as_plotted``: the rule's verdict, or ``consistent`` where the row's word is a search's or a
    proof's agreement (never "reproduced" for a conjecture that nothing of a kind exists)."""
    return Verdict.CONSISTENT.value if word in CONJECTURE_WORDS.values() else plotted.value


def assign_paper(claim: Claim, paper: str) -> Claim:
    """Mark ``claim`` as judging ``paper``'s statement (its story's :data:`PAPERS` id): a later paper's row in
    its own setting gets the origin ``follow-up setting`` (its own counters), never ``paper setting``, which
    names the NeurIPS paper's. Stand-ins and extensions keep their origin."""
    check_paper(paper)
    claim.paper = paper
    if paper != MAIN_PAPER and claim.origin == Origin.PAPER:
        claim.origin = Origin.FOLLOWUP.value
    elif paper == MAIN_PAPER and claim.origin == Origin.FOLLOWUP:
        claim.origin = Origin.PAPER.value
    return claim


#: The counters' classes, as plotted (the row's word) and of the mechanism, in display order.
PLOTTED_CLASSES: tuple[str, ...] = (
    REPRODUCED.value,
    NOT_REPRODUCED.value,
    INCONCLUSIVE.value,
    UNDECIDED,
    CONSISTENT_CLASS,
    UNTESTED,
)
MECHANISM_CLASSES: dict[str, str] = {
    REPRODUCED.value: "holds",
    NOT_REPRODUCED.value: "differs",
    INCONCLUSIVE.value: "inconclusive",
    NA: "n/a",
}


def tally(claims: Iterable[Claim], paper: str = MAIN_PAPER) -> dict[str, dict[str, dict[str, int]]]:
    """The one verdict tally of one paper's rows (``paper``: an arXiv id of :data:`PAPERS`, the main
    paper by default; a follow-up's rows never enter the main paper's tally): per origin (paper setting,
    stand-in, extension; each its own line, a stand-in never counted with the paper),
    ``{"as plotted": class -> rows, "mechanism": class -> rows}`` with the classes of
    :data:`PLOTTED_CLASSES` (``Claim.verdict_class``) and the mechanism's holds / differs / inconclusive /
    n/a apart, so "reproduced as plotted; mechanism differs" is never counted as plain agreement. Classes
    with no row are left out; untested rows have no mechanism."""
    rows = [c for c in claims if c.paper == check_paper(paper)]
    out: dict[str, dict[str, dict[str, int]]] = {}
    for origin in ORIGINS:
        mine = [c for c in rows if c.origin == origin.value]
        if not mine:
            continue
        plotted = {k: sum(1 for c in mine if c.verdict_class == k) for k in PLOTTED_CLASSES}
        tested = [c for c in mine if c.verdict_class != UNTESTED]
        mech = {w: sum(1 for c in tested if c.mechanism == k) for k, w in MECHANISM_CLASSES.items()}
        out[origin.value] = {
            "as plotted": {k: v for k, v in plotted.items() if v},
            "mechanism": {k: v for k, v in mech.items() if v},
        }
    return out


def class_word(cls: str, origin: str) -> str:
    """A counter's class in its origin's words: a stand-in is "as stated" / "otherwise", not "reproduced"."""
    if origin == Origin.STAND_IN:
        return {REPRODUCED.value: "as stated", NOT_REPRODUCED.value: "otherwise"}.get(cls, cls)
    if origin == Origin.EXTENSION:
        return {REPRODUCED.value: "confirmed", NOT_REPRODUCED.value: "refuted"}.get(cls, cls)
    return cls


def origin_heading(origin: Origin | str) -> str:
    """An origin as every counter names it (the report's, the command line's): a stand-in's heading says
    its rows are the stand-ins' own behaviour, not the paper's tally."""
    origin = Origin(origin)
    return origin.value + {
        Origin.STAND_IN: " (the stand-ins' own behaviour, not the paper's tally)",
        Origin.FOLLOWUP: " (the later paper's own statements; counted in its section only)",
    }.get(origin, "")


def tally_line(origin: str, counts: dict[str, dict[str, int]]) -> str:
    """``paper setting: as plotted 26 reproduced, 9 not reproduced; mechanism 12 holds, 4 differs, 20 n/a``
    (:func:`origin_heading` first)."""
    head = origin_heading(origin)
    plotted = ", ".join(f"{n} {class_word(k, origin)}" for k, n in counts["as plotted"].items())
    mech = ", ".join(f"{n} {k}" for k, n in counts["mechanism"].items())
    return f"{head}: as plotted {plotted}" + (f"; mechanism {mech}" if mech else "")
