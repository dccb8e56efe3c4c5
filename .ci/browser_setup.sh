#!/usr/bin/env bash
# What the browser tests need beyond the Python packages: Debian's Chromium (Playwright drives it
# at /usr/bin/chromium instead of downloading its own browser build) and a CJK font, so that
# Chinese text in JupyterLab and in the book renders as characters rather than boxes. The book's
# tests need nothing more: axe-core's engine comes from PyPI (the group book), not from npm.
# Quick when everything is already there: apt is touched only for what is missing.
set -euo pipefail

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
dpkg-query -W -f='${Status}' fonts-wqy-microhei 2>/dev/null | grep -q "ok installed" \
    || missing+=(fonts-wqy-microhei)

if [ "${#missing[@]}" -eq 0 ]; then
    echo "browser_setup: chromium and fonts-wqy-microhei already installed"
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then  # a learner's machine; CI runs as root
    if ! command -v sudo >/dev/null; then
        echo "browser_setup: root (or sudo) is needed to install: ${missing[*]}" >&2
        exit 1
    fi
    SUDO=(sudo)
fi
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get -qq)

echo "browser_setup: installing ${missing[*]}"
"${APT[@]}" update
"${APT[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
# (Debian's launcher script may grumble on stderr about /dev/shm; the browser is fine.)
/usr/bin/chromium --version 2>/dev/null
