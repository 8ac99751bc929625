"""Optional dependencies and system data: import them lazily, and fail with the command that installs them.

The core of latentstitch needs numpy, torch and scikit-learn only. Pretrained encoders and most data sources live
in optional extras (``latentstitch[text]``, ``[vision]``, ``[words]``, ``[all]``) or in Debian packages
(``scripts/install-system-data.sh``). Nothing here is imported at package import time.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

SYSTEM_DATA_SCRIPT = "scripts/install-system-data.sh"

# Offline flags for the Hugging Face stack: the weights ship inside registry packages, so nothing may reach a hub.
OFFLINE_FLAGS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def set_offline_flags() -> None:
    """Set the Hugging Face offline flags (unless the user set them) before transformers is imported."""
    for key, value in OFFLINE_FLAGS.items():
        os.environ.setdefault(key, value)


def require(module: str, extra: str, *, package: str | None = None) -> ModuleType:
    """Import ``module``; if it is missing, raise ModuleNotFoundError naming the pip command that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and module != error.name and not module.startswith(error.name + "."):
            raise  # the module exists but one of its own dependencies is broken: show the real error
        what = f"the package {package!r}" if package else f"the module {module!r}"
        raise ModuleNotFoundError(
            f"{what} is needed here but is not installed; install the optional extra with: "
            f"pip install 'latentstitch[{extra}]'",
            name=module,
        ) from error


def require_file(path: Path, apt_package: str) -> Path:
    """Return ``path`` if it exists, else raise FileNotFoundError naming the Debian package that provides it."""
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: it ships in the Debian package {apt_package!r}; install it with "
            f"`sudo apt-get install -y {apt_package}` (or run {SYSTEM_DATA_SCRIPT}, which installs all of "
            "latentstitch's system data)"
        )
    return path


def package_version(distribution: str) -> str:
    """Installed version of a distribution (the version of the weights a packaged model ships)."""
    from importlib.metadata import version

    return version(distribution)
