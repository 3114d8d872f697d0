"""Claim cards: a follow-up's claim on a quantity an arm already measures, as a YAML file and no Python.

A card (``experiments/cards/<key>.yaml``) says what a story module would: the statement in its source's
words, the source and its level (``FOLLOWUPS.md``'s marks), the paper whose counters it joins, the arm whose
stored rows it reads (``<story>.<arm>``), the curve quantity, the condition (grid values that select the
rows), the groups (grid axes, each group one condition of the rule, Bonferroni over them), the rule and its
thresholds (with their documented ranges)::

    key: postln_gaussian_values
    statement: "Under Post-LN 1 - rho ~ e^(-2t)"
    source: "Karagodin et al. 2025 (arXiv 2510.22026), companion note"
    source_level: abstract
    paper: "2510.22026"
    origin: extension            # "paper setting" where the arm is the source's setting
    arm: cirrincione.paper
    quantity: mu_rel
    condition: {preset: attn+skip+layernorm}
    groups: [n]
    rule: collapsing
    thresholds: {min_samples: 4, rate_tol: 0.02, keep_min: 0.05}
    ranges: {rate_tol: [0.01, 0.05]}

:func:`load_cards` is the one loader (``edge.inputs.read_yaml``); :class:`Card` validates on construction
(an unknown key, quantity, rule, source level or paper, a threshold the rule reads and the card lacks: one
line naming the card and what is allowed; the CLI exits 2). :func:`with_cards` adds a story's cards to it:
their statements (each with its own paper, never the NeurIPS paper's) and their rows, judged by
:func:`card_rows` on the stored rows of the named arm with the kit's rules, float32 as plotted beside
float64, as a story's own rows are (``kit.claims.claim_row``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.core.names import QUANTITIES
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import read_yaml
from rankcollapse.edge.validate import quote
from rankcollapse.experiments.contract.story import Statement, Story, StoryData
from rankcollapse.experiments.contract.verdicts import FOLLOWUPS, MAIN_PAPER, Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.combine import unstated_conditions
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import curves_by, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.tasks.rollout import ROLLOUT_QUANTITIES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The package's cards.
CARDS_DIR = Path(__file__).resolve().parent.parent / "cards"

#: ``FOLLOWUPS.md``'s marks of where a statement was read.
SOURCE_LEVELS: tuple[str, ...] = ("text", "text, via a structured summary", "abstract", "2nd-hand")
ORIGINS: tuple[str, ...] = ("paper setting", "extension")
#: The curve quantities a card may judge: the per-sample collapse metrics and the rollout's curves.
CURVE_QUANTITIES: tuple[str, ...] = (
    "mu", "mu_rel", "num_rank", "full_rank", "sigma_min", "sigma_max", "stable_rank", "effective_rank",
    "mean_abs_cos", "mean_signed_cos", "token_speed", *ROLLOUT_QUANTITIES,
)
#: The dtypes of a row's halves: as plotted, then the mechanism.
DTYPES: tuple[str, str] = ("float32", "float64")


@dataclass(frozen=True)
class CardRule:
    """A kit rule a card may name: the rule on ``{label: Curve}``, the thresholds it reads (a card must set
    each), and its words in the row's rule."""

    name: str
    judge: Callable[[Mapping[str, Curve], Thresholds], Judgement]
    reads: tuple[str, ...]
    words: str


_STATUS = ("min_samples", "rate_tol", "keep_min")
RULES: dict[str, CardRule] = {r.name: r for r in (
    CardRule("collapsing", rules.san_collapse, _STATUS,
             "every curve 'collapsing' or at the precision floor (kit.rules.san_collapse)"),
    CardRule("kept", lambda c, th: rules.kept_stable(c, th, th["keep_min"]), _STATUS,
             "every curve 'not collapsing' and kept at >= keep_min over the last half "
             "(kit.rules.kept_stable)"),
    CardRule("power_law", lambda c, th: rules.power_law(c, th["exponent"], th),
             (*_STATUS, "exponent", "exponent_tol"),
             "every curve's slope in log t over the last half within exponent +- exponent_tol "
             "(kit.rules.power_law)"),
)}
#: A card's keys: required ones, then those with a default.
REQUIRED: tuple[str, ...] = ("key", "statement", "source", "source_level", "paper", "origin", "arm",
                             "quantity", "rule", "thresholds")
OPTIONAL: dict[str, Any] = {"condition": {}, "groups": [], "ranges": {}, "unstated": "", "figure": ""}


def _allowed(what: str, value: Any, allowed: Sequence[str], card: str) -> None:
    if value not in allowed:
        raise RankCollapseError(f"card {card}: unknown {what} {quote(value)}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Card:
    """One claim card (see the module docstring); ``name``: where it came from, in every message."""

    key: str
    statement: str
    source: str
    source_level: str
    paper: str
    origin: str
    arm: str
    quantity: str
    rule: str
    thresholds: Mapping[str, Any]
    condition: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    ranges: Mapping[str, Any] = field(default_factory=dict)
    unstated: str = ""
    figure: str = ""
    name: str = "card"

    def __post_init__(self) -> None:
        c = self.name
        for label in ("key", "statement", "source", "arm", "quantity", "rule", "paper"):
            if not isinstance(getattr(self, label), str) or not getattr(self, label):
                raise RankCollapseError(f"card {c}: {label} must be a non-empty string, got "
                                        f"{quote(getattr(self, label))}")
        _allowed("source_level", self.source_level, SOURCE_LEVELS, c)
        _allowed("origin", self.origin, ORIGINS, c)
        _allowed("quantity", self.quantity, CURVE_QUANTITIES, c)
        _allowed("rule", self.rule, tuple(RULES), c)
        follow = tuple(FOLLOWUPS)
        if self.paper == MAIN_PAPER:
            raise RankCollapseError(f"card {c}: paper {self.paper} is the NeurIPS paper; a card judges a "
                                    f"follow-up's claim: {', '.join(follow)}")
        _allowed("paper", self.paper, follow, c)
        story, _, arm = self.arm.partition(".")
        if not (story.isidentifier() and arm.isidentifier()):
            raise RankCollapseError(f"card {c}: arm {quote(self.arm)} must be <story>.<arm>")
        for label, value in (("condition", self.condition), ("thresholds", self.thresholds),
                             ("ranges", self.ranges)):
            if not isinstance(value, Mapping):
                raise RankCollapseError(f"card {c}: {label} must be a mapping, got {quote(value)}")
        if not all(isinstance(g, str) for g in self.groups):
            raise RankCollapseError(f"card {c}: groups must be a list of grid axes, got {quote(self.groups)}")
        missing = [t for t in RULES[self.rule].reads if t not in self.thresholds]
        if missing:
            raise RankCollapseError(f"card {c}: rule {self.rule} reads thresholds {', '.join(missing)}, "
                                    "which its thresholds: do not set (no defaults in code)")
        Statement(self.key, self.statement, self.source, self.rule)  # the key's spelling
        Thresholds.of(self.story_file, self.thresholds, self.ranges)  # ranges inside, values finite

    @property
    def story(self) -> str:
        return self.arm.partition(".")[0]

    @property
    def arm_name(self) -> str:
        return self.arm.partition(".")[2]

    @property
    def story_file(self) -> str:
        """The name thresholds' messages give (``cards/<name>``: ``cards/<name>.yaml: ...``)."""
        return f"cards/{self.name}"

    @classmethod
    def of(cls, raw: Any, name: str) -> Card:
        """A card from a parsed YAML mapping; an unknown or missing key is one line."""
        if not isinstance(raw, Mapping):
            raise RankCollapseError(f"card {name}: must be a mapping of {', '.join(REQUIRED)}, got "
                                    f"{quote(raw)}")
        known = (*REQUIRED, *OPTIONAL)
        for key in raw:
            _allowed("key", key, known, name)
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise RankCollapseError(f"card {name}: missing {', '.join(missing)}")
        values = {**OPTIONAL, **dict(raw)}
        values["groups"] = tuple(values["groups"]) if isinstance(values["groups"], list) else values["groups"]
        values["paper"] = str(values["paper"])
        return cls(**values, name=name)

    def statement_of(self) -> Statement:
        """The host story's statement of this card: its own words, source (with its level) and paper."""
        where = ", ".join(f"{k} = {v}" for k, v in self.condition.items())
        per = " and ".join([*self.groups, "dtype"])
        rule = (f"card {self.name}: {self.quantity} of arm {self.arm}" + (f" where {where}" if where else "")
                + f", per {per}: {RULES[self.rule].words}; float32 as plotted, float64 the mechanism"
                + (f"; a refutation reads 'not testable' (the source's {self.unstated} are not stated)"
                   if self.unstated else ""))
        return Statement(self.key, self.statement, f"{self.source} [{self.source_level}]", rule,
                         ours=self.origin == "extension", paper=self.paper)


def load_cards(folder: str | Path | None = None) -> tuple[Card, ...]:
    """Every ``*.yaml`` card in ``folder`` (default :data:`CARDS_DIR`), by file name; a key given twice is
    one line."""
    folder = CARDS_DIR if folder is None else folder
    cards = tuple(Card.of(read_yaml(p, "claim card"), p.stem) for p in sorted(Path(folder).glob("*.yaml")))
    seen: dict[tuple[str, str], str] = {}
    for card in cards:
        other = seen.setdefault((card.story, card.key), card.name)
        if other != card.name:
            raise RankCollapseError(f"card {card.name}: key {card.key!r} of story {card.story} already in "
                                    f"card {other}")
    return cards


def _column(frame: pd.DataFrame, name: str, card: Card) -> str:
    """``name`` as the rows spell it: itself, or the same quantity under its table name or a stored key
    (``core.names``: ``n`` / ``tokens``, ``preset`` / ``mode``); a column the rows lack is one line."""
    if name in frame:
        return name
    for q in QUANTITIES.values():
        spellings = (q.key, *q.stored)
        if name in spellings:
            for other in spellings:
                if other in frame:
                    return other
    raise RankCollapseError(f"card {card.name}: arm {card.arm} has no column {quote(name)}; its columns: "
                            f"{', '.join(sorted(map(str, frame.columns)))}")


def _select(frame: pd.DataFrame, card: Card) -> pd.DataFrame:
    """The arm's curve rows under the card's condition, its groups as the card names them."""
    for name in [*card.condition, *card.groups, card.quantity]:
        column = _column(frame, name, card)
        if column != name:
            frame = frame.rename(columns={column: name})
    for name, value in card.condition.items():
        frame = frame[frame[name] == value]
    return frame


def card_curves(card: Card, frame: pd.DataFrame, dtype: str) -> dict[str, Curve]:
    """``{"<axis>=<value>, ..., <dtype>": Curve}`` of the card's quantity in ``dtype``, one per group."""
    sub = frame[frame["dtype"] == dtype]
    out = {}
    for key, c in curves_by(sub, card.quantity, list(card.groups)).items():
        named = [f"{g}={v}" for g, v in zip(card.groups, key[:-1], strict=True)]
        out[", ".join([*named, dtype])] = c
    return out


def card_judgement(card: Card, curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """The card's rule on ``curves``; a refutation 'not testable' where the source's conditions are
    unstated (``kit.combine.unstated_conditions``)."""
    j = RULES[card.rule].judge(curves, th)
    if card.unstated:
        return unstated_conditions(j, card.unstated, f"arm {card.arm}")
    return j


def card_rows(card: Card, sd: StoryData, statement: Statement | None = None) -> list[Claim]:
    """The card's row on its arm's stored rows (none where the arm has no finished runs: the pipeline
    writes the no-data row)."""
    data = sd.arm(card.arm_name)
    if data is None:
        return []
    frame = _select(rows_of(data, "curve"), card)
    if frame.empty:
        return []
    th = Thresholds.of(card.story_file, card.thresholds, card.ranges)
    halves = [judged(lambda t, dt=dt: card_judgement(card, card_curves(card, frame, dt), t), th)
              for dt in DTYPES if (frame["dtype"] == dt).any()]
    return [claim_row(
        card.story, statement or card.statement_of(), data, th, *halves,
        axes_frame=frame, runs=runs_of(data, frame), figure=card.figure,
        sample_note=sample_note(runs_of(data, frame), frame),
        names=(f"{card.quantity} in float32 (as plotted)", f"{card.quantity} in float64 (the mechanism)"),
    )]


def with_cards(story: Story, cards: Sequence[Card]) -> Story:
    """``story`` with the statements and rows of its cards (those whose arm is one of its arms); an arm
    the story lacks, or a key it already has, is one line."""
    mine = [c for c in cards if c.story == story.name]
    if not mine:
        return story
    arms = [a.name for a in story.arms]
    for card in mine:
        if card.arm_name not in arms:
            raise RankCollapseError(f"card {card.name}: story {story.name} has no arm "
                                    f"{quote(card.arm_name)}; allowed: {', '.join(arms)}")
        if card.key in {s.key for s in story.statements}:
            raise RankCollapseError(f"card {card.name}: key {card.key!r} is already a statement of story "
                                    f"{story.name} (declared twice)")
    statements = {c.key: c.statement_of() for c in mine}
    claims = story.claims

    def with_card_rows(sd: StoryData) -> list[Any]:
        return [*claims(sd), *(row for c in mine for row in card_rows(c, sd, statements[c.key]))]

    return dataclasses.replace(story, statements=(*story.statements, *statements.values()),
                               claims=with_card_rows)
