"""The smoke profile's BiLSTM: MiniLM's tokens and frozen word embeddings, padding-invariant, trainable head."""
import torch

from noisywikihow.bilstm import BiLSTMClassifier, token_ids, word_embeddings


def test_padding_does_not_change_a_text_and_only_the_recurrent_layer_and_head_train():
    ids = token_ids(["water the roses .", "check the tires near the brakes every week before winter ."])
    assert ids.dtype == torch.int64 and ids[0, -1] == 0  # the short text is padded with 0
    embeddings = word_embeddings()
    assert embeddings.shape == (30522, 384)
    torch.manual_seed(0)
    net = BiLSTMClassifier(embeddings, num_classes=5).eval()
    alone = net(token_ids(["water the roses ."]))
    together = net(ids)
    assert torch.allclose(alone[0], together[0], atol=1e-6)
    assert net.features(ids).shape == (2, 64) and torch.equal(net.classifier(net.features(ids)), together)
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert not any(n.startswith("embed") for n in trainable) and any(n.startswith("lstm") for n in trainable)
