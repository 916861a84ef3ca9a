//! Every node allocation and free goes through this module, so that one
//! place counts them and (with the `fault-injection` feature) can fail the
//! N-th allocation on purpose.

use core::ptr::NonNull;
use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::{
    error::AllocError,
    node::{Kind, Node, NodeRef},
};

const LAYOUT: Layout = Layout::new::<Node>();

/// Allocates a zeroed node of `kind`.
pub(crate) fn alloc_node(kind: Kind) -> Result<NodeRef, AllocError> {
    #[cfg(feature = "fault-injection")]
    if fault::should_fail() {
        return Err(AllocError);
    }
    // SAFETY: `LAYOUT` has non-zero size.
    let ptr = unsafe { alloc_zeroed(LAYOUT) }.cast::<Node>();
    let ptr = NonNull::new(ptr).ok_or(AllocError)?;
    #[cfg(feature = "fault-injection")]
    fault::on_alloc();
    // SAFETY: freshly allocated; an all-zero node is valid (see `Node`).
    Ok(unsafe { NodeRef::new(ptr, kind) })
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
    // SAFETY: the caller guarantees the node came from `alloc_node` with the
    // same layout and is no longer used.
    unsafe { dealloc(node.as_ptr().as_ptr().cast(), LAYOUT) }
}

#[cfg(feature = "fault-injection")]
pub mod fault {
    //! Test hooks: per-thread node allocation counters and a switch that
    //! fails the N-th allocation. Counters are per thread so that tests
    //! running in parallel do not disturb each other.

    use std::cell::Cell;

    thread_local! {
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
