#!/usr/bin/env bash
# Miri on the unsafe code: node layer unit tests and size-reduced
# integration tests (each scales itself down under cfg(miri)). Strict
# provenance: tagged node pointers must keep theirs.
set -euo pipefail
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
cargo +nightly miri test -p maple-tree --lib --test smoke --test drops --test fault --test kernel --test dup
