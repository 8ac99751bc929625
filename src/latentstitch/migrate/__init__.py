"""Move a vector index to a new embedding model without re-embedding all of it: plan, fit, certify, refit, apply.

- ``plan_sample(ids, old_vectors, budget)``: which documents to re-embed (random, k-means coverage, farthest
  point), with a held-out part for the certificate.
- ``fit_migration(index_ids, old_vectors, sample_ids, sample_new, metric=...)``: a ``Migration`` with a query-side
  bridge (new queries -> old index) and a corpus-side one (old index -> new space), the mode chosen by
  cross-validated MRR@10 over the whole index; ``queries=QuerySample(new, old, relevant)`` adds real queries (the
  mode then chosen on the labelled ones). ``refit_migration``: once certified, refitted on every re-embedded item.
- ``certify_migration(...)``: a ``Certificate`` headed by its ``decision`` (``decide``: keep the old model, migrate,
  re-embed everything, or cannot tell, on labelled queries or the overlap with a full re-embed's answers, with
  intervals), then Recall@1/@10, MRR@10, nDCG@10, top-10 overlap with bootstrap
  intervals, threshold remapping, per-document confidence and the re-embedding curve).
- ``apply_migration(migration, path, store, output)``: stream the old index into a new collection, resumable;
  ``client=`` runs the chunks on a Dask cluster (same bytes on the same kind of CPU), ``device=`` the bridge on a GPU.
- ``Migration.search(new_queries, k, store=, new_store=, depth=, new_vectors=)``: cascade search, the query-side
  bridge recalls candidates from the old store, the new model ranks them, their new vectors written to the new
  collection as they are computed (``cascade_status``: how far it is filled; ``depth_curve``: quality by depth).
- ``stores.open_store(path)``: FAISS, LanceDB, Chroma, Qdrant (local), Milvus Lite and embedding files behind one
  protocol.

The command line: ``latentstitch migrate plan|fit|certify|refit|apply|search|status``.
"""

from latentstitch.migrate._apply import ApplyResult, apply_migration, work_folder
from latentstitch.migrate._cascade import CascadeResult, CascadeStatus, cascade_status, depth_curve
from latentstitch.migrate._certify import certify_migration
from latentstitch.migrate._collection import COLLECTION_KINDS, NewCollection, open_collection
from latentstitch.migrate._confidence import confidence_curve, neighbourhood_agreement
from latentstitch.migrate._decision import CHOICES, KEEP, SMALL_INDEX, Decision, decide
from latentstitch.migrate._fit import MigrationWarning, QuerySample, fit_migration, refit_migration, translation_routes
from latentstitch.migrate._migration import MODES, Migration, metric_words
from latentstitch.migrate._plan import STRATEGIES, MigrationPlan, budget_count, load_plan, plan_sample, save_plan
from latentstitch.migrate._report import Certificate
from latentstitch.migrate._retrieval import METRICS, Interval, bootstrap_mean, per_query, prepare, ranks, search
from latentstitch.migrate.stores import KINDS, StoreError, VectorStore, create_writer, open_store

__all__ = [
    "CHOICES",
    "COLLECTION_KINDS",
    "KEEP",
    "KINDS",
    "METRICS",
    "MODES",
    "SMALL_INDEX",
    "STRATEGIES",
    "ApplyResult",
    "CascadeResult",
    "CascadeStatus",
    "Certificate",
    "Decision",
    "Interval",
    "Migration",
    "MigrationPlan",
    "MigrationWarning",
    "NewCollection",
    "QuerySample",
    "StoreError",
    "VectorStore",
    "apply_migration",
    "bootstrap_mean",
    "budget_count",
    "cascade_status",
    "certify_migration",
    "confidence_curve",
    "create_writer",
    "decide",
    "depth_curve",
    "fit_migration",
    "load_plan",
    "metric_words",
    "neighbourhood_agreement",
    "open_collection",
    "open_store",
    "per_query",
    "plan_sample",
    "prepare",
    "ranks",
    "refit_migration",
    "save_plan",
    "search",
    "translation_routes",
    "work_folder",
]
