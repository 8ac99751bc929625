"""What produced a committed results page: the header line every writer of ``results.md`` / ``table.md`` puts under
the page's title, naming the command and the commit the run used, so a reader of ``results/`` knows how to
reproduce each folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: The repository holding this source tree (a git checkout) or, installed from a wheel, a folder without ``.git``.
SOURCE = Path(__file__).resolve().parents[3]


def current_commit() -> str:
    """The short hash of the commit checked out where this source runs from, or ``"unknown"`` (no git, or the package
    was installed from a wheel)."""
    if not (SOURCE / ".git").exists():
        return "unknown"
    try:
        found = subprocess.run(
            ["git", "-C", str(SOURCE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else "unknown"


def provenance_line(command: str, commit: str | None = None) -> str:
    """``Produced by `COMMAND` at commit `HASH`.``: the line under a results page's title (``commit``: the current one
    when None)."""
    return f"Produced by `{command}` at commit `{commit or current_commit()}`."


def with_provenance(page: str, command: str, commit: str | None = None) -> str:
    """``page`` (markdown) with the provenance line after its first line (the ``# title``), a blank line each side."""
    title, _, rest = page.partition("\n")
    return f"{title}\n\n{provenance_line(command, commit)}\n\n{rest.lstrip(chr(10))}"
