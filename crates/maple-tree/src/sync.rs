//! The atomics the tree is built from: `core`'s, or loom's when the crate
//! is compiled with `--cfg loom` so that the loom models in `loom_tests`
//! can explore every interleaving of readers and writers.

#[allow(unused_imports)]
use crate::prelude::*;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Loom builds remember which node addresses are freed, and every node
/// access checks the list first (`NodeRef`), so that a model in which a
/// reader can reach a node after the writer freed it fails with a clear
/// message instead of reading freed memory. The list lives outside loom
/// (a plain mutex, never held across a loom operation), so it adds no
/// interleavings.
#[cfg(loom)]
pub(crate) mod freed {
    use std::{collections::BTreeSet, sync::Mutex};

    static FREED: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

    fn with<R>(f: impl FnOnce(&mut BTreeSet<usize>) -> R) -> R {
        f(&mut FREED.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn record(addr: usize) {
        with(|s| s.insert(addr));
    }

    /// The allocator handed `addr` out again.
    pub(crate) fn forget(addr: usize) {
        with(|s| s.remove(&addr));
    }

    /// Panics if the node at `addr` has been freed.
    pub(crate) fn check(addr: usize) {
        assert!(!with(|s| s.contains(&addr)), "a node was used after it was freed ({addr:#x})");
    }
}
