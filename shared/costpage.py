"""The book's "What a full run costs" page and the cost line of every page's Reproduce box, from one pricing.

Both come from ``full_profile_costs``: every notebook of the five papers planned in the full profile
(``shared.cost``), priced on the device a reader would rent (a GPU the project has a calibration file measured on,
else an H100's FLOPs at a stated share of its bf16 peak, labelled as an estimate) beside the FLOP bound (the same
FLOPs at the full bf16 peak) and the compute the paper itself reports (``compute:`` in its ``items.yaml``). The page
names the largest cost centres (the kinds of run that take the most hours).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from shared.catalog import PaperCatalog
from shared.cost import (
    BOUND_UTILIZATION,
    DEFAULT_UTILIZATION,
    Calibration,
    Priced,
    batch_jobs,
    default_gpu_device,
    on_device,
    flop_bound_hours,
    plan_batch,
    price,
)


@dataclass
class FullProfileCosts:
    """Every notebook's full-profile plan priced on ``calibration`` (``priced``: notebook key -> ``Priced``)."""

    calibration: Calibration
    priced: dict[str, Priced]
    utilization: float

    def paper(self, paper: str) -> list[Priced]:
        return [p for key, p in self.priced.items() if key.startswith(f"{paper}/")]

    def notebook(self, paper: str, stem: str) -> Priced | None:
        return self.priced.get(f"{paper}/{stem}.ipynb")

    @property
    def calibrated(self) -> bool:
        return bool(self.calibration.measured)


def full_profile_costs(device: str | None = None, utilization: float = DEFAULT_UTILIZATION) -> FullProfileCosts:
    """Plan and price every paper's full profile (``profiles.yaml``'s full settings) on ``device`` (default:
    ``shared.cost.default_gpu_device``, a measured GPU calibration where the project has one)."""
    device = device or default_gpu_device()
    calibration = Calibration.load(device)
    plans = plan_batch(batch_jobs(on_device([], device), "full"), "full")
    return FullProfileCosts(calibration, price(plans, calibration, utilization=utilization), utilization)


def hours_text(hours: float) -> str:
    """Hours as a reader wants them: minutes under one, days over 72."""
    if hours is None or math.isnan(hours):
        return "—"
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours > 72:
        return f"{hours:,.0f} h ({hours / 24:,.0f} days)"
    return f"{hours:,.1f} h"


def flops_text(flops: float) -> str:
    if not flops:
        return "—"
    exponent = math.floor(math.log10(flops))
    return f"{flops / 10 ** exponent:.1f}e{exponent}"


def how_priced(costs: FullProfileCosts) -> str:
    cal = costs.calibration
    if costs.calibrated:
        return (f"measured on an {cal.slug} (`{cal.source}`, `python -m shared.gpu_check`): each kind of step at "
                f"its own measured time; a kind measured at another batch or width from that measurement; the rest "
                f"estimated from FLOPs at {costs.utilization:.0%} of its bf16 peak, never below its operators at the "
                f"measured {cal.dispatch_s * 1e6:.3g} µs each (the per-notebook table shows how much is estimated)")
    dispatch = ("as measured there" if cal.dispatch_source == "measured" else
                "an assumption: PyTorch's host time to dispatch and launch an operator, until one is measured")
    return (f"estimated: FLOPs at {costs.utilization:.0%} of an {cal.slug}'s bf16 peak "
            f"({cal.peak_tflops.get('bf16', 0):g} TFLOP/s), but never less than the step's operators (forward and "
            f"backward, as dispatched) at {cal.dispatch_s * 1e6:.3g} µs each ({dispatch}), which is what bounds the "
            "small networks (CIFAR ResNets, MLPs); configurations trained as one stack (Plench's image grid) share "
            "that dispatch; no calibration measured on one yet")


def reproduce_line(costs: FullProfileCosts | None, paper: str, stem: str) -> str:
    """One sentence for the page's Reproduce box: what its full profile costs (or why it is not known)."""
    priced = costs.notebook(paper, stem) if costs else None
    if priced is None:
        return "Its full-profile cost has not been planned."
    if not priced.runs:
        return "Its full profile trains nothing (analysis of the runs other pages make, or CPU work)."
    est = " (estimate)" if priced.estimated_s > 0.5 * priced.seconds else ""
    bound = flop_bound_hours(priced.flops, costs.calibration.peak_tflops.get("bf16", math.nan))
    shared = f", {priced.runs - priced.charged:,} of them made by earlier pages" if priced.charged < priced.runs else ""
    text = (f"Its full profile makes {priced.runs:,} runs{shared}: {priced.steps:,} steps, "
            f"{flops_text(priced.flops)} FLOPs, about **{hours_text(priced.hours)} on one {costs.calibration.slug}**"
            f"{est}; the FLOP bound is {hours_text(bound)}")
    if priced.unpriced:
        text += f"; {priced.unpriced} part(s) without a GPU step (CPU work) are not priced"
    return text + " ([what a full run costs](../../cost.md))."


def cost_page(costs: FullProfileCosts, catalogs: list[PaperCatalog]) -> str:
    """The "What a full run costs" page (MyST)."""
    bf16 = costs.calibration.peak_tflops.get("bf16", math.nan)
    intro = ("Before renting a GPU for a paper's full profile, this page says what it will take. Every run the "
             "full profile's notebooks would make is enumerated by the same code the notebooks call "
             "(`python -m shared.cost --profile full`), its steps are counted, and each step is priced: "
             f"{how_priced(costs)}. Runs two pages share (a paper's voter pools, its training runs) are paid once. "
             f"The **FLOP bound** is the same FLOPs at the full bf16 peak ({bf16:g} TFLOP/s): no implementation "
             "is faster, so *projection / bound* says how far ours is from the hardware. Work without a GPU step "
             "(scikit-learn fits, corruptions, COCO evaluation) is counted but not priced.")
    lines = ["# What a full run costs", "", intro, "",
             # the comparison the reader came for first (ours, the paper's, the bound); the counts behind it after
             "| paper | projected | the paper reports | FLOP bound | at 50 % of peak | runs | steps | FLOPs |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    total_hours = total_flops = 0.0
    for catalog in catalogs:
        ps = costs.paper(catalog.paper)
        hours, flops = sum(p.hours for p in ps), sum(p.flops for p in ps)
        total_hours, total_flops = total_hours + hours, total_flops + flops
        reported = catalog.compute.text if catalog.compute else "—"
        lines.append(f"| [{catalog.short}](papers/{catalog.paper}/index.md) | {hours_text(hours)} | {reported} | "
                     f"{hours_text(flop_bound_hours(flops, bf16))} | "
                     f"{hours_text(flop_bound_hours(flops, bf16, BOUND_UTILIZATION))} | "
                     f"{sum(p.charged for p in ps):,} | {sum(p.steps for p in ps):,} | {flops_text(flops)} |")
    lines += [(f"| **all five** | **{hours_text(total_hours)}** | | {hours_text(flop_bound_hours(total_flops, bf16))} | "
               f"{hours_text(flop_bound_hours(total_flops, bf16, BOUND_UTILIZATION))} | | | {flops_text(total_flops)} |"),
              ""]
    lines += ["## What each paper says it cost", ""]
    for catalog in catalogs:
        if catalog.compute:
            lines.append(f"- **{catalog.short}**: {catalog.compute.reported}. Read as "
                         f"{catalog.compute.text}: {catalog.compute.basis}.")
    lines += ["", "## The largest cost centres", "",
              "The kinds of run that take the most projected hours, over all papers:", "",
              "| paper | kind of run | projected | share of the paper |", "|---|---|---:|---:|"]
    centres = []
    for catalog in catalogs:
        ps = costs.paper(catalog.paper)
        paper_hours = sum(p.hours for p in ps) or math.nan
        kinds: dict[str, float] = {}
        for p in ps:
            for kind, seconds in p.seconds_by_kind.items():
                kinds[kind] = kinds.get(kind, 0.0) + seconds / 3600
        centres += [(hours, catalog.short, kind, hours / paper_hours) for kind, hours in kinds.items()]
    for hours, short, kind, share in sorted(centres, reverse=True)[:8]:
        lines.append(f"| {short} | `{kind}` | {hours_text(hours)} | {share:.0%} |")
    lines += ["", "## Per notebook", "",
              "| page | runs (made here) | steps | FLOPs | projected | of which estimated | FLOP bound |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for key, p in costs.priced.items():
        paper, name = key.split("/")
        lines.append(f"| [{paper}/{name.removesuffix('.ipynb')}](papers/{paper}/{name.removesuffix('.ipynb')}) | "
                     f"{p.runs:,} ({p.charged:,}) | {p.steps:,} | {flops_text(p.flops)} | {hours_text(p.hours)} | "
                     f"{hours_text(p.estimated_s / 3600)} | {hours_text(flop_bound_hours(p.flops, bf16))} |")
    return "\n".join(lines) + "\n"
