"""The mask families by spec name (``file:PATH`` is handled by the parser)."""

from __future__ import annotations

from rankcollapse.masks.butterfly import Butterfly
from rankcollapse.masks.families import (
    Block,
    Causal,
    CausalWindow,
    Complete,
    Dilated,
    Family,
    Longformer,
    Prefix,
    Sinks,
    Strided,
    Window,
)
from rankcollapse.masks.fixed import Document, Tree
from rankcollapse.masks.seeded import BigBird, RandomMask
from rankcollapse.masks.two_stream import BlockTwoStream

FAMILIES: dict[str, type[Family]] = {
    f.name: f
    for f in (Complete, Causal, Window, CausalWindow, Dilated, Strided, Block, Prefix, Longformer, BigBird,
              Sinks, RandomMask, Document, Tree, BlockTwoStream, Butterfly)
}
"""Parameterised families by name."""

ALL_FAMILY_NAMES: tuple[str, ...] = (*FAMILIES, "file")
