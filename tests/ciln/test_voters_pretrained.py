"""Pretrained image voters (ciln/voters_pretrained.py).

The real weights cannot be downloaded here, so the tests write randomly initialised networks to weight files in
the hubs' format (safetensors state dicts) and check that the loaders read them back, that a missing file names
the path and the download source, a tiny DeiT3 fine-tune (32 px, one epoch) end to end, and CLIP's zero-shot maths.
"""
import numpy as np
import pytest
import torch
from PIL import Image

timm = pytest.importorskip("timm")
open_clip = pytest.importorskip("open_clip")
from safetensors.torch import save_file  # noqa: E402

from ciln import voters_pretrained as vp  # noqa: E402
from shared.cache import ArtifactCache  # noqa: E402
from shared.datasets.real import CIFAR10_CLASSES  # noqa: E402
from shared.datasets.writers import write_lfs_pointer  # noqa: E402
from shared.errors import ConfigError, DataFormatError, DataNotFoundError  # noqa: E402

TINY = {"epochs": 1, "batch": 8, "image_size": 32, "workers": 0, "infer_batch": 8}


def images(n, shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, 10, n)


def fit(name, recipe, X=None, y=None, cache=None, seed=42):
    return vp.fit_pretrained_voter(name, recipe, X, y, X, y, num_classes=10, classes=CIFAR10_CLASSES, seed=seed,
                                   device="cpu", cache=cache)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def deit_file(tmp_path_factory):
    """A random DeiT3-Small with the 1000-class head, saved like timm/deit3_small_patch16_224.fb_in1k."""
    torch.manual_seed(0)
    model = timm.create_model("deit3_small_patch16_224", pretrained=False).eval()
    path = tmp_path_factory.mktemp("deit") / "model.safetensors"
    save_file(model.state_dict(), path)
    return path, model


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    """A random CLIP ViT-B/32, saved like open_clip_model.safetensors of timm/vit_base_patch32_clip_224.openai."""
    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32", force_quick_gelu=True).eval()
    path = tmp_path_factory.mktemp("clip") / "open_clip_model.safetensors"
    save_file(model.state_dict(), path)
    return path, model


@pytest.fixture(scope="module")
def fitted(deit_file, tmp_path_factory):
    """A DeiT3 fine-tuned for one epoch on 16 RGB 32x32 images (two optimizer steps), and how to refit it."""
    X, y = images(16, (32, 32, 3))
    cache = ArtifactCache(tmp_path_factory.mktemp("cache"))
    refit = lambda cache: fit("deit3_small", dict(TINY, weights=str(deit_file[0])), X, y, cache)  # noqa: E731
    return refit(cache), refit, cache, X


def test_recipes_are_the_papers():
    deit, clip = vp.PRETRAINED_VOTERS["deit3_small"][1], vp.PRETRAINED_VOTERS["clip_vit_b32"][1]
    assert (deit["lr"], deit["weight_decay"], deit["batch"], deit["epochs"]) == (1e-5, 0.1, 128, 20)
    assert (deit["warmup_epochs"], deit["warmup_lr"], deit["auto_augment"]) == (5, 1e-6, "rand-m9-mstd0.5-inc1")
    assert (deit["mixup"], deit["cutmix"], deit["label_smoothing"], deit["drop_path"]) == (0.8, 1.0, 0.1, 0.05)
    assert (deit["image_size"], deit["infer_batch"], clip["image_size"], clip["infer_batch"]) == (224, 64, 224, 256)
    assert clip["prompt"].format("cat") == "a photo of a cat" and clip["logit_scale"] == 100.0


def test_deit_weight_file_is_read_back_exactly(deit_file):
    path, original = deit_file
    loaded = vp._deit_model(1000, 224, path).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert torch.equal(loaded(x), original(x))
    small = vp._deit_model(10, 32, path)  # new head, position embedding resampled to 2x2 patches
    assert small.pos_embed.shape == (1, 4, 384) and small.head.out_features == 10
    assert torch.equal(small.blocks[3].mlp.fc1.weight, original.blocks[3].mlp.fc1.weight)


def test_missing_weights_name_the_path_and_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path))
    for name, (repo, filename) in vp.WEIGHT_FILES.items():
        with pytest.raises(DataNotFoundError) as err:
            fit(name, {})
        message = str(err.value)
        assert str(tmp_path / "weights" / repo / filename) in message
        assert f"https://huggingface.co/{repo}" in message and "'weights'" in message
    with pytest.raises(DataNotFoundError, match="elsewhere.safetensors"):
        fit("deit3_small", {"weights": str(tmp_path / "elsewhere.safetensors")})
    pointer = write_lfs_pointer(tmp_path / "pointer.safetensors", b"x" * 1000)  # a Hub clone without git-lfs
    with pytest.raises(DataFormatError, match=r"pointer\.safetensors is a git-LFS pointer"):
        fit("deit3_small", {"weights": str(pointer)})
    with pytest.raises(ConfigError, match="'none'"):
        fit("clip_vit_b32", {"weights": None})  # random init must be asked for by name
    with pytest.raises(ConfigError, match="valid keys"):
        fit("deit3_small", {"epoch": 3})


def test_default_weights_follow_the_data_dir_parameter(tmp_path, monkeypatch, deit_file):
    """The notebooks' data_dir (not only $NOISY_DATA_DIR) locates the default weight files."""
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path / "elsewhere"))
    repo, filename = vp.WEIGHT_FILES["deit3_small"]
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "data" / "weights" / repo / filename)):
        vp.fit_pretrained_voter("deit3_small", {}, None, None, None, None, num_classes=10, classes=CIFAR10_CLASSES,
                                seed=0, device="cpu", cache=None, data_dir=tmp_path / "data")
    (tmp_path / "data" / "weights" / repo).mkdir(parents=True)
    (tmp_path / "data" / "weights" / repo / filename).symlink_to(deit_file[0])
    assert vp.weights_path("deit3_small", "default", tmp_path / "data") == tmp_path / "data" / "weights" / repo / filename


def test_deit_finetune_gives_distributions_and_is_cached(fitted):
    voter, refit, cache, X = fitted
    probs = voter.predict_proba(X)
    assert probs.shape == (16, 10) and probs.dtype == np.float32 and (probs >= 0).all()
    assert np.allclose(probs.sum(1), 1, atol=1e-5)
    again = refit(cache)  # same recipe, weights and data: loaded from the cache
    assert len(list(cache.root.glob("ciln-voter/*/artifact.pt"))) == 1
    assert np.array_equal(again.predict_proba(X), probs)


def test_deit_same_seed_same_model(fitted, tmp_path):
    voter, refit, _, X = fitted
    assert np.array_equal(refit(ArtifactCache(tmp_path)).predict_proba(X), voter.predict_proba(X))


def test_grayscale_images_become_three_channels(fitted, tmp_path):
    digits, labels = images(11, (28, 28), seed=1)  # batches of 8 and 3: Mixup gets an even 2 of the last 3
    train_tf, eval_tf = vp._deit_transforms(dict(vp.PRETRAINED_VOTERS["deit3_small"][1], **TINY), gray=True)
    x = eval_tf(Image.fromarray(digits[0]))
    assert x.shape == (3, 32, 32) and torch.allclose(x[0] * 0.229 + 0.485, x[2] * 0.225 + 0.406, atol=1e-6)
    assert train_tf(Image.fromarray(digits[0])).shape == (3, 32, 32)
    assert fitted[0].predict_proba(digits).shape == (11, 10)  # a voter trained on RGB takes digits too
    voter = fit("deit3_small", dict(TINY, weights="none"), digits, labels, ArtifactCache(tmp_path))
    probs = voter.predict_proba(digits[..., None])  # (n, 28, 28, 1) is grayscale as well
    assert probs.shape == (11, 10) and np.allclose(probs.sum(1), 1, atol=1e-5)


def test_clip_zero_shot_is_softmax_of_100_cosine(clip_file):
    path, original = clip_file
    voter = fit("clip_vit_b32", {"weights": str(path), "image_size": 64, "infer_batch": 4})
    tokens = open_clip.get_tokenizer("ViT-B-32")([f"a photo of a {c}" for c in CIFAR10_CLASSES])
    with torch.no_grad():
        text = original.encode_text(tokens)
        text = text / text.norm(dim=-1, keepdim=True)
        assert torch.equal(voter.text_features, text)  # the text tower was read back exactly
        X, _ = images(6, (32, 32, 3))
        t = torch.as_tensor(X).permute(0, 3, 1, 2).float() / 255
        t = torch.nn.functional.interpolate(t, size=(64, 64), mode="bicubic", align_corners=False)
        mean, std = torch.tensor(vp.CLIP_MEAN).view(1, 3, 1, 1), torch.tensor(vp.CLIP_STD).view(1, 3, 1, 1)
        image = voter.model.encode_image((t - mean) / std)
        image = image / image.norm(dim=-1, keepdim=True)
        expected = torch.softmax(100 * image @ text.T, dim=-1).numpy()
    probs = voter.predict_proba(X)
    assert probs.shape == (6, 10) and np.allclose(probs.sum(1), 1, atol=1e-5)
    assert np.allclose(probs, expected, atol=1e-6)
    embeddings = voter.image_embeddings(X)
    assert embeddings.shape == (6, 512) and np.allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-5)
    gray = X[..., 0]
    assert np.allclose(voter.predict_proba(gray), voter.predict_proba(np.repeat(gray[..., None], 3, -1)))
    with pytest.raises(ConfigError, match="class name"):
        vp.fit_pretrained_voter("clip_vit_b32", {"weights": str(path)}, None, None, None, None, num_classes=10,
                                classes=CIFAR10_CLASSES[:3], seed=0, device="cpu", cache=None)


def test_deit_randaugment_survives_zero_bit_posterize():
    # m9 with mstd 0.5 reaches magnitude 10, where PosterizeIncreasing keeps 0 bits; Pillow 13 raises on that
    from timm.data.auto_augment import RandAugment

    train_tf, _ = vp._deit_transforms(dict(vp.PRETRAINED_VOTERS["deit3_small"][1], image_size=32), gray=False)
    rand = next(t for t in train_tf.transforms[-1].transforms if isinstance(t, RandAugment))
    posterize = next(op for op in rand.ops if op.name == "PosterizeIncreasing")
    img = Image.fromarray(np.full((8, 8, 3), 200, dtype=np.uint8))
    assert np.asarray(posterize.aug_fn(img, 0)).max() == 0  # old Pillow: keeping 0 bits gives a black image
    assert np.asarray(posterize.aug_fn(img, 1)).max() == 128
    rand.ops, rand.num_layers = [posterize], 1
    posterize.prob, posterize.magnitude, posterize.magnitude_std = 1.0, 10, 0
    assert train_tf(img).shape == (3, 32, 32)
