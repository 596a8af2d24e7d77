"""The four training views of Plench's image path, and the tabular identity views.

A view maps a uint8 image batch (B, H, W, C) (numpy or torch, any device) to a normalised float tensor
(B, C, H, W) on the same device. Random parameters come from an optional CPU ``torch.Generator``, so a
seeded generator gives the same views on every run and device. The strong and distill views loop over the
images (per-image random ops, as PLENCH's PIL pipeline): run them with ``torch.set_num_threads(1)`` or in
DataLoader workers, since intra-op threads on such small tensors only add overhead.

* CIFAR recipe (PLENCH ``data/datasets.py``; mean (0.4922, 0.4832, 0.4486), std (0.2456, 0.2419, 0.2605)):
  ``original`` normalise only; ``weak`` horizontal flip + random crop with 4 px zero padding; ``strong``
  random resized crop (scale 0.2-1) + flip + RandAugment (3 ops drawn with replacement from 14, uniform
  magnitudes, then a Cutout of side U(0, 0.5) x size filled with (125, 123, 114)); ``distill`` random resized
  crop + flip + a 16 px Cutout zeroed before normalisation.
* Digits recipe (8x8 grey, the offline stand-in; flips would change a digit's identity): ``weak`` random crop with
  1 px padding; ``strong`` random affine (±15°, ±1 px) + Gaussian noise (σ = 0.1) + 3x3 Cutout;
  ``distill`` random crop + 3x3 Cutout.
* Tabular: every view is ``x`` itself (as PLENCH's tabular items).

    views = views_for("PLCIFAR10_Aggregate")
    x_weak = views.weak(images, generator=torch.Generator().manual_seed(0))   # (B, 3, 32, 32) float32
"""
from __future__ import annotations

import math

import torch
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as TF

from shared.errors import ConfigError

VIEW_NAMES = ("original", "weak", "strong", "distill")
CIFAR_MEAN, CIFAR_STD = (0.4922, 0.4832, 0.4486), (0.2456, 0.2419, 0.2605)
DIGITS_MEAN, DIGITS_STD = (0.3053,), (0.3759,)  # the 1,797 scikit-learn digits scaled to 0..255
RANDAUGMENT_CUTOUT_FILL = (125, 123, 114)
DIGITS_SIZE = 8


# ------------------------------------------------------------------------------------------ building blocks
def to_float_chw(images) -> torch.Tensor:
    """uint8 (B, H, W, C) numpy or torch -> float32 (B, C, H, W) in [0, 1]."""
    return as_uint8_chw(images).float() / 255.0


def as_uint8_chw(images) -> torch.Tensor:
    """uint8 (B, H, W, C) numpy or torch -> uint8 (B, C, H, W) torch, same device."""
    images = torch.as_tensor(images)
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ConfigError(f"image views take a uint8 batch (B, H, W, C), got {images.dtype} {tuple(images.shape)}; "
                          "grey images need a trailing channel axis, e.g. images[..., None]")
    return images.permute(0, 3, 1, 2).contiguous()


def normalize(x: torch.Tensor, mean, std) -> torch.Tensor:
    """(x - mean) / std per channel, x (B, C, H, W) float."""
    shape = (1, -1, 1, 1)
    return (x - x.new_tensor(mean).view(shape)) / x.new_tensor(std).view(shape)


def random_hflip(x: torch.Tensor, generator=None) -> torch.Tensor:
    """Mirror each image of (B, C, H, W) left-right with probability 1/2."""
    flip = (torch.rand(len(x), generator=generator) < 0.5).to(x.device)
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)


def random_crop(x: torch.Tensor, padding: int, generator=None) -> torch.Tensor:
    """Zero-pad (B, C, H, W) by ``padding`` on every side and take a random H x W window per image."""
    B, _, H, W = x.shape
    padded = torch.nn.functional.pad(x, (padding,) * 4)
    top = torch.randint(0, 2 * padding + 1, (B,), generator=generator).to(x.device)
    left = torch.randint(0, 2 * padding + 1, (B,), generator=generator).to(x.device)
    rows = (top[:, None] + torch.arange(H, device=x.device))[:, None, :, None]  # (B, 1, H, 1)
    cols = (left[:, None] + torch.arange(W, device=x.device))[:, None, None, :]  # (B, 1, 1, W)
    batch = torch.arange(B, device=x.device)[:, None, None, None]
    channels = torch.arange(x.shape[1], device=x.device)[None, :, None, None]
    return padded[batch, channels, rows, cols]


def cutout(x: torch.Tensor, length: int, generator=None, fill: float = 0.0) -> torch.Tensor:
    """One ``length`` x ``length`` hole per image of (B, C, H, W), filled with ``fill``.

    The hole's centre is uniform over the pixels; it spans ``centre - length // 2`` to that + ``length`` and is
    clipped at the border (Cutout of DeVries & Taylor, 2017, as in PLENCH's distill view).
    """
    B, _, H, W = x.shape
    cy = torch.randint(0, H, (B,), generator=generator).to(x.device)
    cx = torch.randint(0, W, (B,), generator=generator).to(x.device)
    ys, xs = torch.arange(H, device=x.device), torch.arange(W, device=x.device)
    inside_y = (ys[None] >= cy[:, None] - length // 2) & (ys[None] < cy[:, None] - length // 2 + length)
    inside_x = (xs[None] >= cx[:, None] - length // 2) & (xs[None] < cx[:, None] - length // 2 + length)
    hole = (inside_y[:, :, None] & inside_x[:, None, :])[:, None]  # (B, 1, H, W)
    return x.masked_fill(hole, fill)


def _resized_crop_box(H: int, W: int, u: torch.Tensor, scale=(0.2, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop box (top, left, height, width) from uniforms ``u`` (10, 4)."""
    area = H * W
    for a_u, r_u, t_u, l_u in u.tolist():
        target = area * (scale[0] + (scale[1] - scale[0]) * a_u)
        aspect = math.exp(math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * r_u)
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= W and 0 < h <= H:
            return int(t_u * (H - h + 1)), int(l_u * (W - w + 1)), h, w
    in_ratio, (w, h) = W / H, (W, H)  # fallback: the central crop of the closest allowed aspect ratio
    if in_ratio < ratio[0]:
        h = round(W / ratio[0])
    elif in_ratio > ratio[1]:
        w = round(H * ratio[1])
    return (H - h) // 2, (W - w) // 2, h, w


def random_resized_crop(images: torch.Tensor, size: int, generator=None) -> torch.Tensor:
    """uint8 (B, C, H, W) -> (B, C, size, size): a random box (area 20-100 %, aspect 3/4-4/3), bilinear resize."""
    B, _, H, W = images.shape
    u = torch.rand(B, 10, 4, generator=generator)
    return torch.stack([TF.resized_crop(img, *_resized_crop_box(H, W, u[b]), size=[size, size], antialias=True)
                        for b, img in enumerate(images)])


# ------------------------------------------------------------------------------------------ RandAugment
def _shear(img, v, axis):
    shear = [math.degrees(math.atan(v)), 0.0] if axis == 0 else [0.0, math.degrees(math.atan(v))]
    return TF.affine(img, angle=0.0, translate=[0.0, 0.0], scale=1.0, shear=shear, center=[0.0, 0.0])


def _translate(img, v, axis):
    shift = [v * img.shape[-1], 0.0] if axis == 0 else [0.0, v * img.shape[-2]]
    return TF.affine(img, angle=0.0, translate=shift, scale=1.0, shear=[0.0, 0.0])


# (operation on a uint8 (C, H, W) image and a magnitude, low, high): PLENCH/FixMatch's 14 ops and ranges.
RANDAUGMENT_OPS = (
    (lambda img, v: TF.autocontrast(img), 0.0, 1.0),
    (TF.adjust_brightness, 0.05, 0.95),
    (TF.adjust_saturation, 0.05, 0.95),  # PIL's Color
    (TF.adjust_contrast, 0.05, 0.95),
    (lambda img, v: TF.equalize(img), 0.0, 1.0),
    (lambda img, v: img, 0.0, 1.0),  # Identity
    (lambda img, v: TF.posterize(img, max(1, int(v))), 4.0, 8.0),
    (lambda img, v: TF.rotate(img, v), -30.0, 30.0),
    (TF.adjust_sharpness, 0.05, 0.95),
    (lambda img, v: _shear(img, v, 0), -0.3, 0.3),
    (lambda img, v: _shear(img, v, 1), -0.3, 0.3),
    (lambda img, v: img if v > 255 else TF.solarize(img, v), 0.0, 256.0),  # threshold 256 inverts nothing
    (lambda img, v: _translate(img, v, 0), -0.3, 0.3),
    (lambda img, v: _translate(img, v, 1), -0.3, 0.3),
)


def rand_augment(images: torch.Tensor, n_ops: int = 3, generator=None) -> torch.Tensor:
    """uint8 (B, C, H, W): ``n_ops`` ops per image drawn with replacement, uniform magnitudes, then PIL-style
    CutoutAbs: a square of side U(0, 0.5) x W around a uniform point, filled with (125, 123, 114)."""
    B, C, H, W = images.shape
    ops = torch.randint(len(RANDAUGMENT_OPS), (B, n_ops), generator=generator).tolist()
    magnitudes = torch.rand(B, n_ops, generator=generator).tolist()
    holes = torch.rand(B, 3, generator=generator).tolist()
    fill = images.new_tensor(RANDAUGMENT_CUTOUT_FILL[:C]).view(C, 1, 1)
    out = []
    for img, picks, mags, (side_u, x_u, y_u) in zip(images, ops, magnitudes, holes):
        for k, m in zip(picks, mags):
            op, low, high = RANDAUGMENT_OPS[k]
            img = op(img, low + (high - low) * m)
        side = 0.5 * side_u * W
        if side > 0:  # PIL's rectangle includes both corners: pixels x0 .. floor(x0 + side)
            x0, y0 = int(max(0.0, x_u * W - side / 2)), int(max(0.0, y_u * H - side / 2))
            x1, y1 = min(W, int(x0 + side) + 1), min(H, int(y0 + side) + 1)
            img = img.clone()
            img[:, y0:y1, x0:x1] = fill
        out.append(img)
    return torch.stack(out)


# ------------------------------------------------------------------------------------------ view sets
class Views:
    """A recipe's four views, as methods ``view(batch, generator=None) -> tensor``; ``views[name]`` picks one."""

    def __getitem__(self, name: str):
        if name not in VIEW_NAMES:
            raise ConfigError(f"unknown view {name!r}; valid views: {', '.join(VIEW_NAMES)}")
        return getattr(self, name)


class TabularViews(Views):
    """Every view is the features themselves, float32 (B, d)."""

    def original(self, x, generator=None) -> torch.Tensor:
        return torch.as_tensor(x, dtype=torch.float32)

    weak = strong = distill = original


class CifarViews(Views):
    """PLENCH's CIFAR views at ``size`` (32): crop padding size/8, distill Cutout size/2."""

    def __init__(self, size: int = 32, mean=CIFAR_MEAN, std=CIFAR_STD):
        self.size, self.mean, self.std = size, mean, std
        self.padding, self.hole = max(1, size // 8), max(1, size // 2)

    def original(self, images, generator=None) -> torch.Tensor:
        return normalize(to_float_chw(images), self.mean, self.std)

    def weak(self, images, generator=None) -> torch.Tensor:
        x = random_hflip(to_float_chw(images), generator)
        return normalize(random_crop(x, self.padding, generator), self.mean, self.std)

    def strong(self, images, generator=None) -> torch.Tensor:
        x = random_hflip(random_resized_crop(as_uint8_chw(images), self.size, generator), generator)
        return normalize(rand_augment(x, 3, generator).float() / 255.0, self.mean, self.std)

    def distill(self, images, generator=None) -> torch.Tensor:
        x = random_hflip(random_resized_crop(as_uint8_chw(images), self.size, generator), generator)
        return normalize(cutout(x.float() / 255.0, self.hole, generator), self.mean, self.std)


class DigitsViews(CifarViews):
    """The 8x8 grey digits' views: no flips; 1 px crops; affine + noise + 3x3 Cutout for the strong view."""

    def __init__(self, noise_std: float = 0.1):
        super().__init__(DIGITS_SIZE, DIGITS_MEAN, DIGITS_STD)
        self.padding, self.hole, self.noise_std = 1, 3, noise_std

    def weak(self, images, generator=None) -> torch.Tensor:
        return normalize(random_crop(to_float_chw(images), self.padding, generator), self.mean, self.std)

    def strong(self, images, generator=None) -> torch.Tensor:
        x = to_float_chw(images)
        angles = (30.0 * torch.rand(len(x), generator=generator) - 15.0).tolist()
        shifts = torch.randint(-1, 2, (len(x), 2), generator=generator).tolist()
        x = torch.stack([TF.affine(img, angle=a, translate=[float(dx), float(dy)], scale=1.0, shear=[0.0, 0.0],
                                   interpolation=InterpolationMode.BILINEAR)
                         for img, a, (dx, dy) in zip(x, angles, shifts)])
        x = x + self.noise_std * torch.randn(x.shape, generator=generator).to(x.device)
        return normalize(cutout(x, self.hole, generator), self.mean, self.std)

    def distill(self, images, generator=None) -> torch.Tensor:
        x = random_crop(to_float_chw(images), self.padding, generator)
        return normalize(cutout(x, self.hole, generator), self.mean, self.std)


def views_for(source: str, image_size: int | None = None) -> Views:
    """The views of a dataset name (see ``plench.data``) or a modality ("tabular" | "image").

    A dataset gets its default modality's views unless ``image_size`` asks for its image form; the recipe
    follows the image size: 8 -> digits, anything else -> CIFAR (``"image"`` needs ``image_size``).
    """
    if source == "tabular":
        return TabularViews()
    if source == "image":
        if image_size is None:
            raise ConfigError("views_for('image') needs image_size (8 for the digits, 32 for CIFAR-10)")
        size = image_size
    else:
        from plench.data import pll_dataset_spec

        spec = pll_dataset_spec(source)
        if image_size is None and spec.modality == "tabular":
            return TabularViews()
        if spec.image_size is None or image_size not in (None, spec.image_size):
            raise ConfigError(f"{source} has no {image_size}-pixel image form "
                              f"(its image size: {spec.image_size}); pass image_size={spec.image_size} or none")
        size = spec.image_size
    return DigitsViews() if size == DIGITS_SIZE else CifarViews(size)
