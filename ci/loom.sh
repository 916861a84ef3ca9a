#!/usr/bin/env bash
# Loom models of the concurrent protocol (src/loom_tests.rs), with a
# preemption bound as crossbeam does. A separate target directory keeps
# the loom build from invalidating the normal one.
set -euo pipefail
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
    cargo test -p maple-tree --lib --release --target-dir target/loom loom
