"""10_loss_distributions' page: Figure 8's panels, the separability and separation tables, and the claims."""
import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from ciln.downstream import Scenario  # noqa: E402
from ciln.pages import loss_distributions as L  # noqa: E402

WARMUP, FINAL = 3, 7


def scenario(name, setting, noisy_rows, n=40):
    clean = np.arange(n) % 4
    labels = clean.copy()
    labels[noisy_rows] = (clean[noisy_rows] + 1) % 4
    return Scenario(name, "CILN-S", setting, "noisy", np.zeros((n, 2, 2, 3), np.uint8), labels, clean, np.arange(n))


def record(s: Scenario, separation: float, rng, clean_probability=True):
    """Losses where noisy rows sit ``separation`` above clean ones (negative: below), and DivideMix's division."""
    noisy = s.labels != s.clean_labels
    losses = {e: 2 + rng.random(len(noisy)) + separation * noisy for e in (WARMUP, FINAL)}
    w = np.clip(0.8 - 0.6 * noisy * np.sign(separation) + 0.05 * rng.random(len(noisy)), 0, 1)
    return {"losses": losses, "clean_probability": np.stack([w, w]) if clean_probability else None, "last": 0.5}


def records_of(rng, low=2.0, highs=(-2.0, 0.0), control=2.0, with_control=True):
    runs = {}
    low_s = scenario("CILN-S frost (1) noisy-img", "frost (1)", np.arange(0, 40, 10))
    runs[low_s.name] = (low_s, record(low_s, low, rng))
    for setting, sep in zip(("contrast (5)", "fog (5)"), highs):
        s = scenario(f"CILN-S {setting} noisy-img", setting, np.arange(0, 40, 2))
        runs[s.name] = (s, record(s, sep, rng))
    if with_control:
        c = scenario("symmetric 50% (rate-matched to contrast (5))", "contrast (5)", np.arange(1, 40, 2))
        runs[c.name] = (c, record(c, control, rng))
    return runs


def test_separability_table_measures_auc_and_division(rng):
    runs = records_of(rng)
    table = L.separability_table(runs, WARMUP, FINAL).set_index("scenario")
    low = table.loc["CILN-S frost (1) noisy-img"]
    assert low["loss AUC after warm-up"] == 1.0 and low["division AUC"] == 1.0  # noisy rows: larger loss, lower w
    assert low["clean-pile purity"] == 1.0 and low["clean share"] == pytest.approx(0.9)
    assert table.loc["CILN-S contrast (5) noisy-img", "loss AUC after warm-up"] == 0.0
    one, = [runs["CILN-S fog (5) noisy-img"]]
    no_division = {"x": (one[0], dict(one[1], clean_probability=None))}
    row = L.separability_table(no_division, WARMUP, FINAL).iloc[0]
    assert np.isnan(row["division AUC"]) and np.isnan(row["clean-pile purity"])
    sep = L.separation_table(runs).set_index("scenario")["separation"]
    s, r = runs["CILN-S frost (1) noisy-img"]
    w, noisy = r["clean_probability"][0], s.labels != s.clean_labels
    assert sep["CILN-S frost (1) noisy-img"] == pytest.approx(w[~noisy].mean() - w[noisy].mean()) and sep.iloc[0] > 0
    assert sep["CILN-S contrast (5) noisy-img"] < 0
    assert np.isnan(L.separation_table(no_division)["separation"].iloc[0])
    overview = L.runs_overview(runs)
    assert list(overview["rows"]) == [40] * 4 and overview["noise_rate"].iloc[1] == pytest.approx(0.5)


LOW = "At low noise the losses separate clean from noisy rows after warm-up (AUC >= 0.75)"
HIGH = "At high noise the separation collapses (AUC well below the low-noise setting's)"
CONTROL = "(A check of ours, not in the paper) CILN noise is less separable than rate-matched symmetric noise (AUC lower by >= 0.15)"


def claims_of(table):
    return {r["claim"]: r for r in L.loss_claims(table)}


def table_with(low=0.9, highs=(0.3, 0.5), control=0.7, with_control=True):
    rows = [{"scenario": "CILN-S frost (1) noisy-img", "setting": "frost (1)", L.AUC: low}]
    rows += [{"scenario": f"CILN-S {s} noisy-img", "setting": s, L.AUC: a}
             for s, a in zip(("contrast (5)", "fog (5)"), highs)]
    if with_control:
        rows.append({"scenario": "symmetric 50% (rate-matched to contrast (5))", "setting": "contrast (5)",
                     L.AUC: control})
    return pd.DataFrame(rows)


def test_claims_flip_at_their_thresholds():
    base = claims_of(table_with())
    assert [base[c]["verdict"] for c in (LOW, HIGH, CONTROL)] == ["yes"] * 3
    assert base[HIGH]["detail"] == "contrast (5): 0.30, fog (5): 0.50"
    assert base[CONTROL]["detail"] == "contrast (5): CILN 0.30, symmetric 0.70"
    assert claims_of(table_with(low=0.74))[LOW]["verdict"] == "no"
    assert claims_of(table_with(highs=(0.3, 0.85)))[HIGH]["verdict"] == "no"  # fog within 0.1 of the low setting
    assert claims_of(table_with(control=0.4))[CONTROL]["verdict"] == "no"
    assert claims_of(table_with(with_control=False))[CONTROL]["verdict"] == "not run"


def test_claims_on_the_tables_built_from_runs(rng):
    table = L.separability_table(records_of(rng), WARMUP, FINAL)
    assert [r["verdict"] for r in L.loss_claims(table)] == ["yes", "yes", "yes"]


def curves(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines()]


def test_figure8_has_a_clean_and_a_noisy_density_in_every_panel(rng):
    runs = records_of(rng, with_control=False)
    scenarios = [s for s, _ in runs.values()]
    fig = L.loss_figure(scenarios, runs, WARMUP, FINAL)
    axes = np.array(fig.axes).reshape(2, len(scenarios))
    for col, s in enumerate(scenarios):
        n_noisy = int((s.labels != s.clean_labels).sum())
        for row, epoch in enumerate((WARMUP, FINAL)):
            ax = axes[row, col]
            assert curves(ax) == [f"clean ({len(s.labels) - n_noisy})", f"noisy ({n_noisy})"]
            assert f"epoch {epoch + 1}" in ax.get_title(loc="left") and s.setting in ax.get_title(loc="left")
            assert [t.get_text() for t in ax.get_legend().get_texts()] == curves(ax)
    # a group of one row has no density: left out, not drawn as a flat line
    one = scenario("CILN-S frost (1) noisy-img", "frost (1)", np.array([5]))
    single = L.loss_figure([one], {one.name: (one, record(one, 2.0, rng))}, WARMUP, FINAL)
    assert all(curves(ax) == ["clean (39)"] for ax in single.axes)


def test_the_page_wires_runs_figure_tables_and_claims(rng, tmp_path):
    """The page on injected runs (no data, no training): the settings' epochs pick the logged losses."""
    page = L.LossDistributions("smoke", out_dir=tmp_path)
    assert (page.warmup_epoch, page.final_epoch) == (WARMUP, FINAL)  # the smoke profile's log_losses_at
    runs = records_of(rng)
    page.__dict__.update(records=runs, scenarios=[s for name, (s, _) in runs.items() if not name.startswith("symmetric")])
    assert len(page.run().data) == 4
    assert len(page.figure8().axes) == 6 and (tmp_path / "fig8_loss_distributions.png").exists()
    assert len(page.separability().data) == 4 and len(page.separation().data) == 4
    assert list(page.claims()["verdict"]) == ["yes", "yes", "yes"]
    assert {"separability.csv", "separation.csv", "claims.json"} <= {p.name for p in tmp_path.iterdir()}
