"""One name per quantity: the table that the CLI's help, the CSV columns, the figure labels and the
glossary read.

Each :class:`Quantity` has one ASCII ``key`` (its Python field, its glossary key), its CLI ``flag``,
its CSV ``column``, its figure ``label``, its ``symbol`` as the paper and the docs write it, and one
line of ``definition``. A quantity has one spelling per surface: an old flag or config field is
refused like any unknown one. What stored data calls a quantity is kept as it was (``stored``: a run's
identity hashes its params, and files an earlier release wrote keep their keys): :func:`from_stored`
and :func:`read` map those keys to the table's, silently.

Index letters (docs/ARCHITECTURE.md): b samples, n/i/j tokens (the paper's N is their count), d
features, h heads, t layers (L the depth).

>>> QUANTITIES["samples"].flag
'--samples'
>>> from_stored({"n": 8, "batch": 2, "preset": "attn"}, ("tokens", "samples", "mode"))
{'tokens': 8, 'samples': 2, 'mode': 'attn'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Quantity:
    """One measured or chosen quantity, under its one name everywhere.

    key: ASCII name (Python field, glossary key). flag: the CLI option (None: no command takes it).
    column: the CSV column (None: never a column). label: the figure label (plain text). symbol: as
    the paper and the docs write it. definition: one line. stored: the keys under which stored data
    holds it (a story's YAML params, kept since a run's identity hashes them; a run file or
    ``config.json`` an earlier release wrote), read silently under the table's name.
    """

    key: str
    flag: str | None
    column: str | None
    label: str
    symbol: str
    definition: str
    stored: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.key.isascii() or not self.definition or "\n" in self.definition:
            raise ValueError(f"quantity {self.key!r}: an ASCII key and a one-line definition")
        if self.flag is not None and not self.flag.startswith("--"):
            raise ValueError(f"quantity {self.key!r}: flag {self.flag!r} must start with --")

    def help(self, detail: str = "") -> str:
        """The CLI help text: the definition (capitalised), then ``detail``."""
        text = self.definition[0].upper() + self.definition[1:]
        return f"{text}{'; ' + detail if detail else ''}."


def _q(key: str, flag: str | None, column: str | None, label: str, symbol: str, definition: str,
       stored: tuple[str, ...] = ()) -> Quantity:
    return Quantity(key, flag, column, label, symbol, definition, stored)


def _metric(key: str, label: str, symbol: str, definition: str) -> Quantity:
    """A per-sample metric of ``rankcollapse.metrics``: its column is its key; no flag (``--metrics``)."""
    return _q(key, None, key, label, symbol, definition)


_TABLE: tuple[Quantity, ...] = (
    # what a run is: its sizes and its block
    _q("samples", "--samples", "samples", "samples", "b",
       "independent inputs measured through the same network (excerpts of a corpus, or the simulator's "
       "input draws); the unit of a row's interval unless the network is",
       stored=("batch",)),
    _q("tokens", "--tokens", "tokens", "tokens N", "N",
       "tokens per input, the rows of X (a model's start token included)",
       stored=("n",)),
    _q("d", "--d", "d", "features d", "d", "features per token, the columns of X"),
    _q("layers", "--layers", None, "depth L", "L",
       "depth: the layers applied, X(0) .. X(L)", stored=("steps",)),
    _q("model_layers", None, None, "the model's layers", "model L",
       "the model's own depth: the layers it has (a run's layers cycle them past it)", stored=("n_layers",)),
    _q("layer", None, "layer", "layer t", "t",
       "the index t of a hidden state X(t): 0 is the input (a model's embeddings), t after t layers"),
    _q("mode", "--mode", "mode", "block", "mode",
       "block assembly: the parts of each layer that run (attn = self-attention only, +skip, +ln a model's "
       "own LayerNorm, +sphere the theory's x / ||x||, full / transformer the whole block)",
       stored=("preset", "variant")),
    _q("placement", None, "placement", "norm placement", "placement",
       "where a layer's norm sits: post (after the residual sum), pre (before the sublayer), peri (before "
       "and after it), mix (post in the first quarter of the layers, pre after), ngpt (a step on "
       "the sphere)"),
    _q("mix_post_share", None, None, "Mix-LN post-LN share", "share",
       "Mix-LN's share of post-LN layers at the bottom of the stack (default 0.25, the Mix-LN paper's)"),
    _q("ngpt_step", None, None, "nGPT step", "alpha",
       "nGPT's step alpha in X <- Norm(X + alpha (Norm(f(X)) - X)) (default 0.05, nGPT's initial value)"),
    _q("heads", "--heads", "heads", "heads h", "h", "attention heads per layer"),
    _q("d_qk", "--d-qk", "d_qk", "d_qk", "d_qk",
       "the number under the square root of the logits, q k^T / sqrt(d_qk)"),
    _q("mask", "--mask", "mask", "mask", "M", "which keys j each query i attends to (a mask spec)"),
    _q("alibi_slope", "--alibi-slope", "alibi_slope", "decay slope m", "m",
       "the slope m >= 0 of the decay (ALiBi-type) bias -m |i - j| added to every layer's logits "
       "(Wu et al. 2025's decay mask gamma^(i - j), m = -log gamma)"),
    _q("rope_base", "--rope-base", "rope_base", "RoPE base", "base",
       "the base of rotary position embeddings: queries and keys turned pair k by p theta_k, theta_k = "
       "rope_scale base^(-2k/e) at position p (Su et al. 2021; Wu et al. 2025's RoPE)"),
    _q("rope_scale", "--rope-scale", "rope_scale", "RoPE frequency scale theta_1", "theta_1",
       "the factor on every rotary frequency, so the largest is theta_1 = rope_scale (1: plain RoPE)"),
    _q("dtype", "--dtype", "dtype", "dtype", "dtype", "the floating-point type of the computation (of the "
       "hidden states in half precision, whose metrics are reduced in float32 against its own floor)"),
    _q("seed", "--seed", "seed", "seed", "seed", "the seed of every random draw of a run"),
    _q("batch_size", "--batch-size", "batch_size", "batch size", "batch_size",
       "samples through a model at a time (an execution setting: the rows equal those of one batch)"),
    _q("text_file", "--text-file", None, "text file", "text file",
       "a UTF-8 text file the excerpts are drawn from instead of a corpus"),
    _q("pixel_values", "--pixel-values", None, "pixel values", "pixel values",
       "a vision encoder's input images [b, C, H, W], normalised as its image processor gives them (on the "
       "command line a .npy file)"),
    # who measured it
    _q("model", "--model", "model", "model", "model", "the model asked for, by a name rankcollapse.models "
       "loads"),
    _q("model_name", None, "model_name", "model", "model", "the model measured (a stand-in's own name "
       "where the asked checkpoint is not here)", stored=("name",)),
    _q("model_label", "--model-label", "model_label", "model", "model", "the measured model in words, for "
       "tables and figures", stored=("label",)),
    _q("model_kind", None, "model_kind", "model kind", "model kind",
       "where the model comes from: bundled, paper, random, tiny, local, simulated", stored=("kind",)),
    # the per-sample metrics (rankcollapse.metrics), one column each
    _metric("mu", "mu = ||X - 1 mean(X)||_F", "μ",
            "distance of the tokens from their mean, ||X - 1 mean(X)||_F (the paper's raw mu)"),
    _metric("mu_rel", "mu_rel = mu / ||X||_F", "μ_rel",
            "mu / ||X||_F: mu without the token norm (1 = no two tokens alike on average, 0 = collapsed)"),
    _metric("at_floor", "at the precision floor", "at floor",
            "1 where mu <= 32 eps ||X||_F, the precision floor of the dtype (rounding noise), else 0"),
    _metric("num_rank", "numerical rank", "rank",
            "the singular values of X above max(N, d) eps sigma_max (torch.linalg.matrix_rank)"),
    _metric("full_rank", "full-rank share", "full rank",
            "1 where the numerical rank reaches min(N, d), else 0"),
    _metric("sigma_min", "sigma_min", "σ_min", "the smallest singular value of X"),
    _metric("sigma_max", "sigma_max", "σ_max", "the largest singular value of X"),
    _metric("stable_rank", "stable rank", "SRank", "||X||_F^2 / ||X||_2^2, between 1 and the rank"),
    _metric("effective_rank", "effective rank", "erank",
            "exp(H(p)), p_k = s_k / sum s: the entropy of X's singular values (Roy and Vetterli)"),
    _metric("mean_abs_cos", "mean |cos|", "mean |cos|", "the mean |cosine| over pairs of distinct tokens"),
    _metric("mean_abs_cos_se", "standard error of mean |cos|", "se(mean |cos|)",
            "the standard error of a mean |cos| taken over the pairs of cos_rows sampled query tokens "
            "(0: every pair)"),
    _q("cos_rows", "--cos-rows", None, "sampled query tokens of mean |cos|", "m",
       "analyze: from 4 m tokens on, mean |cos| averages the pairs of m query tokens drawn without "
       "replacement (the same at every layer) and reports its standard error; all: every pair"),
    _metric("mean_signed_cos", "mean cos", "mean cos",
            "the mean signed cosine over pairs of distinct tokens"),
    _metric("token_speed", "token speed", "speed",
            "the mean chord ||u_i(t) - u_i(t-1)|| a layer turns each token's direction u_i = x_i / ||x_i|| "
            "by"),
    _metric("dong_residual", "Dong et al. residual", "res",
            "||X - 1 mean(X)||_{1,inf}: Dong et al.'s rank-collapse residual, at the mean token"),
    # the key-bias reading of attention sinks (Gu et al., ICLR 2025): one layer's queries and keys as its
    # attention function receives them (metrics.diagnostics; analyze --diagnostics, means over heads)
    _q("first_key_cos", None, "first_key_cos", "cos(q_i, k_0)", "cos(q_i, k_0)",
       "the mean over queries i >= 1 that may see the first key of the cosine between query i and key 0"),
    _q("key_cos", None, "key_cos", "cos(q_i, k_j), j >= 1", "cos(q_i, k_j)",
       "the mean over allowed pairs of queries i >= 1 and keys j >= 1 of their cosine: the baseline of "
       "first_key_cos"),
    _q("first_key_norm", None, "first_key_norm", "||k_0||", "||k_0||",
       "the norm of the first token's key (of the key head a query head reads)"),
    _q("key_norm", None, "key_norm", "||k_j||, j >= 1", "||k_j||",
       "the mean norm of the keys j >= 1: the baseline of first_key_norm"),
    _q("query_norm", None, "query_norm", "||q_i||", "||q_i||", "the mean norm of the queries"),
    _q("first_key_cos_gap", None, "first_key_cos_gap", "cos(q_i, k_0) - cos(q_i, k_j)",
       "cos(q_i, k_0) - cos(q_i, k_j)",
       "first_key_cos - key_cos: how much more the queries point at the first key than at the others"),
    _q("first_key_norm_log_ratio", None, "first_key_norm_log_ratio", "log(||k_0|| / ||k_j||)",
       "log(||k_0|| / ||k_j||)",
       "log(first_key_norm / key_norm): below 0 where the first key is shorter than the others"),
    # the residual stream's growth (metrics.growth) and the attention diagnostics (metrics.diagnostics;
    # analyze --diagnostics, the monitor): one column each (the diagnostics' per-head columns too)
    _q("stream_var", None, "stream_var", "stream variance", "Var(x)",
       "the mean over tokens of each token's variance over its features, 1/N sum_i Var_k(x_ik) (biased, as "
       "LayerNorm's)"),
    _q("layer_cos", None, "layer_cos", "consecutive-layer cosine", "cos(x_i(t-1), x_i(t))",
       "the mean over tokens i of the cosine between token i before and after a layer, "
       "cos(x_i(t-1), x_i(t))"),
    _q("massive_ratio", None, "massive_ratio", "max |x| / median |x|", "max |x| / median |x|",
       "the largest activation magnitude over the median one, max |x_nd| / median |x_nd| (Sun et al. 2024)"),
    _q("attention_entropy", None, "attention_entropy", "attention entropy", "H",
       "the mean over queries i of the entropy of attention row i, -sum_j A_ij log A_ij, in nats"),
    _q("first_token_attention", None, "first_token_attention", "attention on the first token", "A_i0",
       "the mean over queries i of the attention weight A_i0 on the first token"),
    _q("sink_rate", None, "sink_rate", "sink rate", "sink rate",
       "the share of heads whose first_token_attention exceeds a threshold (default 0.3, Gu et al. 2024)"),
    # a monitored training run (rankcollapse.monitor: one row per probe)
    _q("step", None, "step", "training step", "step",
       "the training step a monitor probed at: its count of steps, or the optimiser's global step it was "
       "given"),
    # attention's index letters (docs/ARCHITECTURE.md): a row and a column of A and of a mask
    _q("query_index", None, None, "query i", "i",
       "the position i of a token as it attends: a row of A and M"),
    _q("key_index", None, None, "key j", "j",
       "the position j of a token as it is attended to: a column of A and M"),
    # the equilibria of the LayerNorm dynamics (rankcollapse.equilibria, the theorem3 story)
    _q("equilibrium_rank", "--rank", "rank", "equilibrium rank", "k",
       "the rank k of an equilibrium X*: the number of independent directions its tokens span"),
    _q("target_rank", None, "k", "target rank k", "k",
       "the rank k an equilibrium was designed or searched for (the theorem3 story's designed and complete "
       "arms)"),
    _q("theta", None, "theta", "angle θ", "θ",
       "the angle of token 1 on the unit circle, x_1 = (cos θ, sin θ), in the N = d = 2 counterexample "
       "(token 0 held at the sink A)"),
    _q("ratio_y", None, None, "ratio y", "y",
       "X22 / X21: token 2's second coordinate over its first, on the left half of the circle (X21 < 0), in "
       "the paper's N = d = 2 construction (Lemma 11)"),
    # the composed flow of a mask (the hasse story) and the span of the tokens (the cirrincione story)
    _q("limit_depth", None, "depth", "limit depth L*", "L*",
       "the layers L* after which a mask's (or a schedule's) composed flow P_L = M_(L-1) ... M_0 stops "
       "changing (Li & Guo 2026)"),
    _q("pairs_share", None, "pairs_share", "|P_L| / n^2: share of pairs reached", "|P_L| / n^2",
       "the share of the n^2 (query, key) pairs the composed flow P_L has reached after L layers"),
    _q("span_floors", None, "span_floors", "span residual in relative floors (32 eps)",
       "span residual / 32 eps",
       "the residual of X(t)'s rows outside the row space of X(0) W_V(1) ... W_V(t), "
       "||X(t) - X(t) Q Q^T||_F / ||X(t)||_F, over the dtype's relative precision floor 32 eps"),
    # what a row of a table says about itself
    _q("sample", None, "sample", "sample", "sample", "the index of one sample (per-sample tables)"),
    _q("attn_min", None, "attn_min", "smallest attention weight", "eps",
       "the smallest attention weight on a mask edge at this layer (Theorem 1's eps; NaN when not tracked)"),
    _q("overflow", None, "overflow", "overflow", "overflow",
       "the share of samples whose values turned non-finite (inf or NaN) in the dtype; never collapse"),
    _q("finite", None, "finite", "finite share", "finite", "the share of samples whose values are finite"),
    _q("status", None, "status", "status", "status",
       "the row's numeric state: ok, overflow (non-finite) or underflow (exactly zero)"),
    _q("hidden_state", None, "hidden_state", "hidden state", "hidden state",
       "which hidden state a row measures, in Hugging Face's hidden_states numbering"),
    _q("model_layer", None, "model_layer", "model layer", "model layer",
       "the index of the model's own layer that produced the row's hidden state (cycled past its depth)"),
    _q("hook", None, "hook", "hook", "hook",
       "the row's hidden state as TransformerLens names it (blocks.{l}.hook_resid_post)"),
)

#: Every quantity, by its key.
QUANTITIES: dict[str, Quantity] = {q.key: q for q in _TABLE}

#: Summary columns of a per-sample metric: ``mu_min``, ``mu_max``, ``mu_std`` (over the samples).
SUMMARIES: tuple[str, ...] = ("min", "max", "std")


def _check_table() -> None:
    seen: dict[str, str] = {}
    for q in _TABLE:
        for spelling in (q.key, q.flag, *q.stored):
            if spelling is not None and seen.setdefault(spelling, q.key) != q.key:
                raise ValueError(f"{spelling!r} names both {seen[spelling]!r} and {q.key!r}")


_check_table()


def quantity(key: str) -> Quantity:
    """The quantity named ``key`` (KeyError: a name the table does not have is a bug, not user input)."""
    return QUANTITIES[key]


def label(key: str) -> str:
    """The figure label of ``key``."""
    return QUANTITIES[key].label


def column_of(name: str) -> Quantity | None:
    """The quantity whose CSV column is ``name``, one of its summaries (``mu_rel_max``) or one of its
    per-head columns (``first_key_cos_h3``); None if none."""
    head, _, k = name.rpartition("_h")
    for q in _TABLE:
        if q.column is None:
            continue
        if name == q.column or name in {f"{q.column}_{s}" for s in SUMMARIES} or (head == q.column and
                                                                                  k.isdigit()):
            return q
    return None


def read(record: Mapping[str, Any], key: str) -> Any:
    """``record[key]``, or, from a file an earlier release wrote, the value under its stored key
    (``stored``: ``label`` for ``model_label``, ``n`` for ``tokens``, ...), silently: stored data, not a
    user's spelling. None when neither is there.

    >>> read({"label": "my model"}, "model_label")
    'my model'
    """
    if key in record:
        return record[key]
    for old in QUANTITIES[key].stored:
        if old in record:
            return record[old]
    return None


def stored_names(names: Iterable[str], keys: Iterable[str]) -> dict[str, str]:
    """``{old: key}`` for each name of ``names`` that stores a quantity of ``keys`` under a kept old key
    (``n``, ``batch``, ``preset``, ``variant``, ``steps``); both spellings at once is one line.

    >>> stored_names(["run_id", "variant", "mask"], ("mode",))
    {'variant': 'mode'}
    """
    from rankcollapse.edge.errors import RankCollapseError

    present = set(names)
    out: dict[str, str] = {}
    for key in keys:
        for old in QUANTITIES[key].stored:
            if old in present:
                if key in present or key in out.values():
                    raise RankCollapseError(f"give {key} or its stored name {old}, not both")
                out[old] = key
    return out


def from_stored(params: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """Run params (or a stored record) with each quantity of ``keys`` under the table's name where they
    store it under a kept old key (:func:`stored_names`): no warning, since the stored keys are the run's
    identity or data an earlier release wrote, not a user's spelling. Both spellings at once is one line."""
    renames = stored_names(params, keys)
    return {renames.get(k, k): v for k, v in params.items()}


def glossary_entries() -> dict[str, str]:
    """Glossary entries of the quantities a report names: the term is the key, and the symbol where it
    differs (``mu_rel / μ_rel``), so a line that writes either is glossed."""
    entries: dict[str, str] = {}
    for key in ("mu", "mu_rel", "samples", "tokens", "layers", "mode", "d_qk"):
        q = QUANTITIES[key]
        term = q.key if q.symbol in (q.key, "") else f"{q.key} / {q.symbol}"
        where = [f"CLI {q.flag}"] * bool(q.flag) + [f"column {q.column}"] * bool(q.column)
        entries[term] = q.definition + (f" ({', '.join(where)})" if where else "")
    return entries
