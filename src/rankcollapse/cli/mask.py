"""`rankcollapse mask SPEC --tokens N [--layers L]`: graph facts of a mask or a schedule (text, JSON, png)."""

from __future__ import annotations

import json
from typing import Any

import typer

from rankcollapse.cli.app import app
from rankcollapse.core.names import quantity as q
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote


def _summary_lines(facts: dict[str, Any]) -> list[str]:
    n, radius = facts["n"], facts["radius"]
    centers = facts["center_nodes"]
    more = f", ... ({len(centers)} in all)" if len(centers) > 10 else ""
    shown = ", ".join(map(str, centers[:10])) + more
    sizes = f"{facts['closed_component_sizes'][:10]}{' ...' if facts['num_closed_components'] > 10 else ''}"
    lines = [
        f"mask {facts['spec']}  (n = {n}, {facts['edges']} allowed pairs incl. self-loops, "
        f"density {facts['edges'] / n**2:.4g})",
        f"  self-loops:               {'yes' if facts['self_loops'] else 'NO'}",
        f"  strongly connected:       {'yes' if facts['strongly_connected'] else 'no'} "
        f"({facts['num_components']} strongly connected components)",
        f"  closed components:        {facts['num_closed_components']} "
        f"(sizes {sizes})",
        f"  quasi-strongly connected: {'yes' if facts['quasi_strongly_connected'] else 'no'}",
        f"  center nodes:             {shown if centers else 'none'}",
        f"  radius:                   {radius if radius is not None else 'undefined (no center)'}",
    ]
    if radius is not None:
        lines.append(
            f"  best center:              {facts['best_center']} (center eccentricities "
            f"{radius}..{facts['max_center_eccentricity']})"
        )
    if facts["band"] is not None:
        lo, hi = facts["band"]
        lines.append(f"  band:                     {lo} <= j - i <= {hi}")
    if facts["theorem1_applies"]:
        lines.append(
            f"Theorem 1 applies: self-loops and a center node, so pure masked attention collapses "
            f"exponentially, mu(X(t)) <= C (1 - eps^r)^(t / r) with radius r = {radius}; "
            "a larger radius gives a slower rate bound (1 - eps^r)^(1/r)."
        )
    else:
        why = []
        if not facts["self_loops"]:
            why.append("some tokens lack self-loops")
        if not facts["quasi_strongly_connected"]:
            why.append(
                f"no center node ({facts['num_closed_components']} closed components, "
                "none reaches the others)"
            )
        lines.append(
            f"Theorem 1 does not apply: {'; '.join(why)}. Collapse to a single point need not happen "
            "(each closed component can keep its own limit)."
        )
    return lines


def _runs(values: list[Any]) -> str:
    """``9 x5, 1, 9 x5`` (run-length text of a list)."""
    out: list[str] = []
    k = 0
    while k < len(values):
        m = k
        while m < len(values) and values[m] == values[k]:
            m += 1
        value = "none" if values[k] is None else str(values[k])
        out.append(value + (f" x{m - k}" if m - k > 1 else ""))
        k = m
    text = ", ".join(out)
    return text if len(text) <= 160 else text[:157] + "..."


def _schedule_lines(facts: dict[str, Any], describe: str) -> list[str]:
    product = facts["product"]
    k = facts["layers_to_center"]
    first = facts["first_centers"]
    shown = ", ".join(map(str, first[:10])) + (f", ... ({len(first)} in all)" if len(first) > 10 else "")
    lengths = facts["theorem1_product"]["window_lengths"]
    centers = product["center_nodes"]
    lines = [
        f"schedule {describe}",
        f"  n = {facts['n']}; composed with the {facts['method']} path",
        f"  layer radii:              {_runs(facts['layer_radii'])}",
        f"  self-loops in all layers: {'yes' if facts['self_loops'] else 'NO'}",
        "  layers to a center:       "
        + (f"{k} (after {k} layers every token has heard from token(s) {shown})" if k is not None
           else f"none within {facts['layers']} layers"),
        f"  composed graph of all {facts['layers']} layers: {product['edges']} pairs, "
        f"{product['num_closed_components']} closed components, "
        f"{len(centers)} center nodes, radius "
        f"{product['radius'] if product['radius'] is not None else 'undefined (no center)'} "
        "(in passes through the whole stack)",
    ]
    if facts["theorem1_product"]["applies"]:
        lines.append(
            f"Theorem-1-style bound over the product (ours): {len(lengths)} windows of "
            f"{_runs(lengths)} layers, each with a token every token attends to through it: "
            "mu(X(L)) <= C prod_w (1 - eps^k_w)."
        )
    else:
        why = "some layer lacks self-loops" if not facts["self_loops"] else "no window of layers has a center"
        lines.append(f"Theorem-1-style bound over the product does not apply: {why}.")
    return lines


def _hasse_lines(hasse: dict[str, Any]) -> list[str]:
    """The limit of the composed flow (``masks.hasse``), in words."""
    sizes = hasse["component_sizes_max"]
    order = ("a partial order on the tokens themselves" if hasse["partial_order_on_tokens"]
             else f"a preorder: parts of up to {sizes} tokens that hear each other")
    return [
        f"composed flow (Li & Guo 2026's limit; {hasse['spec']} repeated without end):",
        f"  stops changing after:     {hasse['depth']} layer{'' if hasse['depth'] == 1 else 's'} "
        f"({hasse['limit_pairs']} pairs reached)",
        f"  condensation:             {hasse['components']} parts, "
        f"{'a DAG' if hasse['is_dag'] else 'NOT a DAG'}; {order}",
        f"  Hasse diagram:            {hasse['hasse_edge_count']} covering edges",
    ]


def _parse_int(text: str | None, flag: str, what: str, required: bool = True) -> int | None:
    """An integer option read here (not by Typer) so a missing or bad value is a one-line error."""
    if text is None:
        if required:
            raise RankCollapseError(f"missing option {flag} N ({what}); allowed: an integer >= 1")
        return None
    if len(text.strip().lstrip("+-")) > 40 and text.strip().lstrip("+-").isdigit():
        msg = f"{flag} {quote(text, 40)}... ({len(text)} digits) is too large; allowed: an integer >= 1"
        raise RankCollapseError(msg)
    try:
        value = int(text)
    except ValueError:
        got = quote(text, 40)
        raise RankCollapseError(f"{flag} {got} is not an integer; allowed: an integer >= 1") from None
    if value < 1 and flag != "--tokens":  # checked by the masks package ("sequence length n")
        raise RankCollapseError(f"{flag} {value} is invalid; allowed: an integer >= 1")
    return value


@app.command("mask")
def mask_command(
    spec: str = typer.Argument(None, help="Mask spec, e.g. causal, window:w=4, 'causal&window:w=4', "
                               "'block:size=8|prefix:k=2', 'document:lengths=3,5&causal'. Families: "
                               "complete, causal, window:w, causal-window:w, dilated:w,dilation, "
                               "strided:stride, block:size, prefix:k, longformer:w,global, "
                               "bigbird:w,global,random,seed, sinks:w,sinks, random:p,seed, "
                               "document:lengths, tree:parents, file:PATH. A schedule (one mask per layer): "
                               "'causal-window:w=511*5;causal', repeated to --layers (docs/masks.md)."),
    tokens: str = typer.Option(None, "--tokens", metavar="N", help=q("tokens").help("an integer >= 1")),
    layers: str = typer.Option(None, "--layers", metavar="L", help=q("layers").help(
                               "analyse SPEC as a per-layer schedule repeated to L layers: the composed "
                               "graph, layers to a center, the bound")),
    hf_config: str = typer.Option(None, "--hf-config", metavar="CONFIG.json",
                                  help="Use a Hugging Face model's own per-layer schedule from its "
                                  "config.json (a file or a model folder) instead of SPEC; --layers must "
                                  "then be its depth."),
    model: str = typer.Option(None, "--model", metavar="NAME",
                              help=q("model").help("use its per-layer schedule (as 'analyze --model': "
                              "random:gpt2, tiny:gemma3_text, gemma3-270m, a folder) read from its "
                              "config, no weights loaded; --layers must then be its depth")),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (keys: docs/masks.md)."),
    full: bool = typer.Option(None, "--full/--summary", help="JSON: list per-token arrays (hop distances, "
                              "center eccentricities, closed components) in full, or only histograms. "
                              "Default: full iff N <= 4096. center_nodes is always listed in full."),
    plot: str = typer.Option(None, "--plot", metavar="FILE.png",
                             help="Draw the mask matrix with its center nodes into FILE.png (one mask, "
                             "not a schedule)."),
    hasse: bool = typer.Option(False, "--hasse", help="Also say where the composed flow ends up (the mask, "
                               "or the schedule's period, repeated without end): the layers after which it "
                               "stops changing, its condensation and Hasse diagram (JSON key 'hasse')."),
) -> None:
    """Graph facts of a mask (edge j -> i iff token i attends to j): connectivity, centers, radius."""
    from rankcollapse.masks.entry import MaskQuery, mask_facts

    length = _parse_int(tokens, "--tokens", "sequence length")
    depth = _parse_int(layers, "--layers", "number of layers", required=False)
    given = [f for f, v in (("SPEC", spec), ("--hf-config", hf_config), ("--model", model)) if v is not None]
    if len(given) > 1:
        raise RankCollapseError(f"give one of SPEC, --hf-config, --model; got {' and '.join(given)}")
    if not given:
        raise RankCollapseError("missing argument SPEC (a mask spec or a schedule); "
                                "see 'rankcollapse mask --help'")
    source: Any = hf_config
    if model is not None:
        from rankcollapse.models.registry import model_config

        source = model_config(model)
    query = MaskQuery(spec=spec, tokens=length, layers=depth, hf_config=source, full=full,
                      plot=plot, hasse=hasse)
    found = mask_facts(query)
    if as_json:
        typer.echo(json.dumps(found.facts))
        return
    schedule = found.schedule
    lines = _summary_lines(found.facts) if schedule is None else _schedule_lines(found.facts, schedule)
    if "hasse" in found.facts:
        lines += _hasse_lines(found.facts["hasse"])
    for line in lines:
        typer.echo(line)
    if found.plot is not None:
        typer.echo(f"plot: {found.plot}")
