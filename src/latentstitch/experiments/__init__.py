"""The demo and the papers' experiments, reproduced (``latentstitch reproduce --list``).

One folder per reproduction, named as the command names it (``latentstitch reproduce ae-stitching`` is
``ae_stitching/``). Each has ``__init__.py`` (``HELP``, ``PAPER``, ``Config``, ``FULL``, ``QUICK``, ``run``),
``config.py`` (``Config``: a frozen dataclass of every setting, with the full run ``FULL`` and the quick one ``QUICK``;
``run(quick=...)`` reads every setting from ``QUICK if quick else FULL``, or from its ``config=`` argument),
``patterns.py`` (the paper's patterns, declared once: the claim, the paper's number, our measure and the rule that
decides) and modules for its parts;
Frankenstein has a module per figure of the paper (``frankenstein/fig4_similarity_trace.py`` is Figure 4).

The shared pieces are the underscore modules here: ``_report`` (Report: results.json / results.md; it re-exports
``_tables``: ResultTable, mean_std, and ``_patterns``: Pattern / Rule / Verdict / judge), ``_image_tasks`` (the
image datasets, seeded training), ``_text`` (text datasets, cached sentence embeddings, heads on frozen
embeddings), ``_grid`` (grids of runs, optionally on a Dask cluster), ``_run`` (``Reproduction``: the signature of
every ``run``; ``chosen``: its config, QUICK or FULL); ``tasks`` names the text and image tasks
for code outside the package (benchmarks, scripts). ``registry`` names the reproductions, ``reproduce`` runs them,
``demo`` is the quick demo; their command lines are in ``latentstitch.cli``.
"""
