"""A fitted migration: the chosen mode, the metric, both modes' bridges, and the cross-validated scores. Saved as
one JSON file (``migration.json``, what was chosen and why) with one bridge file per mode beside it
(``NAME.query.safetensors``, ``NAME.corpus.safetensors``; ``Bridge.save``: safetensors, no pickle), each with its
sha256 in the JSON so a changed bridge is refused on load."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latentstitch._core.atomic import atomic_path, inside_folder, write_text
from latentstitch._core.params import check_device
from latentstitch.bridge import Bridge
from latentstitch.migrate._retrieval import check_metric, prepare

MODES = ("query", "corpus")
FORMAT = "latentstitch-migration/1"
#: The query sets of a learning curve: the re-embedded documents as their own queries, and labelled real queries.
CURVE_PARTS = ("documents", "queries")


@dataclass(frozen=True)
class CurveMeasure:
    """One measure of a learning curve: ``part`` (one of ``CURVE_PARTS``) and ``name`` (``per_query``'s, e.g.
    ``"recall@10"``); stored in a migration file under ``key``, ``"documents:recall@10"``."""

    part: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.part}:{self.name}"

    @property
    def label(self) -> str:
        """As a table's column names it: ``"documents: recall@10"``."""
        return f"{self.part}: {self.name}"

    @classmethod
    def parse(cls, key: object, name: str = "learning") -> CurveMeasure:
        """The measure of a stored ``key``; a ``ValueError`` naming ``name`` when it is not ``PART:MEASURE``."""
        part, sep, measure = key.partition(":") if isinstance(key, str) else ("", "", "")
        if not sep or part not in CURVE_PARTS or not measure or ":" in measure:
            raise ValueError(
                f"{name}: the learning curve's key {key!r} is not PART:MEASURE with PART one of "
                f"{', '.join(CURVE_PARTS)}"
            )
        return cls(part, measure)


#: A learning curve's lists that are not measures: its axes (the share of the training folds, the pairs fitted on)
#: and the pairs the whole sample holds.
CURVE_AXES = ("share", "pairs", "sample_pairs")


def curve_measures(curve: dict[str, Any], name: str = "learning") -> list[CurveMeasure]:
    """The measures a learning curve holds, in its order: its keys other than ``CURVE_AXES``, each parsed (a
    ``ValueError`` naming ``name`` for a key that is not ``PART:MEASURE``)."""
    return [CurveMeasure.parse(key, name) for key in curve if key not in CURVE_AXES]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Migration:
    """``mode``: "query" (bridge new queries into the old space; the index is untouched) or "corpus" (bridge the
    old index into the new space). ``metric``: the index's; with "cosine" the bridges read and write unit vectors,
    with "ip" and "l2" raw vectors. ``cv_mrr``: per mode, the held-out MRR@10 of each fold. ``learning``: per mode,
    the learning curve of the same cross-validation (the held-out re-embedded documents' and, when labelled, the
    queries' retrieval measures when each fold's bridge is fitted on a quarter, a half and all of its training
    pairs; ``learning_gain`` reads it, ``learning_words`` says it in a sentence; each measure's key is a
    ``CurveMeasure``'s ``key``, e.g. ``"documents:recall@10"``)."""

    mode: str
    metric: str
    bridges: dict[str, Bridge]
    cv_mrr: dict[str, list[float]]
    n_sample: int
    n_queries: int
    old_dimension: int
    new_dimension: int
    notes: list[str] = field(default_factory=list)
    learning: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The re-embedded ids held out of the fit (as text), for ``certify_migration`` to check that it measures only
    #: them; None for a migration file written before they were kept.
    holdout_ids: list[str] | None = None
    #: The index the migration was fitted on: its ``count`` of vectors, ``sha256`` (``VectorStore.fingerprint``) and
    #: ``kind`` (``record_index``); ``apply`` and ``search`` refuse another index. None when not recorded.
    index: dict[str, Any] | None = None
    #: Set by ``refit_migration``: the bridges were refitted after certification on every re-embedded item
    #: (``n_sample``) and ``n_queries`` labelled queries; ``certified_n_sample``: the items the certified bridge was
    #: fitted on (its certificate's figures were measured on that bridge, before the refit). None when not refitted.
    refitted: dict[str, int] | None = None

    def learning_gain(self, mode: str | None = None) -> tuple[CurveMeasure, float] | None:
        """The learning curve's measure and its gain over the last doubling of the pairs (per doubling), or None
        without a curve. The measure: the labelled queries' Recall@10 when the fit had them, else the re-embedded
        documents' Recall@1 (a document finds itself among the top 10 almost always once bridged, so its Recall@10
        stops moving while real queries still gain; its Recall@1 keeps moving). Either is an upper bound on what
        twice the sample gives: on ``benchmarks migration``'s kjv runs (results/migration) twice the sample then
        gained 1-5x less than the curve's last doubling."""
        curve = self.learning.get(mode or self.mode)
        if not curve or len(curve.get("pairs", [])) < 2:
            return None
        labelled = CurveMeasure("queries", "recall@10")
        measure = labelled if labelled.key in curve else CurveMeasure("documents", "recall@1")
        if measure.key not in curve:
            return None
        values, pairs = curve[measure.key], curve["pairs"]
        return measure, (values[-1] - values[-2]) / float(np.log2(pairs[-1] / pairs[-2]))

    def learning_words(self, mode: str | None = None) -> str | None:
        """Whether re-embedding more still pays, from the learning curve of ``mode`` (default: the chosen one)."""
        gained = self.learning_gain(mode)
        if gained is None:
            return None
        measure, gain = gained
        curve = self.learning[mode or self.mode]
        part, name = measure.part, measure.name
        points = " / ".join(f"{v:.3f}" for v in curve[measure.key])
        pairs = " / ".join(f"{p:,.0f}" for p in curve["pairs"])
        what = "labelled queries" if part == "queries" else "re-embedded documents as queries"
        verdict = (
            "re-embedding more still pays; twice the sample gives less than that (the curve flattens: 1-5x less on "
            "our kjv benchmark)"
            if gain >= 0.01
            else "re-embedding more gains little: the bridge is near what the two models allow from pairs"
        )
        hint = "" if part == "queries" else "; labelled queries (queries_relevant=) give the curve in their units"
        return (
            f"learning curve ({mode or self.mode}-side, held-out {what}): {name.replace('recall', 'Recall')} "
            f"{points} with {pairs} fit pairs; the last doubling gained {gain:+.3f}: {verdict}{hint}"
        )

    def _run(self, mode: str, vectors: Any, device: str | None) -> Any:
        if mode not in self.bridges:
            raise ValueError(f"mode: this migration has no {mode}-side bridge (it has {', '.join(self.bridges)})")
        tensor = prepare(vectors, self.metric)
        target = check_device(device, "device")
        if target is not None:
            tensor = tensor.to(target)
        out = torch.as_tensor(self.bridges[mode].transform(tensor)).to(torch.float32)
        if self.metric == "cosine":
            out = torch.nn.functional.normalize(out, dim=1)
        return out

    def transform_queries(self, new_queries: Any, device: str | None = None) -> np.ndarray:
        """Query-side: new-model query vectors (n, p) -> old-space vectors (n, q), float32."""
        self._check_width(new_queries, self.new_dimension, "new_queries")
        return self._run("query", new_queries, device).cpu().numpy()

    def transform_corpus(self, old_vectors: Any, device: str | None = None) -> np.ndarray:
        """Corpus-side: old index vectors (n, q) -> new-space vectors (n, p), float32."""
        self._check_width(old_vectors, self.old_dimension, "old_vectors")
        return self._run("corpus", old_vectors, device).cpu().numpy()

    @staticmethod
    def _check_width(vectors: Any, width: int, name: str) -> None:
        shape = tuple(getattr(vectors, "shape", ()))
        if len(shape) != 2 or shape[1] != width:
            raise ValueError(f"{name}: expected (rows, {width}) vectors, got shape {shape}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "metric": self.metric,
            "metric_assumed": metric_words(self.metric),
            "cv_mrr": self.cv_mrr,
            "cv_mrr_mean": {m: float(np.mean(v)) for m, v in self.cv_mrr.items()},
            "routes": {m: b.route_ for m, b in self.bridges.items()},
            "n_sample": self.n_sample,
            "n_queries": self.n_queries,
            "old_dimension": self.old_dimension,
            "new_dimension": self.new_dimension,
            "notes": self.notes,
            "learning": self.learning,
            **({} if self.holdout_ids is None else {"holdout_ids": self.holdout_ids}),
            **({} if self.index is None else {"index": self.index}),
            **({} if self.refitted is None else {"refitted": self.refitted}),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``path`` (JSON) and one bridge file per mode beside it; returns the JSON path."""
        target = Path(os.fspath(path))
        files = {}
        for mode, bridge in self.bridges.items():
            bridge_path = target.with_name(f"{target.stem}.{mode}.safetensors")
            with atomic_path(bridge_path, option="path") as temporary:
                bridge.save(temporary)
            files[mode] = {"file": bridge_path.name, "sha256": file_sha256(bridge_path)}
        payload = {"format": FORMAT, **self.to_dict(), "bridges": files}
        payload["header_fields"] = _sealed_fields(payload)
        payload["header_sha256"] = _header_sha256(payload, payload["header_fields"])
        write_text(target, json.dumps(payload, indent=2) + "\n", option="path")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike, name: str = "migration") -> Migration:
        source = Path(os.fspath(path))
        try:
            payload = json.loads(source.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{name}: {str(source)!r} is not a migration JSON file ({error})") from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"{name}: {str(source)!r} is not a migration written by `latentstitch migrate fit`")
        try:
            migration = cls(
                mode=payload["mode"],
                metric=check_metric(payload["metric"], name),
                bridges=_load_bridges(source, payload["bridges"], name),
                cv_mrr=payload["cv_mrr"],
                n_sample=int(payload["n_sample"]),
                n_queries=int(payload["n_queries"]),
                old_dimension=int(payload["old_dimension"]),
                new_dimension=int(payload["new_dimension"]),
                notes=list(payload.get("notes", [])),
                learning=_learning(payload.get("learning", {}), name),
                holdout_ids=_holdout(payload.get("holdout_ids"), name),
                index=_index_record(payload.get("index"), name),
                refitted=_refitted(payload.get("refitted"), name),
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{name}: {str(source)!r} lacks the field {error} of a migration file") from None
        except ValueError as error:  # a field's own check (named by ``name``) or a count that is not a number
            message = str(error)
            if str(source) in message:
                raise
            cause = (
                message.removeprefix(f"{name}: ")
                if message.startswith(f"{name}: ")
                else (f"a field holds a value of the wrong type ({message})")
            )
            raise ValueError(f"{name}: {str(source)!r}: {cause}") from None
        where = f"{name}: {str(source)!r}"
        if not _header_intact(payload):
            raise ValueError(
                f"{where}: its mode, metric, dimensions, bridge files or the record of its index were edited since "
                "it was written (the header's sha256 differs); fit the migration again rather than editing it"
            )
        _check_whole(migration, payload, where)
        return migration

    def record_index(self, store: Any) -> Migration:
        """Record the index fitted on (an opened ``VectorStore``): its size and digest, checked by ``check_index``."""
        self.index = {"count": int(store.count), "sha256": store.digest(), "kind": store.kind}
        return self

    def check_index(self, store: Any) -> None:
        """Refuse (``StoreError`` naming the store) an index other than the one the migration was fitted on: another
        size or another digest. A migration that recorded none (written before, or fitted outside ``migrate fit``
        without ``record_index``) checks the width only."""
        from latentstitch.migrate.stores import StoreError

        if store.dimension != self.old_dimension:
            raise store.error(
                f"holds {store.dimension}-dimensional vectors; the migration was fitted on an index of "
                f"{self.old_dimension} (another model's index?)"
            )
        if self.index is None:
            return
        fitted = f"{self.index['count']:,} vectors, sha256 {self.index['sha256'][:12]}"
        if int(store.count) != self.index["count"] or store.digest() != self.index["sha256"]:
            got = f"{store.count:,} vectors, sha256 {store.digest()[:12]}"
            raise StoreError(
                f"{store.option}: {str(store.path)!r} is not the index this migration was fitted on ({got}; fitted on "
                f"{fitted}): give that index, or fit a migration on this one"
            )

    def search(
        self,
        new_queries: Any,
        k: int = 10,
        *,
        store: Any,
        new_store: Any,
        depth: int = 100,
        new_vectors: Any = None,
        device: str | None = None,
        collection_search: bool | str = True,
    ) -> Any:
        """Cascade search (``migrate._cascade``): the query-side bridge recalls ``depth`` candidates per new-model query
        from the old ``store`` (its own search), and the new collection its own ``depth`` (``collection_search``: True
        or "auto", an exact search of a small collection and inverted lists over a large FAISS one; "exact"; "lists";
        False or "off", the old store's alone), their new vectors
        come from ``new_store`` (the new collection: a path, or a ``NewCollection`` from ``open_collection``, which a
        server keeps open across searches) or from ``new_vectors(ids)``, which are then written there, and the new
        model ranks them. Returns a ``CascadeResult`` (``ids``, ``scores`` (n, k), and what was reused and embedded)."""
        from latentstitch.migrate._cascade import cascade_search

        return cascade_search(
            self,
            new_queries,
            k,
            store=store,
            new_store=new_store,
            depth=depth,
            new_vectors=new_vectors,
            device=device,
            collection_search=collection_search,
        )

    def bridge_sha256(self, path: str | os.PathLike) -> dict[str, str]:
        """The sha256 of the migration file and of its bridge files (for apply's manifest)."""
        source = Path(os.fspath(path))
        payload = json.loads(source.read_text())
        hashes = {"migration": file_sha256(source)}
        hashes.update({mode: entry["sha256"] for mode, entry in payload["bridges"].items()})
        return hashes


def metric_words(metric: str) -> str:
    """What the bridge assumes for an index of ``metric``."""
    return {
        "cosine": "cosine: the bridges read and write unit vectors (inputs normalised first)",
        "ip": "inner product: the bridges read and write raw vectors (norms carry meaning and are kept)",
        "l2": "Euclidean distance: the bridges read and write raw vectors",
    }[metric]


def _learning(value: Any, name: str) -> dict[str, dict[str, Any]]:
    """A migration file's learning curves, checked (absent in files written before they were kept: empty)."""
    if not isinstance(value, dict):
        raise ValueError(f"{name}: 'learning' must be an object of curves per mode")
    out = {}
    for mode, curve in value.items():
        if mode not in MODES or not isinstance(curve, dict) or "pairs" not in curve:
            raise ValueError(f"{name}: 'learning' holds an unknown mode {mode!r} or a curve without its pairs")
        lists = {k: v for k, v in curve.items() if k != "sample_pairs"}
        curve_measures(lists, name)
        try:
            out[mode] = {k: [float(x) for x in v] for k, v in lists.items()}
            out[mode]["sample_pairs"] = int(curve.get("sample_pairs", 0))
        except (TypeError, ValueError):
            raise ValueError(f"{name}: the {mode}-side learning curve holds a value that is not a number") from None
        if len({len(v) for k, v in out[mode].items() if k != "sample_pairs"}) != 1:
            raise ValueError(f"{name}: the {mode}-side learning curve's lists differ in length")
        if any(p <= 0 for p in out[mode]["pairs"]):
            raise ValueError(f"{name}: the {mode}-side learning curve counts a non-positive number of pairs")
        if not all(math.isfinite(x) for k, v in out[mode].items() if k != "sample_pairs" for x in v):
            raise ValueError(f"{name}: the {mode}-side learning curve holds a value that is not finite")
    return out


#: The fields that decide what a migration does; their sha256 is kept in the file (files written before it was kept
#: have none and are checked field by field only).
DECIDING = ("format", "mode", "metric", "old_dimension", "new_dimension", "bridges")
#: Fields sealed with them when present: the index fitted on (``apply`` and ``search`` trust it to refuse another
#: index), the held-out items (``certify`` scores them) and the refit's record. The file lists what its sha256 covers
#: (``header_fields``); a file written before these were sealed has no such list and covers ``DECIDING`` only.
SEALED_WHEN_PRESENT = ("index", "holdout_ids", "refitted")


def _sealed_fields(payload: dict[str, Any]) -> list[str]:
    return [*DECIDING, *(k for k in SEALED_WHEN_PRESENT if k in payload)]


def _header_sha256(payload: dict[str, Any], fields: Sequence[str] = DECIDING) -> str:
    return hashlib.sha256(json.dumps({k: payload[k] for k in fields}, sort_keys=True).encode()).hexdigest()


def _header_intact(payload: dict[str, Any]) -> bool:
    """Whether the recorded header sha256 matches the fields it says it covers (``header_fields``; ``DECIDING`` in
    files written before the list was kept), and those are the ones a file of this content must seal."""
    if "header_sha256" not in payload:
        return True
    fields = payload.get("header_fields", list(DECIDING))
    if "header_fields" in payload and fields != _sealed_fields(payload):
        return False  # a sealed field removed, or one added without its seal
    return payload["header_sha256"] == _header_sha256(payload, fields)


def _load_bridges(source: Path, entries: Any, name: str) -> dict[str, Bridge]:
    """Each mode's bridge file, a file inside the migration's folder (no ``..``, absolute path or symlink leading
    out) whose sha256 is the one recorded."""
    if not isinstance(entries, dict) or not entries or not set(entries) <= set(MODES):
        raise ValueError(f"{name}: {str(source)!r}'s 'bridges' must map some of {', '.join(MODES)} to their files")
    bridges = {}
    for mode, entry in entries.items():
        bridge_path = inside_folder(source.parent, entry["file"], manifest=source)
        if not bridge_path.is_file() or file_sha256(bridge_path) != entry["sha256"]:
            raise ValueError(
                f"{name}: the {mode}-side bridge {str(bridge_path)!r} is missing or changed since the "
                "migration was written (sha256 differs)"
            )
        bridges[mode] = Bridge.load(bridge_path)
    return bridges


def _check_whole(migration: Migration, payload: dict[str, Any], where: str) -> None:
    """A loaded migration checked as a whole: the chosen mode has a bridge and the best cross-validated score, each
    bridge reads and writes the header's dimensions in its direction (query-side: new -> old; corpus-side: old ->
    new) with the route the header names, and the scores are the ones the header summarises."""
    if migration.mode not in migration.bridges:
        raise ValueError(f"{where}: its mode {migration.mode!r} has no bridge (it has {', '.join(migration.bridges)})")
    if set(migration.cv_mrr) != set(migration.bridges):
        raise ValueError(f"{where}: its cv_mrr scores modes other than its bridges' ({', '.join(migration.bridges)})")
    means = {m: float(np.mean(v)) for m, v in migration.cv_mrr.items()}
    if any(not math.isclose(means[m], float(v)) for m, v in payload.get("cv_mrr_mean", means).items() if m in means):
        raise ValueError(f"{where}: its cv_mrr_mean is not the mean of its cv_mrr")
    best = max((m for m in MODES if m in means), key=means.__getitem__)
    if means[migration.mode] < means[best]:
        raise ValueError(
            f"{where}: its mode {migration.mode!r} is not the one its cross-validation chose ({best!r}: MRR@10 "
            f"{means[best]:.4f} against {means[migration.mode]:.4f})"
        )
    widths = {"query": (migration.new_dimension, migration.old_dimension)}
    widths["corpus"] = widths["query"][::-1]
    routes = payload.get("routes", {})
    for mode, bridge in migration.bridges.items():
        got = (bridge.n_features_source_, bridge.n_features_target_)
        if got != widths[mode]:
            raise ValueError(
                f"{where}: its {mode}-side bridge maps {got[0]} to {got[1]} features; the header's dimensions "
                f"(old {migration.old_dimension}, new {migration.new_dimension}) want {widths[mode][0]} to "
                f"{widths[mode][1]} (bridge files swapped, or from another migration?)"
            )
        if mode in routes and routes[mode] != bridge.route_:
            raise ValueError(
                f"{where}: its {mode}-side bridge is a {bridge.route_!r} bridge; the header names {routes[mode]!r} "
                "(bridge files swapped, or from another migration?)"
            )


def _index_record(value: Any, name: str) -> dict[str, Any] | None:
    """A migration file's record of its index (absent in files written before it was kept: None)."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("count"), int)
        or not isinstance(value.get("sha256"), str)
        or len(value["sha256"]) != 64
    ):
        raise ValueError(f"{name}: 'index' must record the fitted index's count (an integer) and sha256")
    return {"count": value["count"], "sha256": value["sha256"], "kind": str(value.get("kind", ""))}


REFITTED = ("n_sample", "n_queries", "certified_n_sample")


def _refitted(value: Any, name: str) -> dict[str, int] | None:
    """A migration file's record of its refit (absent when not refitted: None)."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or set(value) != set(REFITTED)
        or not all(isinstance(value[k], int) and not isinstance(value[k], bool) and value[k] >= 0 for k in REFITTED)
    ):
        raise ValueError(f"{name}: 'refitted' must record {', '.join(REFITTED)} as counts")
    return {k: value[k] for k in REFITTED}


def _holdout(value: Any, name: str) -> list[str] | None:
    """A migration file's held-out ids (absent in files written before they were kept: None)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}: 'holdout_ids' must be a list of ids as text")
    return value
