"""Charts of a bridge output, drawn from its tables (so any JSON of that shape gets them): each route's
cross-validated score with its spread over the folds and the chosen route marked, and the anchor-budget curve (the
score by number of training anchors). PNG as data URIs: the page stays one file."""

from __future__ import annotations

import io
import re
from typing import Any

from latentstitch._core.figures import pyplot
from latentstitch.report._html import data_uri

CHOSEN, OTHER, FAILED = "#d1242f", "#6e9bd1", "#8c959f"
# line colours of the routes not chosen: no red, which marks the chosen one
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def _column(table: dict[str, Any], *names: str) -> int | None:
    for name in names:
        if name in table["columns"]:
            return table["columns"].index(name)
    return None


def _pair(cell: Any) -> tuple[float, float] | None:
    """A ``[mean, std]`` cell (or a plain number, spread 0); None when missing."""
    if isinstance(cell, list) and len(cell) == 2 and all(isinstance(v, (int, float)) for v in cell):
        return float(cell[0]), float(cell[1])
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return float(cell), 0.0
    return None


def route_rows(table: dict[str, Any]) -> list[tuple[str, bool, dict[str, Any]]]:
    """(route, chosen, {column: cell}) of a route table; the name loses its "(chosen)" / "(failed)" mark."""
    rows = []
    for row in table["rows"]:
        if not isinstance(row, list) or not row:
            continue
        name = str(row[0])
        chosen = name.endswith(" (chosen)")
        bare = re.sub(r" \((chosen|failed)\)$", "", name)
        rows.append((bare, chosen, dict(zip(table["columns"], row, strict=False))))
    return rows


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    pyplot().close(figure)
    return data_uri(buffer.getvalue(), "image/png")


def route_chart(table: dict[str, Any], chosen_route: str | None = None) -> str | None:
    """Horizontal bars: each route's held-out score (mean ± std over folds; shuffled pairs' MRR as a mark), one
    panel per score the choice reads (head agreement or MRR; R^2 of the translation routes)."""
    rows = route_rows(table)
    primary = "head agreement" if _column(table, "head agreement") is not None else "MRR"
    panels = [p for p in (primary, "R^2") if any(_pair(cells.get(p)) for _, _, cells in rows)]
    if not rows or not panels:
        return None
    plt = pyplot()
    names = [name for name, _, _ in rows]
    chosen = [flag or name == chosen_route for name, flag, _ in rows]
    height = 1.3 + 0.38 * len(rows)
    figure, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.6, height), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for y, (_, _, cells) in enumerate(rows):
            value = _pair(cells.get(panel))
            if value is None:
                ax.text(0.01, y, "n/a" if panel == "R^2" else "failed", va="center", fontsize=8, color=FAILED)
                continue
            color = CHOSEN if chosen[y] else OTHER
            ax.barh(y, value[0], xerr=value[1], color=color, height=0.62, capsize=3, ecolor="#24292f")
            ax.text(value[0] + value[1] + 0.01, y, f"{value[0]:.3f}", va="center", fontsize=8)
            shuffled = _pair(cells.get("MRR shuffled pairs")) if panel == "MRR" else None
            if shuffled is not None:
                ax.plot([shuffled[0]] * 2, [y - 0.36, y + 0.36], color="#24292f", lw=1.6)
        ax.set_yticks(range(len(rows)), [f"{n}  ★ chosen" if c else n for n, c in zip(names, chosen, strict=True)])
        for label, flag in zip(ax.get_yticklabels(), chosen, strict=True):
            label.set_fontweight("bold" if flag else "normal")
        ax.invert_yaxis()
        ax.set_xlim(0, 1.12)
        ax.set_xlabel(f"held-out {panel} (mean ± std over folds)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        if panel == "MRR":
            ax.set_title("| = shuffled pairs' MRR (no relation)", fontsize=8, loc="right", color="#57606a")
        if ax is not axes[0][0]:
            ax.tick_params(labelleft=False)
    figure.tight_layout()
    return _png(figure)


def _anchors(cell: Any) -> int | None:
    """The anchor count of a budget row: a number, or "all (320 per fold)"."""
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return int(cell)
    match = re.search(r"(\d+)", str(cell))
    return int(match.group(1)) if match else None


def budget_chart(table: dict[str, Any], chosen_route: str | None) -> str | None:
    """Each route's held-out score by number of training anchors (mean ± std band); the chosen route in bold."""
    routes = table["columns"][1:]
    points: dict[str, list[tuple[int, float, float]]] = {route: [] for route in routes}
    for row in table["rows"]:
        count = _anchors(row[0]) if isinstance(row, list) and row else None
        if count is None:
            continue
        for route, cell in zip(routes, row[1:], strict=False):
            value = _pair(cell)
            if value is not None:
                points[route].append((count, *value))
    if not any(len(p) >= 2 for p in points.values()):
        return None
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7.6, 3.9))
    others = iter(PALETTE * (1 + len(points) // len(PALETTE)))
    for route, curve in points.items():
        if not curve:
            continue
        curve.sort()
        xs, means, stds = zip(*curve, strict=True)
        bold = route == chosen_route
        color = CHOSEN if bold else next(others)
        line = ax.plot(
            xs,
            means,
            marker="o",
            ms=4,
            lw=2.6 if bold else 1.2,
            color=color,
            zorder=3 if bold else 2,
            label=f"{route} (chosen)" if bold else route,
        )[0]
        low = [m - s for m, s in zip(means, stds, strict=True)]
        high = [m + s for m, s in zip(means, stds, strict=True)]
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15 if bold else 0.07, lw=0)
    counts = sorted({x for curve in points.values() for x, _, _ in curve})
    ax.set_xscale("log")
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.minorticks_off()
    measure = "prediction agreement" if "agreement" in table.get("title", "") else "MRR"
    ax.set_xlabel("training anchors per fold (log scale; the last point: all anchors)", fontsize=9)
    ax.set_ylabel(f"held-out {measure}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    return _png(figure)


def bridge_charts(tables: list[dict[str, Any]], chosen_route: str | None) -> list[tuple[str, str]]:
    """(caption, PNG data URI) of the route scores and the anchor-budget curve a bridge output's tables hold."""
    charts = []
    for table in tables:
        first = table["columns"][0] if table["columns"] else ""
        if first == "route":
            uri = route_chart(table, chosen_route)
            caption = "Route scores: held-out score of each route over the cross-validation folds (bar: mean, "
            caption += "whisker: ± std); the chosen route in red"
        elif first == "training anchors":
            uri = budget_chart(table, chosen_route)
            caption = "Anchor budget: held-out score by number of training anchors (band: ± std over folds)"
        else:
            continue
        if uri is not None:
            charts.append((caption, uri))
    return charts
