"""Voter pools: the classifiers that label corrupted inputs (full: the paper's pools; smoke: scikit-learn stand-ins).

A voter is trained on CLT, model-selected on CLV and then frozen; ``predict_proba`` gives (n, K)
softmax outputs. Trained voters are cached by their recipe and a fingerprint of the training data
(scikit-learn models through skops, torch models as state dicts), so a second notebook reuses them.

Registry ``VOTERS``; pools per profile and domain live in ``ciln/profiles.yaml``.
"""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from ciln.voters_pretrained import PRETRAINED_VOTERS, fit_pretrained_voter
from ciln.voters_tabular import TABULAR_FULL_VOTERS, fit_tabular_voter
from shared.cache import ArtifactCache
from shared.datasets.real import ADULT_CATEGORICAL, ADULT_NUMERIC
from shared.errors import ConfigError, unknown_choice
from shared.models import build_model
from shared.seeding import seed_everything
from shared.training import amp_scaler, as_tensor, make_optimizer, predict_proba, random_crop_flip, train_epoch

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def data_fingerprint(X, y) -> str:
    """Short hash of a training set (arrays or a DataFrame) and its labels."""
    digest = hashlib.sha256()
    if isinstance(X, pd.DataFrame):
        digest.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    else:
        digest.update(np.ascontiguousarray(X).tobytes())
    digest.update(np.asarray(y).tobytes())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- scikit-learn
def _image_features(X) -> np.ndarray:
    X = np.asarray(X)
    return X.reshape(len(X), -1).astype(np.float32) / 255.0


def _tabular_frame(X: pd.DataFrame) -> pd.DataFrame:
    X = X.copy()
    for c in X.columns:
        X[c] = X[c].astype(float) if c in ADULT_NUMERIC else X[c].astype(object)
    return X


def _tabular_preprocessor(scale: str | None):
    """Numeric: median imputation (+ scaling); categorical: NaN -> '__NaN__', one-hot (unseen -> zeros)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, QuantileTransformer, StandardScaler

    numeric = [SimpleImputer(strategy="median")]
    if scale == "standard":
        numeric.append(StandardScaler())
    elif scale == "quantile":
        numeric.append(QuantileTransformer(output_distribution="normal", n_quantiles=200, random_state=0))
    categorical = make_pipeline(
        SimpleImputer(strategy="constant", fill_value="__NaN__"), OneHotEncoder(handle_unknown="ignore"),
    )
    return ColumnTransformer([
        ("num", make_pipeline(*numeric) if scale != "native" else "passthrough", list(ADULT_NUMERIC)),
        ("cat", categorical, list(ADULT_CATEGORICAL)),
    ], sparse_threshold=0.0)


def _sklearn_estimator(name: str, seed: int):
    from sklearn.decomposition import PCA
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline

    pca = lambda: PCA(64, random_state=seed)  # noqa: E731
    builders = {
        "logreg_pca": lambda: make_pipeline(pca(), LogisticRegression(C=0.5, max_iter=3000)),
        "mlp_pca": lambda: make_pipeline(pca(), MLPClassifier((128,), max_iter=500, random_state=seed)),
        "rf_pca": lambda: make_pipeline(pca(), RandomForestClassifier(200, random_state=seed, n_jobs=1)),
        "hgb": lambda: make_pipeline(_tabular_preprocessor("native"), HistGradientBoostingClassifier(random_state=seed)),
        "rf_tab": lambda: make_pipeline(_tabular_preprocessor(None), RandomForestClassifier(200, min_samples_leaf=3, random_state=seed, n_jobs=1)),
        "mlp_tab": lambda: make_pipeline(_tabular_preprocessor("quantile"), MLPClassifier((128, 64), max_iter=300, early_stopping=True, random_state=seed)),
        "logreg_tab": lambda: make_pipeline(_tabular_preprocessor("standard"), LogisticRegression(max_iter=2000)),
        "knn_tab": lambda: make_pipeline(_tabular_preprocessor("standard"), KNeighborsClassifier(25)),
    }
    return builders[name]()


# ---------------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class VoterSpec:
    name: str
    modality: str  # "image" or "tabular"
    kind: str  # "sklearn", "torch" (trained here), "pretrained" (ciln/voters_pretrained.py), "tabular_full" (ciln/voters_tabular.py)
    description: str
    recipe: dict = field(default_factory=dict)


VOTERS = {
    spec.name: spec for spec in [
        VoterSpec("tiny_cnn", "image", "torch", "3-layer CNN (~25k parameters), SGD + cosine",
                  {"arch": "tiny_cnn", "epochs": 20, "lr": 0.05, "batch": 64, "optimizer": "sgd", "weight_decay": 5e-4,
                   "augment": False}),
        VoterSpec("logreg_pca", "image", "sklearn", "logistic regression on 64 PCA components of the pixels"),
        VoterSpec("mlp_pca", "image", "sklearn", "MLP (128) on 64 PCA components"),
        VoterSpec("rf_pca", "image", "sklearn", "random forest (200 trees) on 64 PCA components"),
        VoterSpec("resnet20", "image", "torch", "CIFAR ResNet-20, SGD 0.1, x0.1 at 100/150 of 200 epochs (CILN recipe)",
                  {"arch": "resnet20", "epochs": 200, "lr": 0.1, "batch": 128, "optimizer": "sgd", "weight_decay": 1e-4,
                   "milestones": [100, 150], "augment": True, "cifar_norm": True}),
        VoterSpec("resnet20_mnist", "image", "torch", "ResNet-20 on 1-channel MNIST, Adam 1e-3, 200 epochs, linear decay from epoch 80",
                  {"arch": "resnet20", "epochs": 200, "lr": 1e-3, "batch": 128, "optimizer": "adam", "weight_decay": 0.0,
                   "linear_decay_from": 80, "augment": False}),
        VoterSpec("wrn28_10", "image", "torch", "WRN-28-10, dropout 0.3, SGD Nesterov 0.1, x0.2 at 60/120/160 of 200 epochs",
                  {"arch": "wrn28_10", "dropout": 0.3, "epochs": 200, "lr": 0.1, "batch": 128, "optimizer": "sgd_nesterov",
                   "weight_decay": 5e-4, "milestones": [60, 120, 160], "gamma": 0.2, "augment": True, "cifar_norm": True}),
        VoterSpec("lenet5", "image", "torch", "LeNet-5 (ReLU), Adam 1e-3, 200 epochs, linear decay from epoch 80",
                  {"arch": "lenet5", "epochs": 200, "lr": 1e-3, "batch": 128, "optimizer": "adam", "weight_decay": 0.0,
                   "linear_decay_from": 80, "augment": False}),
        VoterSpec("mlp", "image", "torch", "MLP 784-1024-1024-2048-10, dropout 0.5, Adam 1e-3 (CILN MNIST recipe)",
                  {"arch": "mlp", "hidden": [1024, 1024, 2048], "dropout": 0.5, "epochs": 200, "lr": 1e-3, "batch": 128,
                   "optimizer": "adam", "weight_decay": 0.0, "linear_decay_from": 80, "augment": False}),
        VoterSpec("hgb", "tabular", "sklearn", "histogram gradient boosting, NaN kept (XGBoost dummy_na analogue)"),
        VoterSpec("rf_tab", "tabular", "sklearn", "random forest + median imputation (CatBoost analogue)"),
        VoterSpec("mlp_tab", "tabular", "sklearn", "MLP + quantile transform (RTDL-MLP analogue)"),
        VoterSpec("logreg_tab", "tabular", "sklearn", "logistic regression + one-hot (FT-Transformer analogue)"),
        VoterSpec("knn_tab", "tabular", "sklearn", "25-nearest neighbours (TabPFN analogue: small-data learner)"),
    ]
}


# The paper's pretrained image voters and full Adult pool: trained (or loaded) by their own modules.
VOTERS.update({name: VoterSpec(name, "image", "pretrained", description, recipe)
               for name, (description, recipe) in PRETRAINED_VOTERS.items()})
VOTERS.update({name: VoterSpec(name, "tabular", "tabular_full", description, recipe)
               for name, (description, recipe) in TABULAR_FULL_VOTERS.items()})


def parse_pool(pool) -> list[tuple[str, dict]]:
    """Pool entries are voter names or ``{voter: name, <recipe key>: value}`` (recipe overrides)."""
    parsed = []
    for entry in pool:
        if isinstance(entry, str):
            parsed.append((entry, {}))
        elif isinstance(entry, dict) and "voter" in entry:
            overrides = dict(entry)
            parsed.append((overrides.pop("voter"), overrides))
        else:
            raise ConfigError(f"a pool entry must be a voter name or {{voter: name, ...}}, got {entry!r}")
    return parsed


class Voter:
    """A trained voter: ``predict_proba(X) -> (n, K)`` on raw inputs (uint8 images or an Adult table)."""

    def __init__(self, spec: VoterSpec, model: Any, num_classes: int, norm: tuple | None = None):
        self.spec, self.model, self.num_classes, self.norm = spec, model, num_classes, norm

    @property
    def name(self) -> str:
        return self.spec.name

    def predict_proba(self, X) -> np.ndarray:
        if self.spec.kind in ("pretrained", "tabular_full"):  # they preprocess their inputs themselves
            return self.model.predict_proba(X)
        if self.spec.kind == "torch":
            return predict_proba(self.model, as_tensor(X, *self.norm))
        features = _tabular_frame(X) if self.spec.modality == "tabular" else _image_features(X)
        probs = np.zeros((len(X), self.num_classes))
        probs[:, self.model.classes_] = self.model.predict_proba(features)
        return probs


def _model_kwargs(recipe: dict) -> dict:
    """Architecture arguments of a recipe (hidden widths and dropout)."""
    kwargs = {k: recipe[k] for k in ("dropout",) if k in recipe}
    if "hidden" in recipe:
        kwargs["hidden"] = tuple(recipe["hidden"])
    return kwargs


def _channel_stats(X: np.ndarray) -> tuple[tuple, tuple]:
    x = np.asarray(X, dtype=np.float64) / 255.0
    axes = tuple(range(x.ndim - 1)) if x.ndim == 4 else None
    mean, std = x.mean(axis=axes), x.std(axis=axes)
    return tuple(np.atleast_1d(mean).tolist()), tuple(np.atleast_1d(std).tolist())


def _train_torch(spec: VoterSpec, recipe: dict, X, y, X_val, y_val, num_classes, seed, device) -> tuple[dict, tuple]:
    """Train with the recipe; keep the epoch with the best CLV accuracy. Returns (state_dict, normalisation)."""
    seed_everything(seed)
    norm = (CIFAR_MEAN, CIFAR_STD) if recipe.get("cifar_norm") else _channel_stats(X)
    Xt, Xv = as_tensor(X, *norm), as_tensor(X_val, *norm)
    model = build_model(recipe["arch"], tuple(Xt.shape[1:]), num_classes, **_model_kwargs(recipe)).to(device)
    opt = make_optimizer(model, recipe["optimizer"], recipe["lr"], recipe["weight_decay"])
    epochs = recipe["epochs"]
    if "milestones" in recipe:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, recipe["milestones"], recipe.get("gamma", 0.1))
    elif "linear_decay_from" in recipe:
        start = recipe["linear_decay_from"]
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 if e < start else max(0.0, (epochs - e) / (epochs - start)))
    else:
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    scaler = amp_scaler(device)
    gen = torch.Generator().manual_seed(seed)
    augment = random_crop_flip if recipe.get("augment") else None
    targets = torch.as_tensor(np.asarray(y)).long()
    best, best_acc = None, -1.0
    from shared.progress import progress

    for _ in progress(range(epochs), desc=f"voter {spec.name}"):
        train_epoch(model, Xt, targets, opt, batch_size=recipe["batch"], generator=gen, augment=augment, scaler=scaler)
        sched.step()
        acc = float((predict_proba(model, Xv).argmax(1) == np.asarray(y_val)).mean())
        if acc > best_acc:
            best_acc, best = acc, copy.deepcopy({k: v.cpu() for k, v in model.state_dict().items()})
    return best, norm


def train_voter(
    name: str, X, y, X_val, y_val, *, num_classes: int, seed: int = 42, device="cpu",
    cache: ArtifactCache | None = None, recipe_overrides: dict | None = None, classes: tuple | None = None,
    data_dir=None,
) -> Voter:
    """Train voter ``name`` on (X, y), selecting on (X_val, y_val); cached by recipe and data.

    ``classes`` (class names) is needed by the zero-shot CLIP voter only; ``data_dir`` is the data folder holding
    the pretrained voters' default weight files (``weights/``, ``tabpfn/``).
    """
    if name not in VOTERS:
        raise unknown_choice("voter", name, VOTERS)
    spec = VOTERS[name]
    tabular = isinstance(X, pd.DataFrame)
    if (spec.modality == "tabular") != tabular:
        raise ConfigError(f"voter {name} is for {spec.modality} data; the dataset is {'tabular' if tabular else 'images'}")
    cache = cache or ArtifactCache()
    recipe = dict(spec.recipe, **(recipe_overrides or {}))
    if spec.kind == "tabular_full":
        model = fit_tabular_voter(name, recipe, X, y, X_val, y_val, num_classes=num_classes, seed=seed, device=device,
                                  cache=cache, data_dir=data_dir)
        return Voter(spec, model, num_classes)
    if spec.kind == "pretrained":
        model = fit_pretrained_voter(name, recipe, X, y, X_val, y_val, num_classes=num_classes,
                                     classes=classes or tuple(str(k) for k in range(num_classes)), seed=seed,
                                     device=device, cache=cache, data_dir=data_dir)
        return Voter(spec, model, num_classes)
    params = {"voter": name, "recipe": recipe, "seed": seed, "num_classes": num_classes,
              "data": data_fingerprint(X, y), "val": data_fingerprint(X_val, y_val)}
    if spec.kind == "sklearn":
        def build():
            seed_everything(seed)
            features = _tabular_frame(X) if tabular else _image_features(X)
            return _sklearn_estimator(name, seed).fit(features, np.asarray(y))

        model = cache.get_or_build("ciln-voter", params, build, fmt="skops", code=[_sklearn_estimator])
        return Voter(spec, model, num_classes)

    import torch as _torch

    from shared.device import select_device

    device = device if isinstance(device, _torch.device) else select_device(device)

    def build_torch():
        state, norm = _train_torch(spec, recipe, X, y, X_val, y_val, num_classes, seed, device)
        state = dict(state)
        state["__norm__"] = _torch.tensor([list(norm[0]), list(norm[1])], dtype=_torch.float64)
        return state

    state = cache.get_or_build("ciln-voter", params, build_torch, fmt="torch", code=[_train_torch])
    norm_t = state.pop("__norm__")
    norm = (tuple(norm_t[0].tolist()), tuple(norm_t[1].tolist()))
    in_shape = tuple(as_tensor(np.asarray(X[:1]), *norm).shape[1:])
    model = build_model(recipe["arch"], in_shape, num_classes, **_model_kwargs(recipe))
    model.load_state_dict(state)
    return Voter(spec, model.to(device).eval(), num_classes, norm)
