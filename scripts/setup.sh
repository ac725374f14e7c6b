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

# llama-cpp-python is compiled for the instruction sets this CPU was seen to execute (never AMX, never
# -march=native: a guest may list what it cannot run) and cached by how it was built (scripts/llama_build.py)
LEVEL_FILE="$VENV/.moviemem-llama-level"
level="$(cat "$LEVEL_FILE" 2>/dev/null || echo best)"
llama_plan() { "$VENV/bin/python" scripts/llama_build.py plan --level "$level" --wheels "$WHEELS"; }
compile=""
trap '[ -z "$compile" ] || kill "$compile" 2>/dev/null || true' EXIT
# before the compile starts (it runs this pip); setuptools as pinned (resemblyzer needs its pkg_resources)
[ -z "$install" ] || $PIP install -q --upgrade pip wheel "setuptools==80.9.0"
IFS='|' read -r key wheel features < <(llama_plan)
if [ -z "$wheel" ]; then
  mkdir -p "$WHEELS"
  echo "setup: compiling $LLAMA once for this CPU ($level: $features), in the background (about 9 minutes; log in $WHEELS); the wheel is cached under key $key"
  "$VENV/bin/python" scripts/llama_build.py build --level "$level" --wheels "$WHEELS" >/dev/null &
  compile=$!
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
    exit 1  # llama_build.py printed the cause and the end of its log
  fi
  compile=""
fi
[ -z "$install" ] || echo "$want" > "$stamp"

# install the planned build unless it is the one installed, then prove it: load local-small in a child
# process and write one token. A crash (SIGILL) or hang there rebuilds with the safe instruction set
# (AVX2, no AVX-512), then the baseline; if that fails too, setup stops with the cause.
install_llama() {
  IFS='|' read -r key wheel features < <(llama_plan)
  [ -n "$wheel" ] || wheel="$("$VENV/bin/python" scripts/llama_build.py build --level "$level" --wheels "$WHEELS")"
  if [ "$(cat "$VENV/.moviemem-llama-key" 2>/dev/null)" != "$key" ]; then
    $PIP install -q --no-deps --force-reinstall "$wheel"  # this build, even over another of the same version
    $PIP install -q "$wheel"  # then what it needs (diskcache, ...)
    cp "$(dirname "$wheel")/build.json" "$VENV/moviemem-llama-build.json"
    echo "$key" > "$VENV/.moviemem-llama-key"
  fi
}
install_llama
while ! report="$("$VENV/bin/moviemem" doctor --only llama 2>&1)"; do
  cause="$(printf '%s\n' "$report" | grep -m1 'FAIL' || printf '%s\n' "$report" | tail -n 1)"
  case "$level" in
    best) level=safe ;;
    safe) level=baseline ;;
    *) echo "setup: llama.cpp does not run on this machine even built for SSE4.2 alone: ${cause# *}; see moviemem doctor" >&2
       exit 1 ;;
  esac
  echo "setup: the llama.cpp build failed its check here (${cause#FAIL }); rebuilding for the $level instruction set"
  echo "$level" > "$LEVEL_FILE"
  install_llama
done
echo "setup: llama.cpp ($level build $key) loads and answers on this CPU"
