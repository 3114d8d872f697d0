"""A run's mask at one length, parsed once at the edge: :func:`resolve_mask` -> :class:`ResolvedMask`.

The simulator (``rankcollapse.dynamics``) and the LayerNorm map (``rankcollapse.equilibria``) take a
mask as a spec string, a :class:`~rankcollapse.masks.Mask` or a bool tensor ``M [n, n]`` (``M[i, j]``
True iff query ``i`` may attend to key ``j``); this is the one place that turns any of them into the
dense matrix, its band and whether it is complete. ``ResolvedMask.matrix`` is the form the masked
softmax takes (:func:`rankcollapse.core.attention.masked_softmax`: None for the complete mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.base import Mask

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["ResolvedMask", "resolve_mask"]


@dataclass
class ResolvedMask:
    """The mask of a run at length n: the parsed ``Mask`` (None for a user matrix), its dense
    matrix bool [n, n], band (lo, hi) or None, completeness; ``radius`` from the graph analysis, on demand."""

    spec: str
    dense: Tensor
    band: tuple[int, int] | None
    complete: bool
    mask: Any = None
    _analysis: Any = None

    @property
    def matrix(self) -> Tensor | None:
        """``dense`` bool [n, n], or None when the mask is complete (the masked softmax's form)."""
        return None if self.complete else self.dense

    @property
    def analysis(self) -> Any:
        """The ``MaskAnalysis`` at this length (computed once, from the mask object itself)."""
        if self._analysis is None:
            from rankcollapse.masks.graph import analyze_mask

            n = self.dense.shape[0]
            if self.mask is None:
                self._analysis = analyze_mask(self.dense.cpu().numpy(), n)
            elif hasattr(self.mask, "analysis"):
                self._analysis = self.mask.analysis(n)
            else:
                self._analysis = analyze_mask(self.mask, n)
        return self._analysis

    @property
    def radius(self) -> int | None:
        r = self.analysis.radius
        return None if r is None else int(r)

    def documents(self) -> list[Tensor]:
        """The mask's independent parts (``Mask.documents``) as int64 index tensors; one part when
        the mask is connected (the whole sequence)."""
        import torch

        from rankcollapse.masks.fixed import from_dense

        n = self.dense.shape[0]
        mask = self.mask if self.mask is not None else from_dense(self.dense)
        return [torch.from_numpy(p.copy()) for p in mask.documents(n)]


def resolve_mask(mask: Mask | str | Tensor | None, n: int) -> ResolvedMask:
    """A parsed ``Mask``, a spec string (parsed here), a bool tensor [n, n] or None (the complete
    mask), at length n. A tensor of another shape or dtype, or any other type, is one line."""
    import torch

    from rankcollapse.edge.validate import check_int, check_tensor, type_name
    from rankcollapse.masks.spec import parse_mask

    n = check_int("n", n, low=1)
    if isinstance(mask, torch.Tensor):
        check_tensor("mask", mask, shapes=[(n, n)], floating=False, finite=False)
        if mask.dtype != torch.bool:
            raise RankCollapseError(f"mask matrix must be torch.bool ({n}, {n}), got {mask.dtype}")
        return ResolvedMask("<matrix>", mask.cpu(), None, bool(mask.all()))
    if mask is None:
        mask = "complete"
    if isinstance(mask, str):
        mask = parse_mask(mask.strip())
    if not isinstance(mask, Mask):
        raise RankCollapseError(f"mask must be a spec string, a Mask or a bool tensor, got {type_name(mask)}")
    return ResolvedMask(mask.spec, mask.dense(n), mask.band(n), bool(mask.is_complete(n)), mask)
