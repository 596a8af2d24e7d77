"""Every paper notebook executed in the smoke profile (through the batch runner), then the book built.

The batch writes to runs/smoke like `make book`, so notebooks that are up to date there are not re-run.
"""
import json
import subprocess
import sys

import pytest

from shared.book import BOOK
from shared.paths import PAPERS, REPO_ROOT, runs_dir
from shared.run import discover

pytestmark = pytest.mark.notebooks
NOTEBOOKS = [f"{p.parent.name}/{p.name}" for p in discover(list(PAPERS))]


@pytest.fixture(scope="session")
def smoke_run():
    result = subprocess.run([sys.executable, "-m", "shared.run", "--profile", "smoke", "--jobs", "2"],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    manifest = json.loads((runs_dir("smoke") / "manifest.json").read_text())
    return result, manifest["notebooks"]


@pytest.mark.parametrize("key", NOTEBOOKS)
def test_notebook_runs_in_smoke_profile(smoke_run, key):
    result, records = smoke_run
    record = records[key]
    assert record["status"] == "ok", f"{key} failed: {record['error']}\n{result.stderr[-3000:]}"
    assert {"report.json", "claims.json", "comparison.csv"} <= set(record["outputs"]), \
        "every notebook ends with report.finish() (paper vs ours and claims)"
    assert any(o.endswith(".png") for o in record["outputs"]) and any(o.endswith(".svg") for o in record["outputs"])


def claims(key):
    folder = runs_dir("smoke") / key.replace(".ipynb", "")
    return {c["claim"]: c for c in json.loads((folder / "claims.json").read_text())}


# CILN's faithfulness checks (issue 3): claims each notebook records that must hold in smoke.
CILN_CHECKS = {
    "01_benchmark": ["Noise rate grows with severity (severity 5 above severity 1) for most corruptions",
                     "Clean-start (CILN-C) noise rates are below the standard (CILN-S) ones",
                     "Some MNIST settings are too mild to release"],
    "03_label_distributions": ["Some image setting has an attractor (>= 10 pp) and some is flat (< 3 pp at level 1)"],
    "05_nth": ["nth is positive in every setting", "nth rises and then falls with severity for some corruption",
               "Clean-start lowers nth (CILN-C below CILN-S in at least 90 % of settings)"],
    "06_tv": ["CILN is closer to the human reference than symmetric and class-conditional noise at the same rate"],
    "08_downstream": ["At high noise Co-Teaching and DivideMix do not beat ERM on CILN (CILN-S contrast (5), clean-img; "
                      "by more than 3 points)",
                      "At high noise Co-Teaching and DivideMix do not beat ERM on CILN (CILN-S contrast (5), noisy-img; "
                      "by more than 3 points)"],
    "09_attractors": ["Co-Teaching does better on PL-IDN's high tier than on the high-noise CILN settings (clean-img)"],
    "10_loss_distributions": ["(A check of ours, not in the paper) CILN noise is less separable than rate-matched symmetric noise (AUC lower by >= 0.15)"],
}


# Plench's faithfulness checks (issue 4) that the smoke run reproduces. Reported but not asserted:
# "NN and GA >= 15 points below Forward and SCL-NL" (8 points after 200 steps; an offline measurement gave 20-23 after
# 1,000) and "AA below CR on Vaguest for most algorithms" (a narrow majority at this scale), and the speed-up.
PLENCH_CHECKS = {
    "00_datasets": ["The noise rate falls as annotators are added to the union (Fig. 2b)",
                    "PLDigits-Aggregate's flipping matrix is far from uniform (off-diagonal max/min > 2)",
                    "PLDigits-Vaguest is noisy class by class: every diagonal entry is below 1 (Fig. 2d)"],
    "01_selection_theory": [
        "Eq. 8: (CR - c)/(1 - c) recovers the accuracy within 3 standard errors, for every generator and classifier",
        "Theorem 2: AA equals accuracy for the calibrated classifier (within 3 SE)",
        "AA overestimates accuracy when over-confident and underestimates it when under-confident"],
    "02_tabular": [
        "On PLDigits-Aggregate (sets equal to the label set), EXP, MCL-GCE and MCL-MSE collapse to the class-0 share "
        "under every criterion (Table 1: EXP 10.00)",
        "With the fixed formulas they train on PLDigits-Aggregate (> 50 % with CR)",
        "On PLDigits-Vaguest (no such sets) EXP and MCL-GCE train normally: within 10 points of PRODEN with CR",
        "Under USS (Theorem 1) CR selects within 3 points of OA & ES for PRODEN, CC and Forward"],
    # Reported but not asserted: "PRODEN is competitive" (100 steps: the order is start speed and seed noise) and the
    # Fig. 4 time claims (timings on a shared CPU; the holistic one held in every run, FREDIS vs PRODEN flips).
    "03_image": [
        "On PLDigits-Aggregate (sets equal to the label set) with digits_cnn, EXP, MCL-GCE and MCL-MSE collapse to the "
        "class-0 share under every criterion (Table 1: EXP 10.00)",
        "On PLDigits-Vaguest (no such sets) with digits_cnn, EXP, MCL-GCE and MCL-MSE do not collapse: at least 5 points "
        "above the class-0 share with OA & ES",
        "With the official update (compat) PiCO+ and ALIM never leave warm-up: their confidences stay exactly s/|S|",
        "With the fixed update their confidences move away from s/|S|"],
    "04_validation_use": [
        "On PLDigits-Aggregate, for most algorithms, training on the clean validation data (|S| = 1, default "
        "hyperparameters) beats using it to select hyperparameters and checkpoints (OA & ES) (Fig. 1)",
        "On PLDigits-Vaguest, for most algorithms, training on the clean validation data (|S| = 1, default "
        "hyperparameters) beats using it to select hyperparameters and checkpoints (OA & ES) (Fig. 1)"],
}


# LNLFN's faithfulness checks (issue 5). Reported but not asserted: the fall of true accuracy under human
# noise (a frozen encoder cannot show it), FM above the baseline on the minority-label benchmark (holds with noise
# seeds 42-43, not with 0-2), precision at CL's threshold vs loss (r -0.35; an offline measurement gave r^2 0.15), the Fig. 1
# curve above the baseline at every recall <= 0.5 (7/10 levels), the Table 8 direction and the FME+CL set size on the
# VADER-panel analogue of the MTurk study, and better selection (rank) after correction.
LNLFN_CHECKS = {
    "00_data_and_noising": [
        "Every fixed-rate benchmark noises exactly the official noiser's count in each split (per noise type, "
        "round(n x rate x share))",
        "The benchmarks' noise is entirely human-originated (every noisy label is some annotator's label)"],
    "01_noise_realism": [
        "Table 5 (vader): uniform noise is farther from the clean losses than every human-originated noise",
        "Table 5 (vader): crowd-majority noise is the closest to the clean losses",
        "Fig. 4 (vader): median loss of noised items: uniform > dissenting label/worker > crowd majority",
        "Fig. 3 (vader): measurable accuracy falls about one point per point of uniform noise (slope between -1.2 and -0.6)",
        "Fig. 3 (vader): at 15% noise, measurable accuracy is higher under dissenting-label noise than under uniform noise "
        "(the model partly learns human noise)"],
    "02_model_survey": [
        "Fig. 2: across the sweep, log validation loss correlates negatively with AUPR (r < -0.5)",
        "Fig. 7: the pretrained encoder detects errors better than the non-pretrained baseline (AUROC, vader5)",
        "Table 10: the ensemble's F1 at CL's threshold is at least the averaged runs' F1 - 0.02"],
    "03_detection_main": [
        "FME's AUPR is at least FML's - 0.02 on vader5 (TweetNLP-5 analogue)",
        "FME's AUPR is at least FML's - 0.02 on vaderM (TweetNLP-M analogue)",
        "FME's AUPR is at least FML's - 0.02 on vaderH5 (SNLI-5 analogue)",
        "FME's AUPR is above the non-pretrained baseline's on vader5 (TweetNLP-5 analogue)",
        "The CL overlay changes FME's top items little on vaderM: Jaccard >= 0.5 (Table 9: 0.59-0.99)"],
    "04_mturk_reanalysis": [
        "The verdicts read back from the written lnlfm-format files (main, cl_rerun, cleanlab JSON) give the same "
        "Tables 2, 6, 8 and 9 as the panel votes computed in memory",
        "Overlaying CL changes FME's hypothesized items little: Jaccard(FME top-k, FME+CL) >= 0.5 at FME+CL's count "
        "(paper 0.59-0.99; the 0.5 threshold is ours)"],
    "05_end_to_end": [
        "Correcting the top Err% items by FME loss closes at least half of the measurable-vs-true gap (vader5)",
        "Correcting the top Err% items by FME loss closes at least half of the measurable-vs-true gap (rt_u5)"],
}

# NoisywikiHow's faithfulness checks (issue 13). Reported but not asserted: SEAL above the base model
# (did not reproduce on frozen features, in the prototype nor here), every method above the base under symmetric
# noise, a pre-trained encoder above TF-IDF (TinyHow's templated texts suit n-grams), and the long-tailed methods'
# tail-class gains (LDAM does not raise them here).
NOISYWIKIHOW_CHECKS = {
    "00_dataset_and_noise": ["The training set is long-tailed (largest / smallest class >= 5)",
                             "Validation and test sets are balanced (the same number of events per class)",
                             "The three noise sources partition the classes, none of them empty"],
    "01_plm_architectures": [f"{arch}: accuracy does not increase with the noise level (1-point tolerance)"
                             for arch in ("minilm-mlp", "tfidf-mlp", "tfidf-linear", "minilm-bilstm")],
    "02_noise_sources": ["TC-class accuracy is lowest when the noise comes from TC (base model)"],
    "03_lnl_realworld": ["Co-teaching is no better than the base model at 40-60 % real noise (peak Top-1)"],
    "04_real_vs_synthetic": [
        "Co-teaching beats the base model at 40-60 % symmetric noise (last-5-epoch accuracy)",
        "Losses of correct and incorrect samples overlap under real noise (AUROC <= 0.65) and separate under symmetric "
        "noise (AUROC >= 0.85), after the 4th epoch at 40 % (Fig. 3)",
        "Real-noise test curves are flatter: the peak-to-end drop at 60 % is at least 5x larger under symmetric noise "
        "(Fig. 4)"],
}

# Benchmark-N's annotation-level checks (spec of the issue): every tier worse than the one below for both engines
# and every seed, Boundary AP below mask AP and falling by a larger fraction, class flips and deletions leaving
# Boundary AP = mask AP, erosion worse than dilation, opening about clean. Not asserted: "random scale is milder
# than dilation and erosion alone", a trained model's finding (Table 7) that single annotations cannot show.
# Model level (the tiny U-Net, mean of 2 seeds): clean beats high in mask and Boundary AP, Boundary AP dropping by a
# larger fraction; class-agnostic evaluation recovering most of what class noise costs.
BENCHMARK_N_CHECKS = {
    "00_noise_engine": [f"{engine} engine: the tiers increase the noise (mean mask IoU of the noisy instances with "
                        "their clean versions falls from low to mid to high; Sec. 3.3)" for engine in ("paper", "legacy_v0")],
    "01_annotation_quality": [
        *(f"{engine} engine: mask AP and Boundary AP of the noisy annotations fall from low to mid to high, for every "
          "seed (Fig. 11)" for engine in ("paper", "legacy_v0")),
        *(f"{engine} engine: Boundary AP is at most mask AP at every tier and falls by a larger fraction (boundary "
          "fidelity suffers most; Sec. 4.4)" for engine in ("paper", "legacy_v0")),
        "Class flips and deletions leave Boundary AP equal to mask AP (they do not move boundaries)",
        "Erosion hurts more than dilation at every level (Table 7, Sec. 4.4: erosions affect boundary fidelity most)",
        "Opening (erode then dilate) leaves the annotations almost clean (Table 7: opening = clean)"],
    "02_benchmark_files": [
        "Every benchmark file is COCO JSON that pycocotools loads, with as many annotations as its manifest records, "
        "every mask non-empty",
        "The same source, engine, tier, seed and code give the same file again (Sec. 3.3: reproducible stress tests)"],
    "03_train_eval": [
        "Training on the Hard (high) annotations costs mask AP and Boundary AP against training on clean ones "
        "(Tables 3, 8)",
        "Spatial noise hits the boundaries hardest: Boundary AP falls by a larger fraction than mask AP (Sec. 4.4; "
        "the paper's Mask R-CNN shows the opposite in Tables 8 vs 3, -21 % vs -36 % at Hard)"],
    "05_class_noise": [
        "Class-agnostic evaluation gives back much of what 50 % class noise costs: the model keeps a larger share of "
        "its clean mask AP class-agnostically than per class (Tables 10 vs 9 at 50 %: 91.3 % vs 84.4 %)"],
}

FAITHFULNESS_CHECKS = {("ciln", nb): checks for nb, checks in CILN_CHECKS.items()} | \
    {("plench", nb): checks for nb, checks in PLENCH_CHECKS.items()} | \
    {("lnlfn", nb): checks for nb, checks in LNLFN_CHECKS.items()} | \
    {("noisywikihow", nb): checks for nb, checks in NOISYWIKIHOW_CHECKS.items()} | \
    {("benchmark_n", nb): checks for nb, checks in BENCHMARK_N_CHECKS.items()}


@pytest.mark.parametrize("paper, notebook", FAITHFULNESS_CHECKS)
def test_faithfulness_checks_hold(smoke_run, paper, notebook):
    found = claims(f"{paper}/{notebook}.ipynb")
    for statement in FAITHFULNESS_CHECKS[paper, notebook]:
        assert statement in found, f"{paper}/{notebook} no longer checks: {statement}"
        assert found[statement]["holds"], found[statement]


def test_book_builds_with_chapters_scorecard_and_executed_notebooks(smoke_run):
    subprocess.run([sys.executable, "-m", "shared.book", "--profile", "smoke"], cwd=REPO_ROOT, check=True)
    html = BOOK / "_build" / "html"
    assert "intro.html" in (html / "index.html").read_text()  # index.html redirects to the landing page
    index = (html / "intro.html").read_text()
    for paper in PAPERS:
        assert f"papers/{paper}/index.html" in index
    assert "scorecard.html" in index
    page = (html / "papers" / "ciln" / "01_benchmark.html").read_text()
    assert "Paper vs ours" in page and "<img" in page
