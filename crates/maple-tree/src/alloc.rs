//! Every node allocation and free goes through this module, so that one
//! place counts them and (with the `fault-injection` feature) can fail the
//! N-th allocation on purpose.
//!
//! Freed nodes go to a small per-thread cache (like the kernel's slab) that
//! the next allocation reuses: splits and merges free and allocate nodes in
//! pairs, and 256-byte-aligned `malloc` is slow. The cache holds at most
//! [`CACHE_NODES`] nodes per thread and is emptied when the thread exits.

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr::NonNull;

use liballoc::alloc::{alloc, dealloc, Layout};

use crate::{
    error::AllocError,
    node::{Kind, Node, NodeRef},
};

const LAYOUT: Layout = Layout::new::<Node>();

/// Most nodes kept per thread for reuse.
#[cfg(feature = "std")]
const CACHE_NODES: usize = 256;

/// Free nodes of this thread.
#[cfg(feature = "std")]
struct Cache(liballoc::vec::Vec<NonNull<Node>>);

#[cfg(feature = "std")]
impl Drop for Cache {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            // SAFETY: cached nodes came from `alloc` with `LAYOUT` and are
            // owned by the cache alone.
            unsafe { dealloc(p.as_ptr().cast(), LAYOUT) }
        }
    }
}

// Without `std` there are no thread-locals: nodes come from the global
// allocator each time.
#[cfg(feature = "std")]
std::thread_local! {
    static CACHE: core::cell::RefCell<Cache> = const { core::cell::RefCell::new(Cache(liballoc::vec::Vec::new())) };
}

/// A node from this thread's cache. Loom models run many executions on one
/// thread: no reuse across them.
#[cfg(feature = "std")]
fn cached_node() -> Option<NonNull<Node>> {
    if cfg!(loom) {
        return None;
    }
    CACHE.try_with(|c| c.borrow_mut().0.pop()).ok().flatten()
}

#[cfg(not(feature = "std"))]
fn cached_node() -> Option<NonNull<Node>> {
    None
}

/// Keeps a freed node in this thread's cache if it has room.
#[cfg(feature = "std")]
fn cache_node(ptr: NonNull<Node>) -> bool {
    !cfg!(loom)
        && CACHE
            .try_with(|c| {
                let mut c = c.borrow_mut();
                if c.0.len() < CACHE_NODES {
                    c.0.push(ptr);
                    true
                } else {
                    false
                }
            })
            .unwrap_or(false)
}

#[cfg(not(feature = "std"))]
fn cache_node(_: NonNull<Node>) -> bool {
    false
}

/// Allocates a node of `kind`. Its parent word is null; every other field
/// is uninitialised until [`NodeRef::fill`] writes it, so callers must fill
/// the node before anyone reads it.
pub(crate) fn alloc_node(kind: Kind) -> Result<NodeRef, AllocError> {
    #[cfg(feature = "fault-injection")]
    if fault::should_fail() {
        return Err(AllocError);
    }
    let ptr = match cached_node() {
        Some(p) => p,
        None => {
            // SAFETY: `LAYOUT` has non-zero size.
            let raw = unsafe { alloc(LAYOUT) }.cast::<Node>();
            NonNull::new(raw).ok_or(AllocError)?
        }
    };
    #[cfg(feature = "fault-injection")]
    fault::on_alloc();
    #[cfg(loom)]
    freed::forget(ptr.as_ptr().addr());
    // SAFETY: `ptr` is a node-sized, node-aligned block we own; the kind
    // is fixed from here on.
    let node = unsafe { NodeRef::new(ptr, kind) };
    #[cfg(loom)]
    // SAFETY: loom's atomics must be constructed, not just stored into: write
    // a fully built empty node over the fresh block.
    unsafe {
        ptr.as_ptr().write(Node::loom_empty(kind))
    };
    node.init_parent();
    Ok(node)
}

/// Frees a node.
///
/// # Safety
///
/// `node` must come from [`alloc_node`], must not be freed twice, and must
/// not be reachable by anyone after this call.
pub(crate) unsafe fn free_node(node: NodeRef) {
    #[cfg(feature = "fault-injection")]
    fault::on_free();
    let ptr = node.as_ptr();
    #[cfg(loom)]
    freed::record(ptr.as_ptr().addr());
    if !cache_node(ptr) {
        // SAFETY: the caller guarantees the node came from `alloc_node` with
        // the same layout and is no longer used.
        unsafe { dealloc(ptr.as_ptr().cast(), LAYOUT) }
    }
}

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

#[cfg(feature = "fault-injection")]
pub mod fault {
    //! Test hooks: per-thread node allocation counters and a switch that
    //! fails the N-th allocation. Counters are per thread so that tests
    //! running in parallel do not disturb each other.

    use std::cell::Cell;

    std::thread_local! {
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
        static FREES: Cell<u64> = const { Cell::new(0) };
        static FAIL_AT: Cell<u64> = const { Cell::new(0) };
    }

    pub(crate) fn should_fail() -> bool {
        FAIL_AT.with(|f| {
            let n = f.get();
            if n == 0 {
                return false;
            }
            if n == 1 {
                f.set(0);
                return true;
            }
            f.set(n - 1);
            false
        })
    }

    pub(crate) fn on_alloc() {
        ALLOCS.with(|c| c.set(c.get() + 1));
    }

    pub(crate) fn on_free() {
        FREES.with(|c| c.set(c.get() + 1));
    }

    /// Makes the `n`-th next node allocation on this thread fail (1 = the
    /// very next one); 0 disarms.
    pub fn fail_nth_alloc(n: u64) {
        FAIL_AT.with(|f| f.set(n));
    }

    /// True while an armed failure has not fired yet.
    pub fn armed() -> bool {
        FAIL_AT.with(|f| f.get() != 0)
    }

    /// Nodes allocated on this thread so far.
    pub fn allocated() -> u64 {
        ALLOCS.with(|c| c.get())
    }

    /// Nodes freed on this thread so far.
    pub fn freed() -> u64 {
        FREES.with(|c| c.get())
    }

    /// Nodes allocated minus nodes freed on this thread.
    pub fn live() -> i64 {
        allocated() as i64 - freed() as i64
    }
}
