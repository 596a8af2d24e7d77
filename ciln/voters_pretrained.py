"""The paper's pretrained image voters (Sec. III-B): DeiT3-Small fine-tuned on CLT and CLIP ViT-B/32 zero-shot.

Both follow the authors' code (repo ``code/train/image/{_deit_helpers,common,clip_voter}.py`` and
``code/infer/eval_image_voters.py``):

* ``deit3_small`` — timm ``deit3_small_patch16_224`` with ImageNet-1k weights, new 10-class head, drop_path 0.05.
  Each image goes through ``PIL.Image.fromarray`` (MNIST: Grayscale -> 3 channels) and a bicubic resize to 224,
  then timm's DeiT training transform (RandomResizedCrop + horizontal flip + RandAugment
  ``rand-m9-mstd0.5-inc1``, no random erasing, ImageNet normalisation). Mixup 0.8 / CutMix 1.0 (switch 0.5,
  label smoothing 0.1), SoftTargetCrossEntropy, AdamW lr 1e-5 / wd 0.1, batch 128, 20 epochs, per-epoch LR: linear
  warm-up from 1e-6 over 5 epochs, then cosine to 0; fp16 AMP on CUDA. The epoch with the best CLV accuracy is
  kept (and cached). Validation and inference: resize -> ToTensor -> normalise, fp32, batch 64.
* ``clip_vit_b32`` — open_clip ``ViT-B-32`` with OpenAI weights and QuickGELU; no training. Prompts
  "a photo of a {class}"; images become float tensors in [0, 1] resized with *torch* bicubic interpolation (not
  PIL), CLIP mean/std, fp32, batch 256; probabilities softmax(100 · cos(image, prompt)).

Nothing is downloaded. ``recipe["weights"]`` is ``"default"`` (the file named in ``WEIGHT_FILES`` under
``<data_dir>/weights/<hub repo>/``), a path to a weight file, or ``"none"`` (random initialisation — an explicit
choice for tests; not the paper's voter).

    voter = fit_pretrained_voter("deit3_small", {"epochs": 20}, X, y, X_val, y_val, num_classes=10,
                                 classes=CIFAR10_CLASSES, seed=42, device="cuda", cache=ArtifactCache())
    probs = voter.predict_proba(images)            # (n, 10)
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from shared.cache import ArtifactCache
from shared.datasets.files import check_not_lfs_pointer
from shared.device import select_device
from shared.errors import ConfigError, DataNotFoundError, unknown_choice
from shared.paths import data_dir
from shared.progress import progress
from shared.seeding import seed_everything
from shared.training import amp_scaler

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)

PRETRAINED_VOTERS = {
    "deit3_small": (
        "DeiT3-Small (ImageNet-1k pretrained, timm) fine-tuned 20 epochs at 224 px (CILN recipe)",
        {"weights": "default", "epochs": 20, "batch": 128, "lr": 1e-5, "weight_decay": 0.1, "warmup_epochs": 5,
         "warmup_lr": 1e-6, "drop_path": 0.05, "image_size": 224, "auto_augment": "rand-m9-mstd0.5-inc1",
         "mixup": 0.8, "cutmix": 1.0, "switch_prob": 0.5, "label_smoothing": 0.1, "infer_batch": 64, "workers": 4},
    ),
    "clip_vit_b32": (
        "CLIP ViT-B/32 (OpenAI weights, open_clip) zero-shot, prompts 'a photo of a {class}'",
        {"weights": "default", "image_size": 224, "prompt": "a photo of a {}", "logit_scale": 100.0,
         "infer_batch": 256},
    ),
}

# The files the hubs distribute (the ones timm / open_clip themselves fetch for these models): (HF repo, file).
WEIGHT_FILES = {
    "deit3_small": ("timm/deit3_small_patch16_224.fb_in1k", "model.safetensors"),  # 88 MB
    "clip_vit_b32": ("timm/vit_base_patch32_clip_224.openai", "open_clip_model.safetensors"),  # 605 MB
}


def default_weights_path(name: str, root=None) -> Path:
    """``<data_dir>/weights/<HF repo>/<file>``, the layout ``huggingface-cli download --local-dir`` produces
    (``root``: the data folder, default ``$NOISY_DATA_DIR`` or ``<repo>/data``)."""
    repo, filename = WEIGHT_FILES[name]
    return data_dir(root) / "weights" / repo / filename


def weights_path(name: str, setting, root=None) -> Path | None:
    """The local weight file for the recipe's ``weights`` setting (``"default"``: under the data folder ``root``);
    None for ``"none"`` (random init)."""
    if setting == "none":
        return None
    if setting == "default":
        path = default_weights_path(name, root)
    elif isinstance(setting, (str, os.PathLike)):
        path = Path(setting).expanduser()
    else:
        raise ConfigError(f"recipe key 'weights' of voter {name!r} must be 'default', a file path or 'none' "
                          f"(random initialisation), got {setting!r}")
    if not path.is_file():
        repo, filename = WEIGHT_FILES[name]
        raise DataNotFoundError(
            f"pretrained weights of voter {name!r} not found: {path}\n"
            f"Download {filename} from https://huggingface.co/{repo} (file URL "
            f"https://huggingface.co/{repo}/resolve/main/{filename}), e.g.\n"
            f"  huggingface-cli download {repo} {filename} --local-dir {default_weights_path(name, root).parent}\n"
            f"The default folder follows the data_dir parameter (else NOISY_DATA_DIR); to use another file set the "
            f"recipe key 'weights' (pool entry {{voter: {name}, weights: /path/to/{filename}}}), or weights: none for a randomly "
            "initialised network (not the paper's voter).")
    return check_not_lfs_pointer(path)


def _file_digest(path: Path | None) -> str:
    if path is None:
        return "none"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _images(X) -> np.ndarray:
    """uint8 images as (n, H, W) (grayscale) or (n, H, W, 3) (RGB); a trailing channel of 1 is dropped."""
    X = np.asarray(X)
    if X.ndim == 4 and X.shape[-1] == 1:
        X = X[..., 0]
    if X.dtype != np.uint8 or not (X.ndim == 3 or (X.ndim == 4 and X.shape[-1] == 3)):
        raise ConfigError(f"pretrained voters take uint8 images (n, H, W) or (n, H, W, 3), got {X.dtype} {X.shape}")
    return X


class _PILImages(Dataset):
    """Items ``transform(PIL.Image.fromarray(images[i]))``, paired with ``labels[i]`` when labels are given."""

    def __init__(self, images: np.ndarray, transform, labels=None):
        self.images, self.transform, self.labels = images, transform, labels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        x = self.transform(Image.fromarray(self.images[i]))
        return x if self.labels is None else (x, int(self.labels[i]))


# ---------------------------------------------------------------------------------------------- DeiT3-Small
def _deit_model(num_classes: int, image_size: int, weights: Path | None, drop_path: float = 0.0):
    """timm DeiT3-Small with a fresh ``num_classes`` head; backbone from ``weights`` (timm format) unless None.

    timm drops the 1000-class head of the file and resamples the position embedding when ``image_size`` != 224.
    """
    import timm

    return timm.create_model(
        "deit3_small_patch16_224", pretrained=weights is not None, num_classes=num_classes, img_size=image_size,
        drop_path_rate=drop_path, pretrained_cfg_overlay=dict(file=str(weights)) if weights is not None else None,
    )


def _deit_transforms(recipe: dict, gray: bool):
    """(train, eval) PIL -> tensor (3, S, S) transforms of the authors' ``build_deit3_transforms``."""
    from timm.data import create_transform

    size = recipe["image_size"]
    pre = ([transforms.Grayscale(num_output_channels=3)] if gray else []) + [
        transforms.Resize(size, interpolation=transforms.InterpolationMode.BICUBIC)]
    train = create_transform(size, is_training=True, auto_augment=recipe["auto_augment"], interpolation="bicubic",
                             re_prob=0.0, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    _allow_zero_bit_posterize(train)
    evaluate = [transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    return transforms.Compose(pre + [train]), transforms.Compose(pre + evaluate)


def _posterize(img, bits_to_keep, **_):
    """Posterize that keeps 0 bits as a black image, as Pillow did when DeiT III was trained (Pillow 13 raises)."""
    from PIL import Image, ImageOps

    if bits_to_keep >= 8:
        return img
    return Image.new(img.mode, img.size) if bits_to_keep <= 0 else ImageOps.posterize(img, bits_to_keep)


def _allow_zero_bit_posterize(transform) -> None:
    """RandAugment's "inc1" PosterizeIncreasing keeps 4 - int(4 m / 10) bits: 0 at magnitude 10, which m9 with
    mstd 0.5 reaches. Point its posterize ops at ``_posterize`` so such a draw does not stop training."""
    from timm.data.auto_augment import RandAugment

    for t in getattr(transform, "transforms", []):
        if isinstance(t, RandAugment):
            for op in t.ops:
                if op.name.startswith("Posterize"):
                    op.aug_fn = _posterize


@torch.no_grad()
def _predict_pil(model, images: np.ndarray, transform, batch: int, workers: int, desc: str) -> np.ndarray:
    """Softmax (n, K) float32 of ``model`` in eval mode and fp32 over PIL-transformed images."""
    device = next(model.parameters()).device
    model.eval()
    loader = DataLoader(_PILImages(images, transform), batch_size=batch, shuffle=False, num_workers=workers,
                        pin_memory=device.type == "cuda")
    out = [torch.softmax(model(x.to(device, non_blocking=True)).float(), dim=1).cpu()
           for x in progress(loader, desc=desc)]
    return torch.cat(out).numpy()


def _finetune_deit(recipe: dict, X, y, X_val, y_val, num_classes: int, seed: int, device, weights) -> dict:
    """Fine-tune DeiT3-Small on (X, y); the state dict (CPU) of the epoch with the best accuracy on (X_val, y_val)."""
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy
    from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

    seed_everything(seed)
    model = _deit_model(num_classes, recipe["image_size"], weights, recipe["drop_path"]).to(device)
    train_tf, eval_tf = _deit_transforms(recipe, gray=X.ndim == 3)
    batch, epochs, warmup = recipe["batch"], recipe["epochs"], recipe["warmup_epochs"]
    loader = DataLoader(_PILImages(X, train_tf, np.asarray(y)), batch_size=batch, shuffle=True,
                        num_workers=recipe["workers"], generator=torch.Generator().manual_seed(seed),
                        pin_memory=device.type == "cuda")
    mixup = Mixup(mixup_alpha=recipe["mixup"], cutmix_alpha=recipe["cutmix"], switch_prob=recipe["switch_prob"],
                  label_smoothing=recipe["label_smoothing"], num_classes=num_classes)
    loss_fn = SoftTargetCrossEntropy()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    if warmup > 0:
        sched = SequentialLR(opt, [LinearLR(opt, recipe["warmup_lr"] / recipe["lr"], 1.0, total_iters=warmup),
                                   CosineAnnealingLR(opt, T_max=max(1, epochs - warmup))], milestones=[warmup])
    else:
        sched = CosineAnnealingLR(opt, T_max=epochs)
    scaler = amp_scaler(device)
    best, best_acc = None, -1.0
    for epoch in progress(range(epochs), desc="voter deit3_small"):
        model.train()
        for xb, yb in progress(loader, desc=f"epoch {epoch + 1}"):
            even = len(xb) // 2 * 2  # timm's batch Mixup pairs images: an odd last batch loses one image
            if even == 0:
                continue
            xb, soft = mixup(xb[:even].to(device, non_blocking=True), yb[:even].to(device, non_blocking=True))
            with torch.autocast(device.type, dtype=torch.float16, enabled=scaler.is_enabled()):
                loss = loss_fn(model(xb), soft)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        sched.step()
        probs = _predict_pil(model, X_val, eval_tf, recipe["infer_batch"], recipe["workers"], "CLV accuracy")
        acc = float((probs.argmax(1) == np.asarray(y_val)).mean())
        if acc > best_acc:
            best_acc, best = acc, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return best


class DeiTVoter:
    """A fine-tuned DeiT3-Small: ``predict_proba`` of uint8 images (n, H, W[, 3]) -> (n, K) float32."""

    def __init__(self, model, recipe: dict):
        self.model, self.recipe = model, recipe

    def predict_proba(self, X) -> np.ndarray:
        X = _images(X)
        eval_tf = _deit_transforms(self.recipe, gray=X.ndim == 3)[1]
        return _predict_pil(self.model, X, eval_tf, self.recipe["infer_batch"], self.recipe["workers"],
                            "deit3_small predict")


# ---------------------------------------------------------------------------------------------- CLIP ViT-B/32
class ClipZeroShot:
    """CLIP zero-shot classifier over ``classes``: softmax(logit_scale · cos(image, prompt)), fp32.

    ``image_embeddings(X)`` gives the L2-normalised image features (n, 512) (e.g. for the official code's m3 k-means).
    """

    def __init__(self, weights: Path | None, classes, recipe: dict, device):
        import open_clip

        self.recipe, self.size = recipe, recipe["image_size"]
        self.model = open_clip.create_model(
            "ViT-B-32", pretrained=str(weights) if weights is not None else None, force_quick_gelu=True,
            force_image_size=self.size, require_pretrained=weights is not None).to(device).eval()
        self.mean = torch.tensor(CLIP_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(CLIP_STD, device=device).view(1, 3, 1, 1)
        tokens = open_clip.get_tokenizer("ViT-B-32")([recipe["prompt"].format(c) for c in classes]).to(device)
        with torch.no_grad():
            text = self.model.encode_text(tokens).float()
        self.text_features = text / text.norm(dim=-1, keepdim=True)  # (K, 512)

    @torch.no_grad()
    def _image_batches(self, X, desc: str):
        """Yield normalised image features (b, 512) on the device, ``infer_batch`` images at a time."""
        X = _images(X)
        if X.ndim == 3:
            X = np.repeat(X[..., None], 3, axis=-1)
        batch = self.recipe["infer_batch"]
        for start in progress(range(0, len(X), batch), desc=desc):
            t = torch.as_tensor(X[start:start + batch]).to(self.mean.device).permute(0, 3, 1, 2).float() / 255.0
            t = torch.nn.functional.interpolate(t, size=(self.size, self.size), mode="bicubic", align_corners=False)
            features = self.model.encode_image((t - self.mean) / self.std).float()
            yield features / features.norm(dim=-1, keepdim=True)

    def image_embeddings(self, X) -> np.ndarray:
        """L2-normalised CLIP image embeddings (n, 512) float32 of uint8 images (n, H, W[, 3])."""
        return torch.cat([f.cpu() for f in self._image_batches(X, "clip embeddings")]).numpy()

    def predict_proba(self, X) -> np.ndarray:
        """Zero-shot probabilities (n, K) float32."""
        scale = self.recipe["logit_scale"]
        return torch.cat([torch.softmax(scale * f @ self.text_features.T, dim=-1).cpu()
                          for f in self._image_batches(X, "clip_vit_b32 predict")]).numpy()


# ---------------------------------------------------------------------------------------------- entry point
def fit_pretrained_voter(name: str, recipe: dict, X, y, X_val, y_val, *, num_classes: int, classes, seed: int,
                         device, cache: ArtifactCache | None, data_dir=None):
    """A ready voter ``name`` (``predict_proba(X) -> (n, num_classes)``) for uint8 images (n, H, W[, 3]).

    ``recipe`` overrides keys of ``PRETRAINED_VOTERS[name][1]``. DeiT3 is fine-tuned on (X, y), selected on
    (X_val, y_val) and cached by recipe, weight file and data; CLIP ignores X, y, X_val, y_val and needs ``classes``
    (the class names put into the prompts). ``weights: default`` files are looked up under ``data_dir``.
    """
    if name not in PRETRAINED_VOTERS:
        raise unknown_choice("pretrained voter", name, PRETRAINED_VOTERS)
    defaults = PRETRAINED_VOTERS[name][1]
    unknown = sorted(set(recipe) - set(defaults))
    if unknown:
        raise ConfigError(f"unknown recipe keys {unknown} for voter {name!r}; valid keys: {', '.join(defaults)}")
    recipe = {**defaults, **recipe}
    device = device if isinstance(device, torch.device) else select_device(device)
    weights = weights_path(name, recipe["weights"], data_dir)
    if name == "clip_vit_b32":
        if len(classes) != num_classes:
            raise ConfigError(f"CLIP needs one class name per class: {len(classes)} names for {num_classes} classes")
        return ClipZeroShot(weights, classes, recipe, device)

    from ciln.voters import data_fingerprint  # here, not at the top: ciln.voters imports this module

    X, X_val = _images(X), _images(X_val)
    params = {"voter": name, "recipe": {**recipe, "weights": _file_digest(weights)}, "seed": seed,
              "num_classes": num_classes, "data": data_fingerprint(X, y), "val": data_fingerprint(X_val, y_val)}
    state = (cache or ArtifactCache()).get_or_build(
        "ciln-voter", params, lambda: _finetune_deit(recipe, X, y, X_val, y_val, num_classes, seed, device, weights),
        fmt="torch", code=[_finetune_deit])
    model = _deit_model(num_classes, recipe["image_size"], None)
    model.load_state_dict(state)
    return DeiTVoter(model.to(device).eval(), recipe)
