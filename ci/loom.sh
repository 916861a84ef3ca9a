#!/usr/bin/env bash
# Loom models of the concurrent protocol (src/loom_tests.rs), with a
# preemption bound as crossbeam does. A separate target directory keeps
# the loom build from invalidating the normal one.
set -euo pipefail
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
    cargo test -p maple-tree --lib --release --target-dir target/loom loom

# maple-mm's record chunks (their free protocol between the owner thread and
# the threads dropping records). A cfg of its own: `--cfg loom` would also
# switch maple-tree to its loom build, which has no concurrent tree.
RUSTFLAGS="--cfg loom_mm" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
    cargo test -p maple-mm --lib --release --target-dir target/loom-mm loom
