"""The contract of ``latentstitch.migrate`` and ``latentstitch migrate`` (issue 42): every bad argument of plan /
fit / certify / apply, tiny and degenerate samples, tampered migration files, every store's damaged folders and the
CLI's user errors end in a clear error naming the argument (option, file), a warning, or a correct result.

The cases come from ``contract_grid_migrate.py``; they run one by one, on a 60-document corpus."""

from __future__ import annotations

import pytest
from contract_cases import ACCEPTABLE, run_case
from contract_grid_io import Workspace
from contract_grid_migrate import migrate_cases

CASES = migrate_cases(Workspace())


def _param(case):
    return pytest.param(case, id=case.id, marks=[pytest.mark.slow] if case.slow else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_migrate_input(case):
    outcome, detail = run_case(case)
    assert outcome in ACCEPTABLE, f"{case.id}: {outcome}: {detail}"


# Public names of latentstitch.migrate that are not entry points of their own: results, constants, and the retrieval
# helpers the entry points call (covered through them). A new public function must join the grid or this list.
NOT_ENTRY_POINTS = {
    "KINDS": "a constant",
    "METRICS": "a constant",
    "MODES": "a constant",
    "CHOICES": "a constant",
    "KEEP": "a constant (certify_migration's default keep)",
    "SMALL_INDEX": "a constant (decide's small_index default)",
    "COLLECTION_KINDS": "a constant",
    "CascadeResult": "a result (Migration.search's)",
    "CascadeStatus": "a result (cascade_status's)",
    "NewCollection": "open_collection's result",
    "Decision": "a result (certify_migration's decision)",
    "decide": "a helper of certify_migration (its figures checked there)",
    "STRATEGIES": "a constant",
    "ApplyResult": "a result",
    "Certificate": "a result (certify_migration's)",
    "Interval": "a result",
    "MigrationPlan": "a result (plan_sample's)",
    "MigrationWarning": "a warning category",
    "StoreError": "an error",
    "VectorStore": "the store protocol (open_store's result)",
    "QuerySample": "an argument of fit/certify (its bad values are in the fit grid)",
    "save_plan": "the writer of load_plan's files (in the load_plan cases)",
    "bootstrap_mean": "a retrieval helper of certify_migration",
    "budget_count": "plan_sample's budget check (the budget cases)",
    "confidence_curve": "a helper of certify_migration",
    "metric_words": "a description of a checked metric",
    "neighbourhood_agreement": "a helper of certify_migration",
    "per_query": "a retrieval helper of certify_migration",
    "prepare": "a retrieval helper (normalises checked vectors)",
    "ranks": "a retrieval helper of certify_migration",
    "search": "a retrieval helper of certify_migration",
    "translation_routes": "a listing without arguments",
    "work_folder": "a path helper of apply_migration",
}


def test_every_public_migrate_entry_point_is_in_the_grid():
    import latentstitch.migrate as migrate

    targets = {c.target.split(".")[0] for c in CASES}
    assert {"migrate"} <= targets  # the CLI command
    missing = set(migrate.__all__) - targets - set(NOT_ENTRY_POINTS)
    assert not missing, f"public names of latentstitch.migrate neither in the grid nor listed: {sorted(missing)}"
    assert set(NOT_ENTRY_POINTS) <= set(migrate.__all__), sorted(set(NOT_ENTRY_POINTS) - set(migrate.__all__))
