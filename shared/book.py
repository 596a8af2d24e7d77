"""Assemble the book from executed notebooks and build it with Jupyter Book 1.

    python -m shared.book                 # smoke profile: runs/smoke -> book/_build/html
    python -m shared.book --profile full --no-build

Generated (not committed): ``book/_toc.yml``, ``book/scorecard.md``, ``book/cost.md`` (what a full run costs,
``shared.costpage``), ``book/status.md`` (the landing page's
status table) and ``book/papers/<paper>/`` with the
paper's index page (its ``index.md`` plus a table of its items) and the executed notebooks. Pages are plain
MyST markdown and notebooks, so the book stays portable to Jupyter Book 2.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import yaml

from shared.catalog import PaperCatalog, all_catalogs
from shared.costpage import cost_page, full_profile_costs, reproduce_line
from shared.ledger import Ledger
from shared.paths import REPO_ROOT, paper_dir, runs_dir
from shared.preflight import paper_needs
from shared.profiles import check_profile, notebook_settings
from shared.report import claims_frame
from shared.scorecard import STATE_TEXT, item_frame, paper_summary, status_frame

BOOK = REPO_ROOT / "book"
HIDDEN_PARAMETERS = {"out_dir"}


def load_records(profile: str) -> dict:
    """The run ledger's records of the profile (``shared.ledger``; damaged ones are reported and left out)."""
    return Ledger(runs_dir(profile)).records()


def notebook_status(paper: str, notebook: str | None, records: dict, folder: Path) -> str:
    """'missing' (no notebook yet), 'not run', 'ok' or 'failed'."""
    if not notebook or not (folder / notebook).exists():
        return "missing"
    return records.get(f"{paper}/{notebook}", {}).get("status", "not run")


def full_profile_needs(paper: str, stem: str) -> tuple[str, list[str]]:
    """What the full profile of notebook ``stem`` needs: the device its ``params/full.yaml`` asks for, and what
    the paper's ``requirements.py`` says the notebook reads (``shared.preflight``)."""
    path = paper_dir(paper) / "params" / "full.yaml"
    params = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    device = {**params, **(params.get("notebooks") or {}).get(stem, {})}.get("device", "auto")
    needs_of = paper_needs(paper)
    needs = [n.what + (" (optional)" if n.optional else "")
             for n in (needs_of(stem, notebook_settings(paper, stem, "full")) if needs_of else [])]
    return device, list(dict.fromkeys(needs))


def reproduce_note(record: dict, costs=None) -> str:
    """The page's "Reproduce" box (MyST): the command of its smoke run with the time and peak memory it took, the
    parameters it ran with, and the full profile's command and needs."""
    paper, stem = record["paper"], Path(record["notebook"]).stem
    shown = {k: v for k, v in record.get("parameters", {}).items() if k not in HIDDEN_PARAMETERS}
    profile = shown.get("profile", "smoke")
    threads = record.get("threads")
    run = f".venv/bin/python -m shared.run {paper} --only '{stem}'"
    lines = [":::{admonition} Reproduce this page", ":class: tip", "",
             f"**This page** ({profile} profile, parameters "
             + ", ".join(f"`{k}={v!r}`" for k, v in shown.items()) + f"): `{run}"
             + (f" --profile {profile}" if profile != "smoke" else "") + "` took "
             + f"{record.get('wall_s')} s and {record.get('peak_rss_mb')} MB at peak"
             + (f" on {threads} CPU thread{'s' if threads != 1 else ''}" if threads else "") + "."]
    if profile != "full":
        device, needs = full_profile_needs(paper, stem)
        where = {"cuda": "a CUDA GPU", "cpu": "the CPU"}.get(device, "the CPU, or a GPU when there is one")
        lines += ["", f"**Full profile**: `{run} --profile full -f {paper}/params/full.yaml -p data_dir /path/to/data`"
                  f" on {where}; it reads " + (", ".join(needs) if needs else "no data beyond the smoke profile's")
                  + " (`--check-env` lists what is missing, with where to get it). " + reproduce_line(costs, paper, stem)]
    return "\n".join(lines + [":::"])


#: a cell that displays a page's full settings table (``page.settings_table()``, LNLFN 04's ``page.settings()``)
SHOWS_SETTINGS = re.compile(r"\.settings(_table)?\(\)\s*$")


def prepare_notebook(source: Path, target: Path, record: dict, costs=None) -> None:
    """Copy an executed notebook for the book: papermill's injected cell becomes the page's "Reproduce" box
    (``reproduce_note``, which names the parameters); the parameters cell and the full settings table are folded."""
    nb = json.loads(source.read_text())
    cells = []
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            cell = {"cell_type": "markdown", "metadata": {}, "source": reproduce_note(record, costs).splitlines(True)}
        elif "parameters" in tags:
            cell["metadata"]["tags"] = sorted(set(tags) | {"hide-input"})
        elif cell["cell_type"] == "code" and SHOWS_SETTINGS.search("".join(cell["source"])):
            cell["metadata"]["tags"] = sorted(set(tags) | {"hide-output"})  # every setting, one click away
        cells.append(cell)
    nb["cells"] = cells
    target.write_text(json.dumps(nb, indent=1))


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    if isinstance(value, (int, float)):
        return f"{int(value):d}" if float(value).is_integer() else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "*(none)*\n"
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows]) + "\n"


def notebook_results(profile: str, record: dict) -> tuple[pd.DataFrame, list[dict]]:
    out_dir = runs_dir(profile) / record.get("out_dir", "")
    comparison = pd.DataFrame()
    if (out_dir / "comparison.csv").exists() and (out_dir / "comparison.csv").stat().st_size > 1:
        comparison = pd.read_csv(out_dir / "comparison.csv")
    claims = json.loads((out_dir / "claims.json").read_text()) if (out_dir / "claims.json").exists() else []
    return comparison, claims


def paper_index(catalog: PaperCatalog, records: dict) -> str:
    """The paper's own index.md followed by the list of its tables and figures and their status."""
    own = (catalog.folder / "index.md").read_text() if (catalog.folder / "index.md").exists() else f"# {catalog.title}\n"
    title, _, rest = own.partition("\n")
    sources = " · ".join(f"[{k}]({v})" for k, v in catalog.links.items())
    cite = f" {{cite:p}}`{catalog.bib}`" if catalog.bib else ""
    own = f"{title}\n\n*{catalog.citation}*{cite}" + (f" · {sources}" if sources else "") + "\n" + rest
    rows = []
    for item in catalog.items:
        status = notebook_status(catalog.paper, item.notebook, records, catalog.folder)
        link = f"[{Path(item.notebook).stem}]({item.notebook})" if status in ("ok", "failed") else (item.notebook or "—")
        rows.append({"item": item.label, "title": item.title, "notebook": link, "status": status})
    return own.rstrip() + "\n\n## Tables and figures\n\n" + markdown_table(pd.DataFrame(rows))


def _results_of(profile: str, records: dict):
    def results_of(paper: str, notebook: str):
        record = records.get(f"{paper}/{notebook}")
        return notebook_results(profile, record) if record else None
    return results_of


def _percent(value) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:.0%}"


def _number(value) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:.3g}"


def scorecard(catalogs: list[PaperCatalog], records: dict, profile: str) -> str:
    """The closeness scorecard (``shared.scorecard``): an overview row per paper, then per paper one row per item
    (state, numbers compared, share within the item's tolerance, median |diff|, its notebook's claims) and the
    claims themselves."""
    results_of = _results_of(profile, records)

    def run_status(paper: str, notebook: str) -> str:
        return notebook_status(paper, notebook, records, paper_dir(paper))

    overview, sections = [], []
    for catalog in catalogs:
        items = item_frame(catalog, results_of, run_status)
        summary = paper_summary(catalog, items)
        overview.append({
            "paper": f"[{catalog.short}](papers/{catalog.paper}/index.md)",
            "items run": f"{summary['ran']} of {summary['items']}" + (f", {summary['failed']} failed"
                                                                      if summary["failed"] else ""),
            "paper numbers compared": summary["paper numbers compared"],
            "within tolerance": summary["within tolerance"],
            "claims held / not / not run": f"{summary['claims held']} / {summary['not held']} / {summary['not run']}",
        })
        shown = pd.DataFrame({
            "item": [f"**{label}** {title}" for label, title in zip(items["item"], items["title"])],
            "notebook": [(f"[{Path(nb).stem}](papers/{catalog.paper}/{nb})" + (" (failed)" if run == "failed" else "")
                          if run in ("ok", "failed") else f"{Path(nb).stem} ({run})" if nb else "")
                         + (f" ({state})" if state != catalog.state else "")
                         for nb, run, state in zip(items["notebook"], items["run"], items["state"])],
            "compared": [f"{c} of {n}" if n else "—" for c, n in zip(items["compared"], items["paper numbers"])],
            "within tolerance": [f"{_percent(w)} ({t})" if w is not None and not pd.isna(w) else "—"
                                 for w, t in zip(items["within tolerance"], items["tolerance"])],
            "median abs diff": [_number(v) for v in items["median |diff|"]],
            "claims held / not / not run": [f"{h} / {n} / {r}" if run == "ok" else "—" for h, n, r, run in
                                            zip(items["held"], items["not held"], items["not run"], items["run"])],
        })
        body = [f"## {catalog.title}\n", f"*{catalog.citation}* · [chapter](papers/{catalog.paper}/index.md)"
                + "".join(f" · [{k}]({v})" for k, v in catalog.links.items()) + "\n",
                f"State of the items with a notebook: {STATE_TEXT[catalog.state]}; others as marked.\n",
                markdown_table(shown)]
        for nb in dict.fromkeys(items.loc[items["run"] == "ok", "notebook"]):
            _, claims = results_of(catalog.paper, nb)
            if claims:
                frame = claims_frame(claims)
                frame["verdict"] = frame["verdict"].replace({"no": "**no**"})
                body.append(f":::{{dropdown}} Claims checked by {Path(nb).stem}\n{markdown_table(frame)}:::\n")
        sections.append("\n".join(body))
    intro = (
        "---\nhtml_theme.sidebar_secondary.remove: true\n---\n\n"  # the tables get the page's full width
        "# Replication scorecard\n\n"
        f"Profile: **{profile}**. For every table and figure of the five papers: how far it has been run "
        "(*state*: smoke, rehearsal — the full profile's code on stand-in data in the real formats — or full), "
        "how many of the paper's numbers ours were compared with, the share of those within the item's stated "
        "tolerance (in the paper's units, or ± a share of the paper's number), the median absolute difference, "
        "and the paper's claims checked by the item's notebook. "
        + ("In the smoke profile every number comes from offline stand-in data at small scale, so few numbers are "
           "expected within tolerance; the claims are what a smoke run can check. " if profile == "smoke" else "")
        + "Each notebook page shows the comparison itself.\n\n"
    )
    return intro + markdown_table(pd.DataFrame(overview)) + "\n" + "\n".join(sections)


def status_page(catalogs: list[PaperCatalog]) -> str:
    """The landing page's status table (the README's rows, ``shared.scorecard.status_frame``), chapters linked."""
    frame = status_frame(catalogs).drop(columns=["folder"])
    frame["paper"] = [f"[{c.short}](papers/{c.paper}/index.md)" for c in catalogs]
    return markdown_table(frame)


def assemble(profile: str, book: Path = BOOK) -> Path:
    """Write the generated pages into ``book`` (its _config.yml, intro.md and running.md must exist)."""
    records = load_records(profile)
    catalogs = all_catalogs()
    costs = full_profile_costs()
    papers_dir = book / "papers"
    shutil.rmtree(papers_dir, ignore_errors=True)
    chapters = []
    for catalog in catalogs:
        target = papers_dir / catalog.paper
        target.mkdir(parents=True)
        (target / "index.md").write_text(paper_index(catalog, records))
        sections = []
        for path in catalog.notebooks():
            record = records.get(f"{catalog.paper}/{path.name}")
            executed = runs_dir(profile) / record["output_notebook"] if record else None
            if record and executed.exists():
                prepare_notebook(executed, target / path.name, record, costs)
                sections.append({"file": f"papers/{catalog.paper}/{path.stem}"})
        chapter = {"file": f"papers/{catalog.paper}/index"}
        if sections:
            chapter["sections"] = sections
        chapters.append(chapter)
    (book / "scorecard.md").write_text(scorecard(catalogs, records, profile))
    (book / "status.md").write_text(status_page(catalogs))
    (book / "cost.md").write_text(cost_page(costs, catalogs))
    toc = {
        "format": "jb-book",
        "root": "intro",
        "parts": [
            {"caption": "Using this book", "chapters": [{"file": "running"}, {"file": "scorecard"}, {"file": "cost"},
                                                          {"file": "references"}]},
            {"caption": "Papers", "chapters": chapters},
        ],
    }
    (book / "_toc.yml").write_text("# Generated by python -m shared.book; do not edit.\n" + yaml.safe_dump(toc, sort_keys=False))
    return book


#: (tag, attribute) pairs through which a page loads something when it opens (hyperlinks are not loads)
LOADING_ATTRIBUTES = {("script", "src"), ("img", "src"), ("iframe", "src"), ("source", "src"), ("video", "src"),
                      ("audio", "src"), ("embed", "src"), ("link", "href")}


#: what a script imports or fetches by address: ``import ... from "url"``, ``import("url")``, ``fetch("url")``
SCRIPT_LOADS = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\bfetch\s*\(\s*)["'`]([^"'`]+)["'`]""")


class _Loads(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls = []
        self._in_script = False

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:  # an inline script (e.g. an interactive table's module) may import from a CDN
            self.urls += SCRIPT_LOADS.findall(data)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._in_script = tag == "script"
        if tag == "link" and not set(str(attrs.get("rel", "")).lower().split()) & {"stylesheet", "icon", "preload",
                                                                                  "modulepreload", "prefetch"}:
            return
        self.urls += [attrs[a] for t, a in LOADING_ATTRIBUTES if t == tag and attrs.get(a)]
        if tag in ("img", "source") and attrs.get("srcset"):  # "url 2x, url 3x"
            self.urls += [part.split()[0] for part in attrs["srcset"].split(",") if part.strip()]


def external_loads(site: Path) -> dict[str, list[str]]:
    """Per page of the built ``site`` (relative path), the URLs it loads from another host when it opens: scripts,
    stylesheets, icons, images and frames given as ``http(s)://`` or ``//`` addresses, and modules that inline
    scripts import or fetch from one. A book read offline needs none."""
    found = {}
    for page in sorted(Path(site).rglob("*.html")):
        parser = _Loads()
        parser.feed(page.read_text(errors="replace"))
        external = [url for url in parser.urls if url.strip().lower().startswith(("http://", "https://", "//"))]
        if external:
            found[str(page.relative_to(site))] = sorted(set(external))
    return found


def build(book: Path) -> int:
    """``jupyter-book build`` of ``book`` into ``book/_build/html``; non-zero when the build fails or a page loads
    something from the network (``external_loads``: the book must read offline)."""
    exe = Path(sys.executable).parent / "jupyter-book"
    command = [str(exe) if exe.exists() else "jupyter-book", "build", str(book), "--builder", "html"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", file=sys.stderr)
        return result.returncode
    site = book / "_build" / "html"
    online = external_loads(site)
    if online:
        listed = "\n".join(f"  {page}: {', '.join(urls)}" for page, urls in list(online.items())[:20])
        print(f"error: {len(online)} page(s) of {site} load files from the network, so they break offline:\n{listed}",
              file=sys.stderr)
        return 1
    print(f"book built: {site / 'index.html'}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.book", description="Assemble and build the book.")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--no-build", action="store_true", help="assemble the sources only")
    args = parser.parse_args(argv)
    book = assemble(check_profile(args.profile))
    return 0 if args.no_build else build(book)


if __name__ == "__main__":
    sys.exit(main())
