"""CILN's notebook pages: one module per notebook (``ciln/pages/<topic>.py``), each a ``Page`` subclass that loads
what its settings name, runs or reads from the cache exactly what they define, and returns the tables, figures,
paper comparison and claims the notebook shows.

    from ciln.pages.downstream import Downstream
    page = Downstream("smoke", settings={"seeds": [0, 1]})
    page.run()
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail
"""
from __future__ import annotations

from shared.pages import NotebookPage


class Page(NotebookPage):
    paper = "ciln"

    def __init__(self, profile: str = "smoke", *, data_dir=None, device="auto", settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir, self.device = data_dir, device


__all__ = ["Page"]
