//! The atomics the tree is built from: `core`'s, or loom's when the crate
//! is compiled with `--cfg loom` so that the loom models in `loom_tests`
//! can explore every interleaving of readers and writers.

#[allow(unused_imports)]
use crate::prelude::*;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
