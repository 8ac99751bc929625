"""The generated grid of the contract suite, third part: ``latentstitch.migrate`` (plan_sample, fit_migration,
certify_migration, apply_migration, Migration.load, open_store / create_writer) and ``latentstitch migrate``.

Each argument of the Python entry points gets the grid's bad values (wrong containers and types, NaN/inf, empty,
one row, 1-D and 3-D, wrong widths, bad ids, out-of-range shares, levels and thresholds) around a tiny clean
corpus; tampered migration files and every store's damaged folders must be refused with an error naming the file;
the CLI commands exit 2 with one line naming the option. Cases whose store engine is slow to import are ``slow``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from contract_cases import Case, cli_outcome

N, OLD, NEW = 60, 6, 5  # a tiny corpus: 60 documents, old width 6, new width 5
_CLEAN = object()  # an argument left as the clean corpus's


@functools.cache
def corpus() -> dict[str, Any]:
    """Old and new vectors of the same documents (the new a noisy nonlinear image of a shared latent), unit rows."""
    rng = np.random.default_rng(0)
    latent = rng.normal(size=(N, 4))

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    old = unit(latent @ rng.normal(size=(4, OLD)) + 0.05 * rng.normal(size=(N, OLD)))
    new = unit(np.tanh(latent @ rng.normal(size=(4, NEW))) + 0.05 * rng.normal(size=(N, NEW)))
    ids = np.arange(N, dtype=np.int64) * 3 + 1
    return {"ids": ids, "old": old, "new": new}


@functools.cache
def _fitted() -> tuple[Any, Any]:
    from latentstitch.migrate import fit_migration, plan_sample

    c = corpus()
    plan = plan_sample(c["ids"], c["old"], 0.5, strategy="random", holdout=0.4, seed=1)
    migration = fit_migration(
        c["ids"], c["old"], plan.ids, _new_of(plan.ids), holdout_ids=plan.holdout_ids, folds=2, inner_folds=2
    )
    return plan, migration


def _new_of(ids: np.ndarray) -> np.ndarray:
    c = corpus()
    where = {int(v): i for i, v in enumerate(c["ids"])}
    return c["new"][[where[int(i)] for i in ids]]


@functools.cache
def _corpus_fitted() -> Any:
    """A migration fitted with the corpus-side mode only (what apply migrates the index with)."""
    from latentstitch.migrate import fit_migration

    c = corpus()
    plan = _fitted()[0]
    return fit_migration(
        c["ids"], c["old"], plan.ids, _new_of(plan.ids), holdout_ids=plan.holdout_ids, folds=2, modes=("corpus",)
    )


def _saved(folder: Path, corpus_side: bool = True) -> tuple[Any, Path]:
    """The corpus-side migration (or the one fitted with both modes), a copy, saved in ``folder``."""
    migration = copy.copy(_corpus_fitted() if corpus_side else _fitted()[1])
    return migration, migration.save(folder / "migration.json")


# --- bad values per argument --------------------------------------------------------------------------------------


def _vectors(kind: str, base: np.ndarray) -> Any:
    """``base`` changed along the grid's axes (containers, dtypes, shapes, NaN/inf)."""
    a = base.astype(np.float64)
    changes: dict[str, Callable[[], Any]] = {
        "list": lambda: a.tolist(),
        "torch": lambda: __import__("torch").tensor(a),
        "float16": lambda: a.astype(np.float16),
        "int64": lambda: np.round(a * 3).astype(np.int64),
        "bool": lambda: a > 0,
        "strings": lambda: a.astype(str),
        "nan": lambda: _put(a, (3, 1), np.nan),
        "inf": lambda: _put(a, (3, 0), np.inf),
        "-inf last": lambda: _put(a, (-1, -1), -np.inf),
        "empty": lambda: a[:0],
        "one row": lambda: a[:1],
        "1-D": lambda: a[:, 0],
        "0-D": lambda: a[0, 0],
        "3-D": lambda: a.reshape(len(a), 1, -1),
        "a column more": lambda: np.concatenate([a, a[:, :1]], axis=1),
        "a row less": lambda: a[:-1],
        "zero row": lambda: _put(a, (2, slice(None)), 0.0),
        "all identical": lambda: np.repeat(a[:1], len(a), axis=0),
        "None": lambda: None,
        "a string": lambda: "vectors.npy",
    }
    return changes[kind]()


def _put(a: np.ndarray, where: tuple, value: float) -> np.ndarray:
    a = a.copy()
    a[where] = value
    return a


# Vector changes a caller may make and must get a correct result for (or a clear refusal); every other is refused.
ACCEPTED_VECTORS = {"list", "torch", "float16"}
# Changes that are refused only where the degenerate data makes the result meaningless (a warning or an error).
DEGENERATE_VECTORS = {"int64", "zero row", "all identical"}
VECTOR_CHANGES = (
    "list",
    "torch",
    "float16",
    "int64",
    "bool",
    "strings",
    "nan",
    "inf",
    "-inf last",
    "empty",
    "one row",
    "1-D",
    "0-D",
    "3-D",
    "a row less",
    "zero row",
    "all identical",
    "None",
    "a string",
)


def _ids(kind: str, base: np.ndarray) -> Any:
    changes: dict[str, Callable[[], Any]] = {
        "list": lambda: base.tolist(),
        "strings": lambda: np.array([f"doc-{i}" for i in base]),
        "one fewer": lambda: base[:-1],
        "one more": lambda: np.append(base, base.max() + 1),
        "a duplicate": lambda: _put(base, (1,), base[0]),
        "a None": lambda: [None, *base.tolist()[1:]],
        "1 and '1'": lambda: [base[0].item(), str(base[0].item()), *base.tolist()[2:]],
        "a NaN": lambda: _put(base.astype(np.float64), (0,), np.nan),
        "2-D": lambda: base.reshape(-1, 1),
        "a string": lambda: "ids.csv",
        "None": lambda: None,
    }
    return changes[kind]()


ACCEPTED_IDS = {"list", "strings"}
ID_CHANGES = ("list", "strings", "one fewer", "one more", "a duplicate", "a None", "1 and '1'", "a NaN", "2-D", "None")


def _plan_check(count: int) -> Callable[[Any], str | None]:
    def check(plan: Any) -> str | None:
        total = len(plan.ids)
        if total != count:
            return f"planned {total} items, expected {count}"
        if len(set(map(str, plan.ids))) != total:
            return "an item planned twice"
        return None

    return check


def _finite_certificate(certificate: Any) -> str | None:
    values = [v for v in _numbers(certificate.to_dict()) if v is not None]
    bad = [v for v in values if not math.isfinite(v)]
    return f"non-finite figures in the certificate: {bad[:3]}" if bad else None


def _numbers(value: Any):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, float):
        yield value


def _migration_check(migration: Any) -> str | None:
    if migration.old_dimension != OLD or migration.new_dimension != NEW:
        return f"dimensions {migration.old_dimension}/{migration.new_dimension}, expected {OLD}/{NEW}"
    return None


def plan_cases() -> list[Case]:
    from latentstitch.migrate import plan_sample

    c = corpus()
    target = "plan_sample"

    def call(ids: Any = _CLEAN, vectors: Any = _CLEAN, budget: Any = 0.5, **options: Any) -> Callable[[], Any]:
        ids = c["ids"] if ids is _CLEAN else ids
        vectors = c["old"] if vectors is _CLEAN else vectors
        return lambda: plan_sample(ids, vectors, budget, **options)

    cases = [Case("migrate", target, "clean", call(), check=_plan_check(30), must_succeed=True)]
    for change in VECTOR_CHANGES:
        vectors = _vectors(change, c["old"])
        valid = change in ACCEPTED_VECTORS | DEGENERATE_VECTORS
        cases.append(
            Case(
                "migrate",
                target,
                f"vectors: {change}",
                lambda v=vectors: plan_sample(c["ids"], v, 0.5),
                names=("vectors", "ids"),
                valid=valid,
                check=_plan_check(30) if valid else None,
            )
        )
    for change in ID_CHANGES:
        cases.append(
            Case(
                "migrate",
                target,
                f"ids: {change}",
                call(ids=_ids(change, c["ids"])),
                names=("ids",),
                valid=change in ACCEPTED_IDS,
                check=_plan_check(30),
            )
        )
    bad_options = {
        "budget": (0, -1, 0.0, 1.5, N + 1, math.nan, math.inf, "half", None, True),
        "holdout": (-0.1, 1.0, math.nan, 0.99, "0.3", None),
        "strategy": ("nope", None, 1),
        "metric": ("nope", "COSINE ", None),
        "seed": (-1, 2.5, "0", None),
    }
    for option, values in bad_options.items():
        for value in values:
            settings = {option: value}
            budget = settings.pop("budget", 0.5)
            cases.append(
                Case(
                    "migrate",
                    target,
                    f"{option}={value!r}",
                    call(budget=budget, **settings),
                    names=(option,),
                    valid=False,
                )
            )
    # tiny and degenerate samples: a budget of 2 items of a 3-item index (nothing left to hold out)
    cases.append(
        Case(
            "migrate",
            target,
            "three items, budget 2, holdout 0",
            lambda: plan_sample(c["ids"][:3], c["old"][:3], 2, holdout=0.0, strategy="farthest"),
            names=("budget", "holdout"),
            check=_plan_check(2),
        )
    )
    return cases


def _sample_arguments(**changes: Any) -> dict[str, Any]:
    """The clean index and re-embedded sample of fit_migration and certify_migration, with ``changes``."""
    c, plan = corpus(), _fitted()[0]
    return {
        "index_ids": c["ids"],
        "index_vectors": c["old"],
        "sample_ids": plan.ids,
        "sample_new": _new_of(plan.ids),
        "holdout_ids": plan.holdout_ids,
        **changes,
    }


def _vector_cases(target: str, call: Callable[..., Any], changes: tuple[str, ...], accepted, check) -> list[Case]:
    """The grid's vector changes of index_vectors and sample_new (``accepted(argument, change)``: a correct result
    or a clear refusal; every other refused naming the argument or its ids)."""
    clean = _sample_arguments()
    return [
        Case(
            "migrate",
            target,
            f"{argument}: {change}",
            call(**{argument: _vectors(change, clean[argument])}),
            names=(argument, argument.replace("_vectors", "_ids").replace("_new", "_ids")),
            valid=accepted(argument, change),
            check=check,
        )
        for argument in ("index_vectors", "sample_new")
        for change in changes
    ]


def _option_cases(target: str, call: Callable[..., Any], bad: dict[str, tuple]) -> list[Case]:
    """One case per bad value of each option, refused naming the option."""
    return [
        Case("migrate", target, f"{option}={_shown(value)}", call(**{option: value}), names=(option,), valid=False)
        for option, values in bad.items()
        for value in values
    ]


def fit_cases() -> list[Case]:
    from latentstitch.migrate import QuerySample, fit_migration

    c = corpus()
    plan = _fitted()[0]
    sample_ids = plan.ids
    sample_new = _new_of(sample_ids)
    target = "fit_migration"
    quick = {"folds": 2, "inner_folds": 2, "routes": ["procrustes"]}

    def call(**changes: Any) -> Callable[[], Any]:
        arguments = _sample_arguments(**{**quick, **changes})
        return lambda: fit_migration(**arguments)

    cases = [Case("migrate", target, "clean", call(), check=_migration_check, must_succeed=True)]
    cases += _vector_cases(
        target,
        call,
        VECTOR_CHANGES,
        lambda argument, change: (
            change in ACCEPTED_VECTORS | {"zero row"} or (change == "int64" and argument == "index_vectors")
        ),
        _migration_check,
    )
    for argument, base in (("index_ids", c["ids"]), ("sample_ids", sample_ids)):
        for change in ID_CHANGES:
            cases.append(
                Case(
                    "migrate",
                    target,
                    f"{argument}: {change}",
                    call(**{argument: _ids(change, base)}),
                    names=(argument, "index_ids", "sample_ids"),
                    valid=change == "list",
                    check=_migration_check,
                )
            )
    bad_options = {
        "metric": ("nope", None),
        "modes": (["nope"], [], "sideways"),
        "routes": (["nope"], [], "sideways"),
        "folds": (0, 1, 2.5, "3", N + 1),
        "inner_folds": (0, 1.5),
        "seed": (-1, None),
        "choose": ("queries", None),
        "queries": ("queries", 3),
        "holdout_ids": (sample_ids, [10**9]),  # everything held out; an id not in the sample
    }
    cases += _option_cases(target, call, bad_options)
    queries = {
        "wrong new width": lambda: QuerySample(c["new"][:5, :3], c["old"][:5], c["ids"][:5]),
        "wrong old width": lambda: QuerySample(c["new"][:5], c["old"][:5, :3], c["ids"][:5]),
        "relevant ids not in the index": lambda: QuerySample(c["new"][:5], c["old"][:5], np.arange(5) + 10**6),
        "NaN in new": lambda: QuerySample(_put(c["new"][:5], (0, 0), np.nan), c["old"][:5], c["ids"][:5]),
    }
    for label, make in queries.items():
        cases.append(
            Case(
                "migrate",
                target,
                f"queries: {label}",
                lambda make=make: call(queries=make())(),
                names=("queries", "queries_new", "queries_old", "queries_relevant", "new", "old", "relevant"),
                valid=False,
            )
        )
    # tiny and degenerate samples
    cases.append(
        Case(
            "migrate",
            target,
            "a sample of 2, nothing held out",
            call(sample_ids=sample_ids[:2], sample_new=sample_new[:2], holdout_ids=()),
            names=("sample_ids", "sample_new", "folds"),
            check=_migration_check,
        )
    )
    shuffled = sample_new[np.random.default_rng(3).permutation(len(sample_new))]
    cases.append(
        Case(
            "migrate",
            target,
            "sample_new shuffled against its ids",
            call(sample_new=shuffled),
            names=("sample_new",),
            check=_migration_check,
        )
    )
    return cases


def _shown(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) < 40 else text[:37] + "..."


def certify_cases() -> list[Case]:
    from latentstitch.migrate import certify_migration

    plan, migration = _fitted()
    target = "certify_migration"

    def call(**changes: Any) -> Callable[[], Any]:
        arguments = _sample_arguments(**{"migration": migration, **changes})
        return lambda: certify_migration(**arguments)

    cases = [Case("migrate", target, "clean", call(), check=_finite_certificate, must_succeed=True)]
    cases += _vector_cases(
        target,
        call,
        (*VECTOR_CHANGES, "a column more"),
        lambda argument, change: (
            change in ACCEPTED_VECTORS or (change in ("int64", "zero row") and argument == "index_vectors")
        ),
        _finite_certificate,
    )
    bad_options = {
        "migration": (None, "migration.json"),
        "level": (0, 1, 1.5, -0.5, math.nan, "0.95", None),
        "thresholds": ([math.nan], [5.0], [-3.0], "0.5", [None]),
        "threshold_space": ("nope", None),
        "keep": (0, 1.5, math.nan, "0.9", None),
        "small_index": (-1, 2.5, "10", None),
        "seed": (-1, 1.5),
        "holdout_ids": ((), [10**9], None),
    }
    cases += _option_cases(target, call, bad_options)
    cases.append(
        Case(
            "migrate",
            target,
            "holdout_ids the documents it was fitted on",
            call(holdout_ids=plan.fit_ids),
            names=("holdout_ids",),
            valid=False,
        )
    )
    return cases


def refit_cases() -> list[Case]:
    from latentstitch.migrate import refit_migration

    migration = _fitted()[1]
    target = "refit_migration"

    def call(**changes: Any) -> Callable[[], Any]:
        arguments = {"migration": migration, "inner_folds": 2, **_sample_arguments(**changes)}
        arguments.pop("holdout_ids")
        return lambda: refit_migration(**arguments)

    cases = [Case("migrate", target, "clean", call(), check=_migration_check, must_succeed=True)]
    cases += _vector_cases(target, call, VECTOR_CHANGES, lambda a, change: change in ACCEPTED_VECTORS, _migration_check)
    bad = {"migration": (None, "migration.json"), "inner_folds": (1, 2.5, None), "seed": (-1, 1.5), "queries": (3,)}
    return cases + _option_cases(target, call, bad)


def apply_cases(workspace: Any) -> list[Case]:
    from latentstitch.migrate import apply_migration, open_store

    c = corpus()
    target = "apply_migration"

    def call(chunk_rows: Any = 16, query_side: bool = False, narrow: bool = False, **changes: Any) -> Any:
        folder = workspace.folder()
        migration, path = _saved(folder)
        if query_side:
            migration.mode = "query"
        old = c["old"][:, :4] if narrow else c["old"]
        np.save(folder / "old.npy", old)
        store = open_store(folder / "old.npy", metric="cosine")
        arguments = {"output": folder / "new.npy", "chunk_rows": chunk_rows, **changes}
        return apply_migration(migration, path, store, **arguments)

    def check(result: Any) -> str | None:
        written = np.load(result.output) if str(result.output).endswith(".npy") else None
        if written is not None and (written.shape != (N, NEW) or not np.all(np.isfinite(written))):
            return f"wrote {written.shape} vectors, some not finite: expected ({N}, {NEW}) finite"
        if written is not None and np.any(np.all(written == 0, axis=1)):
            return "wrote zero vectors"
        return None

    cases = [Case("migrate", target, "clean", call, check=check, must_succeed=True)]
    for value in (0, -5, 2.5, "16", None, True):
        cases.append(
            Case(
                "migrate",
                target,
                f"chunk_rows={value!r}",
                functools.partial(call, chunk_rows=value),
                names=("chunk_rows",),
                valid=False,
            )
        )
    cases.append(Case("migrate", target, "chunk_rows=1", functools.partial(call, chunk_rows=1), check=check))
    cases.append(
        Case(
            "migrate",
            target,
            "kind='nope'",
            functools.partial(call, kind="nope"),
            names=("kind",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "migrate",
            target,
            "a query-side migration",
            functools.partial(call, query_side=True),
            names=("migration",),
            valid=False,
        )
    )
    cases.append(
        Case(
            "migrate",
            target,
            "a store of another width",
            functools.partial(call, narrow=True),
            names=("store", "migration"),
            valid=False,
        )
    )
    for label, changes in {
        "sample_ids without sample_new": {"sample_ids": c["ids"][:3]},
        "sample_new of the old width": {"sample_ids": c["ids"][:3], "sample_new": c["old"][:3]},
        "sample_new with NaN": {"sample_ids": c["ids"][:3], "sample_new": _put(c["new"][:3], (0, 0), np.nan)},
    }.items():
        cases.append(
            Case(
                "migrate",
                target,
                label,
                functools.partial(call, **changes),
                names=("sample_ids", "sample_new"),
                valid=False,
            )
        )
    cases.append(
        Case(
            "migrate",
            target,
            "a Chroma output named with a space",
            lambda: call(kind="chroma", output=workspace.folder() / "my docs"),
            names=("output",),
            valid=False,
        )
    )
    # re-embedded items the store does not hold: their vectors go nowhere (a MigrationWarning, tests/migrate)
    cases.append(
        Case(
            "migrate",
            target,
            "sample_ids not in the store",
            functools.partial(call, sample_ids=[10**9, 10**9 + 1], sample_new=c["new"][:2]),
            names=("sample_ids",),
            check=check,
        )
    )
    for label, value in (("a string", "corpus"), ("one mode", ["corpus"])):
        cases.append(
            Case(
                "migrate",
                "fit_migration",
                f"modes: {label}",
                lambda value=value: _fit_with(modes=value),
                names=("modes",),
                check=_migration_check,
            )
        )
    return cases


def _fit_with(**options: Any) -> Any:
    from latentstitch.migrate import fit_migration

    c = corpus()
    plan = _fitted()[0]
    return fit_migration(
        c["ids"], c["old"], plan.ids, _new_of(plan.ids), holdout_ids=plan.holdout_ids, folds=2, **options
    )


# --- tampered migration files ---------------------------------------------------------------------------------------


def _edit(change: Callable[[dict], Any]) -> Callable[[Path], Path]:
    def damage(path: Path) -> Path:
        payload = json.loads(path.read_text())
        change(payload)
        path.write_text(json.dumps(payload))
        return path

    return damage


def _swap_bridges(path: Path) -> Path:
    payload = json.loads(path.read_text())
    query, corpus_ = payload["bridges"]["query"], payload["bridges"]["corpus"]
    payload["bridges"]["query"], payload["bridges"]["corpus"] = corpus_, query
    path.write_text(json.dumps(payload))
    return path


def _set(*keys: str, value: Any) -> Callable[[dict], None]:
    def change(payload: dict) -> None:
        node = payload
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return change


def _bridge_file(path: Path, damage: Callable[[Path], Any]) -> Path:
    payload = json.loads(path.read_text())
    damage(path.parent / payload["bridges"]["corpus"]["file"])
    return path


TAMPERING: dict[str, Callable[[Path], Path]] = {
    "empty file": lambda p: (p.write_text(""), p)[1],
    "truncated": lambda p: (p.write_text(p.read_text()[: len(p.read_text()) // 2]), p)[1],
    "garbage bytes": lambda p: (p.write_bytes(b"\xff" * 100), p)[1],
    "a JSON list": lambda p: (p.write_text("[1, 2]"), p)[1],
    "missing": lambda p: (p.unlink(), p)[1],
    "a folder": lambda p: (p.unlink(), p.mkdir(), p)[2],
    "format edited": _edit(_set("format", value="something else")),
    "mode edited": _edit(_set("mode", value="sideways")),
    "metric edited": _edit(_set("metric", value="l2")),
    "old_dimension edited": _edit(_set("old_dimension", value=OLD + 1)),
    "new_dimension a string": _edit(_set("new_dimension", value="five")),
    "n_sample removed": _edit(lambda p: p.pop("n_sample")),
    "bridges not an object": _edit(_set("bridges", value=[1])),
    "bridge path ../outside": _edit(_set("bridges", "corpus", "file", value="../outside.safetensors")),
    "bridge path absolute": _edit(_set("bridges", "corpus", "file", value="/etc/passwd")),
    "bridge sha256 edited": _edit(_set("bridges", "corpus", "sha256", value="0" * 64)),
    "bridges swapped": _swap_bridges,
    "bridge file missing": functools.partial(_bridge_file, damage=Path.unlink),
    "bridge file truncated": functools.partial(
        _bridge_file, damage=lambda b: b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2])
    ),
    "holdout_ids not a list": _edit(_set("holdout_ids", value=7)),
    "learning not an object": _edit(_set("learning", value="steep")),
}


def migration_file_cases(workspace: Any) -> list[Case]:
    from latentstitch.migrate import Migration

    def run(damage: Callable[[Path], Path]) -> Any:
        _, path = _saved(workspace.folder(), corpus_side=False)
        return Migration.load(damage(path))

    cases = [
        Case(
            "migrate",
            "Migration.load",
            "clean",
            functools.partial(run, lambda p: p),
            check=_migration_check,
            must_succeed=True,
        )
    ]
    for label, damage in TAMPERING.items():
        cases.append(
            Case(
                "migrate",
                "Migration.load",
                label,
                functools.partial(run, damage),
                names=(str(workspace.root),),
                valid=False,
            )
        )
    return cases


PLAN_DAMAGE: dict[str, Callable[[Path], Path]] = {
    "empty file": lambda p: (p.write_text(""), p)[1],
    "garbage bytes": lambda p: (p.write_bytes(b"\xff\xfe" * 50), p)[1],
    "header only": lambda p: (p.write_text("id,role\n"), p)[1],
    "no role column": lambda p: (p.write_text("id\n1\n2\n"), p)[1],
    "an unknown role": lambda p: (p.write_text("id,role\n1,fit\n2,later\n"), p)[1],
    "an id twice": lambda p: (p.write_text("id,role\n1,fit\n1,certify\n4,fit\n"), p)[1],
    "missing": lambda p: (p.unlink(), p)[1],
    "a folder": lambda p: (p.unlink(), p.mkdir(), p)[2],
}


def plan_file_cases(workspace: Any) -> list[Case]:
    from latentstitch.migrate import load_plan, save_plan

    def run(damage: Callable[[Path], Path], suffix: str = ".csv") -> Any:
        path = save_plan(_fitted()[0], workspace.folder() / f"plan{suffix}")
        return load_plan(damage(path), name="plan")

    def same(loaded: Any) -> str | None:
        plan = _fitted()[0]
        fit_ids, holdout_ids = (np.asarray(part).astype(str).tolist() for part in loaded)
        if fit_ids != plan.fit_ids.astype(str).tolist() or holdout_ids != plan.holdout_ids.astype(str).tolist():
            return "the plan read back differs from the plan written"
        return None

    cases = [
        Case("migrate", "load_plan", f"clean {suffix}", functools.partial(run, lambda p: p, suffix), check=same)
        for suffix in (".csv", ".parquet")
    ]
    for label, damage in PLAN_DAMAGE.items():
        cases.append(
            Case(
                "migrate",
                "load_plan",
                label,
                functools.partial(run, damage),
                names=(str(workspace.root), "plan"),
                valid=False,
            )
        )
    return cases


# --- damaged stores -------------------------------------------------------------------------------------------------


def _faiss_index(folder: Path) -> Path:
    import faiss

    c = corpus()
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(OLD))
    index.add_with_ids(c["old"], c["ids"])
    path = folder / "old.index"
    faiss.write_index(index, str(path))
    return path


def _qdrant(folder: Path) -> Path:
    from qdrant_client import QdrantClient, models

    c = corpus()
    path = folder / "qdrant"
    client = QdrantClient(path=str(path))
    client.create_collection("docs", vectors_config=models.VectorParams(size=OLD, distance=models.Distance.COSINE))
    client.upsert("docs", points=models.Batch(ids=c["ids"].tolist(), vectors=c["old"].tolist()))
    client.close()
    return path


def _lancedb(folder: Path) -> Path:
    import lancedb

    c = corpus()
    path = folder / "lance"
    lancedb.connect(str(path)).create_table(
        "docs", data=[{"id": int(i), "vector": v.tolist()} for i, v in zip(c["ids"], c["old"], strict=True)]
    )
    return path


def _damage_qdrant_meta(folder: Path) -> Path:
    path = _qdrant(folder)
    (path / "meta.json").write_text('{"collections": {"docs": ')
    return path


def _damage_lance_manifest(folder: Path) -> Path:
    path = _lancedb(folder)
    for manifest in path.rglob("*.manifest"):
        manifest.write_bytes(b"\x00garbage" * 4)
    return path


def _truncated_faiss(folder: Path) -> Path:
    path = _faiss_index(folder)
    path.write_bytes(path.read_bytes()[:100])
    return path


def _parquet_without_vectors(folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "old.parquet"
    pq.write_table(pa.table({"id": corpus()["ids"], "title": [f"t{i}" for i in range(N)]}), path)
    return path


def _npy_folder(folder: Path) -> Path:
    path = folder / "vectors.npy"
    path.mkdir()
    return path


def _read(make: Callable[[Path], Path], workspace: Any, **options: Any) -> Callable[[], Any]:
    def run() -> Any:
        from latentstitch.migrate import open_store

        store = open_store(make(workspace.folder()), **options)
        return store.count

    return run


def _write_chroma_named_with_space(workspace: Any) -> Any:
    from latentstitch.migrate import create_writer

    writer = create_writer("chroma", workspace.folder() / "new", dimension=NEW, metric="cosine", collection="my docs")
    writer.write(np.array(["1", "2"]), corpus()["new"][:2])
    writer.close()
    return writer


STORE_OPTIONS = ("index", "path", "kind", "collection", "id_column")


def store_cases(workspace: Any) -> list[Case]:
    target = "open_store"
    damaged = [
        ("a damaged Qdrant meta.json", _damage_qdrant_meta, {}, True),
        ("a damaged Qdrant meta.json, kind qdrant", _damage_qdrant_meta, {"kind": "qdrant"}, True),
        ("a damaged LanceDB manifest", _damage_lance_manifest, {}, True),
        ("a FAISS file read as qdrant", _faiss_index, {"kind": "qdrant"}, False),
        ("a FAISS file read as lancedb", _faiss_index, {"kind": "lancedb"}, False),
        ("a truncated FAISS file", _truncated_faiss, {}, False),
        ("a truncated FAISS file, kind faiss", _truncated_faiss, {"kind": "faiss"}, False),
        ("a parquet without the vector column", _parquet_without_vectors, {}, False),
        ("a folder named .npy", _npy_folder, {}, False),
        ("a missing file", lambda f: f / "nothing.index", {}, False),
    ]
    cases = [
        Case(
            "migrate",
            target,
            label,
            _read(make, workspace, **options),
            names=(str(workspace.root), *STORE_OPTIONS),
            valid=False,
            slow=slow,
        )
        for label, make, options, slow in damaged
    ]
    for option, value in (("kind", "nope"), ("metric", "nope"), ("collection", "nope"), ("id_column", "nope")):
        cases.append(
            Case(
                "migrate",
                target,
                f"{option}={value!r}",
                _read(_faiss_index, workspace, **{option: value}),
                names=(option, str(workspace.root)),
                valid=option not in ("kind", "metric"),  # a FAISS file has one index: no collection / column
                check=lambda count: None if count == N else f"read {count} vectors, expected {N}",
            )
        )
    cases.append(
        Case(
            "migrate",
            "create_writer",
            "a Chroma collection name with a space",
            functools.partial(_write_chroma_named_with_space, workspace),
            names=("collection",),
            valid=False,
            slow=True,
        )
    )
    return cases


# --- the command line ---------------------------------------------------------------------------------------------


@functools.cache
def _cli_files(workspace: Any) -> dict[str, str]:
    """A FAISS index of the corpus, a plan, the re-embedded sample and a fitted (corpus-side) migration."""
    from latentstitch.migrate import save_plan

    folder = workspace.folder()
    c = corpus()
    plan, _ = _fitted()
    save_plan(plan, folder / "plan.csv")
    sample_ids = plan.ids
    np.savez(folder / "sample.npz", embeddings=_new_of(sample_ids), id=sample_ids)
    np.savez(folder / "sample_wide.npz", embeddings=c["old"][: len(sample_ids)], id=sample_ids)
    np.savez(folder / "sample_noid.npz", embeddings=_new_of(sample_ids))
    _saved(folder)
    both = folder / "both"
    both.mkdir()
    _saved(both, corpus_side=False)
    tampered = folder / "tampered"
    tampered.mkdir()
    _, path = _saved(tampered)
    _edit(_set("old_dimension", value=OLD + 1))(path)
    (folder / "empty.csv").write_text("")
    return {
        "index": str(_faiss_index(folder)),
        "plan": str(folder / "plan.csv"),
        "sample": str(folder / "sample.npz"),
        "wide": str(folder / "sample_wide.npz"),
        "noid": str(folder / "sample_noid.npz"),
        "migration": str(folder / "migration.json"),
        "both": str(both / "migration.json"),
        "tampered": str(path),
        "emptycsv": str(folder / "empty.csv"),
        "missing": str(folder / "missing.index"),
        "out": str(workspace.folder()),
        "truncated": str(_truncated_faiss(workspace.folder())),
    }


def _certify(migration: str, *extra: str, sample: str = "{sample}") -> list[str]:
    return ["certify", migration, "{index}", sample, "--plan", "{plan}", "-o", "{out}/c.json", *extra]


# (argv after `migrate`, the option or file the one-line error must name)
CLI_MIGRATE: list[tuple[list[str], str]] = [
    (["plan", "{index}", "--budget", "nan", "-o", "{out}/p.csv"], "--budget"),
    (["plan", "{index}", "--budget", "-3", "-o", "{out}/p.csv"], "--budget"),
    (["plan", "{index}", "--budget", "0.5", "--holdout", "0.99", "-o", "{out}/p.csv"], "--holdout"),
    (["plan", "{index}", "--budget", "0.5", "--strategy", "nope", "-o", "{out}/p.csv"], "--strategy"),
    (["plan", "{index}", "--budget", "0.5", "--seed", "-1", "-o", "{out}/p.csv"], "--seed"),
    (["plan", "{index}", "--budget", "0.5", "--kind", "qdrant", "-o", "{out}/p.csv"], "INDEX"),
    (["plan", "{truncated}", "--budget", "0.5", "-o", "{out}/p.csv"], "INDEX"),
    (["plan", "{index}", "--budget", "0.5", "-o", "{out}/p.txt"], "--output"),
    (["plan", "{index}", "--budget", "0.5", "-o", "{index}"], "--output"),
    (["fit", "{index}", "{sample}", "--plan", "{plan}", "--folds", "0", "-o", "{out}/m.json"], "--folds"),
    (["fit", "{index}", "{sample}", "--plan", "{plan}", "--folds", "x", "-o", "{out}/m.json"], "--folds"),
    (["fit", "{index}", "{noid}", "--plan", "{plan}", "-o", "{out}/m.json"], "SAMPLE"),
    (["fit", "{index}", "{sample}", "--sample-id-column", "nope", "-o", "{out}/m.json"], "SAMPLE"),
    (["fit", "{index}", "{sample}", "--plan", "{missing}", "-o", "{out}/m.json"], "--plan"),
    (["fit", "{index}", "{sample}", "--plan", "{emptycsv}", "-o", "{out}/m.json"], "--plan"),
    (["fit", "{index}", "{sample}", "--plan", "{index}", "-o", "{out}/m.json"], "--plan"),
    (["fit", "{index}", "{sample}", "--plan", "{plan}", "-o", "{index}"], "--output"),
    (_certify("{migration}", "--threshold", "-3"), "--threshold"),
    (_certify("{migration}", "--threshold", "nan"), "--threshold"),
    (_certify("{both}", "--threshold", "5"), "--threshold"),
    (_certify("{both}", sample="{wide}"), "SAMPLE"),
    (_certify("{tampered}"), "MIGRATION"),
    (_certify("{missing}"), "MIGRATION"),
    (_certify("{index}"), "MIGRATION"),
    (["refit", "{tampered}", "{index}", "{sample}", "-o", "{out}/f.json"], "MIGRATION"),
    (["refit", "{missing}", "{index}", "{sample}", "-o", "{out}/f.json"], "MIGRATION"),
    (["refit", "{migration}", "{truncated}", "{sample}", "-o", "{out}/f.json"], "INDEX"),
    (["refit", "{migration}", "{index}", "{wide}", "-o", "{out}/f.json"], "SAMPLE"),
    (["refit", "{migration}", "{index}", "{noid}", "-o", "{out}/f.json"], "SAMPLE"),
    (["refit", "{migration}", "{index}", "{sample}", "--seed", "-1", "-o", "{out}/f.json"], "--seed"),
    (
        ["refit", "{migration}", "{index}", "{sample}", "--queries-new", "{sample}", "-o", "{out}/f.json"],
        "--queries-old",
    ),
    (["refit", "{migration}", "{index}", "{sample}", "-o", "{migration}"], "--output"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--chunk-rows", "0"], "--chunk-rows"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--chunk-rows", "2.5"], "--chunk-rows"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--chunk-rows", "-5"], "--chunk-rows"),
    (["apply", "{tampered}", "{index}", "-o", "{out}/n.index"], "MIGRATION"),
    (["apply", "{migration}", "{truncated}", "-o", "{out}/n.index"], "INDEX"),
    (["apply", "{migration}", "{index}", "-o", "{index}"], "--output"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--sample", "{wide}"], "--sample"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--sample", "{missing}"], "--sample"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--output-kind", "nope"], "--output-kind"),
    (["apply", "{migration}", "{index}", "-o", "{out}/n.index", "--device", "nope"], "--device"),
    (["apply", "{migration}", "{index}", "-o", "{out}/my docs", "--output-kind", "chroma"], "--output"),
]


def cli_cases(workspace: Any) -> list[Case]:
    cases = []
    for number, (argv, option) in enumerate(CLI_MIGRATE):

        def run(argv: list[str] = argv, option: str = option, number: int = number) -> Any:
            files = _cli_files(workspace)
            out = Path(files["out"]) / f"case{number}"
            out.mkdir(exist_ok=True)
            full = ["migrate", *(a.format(**{**files, "out": str(out)}) for a in argv)]
            return cli_outcome(full, option.format(**files))()

        cases.append(Case("cli", "migrate", " ".join(argv), run, names=(option,), valid=False))
    return cases


def migrate_cases(workspace: Any) -> list[Case]:
    return (
        plan_cases()
        + fit_cases()
        + certify_cases()
        + refit_cases()
        + apply_cases(workspace)
        + cascade_cases(workspace)
        + migration_file_cases(workspace)
        + plan_file_cases(workspace)
        + store_cases(workspace)
        + cli_cases(workspace)
    )


def cascade_cases(workspace: Any) -> list[Case]:
    """``Migration.search`` (cascade search), ``depth_curve``, ``cascade_status`` and ``open_collection``: bad values
    of each argument refused naming it, around an old ``.npy`` store of the tiny corpus (its ids are row numbers)."""
    from latentstitch.migrate import cascade_status, depth_curve, open_collection, open_store

    c = corpus()
    new_of_rows = c["new"]

    def made() -> tuple[Any, Any, Path]:
        folder = workspace.folder()
        np.save(folder / "old.npy", c["old"])
        store = open_store(folder / "old.npy")
        return copy.copy(_fitted()[1]).record_index(store), store, folder

    def search(**changes: Any) -> Callable[[], Any]:
        def run() -> Any:
            migration, store, folder = made()
            arguments = {
                "new_queries": c["new"][:4],
                "k": 3,
                "store": store,
                "new_store": folder / "new.npy",
                "depth": 10,
                "new_vectors": lambda ids: new_of_rows[np.asarray(ids, dtype=np.int64)],
                **changes,
            }
            return migration.search(arguments.pop("new_queries"), arguments.pop("k"), **arguments)

        return run

    def curve(**changes: Any) -> Callable[[], Any]:
        def run() -> Any:
            migration, store, folder = made()
            arguments = {"depths": [10, 20], "store": store, "new_store": folder / "new.npy", "relevant": np.arange(4)}
            arguments.update(changes)
            arguments.setdefault("new_vectors", lambda ids: new_of_rows[np.asarray(ids, dtype=np.int64)])
            return depth_curve(migration, c["new"][:4], arguments.pop("depths"), **arguments)

        return run

    def status(new_store: Any) -> Callable[[], Any]:
        def run() -> Any:
            _, store, _ = made()
            return cascade_status(store, new_store)

        return run

    def collection(**changes: Any) -> Callable[[], Any]:
        def run() -> Any:
            _, store, folder = made()
            arguments = {"path": folder / "new.npy", "dimension": NEW, "metric": "cosine", **changes}
            return open_collection(arguments.pop("path"), store, **arguments)

        return run

    target = "Migration.search"
    cases = [Case("migrate", target, "clean", search(), must_succeed=True)]
    bad = {
        "new_queries": (None, c["new"][0], c["new"][:4, :3], np.full((2, NEW), np.nan, dtype=np.float32)),
        "k": (0, -1, 2.5),
        "depth": (0, 2.5),
        "new_vectors": ("new.npy",),
        "store": (None,),
    }
    cases += _option_cases(target, search, bad)
    cases.append(Case("migrate", "depth_curve", "clean", curve(), must_succeed=True))
    cases += _option_cases("depth_curve", curve, {"depths": ([], [0], [5], ["a"], "10"), "k": (0,)})
    cases.append(Case("migrate", "cascade_status", "new_store='x'", status("x"), names=("new_store",), valid=False))
    cases.append(Case("migrate", "open_collection", "clean", collection(), must_succeed=True))
    cases += _option_cases("open_collection", collection, {"dimension": (0, 2.5), "metric": ("bogus",)})
    return cases
