"""Benchmark-N's rehearsal files: COCO-shapes written as a COCO 2017 folder, synthetic echocardiograms as CAMUS, and a
tiny Grounding-DINO.

``python -m shared.rehearsal <root> benchmark_n`` writes ``<root>/coco/annotations/instances_{train,val}2017.json``
and the JPEG images under ``<root>/coco/{train,val}2017/`` (``benchmark_n.formats.write_coco2017``),
``<root>/camus/training/patientXXXX/`` in the older CAMUS release's MetaImage format
(``benchmark_n.camus_files.write_camus_mhd``), and at ``<root>/weights/grounding-dino-base/`` a randomly initialised
Grounding-DINO a few hundred kB in size, saved as transformers saves the real one (``write_tiny_grounding_dino``).
The full profile then reads them through the real loaders (``benchmark_n.formats.load_split``,
``benchmark_n.camus_files.load_camus``, ``benchmark_n.grounded.grounding_dino_detections``); its numbers are not results.
"""
from __future__ import annotations

from pathlib import Path

from benchmark_n.camus import synthetic_camus
from benchmark_n.camus_files import write_camus_mhd
from benchmark_n.formats import write_coco2017
from benchmark_n.grounded import GROUNDING_DINO_DIR, query_names
from benchmark_n.shapes import generate_shapes, preset

N_TRAIN, N_VAL = 16, 12
N_PATIENTS = 8


def write_tiny_grounding_dino(folder, names) -> Path:
    """A Grounding-DINO model folder that ``GroundingDinoProcessor`` / ``GroundingDinoForObjectDetection`` load: a
    randomly initialised tiny model (ResNet backbone, one-layer BERT, d_model 32, 10 queries, seeded), a BERT
    tokenizer whose vocabulary is ``names`` (lower-case words), "." and the special tokens, and an image processor
    resizing to 64-96 px. Its boxes are random; it exercises the code path, nothing more."""
    import torch
    from transformers import (BertConfig, BertTokenizerFast, GroundingDinoConfig, GroundingDinoForObjectDetection,
                              GroundingDinoImageProcessor, GroundingDinoProcessor, ResNetConfig)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *dict.fromkeys(names)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast.from_pretrained(str(folder))
    config = GroundingDinoConfig(
        backbone_config=ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                     layer_type="basic", out_indices=[2, 3, 4]),
        text_config=BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=64),
        num_queries=10, encoder_layers=1, decoder_layers=2, d_model=32, encoder_ffn_dim=32, decoder_ffn_dim=32,
        encoder_attention_heads=2, decoder_attention_heads=2, num_feature_levels=3, encoder_n_points=1,
        decoder_n_points=1, max_text_len=32)  # d_model: GroupNorm(32); 2 decoder layers: the shared box heads tie
    torch.manual_seed(0)
    GroundingDinoForObjectDetection(config).eval().save_pretrained(str(folder))
    image_processor = GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 96})
    GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(str(folder))
    return folder


def write_rehearsal_data(root: Path) -> list[str]:
    """Write the COCO 2017 stand-in under ``root/coco``, CAMUS under ``root/camus`` and a tiny Grounding-DINO under
    ``root/weights``; returns what was written (relative to ``root``)."""
    train = generate_shapes(N_TRAIN, seed=1, **preset("annotation"))
    val = generate_shapes(N_VAL, seed=2, **preset("annotation"))
    write_coco2017(Path(root) / "coco", train, val)
    write_camus_mhd(Path(root) / "camus", synthetic_camus(N_PATIENTS, seed=3, size=64))
    write_tiny_grounding_dino(Path(root) / "weights" / GROUNDING_DINO_DIR, query_names(train.dataset).values())
    return ["coco", "camus", f"weights/{GROUNDING_DINO_DIR}"]


__all__ = ["write_tiny_grounding_dino", "write_rehearsal_data"]
