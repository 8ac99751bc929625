"""Which documents to re-embed with the new model: a budget (a count or a share of the index) drawn at random, by
k-means coverage of the old vectors (the item nearest each of ``budget`` centroids), by farthest-point traversal, by
access (the documents a query log reaches, k-means coverage filling the rest) or by uncertainty (two stages: a k-means
seed, then the documents whose neighbourhood a provisional bridge keeps least, FastFill-style); a held-out part of
it is kept for the certificate (never used to fit)."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latentstitch._core.atomic import atomic_path, write_text
from latentstitch._core.params import check_choice, check_positive_int, check_probability, check_seed
from latentstitch.migrate._confidence import neighbourhood_agreement
from latentstitch.migrate._inputs import check_ids, check_vectors, held_within, warn_or_refuse
from latentstitch.migrate._retrieval import check_metric, positions, prepare, search

STRATEGIES = ("random", "kmeans", "farthest", "access", "uncertainty")


@dataclass
class MigrationPlan:
    """The ids to re-embed: ``fit_ids`` (to fit the bridge) and ``holdout_ids`` (for the certificate only)."""

    fit_ids: np.ndarray
    holdout_ids: np.ndarray
    strategy: str
    index_size: int
    seed: int
    #: "" for one-stage strategies; "first" / "second" for the two stages of ``uncertainty``
    stage: str = ""

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
            "stage": self.stage,
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


def access_weights(ids: np.ndarray, vectors: np.ndarray, query_log: object, metric: str, depth: int) -> np.ndarray:
    """Per index row, how much the query log reaches it: with the old model's query vectors (a query asked n times
    given n times), each query adds 1 / rank to each of its ``depth`` top results in the old index; with a mapping
    id -> access count, the count. Ids the index does not hold are dropped with a warning (none known: an error)."""
    weights = np.zeros(len(ids))
    if isinstance(query_log, Mapping):
        if not query_log:
            raise ValueError("query_log: the mapping id -> access count is empty; expected at least one accessed id")
        logged = check_ids(list(query_log), "query_log")
        counts = np.asarray([float(c) for c in query_log.values()])
        if not np.isfinite(counts).all() or (counts < 0).any():
            raise ValueError("query_log: expected access counts that are finite and >= 0")
        known = held_within(logged, ids)
        warn_or_refuse(
            int((~known).sum()),
            len(known),
            f"query_log: none of its {len(known)} ids is in the index (ids such as {logged[0]!r}); give the "
            "index's own ids",
            f"query_log: {int((~known).sum())} of its {len(known)} ids are not in the index; they are left out",
        )
        np.add.at(weights, positions(ids, logged[known], "query_log"), counts[known])
        return weights
    queries = check_vectors(
        query_log, "query_log", metric=metric, width=vectors.shape[1], width_of="(the index's width)", rows="queries"
    )
    found = search(queries, vectors, depth, metric)
    np.add.at(weights, found.ravel(), np.broadcast_to(1.0 / np.arange(1, found.shape[1] + 1), found.shape).ravel())
    return weights


def by_weight(weights: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """The (at most ``count``) rows of highest positive weight, heaviest first, ties in random order."""
    shuffled = rng.permutation(len(weights))
    order = shuffled[np.argsort(-weights[shuffled], kind="stable")]
    return order[: min(count, int((weights > 0).sum()))]


def lowest_agreement(
    vectors: np.ndarray, bridge: object, candidates: np.ndarray, count: int, metric: str, seed: int
) -> np.ndarray:
    """``count`` of the ``candidates`` rows whose neighbourhood the bridge keeps least (``neighbourhood_agreement``
    of the old and the bridged index), the least first, ties in random order."""
    transform = getattr(bridge, "transform_corpus", bridge)
    if not callable(transform):
        raise TypeError(
            f"bridge: expected a Migration (from fit_migration) or a function old vectors -> new vectors, got "
            f"{type(bridge).__name__}"
        )
    bridged = check_vectors(transform(vectors), "bridge", metric=metric, rows="bridged vectors")
    if len(bridged) != len(vectors):
        raise ValueError(f"bridge: expected one bridged vector per index row ({len(vectors)}), got {len(bridged)}")
    agreement = neighbourhood_agreement(vectors, bridged, metric, seed=seed)
    rng = np.random.default_rng(seed)
    shuffled = candidates[rng.permutation(len(candidates))]
    return shuffled[np.argsort(agreement[shuffled], kind="stable")][:count]


def _previous_rows(ids: np.ndarray, previous: object) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the first stage's (fit ids, held-out ids): a MigrationPlan or the pair ``load_plan`` returns."""
    if isinstance(previous, MigrationPlan):
        fit_ids, held_ids = previous.fit_ids, previous.holdout_ids
    elif isinstance(previous, tuple) and len(previous) == 2:
        fit_ids, held_ids = previous
    else:
        raise TypeError(
            "previous: expected the first stage's MigrationPlan (or load_plan's (fit ids, held-out ids)), got "
            f"{type(previous).__name__}"
        )
    fit_ids, held_ids = check_ids(fit_ids, "previous"), check_ids(held_ids, "previous")
    return positions(ids, fit_ids, "previous"), positions(ids, held_ids, "previous")


def plan_sample(
    ids: np.ndarray,
    vectors: np.ndarray,
    budget: float,
    *,
    strategy: str = "kmeans",
    holdout: float = 0.3,
    metric: str = "cosine",
    seed: int = 0,
    query_log: object = None,
    depth: int = 10,
    bridge: object = None,
    previous: object = None,
    first_share: float = 0.5,
) -> MigrationPlan:
    """Choose ``budget`` items of the index (ids, old vectors) to re-embed; ``holdout`` of them (drawn at random, so
    they stand for the rest of the corpus) are kept for the certificate; the others (to fit the bridge) by
    ``strategy``:

    - ``random``; ``kmeans`` (the item nearest each of as many k-means centroids of the old vectors);
      ``farthest`` (farthest-point traversal).
    - ``access``: the documents the users reach first. ``query_log`` is the old model's query vectors (a query asked
      n times given n times; each adds 1 / rank to its ``depth`` top results in the old index) or a mapping id ->
      access count; the most reached documents are taken, and k-means coverage of the rest fills the budget when
      the log reaches fewer.
    - ``uncertainty``, in two stages (FastFill-style partial backfilling by uncertainty). First stage (no
      ``bridge``): the held-out part and a k-means seed of ``first_share`` of the fit part; re-embed those, fit a
      provisional migration on them (``fit_migration``, its held-out ids as for any plan). Second stage: the same
      call with ``bridge=`` that migration (or any function old vectors -> new vectors) and ``previous=`` the first
      plan: the first plan's items, plus the documents whose nearest neighbours agree least between the old index
      and the bridged one (``neighbourhood_agreement``) up to the budget; re-embed those added, then fit the final
      migration on all. The held-out part is the first stage's.
    """
    check_seed(seed)
    check_choice(strategy, "strategy", STRATEGIES)
    check_metric(metric)
    holdout = check_probability(holdout, "holdout", high_open=True)
    vectors = check_vectors(vectors, "vectors", metric=metric, min_rows=2)
    ids = check_ids(ids, "ids", count=len(vectors), count_name="vectors")
    count = budget_count(budget, len(ids))
    if strategy != "access" and query_log is not None:
        raise ValueError(f"query_log: only the access strategy reads a query log (strategy is {strategy!r})")
    if strategy != "uncertainty" and (bridge is not None or previous is not None):
        name = "bridge" if bridge is not None else "previous"
        raise ValueError(f"{name}: only the uncertainty strategy's second stage reads it (strategy is {strategy!r})")
    if strategy == "access" and query_log is None:
        raise ValueError(
            "query_log: the access strategy needs a query log (the old model's query vectors, or a mapping id -> "
            "access count)"
        )
    if (bridge is None) != (previous is None):
        raise ValueError(
            "bridge: the uncertainty strategy's second stage needs both bridge (the provisional migration) and "
            "previous (the first stage's plan)"
        )
    rng = np.random.default_rng(seed)
    if bridge is not None:
        return _second_stage(ids, vectors, count, bridge, previous, metric, seed)
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
    n_fit = count - n_holdout
    if strategy == "uncertainty":
        first_share = check_probability(first_share, "first_share", low_open=True)
        seeds = max(2, round(first_share * n_fit))
        picked = remaining[choose_items(vectors[remaining], seeds, "kmeans", metric, rng)]
        return MigrationPlan(ids[picked], ids[held], strategy, len(ids), seed, stage="first")
    if strategy == "access":
        depth = check_positive_int(depth, "depth")
        weights = access_weights(ids, vectors, query_log, metric, depth)[remaining]
        reached = by_weight(weights, n_fit, rng)
        rest = np.setdiff1d(np.arange(len(remaining)), reached)
        if len(reached) < n_fit:  # the log reaches fewer documents than the budget: k-means coverage of the rest
            filled = rest[choose_items(vectors[remaining[rest]], n_fit - len(reached), "kmeans", metric, rng)]
            reached = np.concatenate([reached, filled])
        picked = remaining[reached]
    else:
        picked = remaining[choose_items(vectors[remaining], n_fit, strategy, metric, rng)]
    return MigrationPlan(ids[picked], ids[held], strategy, len(ids), seed)


def _second_stage(ids, vectors, count, bridge, previous, metric, seed) -> MigrationPlan:
    fit_rows, held_rows = _previous_rows(ids, previous)
    taken = np.concatenate([fit_rows, held_rows])
    if len(np.unique(taken)) != len(taken):
        raise ValueError("previous: an id is both a fit and a held-out id; give the first stage's plan unchanged")
    if count < len(taken):
        raise ValueError(
            f"budget: the first stage's plan already holds {len(taken)} items; expected a budget of at least that "
            f"(the whole budget, both stages), got {count}"
        )
    candidates = np.setdiff1d(np.arange(len(ids)), taken)
    added = lowest_agreement(vectors, bridge, candidates, count - len(taken), metric, seed)
    fit = np.concatenate([fit_rows, added])
    return MigrationPlan(ids[fit], ids[held_rows], "uncertainty", len(ids), seed, stage="second")
