#!/usr/bin/env bash
# Type-check the package under its real name. The repository root *is* the package (pyproject maps
# `moviemem` to `.`), so mypy would name modules after the checkout folder; a symlink named `moviemem`
# in a scratch folder gives it the right module names.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ln -s "$root" "$tmp/moviemem"
cd "$tmp"
exec "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" -p moviemem "$@"
