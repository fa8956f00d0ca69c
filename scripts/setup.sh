#!/usr/bin/env bash
# Installs everything scratchformer needs on a Debian/Ubuntu-like machine: system packages (a virtual display for
# the window tests, Qt's xcb libraries, fonts for Devanagari/CJK/emoji, poppler for PDF checks) and the Python
# package with its test extras. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

APT_PACKAGES=(xvfb libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0
  libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0 libxcb-cursor0 libegl1 libgl1 libfontconfig1 libdbus-1-3
  fonts-noto-core fonts-droid-fallback fonts-noto-color-emoji poppler-utils)

if command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing system packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not a Debian-like system; install Xvfb, Qt's xcb libraries and Noto fonts with your package manager."
fi

# PyTorch: keep one that is already installed; otherwise take 2.13.0 (a local CPU wheel on the project's CI
# machines, the normal build from PyPI elsewhere) rather than letting pip pick the newest multi-GB CUDA build.
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q "torch==2.13.0" || "$PY" -m pip install -q torch
fi
"$PY" -m pip install -q -e ".[test]"
