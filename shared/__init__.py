"""Shared utilities for the noisy-label replications.

Modules (import what you need; nothing heavy is imported here):

- ``shared.profiles``  what the smoke and full profiles mean for each notebook
- ``shared.seeding``   global seeding and per-item seeds (SHA-256)
- ``shared.device``    device selection (cpu / cuda)
- ``shared.cache``     artifact cache keyed by parameters + code, atomic writes, checked and safe loading
- ``shared.codedeps``  the project modules a notebook or an artifact imports (the code in cache and run keys)
- ``shared.datasets``  dataset registry: real loaders and offline stand-ins
- ``shared.noise``     classic label-noise models and their estimation
- ``shared.training``  torch training loop with progress bars and AMP
- ``shared.plotting``  figure style; every figure saved as PNG and SVG
- ``shared.report``    paper-vs-ours tables and qualitative claims of a notebook
- ``shared.catalog``   each paper's list of tables and figures (``items.yaml``)
- ``shared.scorecard`` how close each item is to the paper; the README's and the landing page's status rows
- ``shared.pages``     the common part of a notebook's page object
- ``shared.tables``    tables as pages show them: formatted, long ones interactive (offline)
- ``shared.run``       batch runner (``python -m shared.run``)
- ``shared.book``      assembles and builds the book (``python -m shared.book``)
"""

__version__ = "0.1.0"
