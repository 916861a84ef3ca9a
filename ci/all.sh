#!/usr/bin/env bash
# Everything CI runs, in order. Humans can run it too.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "=== $* ($(date +%T))"; }
step setup;  bash ci/setup.sh
step tests;  bash ci/test.sh
step lint;   bash ci/lint.sh
step kernel-c; bash ci/kernel-c.sh --strict
step loom;   bash ci/loom.sh
step miri;   bash ci/miri.sh
echo; echo "=== all checks passed ($(date +%T))"
