"""The common part of a notebook's page object (``<paper>/pages.py``): its settings, its report and its claims.

    class Page(NotebookPage):
        paper = "noisywikihow"

    class RealNoise(Page):
        notebook = "03_lnl_realworld"

    page = RealNoise("smoke", settings={"seeds": [0, 1]})
    page.settings_table()          # the merged settings of profiles.yaml and the overrides
    page._finish(records)          # claims recorded, comparison.csv / claims.json / report.json written
"""
from __future__ import annotations

import pandas as pd

from shared.plotting import set_style
from shared.profiles import notebook_settings
from shared.report import NotebookReport, claims_frame
from shared.tables import ClaimsTable


class NotebookPage:
    """Settings (``cfg``: common + the notebook's profile entry + ``settings``), whether the reader overrode any
    (``overridden``: the numbers are then labelled reduced), and the ``NotebookReport`` the page writes into."""

    paper = ""
    notebook = ""

    def __init__(self, profile: str = "smoke", *, settings=None, out_dir=None):
        self.cfg = notebook_settings(self.paper, self.notebook, profile, settings)
        self.overridden = bool(settings)
        self.report = NotebookReport(self.paper, self.notebook, out_dir, profile)
        set_style()
        pd.set_option("display.max_colwidth", None)  # a claim's statement, a setting's value: shown whole, not cut

    def settings_table(self) -> pd.DataFrame:
        return self.cfg.to_frame()

    def _finish(self, records: list[dict]) -> pd.DataFrame:
        """Record the claims, write the report files, and return the claims table for display. Calling it again
        (a notebook cell run twice) replaces the claims it recorded before instead of adding them twice."""
        recorded = getattr(self, "_recorded_claims", [])
        self.report.claims[:] = [c for c in self.report.claims if not any(c is r for r in recorded)] + list(records)
        self._recorded_claims = list(records)
        self.report.finish()
        return ClaimsTable(claims_frame(records))  # this page's claims, shown without the index


__all__ = ["NotebookPage"]
