"""Fixtures shared by the COCO-WAN and SAM fine-tuning tests: small COCO-shapes sets and a tiny SAM.

``tiny_sam`` and ``tiny_sam_predictor`` are builders (call them for a fresh model): a test asks for the fixture and
calls it, ``sam = tiny_sam()``; both skip the test where torch or segment_anything is not installed."""
import pytest

from benchmark_n.shapes import generate_shapes, preset


@pytest.fixture(scope="module")
def shapes6():
    return generate_shapes(6, 0, **preset("model", height=96, width=96))


@pytest.fixture(scope="module")
def shapes40():
    return generate_shapes(40, 0, **preset("model", height=96, width=96))


def _tiny_sam():
    """A randomly initialised, very small SAM built from segment_anything's own classes (64 px input, 1 block)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("segment_anything")
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    torch.manual_seed(0)
    dim, size = 32, 64
    return Sam(ImageEncoderViT(img_size=size, patch_size=16, embed_dim=dim, depth=1, num_heads=2, mlp_ratio=2,
                               out_chans=dim),
               PromptEncoder(embed_dim=dim, image_embedding_size=(size // 16, size // 16),
                             input_image_size=(size, size), mask_in_chans=4),
               MaskDecoder(transformer_dim=dim, transformer=TwoWayTransformer(depth=1, embedding_dim=dim, num_heads=2,
                                                                             mlp_dim=64),
                           iou_head_depth=1, iou_head_hidden_dim=16)).eval()


def _tiny_sam_predictor():
    """A real SamPredictor around ``tiny_sam()`` that records its inputs and outputs."""
    sam = _tiny_sam()  # skips where segment_anything is not installed
    from segment_anything import SamPredictor

    class Recording(SamPredictor):
        def __init__(self, model):
            super().__init__(model)
            self.images, self.calls = [], []

        def set_image(self, image, image_format="RGB"):
            self.images.append(image.copy())
            super().set_image(image, image_format)

        def predict(self, **kwargs):
            masks, scores, logits = super().predict(**kwargs)
            self.calls.append((kwargs, masks, scores))
            return masks, scores, logits

    return Recording(sam)


@pytest.fixture
def tiny_sam():
    """Builder of a randomly initialised, very small SAM (64 px input, 1 block; the same weights every call)."""
    return _tiny_sam


@pytest.fixture
def tiny_sam_predictor():
    """Builder of a real SamPredictor around a fresh ``tiny_sam()`` that records its inputs and outputs
    (``.images``, ``.calls`` = [(predict kwargs, masks, scores)])."""
    return _tiny_sam_predictor
