"""The reproductions' shared tasks, for code outside the package (``benchmarks/``, ``scripts/``) that runs the same
data through the same encoders: the BBC News text task with cached sentence embeddings and a head on frozen
embeddings (``experiments/_text.py``), and the image tasks (``experiments/_image_tasks.py``). The reproductions
themselves import the underscore modules; this module only names what may be used from outside.
"""

from latentstitch.experiments._image_tasks import ImageTask, load_image_task
from latentstitch.experiments._text import SHORT_NAMES, TEXT_ENCODERS, TextTask, bbc_task, embed, predict, train_head

__all__ = [
    "SHORT_NAMES",
    "TEXT_ENCODERS",
    "ImageTask",
    "TextTask",
    "bbc_task",
    "embed",
    "load_image_task",
    "predict",
    "train_head",
]
