"""PL-IDN (Gu et al. 2022): CIFAR-10 training images labelled by 10 synthetic raters, the paper's baseline.

The release of a tier (L, M, H = Gu's "low", "medium", "high") is read from the TFRecord shards as Google
distributes them::

    <data_dir>/plidn/cifar10/{low,medium,high}/train-*-of-*, valid-*-of-*   (rater_features.json is not read)

Each record is a ``tf.train.Example`` with ``image/raw`` (32x32x3 uint8 bytes, row-major HWC),
``image/class/label`` (the clean label), ``noisy_labels`` (one label per rater) and ``rater_ids``. The reader
is self-contained (TFRecord framing with its masked CRC-32C checks and the protobuf wire format; the
``crc32c`` package computes the checksums).

Release rows are matched to CILN's rows by the SHA-256 of the raw image bytes (the paper: 19,987 of the
22,500 NLT rows, i.e. all of PL-IDN's train split). ``plidn_votes`` gives the votes per tier, from the release
or from the offline stand-in (``ciln.references.fallible_rater_votes``), by the setting ``plidn``.
"""
from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ciln.references import fallible_rater_votes
from ciln.splits import gu_five_way_split
from shared.cache import ArtifactCache
from shared.datasets import Dataset
from shared.datasets.files import check_not_lfs_pointer
from shared.datasets.real import missing_data_error
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.paths import data_dir as resolve_data_dir
from shared.progress import progress

LEVELS = {"L": "low", "M": "medium", "H": "high"}
SOURCES = ("fallible_raters", "release")
BUCKET = "gs://noisy_label_synthetic_datasets/public/cifar10"
IMAGE_SHAPE = (32, 32, 3)
FEATURES = {"image/raw": bytes, "image/class/label": int, "noisy_labels": int, "rater_ids": bytes}
_CRC_MASK = 0xA282EAD8


class NoPlidnLabels(ConfigError):
    """The requested items have no PL-IDN labels (the release labels CIFAR-10 training images only)."""


@dataclass(frozen=True)
class PlidnRelease:
    """One tier of the PL-IDN release: n images (train shards first, then valid) with R rater labels each."""

    images: np.ndarray  # (n, 32, 32, 3) uint8
    labels: np.ndarray  # (n,) int64 clean labels
    noisy_labels: np.ndarray  # (n, R) int64, column r = the label of rater rater_ids[:, r]
    rater_ids: np.ndarray  # (n, R) str
    split: np.ndarray  # (n,) "train" or "valid"


def release_dir(tier: str, data_dir=None) -> Path:
    """The folder of a tier's shards: ``<data_dir>/plidn/cifar10/<low|medium|high>``."""
    if tier not in LEVELS:
        raise unknown_choice("PL-IDN tier", tier, LEVELS)
    return resolve_data_dir(data_dir) / "plidn" / "cifar10" / LEVELS[tier]


def locate_release(tier: str, data_dir=None) -> list[Path]:
    """All train and valid shards of a tier; a DataNotFoundError when a split or a shard is missing."""
    return _shards(release_dir(tier, data_dir), tier)


def _shards(folder: Path, tier: str) -> list[Path]:
    """All train and valid shards of the folder; a DataNotFoundError when a split or a shard is missing."""
    how = (f"Download it with\n  gsutil -m cp -r {BUCKET}/{LEVELS[tier]} {folder.parent}/\n"
           "(anonymous read; about 79 MB per tier).")
    shards = []
    for split in ("train", "valid"):
        found = sorted(folder.glob(f"{split}-*-of-*"))
        if not found:
            raise missing_data_error(f"PL-IDN tier {tier} ({LEVELS[tier]!r})", [folder / f"{split}-*-of-*"], how)
        total = re.search(r"-of-(\d+)", found[0].name)
        if total and len(found) != int(total.group(1)):
            raise DataNotFoundError(f"{folder}: {len(found)} of the {int(total.group(1))} {split} shards are present "
                                    f"(an interrupted download?). {how}")
        shards += found
    return shards


def read_release(tier: str, data_dir=None, *, cache: ArtifactCache | None = None) -> PlidnRelease:
    """The release of ``tier`` ("L", "M" or "H"), parsed once and cached (keyed by the shards' sizes and mtimes)."""
    folder = release_dir(tier, data_dir)
    shards = _shards(folder, tier)
    stamp = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in shards]

    def build():
        rows = []
        with progress(desc=f"PL-IDN {LEVELS[tier]}: records", unit="record") as bar:
            for path in shards:
                for index, record in enumerate(read_tfrecord(path)):
                    rows.append((*_release_row(record, path, index), path.name.split("-")[0]))
                    bar.update()
        if not rows:
            raise DataFormatError(f"{folder}: the shards hold no records")
        images, labels, noisy, ids, split = zip(*rows)
        if len({len(r) for r in noisy}) != 1:
            raise DataFormatError(f"{folder}: records have different numbers of raters: {sorted({len(r) for r in noisy})}")
        return {"images": np.stack(images), "labels": np.array(labels, dtype=np.int64),
                "noisy_labels": np.array(noisy, dtype=np.int64), "rater_ids": np.array(ids, dtype=str),
                "split": np.array(split)}

    arrays = (cache or ArtifactCache()).get_or_build(
        "ciln-plidn-release", {"folder": str(folder.resolve()), "files": stamp}, build, code=[read_release])
    return PlidnRelease(**arrays)


def _release_row(record: bytes, path: Path, index: int) -> tuple:
    """(image (32, 32, 3) uint8, clean label, noisy labels, rater ids) of one record."""
    where = f"{path}, record {index}"
    try:
        features = parse_example(record)
    except (IndexError, ValueError, struct.error) as e:
        raise DataFormatError(f"{where}: not a serialized tf.train.Example ({e})") from e
    for name, kind in FEATURES.items():
        if name not in features:
            raise DataFormatError(f"{where}: missing feature {name!r} (has {sorted(features)})")
        if not all(isinstance(v, kind) for v in features[name]):
            raise DataFormatError(f"{where}: feature {name!r} must be of type {'bytes_list' if kind is bytes else 'int64_list'}")
    image = features["image/raw"]
    if len(image) != 1 or len(image[0]) != np.prod(IMAGE_SHAPE):
        raise DataFormatError(f"{where}: image/raw must be one string of {np.prod(IMAGE_SHAPE)} bytes (32x32x3 uint8), "
                              f"got {[len(v) for v in image]} bytes")
    ids = features["rater_ids"]
    if len(features["image/class/label"]) != 1 or len(features["noisy_labels"]) != len(ids):
        raise DataFormatError(f"{where}: expected one clean label and one noisy label per rater id, got "
                              f"{len(features['image/class/label'])} and {len(features['noisy_labels'])} for {len(ids)} ids")
    pixels = np.frombuffer(image[0], dtype=np.uint8).reshape(IMAGE_SHAPE)
    return pixels, features["image/class/label"][0], features["noisy_labels"], [i.decode(errors="replace") for i in ids]


# ---------------------------------------------------------------------------------------------- TFRecord format
def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C rotated right by 15 bits plus a constant (mod 2**32)."""
    try:
        import crc32c
    except ImportError as e:
        raise ImportError("reading TFRecords needs the crc32c package; pip install -e '.[full]' (tfrecord brings it)") from e

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _CRC_MASK) & 0xFFFFFFFF


def read_tfrecord(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file: each is uint64 length, masked CRC of the length, data, masked CRC of the data
    (little-endian). A DataFormatError names the file and record index of a truncated or corrupt record."""
    raw = check_not_lfs_pointer(path).read_bytes()
    pos, index = 0, 0
    while pos < len(raw):
        where = f"{path}, record {index} (byte {pos})"
        if pos + 12 > len(raw):
            raise DataFormatError(f"{where}: truncated record header")
        header = raw[pos:pos + 8]
        (length,), (length_crc,) = struct.unpack("<Q", header), struct.unpack("<I", raw[pos + 8:pos + 12])
        if masked_crc32c(header) != length_crc:
            raise DataFormatError(f"{where}: length checksum mismatch (corrupt file)")
        end = pos + 12 + length
        if end + 4 > len(raw):
            raise DataFormatError(f"{where}: truncated record ({length} bytes announced)")
        data = raw[pos + 12:end]
        if masked_crc32c(data) != struct.unpack("<I", raw[end:end + 4])[0]:
            raise DataFormatError(f"{where}: data checksum mismatch (corrupt file)")
        yield data
        pos, index = end + 4, index + 1


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message: an int for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
            if pos > len(buf):
                raise ValueError("length-delimited field runs past the end")
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def parse_example(data: bytes) -> dict[str, list]:
    """A serialized ``tf.train.Example`` -> {feature name: list of bytes, floats or ints}."""
    features = {}
    for number, _, message in _fields(data):  # Example.features (1)
        if number != 1:
            continue
        for _, _, entry in _fields(message):  # Features.feature (1): map entries of key (1) and Feature (2)
            parts = {n: v for n, _, v in _fields(entry)}
            features[parts.get(1, b"").decode()] = _feature_values(parts.get(2, b""))
    return features


def _feature_values(feature: bytes) -> list:
    """The values of a ``tf.train.Feature``: bytes_list (1), float_list (2) or int64_list (3)."""
    values = []
    for kind, _, inner in _fields(feature):
        for _, wire, v in _fields(inner):
            if kind == 1:
                values.append(bytes(v))
            elif kind == 2:
                values += list(struct.unpack(f"<{len(v) // 4}f", v))  # packed (wire 2) or one fixed32 (wire 5)
            elif wire == 0:
                values.append(v - 2**64 if v >= 2**63 else v)
            else:  # packed int64s
                pos = 0
                while pos < len(v):
                    x, pos = _varint(v, pos)
                    values.append(x - 2**64 if x >= 2**63 else x)
    return values


# ---------------------------------------------------------------------------------------------- matching and votes
def _digests(images: np.ndarray) -> list[bytes]:
    return [hashlib.sha256(np.ascontiguousarray(image).tobytes()).digest() for image in images]


def match_rows(release_images: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each target image (m, 32, 32, 3) uint8, the row of the release image (n, 32, 32, 3) with the same SHA-256
    of its raw bytes (the first such row), or -1: (m,) int64."""
    targets = np.asarray(targets)
    if targets.dtype != np.uint8 or targets.shape[1:] != release_images.shape[1:]:
        raise ConfigError(f"target images must be uint8 of shape (m, {', '.join(map(str, release_images.shape[1:]))}), "
                          f"got {targets.dtype} {targets.shape}")
    index = {}
    for row, digest in enumerate(_digests(release_images)):
        index.setdefault(digest, row)
    return np.array([index.get(d, -1) for d in _digests(targets)], dtype=np.int64)


def labelled_rows(votes: np.ndarray) -> np.ndarray:
    """Mask (n,) of the rows of ``votes`` (n, R) that carry rater labels (rows absent from the release are -1).

    Measures take only these rows: ``keep = labelled_rows(v); nth(vote_shares(v[keep], K), y[keep])``.
    """
    return (np.asarray(votes) >= 0).all(axis=1)


def plidn_votes(cfg, ds: Dataset, *, items: str, data_dir=None, cache: ArtifactCache | None = None) -> dict[str, np.ndarray]:
    """PL-IDN rater labels of the clean ``items`` ("nlt" / "nlv": those rows of ``ds.train``; "test": ``ds.test``) for each
    tier of ``cfg.raters["tiers"]``: {tier: votes (n_items, R) int64}.

    ``cfg.plidn`` chooses the source:

    - "fallible_raters": the offline stand-in (``cfg.raters`` = tiers and n_raters); every row is labelled.
    - "release": the real release (R = 10). NLT rows are matched to the release's *train* split by SHA-256 of the
      image bytes, as in the paper, NLV rows (validation for model selection) to the whole release; rows absent
      from it are all -1 (see ``labelled_rows``). The release labels
      no CIFAR-10 test image, so ``items="test"`` raises NoPlidnLabels (a ConfigError): the paper quotes Gu et
      al.'s TV values for PL-IDN instead of measuring them.
    """
    if items not in ("nlt", "nlv", "test"):
        raise unknown_choice("PL-IDN items", items, ["nlt", "nlv", "test"])
    if cfg.plidn == "fallible_raters":
        return fallible_rater_votes(ds, tiers=cfg.raters["tiers"], n_raters=cfg.raters["n_raters"], items=items,
                                    cache=cache)
    if cfg.plidn != "release":
        raise unknown_choice("plidn source", cfg.plidn, SOURCES)
    if items == "test":
        raise NoPlidnLabels("PL-IDN labels only CIFAR-10 training images, so the test split has no PL-IDN votes. "
                            "Use items='nlt' (the NLT rows in the release) for noise rate, nth, marginals and training, "
                            "and Gu et al.'s published TV values (0.180 / 0.301 / 0.742) for the test-split TV.")
    rows = gu_five_way_split(ds.train.y)[items]
    images, labels = ds.train.X[rows], ds.train.y[rows]
    out = {}
    for tier in cfg.raters["tiers"]:
        release = read_release(tier, data_dir, cache=cache)
        train = release.split == "train" if items == "nlt" else np.ones(len(release.split), dtype=bool)
        pos = match_rows(release.images[train], images)
        found = pos >= 0
        if not found.any():
            raise DataFormatError(f"none of the {len(images)} {items.upper()} images of {ds.name!r} is in the PL-IDN release "
                                  f"({release_dir(tier, data_dir)}); it labels CIFAR-10 training images only")
        wrong = int(np.sum(release.labels[train][pos[found]] != labels[found]))
        if wrong:
            raise DataFormatError(f"{wrong} of the {found.sum()} images matched in the PL-IDN release "
                                  f"({release_dir(tier, data_dir)}) have another clean label than in {ds.name!r}")
        votes = np.full((len(images), release.noisy_labels.shape[1]), -1, dtype=np.int64)
        votes[found] = release.noisy_labels[train][pos[found]]
        out[tier] = votes
    return out
