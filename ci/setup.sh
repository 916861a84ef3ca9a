#!/usr/bin/env bash
# Installs the toolchain pieces the checks need (idempotent).
set -euo pipefail
rustup component add rustfmt clippy >/dev/null
# maple-tree without `std` is built for a bare-metal target.
rustup target add x86_64-unknown-none >/dev/null
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
rustup +nightly component add miri rust-src >/dev/null
cargo +nightly miri setup >/dev/null
