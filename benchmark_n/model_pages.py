"""The model-level notebooks (03-08, and 09 on echocardiography): a segmenter trained on noisy annotations, evaluated on the clean val set.

Every page trains (or reads from the cache) exactly the runs its settings define (``benchmark_n.runs``), so the
clean runs, every table's baseline, are trained once for all pages; then it shows tables, figures, the paper's
numbers beside ours and the paper's findings checked.

    page = TrainEval("smoke", device="cpu")
    page.run()                 # trains the runs not cached yet (one progress bar); a table of what ran
    page.tier_table()          # Tables 3, 8 and 11 for our model: mask, Boundary and box AP per tier
    page.compare_with_paper()  # the paper's Mask R-CNN beside ours
    page.claims()
"""
from __future__ import annotations

from dataclasses import replace
from functools import cached_property

import pandas as pd

from benchmark_n import camus, camus_files, figures, grounded, plans, wan
from benchmark_n import model_figures as MF
from benchmark_n import model_results as R
from benchmark_n.pages import PAPER, Page
from benchmark_n.plans import LVIS_DETECTIONS  # noqa: F401  (re-exported: it used to live here)
from benchmark_n.runs import BACKENDS, RunSpec, TrainNoise, finetune_grid, load_pair, run_grid
from benchmark_n.tables import table7_retained
from shared.paths import data_dir as default_data_dir
from shared.progress import progress
from shared.errors import ConfigError
from shared.report import compare_with_paper, reported
from shared.runlog import log_run


class ModelPage(Page):
    """Runs of one backend on one data recipe; ``records``: one row per run (``model_results.run_records``)."""

    #: settings that shrink an experiment: a run with any of them overridden is labelled reduced
    SHRINKING = ("hparams", "n_train", "n_val", "image_size", "seeds")

    def __init__(self, profile: str = "smoke", *, data_dir=None, device: str = "cpu", settings=None, out_dir=None):
        super().__init__(profile, data_dir=data_dir, settings=settings, out_dir=out_dir)
        cfg = self.cfg
        self.shrunk = any(k in (settings or {}) for k in self.SHRINKING)
        self.recipe = plans.recipe(cfg, data_dir)
        self.training = plans.training(cfg, self.recipe, device)

    def noise(self, tier: str) -> TrainNoise:
        """The training noise of a tier of the page's engine (``plans.noise``)."""
        return plans.noise(self.cfg, tier)

    def spec(self, noise: TrainNoise, seed: int, loss: str = "ce") -> RunSpec:
        """A run of this page (``plans.spec``)."""
        return plans.spec(self.cfg, noise, seed, loss)

    def specs(self) -> list[RunSpec]:
        """The runs this page trains: ``plans.model_specs`` (which ``benchmark_n.cost`` plans too)."""
        return plans.model_specs(self.notebook, self.cfg, self.data_dir)

    def run(self) -> pd.DataFrame:
        """Train the runs not cached yet; the table of runs (setting, seed, mask / Boundary / box AP %)."""
        self.runs = run_grid(self.recipe, self.specs(), self.training, executor=self.cfg.get("executor"))
        self.records = R.run_records(self.runs)
        self.summary = R.summarise(self.records)
        self.report.table(self.records, "runs")
        return self.records[["label", "loss", "seed", "mask_AP", "boundary_AP", "box_AP"]].round(1)

    @property
    def dataset_name(self) -> str:
        return R.DATASET_NAMES.get(self.recipe.dataset, self.recipe.dataset)

    @property
    def reduced(self) -> bool:
        return self.recipe.dataset == "shapes" or self.training.backend == "tiny" or self.shrunk

    @property
    def ours_on(self) -> str:
        train, _ = load_pair(self.recipe)
        what = f"{BACKENDS[self.training.backend][1].split(':')[0]} trained on {train.name}"
        seeds = f"mean of {len(self.cfg.seeds)} seed(s)"
        return f"{'reduced: ' if self.reduced else ''}{what}; {seeds}"

    def _compare(self, ours: pd.DataFrame, paper: pd.DataFrame, on: list[str]) -> pd.DataFrame:
        table = compare_with_paper(ours, paper, on=on)
        self.report.comparisons.append(table)
        return table


class TrainEval(ModelPage):
    """03: Tables 3, 8 and 11 (and 2, 12 on other datasets) and Fig. 7a: one model trained at every tier."""

    notebook = "03_train_eval"

    def tier_table(self) -> pd.DataFrame:
        return R.tier_table(self.summary)

    def figure7a(self):
        paper = pd.concat([reported(PAPER, "table3"), reported(PAPER, "table12")])
        paper = paper[(paper["model"] == "M-RCNN") & (paper["backbone"] == "R-50") & (paper["metric"] == "mask_AP")
                      & paper["dataset"].isin(["COCO-N", "CityScapes-N", "LVIS-N"])]
        title = f"ours: {self.training.backend} backend, {self.cfg.engine} engine"
        return MF.figure7a(paper, self.records, title, self.report)

    def compare_with_paper(self) -> pd.DataFrame:
        """The paper's Mask R-CNN R-50 row of Tables 3, 8, 11 (12 for LVIS, 2 for VIPER) beside ours: shares of the
        clean score for a reduced run (a tiny model's absolute AP on shapes says nothing about COCO), absolute AP
        otherwise."""
        tables = R.TIER_TABLES.get(self.dataset_name, ["table3", "table8", "table11"])
        paper = pd.concat([reported(PAPER, t) for t in tables], ignore_index=True)
        paper = paper[(paper["dataset"] == self.dataset_name) & (paper["model"] == "M-RCNN")
                      & (paper["backbone"] == "R-50")]
        metrics = sorted(set(paper["metric"]))
        if self.reduced:
            paper = R.paper_retained(paper)
        ours = R.ours_tier_long(self.summary, self.dataset_name, metrics, absolute=not self.reduced,
                                ours_on=self.ours_on)
        return self._compare(ours, paper, ["dataset", "model", "backbone", "tier"])

    def claims(self) -> pd.DataFrame:
        return self._finish(R.train_eval_claims(self.summary))


class NoiseAblation(ModelPage):
    """04: Table 7, one spatial operation on every training instance, the model trained on it."""

    notebook = "04_noise_ablation"

    def ablation_table(self) -> pd.DataFrame:
        return R.ablation_table(self.summary)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        ours = R.ablation_retained(self.summary).assign(ours_on=self.ours_on)
        return self._compare(ours, table7_retained(reported(PAPER, "table7")), ["operation", "level"])

    def compare_with_paper(self) -> pd.DataFrame:
        return self.comparison

    def figure(self):
        trained = set(zip(self.summary["name"], self.summary["tier"]))
        ran = self.comparison[[(o, lv) in trained for o, lv in zip(self.comparison["operation"], self.comparison["level"])]]
        ran = ran.assign(setting=ran["operation"] + " " + ran["level"], ours=pd.to_numeric(ran["ours"]))
        metrics = ["mask_AP_retained", "boundary_AP_retained"]
        frame = ran.pivot_table(index="setting", columns="metric", values="ours", sort=False, dropna=False)
        paper = ran.pivot_table(index="setting", columns="metric", values="paper", sort=False)
        frame = frame.reindex(columns=metrics)
        return MF.bars(frame, metrics,
                       "Table 7, ours (bars) and the paper's Mask R-CNN (grey): % of the clean score kept",
                       self.report, "table7_model", paper=paper)

    def claims(self) -> pd.DataFrame:
        return self._finish(R.ablation_claims(self.summary))


class ClassNoise(ModelPage):
    """05: Tables 9 and 10, class noise alone and with a spatial tier, scored per class and class-agnostically."""

    notebook = "05_class_noise"

    def table9(self) -> pd.DataFrame:
        return R.setting_table(self.summary, ["box_AP", "mask_AP"])

    def table10(self) -> pd.DataFrame:
        return R.setting_table(self.summary, ["box_AP_agnostic", "mask_AP_agnostic", "boundary_AP_agnostic"])

    def compare_with_paper(self) -> pd.DataFrame:
        t9 = self._compare(R.class_noise_retained(self.summary).assign(ours_on=self.ours_on),
                           R.paper_class_retained(reported(PAPER, "table9")), ["model", "backbone", "class_noise", "rate"])
        t10 = self._compare(R.table10_retained(self.summary).assign(ours_on=self.ours_on),
                            R.paper_table10_retained(reported(PAPER, "table10")), ["setting"])
        return pd.concat([t9, t10], ignore_index=True)

    def figure(self):
        frame = R.setting_frame(self.summary)
        return MF.bars(frame, ["mask_AP", "mask_AP_agnostic", "box_AP", "box_AP_agnostic"],
                       "Tables 9 and 10, ours: per-class vs class-agnostic AP", self.report, "class_noise")

    def claims(self) -> pd.DataFrame:
        return self._finish(R.class_noise_claims(self.summary))


class NoisyLosses(ModelPage):
    """06: Table 13 (cross-entropy vs Symmetric Cross-Entropy) and Figs. 8 and 13 (per-instance losses)."""

    notebook = "06_lnl"

    def table13(self) -> pd.DataFrame:
        return R.loss_table(self.summary)

    @cached_property
    def losses(self) -> pd.DataFrame:
        """The per-instance losses of the CE run at ``loss_run_tier``, first seed (Figs. 8 and 13)."""
        spec = self.spec(self.noise(self.cfg.loss_run_tier), self.cfg.seeds[0])
        run = next((r for r in self.runs if r.spec == spec), None)
        if run is None or not run.instance_losses:
            raise ConfigError(f"Figs. 8 and 13 need the per-instance losses of the CE run at loss_run_tier "
                              f"{self.cfg.loss_run_tier!r}: put that tier in loss_tiers and set log_losses: true")
        return pd.DataFrame(run.instance_losses)

    def figure8(self):
        return MF.loss_distributions(self.losses, self.report)

    def figure13(self):
        return MF.loss_bands(self.losses, self.report)

    def separability(self) -> pd.DataFrame:
        return R.separability(self.losses)

    def compare_with_paper(self) -> pd.DataFrame:
        ours = R.sce_gain(self.summary).assign(ours_on=self.ours_on)
        return self._compare(ours, R.paper_sce_gain(reported(PAPER, "table13")), ["tier"])

    def claims(self) -> pd.DataFrame:
        return self._finish(R.loss_claims(self.summary, self.separability()))


class Confidence(TrainEval):
    """07: Fig. 7b (confidence per tier) and Figs. 10 and 15 (predictions), from notebook 03's runs."""

    notebook = "07_confidence"

    def confidence_table(self) -> pd.DataFrame:
        return R.confidence_table(self.summary)

    def figure7b(self):
        return MF.figure7b(self.records, self.report)

    def figure10(self):
        """The ground truth and the clean and hardest models' detections (first seed) on a few val images."""
        _, val = load_pair(self.recipe)
        ids = [im["id"] for im in val.dataset["images"][: self.cfg.example_images]]
        seed, tiers = self.cfg.seeds[0], list(dict.fromkeys([self.cfg.tiers[0], self.cfg.tiers[-1]]))
        chosen = {tier: self.spec(self.noise(tier), seed) for tier in tiers}
        by_spec = {r.spec: r for r in self.runs}
        rows = {f"trained on {k}": [[d for d in by_spec[s].detections if d["image_id"] == i] for i in ids]
                for k, s in chosen.items()}
        truth = [[a for a in val.dataset["annotations"] if a["image_id"] == i] for i in ids]
        names = {c["id"]: c["name"] for c in val.dataset["categories"]}
        return MF.predictions_grid([val.image(i) for i in ids], truth, rows, names, self.report)

    def conflicts(self) -> pd.DataFrame:
        _, val = load_pair(self.recipe)
        return R.conflicting_classes(self.runs, val.dataset)

    def claims(self) -> pd.DataFrame:
        overlapping = self.training.backend != "tiny"
        return self._finish(R.confidence_claims(self.summary, self.conflicts(), overlapping))




class CamusEF(Page):
    """10: Table 6 and Fig. 9, a U-Net on clean vs noisy left-ventricle masks (``benchmark_n.camus``)."""

    notebook = "09_camus_ef"

    @cached_property
    def echo(self):
        cfg = self.cfg
        if cfg.dataset == "synthetic":
            return camus.synthetic_camus(int(cfg.n_patients), int(cfg.data_seed), int(cfg.size))
        return camus_files.load_camus(default_data_dir(self.data_dir) / cfg.dataset_dir, size=int(cfg.size))

    def run(self) -> pd.DataFrame:
        """Train the clean and the noisy U-Net for every seed; the per-seed means."""
        cfg = self.cfg
        self.results = []
        for seed in progress(cfg.seeds, desc="CAMUS seeds"):
            result = camus.clean_vs_noisy(self.echo, seed, dict(cfg.get("hparams") or {}), tier=cfg.tier,
                                          noise_pixel_mm=cfg.get("noise_pixel_mm"))
            for name in camus.TRAINING:  # shared.runlog: both U-Nets were trained now
                log_run(plans.CAMUS_KIND, plans.logged_key(plans.CAMUS_KIND, plans.camus_params(
                    cfg, self.data_dir, seed, name)), built=True, seconds=result["seconds"][name])
            self.results.append(result)
        frames = pd.concat([r[k] for r in self.results for k in ("clean", "noisy")], ignore_index=True)
        self.report.table(frames, "per_patient")
        return frames.groupby(["seed", "training"])[list(camus.METRICS)].mean().round(2)

    @cached_property
    def table(self) -> pd.DataFrame:
        table = camus.table6([r["clean"] for r in self.results], [r["noisy"] for r in self.results])
        self.report.table(table, "table6")
        return table

    def table6(self) -> pd.DataFrame:
        return self.table.round(2)

    def figure9(self):
        first = self.results[0]
        train = first["train"]
        return camus.figure9(self.echo.images[train], self.echo.masks[train], first["noisy_masks"],
                             spacing=self.echo.spacing[train], report=self.report)

    @cached_property
    def swing(self) -> dict:
        ed, es, spacing = camus.ellipse_lv_pair(ef=camus.SWING_CLAIM["ef"])
        return camus.ef_swing(ed, es, spacing)

    def ef_swing(self) -> pd.DataFrame:
        return self.swing["table"].round(3)

    def compare_with_paper(self) -> pd.DataFrame:
        reduced = "reduced: " if self.cfg.dataset == "synthetic" or self.overridden else ""
        ours = self.table.melt(id_vars="training", value_vars=list(camus.METRICS), var_name="metric").assign(
            ours_on=f"{reduced}{self.echo.source}; mean of {len(self.cfg.seeds)} seed(s)")
        return self.report.compare(ours, "table6", on=["training"])

    def claims(self) -> pd.DataFrame:
        return self._finish(camus.claims(self.table, self.swing))



class WeakAnnotations(ModelPage):
    """08: COCO-WAN (Tables 3's COCO-WAN row, 4, 5 and 14, Figs. 4-6 and 14): labels from a prompted segmenter, models
    trained on them, and a prompted segmenter fine-tuned on clean or noisy masks (Table 14)."""

    notebook = "08_coco_wan"
    TEXT_SETTINGS = plans.TEXT_SETTINGS

    def __init__(self, profile: str = "smoke", **kwargs):
        super().__init__(profile, **kwargs)
        plans.annotator_precision(self.cfg)  # checked before anything runs

    @property
    def annotator(self) -> dict:
        """The weak annotator and, for SAM, its checkpoint and precision (``plans.annotator``)."""
        return plans.annotator(self.cfg, self.data_dir)

    @property
    def annotator_args(self) -> dict:
        """``wan``'s annotator arguments for the val images' labels: ``annotator`` and, for SAM, the page's
        ``device`` (where the model runs train: SAM follows it, as the keys do, ``plans.sam_precision``)."""
        args = self.annotator
        return {**args, "device": self.training.device} if args["annotator"] == "sam" else args

    @property
    def sam_checkpoint(self) -> str | None:
        """SAM's weights when SAM annotates or is fine-tuned (``plans.sam_checkpoint``)."""
        return plans.sam_checkpoint(self.cfg, self.data_dir)

    def text_setting(self) -> tuple[str, dict, float]:
        """The ``text`` setting checked: (detector, its options, score threshold) (``plans.text_setting``)."""
        return plans.text_setting(self.cfg, self.data_dir)

    def text_noise(self) -> TrainNoise:
        """The training noise of Tables 4's text row and 5 (``plans.text_noise``)."""
        return plans.text_noise(self.cfg, self.data_dir)

    def _log_weak(self, **label_set):
        """``shared.runlog``: a weak label set of the val images (``plans.weak_params``), made now."""
        return lambda prompt, seed, seconds: log_run(
            plans.WEAK_KIND, plans.logged_key(plans.WEAK_KIND, plans.weak_params(
                self.cfg, self.data_dir, self.recipe, prompt, seed, **label_set, device=self.training.device)),
            built=True, seconds=seconds)

    @cached_property
    def val(self):
        """The annotation-level tables and figures label the validation images (fewer than the training ones)."""
        return load_pair(self.recipe)[1]

    def prompt_quality(self) -> pd.DataFrame:
        """Every prompt's weak labels of the val images scored against their clean annotations (mean over seeds)."""
        frame = wan.prompt_quality(self.val, self.cfg.prompts, seeds=self.cfg.seeds, on_label_set=self._log_weak(),
                                   **self.annotator_args)
        if self.cfg.get("text"):
            frame = pd.concat([frame, self.text_quality()], ignore_index=True)
        self.quality = frame
        self.report.table(frame, "prompt_quality")
        return R.prompt_table(frame)

    def text_quality(self) -> pd.DataFrame:
        """The text prompt's row of ``prompt_quality`` (Grounded-SAM): the ``text`` setting's detector, queried with
        each val image's class names, its boxes prompting the annotator."""
        detector, options, threshold = self.text_setting()
        if detector == "stand_in":
            options = {**options, "train": grounded.stand_in_train(self.recipe)}
        def logged(seed, seconds):
            log_run(plans.TEXT_KIND, plans.logged_key(plans.TEXT_KIND, plans.text_params(
                self.cfg, self.data_dir, self.recipe, seed, device=self.training.device)), built=True,
                seconds=seconds)

        return grounded.text_prompt_quality(self.val, detector, seeds=self.cfg.seeds, detector_options=options,
                                            score_threshold=threshold, on_label_set=logged, **self.annotator_args)

    def table14(self) -> pd.DataFrame:
        """Table 14 (%): zero-shot, box prompts from the clean annotations and from their noisy version (the engine's
        ``table14_tier``) on the val images; fine-tuned, a box-prompted segmenter trained on the clean and on the
        noisy train annotations, prompted with clean val boxes. Every mask is scored against the clean one (IoU, and
        Dice as "F1")."""
        cfg, tier = self.cfg, self.cfg.table14_tier
        sources = {"clean": None, tier: self.noise(tier).draw(self.val, cfg.seeds[0])}
        zero_shot = [wan.prompt_quality(self.val, ["box"], seeds=cfg.seeds[:1], prompt_source=source,
                                        on_label_set=self._log_weak(source=plans.table14_source(cfg, name)),
                                        **self.annotator_args).assign(method="zero-shot", annotations=name)
                     for name, source in sources.items()]
        tuning = plans.tuning(cfg, self.data_dir, self.training.device)
        fine_tuned = finetune_grid(self.recipe, plans.finetune_noises(cfg), cfg.seeds, tuning)
        self.sam_rows_backend = tuning.backend
        self.sam_rows = pd.concat([*zero_shot, pd.DataFrame(fine_tuned).assign(method="fine-tune")], ignore_index=True)
        self.report.table(self.sam_rows, "table14")
        return R.table14_table(self.sam_rows)

    def figure(self):
        """Figs. 5 and 14: clean annotations and the weak labels of each prompt on a few training images."""
        ids = [im["id"] for im in self.val.dataset["images"][: self.cfg.example_images]]
        shown = replace(self.val, dataset={**self.val.dataset, "images": self.val.dataset["images"][:len(ids)],
                                             "annotations": [a for a in self.val.dataset["annotations"]
                                                             if a["image_id"] in ids]})
        rows = {"clean": [[a for a in shown.dataset["annotations"] if a["image_id"] == i] for i in ids]}
        for prompt in self.cfg.prompts:
            with plans.logged(plans.WEAK_KIND, plans.weak_params(self.cfg, self.data_dir, self.recipe, prompt,
                                                                 self.cfg.seeds[0],
                                                                 n_images=int(self.cfg.example_images),
                                                                 device=self.training.device)):
                weak = wan.weak_dataset(shown, prompt, seed=self.cfg.seeds[0], **self.annotator_args).dataset
            rows[prompt] = [[a for a in weak["annotations"] if a["image_id"] == i] for i in ids]
        return figures.annotation_grid([self.val.image(i) for i in ids], rows,
                                       f"{self.val.name}: clean annotations and {self.cfg.annotator} weak labels",
                                       "figure14", self.report)

    def model_table(self) -> pd.DataFrame:
        return R.tier_table(self.summary)

    def compare_with_paper(self) -> pd.DataFrame:
        paper = pd.concat([reported(PAPER, t) for t in ("table3", "table11")], ignore_index=True)
        paper = R.paper_retained(paper[(paper["dataset"] == "COCO-WAN") & (paper["model"] == "M-RCNN")])
        ours = R.ours_tier_long(self.summary, "COCO-WAN", ["mask_AP", "box_AP"], absolute=False, ours_on=self.ours_on)
        model = self._compare(ours, paper, ["dataset", "model", "backbone", "tier"])
        shrunk = self.recipe.dataset == "shapes" or self.overridden
        tool = {"zero-shot": self.cfg.annotator, "fine-tune": f"{self.sam_rows_backend} fine-tuned"}
        reduced = {"zero-shot": shrunk or self.cfg.annotator != "sam",
                   "fine-tune": shrunk or self.sam_rows_backend != "sam"}
        sam = R.table14_long(self.sam_rows)
        sam["ours_on"] = [f"{'reduced: ' if reduced[m] else ''}{tool[m]} on {self.val.name}" for m in sam["method"]]
        sam = self._compare(sam, reported(PAPER, "table14"), ["method", "annotations"])
        table4 = reported(PAPER, "table4")
        prompts = self._compare(R.ours_table4_retained(self.summary, self.ours_on), R.paper_table4_retained(table4),
                                ["prompt", "prompt_noise"])
        text = self._compare(R.ours_table5_retained(self.summary, f"{self.ours_on} (the paper's model: Mask2Former)"),
                             R.paper_table5_retained(reported(PAPER, "table5")), ["model", "backbone", "labels"])
        return pd.concat([model, prompts, text, sam], ignore_index=True)

    def table5(self) -> pd.DataFrame:
        """Table 5: Mask2Former's relative change (%) from clean to Grounded-SAM text-prompted labels, each backbone,
        and ours (the page's model from its clean run to its run on the ``text`` setting's labels)."""
        return R.text_prompt_change(reported(PAPER, "table5"), self.summary, f"ours ({self.training.backend})")

    def claims(self) -> pd.DataFrame:
        return self._finish(R.wan_claims(self.quality, self.summary, self.sam_rows))

__all__ = ["ModelPage", "TrainEval", "NoiseAblation", "ClassNoise", "NoisyLosses", "Confidence", "WeakAnnotations", "CamusEF"]
