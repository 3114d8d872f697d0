"""The judging contract: what a story is, and the words its statements are judged in.

Above the engine (a story's arms are the engine's tasks) and below the kit and the stories:

- ``story``: the :class:`Story` contract (statements, arms, claims, figures, headlines), :class:`Data`
  and :class:`StoryData` (an arm's slice of the run tables), ``discover_stories``;
- ``verdicts``: :class:`Verdict` and ``combine_verdicts`` (the only combiner), :class:`Origin`, the
  papers a row can judge, the one word table (``verdict_word``), :class:`Claim` (one row of the claims
  table) and ``tally`` (the one counter).
"""

from rankcollapse.experiments.contract.story import (
    Arm,
    Data,
    FigureSpec,
    Found,
    Statement,
    Story,
    StoryData,
    discover_stories,
    slice_data,
)
from rankcollapse.experiments.contract.verdicts import (
    INCONCLUSIVE,
    NA,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTED,
    VERDICTS,
    Claim,
    Origin,
    Verdict,
    combine_verdicts,
    tally,
    verdict_word,
)

__all__ = [
    "INCONCLUSIVE",
    "NA",
    "NOT_REPRODUCED",
    "REPRODUCED",
    "UNTESTED",
    "VERDICTS",
    "Arm",
    "Claim",
    "Data",
    "FigureSpec",
    "Found",
    "Origin",
    "Statement",
    "Story",
    "StoryData",
    "Verdict",
    "combine_verdicts",
    "discover_stories",
    "slice_data",
    "tally",
    "verdict_word",
]
