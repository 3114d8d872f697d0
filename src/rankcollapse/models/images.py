"""What a vision encoder reads: images ``[b, C, H, W]`` cut into patch tokens (ViT).

Index letters: b batch (samples), C channels, H/W pixels, n tokens, d features.

A ViT turns an image of ``H x W`` pixels into ``n = 1 + (H / p_h)(W / p_w)`` tokens: one CLS token and
one token per patch of ``p_h x p_w`` pixels (224 px, patches of 16: 1 + 14 x 14 = 197). The token count is
set by the image and the patch size, never by ``--tokens`` (:func:`check_tokens`).

:class:`ImageGeometry` is a model's image as its config states it (channels, size, patch, and the
normalisation of its image processor, ``pixel_values = (u - mean) / std`` for intensities ``u in [0, 1]``).
:func:`check_pixels` refuses, in one line, pixel values that are not a finite float tensor of the model's
shape. :func:`random_pixels` is the seeded default input: i.i.d. uniform intensities ``u ~ U[0, 1)`` per
pixel and channel, normalised as the model's processor would (ViT's mean = std = 0.5 gives
``U[-1, 1)``): white noise, the image analogue of random tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.draws import uniform
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

__all__ = ["IMAGE_MEAN", "IMAGE_STD", "ImageGeometry", "check_pixels", "check_tokens", "random_pixels",
           "read_pixel_values"]

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
    def patches(self) -> int:
        """``(H / p_h)(W / p_w)``: the patch tokens."""
        return (self.height // self.patch_height) * (self.width // self.patch_width)

    @property
    def tokens(self) -> int:
        """``n = 1 + (H / p_h)(W / p_w)``: the CLS token and the patch tokens."""
        return 1 + self.patches

    def describe(self) -> str:
        """``17 tokens (1 CLS + 4 x 4 patches of 8 px from a 32 x 32 px image)``."""
        gh, gw = self.height // self.patch_height, self.width // self.patch_width
        patch = (f"{self.patch_height} px" if self.patch_height == self.patch_width
                 else f"{self.patch_height} x {self.patch_width} px")
        return (f"{self.tokens} tokens (1 CLS + {gh} x {gw} patches of {patch} from a {self.height} x "
                f"{self.width} px image)")


def check_pixels(pixels: Any, geometry: ImageGeometry, what: str = "pixel_values") -> Tensor:
    """``pixels`` as a float tensor ``[b, C, H, W]`` of the model's image shape, every value finite; one
    line naming the bad shape, dtype or the first sample with a non-finite value otherwise."""
    if not isinstance(pixels, Tensor):
        raise RankCollapseError(f"{what} must be a float tensor [b, C, H, W], got {type(pixels).__name__}")
    want = geometry.shape
    if pixels.ndim != 4 or tuple(pixels.shape[1:]) != want or pixels.shape[0] < 1:
        raise RankCollapseError(
            f"{what} has shape {list(pixels.shape)}; allowed: [b, {want[0]}, {want[1]}, {want[2]}] with "
            f"b >= 1 (the model's {want[0]} channels and {want[1]} x {want[2]} px images)")
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
    pickle, the header checked before the data: four dimensions of the model's image shape, a float
    dtype), then every value checked finite. One line for any refusal."""
    import numpy as np

    from rankcollapse.edge.inputs import quote_path, read_npy

    shown = quote_path(path)

    def header(shape: tuple[int, ...], dtype: Any) -> None:
        if len(shape) != 4 or tuple(shape[1:]) != geometry.shape or shape[0] < 1:
            c, h, w = geometry.shape
            raise RankCollapseError(f"pixel values {shown} have shape {list(shape)}; allowed: "
                                    f"[b, {c}, {h}, {w}] with b >= 1 (the model's {c} channels and {h} x {w} "
                                    "px images)")
        if dtype.kind != "f":
            raise RankCollapseError(f"pixel values {shown} are {dtype}; allowed: float32 or float64 "
                                    "(normalised pixel values, as the model's image processor gives them)")

    array = read_npy(path, "pixel values", check=header)
    return check_pixels(torch.from_numpy(np.ascontiguousarray(array)), geometry, f"pixel values {shown}")
