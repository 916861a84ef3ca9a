//! O(n) duplication (the kernel's `__mt_dup`, used by fork): copy the node
//! structure depth-first in pre-order, one 256-byte copy per node, an
//! internal node's children copied together in index order. No
//! pivot comparison, split or gap computation happens: the copy has exactly
//! the source's shape. On allocation failure the partial copy is freed and
//! the source is untouched.
//!
//! The copy's leaf slots still hold the *source's* value words; the typed
//! layer replaces every one of them in place (an exact-fit store that
//! cannot allocate) before anyone sees the copy.

#[allow(unused_imports)]
use crate::prelude::*;

use arrayvec::ArrayVec;

use crate::{
    alloc::Slab,
    error::AllocError,
    node::{LeafRef, NodeRef, RANGE64_SLOTS},
    raw::RawTree,
};

/// A leaf of a copy with its bounds, in index order.
pub(crate) type LeafList = Vec<(LeafRef, u64, u64)>;

impl RawTree {
    /// A copy of the node structure sharing this tree's value words, and
    /// (if `want_leaves`) the copy's leaves in index order, for the value
    /// replacement pass.
    pub(crate) fn dup_nodes(&self, want_leaves: bool) -> Result<(RawTree, LeafList), AllocError> {
        let mut out = RawTree::new(self.gaps);
        // Tree-wide state is copied whatever the shape (an empty tree can
        // have a pending wrap too).
        out.cyclic_wrapped.set(self.cyclic_wrapped.get());
        let Some(root) = self.root_node() else {
            return Ok((out, Vec::new()));
        };
        // Sized once from the entry count (growing the vector cost a fifth
        // of a small tree's duplication): a leaf holds at least 6 of the at
        // most 2 * len + 1 ranges (entries and the gaps between them),
        // except on the right-most spine.
        let leaves_max = (2 * self.len.get() + 1) / 6 + self.height.get() + 1;
        let mut leaves = LeafList::with_capacity(if want_leaves { leaves_max } else { 0 });
        let list = want_leaves.then_some(&mut leaves);
        match dup_from(&mut out.slab, root, self.height.get(), list) {
            Ok(new_root) => {
                out.root.store(new_root.encode(), crate::sync::Ordering::Release);
                out.height.set(self.height.get());
                out.len.set(self.len.get());
                Ok((out, leaves))
            }
            Err(e) => {
                // Slots of the partial copy may still point at source nodes,
                // so it is never traversed: its slab frees what it handed out.
                // SAFETY: `out` is ours alone and nobody has seen its nodes.
                unsafe { out.slab.free_all() };
                Err(e)
            }
        }
    }
}

/// A node of the source, its copy, and the copy's bounds: an internal node
/// whose children are still to be copied.
type Waiting = (NodeRef, NodeRef, u64, u64);

/// The stack of [`Waiting`] nodes: a vector on the call stack for trees
/// of up to [`ON_STACK_HEIGHT`] levels, else on the heap.
trait DupStack: core::ops::DerefMut<Target = [Waiting]> {
    fn push_node(&mut self, w: Waiting);
    fn pop_node(&mut self) -> Option<Waiting>;
}

/// Tree heights whose dup stack lives on the call stack (about 6 KiB):
/// every tree of up to several million entries. A heap vector's
/// allocation and free were a tenth of a small tree's duplication.
const ON_STACK_HEIGHT: usize = 8;

impl<const N: usize> DupStack for ArrayVec<Waiting, N> {
    fn push_node(&mut self, w: Waiting) {
        self.push(w);
    }
    fn pop_node(&mut self) -> Option<Waiting> {
        self.pop()
    }
}

impl DupStack for Vec<Waiting> {
    fn push_node(&mut self, w: Waiting) {
        self.push(w);
    }
    fn pop_node(&mut self) -> Option<Waiting> {
        self.pop()
    }
}

fn dup_from(
    slab: &mut Slab,
    root: NodeRef,
    height: usize,
    leaves: Option<&mut LeafList>,
) -> Result<NodeRef, AllocError> {
    // At most one level's children wait per level, the root's level aside.
    if height <= ON_STACK_HEIGHT {
        dup_with(slab, root, leaves, ArrayVec::<Waiting, { ON_STACK_HEIGHT * RANGE64_SLOTS + 1 }>::new())
    } else {
        dup_with(slab, root, leaves, Vec::with_capacity(height * RANGE64_SLOTS + 1))
    }
}

fn dup_with(
    slab: &mut Slab,
    root: NodeRef,
    mut leaves: Option<&mut LeafList>,
    mut stack: impl DupStack,
) -> Result<NodeRef, AllocError> {
    // SAFETY: `&mut` makes us the slab's only user (here and below).
    let new_root = unsafe { slab.alloc(root.kind()) }?.copy_of(root);
    new_root.set_root_parent();
    // Pre-order: a node's children are allocated and copied in index
    // order, then the left-most child is expanded first (so leaves come out
    // in order). Leaves go straight to the list (they have nothing to
    // expand); internal children wait on the stack.
    match new_root.as_leaf() {
        Some(leaf) => {
            if let Some(l) = leaves {
                l.push((leaf, 0, u64::MAX));
            }
            return Ok(new_root);
        }
        None => stack.push_node((root, new_root, 0, u64::MAX)),
    }
    while let Some((src, dst, min, max)) = stack.pop_node() {
        // (`dst` is a copy of `src`, of the same kind, internal.)
        let n = src.count();
        let waiting = stack.len();
        for i in 0..n {
            // SAFETY: internal node, used slot; the source is borrowed.
            let child = unsafe { src.child(i) };
            // SAFETY: `&mut` makes us the slab's only user.
            let copy = unsafe { slab.alloc(child.kind()) }?.copy_of(child);
            copy.set_parent(dst);
            // SAFETY: `dst` is a copy of `src`, and `copy` of the child in
            // the same slot: a live node of the level below over that
            // slot's range.
            unsafe { dst.set_slot(i, copy.encode()) };
            match copy.as_leaf() {
                Some(leaf) => {
                    if let Some(l) = leaves.as_deref_mut() {
                        l.push((leaf, src.slot_min(i, min), src.slot_max(i, max)));
                    }
                }
                None => stack.push_node((child, copy, src.slot_min(i, min), src.slot_max(i, max))),
            }
        }
        // The first child on top, to be expanded first.
        stack[waiting..].reverse();
    }
    Ok(new_root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sync::Ordering, MapleTree, U63};

    /// A copy's leaves, read back: bounds, pivots and slot words.
    type Leaves = Vec<(u64, u64, Vec<u64>, Vec<usize>)>;

    /// The source's nodes copied with the waiting stack on the call stack
    /// or on the heap (trees taller than `ON_STACK_HEIGHT` levels).
    fn copy(root: NodeRef, heap: bool) -> Leaves {
        let mut slab = Slab::new();
        let mut leaves = LeafList::new();
        if heap {
            dup_with(&mut slab, root, Some(&mut leaves), Vec::new()).unwrap();
        } else {
            dup_with(&mut slab, root, Some(&mut leaves), ArrayVec::<Waiting, 129>::new()).unwrap();
        }
        let read = leaves
            .iter()
            .map(|(l, lo, hi)| {
                let piv = l.pivots().iter().map(|p| p.load(Ordering::Relaxed)).collect();
                let words = l.slots().iter().map(|w| w.load(Ordering::Relaxed).addr()).collect();
                (*lo, *hi, piv, words)
            })
            .collect();
        // SAFETY: the copy is this test's alone and nobody reads it again.
        unsafe { slab.free_all() };
        read
    }

    /// Both stacks copy a tree of several levels alike: the same leaves,
    /// in index order, with the same bounds and contents.
    #[test]
    fn both_dup_stacks_copy_alike() {
        for gaps in [false, true] {
            let mut t: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            // Three levels either way (under Miri too).
            let n = if cfg!(miri) { 300 } else { 2_000u64 };
            for i in 0..n {
                t.insert_range(i * 10..=i * 10 + 5, U63::new(i).unwrap()).unwrap();
            }
            assert!(t.raw.height.get() >= 3);
            let root = t.raw.root_node().unwrap();
            let (on_stack, on_heap) = (copy(root, false), copy(root, true));
            assert_eq!(on_stack, on_heap);
            assert_eq!(on_stack.len(), t.stats().leaves);
            assert!(on_stack.windows(2).all(|w| w[0].1 + 1 == w[1].0), "leaves in index order, touching");
        }
    }
}
