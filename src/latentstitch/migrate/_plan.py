"""Which documents to re-embed with the new model: a budget (a count or a share of the index) drawn at random, by
k-means coverage of the old vectors (the item nearest each of ``budget`` centroids) or by farthest-point traversal;
a held-out part of it is kept for the certificate (never used to fit)."""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path, write_text
from latentstitch._core.params import check_choice, check_probability, check_seed
from latentstitch.migrate._inputs import check_ids, check_vectors
from latentstitch.migrate._retrieval import check_metric, prepare, search

STRATEGIES = ("random", "kmeans", "farthest")


@dataclass
class MigrationPlan:
    """The ids to re-embed: ``fit_ids`` (to fit the bridge) and ``holdout_ids`` (for the certificate only)."""

    fit_ids: np.ndarray
    holdout_ids: np.ndarray
    strategy: str
    index_size: int
    seed: int

    @property
    def ids(self) -> np.ndarray:
        return np.concatenate([self.fit_ids, self.holdout_ids])

    def roles(self) -> list[str]:
        return ["fit"] * len(self.fit_ids) + ["certify"] * len(self.holdout_ids)

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "index_size": self.index_size,
            "seed": self.seed,
            "fit_ids": self.fit_ids.tolist(),
            "holdout_ids": self.holdout_ids.tolist(),
        }


def save_plan(plan: MigrationPlan, path: str | os.PathLike) -> Path:
    """Write the id list for the embedding job: columns ``id`` and ``role`` ("fit" or "certify"), as CSV or parquet
    (by suffix)."""
    target = Path(os.fspath(path))
    ids, roles = plan.ids, plan.roles()
    if target.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_path(target, option="path") as temporary:
            pq.write_table(pa.table({"id": ids, "role": roles}), temporary)
        return target
    if target.suffix != ".csv":
        raise ValueError(f"path: a plan is written as .csv or .parquet, got {str(target)!r}")
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")  # quotes an id holding a comma, a quote or a line break
    writer.writerow(["id", "role"])
    writer.writerows(zip(ids.tolist(), roles, strict=True))
    return write_text(target, text.getvalue(), option="path")


def load_plan(path: str | os.PathLike, name: str = "path") -> tuple[np.ndarray, np.ndarray]:
    """(fit ids, held-out ids) of a plan file written by ``save_plan`` (ids as written: strings from CSV)."""
    source = Path(os.fspath(path))
    try:
        if source.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(source).to_pydict()
            ids, roles = table["id"], table["role"]
        else:
            with open(source, newline="", encoding="utf-8") as handle:
                rows = [row for row in csv.reader(handle) if row]
            if rows[0] != ["id", "role"]:
                raise ValueError("its header is not 'id,role'")
            if any(len(row) != 2 for row in rows[1:]):
                raise ValueError("a row has other than two fields (id, role)")
            ids, roles = [r[0] for r in rows[1:]], [r[1] for r in rows[1:]]
    except (OSError, KeyError, IndexError, ValueError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(
            f"{name}: {str(source)!r} is not a plan written by save_plan (`migrate plan`) ({error})"
        ) from None
    roles = np.asarray(roles)
    if not set(roles.tolist()) <= {"fit", "certify"}:
        raise ValueError(f"{name}: {str(source)!r} has roles other than fit / certify")
    if not len(roles):
        raise ValueError(f"{name}: {str(source)!r} lists no ids; a plan holds at least 2 (plan the sample again)")
    ids = check_ids(ids, f"{name} ({str(source)!r}'s ids)")
    return ids[roles == "fit"], ids[roles == "certify"]


def budget_count(budget: float, n: int, name: str = "budget") -> int:
    """A budget as a count: a share in (0, 1) of ``n`` items, or a whole count in [2, n]."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a count or a share in (0, 1), got {type(budget).__name__}")
    if not math.isfinite(budget):
        raise ValueError(f"{name}: expected a count or a share in (0, 1), got {budget}")
    count = round(budget * n) if 0 < budget < 1 else int(budget)
    if budget != int(budget) and not 0 < budget < 1:
        raise ValueError(f"{name}: expected a whole count or a share in (0, 1), got {budget}")
    if not 2 <= count <= n:
        raise ValueError(f"{name}: expected between 2 and {n} items (the index size), got {count} from {budget}")
    return count


def choose_items(vectors: np.ndarray, count: int, strategy: str, metric: str, rng: np.random.Generator) -> np.ndarray:
    """Rows of ``vectors`` to re-embed, ``count`` of them, by ``strategy``."""
    n = len(vectors)
    if strategy == "random":
        return rng.choice(n, size=count, replace=False)
    x = prepare(vectors, metric).numpy()
    if strategy == "farthest":
        chosen = [int(rng.integers(n))]
        distance = np.linalg.norm(x - x[chosen[0]], axis=1)
        for _ in range(count - 1):
            chosen.append(int(distance.argmax()))
            distance = np.minimum(distance, np.linalg.norm(x - x[chosen[-1]], axis=1))
        return np.array(chosen)
    from sklearn.cluster import MiniBatchKMeans

    fitted = MiniBatchKMeans(count, random_state=int(rng.integers(2**31)), n_init=1, batch_size=4096).fit(x)
    nearest = search(fitted.cluster_centers_, x, min(n, 8), "l2")
    chosen: list[int] = []
    taken: set[int] = set()
    for row in nearest:  # the nearest item not yet taken (two centroids can share a nearest item)
        pick = next((int(i) for i in row if int(i) not in taken), None)
        if pick is not None:
            taken.add(pick)
            chosen.append(pick)
    rest = np.setdiff1d(np.arange(n), chosen)
    extra = rng.choice(rest, size=count - len(chosen), replace=False) if len(chosen) < count else []
    return np.concatenate([np.array(chosen, dtype=np.int64), np.asarray(extra, dtype=np.int64)])


def plan_sample(
    ids: np.ndarray,
    vectors: np.ndarray,
    budget: float,
    *,
    strategy: str = "kmeans",
    holdout: float = 0.3,
    metric: str = "cosine",
    seed: int = 0,
) -> MigrationPlan:
    """Choose ``budget`` items of the index (ids, old vectors) to re-embed; ``holdout`` of them (drawn at random, so
    they stand for the rest of the corpus) are kept for the certificate."""
    check_seed(seed)
    check_choice(strategy, "strategy", STRATEGIES)
    check_metric(metric)
    holdout = check_probability(holdout, "holdout", high_open=True)
    vectors = check_vectors(vectors, "vectors", metric=metric, min_rows=2)
    ids = check_ids(ids, "ids", count=len(vectors), count_name="vectors")
    count = budget_count(budget, len(ids))
    rng = np.random.default_rng(seed)
    n_holdout = round(holdout * count)
    if count - n_holdout < 2:
        raise ValueError(
            f"holdout: a share of {holdout:g} of the {count} items to re-embed leaves {count - n_holdout} to fit "
            "the bridge on; expected at least 2: lower holdout or raise budget"
        )
    # the held-out part is a random draw of the corpus (it must stand for the untouched rest); the fit part is
    # chosen by the strategy among the remaining items
    held = rng.choice(len(ids), size=n_holdout, replace=False) if n_holdout else np.empty(0, np.int64)
    remaining = np.setdiff1d(np.arange(len(ids)), held)
    picked = remaining[choose_items(vectors[remaining], count - n_holdout, strategy, metric, rng)]
    return MigrationPlan(ids[picked], ids[held], strategy, len(ids), seed)
