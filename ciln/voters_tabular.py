"""The paper's Adult voters (Sec. III-B): XGBoost (``xgboost_dummyna``), CatBoost, RTDL MLP, FT-Transformer, TabPFN v1.

Each voter is fitted on a clean Adult table X (DataFrame with ``ADULT_NUMERIC + ADULT_CATEGORICAL``, NaN
allowed) with model selection on (X_val, y_val), and returns a model whose ``predict_proba(X)`` gives (n, K)
probabilities for *corrupted* copies of such tables. Missing values at inference follow the official code:

- XGBoost: one-hot with a NaN indicator per categorical column (``dummy_na=True``), numeric NaN native;
- CatBoost: categorical NaN -> the category ``"__NaN__"``, numeric NaN native;
- RTDL MLP / FT-Transformer: numeric NaN -> clean-train median, categorical NaN (or an unseen level) -> index
  0, an embedding row fixed at zero (the zero-embedding sentinel);
- TabPFN: numeric NaN -> clean-train median, categorical NaN -> an all-zero one-hot block.

    model = fit_tabular_voter("rtdl_mlp", {"max_epochs": 5}, X, y, X_val, y_val, num_classes=2, seed=42,
                              device="cpu", cache=ArtifactCache())
    probs = model.predict_proba(X_corrupted)        # (n, 2)

Boosters are cached as their native model files (fmt "dir"), the networks as state dicts (fmt "torch"). The
preprocessing (medians, quantile transform, vocabularies, one-hot columns) is a deterministic function of the
training table, so it is refitted from X on each call rather than stored. TabPFN has no training and is not
cached; it needs the TabPFN v1 checkpoint file (``tabpfn_checkpoint_path``).
"""
from __future__ import annotations

import copy
import importlib.util
import typing
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from shared.cache import ArtifactCache
from shared.datasets.files import check_not_lfs_pointer
from shared.datasets.real import ADULT_CATEGORICAL, ADULT_NUMERIC, missing_data_error
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.paths import data_dir
from shared.progress import progress
from shared.seeding import seed_everything

NUMERIC, CATEGORICAL = list(ADULT_NUMERIC), list(ADULT_CATEGORICAL)
NAN_CATEGORY = "__NaN__"
TABPFN_FILE = "prior_diff_real_checkpoint_n_0_epoch_42.cpkt"
TABPFN_URL = f"https://github.com/PriorLabs/TabPFN/raw/refs/tags/v1.0.0/tabpfn/models_diff/{TABPFN_FILE}"

_NET = {"batch": 256, "patience": 16, "max_epochs": 200}
TABULAR_FULL_VOTERS = {
    "xgboost": ("XGBoost, RTDL-tuned for Adult, one-hot with dummy_na (CILN xgboost_dummyna)", {
        "n_estimators": 2000, "learning_rate": 0.028, "max_depth": 10, "min_child_weight": 4.06, "subsample": 0.953,
        "colsample_bytree": 0.541, "colsample_bylevel": 0.617, "reg_lambda": 2.9e-8, "early_stopping_rounds": 50}),
    "catboost": ("CatBoost (library defaults, early stopping on CLV), NaN categoricals as '__NaN__'", {
        "iterations": 2000, "learning_rate": None, "depth": 6, "early_stopping_rounds": 50}),
    "rtdl_mlp": ("RTDL MLP, tuned for Adult: embeddings d=421, layers 42-503-503-503-111", {
        "d_embedding": 421, "layers": [42, 503, 503, 503, 111], "dropout": 0.0, "lr": 3.21e-4,
        "weight_decay": 7.17e-5, **_NET}),
    "ft_transformer": ("FT-Transformer, RTDL default configuration (3 blocks, d=192)", {
        "n_blocks": 3, "lr": 1e-4, "weight_decay": 1e-5, **_NET}),
    "tabpfn": ("TabPFN v1: 32 members on 1,000-row stratified subsamples, 3 ensemble configurations each", {
        "members": 32, "subsample": 1000, "max_features": 100, "n_ensemble_configurations": 3,
        "checkpoint": None, "trust_checkpoint": False, "predict_batch": 16384}),
}


def fit_tabular_voter(name: str, recipe: dict, X: pd.DataFrame, y, X_val: pd.DataFrame, y_val, *,
                      num_classes: int, seed: int, device, cache: ArtifactCache, data_dir=None):
    """Fit Adult voter ``name`` on (X, y), selecting on (X_val, y_val); ``recipe`` overrides its defaults.

    X, X_val: (n, 13) Adult tables; y, y_val: (n,) ints in [0, num_classes). Returns a model with
    ``predict_proba(X) -> (n, num_classes)`` float64. ``cache`` stores trained boosters and networks (TabPFN has
    nothing to train and ignores it; its default checkpoint is looked up under ``data_dir``).
    """
    if name not in TABULAR_FULL_VOTERS:
        raise unknown_choice("tabular voter", name, TABULAR_FULL_VOTERS)
    defaults = TABULAR_FULL_VOTERS[name][1]
    unknown = set(recipe) - set(defaults)
    if unknown:
        raise ConfigError(f"unknown recipe keys {sorted(unknown)} for voter {name}; valid keys: {', '.join(defaults)}")
    recipe = {**defaults, **recipe}
    y, y_val = np.asarray(y, dtype=np.int64), np.asarray(y_val, dtype=np.int64)
    if name == "tabpfn":
        return TabPFNVoter(recipe, X, y, num_classes=num_classes, seed=seed, device=device, data_dir=data_dir)
    from ciln.voters import data_fingerprint  # here, not at the top: ciln.voters imports this module

    cache = cache if cache is not None else ArtifactCache()
    params = {"voter": name, "recipe": recipe, "seed": seed, "num_classes": num_classes,
              "data": data_fingerprint(X, y), "val": data_fingerprint(X_val, y_val)}
    if name == "xgboost":
        return _fit_xgboost(recipe, X, y, X_val, y_val, num_classes, seed, cache, params)
    if name == "catboost":
        return _fit_catboost(recipe, X, y, X_val, y_val, num_classes, seed, cache, params)
    return _fit_network(name, recipe, X, y, X_val, y_val, num_classes, seed, device, cache, params)


def _class_columns(probs: np.ndarray, classes, num_classes: int) -> np.ndarray:
    """(n, len(classes)) probabilities placed into the columns ``classes`` of an (n, num_classes) array."""
    out = np.zeros((len(probs), num_classes))
    out[:, np.asarray(classes, dtype=int)] = probs
    return out


# ---------------------------------------------------------------------------------------------- XGBoost
def _dummy_na_frame(X: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """Numeric columns (NaN kept) + one-hot categoricals with a ``<col>_nan`` indicator; ``columns`` aligns to train."""
    dummies = pd.get_dummies(X[CATEGORICAL].astype(object), dummy_na=True, dtype=float)
    frame = pd.concat([X[NUMERIC].astype(float), dummies], axis=1)
    return frame if columns is None else frame.reindex(columns=columns, fill_value=0.0)


class XGBoostVoter:
    """XGBoost on the dummy_na encoding; ``columns`` are the training one-hot columns."""

    def __init__(self, booster, columns: list[str], num_classes: int):
        self.booster, self.columns, self.num_classes = booster, columns, num_classes

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        features = _dummy_na_frame(X, self.columns).to_numpy(np.float32)
        return _class_columns(self.booster.predict_proba(features), self.booster.classes_, self.num_classes)


def _fit_xgboost(recipe, X, y, X_val, y_val, num_classes, seed, cache, params) -> XGBoostVoter:
    import xgboost as xgb

    columns = list(_dummy_na_frame(X).columns)
    encode = lambda frame: _dummy_na_frame(frame, columns).to_numpy(np.float32)  # noqa: E731

    def build(folder: Path):
        model = xgb.XGBClassifier(**recipe, tree_method="hist", eval_metric="error", random_state=seed)
        model.fit(encode(X), y, eval_set=[(encode(X_val), y_val)], verbose=False)
        folder.mkdir()
        model.save_model(folder / "model.ubj")

    folder = cache.get_or_build("ciln-voter", params, build, fmt="dir", code=[_fit_xgboost])
    booster = xgb.XGBClassifier()
    booster.load_model(folder / "model.ubj")
    return XGBoostVoter(booster, columns, num_classes)


# ---------------------------------------------------------------------------------------------- CatBoost
def _catboost_frame(X: pd.DataFrame) -> pd.DataFrame:
    """Numeric columns as floats (NaN native), categoricals as strings with NaN -> "__NaN__"."""
    cats = X[CATEGORICAL].astype(object)
    return pd.concat([X[NUMERIC].astype(float), cats.where(cats.notna(), NAN_CATEGORY).astype(str)], axis=1)


class CatBoostVoter:
    """CatBoost on the raw table (categoricals as strings, NaN -> "__NaN__")."""

    def __init__(self, model, num_classes: int):
        self.model, self.num_classes = model, num_classes

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        probs = self.model.predict_proba(_catboost_frame(X))
        return _class_columns(probs, self.model.classes_, self.num_classes)


def _fit_catboost(recipe, X, y, X_val, y_val, num_classes, seed, cache, params) -> CatBoostVoter:
    from catboost import CatBoostClassifier

    def build(folder: Path):
        model = CatBoostClassifier(**recipe, random_seed=seed, cat_features=CATEGORICAL, use_best_model=True,
                                   allow_writing_files=False, verbose=False)
        model.fit(_catboost_frame(X), y, eval_set=(_catboost_frame(X_val), y_val))
        folder.mkdir()
        model.save_model(str(folder / "model.cbm"))

    folder = cache.get_or_build("ciln-voter", params, build, fmt="dir", code=[_fit_catboost])
    return CatBoostVoter(CatBoostClassifier().load_model(str(folder / "model.cbm")), num_classes)


# ---------------------------------------------------------------------------------------------- encoders
class AdultEncoder:
    """Clean-train statistics: numeric medians, optional quantile transform, categorical vocabularies.

    ``numeric(X)`` -> (n, 5) float32, NaN replaced by the clean-train median, then quantile-normalised when
    ``quantile_seed`` is given (RTDL: QuantileTransformer(normal), n_quantiles = clip(n // 30, 10, 1000)).
    ``codes(X)`` -> (n, 8) int64, 1..k for the training levels of each column, 0 for NaN or an unseen level.
    """

    def __init__(self, X: pd.DataFrame, quantile_seed: int | None = None):
        from sklearn.preprocessing import QuantileTransformer

        self.medians = X[NUMERIC].astype(float).median().to_numpy()
        self.levels = [sorted(X[c].dropna().astype(str).unique()) for c in CATEGORICAL]
        self.quantile = None
        if quantile_seed is not None:
            n_quantiles = max(min(len(X) // 30, 1000), 10)
            self.quantile = QuantileTransformer(output_distribution="normal", n_quantiles=n_quantiles, subsample=10**9,
                                                random_state=quantile_seed)
            self.quantile.fit(self._filled(X))

    @property
    def cardinalities(self) -> list[int]:
        return [len(levels) for levels in self.levels]

    def _filled(self, X: pd.DataFrame) -> np.ndarray:
        values = X[NUMERIC].to_numpy(float)
        return np.where(np.isnan(values), self.medians, values)

    def numeric(self, X: pd.DataFrame) -> np.ndarray:
        values = self._filled(X)
        return (self.quantile.transform(values) if self.quantile is not None else values).astype(np.float32)

    def codes(self, X: pd.DataFrame) -> np.ndarray:
        columns = []
        for c, levels in zip(CATEGORICAL, self.levels):
            index = pd.Index(levels).get_indexer(X[c].astype(str))
            columns.append(np.where(X[c].isna().to_numpy(), -1, index) + 1)  # NaN / unseen (-1) -> sentinel 0
        return np.stack(columns, axis=1).astype(np.int64)

    def one_hot(self, X: pd.DataFrame) -> np.ndarray:
        """(n, 5 + sum k) float32: median-filled raw numerics, then one-hot blocks (all zero for NaN)."""
        one_hots = [np.eye(k + 1)[codes][:, 1:] for k, codes in zip(self.cardinalities, self.codes(X).T)]
        blocks = [self._filled(X), *one_hots]
        return np.concatenate(blocks, axis=1).astype(np.float32)


# ---------------------------------------------------------------------------------------------- RTDL networks
def _zero_sentinel(embeddings: nn.Module) -> nn.Module:
    """Make index 0 of every table of an rtdl ``CategoricalEmbeddings`` a zero vector that is never trained."""
    for table in embeddings.embeddings:
        table.padding_idx = 0  # zero gradient; AdamW's decay keeps a zero row at zero
        with torch.no_grad():
            table.weight[0].zero_()
    return embeddings


class RtdlMLP(nn.Module):
    """RTDL MLP: [numeric (n, 5), flattened categorical embeddings (n, 8 d)] -> Linear-ReLU-Dropout blocks -> (n, K)."""

    def __init__(self, n_numeric: int, cardinalities: list[int], d_embedding: int, layers: list[int],
                 dropout: float, num_classes: int):
        from rtdl_revisiting_models import CategoricalEmbeddings

        super().__init__()
        tables = CategoricalEmbeddings([k + 1 for k in cardinalities], d_embedding, bias=False)
        self.cat_embeddings = _zero_sentinel(tables)
        widths = [n_numeric + len(cardinalities) * d_embedding, *layers]
        self.blocks = nn.Sequential(*[
            nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)) for a, b in zip(widths, widths[1:])
        ])
        self.head = nn.Linear(widths[-1], num_classes)

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(torch.cat([x_num, self.cat_embeddings(x_cat).flatten(1)], dim=1)))


def _ft_transformer(n_numeric: int, cardinalities: list[int], n_blocks: int, num_classes: int) -> nn.Module:
    """rtdl FT-Transformer (default configuration) with the zero sentinel as each categorical's index 0."""
    from rtdl_revisiting_models import FTTransformer

    kwargs = FTTransformer.get_default_kwargs(n_blocks)
    model = FTTransformer(n_cont_features=n_numeric, cat_cardinalities=[k + 1 for k in cardinalities],
                          d_out=num_classes, **kwargs)
    _zero_sentinel(model.cat_embeddings)
    return model


def _network(name: str, recipe: dict, encoder: AdultEncoder, num_classes: int) -> nn.Module:
    if name == "rtdl_mlp":
        return RtdlMLP(len(NUMERIC), encoder.cardinalities, recipe["d_embedding"], recipe["layers"], recipe["dropout"],
                       num_classes)
    return _ft_transformer(len(NUMERIC), encoder.cardinalities, recipe["n_blocks"], num_classes)


def _optimizer(name: str, net: nn.Module, recipe: dict) -> torch.optim.Optimizer:
    """AdamW; the FT-Transformer keeps RTDL's groups (no decay on embeddings, norms and biases)."""
    params = net.make_parameter_groups() if name == "ft_transformer" else net.parameters()
    return torch.optim.AdamW(params, lr=recipe["lr"], weight_decay=recipe["weight_decay"])


class TorchTabularVoter:
    """An RTDL network with its encoder; ``predict_proba`` in batches of ``batch_size`` rows."""

    def __init__(self, net: nn.Module, encoder: AdultEncoder, device: torch.device, batch_size: int = 4096):
        self.net, self.encoder, self.device, self.batch_size = net.to(device).eval(), encoder, device, batch_size

    def tensors(self, X: pd.DataFrame) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.as_tensor(self.encoder.numeric(X)), torch.as_tensor(self.encoder.codes(X))

    @torch.no_grad()
    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        x_num, x_cat = self.tensors(X)
        out = [torch.softmax(self.net(x_num[i:i + self.batch_size].to(self.device),
                                      x_cat[i:i + self.batch_size].to(self.device)).float(), dim=1).cpu()
               for i in range(0, len(x_num), self.batch_size)]
        return torch.cat(out).double().numpy()


def _train_network(name, recipe, voter: TorchTabularVoter, X, y, X_val, y_val, seed) -> dict:
    """Mini-batch AdamW; keep the epoch with the best CLV accuracy, stop after ``patience`` epochs without gain."""
    net, device = voter.net, voter.device
    opt = _optimizer(name, net, recipe)
    x_num, x_cat = voter.tensors(X)
    targets = torch.as_tensor(y)
    gen = torch.Generator().manual_seed(seed)
    best, best_acc, stale = None, -1.0, 0
    for _ in progress(range(recipe["max_epochs"]), desc=f"voter {name}"):
        net.train()
        for idx in torch.randperm(len(targets), generator=gen).split(recipe["batch"]):
            logits = net(x_num[idx].to(device), x_cat[idx].to(device))
            loss = nn.functional.cross_entropy(logits, targets[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        net.eval()
        acc = float((voter.predict_proba(X_val).argmax(1) == y_val).mean())
        if acc > best_acc:
            best, best_acc, stale = copy.deepcopy({k: v.cpu() for k, v in net.state_dict().items()}), acc, 0
        else:
            stale += 1
            if stale >= recipe["patience"]:
                break
    return best


def _fit_network(name, recipe, X, y, X_val, y_val, num_classes, seed, device, cache, params) -> TorchTabularVoter:
    from shared.device import select_device

    device = device if isinstance(device, torch.device) else select_device(device)
    encoder = AdultEncoder(X, quantile_seed=seed)

    def build() -> dict:
        seed_everything(seed)
        voter = TorchTabularVoter(_network(name, recipe, encoder, num_classes), encoder, device)
        return _train_network(name, recipe, voter, X, y, X_val, y_val, seed)

    state = cache.get_or_build("ciln-voter", params, build, fmt="torch", code=[_fit_network])
    net = _network(name, recipe, encoder, num_classes)
    net.load_state_dict(state)
    return TorchTabularVoter(net, encoder, device)


# ---------------------------------------------------------------------------------------------- TabPFN v1
def tabpfn_checkpoint_path(recipe: dict, root=None) -> Path:
    """The TabPFN v1 checkpoint: ``recipe["checkpoint"]`` or ``<data_dir>/tabpfn/<TABPFN_FILE>`` (``root``: the data
    folder, default ``$NOISY_DATA_DIR`` or ``<repo>/data``); raises if absent."""
    if recipe.get("checkpoint"):
        candidates = [Path(recipe["checkpoint"]).expanduser()]
    else:
        candidates = [data_dir(root) / "tabpfn" / TABPFN_FILE]
        package = importlib.util.find_spec("tabpfn")  # tabpfn 0.1.x's own download location, if used before
        if package is not None:
            candidates += [Path(p) / "models_diff" / TABPFN_FILE for p in package.submodule_search_locations]
    for path in candidates:
        if path.is_file():
            return path
    raise missing_data_error(
        f"the TabPFN v1 checkpoint {TABPFN_FILE}", candidates,
        f"Download it (about 100 MB; the file tabpfn 0.1.11 fetches) from\n  {TABPFN_URL}\n"
        f"and save it as the first path above, or pass the recipe key checkpoint=<path to the .cpkt file>.",
    )


def _tabpfn_modules():
    """tabpfn 0.1.11's model code. It imports ``Optional`` from torch.nn.modules.transformer, which torch >= 2.x
    no longer re-exports; the missing name is added back (typing.Optional) before the import."""
    import torch.nn.modules.transformer as torch_transformer

    if not hasattr(torch_transformer, "Optional"):
        torch_transformer.Optional = typing.Optional
    from tabpfn import encoders
    from tabpfn.scripts import transformer_prediction_interface as interface
    from tabpfn.transformer import TransformerModel

    return encoders, TransformerModel, interface


def tabpfn_network(config: dict) -> nn.Module:
    """TabPFN's transformer for a checkpoint's config (as tabpfn's ``load_model_only_inference`` builds it)."""
    encoders, TransformerModel, _ = _tabpfn_modules()
    nan_keys = ("nan_prob_no_reason", "nan_prob_a_reason", "nan_prob_unknown_reason")
    nan_encoder = any(config.get(k, 0.0) > 0.0 for k in nan_keys)
    encoder = encoders.NanHandlingEncoder if nan_encoder else partial(encoders.Linear, replace_nan_by_zero=True)
    canonical = config.get("canonical_y_encoder")
    y_encoder = encoders.get_Canonical(config["max_num_classes"]) if canonical else encoders.Linear
    emsize = config["emsize"]
    return TransformerModel(encoder(config["num_features"], emsize), config["max_num_classes"], emsize, config["nhead"],
                            emsize * config["nhid_factor"], config["nlayers"], y_encoder=y_encoder(1, emsize),
                            dropout=config["dropout"], efficient_eval_masking=config["efficient_eval_masking"])


def _numpy_safe_globals() -> list:
    """numpy scalars and dtypes (plain data a config pickled under numpy 1.x or 2.x may hold), for weights_only."""
    from numpy._core.multiarray import scalar

    dtypes = [getattr(np.dtypes, name) for name in np.dtypes.__all__]
    return [scalar, (scalar, "numpy.core.multiarray.scalar"), np.dtype, *dtypes]


def load_tabpfn(path: Path, trust: bool = False) -> tuple[nn.Module, dict]:
    """(network in eval mode, config) from a TabPFN v1 ``.cpkt`` = torch.save((state_dict, optimizer, config)).

    Loaded with ``weights_only=True`` (tensors, containers and numpy scalars; no code in the file runs) unless
    ``trust``: then as tabpfn 0.1.11 itself loads it (full unpickling; only for a file from the official URL)."""
    check_not_lfs_pointer(path)
    try:
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            state, _, config = torch.load(path, map_location="cpu", weights_only=not trust)
    except Exception as e:  # noqa: BLE001 - any unreadable file gets the same explanation
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:  # noqa: BLE001 - not even a torch zip file
            unsafe = []
        hint = (f" It refers to Python objects that a weights_only load refuses: {unsafe}. If this is the file from "
                f"{TABPFN_URL}, pass the recipe key trust_checkpoint=True to unpickle it fully.") if unsafe else ""
        raise DataFormatError(f"{path} is not a readable TabPFN v1 checkpoint ((state_dict, _, config) saved by "
                              f"torch.save): {type(e).__name__}: {str(e)[:300]}.{hint}") from e
    net = tabpfn_network(config)
    net.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    return net.eval(), config


class TabPFNVoter:
    """TabPFN v1 ensemble (official recipe): member i is TabPFN on a stratified ``subsample``-row draw of the clean
    train set (seed + i) with ``n_ensemble_configurations`` configurations; the members' softmaxes are averaged.

    Features: median-filled numerics and one-hot categoricals, the ``max_features`` of highest training variance.
    Test rows attend only to the training rows, so scoring them in chunks of ``predict_batch`` rows gives the same
    probabilities; each chunk refits TabPFN's per-column power transform, so large chunks are faster.
    """

    def __init__(self, recipe: dict, X: pd.DataFrame, y: np.ndarray, *, num_classes: int, seed: int, device,
                 data_dir=None):
        from sklearn.model_selection import train_test_split

        from shared.device import select_device

        self.recipe, self.num_classes, self.seed = recipe, num_classes, seed
        self.device = device if isinstance(device, torch.device) else select_device(device)
        self.net, self.config = load_tabpfn(tabpfn_checkpoint_path(recipe, data_dir), recipe["trust_checkpoint"])
        self.net.to(self.device)
        self.encoder = AdultEncoder(X)
        features = self.encoder.one_hot(X)
        self.columns = np.sort(np.argsort(-features.var(axis=0), kind="stable")[:recipe["max_features"]])
        self.members = []
        for i in range(recipe["members"]):
            rows = np.arange(len(y))
            if len(y) > recipe["subsample"]:
                rows, _ = train_test_split(rows, train_size=recipe["subsample"], stratify=y, random_state=seed + i)
            self.members.append((features[rows][:, self.columns], y[rows]))

    def features(self, X: pd.DataFrame) -> np.ndarray:
        return self.encoder.one_hot(X)[:, self.columns]

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        test = self.features(X)
        total = np.zeros((len(test), self.num_classes))
        for i, (train, labels) in enumerate(progress(self.members, desc="voter tabpfn")):
            classes, encoded = np.unique(labels, return_inverse=True)
            chunks = [self._member_proba(train, encoded, test[j:j + self.recipe["predict_batch"]], self.seed + i)
                      for j in range(0, len(test), self.recipe["predict_batch"])]
            total += _class_columns(np.concatenate(chunks), classes, self.num_classes)
        return total / len(self.members)

    def _member_proba(self, train: np.ndarray, labels: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
        """One TabPFN call (as tabpfn's TabPFNClassifier.predict_proba): (len(test), n_classes) softmax."""
        _, _, interface = _tabpfn_modules()
        x = torch.as_tensor(np.concatenate([train, test]), dtype=torch.float32).unsqueeze(1)
        y = torch.as_tensor(np.concatenate([labels, np.zeros(len(test))]), dtype=torch.float32).unsqueeze(1)
        # tabpfn resets the global warning filters and calls deprecated torch APIs: keep both local
        with warnings.catch_warnings(record=True):
            probs = interface.transformer_predict(
                self.net, x, y, len(train), device=str(self.device), inference_mode=True, preprocess_transform="mix",
                N_ensemble_configurations=self.recipe["n_ensemble_configurations"], multiclass_decoder="permutation",
                feature_shift_decoder=True, differentiable_hps_as_style=self.config["differentiable_hps_as_style"],
                softmax_temperature=None, seed=seed, batch_size_inference=32,
                **interface.get_params_from_config(self.config))
        return probs.squeeze(0).double().cpu().numpy()
