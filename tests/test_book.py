"""Book assembly from a manifest: pages, table of contents, scorecard."""
import json
import shutil

import nbformat
import pandas as pd
import yaml

from shared.book import (BOOK, assemble, build, external_loads, markdown_table, notebook_status, prepare_notebook,
                         reproduce_note)
from shared.ledger import Ledger
import shared.tables as tables
from shared.tables import show_table


def test_markdown_table_formats_numbers_and_escapes_pipes():
    table = markdown_table(pd.DataFrame({"a": [22500.0, 0.12345], "b": ["x|y", None]}))
    assert "| 22500 | x\\|y |" in table and "| 0.1235 | — |" in table


def test_prepare_notebook_replaces_injected_parameters(tmp_path):
    cells = [nbformat.v4.new_code_cell('profile = "smoke"'), nbformat.v4.new_code_cell('profile = "full"\nout_dir = "/abs"'),
             nbformat.v4.new_code_cell("page = Page(profile)\npage.settings_table()"),
             nbformat.v4.new_code_cell("page.settings_table().data.shape\npage.table()")]
    cells[0].metadata["tags"] = ["parameters"]
    cells[1].metadata["tags"] = ["injected-parameters"]
    (tmp_path / "in.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook(cells=cells)))
    record = {"paper": "benchmark_n", "notebook": "08_coco_wan.ipynb", "threads": 4, "wall_s": 1.5, "peak_rss_mb": 99,
              "parameters": {"profile": "full", "out_dir": "/abs"}}
    prepare_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb", record)
    out = json.loads((tmp_path / "out.ipynb").read_text())
    assert "hide-input" in out["cells"][0]["metadata"]["tags"]
    assert out["cells"][2]["metadata"]["tags"] == ["hide-output"]  # the settings table is folded
    assert "tags" not in out["cells"][3]["metadata"]  # a cell that shows something else is not
    note = "".join(out["cells"][1]["source"])
    assert out["cells"][1]["cell_type"] == "markdown" and "profile='full'" in note and "/abs" not in note
    assert note.startswith(":::{admonition} Reproduce this page") and note.endswith(":::")
    assert "--only '08_coco_wan' --profile full` took 1.5 s and 99 MB at peak on 4 CPU threads" in note


def test_the_reproduce_box_gives_both_commands_and_what_the_full_profile_reads():
    note = reproduce_note({"paper": "benchmark_n", "notebook": "08_coco_wan.ipynb", "threads": 1, "wall_s": 63.5,
                           "peak_rss_mb": 1447.3, "parameters": {"profile": "smoke", "out_dir": "/x"}})
    assert "`.venv/bin/python -m shared.run benchmark_n --only '08_coco_wan'` took 63.5 s and 1447.3 MB" in note
    full = note.split("**Full profile**: ")[1]
    assert full.startswith("`.venv/bin/python -m shared.run benchmark_n --only '08_coco_wan' --profile full -f "
                           "benchmark_n/params/full.yaml -p data_dir /path/to/data` on a CUDA GPU")
    assert full.endswith("Its full-profile cost has not been planned.\n:::")
    for need in ("coco2017 train annotations and images", "resnet50 ImageNet weights", "SAM checkpoint",
                 "Grounding-DINO"):
        assert need in full
    assert "Reproduce" in reproduce_note({"paper": "ciln", "notebook": "01_benchmark.ipynb", "wall_s": 1,
                                          "parameters": {"profile": "smoke"}})


def test_the_reproduce_box_gives_the_full_profiles_projected_cost():
    from shared.cost import Calibration, Priced
    from shared.costpage import FullProfileCosts

    priced = Priced("benchmark_n/03_train_eval.ipynb", runs=5, charged=4, steps=10_000, flops=3.6e18,
                    seconds=7200.0, estimated_s=7200.0, unpriced=1)
    costs = FullProfileCosts(Calibration("nvidia-h100", {"bf16": 1000.0}), {priced.key: priced}, 0.35)
    note = reproduce_note({"paper": "benchmark_n", "notebook": "03_train_eval.ipynb", "wall_s": 2,
                           "parameters": {"profile": "smoke"}}, costs)
    assert ("makes 5 runs, 1 of them made by earlier pages: 10,000 steps, 3.6e18 FLOPs, about **2.0 h on one "
            "nvidia-h100** (estimate); the FLOP bound is 1.0 h; 1 part(s) without a GPU step") in note
    assert "not been planned" in reproduce_note({"paper": "ciln", "notebook": "01_benchmark.ipynb", "wall_s": 1,
                                                 "parameters": {"profile": "smoke"}}, costs)


def test_assemble_writes_toc_scorecard_and_pages(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("NOISY_RUNS_DIR", str(runs))
    out_dir = runs / "smoke" / "ciln" / "01_benchmark"
    out_dir.mkdir(parents=True)
    pd.DataFrame({"item": ["Table I"], "dataset": ["MNIST"], "metric": ["voters"], "paper": [4], "ours": [4],
                  "diff": [0], "source": ["paper"]}).to_csv(out_dir / "comparison.csv", index=False)
    (out_dir / "claims.json").write_text(json.dumps([{"claim": "c", "holds": False, "detail": "d"},
                                                     {"claim": "e", "holds": None, "detail": "not computed"}]))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title")])
    (runs / "smoke" / "ciln" / "01_benchmark.ipynb").write_text(nbformat.writes(nb))
    record = {"status": "ok", "output_notebook": "ciln/01_benchmark.ipynb", "out_dir": "ciln/01_benchmark",
              "parameters": {"profile": "smoke"}, "wall_s": 1, "peak_rss_mb": 1}
    Ledger(runs / "smoke").write("ciln/01_benchmark.ipynb", {**record, "fingerprint": "f"})
    (runs / "smoke" / "manifest.json").write_text("{trunc")  # a damaged summary is not read
    (runs / "smoke" / "records" / "ciln" / "02_tv.json").write_text("[]")  # a damaged record is set aside
    book = tmp_path / "book"
    book.mkdir()
    for name in ("_config.yml", "intro.md", "running.md"):
        shutil.copy(BOOK / name, book / name)
    from shared import book as book_module
    from shared.cost import Calibration, Priced
    from shared.costpage import FullProfileCosts

    priced = Priced("ciln/01_benchmark.ipynb", runs=3, charged=3, steps=100, flops=1e15, seconds=3600.0)
    monkeypatch.setattr(book_module, "full_profile_costs", lambda: FullProfileCosts(  # planning all five takes minutes
        Calibration("nvidia-h100", {"bf16": 989.0}), {priced.key: priced}, 0.35))
    assemble("smoke", book)
    cost = (book / "cost.md").read_text()
    assert cost.startswith("# What a full run costs")
    # ours beside the paper's compute first (the columns a narrow page shows), the counts behind it after
    assert "| [CILN](papers/ciln/index.md) | 1.0 h | 30–65 GPU-hours | 0 min | 0 min | 3 | 100 | 1.0e15 |" in cost
    assert "30–65 GPU-hours" in cost and "5,000–30,000 V100-hours" in cost  # what the papers report, beside ours
    toc = yaml.safe_load((book / "_toc.yml").read_text())
    chapters = toc["parts"][1]["chapters"]
    assert chapters[0] == {"file": "papers/ciln/index", "sections": [{"file": "papers/ciln/01_benchmark"}]}
    assert [c["file"] for c in chapters[1:]] == [f"papers/{p}/index" for p in ("benchmark_n", "lnlfn", "plench", "noisywikihow")]
    scorecard = (book / "scorecard.md").read_text()
    assert scorecard.startswith("---\nhtml_theme.sidebar_secondary.remove: true\n---")  # full width for the tables
    assert "| [CILN](papers/ciln/index.md) | 1 of 10 | 1 of 1 | 100% | 0 / 1 / 1 |" in scorecard
    assert ("| **Table I** Summary of the benchmark instantiations (with Algorithm 1) | [01_benchmark](papers/ciln/"
            "01_benchmark.ipynb) | 1 of 1 | 100% (±5 %) | 0 | 0 / 1 / 1 |") in scorecard
    assert "| **Fig. 1** Corruption-induced label ambiguity under increasing severity | 02_examples (not run) |" in scorecard
    assert "| c | **no** | d |" in scorecard and "| e | not run | not computed |" in scorecard
    status = (book / "status.md").read_text()
    assert "| [LNLFN](papers/lnlfn/index.md) |" in status and "(not: Table 7)" in status
    index = (book / "papers" / "ciln" / "index.md").read_text()
    assert "{cite:p}`islam2026ciln`" in index and "(https://github.com/sh-islam/ciln-bench)" in index
    assert "| Table I |" in index and "[01_benchmark](01_benchmark.ipynb) | ok |" in index
    assert "| Fig. 1 |" in index and "| not run |" in index  # a notebook exists but is not in the manifest
    assert "| missing |" in (book / "papers" / "plench" / "index.md").read_text()
    assert (runs / "smoke" / "records" / "ciln" / "02_tv.json.damaged").exists()


def test_status_of_items():
    from shared.paths import paper_dir

    folder = paper_dir("ciln")
    assert notebook_status("ciln", None, {}, folder) == "missing"
    assert notebook_status("ciln", "99_none.ipynb", {}, folder) == "missing"
    assert notebook_status("ciln", "01_benchmark.ipynb", {}, folder) == "not run"
    assert notebook_status("ciln", "01_benchmark.ipynb", {"ciln/01_benchmark.ipynb": {"status": "failed"}}, folder) == "failed"


def test_the_built_book_renders_math_from_its_own_files_and_loads_nothing_from_the_network(tmp_path, monkeypatch):
    """Math, and an interactive long table (shared.tables), with no network."""
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(BOOK / "_config.yml", book)
    (book / "_toc.yml").write_text("format: jb-book\nroot: index\nchapters:\n- file: page\n")
    (book / "index.md").write_text("# Home\n\nInline $a^2 + b^2$ and a display:\n\n$$\\sum_i x_i$$\n")
    long_table = show_table(pd.DataFrame({"setting": [f"row{i}" for i in range(40)], "acc": range(40)}))
    monkeypatch.setattr(tables, "_bundle_shown", False)
    cells = [nbformat.v4.new_markdown_cell("# A notebook\n\nIts math: $\\hat{y} = f(x)$."),
             nbformat.v4.new_code_cell("1 + 1", outputs=[nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                                                 execution_count=1)]),
             nbformat.v4.new_code_cell("show_table(long)", outputs=[nbformat.v4.new_output(
                 "execute_result", {"text/html": long_table._repr_html_(), "text/plain": "table"}, execution_count=2)])]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                        "language": "python"}})
    (book / "page.ipynb").write_text(nbformat.writes(nb))
    assert build(book) == 0
    site = book / "_build" / "html"
    assert external_loads(site) == {}
    for page in ("index.html", "page.html"):
        html = (site / page).read_text()
        assert 'src="_static/mathjax/tex-chtml.js"' in html, page  # MathJax from the book itself
    assert "_itables_2_9_1" in (site / "page.html").read_text()  # the table's DataTables bundle is in the page
    assert (site / "_static" / "mathjax" / "tex-chtml.js").stat().st_size > 100_000


def test_external_loads_are_scripts_styles_and_images_from_other_hosts_not_links(tmp_path):
    (tmp_path / "a.html").write_text(
        '<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//fonts.example/f.css">'
        '<link rel="canonical" href="https://example.org/a"><a href="https://arxiv.org/abs/1">paper</a>'
        '<img src="_images/f.svg"><script src="_static/local.js"></script>'
        '<img src="_images/a.png" srcset="_images/a2.png 2x, HTTPS://cdn.example/a3.png 3x"><LINK REL="Icon" '
        'href="_static/i.ico">')
    (tmp_path / "b.html").write_text('<a href="https://github.com/x">code</a><script type="module">const a = 1;'
                                     "</script><p>import x from 'https://not.a.script/'</p>")
    (tmp_path / "c.html").write_text("<script type=module>import { f } from 'https://www.unpkg.com/dt.js';"
                                     'const m = await import("//cdn.example/m.js"); fetch("data/local.json")</script>')
    assert external_loads(tmp_path) == {"a.html": ["//fonts.example/f.css", "HTTPS://cdn.example/a3.png",
                                                   "https://cdn.example/x.js"],
                                        "c.html": ["//cdn.example/m.js", "https://www.unpkg.com/dt.js"]}
