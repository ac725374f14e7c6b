#!/usr/bin/env bash
# Set up everything moviemem needs on a fresh Debian machine; fast when it is all there.
# The llama-cpp-python compile (minutes of CPU) runs in the background while the Debian packages,
# the Python packages and the model weights (mostly downloads) are installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
VENV=.venv
WHEELS=${MOVIEMEM_WHEELS:-$HOME/.cache/moviemem/wheels}
LLAMA=llama-cpp-python==0.3.36
APT_PKGS="ffmpeg espeak-ng tesseract-ocr tesseract-ocr-eng fonts-dejavu-core chromium"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
stamp="$VENV/.moviemem-installed"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
install=""
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || install=1

compile=""
trap '[ -z "$compile" ] || kill "$compile" 2>/dev/null || true' EXIT
if [ -n "$install" ]; then
  $PIP install -q --upgrade pip wheel setuptools  # before the compile starts: it runs this pip
  if ! ls "$WHEELS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
    mkdir -p "$WHEELS"
    log="$WHEELS/llama-build.log"
    echo "setup: compiling $LLAMA once, in the background (a few minutes; log $log); the wheel is cached in $WHEELS"
    # text-only use: skip the multimodal (mtmd/llava) library; compile on every core
    CMAKE_ARGS="-DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      $PIP wheel -q --no-deps "$LLAMA" -w "$WHEELS" >"$log" 2>&1 &
    compile=$!
  fi
fi

need_apt=""
for cmd in ffmpeg ffprobe espeak-ng tesseract chromium; do command -v "$cmd" >/dev/null || need_apt=1; done
[ -d /usr/share/fonts/truetype/dejavu ] || need_apt=1
if [ -n "$need_apt" ]; then
  echo "setup: installing Debian packages: $APT_PKGS"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $APT_PKGS
fi

if [ -n "$install" ] && ! ls -d "$VENV"/lib/python3*/site-packages/torch >/dev/null 2>&1; then
  # torch 2.14.1 from the local files is the CUDA build: with its nvidia libraries and triton the
  # environment takes about 8 GB; say so up front rather than fail half-installed on a full disk
  free_mb=$(df -Pm "$VENV" | awk 'NR==2 {print $4}')
  if [ "$free_mb" -lt 9000 ]; then
    echo "setup: the virtual environment needs about 9 GB free (torch with its CUDA libraries); $(pwd)/$VENV has ${free_mb} MB" >&2
    exit 1
  fi
fi
if [ -n "$install" ]; then
  # torch and torchvision come from this machine's local files (a CPU run needs no more)
  $PIP install -q torch==2.14.1 torchvision==0.29.1
  $PIP install -q -e ".[dev]"
fi

"$VENV/bin/moviemem" models prepare

if [ -n "$compile" ]; then
  echo "setup: waiting for the $LLAMA compile"
  if ! wait "$compile"; then
    compile=""
    echo "setup: compiling $LLAMA failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  compile=""
fi
if [ -n "$install" ]; then
  $PIP install -q --find-links "$WHEELS" -e ".[llama,dev]"
  echo "$want" > "$stamp"
fi
