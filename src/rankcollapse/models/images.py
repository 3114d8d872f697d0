"""What a vision encoder reads: images ``[b, C, H, W]`` cut into patch tokens (ViT).

Index letters: b batch (samples), C channels, H/W pixels, n tokens, d features.

A ViT turns an image of ``H x W`` pixels into ``n = 1 + (H / p_h)(W / p_w)`` tokens: one CLS token and
one token per patch of ``p_h x p_w`` pixels (224 px, patches of 16: 1 + 14 x 14 = 197). The token count is
set by the image and the patch size, never by ``--tokens`` (:func:`check_tokens`).

A ViT learns one position per patch of the image size its config states. An image of another size (a
whole number of patches) reads the learned table resampled to its patch grid, as Hugging Face's
``ViTModel(..., interpolate_pos_encoding=True)`` does: :func:`interpolate_positions` (bicubic, the CLS
position kept). :func:`image_geometry` is the image a batch of pixels has, refused in one line where the
positions cannot be interpolated (a size that is not a whole number of patches; a model whose own grid or
patches are not square, which Hugging Face's interpolation does not handle).

:class:`ImageGeometry` is a model's image as its config states it (channels, size, patch, and the
normalisation of its image processor, ``pixel_values = (u - mean) / std`` for intensities ``u in [0, 1]``).
:func:`check_pixels` refuses, in one line, pixel values that are not a finite float tensor ``[b, C, H, W]``
of the model's channels and an image size it reads. :func:`random_pixels` is the seeded default input:
i.i.d. uniform intensities ``u ~ U[0, 1)`` per pixel and channel, normalised as the model's processor
would (ViT's mean = std = 0.5 gives ``U[-1, 1)``): white noise, the image analogue of random tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.draws import uniform
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

__all__ = ["IMAGE_MEAN", "IMAGE_STD", "ImageGeometry", "check_pixels", "check_tokens", "image_geometry",
           "interpolate_positions", "random_pixels", "read_pixel_values"]

#: ViT's image processor (``ViTImageProcessor``): intensities in [0, 1] normalised by mean 0.5, std 0.5.
IMAGE_MEAN: float = 0.5
IMAGE_STD: float = 0.5


def _pair(value: Any) -> tuple[int, int]:
    return (int(value[0]), int(value[1])) if isinstance(value, list | tuple) else (int(value), int(value))


@dataclass(frozen=True)
class ImageGeometry:
    """A model's image: ``channels`` C, ``height`` x ``width`` pixels, patches of ``patch_height`` x
    ``patch_width``; ``mean``, ``std``: its processor's normalisation. Checked on construction."""

    channels: int
    height: int
    width: int
    patch_height: int
    patch_width: int
    mean: float = IMAGE_MEAN
    std: float = IMAGE_STD

    def __post_init__(self) -> None:
        sizes = (self.channels, self.height, self.width, self.patch_height, self.patch_width)
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
            raise RankCollapseError(f"image sizes must be whole numbers >= 1, got {sizes}")
        if self.height % self.patch_height or self.width % self.patch_width:
            raise RankCollapseError(
                f"image {self.height}x{self.width} is not a whole number of patches of "
                f"{self.patch_height}x{self.patch_width}")
        if not self.std > 0:
            raise RankCollapseError(f"image std must be > 0, got {self.std}")

    @classmethod
    def from_config(cls, config: Any) -> ImageGeometry:
        """From a Hugging Face vision config (``num_channels``, ``image_size``, ``patch_size``)."""
        h, w = _pair(config.image_size)
        ph, pw = _pair(config.patch_size)
        return cls(int(config.num_channels), h, w, ph, pw)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``: one image's pixel values."""
        return (self.channels, self.height, self.width)

    @property
    def grid(self) -> tuple[int, int]:
        """``(H / p_h, W / p_w)``: the patch grid, rows x columns."""
        return (self.height // self.patch_height, self.width // self.patch_width)

    @property
    def square(self) -> bool:
        """A square grid of square patches: the only learned positions Hugging Face's ViT interpolates."""
        return self.height == self.width and self.patch_height == self.patch_width

    def at(self, height: int, width: int) -> ImageGeometry:
        """The same model reading images of ``height x width`` px (channels, patches and normalisation
        kept); checked on construction (a whole number of patches)."""
        return replace(self, height=height, width=width)

    @property
    def patches(self) -> int:
        """``(H / p_h)(W / p_w)``: the patch tokens."""
        return (self.height // self.patch_height) * (self.width // self.patch_width)

    @property
    def tokens(self) -> int:
        """``n = 1 + (H / p_h)(W / p_w)``: the CLS token and the patch tokens."""
        return 1 + self.patches

    def describe(self, own: ImageGeometry | None = None) -> str:
        """``17 tokens (1 CLS + 4 x 4 patches of 8 px from a 32 x 32 px image)``; with the model's ``own``
        image of another size, how its positions were resampled (``; positions: bicubic from the
        model's 4 x 4 patch grid (32 x 32 px)``)."""
        gh, gw = self.grid
        patch = (f"{self.patch_height} px" if self.patch_height == self.patch_width
                 else f"{self.patch_height} x {self.patch_width} px")
        text = (f"{self.tokens} tokens (1 CLS + {gh} x {gw} patches of {patch} from a {self.height} x "
                f"{self.width} px image)")
        if own is not None and (own.height, own.width) != (self.height, self.width):
            oh, ow = own.grid
            text += (f"; positions: bicubic from the model's {oh} x {ow} patch grid ({own.height} x "
                     f"{own.width} px)")
        return text


def image_geometry(shape: Any, own: ImageGeometry, what: str = "pixel_values") -> ImageGeometry:
    """The image of pixel values of ``shape`` ``[b, C, H, W]`` read by a model whose config states ``own``:
    ``own`` at ``H x W`` (:meth:`ImageGeometry.at`). One line where it cannot be read: not four dimensions,
    ``b < 1``, another channel count, ``H`` or ``W`` not a whole number ``>= 1`` of patches, or another size
    for a model whose positions cannot be interpolated (:attr:`ImageGeometry.square`)."""
    dims = [int(s) for s in shape]
    c, p = own.channels, own.patch_height
    sizes = f"H, W multiples of the patch size {p}" if own.patch_height == own.patch_width else (
        f"H a multiple of {own.patch_height}, W of {own.patch_width} (the patch size)")
    allowed = (f"allowed: [b, {c}, H, W] with b >= 1 and {sizes} (the model's {c} channels; its own images "
               f"are {own.height} x {own.width} px, another size reads its positions interpolated)")
    if len(dims) != 4 or dims[0] < 1 or dims[1] != c:
        raise RankCollapseError(f"{what}: shape {dims}; {allowed}")
    h, w = dims[2], dims[3]
    if h < own.patch_height or w < own.patch_width or h % own.patch_height or w % own.patch_width:
        raise RankCollapseError(f"{what}: shape {dims}, {h} x {w} px is not a whole number of "
                                f"{own.patch_height} x {own.patch_width} px patches; {allowed}")
    if (h, w) != (own.height, own.width) and not own.square:
        oh, ow = own.grid
        raise RankCollapseError(
            f"{what}: shape {dims}, another size than the model's {own.height} x {own.width} px, needs its "
            f"positions interpolated, which Hugging Face's ViT does only from a square grid of square "
            f"patches (this model: {oh} x {ow} patches of {own.patch_height} x {own.patch_width} px); "
            f"allowed: [b, {c}, {own.height}, {own.width}]")
    return own.at(h, w)


def interpolate_positions(table: Tensor, grid: tuple[int, int]) -> Tensor:
    """A ViT's learned positions resampled to another patch grid, as Hugging Face's
    ``ViTEmbeddings.interpolate_pos_encoding`` (``interpolate_pos_encoding=True``).

    ``table`` ``[1, 1 + g^2, d]``: the CLS position, then the ``g x g`` patch positions, row-major.
    Returns ``[1, 1 + g_h g_w, d]`` for ``grid = (g_h, g_w)``: the CLS position as it is, then
    ``P' = bicubic(P, (g_h, g_w))`` with ``P`` the patch positions as a ``[1, d, g, g]`` image
    (:func:`torch.nn.functional.interpolate`, ``mode="bicubic"``, ``align_corners=False``: Keys' cubic
    convolution, ``a = -0.75``, sampled at the centres of the new cells, edges clamped), in the table's
    dtype. The table's own grid gives it back unchanged (the same tensor)."""
    m, d = table.shape[1] - 1, table.shape[2]
    g = math.isqrt(m)
    if g * g != m:
        raise RankCollapseError(f"a ViT position table of {m} patch positions is not a square grid; "
                                "allowed: g x g positions (Hugging Face's interpolation)")
    gh, gw = grid
    if (gh, gw) == (g, g):
        return table
    patch = table[:, 1:].reshape(1, g, g, d).permute(0, 3, 1, 2)
    patch = torch.nn.functional.interpolate(patch, size=(gh, gw), mode="bicubic", align_corners=False)
    return torch.cat((table[:, :1], patch.permute(0, 2, 3, 1).reshape(1, gh * gw, d)), dim=1)


def check_pixels(pixels: Any, geometry: ImageGeometry, what: str = "pixel_values") -> Tensor:
    """``pixels`` as a float tensor ``[b, C, H, W]`` the model reads (:func:`image_geometry`: its
    channels, its image size or another whole number of patches), every value finite; one line naming the
    bad shape, dtype or the first sample with a non-finite value otherwise."""
    if not isinstance(pixels, Tensor):
        raise RankCollapseError(f"{what} must be a float tensor [b, C, H, W], got {type(pixels).__name__}")
    image_geometry(pixels.shape, geometry, what)
    if not pixels.is_floating_point():
        raise RankCollapseError(f"{what} has dtype {str(pixels.dtype).removeprefix('torch.')}; allowed: a "
                                "float tensor (normalised pixel values, as the model's image processor "
                                "gives)")
    finite = torch.isfinite(pixels).flatten(1).all(1)
    if not bool(finite.all()):
        first = int((~finite).nonzero()[0])
        count = int((~torch.isfinite(pixels)).sum())
        raise RankCollapseError(f"{what}: {count} non-finite value{'s' * (count > 1)} (NaN or inf), the "
                                f"first in sample {first}; allowed: finite pixel values")
    return pixels


def check_tokens(tokens: int | None, geometry: ImageGeometry, model: str) -> None:
    """Refuse a token count other than the image's (None: not given): ``--tokens`` does not apply to a
    vision model, whose token count is set by the image and the patch size."""
    if tokens is not None and tokens != geometry.tokens:
        raise RankCollapseError(
            f"--tokens {quote(tokens, 20)} does not apply to vision model {quote(model, 60)}: it reads "
            f"{geometry.describe()}; leave --tokens unset (or give {geometry.tokens})")


def random_pixels(geometry: ImageGeometry, samples: int, seed: int) -> Tensor:
    """``samples`` white-noise images, float32 ``[b, C, H, W]``: intensities ``u ~ U[0, 1)`` i.i.d. per
    pixel and channel (:func:`rankcollapse.core.draws.uniform`, a generator seeded with ``seed``),
    normalised ``(u - mean) / std`` as the model's image processor would. The same seed gives the same
    images on every run."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise RankCollapseError(f"samples must be a whole number >= 1, got {quote(samples, 20)}")
    u = uniform((samples, *geometry.shape), torch.Generator().manual_seed(int(seed)))
    return ((u - geometry.mean) / geometry.std).to(torch.float32)


def read_pixel_values(path: Any, geometry: ImageGeometry) -> Tensor:
    """A ``.npy`` file of pixel values ``[b, C, H, W]`` (``analyze --pixel-values``), as the tensor
    :func:`check_pixels` accepts: read by :func:`rankcollapse.edge.inputs.read_npy` (a regular file, no
    pickle, the header checked before the data: a shape :func:`image_geometry` reads, a float
    dtype), then every value checked finite. One line for any refusal."""
    import numpy as np

    from rankcollapse.edge.inputs import quote_path, read_npy

    shown = quote_path(path)

    def header(shape: tuple[int, ...], dtype: Any) -> None:
        image_geometry(shape, geometry, f"pixel values {shown}")
        if dtype.kind != "f":
            raise RankCollapseError(f"pixel values {shown} are {dtype}; allowed: float32 or float64 "
                                    "(normalised pixel values, as the model's image processor gives them)")

    array = read_npy(path, "pixel values", check=header)
    return check_pixels(torch.from_numpy(np.ascontiguousarray(array)), geometry, f"pixel values {shown}")
