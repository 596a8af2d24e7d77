"""The four training views of Plench's image path, and the tabular identity views.

A view maps a uint8 image batch (B, H, W, C) (numpy or torch, any device) to a normalised float tensor
(B, C, H, W) on the same device. Random parameters come from an optional CPU ``torch.Generator``, so a
seeded generator gives the same views on every run and device. Each image gets its own random ops (as PLENCH's
PIL pipeline), but the CIFAR views' work is batched: the resized crops are one gather for the batch, and each
RandAugment op runs once on the images that drew it (``BATCHED_OPS``), so a GPU launches a few hundred kernels a
batch, not one set per image. ``rand_augment_per_image`` is the image-by-image reference they are tested against.
The 8 x 8 digits stand-in's strong view (smoke profile, CPU) still rotates image by image.

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

try:  # the matrix v2's affine and rotate use (its own copy: v1's rounds differently)
    from torchvision.transforms.v2.functional._geometry import _get_inverse_affine_matrix as _inverse_affine
except ImportError:  # an older torchvision: v2 used v1's
    from torchvision.transforms.functional import _get_inverse_affine_matrix as _inverse_affine

VIEW_NAMES = ("original", "weak", "strong", "distill")
CIFAR_MEAN, CIFAR_STD = (0.4922, 0.4832, 0.4486), (0.2456, 0.2419, 0.2605)
DIGITS_MEAN, DIGITS_STD = (0.3053,), (0.3759,)  # the 1,797 scikit-learn digits scaled to 0..255
RANDAUGMENT_CUTOUT_FILL = (125, 123, 114)
DIGITS_SIZE = 8


# ------------------------------------------------------------------------------------------ building blocks
class MemberGenerators:
    """The generators of G runs whose batches are concatenated into one of G x ``rows`` images, member by member.

    Pass it as a view's ``generator``: every random draw of shape (G x rows, ...) is then made as G draws of
    (rows, ...), each from its member's own generator, in the order the member's run alone makes them, and
    concatenated. Every view treats its images independently, so member g's rows of one call equal its run's
    view of its own batch (``plench.protocol.make_member_batches``). Why: stacked runs then build each view once for
    the whole stack; view by view and member by member, a GPU dispatches G times the view's kernels.
    """

    def __init__(self, generators, rows: int):
        self.generators, self.rows = list(generators), int(rows)

    def draw(self, sample, size: tuple[int, ...], **kwargs) -> torch.Tensor:
        """``sample(rows, *size[1:], generator=g, **kwargs)`` for each member g, concatenated: (G x rows, ...)."""
        if size[0] != self.rows * len(self.generators):
            raise ConfigError(f"a draw for {size[0]} images from {len(self.generators)} members of {self.rows} rows; "
                              "pass the members' concatenated batches, rows each")
        return torch.cat([sample((self.rows, *size[1:]), generator=g, **kwargs) for g in self.generators])


def rand(size: tuple[int, ...], generator=None) -> torch.Tensor:
    """``torch.rand(size)`` from a CPU generator, or each member's rows from its own (``MemberGenerators``)."""
    if isinstance(generator, MemberGenerators):
        return generator.draw(torch.rand, size)
    return torch.rand(size, generator=generator)


def randn(size: tuple[int, ...], generator=None) -> torch.Tensor:
    """``torch.randn(size)``, as ``rand``."""
    if isinstance(generator, MemberGenerators):
        return generator.draw(torch.randn, size)
    return torch.randn(size, generator=generator)


def randint(low: int, high: int, size: tuple[int, ...], generator=None) -> torch.Tensor:
    """``torch.randint(low, high, size)``, as ``rand``."""
    if isinstance(generator, MemberGenerators):
        return generator.draw(lambda shape, generator: torch.randint(low, high, shape, generator=generator), size)
    return torch.randint(low, high, size, generator=generator)


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
    flip = (rand((len(x),), generator) < 0.5).to(x.device)
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)


def random_crop(x: torch.Tensor, padding: int, generator=None) -> torch.Tensor:
    """Zero-pad (B, C, H, W) by ``padding`` on every side and take a random H x W window per image."""
    B, _, H, W = x.shape
    padded = torch.nn.functional.pad(x, (padding,) * 4)
    top = randint(0, 2 * padding + 1, (B,), generator).to(x.device)
    left = randint(0, 2 * padding + 1, (B,), generator).to(x.device)
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
    cy = randint(0, H, (B,), generator).to(x.device)
    cx = randint(0, W, (B,), generator).to(x.device)
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
    """uint8 (B, C, H, W) -> (B, C, size, size): a random box (area 20-100 %, aspect 3/4-4/3), bilinear resize.

    Every box at most ``size`` on a side (always so when ``size`` is the images' own, as in the CIFAR views) is
    resized for the whole batch at once (``_crop_upsample``); otherwise each image goes through torchvision's
    antialiased ``resized_crop`` on its own."""
    B, _, H, W = images.shape
    u = rand((B, 10, 4), generator)
    boxes = [_resized_crop_box(H, W, u[b]) for b in range(B)]
    if all(h <= size and w <= size for _, _, h, w in boxes):
        return _crop_upsample(images, boxes, size)
    return torch.stack([TF.resized_crop(img, *box, size=[size, size], antialias=True)
                        for img, box in zip(images, boxes)])


def _source_index(start: torch.Tensor, length: torch.Tensor, size: int):
    """For output pixels 0..size-1 of boxes (start, length) (B,) each: the two source pixels and the second's weight,
    (B, size) each, as bilinear upsampling with ``align_corners=False`` (``torch.nn.functional.interpolate``)."""
    out = torch.arange(size, device=start.device, dtype=torch.float32)
    src = ((out[None] + 0.5) * (length[:, None].float() / size) - 0.5).clamp_(min=0)
    low = src.floor()
    weight = src - low
    low = low.long()
    high = torch.minimum(low + 1, length[:, None] - 1)
    return start[:, None] + low, start[:, None] + high, weight


def _crop_upsample(images: torch.Tensor, boxes, size: int) -> torch.Tensor:
    """uint8 (B, C, H, W) and one box (top, left, height, width) per image, each at most ``size`` on a side ->
    uint8 (B, C, size, size): each box bilinearly upsampled, rounded to the nearest integer.

    Why not one ``resized_crop`` per image: on a GPU each call dispatches about ten kernels for a 32 x 32 image, so
    a batch of 256 spent its time launching them. Upsampling needs no antialiasing filter (it only widens
    downsampling's), so this equals torchvision's result up to float rounding: its CUDA path (float, then rounded)
    to within 1e-4 before rounding, its CPU path (a fixed-point uint8 kernel) to within one grey level."""
    device = images.device
    box = torch.tensor(boxes, dtype=torch.long).to(device)  # (B, 4)
    y0, y1, wy = _source_index(box[:, 0], box[:, 2], size)  # (B, size)
    x0, x1, wx = _source_index(box[:, 1], box[:, 3], size)
    batch = torch.arange(len(images), device=device)[:, None, None, None]
    channels = torch.arange(images.shape[1], device=device)[None, :, None, None]
    rows = lambda r: r[:, None, :, None]  # noqa: E731  (B, 1, size, 1)
    cols = lambda c: c[:, None, None, :]  # noqa: E731  (B, 1, 1, size)
    x = images.float()
    top = x[batch, channels, rows(y0), cols(x0)] * (1 - cols(wx)) + x[batch, channels, rows(y0), cols(x1)] * cols(wx)
    bottom = x[batch, channels, rows(y1), cols(x0)] * (1 - cols(wx)) + x[batch, channels, rows(y1), cols(x1)] * cols(wx)
    return (top * (1 - rows(wy)) + bottom * rows(wy)).round_().clamp_(0, 255).to(torch.uint8)


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


# ------------------------------------------------------------------------------------------ RandAugment, batched
# The ops of RANDAUGMENT_OPS on a uint8 batch (n, C, H, W), each image with its own magnitude v (n,) float64 (on the
# CPU): torchvision's formulas (transforms.v2.functional) with a per-image factor where those take one scalar.
def _per_image(v: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    return v.view(-1, 1, 1, 1).to(device=images.device, dtype=torch.float32)


def _blend(images: torch.Tensor, degenerate: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """``ratio`` x image + (1 - ratio) x degenerate, clamped and truncated to uint8 (torchvision's ``_blend``)."""
    mixed = images.mul(_per_image(ratio, images)).add_(degenerate * _per_image(1.0 - ratio, images))
    return mixed.clamp_(0, 255).to(torch.uint8)


def _grey(images: torch.Tensor) -> torch.Tensor:
    """The floored luma (n, 1, H, W) float of RGB images, as torchvision's saturation and contrast take it."""
    r, g, b = images.float().unbind(1)
    return r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114).unsqueeze(1).floor_()


def _saturation(images, v):
    return images if images.shape[1] == 1 else _blend(images, _grey(images), v)


def _contrast(images, v):
    grey = _grey(images) if images.shape[1] == 3 else images.float()
    return _blend(images, grey.mean(dim=(-3, -2, -1), keepdim=True), v)


def _sharpness(images, v):
    n, C, H, W = images.shape
    if H <= 2 or W <= 2:
        return images
    kernel = torch.full((3, 3), 1.0 / 13.0, device=images.device)
    kernel[1, 1] = 5.0 / 13.0
    out = images.float()
    blurred = torch.nn.functional.conv2d(out, kernel.expand(C, 1, 3, 3), groups=C).round_()
    inner = out[..., 1:-1, 1:-1]  # the border keeps its pixels, as torchvision's
    inner.add_(blurred.sub_(inner).mul_(_per_image(1.0 - v, images)))
    return out.clamp_(0, 255).to(torch.uint8)


def _posterize(images, v):
    out = images.clone()
    bits = v.long().clamp(min=1)  # max(1, int(v)): v >= 0
    for b in bits.unique().tolist():
        chosen = (bits == b).nonzero().flatten().to(images.device)
        out[chosen] = TF.posterize(images[chosen], b)
    return out


def _solarize(images, v):
    # an integer pixel is >= v exactly when it is >= ceil(v); v > 255 inverts nothing
    threshold = v.ceil().long().view(-1, 1, 1, 1).to(images.device)
    return torch.where(images >= threshold, images.bitwise_not(), images)


def _warp(images: torch.Tensor, matrices: list) -> torch.Tensor:
    """Nearest-neighbour warp with zero fill of each image by its inverse affine matrix (6 floats, torchvision's
    ``_get_inverse_affine_matrix``): torchvision's ``affine``/``rotate`` grid, built for the whole batch."""
    n, C, H, W = images.shape
    device = images.device
    theta = torch.tensor(matrices, dtype=torch.float32).view(n, 2, 3).to(device)
    base = torch.empty(1, H, W, 3, device=device)
    base[..., 0].copy_(torch.linspace((1.0 - W) * 0.5, (W - 1.0) * 0.5, steps=W, device=device))
    base[..., 1].copy_(torch.linspace((1.0 - H) * 0.5, (H - 1.0) * 0.5, steps=H, device=device).unsqueeze_(-1))
    base[..., 2].fill_(1)
    scaled = theta.transpose(1, 2).div_(torch.tensor([0.5 * W, 0.5 * H], device=device))
    grid = base.view(1, H * W, 3).expand(n, -1, -1).bmm(scaled).view(n, H, W, 2)
    out = torch.nn.functional.grid_sample(images.float(), grid, mode="nearest", padding_mode="zeros",
                                          align_corners=False)
    return out.round_().to(torch.uint8)


def _rotate(images, v):
    return _warp(images, [_inverse_affine([0.0, 0.0], -(a % 360), [0.0, 0.0], 1.0, [0.0, 0.0]) for a in v.tolist()])


def _shear_batch(axis: int):
    def shear(images, v):
        H, W = images.shape[-2:]
        centre = [-0.5 * W, -0.5 * H]  # TF.affine's center=[0, 0], in its centred coordinates
        return _warp(images, [_inverse_affine(centre, 0.0, [0.0, 0.0], 1.0,
                                              [math.degrees(math.atan(s)), 0.0] if axis == 0 else
                                              [0.0, math.degrees(math.atan(s))]) for s in v.tolist()])
    return shear


def _translate_batch(axis: int):
    def translate(images, v):
        H, W = images.shape[-2:]
        return _warp(images, [_inverse_affine([0.0, 0.0], 0.0, [t * W, 0.0] if axis == 0 else [0.0, t * H], 1.0,
                                              [0.0, 0.0]) for t in v.tolist()])
    return translate


#: RANDAUGMENT_OPS batched, in the same order
BATCHED_OPS = (
    lambda images, v: TF.autocontrast(images),
    lambda images, v: images.mul(_per_image(v, images)).clamp_(0, 255).to(torch.uint8),  # brightness
    _saturation,
    _contrast,
    lambda images, v: TF.equalize(images),
    lambda images, v: images,
    _posterize,
    _rotate,
    _sharpness,
    _shear_batch(0),
    _shear_batch(1),
    _solarize,
    _translate_batch(0),
    _translate_batch(1),
)


def rand_augment(images: torch.Tensor, n_ops: int = 3, generator=None) -> torch.Tensor:
    """uint8 (B, C, H, W): ``n_ops`` ops per image drawn with replacement, uniform magnitudes, then PIL-style
    CutoutAbs: a square of side U(0, 0.5) x W around a uniform point, filled with (125, 123, 114).

    Batched: for each of the ``n_ops`` slots, every op is applied once to the images that drew it, with their own
    magnitudes (``BATCHED_OPS``). Why: one image at a time (``rand_augment_per_image``) a batch of 256 dispatched
    ~15,000 tiny kernels; on an H200 that made a Plench strong-view step 0.36 s against 0.03 s for the weak view
    (``shared.gpu_check``, 2026-11-30), most of the image grid's hours. The draws are the per-image version's, so
    the images are the same up to float rounding: a blend that lands on a whole number the other way moves a pixel
    one grey level, which a later posterize, solarize or equalize can widen (13 levels at most, on under 5e-4 of
    the pixels, over 20 seeds x 512 images)."""
    B, C, H, W = images.shape
    ops = randint(0, len(RANDAUGMENT_OPS), (B, n_ops), generator)
    magnitudes = rand((B, n_ops), generator).double()
    holes = rand((B, 3), generator)
    out = images.clone()
    for slot in range(n_ops):
        for k in ops[:, slot].unique().tolist():
            chosen = (ops[:, slot] == k).nonzero().flatten()
            _, low, high = RANDAUGMENT_OPS[k]
            index = chosen.to(images.device)
            out[index] = BATCHED_OPS[k](out[index], low + (high - low) * magnitudes[chosen, slot])
    side_u, x_u, y_u = holes.double().unbind(1)
    side = 0.5 * side_u * W
    # PIL's rectangle includes both corners: pixels x0 .. floor(x0 + side); int() of a non-negative value is floor
    x0, y0 = (x_u * W - side / 2).clamp(min=0).floor(), (y_u * H - side / 2).clamp(min=0).floor()
    x1, y1 = (x0 + side).floor().add(1).clamp(max=W), (y0 + side).floor().add(1).clamp(max=H)
    box = torch.stack([x0, y0, x1, y1, side], 1).to(images.device)
    ys = torch.arange(H, device=images.device).view(1, H, 1)
    xs = torch.arange(W, device=images.device).view(1, 1, W)
    col = lambda i: box[:, i].view(-1, 1, 1)  # noqa: E731
    hole = (ys >= col(1)) & (ys < col(3)) & (xs >= col(0)) & (xs < col(2)) & (col(4) > 0)
    fill = images.new_tensor(RANDAUGMENT_CUTOUT_FILL[:C]).view(1, C, 1, 1)
    return torch.where(hole[:, None], fill, out)


def rand_augment_per_image(images: torch.Tensor, n_ops: int = 3, generator=None) -> torch.Tensor:
    """``rand_augment`` one image at a time with torchvision's own ops (the reference the batched version is tested
    against; the same random draws give the same images, up to float rounding)."""
    B, C, H, W = images.shape
    ops = randint(0, len(RANDAUGMENT_OPS), (B, n_ops), generator).tolist()
    magnitudes = rand((B, n_ops), generator).tolist()
    holes = rand((B, 3), generator).tolist()
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
        angles = (30.0 * rand((len(x),), generator) - 15.0).tolist()
        shifts = randint(-1, 2, (len(x), 2), generator).tolist()
        x = torch.stack([TF.affine(img, angle=a, translate=[float(dx), float(dy)], scale=1.0, shear=[0.0, 0.0],
                                   interpolation=InterpolationMode.BILINEAR)
                         for img, a, (dx, dy) in zip(x, angles, shifts)])
        x = x + self.noise_std * randn(tuple(x.shape), generator).to(x.device)
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
