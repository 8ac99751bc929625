#!/usr/bin/env bash
# Everything latentstitch uses, in a virtual environment at .venv:
#   1. the CPU build of PyTorch first (a bare `torch` requirement would pull a multi-GB CUDA build),
#   2. the package in editable mode with the dev tools and every extra (text, vision, words, the vector stores),
#   3. the Debian data packages (Fashion-MNIST, SWORD Bibles, FreeDict, Unicode CLDR) and the spaCy vectors,
#   4. Debian's chromium, the headless browser the test of `latentstitch report` (the HTML page) renders in.
# Idempotent. Uses sudo for apt-get when not root.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install --quiet torch==2.13.0 -e ".[dev,all]"
scripts/install-system-data.sh --pip .venv/bin/pip --browser
