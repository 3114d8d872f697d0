"""Thin task adapter over ``models.key_bias``: one model's sink measure and key-bias values per excerpt, layer
and head, as rows (Gu et al., ICLR 2025: the first token as a key bias).

:func:`model_key_bias` builds a ``KeyBiasConfig`` from a run's params (unknown keys are an error; besides them
``stand_in_for``, what these weights stand in for in the story's claim), calls
``models.key_bias.measure_key_bias`` (nothing here measures) and returns one ``kind = head`` row per excerpt
(``sample``), layer ``t = 1..L`` and head: ``first_token_attention`` and the key-bias values
(``metrics.diagnostics.QUERY_KEY_NAMES``), with the model's columns (``model_label``, ``pretrained``,
``stand_in_for``, ``own_mask``) and ``samples`` (the run's excerpts) on every row.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.tasks.curves import LOAD_S, Execution, _execution, model_facts
from rankcollapse.metrics.diagnostics import QUERY_KEY_NAMES

__all__ = ["HEAD_VALUES", "MODEL_KEY_BIAS", "QUERY_KEY_NAMES", "model_key_bias"]

#: The per-head values of a ``kind = head`` row: the sink measure, then the key-bias values.
HEAD_VALUES: tuple[str, ...] = ("first_token_attention", *QUERY_KEY_NAMES)
#: Seconds of one layer for one 128-token excerpt (the model's own forward with the kernel's statistics and
#: the key-bias sums), 2-core machine: SmolLM2 8 excerpts x 30 layers took 9.4 s, MiniLM 8 x 6 5.8 s with the
#: load (2026-12). For estimates only.
KEY_BIAS_LAYER_SAMPLE_S = 0.03
#: Depth of the bundled models, from their configs (for the estimate only; another name counts 12 layers).
ESTIMATE_DEPTH: dict[str, int] = {"minilm": 6, "smollm2": 30, "mpnet": 12, "gemma3-270m": 18,
                                  "qwen2.5-coder-0.5b": 24}


def model_key_bias(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """One model's ``kind = head`` rows (module docstring)."""
    from rankcollapse.models.key_bias import HEAD_COLUMNS, KeyBiasConfig, measure_key_bias

    params = dict(params)
    stand_in_for = str(params.pop("stand_in_for", "") or "")
    cfg = config_from(KeyBiasConfig, params)
    device, batch_size = _execution(execution)
    m = measure_key_bias(cfg, on_layer, device, batch_size)
    model = {**m.model, "stand_in_for": stand_in_for or m.model["stand_in_for"]}
    shared = {"dtype": cfg.dtype, "samples": cfg.samples, **model}
    b, depth, heads = m.heads["first_token_attention"].shape
    rows = [
        {"kind": "head", "sample": s, "layer": t + 1, "head": h,
         **{k: float(m.heads[k][s, t, h]) for k in HEAD_COLUMNS}, **shared}
        for s in range(b) for t in range(depth) for h in range(heads)
    ]
    return RunOutput(rows, {**m.summary, "stand_in_for": model["stand_in_for"]})


def model_key_bias_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_key_bias` run (``KEY_BIAS_LAYER_SAMPLE_S`` per layer and excerpt,
    linear in the tokens)."""
    depth = ESTIMATE_DEPTH.get(str(params.get("model", "")), 12)
    scale = float(params.get("tokens", 128)) / 128.0
    return KEY_BIAS_LAYER_SAMPLE_S * depth * int(params.get("samples", 8)) * scale + LOAD_S


MODEL_KEY_BIAS = Task(model_key_bias, cost_s=model_key_bias_cost, identity_facts=model_facts)
