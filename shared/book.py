"""Assemble the book from executed notebooks and build it with Jupyter Book 1.

    python -m shared.book                 # smoke profile: runs/smoke -> book/_build/html
    python -m shared.book --profile full --no-build

Generated (not committed): ``book/_toc.yml``, ``book/scorecard.md`` and ``book/papers/<paper>/`` with the
paper's index page (its ``index.md`` plus a table of its items) and the executed notebooks. Pages are plain
MyST markdown and notebooks, so the book stays portable to Jupyter Book 2.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import yaml

from shared.catalog import PaperCatalog, all_catalogs
from shared.ledger import Ledger
from shared.paths import REPO_ROOT, paper_dir, runs_dir
from shared.preflight import paper_needs
from shared.profiles import check_profile, notebook_settings
from shared.report import claims_frame

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


def reproduce_note(record: dict) -> str:
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
                  + " (`--check-env` lists what is missing, with where to get it)."]
    return "\n".join(lines + [":::"])


def prepare_notebook(source: Path, target: Path, record: dict) -> None:
    """Copy an executed notebook for the book: papermill's injected cell becomes the page's "Reproduce" box
    (``reproduce_note``); the parameters cell is folded."""
    nb = json.loads(source.read_text())
    cells = []
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            cell = {"cell_type": "markdown", "metadata": {}, "source": reproduce_note(record).splitlines(True)}
        elif "parameters" in tags:
            cell["metadata"]["tags"] = sorted(set(tags) | {"hide-input"})
        cells.append(cell)
    nb["cells"] = cells
    target.write_text(json.dumps(nb, indent=1))


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    if isinstance(value, (int, float)):
        return f"{int(value):d}" if float(value).is_integer() else f"{value:.4g}"
    return str(value).replace("|", "\\|")


COMPARISON_ORDER = ("item", "metric", "paper", "ours", "diff", "ours_on", "source")


def tidy_comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """Key columns first (after item), then metric, paper, ours, diff, what ours ran on, and the source."""
    frame = frame.drop(columns=[c for c in ("note",) if c in frame.columns])
    keys = [c for c in frame.columns if c not in COMPARISON_ORDER]
    return frame[["item", *keys, *[c for c in COMPARISON_ORDER[1:] if c in frame.columns]]]


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
    rows = []
    for item in catalog.items:
        status = notebook_status(catalog.paper, item.notebook, records, catalog.folder)
        link = f"[{Path(item.notebook).stem}]({item.notebook})" if status in ("ok", "failed") else (item.notebook or "—")
        rows.append({"item": item.label, "title": item.title, "notebook": link, "status": status})
    return own.rstrip() + "\n\n## Tables and figures\n\n" + markdown_table(pd.DataFrame(rows))


def scorecard(catalogs: list[PaperCatalog], records: dict, profile: str) -> str:
    """The replication scorecard: per paper, how many items are replicated, and every comparison."""
    overview, sections = [], []
    for catalog in catalogs:
        statuses = [notebook_status(catalog.paper, i.notebook, records, catalog.folder)
                    for i in catalog.items]
        notebooks = sorted({i.notebook for i in catalog.items if i.notebook and (catalog.folder / i.notebook).exists()})
        n_numbers = n_ours = n_claims = n_hold = n_not_run = 0
        body = [f"## {catalog.title}\n", f"*{catalog.citation}* · [chapter](papers/{catalog.paper}/index.md)\n"]
        for nb in notebooks:
            record = records.get(f"{catalog.paper}/{nb}")
            if not record:
                continue
            comparison, claims = notebook_results(profile, record)
            n_numbers += len(comparison)
            n_ours += int(pd.to_numeric(comparison.get("ours", pd.Series(dtype=float)), errors="coerce").notna().sum())
            n_claims += len(claims)
            n_hold += sum(c["holds"] is True for c in claims)
            n_not_run += sum(c["holds"] is None for c in claims)
            body.append(f"### [{Path(nb).stem}](papers/{catalog.paper}/{nb}) — {record['status']}\n")
            if claims:
                shown = claims_frame(claims)
                shown["verdict"] = shown["verdict"].replace({"no": "**no**"})
                body.append("Claims checked in this run:\n\n" + markdown_table(shown))
            if not comparison.empty:
                shown = tidy_comparison(comparison)
                table = markdown_table(shown)
                if len(shown) > 12:
                    table = f":::{{dropdown}} Paper vs ours: {len(shown)} numbers\n{table}:::\n"
                body.append("Paper vs ours:\n\n" + table)
        overview.append({
            "paper": f"[{catalog.paper}](papers/{catalog.paper}/index.md)",
            "items": len(catalog.items),
            "replicated (ran)": statuses.count("ok"),
            "failed": statuses.count("failed"),
            "missing": statuses.count("missing") + statuses.count("not run"),
            "paper numbers compared": f"{n_ours}/{n_numbers}",
            "claims holding": f"{n_hold}/{n_claims - n_not_run}" + (f" ({n_not_run} not run)" if n_not_run else ""),
        })
        sections.append("\n".join(body))
    intro = (
        "# Replication scorecard\n\n"
        f"Profile: **{profile}**. "
        + ("In the smoke profile every number comes from offline stand-in data at small scale, so values "
           "are not expected to match the paper; the qualitative claims are what a smoke run can check. "
           if profile == "smoke" else "")
        + "An item counts as replicated when its notebook ran; *missing* items have no notebook yet.\n\n"
    )
    return intro + markdown_table(pd.DataFrame(overview)) + "\n" + "\n".join(sections)


def assemble(profile: str, book: Path = BOOK) -> Path:
    """Write the generated pages into ``book`` (its _config.yml, intro.md and running.md must exist)."""
    records = load_records(profile)
    catalogs = all_catalogs()
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
                prepare_notebook(executed, target / path.name, record)
                sections.append({"file": f"papers/{catalog.paper}/{path.stem}"})
        chapter = {"file": f"papers/{catalog.paper}/index"}
        if sections:
            chapter["sections"] = sections
        chapters.append(chapter)
    (book / "scorecard.md").write_text(scorecard(catalogs, records, profile))
    toc = {
        "format": "jb-book",
        "root": "intro",
        "parts": [
            {"caption": "Using this book", "chapters": [{"file": "running"}, {"file": "scorecard"}]},
            {"caption": "Papers", "chapters": chapters},
        ],
    }
    (book / "_toc.yml").write_text("# Generated by python -m shared.book; do not edit.\n" + yaml.safe_dump(toc, sort_keys=False))
    return book


#: (tag, attribute) pairs through which a page loads something when it opens (hyperlinks are not loads)
LOADING_ATTRIBUTES = {("script", "src"), ("img", "src"), ("iframe", "src"), ("source", "src"), ("video", "src"),
                      ("audio", "src"), ("embed", "src"), ("link", "href")}


class _Loads(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and not set(str(attrs.get("rel", "")).lower().split()) & {"stylesheet", "icon", "preload",
                                                                                  "modulepreload", "prefetch"}:
            return
        self.urls += [attrs[a] for t, a in LOADING_ATTRIBUTES if t == tag and attrs.get(a)]
        if tag in ("img", "source") and attrs.get("srcset"):  # "url 2x, url 3x"
            self.urls += [part.split()[0] for part in attrs["srcset"].split(",") if part.strip()]


def external_loads(site: Path) -> dict[str, list[str]]:
    """Per page of the built ``site`` (relative path), the URLs it loads from another host when it opens: scripts,
    stylesheets, icons, images and frames given as ``http(s)://`` or ``//`` addresses. A book read offline needs
    none."""
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
