#!/usr/bin/env bash
# Installs the toolchain pieces the checks need (idempotent).
set -euo pipefail
rustup component add rustfmt clippy >/dev/null
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
rustup +nightly component add miri rust-src >/dev/null
cargo +nightly miri setup >/dev/null
