"""02_examples: Figure 1 — examples of corruption-induced label ambiguity, the corruption operators, their
reproducibility and their speed against ``imagecorruptions``.

    page = Examples("smoke")
    page.run()                   # the benchmarks of the panels' datasets (cached) and their NLT inputs
    page.figure1()               # one column per panel, one row per severity, the voters' label under each image
    page.examples()              # the paper's examples beside ours
    page.operators("cifar10")    # each operator's constants per severity
    page.reproducibility()       # same bytes on re-run and for any subset of rows
    page.throughput()            # images per second, ours and imagecorruptions', with the same constants
    page.claims()
"""
from __future__ import annotations

import hashlib
from functools import cached_property

import numpy as np
import pandas as pd

from ciln.benchmark import split_rows
from ciln.corruptions import corrupt, list_corruptions
from ciln.measures import majority_vote
from ciln.pages import Page
from ciln.splits import SPLIT_NAMES
from shared.plotting import finish_figure
from shared.report import claim_record
from shared.tables import show_table

PAPER_EXAMPLES = {"a": "dog → cat", "b": "bird → frog", "c": "5 → 8", "d": "4 → 9"}  # Figure 1's panels
LETTERS = "abcdefgh"
SEVERITIES = (1, 3, 5)  # Figure 1's rows: right at severity 1, wrong at 5
# corruptions checked for reproducibility: random ones with per-row state (CIFAR-10) and MNIST's geometric ones
REPRO_CORRUPTIONS = {"CIFAR10": ("glass_blur", "fog", "elastic_transform")}
REPRO_DEFAULT = ("spatter", "zigzag", "rotate")
SPEED_FORMATS = {"ours (images/s)": "{:,.0f}", "imagecorruptions (images/s)": "{:,.0f}", "speed-up": "{:.2f}x",
                 "ours, CIFAR-10-C constants (images/s)": "{:,.0f}"}


# ----------------------------------------------------------------------------------------- Figure 1
def panel_example(bench, X, dataset: str, corruption: str, *, master_seed: int = 0) -> dict:
    """Figure 1's column for ``corruption``: the row the voters get right at severity 1 and wrong at 5 (attractor
    first), its corrupted image at each severity and the voters' majority label with how many chose it."""
    (row,) = bench.flip_examples(corruption, n=1)
    levels = []
    for severity in SEVERITIES:
        image = corrupt(dataset, X[row: row + 1], corruption, severity, split=SPLIT_NAMES["nlt"],
                        master_seed=master_seed, indices=[row], options=bench.corruption_options.get(corruption))[0]
        votes = bench.votes((corruption, severity))[row]
        label = int(majority_vote(votes[None], bench.num_classes)[0])
        levels.append({"severity": severity, "image": image, "label": bench.classes[label],
                       "right": label == bench.y[row], "agree": int((votes == label).sum()), "voters": len(votes)})
    return {"corruption": corruption, "row": int(row), "true": bench.classes[bench.y[row]], "levels": levels}


def examples_frame(panels: list[dict]) -> pd.DataFrame:
    """One row per panel: dataset, corruption, row, true label, label at severity 5, the paper's example and ours."""
    rows = [{"panel": p["panel"], "dataset": p["dataset"], "corruption": p["corruption"], "row": p["row"],
             "true": p["true"], "label at severity 5": p["levels"][-1]["label"]} for p in panels]
    table = pd.DataFrame(rows, columns=["panel", "dataset", "corruption", "row", "true", "label at severity 5"])
    return table.assign(paper=table["panel"].map(PAPER_EXAMPLES),
                        ours=table["true"].astype(str) + " → " + table["label at severity 5"].astype(str))


def figure1(panels: list[dict], report=None):
    """Severity rows x panel columns; under each image the majority label (voters agreeing), red when wrong."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(SEVERITIES), len(panels), figsize=(2.6 * len(panels), 8), constrained_layout=True,
                             squeeze=False)
    for col, panel in enumerate(panels):
        for r, level in enumerate(panel["levels"]):
            ax, image = axes[r, col], level["image"]
            ax.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=255)
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_xlabel(f"{level['label']} ({level['agree']}/{level['voters']})",
                          color="black" if level["right"] else "crimson")
            if r == 0:
                ax.set_title(f"({panel['panel']}) {panel['dataset']} {panel['corruption'].replace('_', ' ')}\n"
                             f"true: {panel['true']}", fontsize="small")
            if col == 0:
                ax.set_ylabel(f"severity {level['severity']}")
    return finish_figure(fig, report, "fig1_examples")


# ----------------------------------------------------------------------------------------- reproducibility
def reproducibility_checks(datasets: dict[str, str], inputs: dict, rows: int = 64) -> pd.DataFrame:
    """Per dataset and corruption (severity 5): the digest of the first ``rows`` corrupted rows, whether a second
    run gives the same bytes, and whether corrupting rows 10-19 alone gives the same rows as corrupting all."""
    out = []
    for name, X in inputs.items():
        X = X[:rows]
        for corruption in REPRO_CORRUPTIONS.get(name, REPRO_DEFAULT):
            first = corrupt(datasets[name], X, corruption, 5, split="noisy_label_train")
            second = corrupt(datasets[name], X, corruption, 5, split="noisy_label_train")
            subset = corrupt(datasets[name], X[10:20], corruption, 5, split="noisy_label_train",
                             indices=np.arange(10, 20))
            out.append({"dataset": name, "corruption": corruption,
                        "sha256 (first 12)": hashlib.sha256(first.tobytes()).hexdigest()[:12],
                        "identical on re-run": bool(np.array_equal(first, second)),
                        "subset identical": bool(np.array_equal(first[10:20], subset))})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------- claims
def examples_claims(examples: pd.DataFrame, determinism: pd.DataFrame, speed: pd.DataFrame | None) -> list[dict]:
    """Figure 1's point (severity flips correct labels), reproducibility, and the engineering speed claim."""
    from ciln.throughput import speed_summary

    statement = ("Increasing severity turns correctly labelled inputs into confidently mislabelled ones (every panel "
                 "has an example)")
    out = [claim_record(statement, bool((examples["true"] != examples["label at severity 5"]).all()),
                        "; ".join(f"({p}) {o}" for p, o in zip(examples["panel"], examples["ours"])))
           if len(examples) else claim_record(statement, None, "no panel was drawn")]
    statement = "Corruption is reproducible: same seed, same bytes, for any subset of rows"
    out.append(claim_record(statement, bool(determinism[["identical on re-run", "subset identical"]].all().all()),
                            f"{len(determinism)} checks")
               if len(determinism) else claim_record(statement, None, "no check was run"))
    statement = ("(Engineering) with the same constants, our operators are at least as fast as imagecorruptions on "
                 "most corruptions both implement")
    if speed is None or not len(speed):
        out.append(claim_record(statement, None, "throughput was not measured"))
    else:
        summary = speed_summary(speed)
        out.append(claim_record(statement, summary["holds"], summary["detail"]))
    return out


def panel_datasets(cfg) -> list[str]:
    """The datasets of Figure 1's panels (the benchmarks the page loads)."""
    return sorted({name for name, _ in cfg.panels})


# ----------------------------------------------------------------------------------------- the page
class Examples(Page):
    """02: Figure 1 drawn from this run's benchmarks, and the corruption operators."""

    notebook = "02_examples"
    needs_severities = SEVERITIES

    @property
    def benchmark_names(self) -> list[str]:
        return panel_datasets(self.cfg)

    @cached_property
    def inputs(self) -> dict:
        """The NLT inputs of each dataset the panels use (uncorrupted)."""
        from shared.datasets import load_dataset

        return {name: split_rows(load_dataset(self.cfg.datasets[name], data_dir=self.data_dir), "nlt")[0]
                for name in self.benchmark_names}

    def run(self):
        """The panels' benchmarks (voters and voter outputs, cached) and their inputs."""
        rows = [{"paper dataset": name, "ours on": b.dataset, "voters": ", ".join(b.voters),
                 "rows": len(self.inputs[name])}
                for name, b in self.benchmarks.items()]
        return show_table(pd.DataFrame(rows))

    @cached_property
    def panels(self) -> list[dict]:
        return [{"panel": letter, "dataset": name,
                 **panel_example(self.benchmarks[name], self.inputs[name], self.cfg.datasets[name], corruption,
                                 master_seed=self.cfg.master_seed)}
                for (name, corruption), letter in zip(self.cfg.panels, LETTERS)]

    def figure1(self):
        return figure1(self.panels, self.report)

    @cached_property
    def examples_table(self) -> pd.DataFrame:
        table = examples_frame(self.panels)
        self.report.table(table, "fig1_examples")
        return table

    def examples(self):
        """The paper's examples (Figure 1 has no numbers) beside ours."""
        return show_table(self.examples_table[["panel", "dataset", "corruption", "paper", "ours"]])

    def operators(self, domain: str):
        """Each operator of ``domain`` (cifar10, mnist, adult): family, whether random, constants per severity."""
        table = list_corruptions(domain)
        self.report.table(table.astype({"severity constants": str}), f"corruptions_{domain}")
        caption = domain
        if domain == "cifar10":
            from ciln.corruptions.frost import frost_source

            caption += f" (frost textures: {frost_source()})"
        return show_table(table, caption=caption)

    @cached_property
    def determinism(self) -> pd.DataFrame:
        return reproducibility_checks(self.cfg.datasets, self.inputs)

    def reproducibility(self):
        return show_table(self.determinism)

    @cached_property
    def speed(self) -> pd.DataFrame:
        from ciln.throughput import throughput

        images = self.inputs["CIFAR10"][: self.cfg.throughput_images]
        table = throughput(images, severity=self.cfg.throughput_severity)
        self.report.table(table, "throughput")
        return table

    def throughput(self):
        return show_table(self.speed, SPEED_FORMATS)

    def figure_throughput(self):
        """Images per second with the same (ImageNet-C) constants, ours and imagecorruptions' (log scale)."""
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 3.5))
        shown = self.speed.set_index("corruption")[["ours (images/s)", "imagecorruptions (images/s)"]]
        shown.plot.bar(ax=ax, logy=True, rot=35)
        ax.set_ylabel("images per second (log)")
        ax.set_xlabel("")
        return finish_figure(fig, self.report, "throughput")

    def claims(self) -> pd.DataFrame:
        speed = self.speed if "CIFAR10" in self.benchmark_names else None
        return self._finish(examples_claims(self.examples_table, self.determinism, speed))


__all__ = ["Examples", "panel_datasets", "panel_example", "examples_frame", "figure1", "reproducibility_checks", "examples_claims"]
