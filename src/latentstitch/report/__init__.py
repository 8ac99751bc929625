"""One self-contained HTML page over result files: reproductions' ``results.json`` and the JSON outputs of
``latentstitch bridge fit`` / ``compare``.

Every JSON file found under a folder is read if it is a result: a reproduction (``"kind": "reproduction"``, or no
``"kind"`` and the reproduction's keys), or a ``"bridge"`` / ``"compare"`` output shaped as
``{"kind", "title", "tables": [{"title", "columns", "rows", "note"}], "notes": [...]}`` (cells: string, number,
null, or ``[mean, std]``). The page needs no network: the figures are embedded as data URIs and the style is inline.

>>> from latentstitch.report import write_report
>>> write_report("latentstitch-results", "report.html")  # doctest: +SKIP
"""

from latentstitch.report._collect import KINDS, ResultFile, find_results, load_result
from latentstitch.report._render import render_html, write_report

__all__ = ["KINDS", "ResultFile", "find_results", "load_result", "render_html", "write_report"]
