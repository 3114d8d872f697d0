"""The one glossary: every term a claim row, a caption or the report uses, defined once.

The report prints the entries whose term occurs on its page; ``docs/glossary.md`` is generated from
this dict (``scripts/write_glossary.py``). Thresholds are named here by role; their values are in
each story's YAML and printed in every row that uses them. The quantities (mu, mu_rel, samples, tokens,
depth, mode, d_qk) are the name table's own entries (``core.names``), under their ASCII key and their
symbol (``mu_rel / μ_rel``), so a row that writes either is glossed.
"""

from __future__ import annotations

from collections.abc import Iterable

from rankcollapse.core.names import glossary_entries

GLOSSARY: dict[str, str] = {
    # verdicts and rows
    "as plotted": "the verdict on the quantity the paper plots (raw mu, sigma_min, ...), in the paper's "
    "dtype "
    "(float32)",
    "mechanism": "the verdict on what drives it: mu_rel against the precision floor, float64 beside float32 "
    "(n/a where a statement has no separate mechanism)",
    "reproduced": "the measured data satisfy the rule printed with the statement",
    "not reproduced": "the measured data contradict the rule",
    "inconclusive": "no data, too few samples, or evidence pointing both ways",
    "mechanism differs": "the plotted quantity behaves as the paper says, but mu_rel shows another cause "
    "(the token norm, or the precision floor)",
    "confirmed (ours) / refuted (ours)": "the verdict words of our own extensions, never the paper's "
    "'reproduced'",
    "as stated (stand-in) / otherwise (stand-in)": "the verdict words of a stand-in row: how the stand-in "
    "behaves, not a verdict on the paper's checkpoint; counted apart from the paper's tally",
    "consistent: none found in the search": "the word of a conjecture that nothing of a kind exists "
    "(App. F.4's attracting equilibria) when our search found none: a search cannot prove it, so it is "
    "never 'reproduced' (its as-plotted verdict reads 'consistent')",
    "consistent: proven": "the word of a statement a proof settles (App. F.4's full rank, by "
    "Perron-Frobenius; a span that holds by construction): the run checks the proof's arithmetic, it does "
    "not reproduce an observation; never 'reproduced'",
    "decided by": "the condition (mask, dtype, mode, layer) whose comparison decided the row: the first "
    "failing condition of a 'not reproduced', the weakest condition of a 'reproduced', the first open one "
    "of an undecided row; its interval is the one the row prints",
    "tested at r = 1 only": "a scope note: the bound was non-vacuous (and so tested) only at graph radius 1; "
    "at larger radii it says nothing about the rate",
    "untested": "the paper's weights are not available here and no pretrained stand-in exists; a random init "
    "never stands in for pretrained weights",
    "paper setting": "origin of a row: the paper's own configuration (a theorem: an instance that meets its "
    "hypotheses)",
    "follow-up setting": "origin of a row that judges a later paper's statement (Wu 2025, Herasimchyk 2026, "
    "Cirrincione 2026, Karagodin 2025, ...) in its own setting: counted in that paper's section only, never "
    "in the NeurIPS paper's tally",
    "stand-in": "origin of a row: other pretrained weights judged in place of the paper's checkpoint "
    "(named in "
    "the row, with why they may differ)",
    "extension": "origin of a row: our own setting (Gaussian SAN, bundled models at our sizes) or our own "
    "statement",
    "threshold-sensitive": "the verdict changes when a threshold the paper never gives moves inside its "
    "documented range (ranges: in the story's YAML)",
    "provisional": "judged at the rule's minimum sample size (min_samples): more samples may change it",
    "would decide it": "the samples (or networks) that would decide an undecided comparison at the "
    "observed spread ('about 40 samples would decide it'): the least m with m > n (z(m) se / |value - "
    "threshold|)^2 for n units now, since se shrinks like 1 / sqrt(n) (a share: the least m at which the "
    "Wilson interval excludes the threshold)",
    "undecided": "a row whose interval still straddles its threshold (or with fewer than min_samples "
    "samples, or one network): it says 'undecided at 4 samples' (or networks) and the sample size that "
    "would decide it instead of a verdict word",
    "z(n)": "the critical value of an interval over n units: the Student t quantile 1 - 0.0455 / (2 K m) "
    "with n - 1 degrees of freedom (2.0 for large n, one look and one condition; 3.31 at n = 4); K = the "
    "looks of a sequential run, m = the conditions of the row (both Bonferroni)",
    "network (unit)": "at random initialisation a statement is about networks, so the unit of sampling is "
    "the weight draw: each seed is one network, its excerpts are averaged first, and intervals are over "
    "the networks' means ('4 networks'); a pretrained model is one fixed network whose unit is the "
    "excerpt",
    "conditions (Bonferroni)": "a row that reads 'any condition fails -> not reproduced' over m conditions "
    "(masks x dtypes, layers, pairs) judges each at level 0.0455 / m, so the row's chance of a wrong "
    "'not reproduced' stays at most 0.0455",
    "Wilson interval": "the interval of a share (a proportion of samples) at the same level: it stays "
    "inside [0, 1] and is not degenerate at 0 % or 100 %; for a share over networks, the wider of it and "
    "the t interval over the networks' shares",
    "sequential": "reproduce --until-decided: more seeds for the conditions of undecided rows, doubling n "
    "at each of K planned looks, every look judged at level 0.0455 / K, until decided, the cap "
    "(--max-samples) or the budget (--budget); each row says why its sampling stopped",
    "cause": "why a row is not plainly reproduced, one of: precision floor, norm effect, stand-in differs, "
    "not testable, sample too small, non-finite, threshold, bound vacuous, structural limit, untested, "
    "no data, failed runs, measured otherwise",
    # quantities
    **glossary_entries(),
    "floor": "the precision floor, 32 eps of the dtype (float32 3.8e-6, float64 7.1e-15): mu_rel at or below "
    "it is rounding noise, a collapsed curve, never a stable level; raw mu's floor is 32 eps ||X||_F on "
    "the same samples (drawn dotted in each series' colour on raw-mu panels)",
    "underflow": "raw mu rounded to exactly 0 in the dtype (counted at its smallest normal number)",
    "rate": "the mean per-layer log rate of a curve, (log q(b) - log q(a)) / (b - a) over samples, printed "
    "as the per-layer factor x exp(rate) with the log rate beside it: x0.3/layer = falls to 30% per layer; "
    "always measured before the precision floor (b at most the last layer where no sample is at the floor; "
    "fewer than 2 layers above it: no rate, the row says 'precision floor')",
    "±": "after a number: z(n) standard errors of the mean over samples (about 2); 'for sure' = the whole ± "
    "interval on one side. A band in a figure is ± 1 sample std",
    "std": "the sample standard deviation over samples, sqrt(sum (v - mean)^2 / (n - 1)), everywhere",
    "sample size": "the sample size of a row, in its unit: '4 networks' (weight seeds) for a random init or "
    "a simulation's random matrices, '8 samples' (excerpts) for pretrained weights, '12 runs' for a per-run "
    "check; never written n, which counts tokens (N = 128 tokens per excerpt)",
    "I(t)": "|mean log change of mu since X(0)| + its std over samples: the typical change of a sample's "
    "curve",
    "SRank": "stable rank ||X||_F^2 / ||X||_2^2 (App. F.2): between 1 and the rank",
    "phi(0)": "the smallest pairwise cosine of the initial embeddings X(0); Corollary 1 needs phi(0) >= 0",
    "full-rank share": "the share of samples whose numerical rank reaches rank_max, the largest rank the "
    "input "
    "allows (distinct rows; an embedding's width): a structural limit is not a failure",
    "rank tolerance": "torch.linalg.matrix_rank's: a singular value counts above max(N, d) eps sigma_max; "
    "relative to sigma_max it is 9e-5 in float32 and 1.7e-13 in float64 (N = 128, d = 768)",
    "isotropic": "the mean |cos| of independent Gaussian tokens of the same size, sqrt(2 / (pi d))",
    # curve statuses
    "collapsing": "log rate over all layers and over the last half below -rate_tol for sure (steady decay)",
    "not collapsing": "log rate over the last half above -rate_tol for sure ('levels off' after an early "
    "drop)",
    "at floor": "at least half of the samples at the precision floor: mu_rel <= 32 eps, or raw mu <= 32 eps "
    "||X||_F on the same samples (or underflowed to 0); a curve at the floor is never 'kept'",
    "kept": "no decreasing trend: flat from the first block's output X(1) to the last layer and over the "
    "last half (log rates within ±rate_tol for sure), never at the floor and, for mu_rel, at least "
    "keep_min at every layer",
    "falling / growing": "log rate from X(1) or over the last half below -rate_tol / above +rate_tol for "
    "sure",
    "low": "flat but below keep_min",
    "stable / unstable (curve)": "I(L) < unstable_min / 2 / I(L) >= unstable_min or non-finite values",
    "overflow": "some value turned non-finite (inf or NaN) in the run's dtype; never counted as collapse",
    # models, modes, masks
    "SAN": "self-attention network: attention layers only (the mode attn)",
    "attn / attn+skip / attn+ln / attn+skip+ln / full": "the paper's five modes: SAN; SAN + skip; SAN + "
    "the "
    "model's own LayerNorm; SAN + skip + LayerNorm after the skip (post-LN); the standard transformer",
    "attn+sphere": "the theory's LayerNorm (x / ||x||, no centring, no gain) after attention, in the "
    "simulator",
    "window:w=W": "token i attends to j iff |i - j| <= W (the paper's sliding window is w = 1); "
    "causal-window:w=W: 0 <= i - j <= W",
    "radius": "the longest distance from a center node to any node (Definition 5); smallest over centers",
    "Gaussian SAN": "our simulator: Gaussian tokens, Gaussian W_Q, W_K, W_V per layer (extension)",
    # theorems and equilibria
    "eps": "epsilon of Theorem 1: the smallest attention weight on a mask edge over the whole run",
    "ρ": "a bound's per-layer rate: (1 - eps^r)^{1/r} (Theorem 1) or (1 - n eps^{2r})^{1/(2r)} "
    "(Theorem 2, Corollary 1)",
    "vacuous": "rho^T > 1/2: the bound falls by less than a factor 2 over the run's T layers: it says "
    "nothing",
    "consistent": "the measured tail rate of mu is no slower than rho (a run at the floor tests no rate)",
    "rate_exceeded": "mu falls more slowly than the bound allows: C would have to grow with depth",
    "tail rate": "the measured per-layer factor of mu over the second half of the layers above the floor",
    "residual": "||F(X*) - X*||_F: how far a claimed equilibrium X* is from being fixed by the map F",
    "spectral radius": "the largest |eigenvalue| of the map's Jacobian on the tangent space of the product "
    "of "
    "spheres; < 1 means locally attracting",
    "unstable / neutral / stable direction": "tangent directions whose eigenvalue has |lambda| > 1, = 1 "
    "(within 1e-9) and < 1",
    "hyperbolic": "an equilibrium with no neutral direction (no |lambda| = 1): its stability is decided by "
    "the "
    "linearisation",
    "algebraic": "convergence like t^(-a) (a power of the depth), not exponential: what a neutral direction "
    "gives",
    "paper family": "Theorem 3's equilibria as the paper builds them: the first N - k + 1 tokens at e_d, "
    "then "
    "the Jordan chain with a free sign per token (2^k of rank k)",
    "returning share": "the share of starts 1e-3 away from an equilibrium that come back within 1e-3, under "
    "two protocols: token 1 held at e_d (the paper's §4.3.2 assumption that earlier tokens have converged) "
    "and every token perturbed",
    "directional starts": "one start 1e-4 away along each stable tangent eigendirection of an equilibrium; "
    "it returns when its distance halves within twice the layers its eigenvalue needs: 'stable in certain "
    "directions', checked on the map itself",
    "saddle": "an equilibrium with both stable and unstable tangent directions; an equilibrium with no "
    "stable direction (only unstable and neutral ones) is not a saddle",
    "red segment": "the arc of token 2's starts (token 1 at (0, 1)) that converges to B: Fig. 1's red arc",
    "meet": "both tokens end at the same point (mu_rel below the floor): the pair collapsed",
    # collapse while it trains (the story training)
    "effective rank": "exp(H(p)) of a sample's singular values s_k, p_k = s_k / sum_k s_k, H(p) = -sum_k p_k "
    "log p_k (Roy & Vetterli 2007): 1 for rank one, min(N, d) when all singular values are equal; the "
    "mean over the probe's excerpts",
    "RankMe": "the effective rank of a representation (Garrido et al. 2023), as arXiv 2509.23024 tracks it "
    "over Pythia/OLMo checkpoints; here the effective rank of the last layer's hidden state, one layer only",
    "alpha-ReQ": "the decay exponent alpha of a representation's eigenspectrum (sigma_k ~ k^-alpha; Agrawal "
    "et al. 2022), the source's second measure of its phases; not measured here",
    "mean |cos|": "the anisotropy of a sample, 1 / (N (N - 1)) sum over i != j of |cos(x_i, x_j)| (a zero "
    "token counts 0): 1 when every token points along one line; the mean over the probe's excerpts",
    "sink rate": "the share of heads whose mean attention on the first token (over the queries) exceeds 0.3 "
    "(Gu et al.'s threshold), averaged over the probe's excerpts and, for a model's sink rate, over its "
    "layers",
    "sink onset": "a network's first probe step at which the model's sink rate reaches onset_level (never: "
    "no onset); the row reports the mean over networks with its interval, a finding of these models, "
    "compared with no other model's step count",
    "warm-up": "the first warmup training steps, over which the learning rate rises linearly from 0 to lr "
    "(lr min(1, step / warmup)); the dotted line in the training figure",
    "phases": "an early collapse, then an expansion, then a compression of a metric r over training "
    "(arXiv 2509.23024); judged on the last layer's effective rank, each phase a log ratio beyond phase_min "
    "for sure",
    "early collapse / warm-up collapse": "the first phase: log(r(t_min) / r(0)) < 0, with t_min the probe of "
    "least r up to early_factor x warmup steps (the collapse of the random init in the warm-up)",
    "expand / compress": "the later phases: expand = log(r(t_peak) / r(t_min)), t_peak the probe of largest "
    "r after t_min; compress = log(r(T) / r(t_peak)) at the last probe T. A short run that shows neither is "
    "not testable, never refuted",
    "log(v(T) / v(0))": "the log ratio of a metric of the last layer at the last probe T to its value at "
    "initialisation (step 0), per network ('trained / init'); moved = outside ±move_min for sure",
    "probe": "the fixed held-out batch (probe excerpts from the corpus's tail, the same for every network) "
    "that the monitor measures at step 0 and every `every` training steps, without the [MASK] token",
    "post-ln / pre-ln / no-ln / no-skip": "the training story's blocks: LN(X + Attn(X)) then LN(Y + MLP(Y)) "
    "(BERT's); X + Attn(LN(X)) then Y + MLP(LN(Y)) (GPT-2's); X + Attn(X) then Y + MLP(Y); LN(Attn(X)) "
    "then LN(MLP(Y)) (post-LN without skips)",
    "masked-language modelling": "the encoder's objective (BERT's, without its 80/10/10 split): each "
    "position after the start token is replaced by [MASK] with probability mask_rate and the loss is the "
    "cross-entropy of the original byte there only; the decoder's is next-byte prediction",
    "not testable": "a cause: the statement's precondition fails in this setting, so it cannot speak to it "
    "(a SAN that does not collapse; a training run that ends before the statement's window, a sink "
    "present at step 0, a rank already at its least value 1 at step 0, a phase reported over long "
    "pretraining); the row says what would test it",
}


def terms_used(texts: Iterable[str], glossary: dict[str, str] | None = None) -> dict[str, str]:
    """The glossary entries whose term occurs in some of ``texts`` (in the glossary's order)."""
    table = GLOSSARY if glossary is None else glossary
    blob = "\n".join(texts)
    return {term: text for term, text in table.items() if _occurs(term, blob)}


def _occurs(term: str, blob: str) -> bool:
    parts = [p.strip() for p in term.split(" / ")] if " / " in term else [term]
    parts = [p.split(" (")[0] if p.endswith(")") and " (" in p else p for p in parts]
    return any(p and p in blob for p in parts)
