"""10_loss_distributions: Figure 8 — DivideMix's per-sample losses on clean and noisy rows, and how well they
separate the two.

    page = LossDistributions("smoke")
    page.run()                   # DivideMix per setting and on a rate-matched symmetric control (cached)
    page.figure8()               # loss densities after warm-up and at the end
    page.separability()          # AUC of the loss for spotting noisy rows; DivideMix's own division
    page.separation()            # the official repository's diagnostic
    page.claims()
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde
from sklearn.metrics import roc_auc_score

from ciln.downstream import symmetric_control
from ciln.pages import CifarPage
from shared.plotting import finish_figure
from shared.report import claim_record
from shared.tables import show_table

GROUPS = (("clean", "#0173b2"), ("noisy", "#d55e00"))
AUC = "loss AUC after warm-up"
CONTROL_OF = 1  # the symmetric-noise control is rate-matched to this scenario (the first high-noise setting)


def scenario_args(cfg) -> dict:
    """Figure 8's scenarios: ``fig8_settings`` on ``fig8_image_source`` images (CILN-S, no PL-IDN)."""
    return {"settings": cfg.fig8_settings, "image_sources": [cfg.fig8_image_source]}


def run_grid(cfg, scenarios: list, controls: list) -> list[tuple]:
    """DivideMix (the first variant, the first seed) on every scenario and control: (scenario, method, seed,
    variant)."""
    return [(s, "dividemix", cfg.seeds[0], cfg.dm_variants[0]) for s in scenarios + controls]


def is_noisy(scenario) -> np.ndarray:
    return scenario.labels != scenario.clean_labels


def runs_overview(records: dict) -> pd.DataFrame:
    """One row per run: scenario, training rows, noise rate, final test accuracy."""
    return pd.DataFrame([{"scenario": name, "rows": len(s.labels), "noise_rate": s.noise_rate, "test accuracy": r["last"]}
                         for name, (s, r) in records.items()])


def loss_figure(scenarios, records: dict, warmup_epoch: int, final_epoch: int, report=None):
    """Figure 8: per setting (columns), the density (Gaussian KDE) of network 1's per-sample loss on its clean rows
    and on its noisy rows, after warm-up (top) and at the final epoch (bottom); x up to the 99th percentile. A group
    with fewer than two rows, or with a single loss value, has no density and is left out."""
    fig, axes = plt.subplots(2, len(scenarios), figsize=(4.2 * len(scenarios), 6), constrained_layout=True,
                             squeeze=False)
    for col, scenario in enumerate(scenarios):
        _, record = records[scenario.name]
        noisy = is_noisy(scenario)
        for row, epoch in enumerate((warmup_epoch, final_epoch)):
            ax = axes[row, col]
            losses = record["losses"][epoch]
            grid = np.linspace(0, np.percentile(losses, 99), 200)
            for (name, color), mask in zip(GROUPS, (~noisy, noisy)):
                if mask.sum() > 1 and np.ptp(losses[mask]) > 0:
                    ax.plot(grid, gaussian_kde(losses[mask])(grid), color=color, label=f"{name} ({mask.sum()})")
            ax.set_title(f"({'abcdefghijkl'[row * len(scenarios) + col]}) {scenario.setting}, "
                         f"{scenario.noise_rate:.0%} noise, epoch {epoch + 1}", loc="left", fontsize="small")
            ax.set_xlabel("per-sample loss")
            ax.legend(fontsize="x-small")
    return finish_figure(fig, report, "fig8_loss_distributions")


def separability_table(records: dict, warmup_epoch: int, final_epoch: int) -> pd.DataFrame:
    """Per run: the AUC of the loss for telling noisy rows from clean ones after warm-up and at the end, and
    DivideMix's final division (AUC of 1 - its clean probability, purity of the rows it calls clean), beside the
    share of clean rows and the final test accuracy."""
    rows = []
    for name, (scenario, record) in records.items():
        noisy = is_noisy(scenario)
        w = record["clean_probability"][0] if record["clean_probability"] is not None else None
        called_clean = w >= 0.5 if w is not None else None
        rows.append({
            "scenario": name, "setting": scenario.setting, "noise_rate": scenario.noise_rate,
            "loss AUC after warm-up": roc_auc_score(noisy, record["losses"][warmup_epoch]),
            "loss AUC at the end": roc_auc_score(noisy, record["losses"][final_epoch]),
            "division AUC": roc_auc_score(noisy, 1 - w) if w is not None else np.nan,
            "clean-pile purity": float(np.mean(~noisy[called_clean])) if called_clean is not None and called_clean.any()
            else np.nan,
            "clean share": 1 - scenario.noise_rate, "test accuracy": record["last"],
        })
    return pd.DataFrame(rows)


def separation_table(records: dict) -> pd.DataFrame:
    """The official repository's diagnostic: mean clean probability on clean rows minus on noisy rows (NaN for a
    run without DivideMix's division)."""
    rows = []
    for name, (scenario, record) in records.items():
        noisy = is_noisy(scenario)
        w = record["clean_probability"][0] if record["clean_probability"] is not None else None
        rows.append({"scenario": name, "separation": float(w[~noisy].mean() - w[noisy].mean()) if w is not None
                     else np.nan})
    return pd.DataFrame(rows)


def loss_claims(separability: pd.DataFrame) -> list[dict]:
    """Figure 8's reading, from the AUC after warm-up: the first CILN setting (low noise) separates, the others
    (high noise) do not, and CILN noise separates less than the rate-matched symmetric control."""
    control_rows = separability["scenario"].str.startswith("symmetric")
    ciln = separability[~control_rows].reset_index(drop=True)
    low, highs = ciln.iloc[0], ciln.iloc[1:]
    out = [
        claim_record("At low noise the losses separate clean from noisy rows after warm-up (AUC >= 0.75)",
                     bool(low[AUC] >= 0.75), f"{low['setting']}: AUC {low[AUC]:.2f}"),
        claim_record("At high noise the separation collapses (AUC well below the low-noise setting's)",
                     bool((highs[AUC] < low[AUC] - 0.1).all()),
                     ", ".join(f"{setting}: {value:.2f}" for setting, value in zip(highs["setting"], highs[AUC]))),
    ]
    statement = "(A check of ours, not in the paper) CILN noise is less separable than rate-matched symmetric noise (AUC lower by >= 0.15)"
    if not control_rows.any():
        return out + [claim_record(statement, None, "no symmetric control was run")]
    control = separability[control_rows].iloc[0]
    matched = ciln[ciln["setting"] == control["setting"]].iloc[0]
    return out + [claim_record(statement, bool(control[AUC] - matched[AUC] >= 0.15),
                               f"{control['setting']}: CILN {matched[AUC]:.2f}, symmetric {control[AUC]:.2f}")]


class LossDistributions(CifarPage):
    """10: Figure 8 and the separability of noisy rows by their loss."""

    notebook = "10_loss_distributions"

    @property
    def warmup_epoch(self) -> int:
        return self.cfg.train["log_losses_at"][0]

    @property
    def final_epoch(self) -> int:
        return self.cfg.train["log_losses_at"][-1]

    @cached_property
    def scenarios(self) -> list:
        """DivideMix's settings (``fig8_settings``) on ``fig8_image_source`` images, with their noisy NLV rows."""
        return self.scenarios_of(scenario_args(self.cfg))

    @cached_property
    def records(self) -> dict:
        """DivideMix (first variant, first seed) on each setting and on a symmetric-noise control rate-matched to the
        first high-noise setting: scenario name -> (scenario, record)."""
        scenarios = self.scenarios
        controls = [symmetric_control(scenarios[CONTROL_OF], self.images, self.bench.num_classes)]
        return {s.name: (s, self.train(s, method, seed, variant))
                for s, method, seed, variant in run_grid(self.cfg, scenarios, controls)}

    def run(self):
        return show_table(runs_overview(self.records), {"noise_rate": "{:.1%}", "test accuracy": "{:.1%}"})

    def figure8(self):
        return loss_figure(self.scenarios, self.records, self.warmup_epoch, self.final_epoch, self.report)

    @cached_property
    def separability_frame(self) -> pd.DataFrame:
        table = separability_table(self.records, self.warmup_epoch, self.final_epoch)
        self.report.table(table, "separability")
        return table

    def separability(self):
        table = self.separability_frame.drop(columns="setting")
        return show_table(table, {c: "{:.3f}" for c in table.columns if c != "scenario"})

    def separation(self):
        table = separation_table(self.records)
        self.report.table(table, "separation")
        return show_table(table, {"separation": "{:+.3f}"})

    def claims(self) -> pd.DataFrame:
        return self._finish(loss_claims(self.separability_frame))


__all__ = ["LossDistributions", "scenario_args", "run_grid", "runs_overview", "loss_figure", "separability_table", "separation_table", "loss_claims"]
