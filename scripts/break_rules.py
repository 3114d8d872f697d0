"""Break the judging kit on purpose, one change at a time, and check that the rule tests catch each.

    python scripts/break_rules.py            # every break, prints caught / MISSED per break

Each break is a one-line edit of ``experiments/kit`` or ``engine/verdicts.py`` that changes what a rule
decides (a swapped comparison, a dropped condition, a wrong constant). The file is restored after each
run. A break the tests do not catch is a rule without a test that pins it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "rankcollapse" / "experiments"
TESTS = ["tests/experiments/test_kit_rules.py", "tests/experiments/test_verdict_words.py"]

#: (file under experiments/, text, replacement, what the break does)
BREAKS: list[tuple[str, str, str, str]] = [
    (
        "kit/statuses.py",
        "if r.hi < -tol and tail.hi < -tol:",
        "if r.hi < -tol or tail.hi < -tol:",
        "collapsing needs only one of the two rates",
    ),
    ("kit/statuses.py", "if r.lo > -tol and r.hi < tol:", "if r.lo > -tol:", "kept ignores growth"),
    (
        "kit/statuses.py",
        "    if i_end >= limit:",
        "    if i_end > 2 * limit:",
        "unstable needs twice the change",
    ),
    (
        "kit/rules.py",
        '{"collapsing": REPRODUCED, "at floor": REPRODUCED, "not collapsing": NOT_REPRODUCED}',
        '{"collapsing": REPRODUCED, "at floor": INCONCLUSIVE, "not collapsing": NOT_REPRODUCED}',
        "a SAN at the floor no longer counts as collapsed",
    ),
    (
        "kit/rules.py",
        'elif s_ln.name == "kept" and s_san.name in ("collapsing", "at floor"):',
        'elif s_ln.name == "kept" and s_san.name in ("collapsing",):',
        "ln_stops forgets a SAN at the floor",
    ),
    (
        "kit/rules.py",
        'elif s_ln.name in ("falling", "low"):',
        'elif s_ln.name in ("low",):',
        "ln_stops lets a falling LN curve pass",
    ),
    (
        "kit/rules.py",
        'elif s_c.name == "not collapsing" and s_l.name == "kept":',
        'elif s_c.name == "not collapsing" or s_l.name == "kept":',
        "kept_stable needs only one condition",
    ),
    (
        "kit/rules.py",
        "REPRODUCED if margin.decided and grow > 0 else INCONCLUSIVE",
        "REPRODUCED if True else INCONCLUSIVE",
        "skip_unstable drops 'more so deeper'",
    ),
    (
        "kit/rules.py",
        'floor = c.first_at_floor() if c.quantity == "mu_rel" else None',
        'floor = c.first_at_floor() if c.quantity == "none" else None',
        "full_stable forgets the floor",
    ),
    (
        "kit/rules.py",
        'v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)\n            word = {1: "slower"',
        'v = {-1: REPRODUCED, 1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)\n            word = {1: "slower"',
        "local_slower swaps faster and slower",
    ),
    (
        "kit/rules.py",
        "v = REPRODUCED if e.lo > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE",
        "v = REPRODUCED if e.mean > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE",
        "dqk_slows ignores the standard error",
    ),
    (
        "kit/rules.py",
        "sign, diff, se = _compare(eff[s], eff[g])",
        "sign, diff, se = _compare(eff[g], eff[s])",
        "dqk_global swaps global and sparse",
    ),
    (
        "kit/rules.py",
        "sign, diff, se = _compare(deep, shallow)",
        "sign, diff, se = _compare(shallow, deep)",
        "dqk_shallow swaps shallow and deep",
    ),
    (
        "kit/rules.py",
        'if s[t] >= th["full_rank_min"]:',
        'if s[-1] >= th["full_rank_min"]:',
        "full_rank looks at the last layer only",
    ),
    ("kit/rules.py", "if head[t] >= factor:", "if head[t] >= 1:", "sigma_ratio drops its margin"),
    (
        "kit/rules.py",
        'if diff > Z * se and m[-1] >= th["aniso_factor"] * iso:',
        "if diff > Z * se:",
        "cos_grows forgets the isotropic level",
    ),
    ("kit/rules.py", 'if np.min(low) < th["ratio_min"]:', "if False:", "dominant_sv forgets sigma_min"),
    ("kit/rules.py", 'if share >= th["share_min"]:', "if share > 0.5:", "initial_cos accepts a majority"),
    (
        "kit/rules.py",
        'tested = [(lab, v) for lab, v, floor in runs if not floor and v != "vacuous"]',
        'tested = [(lab, v) for lab, v, floor in runs if v != "vacuous"]',
        "a run at the floor tests the rate",
    ),
    (
        "kit/rules.py",
        "checks.append((label, rate < -limit,",
        "checks.append((label, rate < limit,",
        "collapses accepts a flat rate",
    ),
    (
        "kit/rules.py",
        "        if holds is None:\n",
        "        if holds is None and False:\n",
        "every_run treats a check not made as a failure",
    ),
    (
        "kit/rules.py",
        'if st.name in ("collapsing", "at floor", "too few samples"):',
        'if st.name in ("collapsing", "at floor", "too few samples", "not collapsing"):',
        "a growing SAN counts as a d_qk experiment",
    ),
    (
        "kit/judgement.py",
        "return max(self.n + 1, math.ceil(self.n * (Z * self.se / gap) ** 2))",
        "return max(self.n + 1, math.ceil(self.n * (self.se / gap) ** 2))",
        "needed n without the 2 se",
    ),
    (
        "kit/claims.py",
        "        for value in th.ranges[name]:",
        "        for value in th.ranges[name][:1]:",
        "threshold sensitivity looks at one end of a range only",
    ),
    (
        "kit/claims.py",
        "return bool(self.stand_in_for) and not self.pretrained",
        "return False",
        "a random init stands in for pretrained weights",
    ),
    (
        "engine/verdicts.py",
        "    if NOT_REPRODUCED in parts:\n",
        "    if False:\n",
        "combine_verdicts lets a failing part through",
    ),
    (
        "engine/verdicts.py",
        '(REPRODUCED, NOT_REPRODUCED): "reproduced as plotted; mechanism differs",',
        '(REPRODUCED, NOT_REPRODUCED): "not reproduced",',
        "the word table blames the paper for the mechanism",
    ),
]


def main() -> int:
    missed = 0
    for i, (rel, old, new, what) in enumerate(BREAKS, 1):
        path = SRC / rel
        text = path.read_text()
        if text.count(old) != 1:
            print(f"{i:2d}. CANNOT APPLY ({text.count(old)} matches): {what}")
            missed += 1
            continue
        path.write_text(text.replace(old, new))
        try:
            res = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
        finally:
            path.write_text(text)
        caught = res.returncode != 0
        missed += not caught
        print(f"{i:2d}. {'caught' if caught else 'MISSED'}: {what}")
    print(f"{len(BREAKS) - missed} of {len(BREAKS)} breaks caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
