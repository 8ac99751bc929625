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


def test_every_public_migrate_entry_point_is_in_the_grid():
    targets = {c.target for c in CASES}
    expected = {"plan_sample", "fit_migration", "certify_migration", "apply_migration", "Migration.load"}
    assert expected | {"open_store", "create_writer", "migrate"} <= targets
