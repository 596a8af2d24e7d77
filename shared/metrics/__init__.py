"""Metrics of label-error detection and crowd agreement (LNLFN; reused by other papers).

- ``shared.metrics.detection``  trapezoid AUPR (full and truncated), PR curve points, P/R/F1 at k,
  P,R@Err% and R@2*Err%, Jaccard of top-k sets, Wasserstein distance between loss samples
- ``shared.metrics.agreement``  Fleiss' kappa, and the MTurk verdict rules (Correctable / Non-Agreement /
  Non-Error; a label error is anything but Non-Error)

    from shared.metrics import aupr_trapezoid, pr_at_err, fleiss_kappa
"""
from shared.metrics.agreement import (
    CORRECTABLE, MTURK_CATEGORIES, NON_AGREEMENT, NON_ERROR, category_counts, fleiss_kappa,
    given_guessed_to_label_counts, is_label_error, mturk_categories,
)
from shared.metrics.detection import (
    TIE_MODES, AtK, PRCurve, at_k, aupr_trapezoid, jaccard_index, jaccard_top_k, pr_at_err, pr_curve,
    precision_at_k, ranking, recall_at_2err, recall_at_k, top_k_indices, wasserstein,
)

__all__ = [
    # detection
    "TIE_MODES", "ranking", "top_k_indices", "PRCurve", "pr_curve", "aupr_trapezoid",
    "AtK", "at_k", "precision_at_k", "recall_at_k", "pr_at_err", "recall_at_2err",
    "jaccard_index", "jaccard_top_k", "wasserstein",
    # agreement
    "CORRECTABLE", "NON_AGREEMENT", "NON_ERROR", "MTURK_CATEGORIES", "category_counts", "fleiss_kappa",
    "given_guessed_to_label_counts", "mturk_categories", "is_label_error",
]
