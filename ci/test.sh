#!/usr/bin/env bash
# The README's test command.
set -euo pipefail
cargo test --workspace
