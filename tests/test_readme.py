"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README should show at least one Python example"
    namespace: dict = {}  # the examples read as one session: later ones use names defined earlier
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
