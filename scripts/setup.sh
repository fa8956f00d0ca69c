#!/usr/bin/env bash
# Installs everything scratchformer needs on a Debian/Ubuntu-like machine: system packages (a virtual display for
# the window tests, Qt's xcb libraries, fonts for Devanagari/CJK/emoji, poppler for PDF checks) with apt, and the
# Python package with its test extras into a project virtual environment, .venv (so it also works with a
# distribution Python that refuses system-wide pip installs, PEP 668). Safe to run again: it reuses what is there.
#
#   PYTHON=/path/to/python3 bash scripts/setup.sh   # pick the Python the venv is made from (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_PY=${PYTHON:-python3}
VENV=.venv

APT_PACKAGES=(xvfb libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0
  libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0 libxcb-cursor0 libegl1 libgl1 libfontconfig1 libdbus-1-3
  fonts-noto-core fonts-droid-fallback fonts-noto-color-emoji poppler-utils python3-venv)
# python3-venv: Debian's and Ubuntu's own python3 cannot make a virtual environment without it
# chromium: the interactive page's browser tests (tests/scratchformer/test_page_browser.py). Only on Debian, whose
# `chromium` is a real package (Ubuntu's is a stub for a snap); without it those tests skip, saying so.
# firefox-esr: the same page tests' second engine (tests/scratchformer/firefox.py, test_page_firefox.py), driven
# over WebDriver BiDi; Debian's package again (Ubuntu has no firefox-esr); without it the Firefox runs skip.
if [ -r /etc/os-release ] && grep -qx 'ID=debian' /etc/os-release; then
  APT_PACKAGES+=(chromium firefox-esr)
fi

if command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="none"; fi
    fi
    if [ "$SUDO" = "none" ]; then
      echo "setup: neither root nor sudo: please install these system packages yourself: ${missing[*]}"
    else
      echo "setup: installing system packages: ${missing[*]}"
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
  fi
else
  echo "setup: not a Debian-like system; install Xvfb, Qt's xcb libraries and Noto fonts with your package manager."
fi

if ! command -v "$BASE_PY" >/dev/null 2>&1; then
  echo "setup: no Python found at '$BASE_PY'; install Python 3.10 or newer, or name one with PYTHON=/path/to/python3."
  exit 2
fi

# A venv made by another Python (or half-made, or copied from elsewhere) is recreated.
want=$("$BASE_PY" -c 'import sys; print(sys.version.split()[0])')
if [ -d "$VENV" ]; then
  have=$("$VENV/bin/python" -c 'import sys, pip; print(sys.version.split()[0])' 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    echo "setup: $VENV does not work with $BASE_PY ($want); making a new one."
    rm -rf "$VENV"
  fi
fi
if [ ! -d "$VENV" ]; then
  # PyTorch: keep one the chosen Python already has (a CUDA or ROCm build the user installed) by letting the venv
  # see its site-packages; otherwise the venv gets torch 2.13.0 below.
  if "$BASE_PY" -c "import torch" >/dev/null 2>&1; then
    echo "setup: reusing the PyTorch that $BASE_PY already has."
    "$BASE_PY" -m venv --system-site-packages "$VENV"
  else
    "$BASE_PY" -m venv "$VENV" || {
      echo "setup: $BASE_PY cannot make a virtual environment; on Debian/Ubuntu: sudo apt-get install python3-venv."
      exit 2
    }
  fi
fi
PY="$VENV/bin/python"

# torch 2.13.0 (a local CPU wheel on the project's CI machines, the normal build from PyPI elsewhere) rather than
# letting pip pick the newest multi-GB CUDA build. A CPU-only user elsewhere can pre-install a small CPU build with
#   .venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q "torch==2.13.0" || "$PY" -m pip install -q torch
fi
"$PY" -m pip install -q -e ".[test]"
