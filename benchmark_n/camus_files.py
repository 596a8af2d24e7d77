"""The CAMUS release read from disk (Table 6's real data) and written in its older format (the rehearsal).

``load_camus`` reads the public CAMUS release in both layouts without extra dependencies (plain NIfTI-1 and
MetaImage parsers; checked against nibabel 5.4 and SimpleITK 2.5 when written): the current
``database_nifti/patientXXXX/patientXXXX_4CH_{ED,ES}[_gt].nii.gz`` and the older
``training/patientXXXX/patientXXXX_4CH_{ED,ES}[_gt].mhd`` + ``.raw``, with ``Info_4CH.cfg`` (``EF:`` in the current
release, ``LVef:`` in the older one). Labels: 1 = LV cavity (kept), 2 = myocardium, 3 = left atrium. Images and label
maps are resized to ``size`` x ``size`` (area / nearest-neighbour interpolation), the spacing rescaled per axis
(CAMUS pixels are anisotropic, so the resized ones are too; the metrics take (row, column) spacing).

    data = load_camus("~/CAMUS_public", size=256)      # benchmark_n.camus.EchoData
    locate_camus(root)                                 # the folder of patient folders, or DataNotFoundError
    write_camus_mhd(root, synthetic_camus(8))          # the older release's MetaImage layout
"""
from __future__ import annotations

import gzip
import re
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np

from benchmark_n.camus import ED, ES, FRAMES, EchoData, mask_ef
from shared.datasets.files import check_not_lfs_pointer, read_text
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.progress import progress

LV_LABEL = 1  # CAMUS: 1 = LV endocardium cavity, 2 = myocardium (epicardium minus cavity), 3 = left atrium
CAMUS_URL = "https://www.creatis.insa-lyon.fr/Challenge/camus/ (registration; research use only)"
FORMATS = {"nifti": ".nii.gz", "mhd": ".mhd"}
#: patients of the current public release (500: the 450 training and 50 test patients of the challenge, all with
#: labels), for planning runs without the data (``benchmark_n.cost``)
CAMUS_PATIENTS = 500

_NIFTI_DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4", 1024: "i8",
                 1280: "u8"}
_NIFTI_UNITS_TO_MM = {0: 1.0, 1: 1000.0, 2: 1.0, 3: 0.001}  # unknown (taken as mm), metre, mm, micron
_MET_TYPES = {"MET_UCHAR": "u1", "MET_CHAR": "i1", "MET_USHORT": "u2", "MET_SHORT": "i2", "MET_UINT": "u4",
              "MET_INT": "i4", "MET_ULONG": "u8", "MET_LONG": "i8", "MET_ULONG_LONG": "u8", "MET_LONG_LONG": "i8",
              "MET_FLOAT": "f4", "MET_DOUBLE": "f8"}


def _as_2d(array: np.ndarray, path) -> np.ndarray:
    """Squeeze singleton axes; a 2-D image or DataFormatError (a sequence file, say)."""
    squeezed = np.squeeze(array)
    if squeezed.ndim != 2:
        raise DataFormatError(f"{path}: expected one 2-D frame, got an array of shape {array.shape} (a "
                              "*_half_sequence or *_sequence file? use the _ED / _ES files)")
    return squeezed


def read_nifti(path) -> tuple[np.ndarray, np.ndarray]:
    """A 2-D NIfTI-1 image (``.nii`` or ``.nii.gz``, single file, either byte order) as (array (H, W), spacing
    (row, column) in mm). The voxels are returned in storage order (x fastest, i.e. as SimpleITK's
    ``GetArrayFromImage`` gives them and as nibabel's ``get_fdata().T``); ``scl_slope`` / ``scl_inter`` applied
    when set. Refuses a git-LFS pointer, NIfTI-2 and the two-file .hdr/.img pair with a DataFormatError."""
    path = check_not_lfs_pointer(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise DataFormatError(f"{path}: a truncated or corrupt gzip file ({e})") from None
    if len(raw) < 348:
        raise DataFormatError(f"{path}: {len(raw)} bytes, too short for a NIfTI-1 header (348 bytes)")
    for order in "<>":
        size = struct.unpack(order + "i", raw[:4])[0]
        if size in (348, 540):
            break
    else:
        raise DataFormatError(f"{path}: not a NIfTI file (sizeof_hdr is neither 348 nor 540)")
    if size == 540:
        raise DataFormatError(f"{path}: a NIfTI-2 file; only NIfTI-1 (as CAMUS ships) is read here")
    magic = raw[344:348]
    if magic != b"n+1\x00":
        raise DataFormatError(f"{path}: NIfTI magic {magic!r}, expected b'n+1\\x00' (a single-file .nii); "
                              "a .hdr/.img pair is not supported")
    dims = struct.unpack(order + "8h", raw[40:56])
    datatype = struct.unpack(order + "h", raw[70:72])[0]
    pixdim = struct.unpack(order + "8f", raw[76:108])
    vox_offset = int(struct.unpack(order + "f", raw[108:112])[0])
    slope, inter = struct.unpack(order + "2f", raw[112:120])
    units = raw[123] & 0x07
    if datatype not in _NIFTI_DTYPES:
        raise DataFormatError(f"{path}: NIfTI datatype {datatype} is not supported "
                              f"(supported: {sorted(_NIFTI_DTYPES)})")
    ndim = dims[0]
    if not 1 <= ndim <= 7:
        raise DataFormatError(f"{path}: NIfTI dim[0] = {ndim}, expected 1..7")
    shape = tuple(int(d) for d in dims[1:ndim + 1])
    dtype = np.dtype(order + _NIFTI_DTYPES[datatype])
    count = int(np.prod(shape))
    if len(raw) < vox_offset + count * dtype.itemsize:
        raise DataFormatError(f"{path}: truncated: {len(raw) - vox_offset} bytes of voxel data, expected "
                              f"{count * dtype.itemsize} for shape {shape}")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=vox_offset).reshape(shape[::-1])
    if np.isfinite(slope) and slope != 0 and (slope != 1 or (np.isfinite(inter) and inter != 0)):
        data = data * slope + (inter if np.isfinite(inter) else 0.0)  # scl_slope 0 or NaN (nibabel's default): none
    mm = _NIFTI_UNITS_TO_MM.get(units, 1.0)
    spacing = np.array([pixdim[2] if ndim >= 2 else 1.0, pixdim[1]], dtype=np.float64) * mm
    return _as_2d(np.array(data), path), spacing


def write_camus_mhd(root, data: "EchoData", view: str = "4CH") -> Path:
    """Write ``data`` as the older CAMUS release (``root/training/patientXXXX/patientXXXX_<view>_{ED,ES}{,_gt}.mhd``
    + ``.raw``, 8-bit, the LV as label ``LV_LABEL``, and ``Info_<view>.cfg`` with ED, ES and LVef): the rehearsal's
    stand-in for the real files, read back by ``load_camus``. Returns the ``training`` folder."""
    folder = Path(root) / "training"
    for i, name in enumerate(data.ids):
        patient = folder / (name if re.fullmatch(r"patient\d{4}", name) else f"patient{i + 1:04d}")
        patient.mkdir(parents=True, exist_ok=True)
        row, col = (float(v) for v in data.spacing[i])
        for f, frame in enumerate(FRAMES):
            image = np.clip(np.asarray(data.images[i, f], float) * 255, 0, 255).round().astype(np.uint8)
            for suffix, array in (("", image), ("_gt", data.masks[i, f].astype(np.uint8) * LV_LABEL)):
                stem = patient / f"{patient.name}_{view}_{frame}{suffix}"
                h, w = array.shape
                stem.with_suffix(".raw").write_bytes(np.ascontiguousarray(array).tobytes())
                stem.with_suffix(".mhd").write_text(
                    "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                    f"ElementSpacing = {col} {row} 1\nDimSize = {w} {h} 1\nElementType = MET_UCHAR\n"
                    f"ElementDataFile = {stem.name}.raw\n")
        (patient / f"Info_{view}.cfg").write_text(f"ED: 1\nES: 2\nNbFrame: 2\nLVef: {data.ef[i]:.1f}\n")
    return folder


def _mhd_header(path: Path) -> dict[str, str]:
    header = {}
    for line in read_text(path).splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            header[key.strip()] = value.strip()
    return header


def read_mhd(path) -> tuple[np.ndarray, np.ndarray]:
    """A 2-D MetaImage (``.mhd`` header + data file, or ``.mha`` / ``ElementDataFile = LOCAL``) as (array (H, W),
    spacing (row, column) in mm); raw or zlib-compressed data, either byte order. A missing data file raises
    DataNotFoundError naming it; a git-LFS pointer (header or data) DataFormatError."""
    path = check_not_lfs_pointer(path)
    if path.suffix == ".mha":
        raise DataFormatError(f"{path}: single-file .mha images are not supported; use the .mhd + .raw pair")
    header = _mhd_header(path)
    missing = [k for k in ("DimSize", "ElementType", "ElementDataFile") if k not in header]
    if missing:
        raise DataFormatError(f"{path}: MetaImage header without {', '.join(missing)}")
    try:
        shape = tuple(int(v) for v in header["DimSize"].split())
        spacing_xyz = [float(v) for v in header.get("ElementSpacing", header.get("ElementSize", "1 1")).split()]
    except ValueError:
        raise DataFormatError(f"{path}: unreadable DimSize / ElementSpacing") from None
    if header["ElementType"] not in _MET_TYPES:
        raise DataFormatError(f"{path}: ElementType {header['ElementType']} is not supported "
                              f"({', '.join(_MET_TYPES)})")
    big = header.get("BinaryDataByteOrderMSB", header.get("ElementByteOrderMSB", "False")).lower() == "true"
    dtype = np.dtype((">" if big else "<") + _MET_TYPES[header["ElementType"]])
    if header["ElementDataFile"] == "LOCAL":
        raise DataFormatError(f"{path}: ElementDataFile = LOCAL (data inside the header) is not supported")
    data_path = path.parent / header["ElementDataFile"]
    if not data_path.is_file():
        raise DataNotFoundError(f"{data_path} does not exist; {path.name} names it as its data file")
    payload = check_not_lfs_pointer(data_path).read_bytes()
    if header.get("CompressedData", "False").lower() == "true":
        try:
            payload = zlib.decompress(payload)
        except zlib.error as e:
            raise DataFormatError(f"{data_path}: corrupt zlib data ({e})") from None
    count = int(np.prod(shape))
    if len(payload) != count * dtype.itemsize:
        raise DataFormatError(f"{data_path}: {len(payload)} bytes, expected {count * dtype.itemsize} for DimSize "
                              f"{header['DimSize']} of {header['ElementType']} (truncated or the wrong file?)")
    data = np.frombuffer(payload, dtype=dtype).reshape(shape[::-1])
    spacing = np.array([spacing_xyz[1] if len(spacing_xyz) > 1 else 1.0, spacing_xyz[0]], dtype=np.float64)
    return _as_2d(np.array(data), path), spacing


def read_info_cfg(path) -> dict[str, str]:
    """CAMUS's ``Info_2CH.cfg`` / ``Info_4CH.cfg``: ``Key: value`` lines (ED, ES, NbFrame, Sex, Age,
    ImageQuality and EF in the current release; LVedv, LVesv, LVef in the older one) as a dict of strings.
    BOM-tolerant; a git-LFS pointer raises DataFormatError."""
    info = {}
    for line in read_text(path).splitlines():
        match = re.match(r"\s*([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$", line)
        if match:
            info[match.group(1)] = match.group(2)
    return info


def _reported_ef(info: dict[str, str], path) -> float:
    for key in ("EF", "LVef"):
        if key in info:
            try:
                return float(info[key])
            except ValueError:
                raise DataFormatError(f"{path}: {key}: {info[key]!r} is not a number") from None
    return float("nan")


def _patient_dirs(root: Path) -> tuple[Path, list[Path]]:
    """The folder holding the patientXXXX folders (root, root/database_nifti, root/training or root/testing)."""
    for folder in (root, root / "database_nifti", root / "training", root / "testing"):
        if folder.is_dir():
            found = sorted(p for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"patient\d{4}", p.name))
            if found:
                return folder, found
    raise DataNotFoundError(
        f"no CAMUS patient folders under {root}. Expected {root / 'database_nifti' / 'patient0001'} with "
        f"patient0001_4CH_ED.nii.gz, patient0001_4CH_ED_gt.nii.gz, patient0001_4CH_ES.nii.gz, "
        f"patient0001_4CH_ES_gt.nii.gz and Info_4CH.cfg (current release), or "
        f"{root / 'training' / 'patient0001'} with the same names in .mhd + .raw (older release). "
        f"CAMUS: {CAMUS_URL}. Without it, use synthetic_camus().")


def locate_camus(root) -> Path:
    """The folder of CAMUS's patientXXXX folders under ``root`` (the release, ``database_nifti/``, ``training/`` or
    ``testing/``); DataNotFoundError naming the expected files and where to get them otherwise."""
    return _patient_dirs(Path(root))[0]


def _frame_files(folder: Path, view: str, fmt: str) -> dict[str, Path] | None:
    """{"ED", "ED_gt", "ES", "ES_gt"} paths in ``fmt`` ("nifti" / "mhd"); None when no file of that format is
    there at all."""
    ext = FORMATS[fmt]
    names = {f"{frame}{gt}": folder / f"{folder.name}_{view}_{frame}{gt}{ext}" for frame in FRAMES
             for gt in ("", "_gt")}
    if fmt == "nifti":  # an uncompressed .nii is as good
        names = {k: p if p.exists() or not p.with_suffix("").exists() else p.with_suffix("")
                 for k, p in names.items()}
    return names if any(p.exists() for p in names.values()) else None


def _resize(array: np.ndarray, size: int, label: bool) -> np.ndarray:
    interpolation = cv2.INTER_NEAREST if label else (
        cv2.INTER_AREA if min(array.shape) >= size else cv2.INTER_LINEAR)
    source = np.ascontiguousarray(array, dtype=np.uint8 if label else np.float32)
    return cv2.resize(source, (size, size), interpolation=interpolation)


def load_camus(root, *, view: str = "4CH", size: int = 256, fmt: str = "auto", patients=None,
               missing: str = "raise") -> EchoData:
    """The CAMUS ED/ES frames of one apical view with their LV masks, resized to ``size`` x ``size``.

    ``root``: the unpacked release (holding ``database_nifti/`` or ``training/``) or the folder of patient folders
    itself. ``fmt``: "nifti", "mhd" or "auto" (per patient, NIfTI when its files are there). ``patients``: names
    ("patient0001") or numbers to load (default: all, sorted). ``missing``: "raise" (DataNotFoundError naming the
    first missing file, e.g. a ``_gt`` of the unlabelled test patients of the older release) or "skip" (leave such
    patients out; ``ids`` says who is in). Images are scaled to [0, 1] by their dtype's range (uint8: / 255; other
    types by their own maximum); masks are label ``LV_LABEL`` of the ``_gt`` files. ``ef`` is ``mask_ef`` of the
    resized masks (single plane); ``ef_reference`` the cfg's ``EF`` / ``LVef`` (biplane Simpson, NaN if absent).
    """
    if view not in ("2CH", "4CH"):
        raise unknown_choice("CAMUS view", view, ("2CH", "4CH"))
    if fmt not in ("auto", *FORMATS):
        raise unknown_choice("CAMUS format", fmt, ("auto", *FORMATS))
    if missing not in ("raise", "skip"):
        raise unknown_choice("missing-file policy", missing, ("raise", "skip"))
    if size < 32 or size % 4:
        raise ConfigError(f"size must be >= 32 and divisible by 4 (the U-Net pools twice), got {size}")
    root = Path(root).expanduser()
    if not root.exists():
        raise DataNotFoundError(f"{root} does not exist; expected the unpacked CAMUS release "
                                f"({root / 'database_nifti' / 'patient0001'} ...). CAMUS: {CAMUS_URL}")
    folder, found = _patient_dirs(root)
    if patients is not None:
        wanted = [p if isinstance(p, str) else f"patient{int(p):04d}" for p in patients]
        by_name = {p.name: p for p in found}
        absent = [w for w in wanted if w not in by_name]
        if absent:
            raise DataNotFoundError(f"patient folder(s) {', '.join(str(folder / a) for a in absent[:5])} not found")
        found = [by_name[w] for w in wanted]
    images, masks, spacings, ids, reported, sources = [], [], [], [], [], set()
    for patient in progress(found, desc="CAMUS patients"):
        try:
            frames, spacing, ef_ref, used = _load_patient(patient, view, fmt, size)
        except DataNotFoundError:
            if missing == "skip":
                continue
            raise
        images.append(frames[0])
        masks.append(frames[1])
        spacings.append(spacing)
        ids.append(patient.name)
        reported.append(ef_ref)
        sources.add(used)
    if not ids:
        raise DataNotFoundError(f"no complete CAMUS {view} patient (images, _gt masks) under {folder}")
    masks = np.stack(masks)
    spacings = np.stack(spacings)
    ef = np.array([mask_ef(m[ED], m[ES], s) for m, s in zip(masks, spacings)])
    return EchoData(np.stack(images), masks, ef, spacings, ids, "camus-" + "+".join(sorted(sources)),
                    np.array(reported, dtype=np.float64))


def _unit_range(image: np.ndarray) -> np.ndarray:
    """Intensities in [0, 1]: 8-bit ranges (any dtype with values in 0..255, floats above 1) divided by 255, floats
    already in [0, 1] kept, wider ranges divided by their maximum."""
    values = image.astype(np.float64)
    low, high = float(values.min()), float(values.max())
    if image.dtype.kind == "f" and low >= 0 and high <= 1:
        return values
    top = 255.0 if low >= 0 and high <= 255 else max(high, 1e-12)
    return np.clip(values / top, 0, 1)


def _load_patient(folder: Path, view: str, fmt: str, size: int):
    """((images (2, S, S), masks (2, S, S)), spacing (2,) at size S, reported EF, format used)."""
    formats = list(FORMATS) if fmt == "auto" else [fmt]
    files, used = None, None
    for candidate in formats:
        files = _frame_files(folder, view, candidate)
        if files is not None:
            used = candidate
            break
    if files is None:
        expected = [folder / f"{folder.name}_{view}_ED{FORMATS[f]}" for f in formats]
        raise DataNotFoundError(f"no {view} ED/ES files in {folder}: expected {' or '.join(map(str, expected))} "
                                "(and _ES, _ED_gt, _ES_gt)")
    for key, path in files.items():
        if not path.exists():
            raise DataNotFoundError(f"{path} does not exist ({key.replace('_gt', ' ground truth')} frame of "
                                    f"{folder.name}, {view} view)")
    reader = read_nifti if used == "nifti" else read_mhd
    images, masks, spacing = [], [], None
    for frame in FRAMES:
        image, image_spacing = reader(files[frame])
        labels, label_spacing = reader(files[f"{frame}_gt"])
        if image.shape != labels.shape:
            raise DataFormatError(f"{files[frame]} is {image.shape} but {files[frame + '_gt']} is {labels.shape}")
        if not np.any(labels == LV_LABEL):
            raise DataFormatError(f"{files[frame + '_gt']} has no LV pixel (label {LV_LABEL})")
        images.append(_resize(_unit_range(image), size, label=False))
        masks.append(_resize(labels == LV_LABEL, size, label=True).astype(bool))
        frame_spacing = image_spacing * np.array(image.shape, dtype=np.float64) / size
        if spacing is not None and not np.allclose(frame_spacing, spacing, rtol=1e-3):
            raise DataFormatError(f"{folder.name}: the ED and ES frames cover different extents "
                                  f"({spacing * size} vs {frame_spacing * size} mm); cannot share one spacing")
        spacing = frame_spacing
    cfg = folder / f"Info_{view}.cfg"
    ef_ref = _reported_ef(read_info_cfg(cfg), cfg) if cfg.exists() else float("nan")
    return (np.stack(images), np.stack(masks)), spacing, ef_ref, used


__all__ = ["LV_LABEL", "CAMUS_URL", "FORMATS", "CAMUS_PATIENTS", "read_nifti", "write_camus_mhd", "read_mhd", "read_info_cfg", "locate_camus",
           "load_camus"]
