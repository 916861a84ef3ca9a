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

use core::{fmt, marker::PhantomData, ops::RangeInclusive, ptr::NonNull};

use arrayvec::ArrayVec;

use crate::{
    alloc::Slab,
    error::AllocError,
    handle::{is_value, reserved_word, Handle},
    key::{self, Key},
    node::{LeafRef, NodeRef, RANGE64_SLOTS},
    raw::RawTree,
    tree::{clone_word, MapleTree, Writes},
};

/// The leaves of a copy with their bounds, in index order.
pub(crate) type LeafList<'t> = Vec<(LeafRef<'t>, u64, u64)>;

/// A copy of a tree's nodes, sharing the source's value words, with the
/// copy's leaves listed for the pass that replaces those words.
pub(crate) struct NodeCopy {
    tree: RawTree,
    /// Leaves of `tree`, handed out only borrowed from `self` (so never
    /// past the tree, which frees no node while it is held here).
    leaves: LeafList<'static>,
}

impl NodeCopy {
    /// The copy's leaves (none unless asked for), in index order.
    #[inline]
    pub(crate) fn leaves(&self) -> &[(LeafRef<'_>, u64, u64)] {
        &self.leaves
    }

    #[inline]
    pub(crate) fn into_tree(self) -> RawTree {
        self.tree
    }
}

impl RawTree {
    /// A copy of the node structure sharing this tree's value words, and
    /// (if `want_leaves`) the copy's leaves in index order, for the value
    /// replacement pass.
    pub(crate) fn dup_nodes(&self, want_leaves: bool) -> Result<NodeCopy, AllocError> {
        let mut out = RawTree::new(self.gaps);
        // Tree-wide state is copied whatever the shape (an empty tree can
        // have a pending wrap too).
        out.cyclic_wrapped.set(self.cyclic_wrapped.get());
        let Some(root) = self.root_node() else {
            return Ok(NodeCopy { tree: out, leaves: Vec::new() });
        };
        // Sized once from the entry count (not grown while copying): a
        // leaf holds at least 6 of the at
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
                Ok(NodeCopy { tree: out, leaves })
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
type Waiting<'s, 'c> = (NodeRef<'s>, NodeRef<'c>, u64, u64);

/// The stack of [`Waiting`] nodes: a vector on the call stack for trees
/// of up to [`ON_STACK_HEIGHT`] levels, else on the heap.
trait DupStack<'s, 'c>: core::ops::DerefMut<Target = [Waiting<'s, 'c>]> {
    fn push_node(&mut self, w: Waiting<'s, 'c>);
    fn pop_node(&mut self) -> Option<Waiting<'s, 'c>>;
}

/// Tree heights whose dup stack lives on the call stack (about 6 KiB):
/// every tree of up to several million entries. A heap vector's
/// allocation and free were a tenth of a small tree's duplication.
const ON_STACK_HEIGHT: usize = 8;

impl<'s, 'c, const N: usize> DupStack<'s, 'c> for ArrayVec<Waiting<'s, 'c>, N> {
    fn push_node(&mut self, w: Waiting<'s, 'c>) {
        self.push(w);
    }
    fn pop_node(&mut self) -> Option<Waiting<'s, 'c>> {
        self.pop()
    }
}

impl<'s, 'c> DupStack<'s, 'c> for Vec<Waiting<'s, 'c>> {
    fn push_node(&mut self, w: Waiting<'s, 'c>) {
        self.push(w);
    }
    fn pop_node(&mut self) -> Option<Waiting<'s, 'c>> {
        self.pop()
    }
}

fn dup_from<'c>(
    slab: &mut Slab,
    root: NodeRef<'_>,
    height: usize,
    leaves: Option<&mut LeafList<'c>>,
) -> Result<NodeRef<'c>, AllocError> {
    // At most one level's children wait per level, the root's level aside.
    if height <= ON_STACK_HEIGHT {
        dup_with(slab, root, leaves, ArrayVec::<Waiting, { ON_STACK_HEIGHT * RANGE64_SLOTS + 1 }>::new())
    } else {
        dup_with(slab, root, leaves, Vec::with_capacity(height * RANGE64_SLOTS + 1))
    }
}

fn dup_with<'s, 'c>(
    slab: &mut Slab,
    root: NodeRef<'s>,
    mut leaves: Option<&mut LeafList<'c>>,
    mut stack: impl DupStack<'s, 'c>,
) -> Result<NodeRef<'c>, AllocError> {
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

/// The typed duplications: the node copy above, then each value word
/// replaced by the copy's own.
impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// Duplicates the tree in O(number of nodes), as fork does: the nodes
    /// are copied depth-first, one 256-byte copy each (same shape, no
    /// comparisons or splits), then each value of the copy is replaced in
    /// place by `f(range, value)`.
    ///
    /// On allocation failure the partial copy is freed and `self` is
    /// untouched. If `f` panics, the values it already made are dropped and
    /// the copy's nodes freed.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    /// let t: MapleTree<Box<String>> =
    ///     MapleTree::from_sorted([(0..=9, Box::new("a".to_string())), (20..=29, Box::new("b".into()))]).unwrap();
    /// let lens: MapleTree<U63> = t.try_dup_map(|_, s| U63::new(s.len() as u64).unwrap()).unwrap();
    /// assert_eq!(lens.load(25).map(U63::get), Some(1));
    /// ```
    pub fn try_dup_map<U: Handle>(
        &self,
        mut f: impl FnMut(RangeInclusive<K>, V::Borrowed<'_>) -> U,
    ) -> Result<MapleTree<U, K, W>, AllocError> {
        let copy = self.raw.dup_nodes(true)?;
        // Until every word is replaced, the copy holds words of `self`:
        // the guard frees it without dropping those if `f` panics.
        let mut guard = DupGuard::<U> { copy, replaced: 0, _w: PhantomData };
        for &(leaf, min, max) in guard.copy.leaves() {
            let replace = |lo: u64, hi: u64, w| {
                let v = self.borrow(w)?;
                let new = f(key::span(lo, hi), v).into_raw().as_ptr();
                guard.replaced += 1;
                Some(new)
            };
            // SAFETY: `leaf` belongs to the unpublished copy, which only
            // this function can reach.
            unsafe { leaf.for_each_entry(min, max, replace) };
        }
        Ok(MapleTree::from_raw(guard.into_tree()))
    }

    /// [`try_dup_map`](Self::try_dup_map) with a map function that may
    /// fail, as fork's copy of each VMA can.
    ///
    /// If `f` fails on the entry starting at `index`, the copy is marked at
    /// that point the way the kernel's fork marks it: every entry from
    /// there on becomes a reserved marker (the copy never owned those
    /// values), so tearing the copy down drops exactly the values `f` made
    /// before the failure and stops at the marker. Nothing leaks and `self`
    /// is untouched.
    ///
    /// ```
    /// use maple_tree::{DupError, MapleTree, U63};
    /// let t: MapleTree<U63> = (0..10u64).map(|i| (i * 10..=i * 10 + 5, U63::new(i).unwrap())).collect();
    /// let failed = t.try_dup_map_fallible(|_, v| if v.get() < 4 { Ok(v) } else { Err("no memory") });
    /// assert_eq!(failed.unwrap_err(), DupError::Map { index: 40, error: "no memory" });
    /// let copy = t.try_dup_map_fallible(|_, v| Ok::<_, ()>(v)).unwrap();
    /// assert_eq!(copy.len(), 10);
    /// ```
    pub fn try_dup_map_fallible<U: Handle, E>(
        &self,
        mut f: impl FnMut(RangeInclusive<K>, V::Borrowed<'_>) -> Result<U, E>,
    ) -> Result<MapleTree<U, K, W>, DupError<E>> {
        self.dup_words(|r, v, _| f(r, v).map(|w| w.into_raw().as_ptr()))
    }

    /// [`try_dup_map_fallible`](Self::try_dup_map_fallible) where the map
    /// function may also keep the value: `Ok(None)` gives the copy a clone
    /// of the source's handle (for `Arc` values, one more reference to the
    /// same value: no allocation), `Ok(Some(v))` a new value. Fork uses it
    /// to share the records of VMAs whose copy would be identical.
    pub fn try_dup_share_or_map<E>(
        &self,
        mut f: impl FnMut(RangeInclusive<K>, V::Borrowed<'_>) -> Result<Option<V>, E>,
    ) -> Result<MapleTree<V, K, W>, DupError<E>>
    where
        V: Clone,
    {
        self.dup_words(|r, v, w| {
            f(r, v).map(|new| match new {
                Some(n) => n.into_raw().as_ptr(),
                // SAFETY: `w` is a live value word of `self`.
                None => unsafe { clone_word::<V>(w) },
            })
        })
    }

    /// The engine of the fallible duplications: copies the nodes, then
    /// replaces each value word by what `f` makes of it (a word owned by
    /// the copy, as a `U`). If `f` fails, the rest of the copy is marked
    /// with reserved entries (it never owned those words) and the copy is
    /// dropped: the values made so far, and every node, are freed.
    fn dup_words<U: Handle, E>(
        &self,
        mut f: impl FnMut(RangeInclusive<K>, V::Borrowed<'_>, *mut ()) -> Result<*mut (), E>,
    ) -> Result<MapleTree<U, K, W>, DupError<E>> {
        let copy = self.raw.dup_nodes(true).map_err(DupError::Alloc)?;
        // Until every word is replaced (or marked), the copy holds words of
        // `self`, and the guard knows which.
        let mut guard = DupGuard::<U> { copy, replaced: 0, _w: PhantomData };
        let mut failed: Option<(u64, E)> = None;
        for &(leaf, min, max) in guard.copy.leaves() {
            let replace = |lo: u64, hi: u64, w| {
                if failed.is_some() {
                    // Past the failure point: the kernel's zero entry.
                    return Some(reserved_word());
                }
                let v = self.borrow(w)?;
                match f(key::span(lo, hi), v, w) {
                    Ok(new) => {
                        guard.replaced += 1;
                        Some(new)
                    }
                    Err(e) => {
                        failed = Some((lo, e));
                        Some(reserved_word())
                    }
                }
            };
            // SAFETY: `leaf` belongs to the unpublished copy, which only
            // this function can reach.
            unsafe { leaf.for_each_entry(min, max, replace) };
        }
        let made = guard.replaced;
        let raw = guard.into_tree();
        let copy = MapleTree::<U, K, W>::from_raw(raw);
        match failed {
            None => Ok(copy),
            Some((index, error)) => {
                // Holds `made` values, then markers: dropping it drops those
                // values and frees every node.
                copy.raw.len.set(made);
                drop(copy);
                Err(DupError::Map { index, error })
            }
        }
    }

    /// [`try_dup_map`](Self::try_dup_map) with clones of the values: an
    /// independent copy of the tree.
    pub fn try_dup(&self) -> Result<Self, AllocError>
    where
        V: Clone,
    {
        Self::dup_raw(&self.raw)
    }

    /// Node copy of `raw` plus a clone of every value.
    pub(crate) fn dup_raw(raw: &RawTree) -> Result<Self, AllocError>
    where
        V: Clone,
    {
        // Inline values are copied with the nodes: no value pass.
        let copy = raw.dup_nodes(!V::INLINE)?;
        for &(leaf, min, max) in copy.leaves() {
            // SAFETY: `leaf` belongs to the unpublished copy; `w` is a live
            // handle of the source (the copy only shares it). A panic in
            // `clone` leaks the copy's nodes at worst (a `RawTree` drops
            // no node), never a double drop.
            unsafe { leaf.for_each_entry(min, max, |_, _, w| is_value(w).then(|| clone_word::<V>(w))) };
        }
        Ok(MapleTree::from_raw(copy.into_tree()))
    }
}

/// Why [`MapleTree::try_dup_map_fallible`] failed. Either way nothing
/// leaked and the source is untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupError<E> {
    /// A node allocation failed while copying the structure.
    Alloc(AllocError),
    /// The map function failed on the entry starting at `index`.
    Map {
        /// First index of the entry whose copy failed.
        index: u64,
        /// What the map function returned.
        error: E,
    },
}

impl<E: fmt::Display> fmt::Display for DupError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DupError::Alloc(e) => e.fmt(f),
            DupError::Map { index, error } => write!(f, "copying the entry at {index:#x} failed: {error}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for DupError<E> {}

/// Frees a half-replaced copy: the first `replaced` entries (in index
/// order) are `W`s made by the map function; the rest belong to the source.
struct DupGuard<W: Handle> {
    copy: NodeCopy,
    replaced: usize,
    _w: PhantomData<W>,
}

impl<W: Handle> DupGuard<W> {
    /// The copy, every word replaced (or marked): nothing left to undo.
    fn into_tree(mut self) -> RawTree {
        let copy = core::mem::replace(&mut self.copy, NodeCopy { tree: RawTree::new(false), leaves: Vec::new() });
        core::mem::forget(self);
        copy.into_tree()
    }
}

impl<W: Handle> Drop for DupGuard<W> {
    fn drop(&mut self) {
        if W::INLINE {
            self.copy.tree.clear_with(None);
            return;
        }
        let mut seen = 0;
        let replaced = self.replaced;
        self.copy.tree.clear_with(Some(&mut |w| {
            if !is_value(w) {
                return; // a reserved marker: kept as is by the copy
            }
            if seen < replaced {
                // SAFETY: one of the `W` values made by the map function.
                drop(unsafe { W::from_raw(NonNull::new_unchecked(w)) });
            }
            seen += 1;
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sync::Ordering, MapleTree, U63};

    /// A copy's leaves, read back: bounds, pivots and slot words.
    type Leaves = Vec<(u64, u64, Vec<u64>, Vec<usize>)>;

    /// The source's nodes copied with the waiting stack on the call stack
    /// or on the heap (trees taller than `ON_STACK_HEIGHT` levels).
    fn copy(root: NodeRef<'_>, heap: bool) -> Leaves {
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
