"""One self-contained HTML page over result folders: reproductions' ``results.json``, the JSON outputs of
``latentstitch bridge fit`` / ``compare`` / ``layers``, and measurement folders reported by their markdown
(``results.md``).

Every folder under the root is read. A JSON file is a result if it is a reproduction (``"kind": "reproduction"``,
or no ``"kind"`` and the reproduction's keys), or a ``"bridge"`` / ``"compare"`` / ``"layers"`` output shaped as
``{"kind", "title", "tables": [{"title", "columns", "rows", "note"}], "notes": [...]}`` (cells: string, number,
null, or ``[mean, std]``). A folder with no such file but markdown or images is a measurement. What cannot be shown
is listed at the end of the page with the reason. The page has a table of contents in a sidebar, draws tables as
tables (the paper's numbers beside ours), charts a bridge's route scores and anchor budget, and needs no network:
images are data URIs, the style is inline, there is no script.

>>> from latentstitch.report import write_report
>>> write_report("latentstitch-results", "report.html")  # doctest: +SKIP
"""

from latentstitch.report._collect import (
    KINDS,
    MEASUREMENT,
    Collection,
    ResultFile,
    Unreadable,
    collect,
    find_results,
    load_result,
)
from latentstitch.report._render import render_collection, render_html, write_report

__all__ = [
    "KINDS",
    "MEASUREMENT",
    "Collection",
    "ResultFile",
    "Unreadable",
    "collect",
    "find_results",
    "load_result",
    "render_collection",
    "render_html",
    "write_report",
]
