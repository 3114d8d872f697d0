"""Recomputing a stored design entry's numbers from its parameters (ours: the designed equilibria).

Spectral radius, transient growth and the basin-radius ladder of an entry of ``designed_data.py``, from its
``params`` alone (``construction.construct_designed``); used by ``scripts/regenerate_designed.py`` and tests.
"""

from __future__ import annotations

import torch

from rankcollapse.equilibria.construction import construct_designed
from rankcollapse.equilibria.design import LADDER, LADDER_SAMPLES, LADDER_SEED, LADDER_STEPS, transient_growth
from rankcollapse.equilibria.finder import spectral_radius, tangent_jacobian, verify_equilibrium


def entry_spectral_radius(entry: dict) -> float:
    """Tangent spectral radius of a design entry's equilibrium (d = k), recomputed from its parameters."""
    con = construct_designed(entry, int(entry["k"]))
    return spectral_radius(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk)


def entry_transient_growth(entry: dict, horizon: int = 80) -> float:
    """``max_{t <= horizon} ||J^t||_2`` of the tangent Jacobian of a design entry (d = k)."""

    con = construct_designed(entry, int(entry["k"]))
    return transient_growth(tangent_jacobian(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk), horizon)


def entry_basin_fraction(entry: dict, radius: float) -> float:
    """Share of ``LADDER_SAMPLES`` inputs ``radius`` around an entry's equilibrium (seed ``LADDER_SEED``,
    d = k) that converge to it within ``LADDER_STEPS`` layers."""

    con = construct_designed(entry, int(entry["k"]))
    init = con.neighbourhood_inputs(LADDER_SAMPLES, radius, torch.Generator().manual_seed(LADDER_SEED))
    eq = verify_equilibrium(
        con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, steps=LADDER_STEPS, init=init
    )
    return eq.basin_fraction


def basin_ladder(entry: dict) -> tuple[float, float]:
    """(basin_radius, fraction): the largest :data:`LADDER` radius where at least half the inputs converge."""
    for radius in LADDER:
        frac = entry_basin_fraction(entry, radius)
        if frac >= 0.5:
            return radius, frac
    return 0.0, 0.0
