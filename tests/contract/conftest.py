"""The contract suite reads the registry of loadable estimator classes (``latentstitch._core.persist``), which fills
as the packages that define estimators are imported. The package root imports nothing eagerly (so that the command
line starts at once), so they are imported here, before the cases are generated."""

import latentstitch.alignment
import latentstitch.bridge
import latentstitch.relative
import latentstitch.stitching  # noqa: F401
