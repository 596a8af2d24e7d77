"""TinyHow: a generated wikiHow-like benchmark, the offline stand-in for NoisywikiHow (nothing from wikiHow ships).

NoisywikiHow's inputs are wikiHow step headers ("talk about food differently .") and its labels the finest
wikiHow category of the article (158 classes, long-tailed, 50 validation and 50 test events per class); its
real-world noise replaces a training event by the most similar event of a category *outside* the benchmark
(Section 3.3 of the paper). TinyHow keeps that structure at a size a CPU trains in seconds:

- 8 parent domains (garden, car, cooking, ...), each with 5 sub-categories drawing 5 of the parent's 12 verbs
  and 7 of its 20 objects, so siblings overlap like wikiHow's sibling categories (the SC noise source);
- 3 sub-categories per parent are the benchmark's classes (24), 2 are open-set categories (16, the pool the
  noise draws from, like wikiHow's categories outside the 158);
- events from three templates, lower-cased and tokenised like the release ("water the roses every week .");
  with probability 0.15 an event comes from a generic pool shared by all classes ("make a list .") — the
  uninformative steps that keep the clean accuracy far below 100 % (about 78 % with frozen MiniLM features);
- long-tailed class sizes n_c = round(400 exp(-2.3 r_c / (C - 1))) + 40, then 20 validation and 20 test events
  per class (balanced, as in the release); events shared by two classes are dropped (the paper's inter-class
  deduplication), repeated ones kept once;
- sources: TC = the 6 smallest classes (12 % of the training events; 18 % in the release), BCC = the other classes of the "money" and "computer" domains (the
  stand-in for categories beyond common sense), SC = the rest.

    bench, pool = generate(seed=0)      # Benchmark without noise, and the open-set pool (texts, categories, parents)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisywikihow.benchmark import Benchmark, Split
from shared.seeding import item_rng

# parent domain -> (12 verbs, 20 objects, 5 sub-category names; the first 3 are benchmark classes)
DOMAINS = {
    "garden": (
        "water plant prune dig trim rake mulch weed fertilize harvest sow transplant".split(),
        ("roses tomatoes lawn hedge soil seeds compost shrubs bulbs tulips herbs vines mulch beds "
         "saplings weeds pots trellis hose leaves").split(),
        ["Growing Roses", "Lawn Care", "Growing Vegetables", "Hedge Trimming", "Composting"],
    ),
    "car": (
        "check replace wash wax drive park tighten inflate drain jack polish start".split(),
        ("tires oil brakes engine battery wipers headlights mirrors coolant filter spark-plugs "
         "dashboard seats bumper hood trunk wheels windshield clutch fuel").split(),
        ["Car Maintenance", "Tire Care", "Driving Techniques", "Car Washing", "Engine Repair"],
    ),
    "cooking": (
        "chop boil fry bake stir season marinate slice grill roast whisk knead".split(),
        ("onions pasta chicken dough sauce garlic rice vegetables steak eggs flour butter fish "
         "potatoes soup bread spices batter noodles cheese").split(),
        ["Cooking Pasta", "Baking Bread", "Grilling Meat", "Making Soup", "Frying Eggs"],
    ),
    "fitness": (
        "stretch lift run squat breathe jog rest warm cool hydrate swim cycle".split(),
        ("muscles weights legs arms back core shoulders knees hips treadmill dumbbells mat "
         "pace routine heart stamina posture joints sneakers lungs").split(),
        ["Weight Training", "Running", "Yoga", "Cycling Fitness", "Stretching"],
    ),
    "pets": (
        "feed groom walk train bathe brush adopt leash pet reward clip vaccinate".split(),
        ("dog cat puppy kitten leash collar litter fur paws treats toys bowl crate teeth "
         "claws vet hamster parrot fish leash-training").split(),
        ["Dog Grooming", "Cat Care", "Puppy Training", "Bird Care", "Fish Tanks"],
    ),
    "money": (
        "save invest budget borrow repay track file deposit withdraw compare negotiate insure".split(),
        ("savings stocks bonds budget loan debt taxes account credit mortgage interest pension "
         "income expenses receipts funds shares insurance salary portfolio").split(),
        ["Investing in Stocks", "Paying off Debt", "Filing Taxes", "Budgeting", "Retirement Planning"],
    ),
    "computer": (
        "install update restart back-up configure delete download scan format compile encrypt reboot".split(),
        ("software drivers files router password browser disk firewall antivirus keyboard "
         "monitor laptop server code database printer network cache operating-system backup").split(),
        ["Installing Software", "Network Security", "Programming", "Computer Hardware", "Data Backup"],
    ),
    "home": (
        "clean paint sweep mop dust scrub organize decorate vacuum repair hang polish".split(),
        ("floors walls windows kitchen carpet shelves curtains closet bathroom furniture "
         "ceiling tiles sink doors cabinets rugs stairs lamps bed pillows").split(),
        ["House Cleaning", "Painting Walls", "Organizing Closets", "Home Decorating", "Bathroom Cleaning"],
    ),
}
BCC_DOMAINS = ("money", "computer")  # the stand-in for categories beyond common sense
GENERIC_VERBS = "ask read plan check choose find prepare make write consider keep try decide set take get use call visit note".split()
GENERIC_OBJECTS = ("a friend|the instructions|a list|your schedule|a professional|the manual|a notebook|your options|"
                   "some help|the details|a timer|the label|a reminder|your budget|a photo|the basics|a guide|"
                   "your notes|a plan|the rules").split("|")
MODIFIERS = ["", "", "carefully", "every week", "before winter", "in the morning", "at least once a month",
             "with care", "slowly", "regularly", "after use", "first", "properly", "if needed"]
TEMPLATES = ("{verb} the {obj} {mod}", "{verb} your {obj} and {obj2} {mod}", "{verb} the {obj} near the {obj2} {mod}")
GENERIC_TEMPLATES = ("{verb} {obj} {mod}", "{verb} {obj} and {obj2} {mod}")

TARGETS_PER_DOMAIN, OPEN_PER_DOMAIN = 3, 2
OPEN_SET_EVENTS = 150
EVAL_PER_CLASS = 20  # validation and test events per class, each
N_TAIL = 6  # TC: the smallest classes
GENERIC_SHARE = 0.15


@dataclass(frozen=True)
class OpenSetPool:
    """Events of categories outside the benchmark: ``texts`` (m,), ``category`` (m,) names, ``parent`` (m,)."""

    texts: np.ndarray
    category: np.ndarray
    parent: np.ndarray

    def __len__(self) -> int:
        return len(self.texts)


def class_sizes(n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Training-pool sizes n_c = round(400 exp(-2.3 r / (C - 1))) + 40 with the ranks r shuffled over classes."""
    ranks = rng.permutation(n_classes)
    return np.round(400 * np.exp(-2.3 * ranks / (n_classes - 1))).astype(int) + 40


def _event(verbs, objects, rng: np.random.Generator) -> str:
    templates = TEMPLATES
    if rng.random() < GENERIC_SHARE:
        verbs, objects, templates = GENERIC_VERBS, GENERIC_OBJECTS, GENERIC_TEMPLATES
    obj, obj2 = rng.choice(len(objects), 2, replace=False)
    text = templates[rng.integers(len(templates))].format(
        verb=verbs[rng.integers(len(verbs))], obj=objects[obj], obj2=objects[obj2], mod=MODIFIERS[rng.integers(len(MODIFIERS))])
    return " ".join(text.replace("-", " ").split()) + " ."


def _vocabularies(seed: int) -> dict[str, tuple[list[str], list[str], str]]:
    """Sub-category name -> (its 5 verbs, 7 objects, parent domain)."""
    out = {}
    for domain, (verbs, objects, names) in DOMAINS.items():
        for name in names:
            rng = item_rng("tinyhow-vocabulary", seed, name)
            out[name] = ([verbs[i] for i in rng.choice(len(verbs), 5, replace=False)],
                         [objects[i] for i in rng.choice(len(objects), 7, replace=False)], domain)
    return out


def generate(seed: int = 0) -> tuple[Benchmark, OpenSetPool]:
    """The clean TinyHow benchmark (no noisy training sets yet) and its open-set pool; deterministic in ``seed``."""
    vocab = _vocabularies(seed)
    targets = [n for _, (_, _, names) in DOMAINS.items() for n in names[:TARGETS_PER_DOMAIN]]
    opens = [n for _, (_, _, names) in DOMAINS.items() for n in names[TARGETS_PER_DOMAIN:]]
    sizes = class_sizes(len(targets), item_rng("tinyhow-sizes", seed)) + 2 * EVAL_PER_CLASS
    events = {}
    for name, size in zip(targets + opens, list(sizes) + [OPEN_SET_EVENTS] * len(opens)):
        rng = item_rng("tinyhow-events", seed, name)
        verbs, objects, _ = vocab[name]
        events[name] = list(dict.fromkeys(_event(verbs, objects, rng) for _ in range(size)))  # in-class dedup
    owners: dict[str, set] = {}
    for name, texts in events.items():
        for t in texts:
            owners.setdefault(t, set()).add(name)
    events = {name: [t for t in texts if len(owners[t]) == 1] for name, texts in events.items()}  # inter-class dedup

    splits = {"train": ([], []), "val": ([], []), "test": ([], [])}
    for label, name in enumerate(targets):
        texts = events[name]
        order = item_rng("tinyhow-split", seed, name).permutation(len(texts))
        parts = {"val": order[:EVAL_PER_CLASS], "test": order[EVAL_PER_CLASS:2 * EVAL_PER_CLASS],
                 "train": np.sort(order[2 * EVAL_PER_CLASS:])}
        for split, idx in parts.items():
            splits[split][0].extend(texts[i] for i in idx)
            splits[split][1].extend([label] * len(idx))
    made, start = {}, 0
    for split, (texts, labels) in splits.items():
        made[split] = Split(np.array(texts, dtype=object), np.array(labels, dtype=np.int64),
                            np.arange(start, start + len(texts), dtype=np.int64))
        start += len(texts)

    classes = np.array(targets, dtype=object)
    parent = np.array([vocab[n][2] for n in targets], dtype=object)
    counts = np.bincount(made["train"].labels, minlength=len(targets))
    source = np.where(np.isin(parent, BCC_DOMAINS), "BCC", "SC").astype(object)
    source[np.argsort(counts, kind="stable")[:N_TAIL]] = "TC"
    pool_names = [n for n in opens for _ in events[n]]
    pool = OpenSetPool(np.array([t for n in opens for t in events[n]], dtype=object),
                       np.array(pool_names, dtype=object), np.array([vocab[n][2] for n in pool_names], dtype=object))
    bench = Benchmark("TinyHow", classes, source, parent, made["train"], made["val"], made["test"],
                      meta={"generator": "noisywikihow.tinyhow", "seed": seed})
    return bench, pool


__all__ = ["DOMAINS", "OpenSetPool", "class_sizes", "generate"]
