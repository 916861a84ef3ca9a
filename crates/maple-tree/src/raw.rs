//! The untyped tree: root, height, flavour, and the read-side walks.
//!
//! `RawTree` stores values as raw words (see [`crate::Handle`]); the typed
//! [`crate::MapleTree`] owns their meaning. Writes live in `store/`, gap
//! search in `gap.rs`, bulk building in `build.rs` and checking in
//! `validate.rs`.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    mem::MaybeUninit,
    ops::{Deref, DerefMut},
    ptr,
};

use crate::{
    alloc::Slab,
    node::{find_in, slot_bounds, Kind, LeafRef, NoReaders, NodeRef, MAX_HEIGHT, PIVOT_UNUSED},
    sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering},
};

/// One level of a walk: the node, its implied bounds and the slot taken.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Level<'t> {
    pub(crate) node: NodeRef<'t>,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) off: usize,
}

impl<'t> Level<'t> {
    /// Bounds of the slot this level points at.
    #[inline]
    pub(crate) fn slot_range(&self) -> (u64, u64) {
        slot_bounds(self.node.arrays().0, self.off, self.min, self.max)
    }

    /// [`slot_range`](Self::slot_range) of a leaf level, without the
    /// accessors' dispatch on the node kind (leaves have one layout).
    #[inline]
    pub(crate) fn leaf_range(&self) -> (u64, u64) {
        slot_bounds(self.leaf().pivots(), self.off, self.min, self.max)
    }

    /// This level's node as a leaf. A walk's last level is always one; a
    /// panic here means a broken walk, never bad input.
    #[inline]
    pub(crate) fn leaf(&self) -> LeafRef<'t> {
        self.node.as_leaf().expect("the last level of a walk is a leaf")
    }
}

/// An internal node's arrays, found by one dispatch on its kind: what an
/// iterator's step between a parent's leaves reads (each of
/// [`NodeRef`]'s accessors dispatches on its own).
#[derive(Clone, Copy)]
pub(crate) struct Children<'a> {
    /// The node's pivots.
    pub(crate) piv: &'a [AtomicU64],
    /// Its slots.
    slots: &'a [AtomicPtr<()>],
}

impl<'a> Children<'a> {
    /// The arrays of `node`, an internal node.
    #[inline(always)]
    pub(crate) fn of(node: &'a NodeRef<'_>) -> Children<'a> {
        let (piv, slots) = node.arrays();
        Children { piv, slots }
    }

    /// Whether slot `k`, a used one, has a used slot after it.
    #[inline(always)]
    pub(crate) fn has_next(&self, k: usize) -> bool {
        self.piv.get(k).is_some_and(|p| p.load(Ordering::Relaxed) != PIVOT_UNUSED)
    }

    /// Child `k`.
    ///
    /// # Safety
    ///
    /// Slot `k` is used, and the node's children outlive `'t`: the slot
    /// holds an encoded live child.
    #[inline(always)]
    pub(crate) unsafe fn child<'t>(&self, k: usize) -> NodeRef<'t> {
        // SAFETY: a used slot's word (this function's contract).
        unsafe { NodeRef::decode(self.slots[k].load(Ordering::Acquire)) }
    }
}

/// Asks the CPU to start loading the children beside slot `off` of an
/// internal node whose slots are `slots` (the siblings, same parent, that
/// a refill of the child at `off` reads): the one before, and the one
/// after if `next_used`.
///
/// # Safety
///
/// `slots` are a live internal node's, `off` a used slot of it, and
/// `next_used` true only if slot `off + 1` is used too.
#[inline(always)]
pub(crate) unsafe fn prefetch_beside(slots: &[AtomicPtr<()>], off: usize, next_used: bool) {
    if off > 0 {
        // SAFETY: slot `off - 1` is used, as `off` is (the contract); a
        // used slot of an internal node holds an encoded live child.
        unsafe { NodeRef::decode(slots[off - 1].load(Ordering::Acquire)) }.prefetch();
    }
    if next_used {
        // SAFETY: as above; the contract says slot `off + 1` is used.
        unsafe { NodeRef::decode(slots[off + 1].load(Ordering::Acquire)) }.prefetch();
    }
}

/// Walks from `root` (a tree's root node) to the leaf slot containing
/// `index`, pushing every level on `path` (which the caller has emptied):
/// the one descent of [`RawTree::walk_into`] and
/// [`RawTree::walk_to_write`], also used by an iterator's back end, which
/// starts from the root its front end's walk recorded. `WRITE`: in a big
/// tree, ask the CPU for the leaf's siblings on the way down (see
/// [`SIBLING_PREFETCH_DEPTH`]).
///
/// # Safety
///
/// `root` is the root of a tree whose nodes stay alive and unchanged
/// meanwhile but for the single-word slot stores readers may meet (a tree
/// borrowed, or the concurrent tree read under a guard).
#[inline(always)]
pub(crate) unsafe fn descend<'t, const WRITE: bool>(root: NodeRef<'t>, index: u64, path: &mut Path<'t>) {
    let mut node = root;
    let (mut min, mut max) = (0, u64::MAX);
    loop {
        let (piv, slots) = node.arrays();
        let off = find_in(piv, index);
        path.push(Level { node, min, max, off });
        if node.is_leaf() {
            return;
        }
        let (lo, hi) = slot_bounds(piv, off, min, max);
        // SAFETY: a used slot (`find` stays inside the count) of an
        // internal node holds an encoded live child.
        let child = unsafe { NodeRef::decode(slots[off].load(Ordering::Acquire)) };
        child.prefetch();
        if WRITE && child.is_leaf() && path.len() >= SIBLING_PREFETCH_DEPTH {
            // SAFETY: as above; the next slot is used unless `off` ends
            // the node (its upper bound is the node's).
            unsafe { prefetch_beside(slots, off, hi != max) };
        }
        node = child;
        min = lo;
        max = hi;
    }
}

/// Root-to-leaf walk; `path[0]` is the root. A stack of levels with room
/// for the tallest tree, read as a slice. It has no drop glue (its levels
/// are `Copy`), so a reader holding one (a cursor, an iterator) keeps its
/// tree borrowed only for as long as it is used, as any borrow would.
pub(crate) struct Path<'t> {
    len: usize,
    levels: [MaybeUninit<Level<'t>>; MAX_HEIGHT],
}

impl<'t> Path<'t> {
    #[inline(always)]
    pub(crate) const fn new() -> Self {
        Path { len: 0, levels: [const { MaybeUninit::uninit() }; MAX_HEIGHT] }
    }

    /// Adds a level below the last. Panics if the walk has
    /// [`MAX_HEIGHT`] levels already (no tree is that tall).
    #[inline(always)]
    pub(crate) fn push(&mut self, level: Level<'t>) {
        self.levels[self.len] = MaybeUninit::new(level);
        self.len += 1;
    }

    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<Level<'t>> {
        self.len = self.len.checked_sub(1)?;
        // SAFETY: levels below the old length are written.
        Some(unsafe { self.levels[self.len].assume_init() })
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    #[inline(always)]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[Level<'t>] {
        // SAFETY: the first `len` levels (at most `MAX_HEIGHT`: `push`
        // checks) are written; `MaybeUninit<T>` has `T`'s layout.
        unsafe { core::slice::from_raw_parts(self.levels.as_ptr().cast(), self.len) }
    }

    #[inline(always)]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Level<'t>] {
        // SAFETY: as in `as_slice`.
        unsafe { core::slice::from_raw_parts_mut(self.levels.as_mut_ptr().cast(), self.len) }
    }
}

impl Clone for Path<'_> {
    /// The levels in use only.
    #[inline]
    fn clone(&self) -> Self {
        self.iter().copied().collect()
    }
}

impl Default for Path<'_> {
    fn default() -> Self {
        Path::new()
    }
}

impl<'t> Deref for Path<'t> {
    type Target = [Level<'t>];

    #[inline(always)]
    fn deref(&self) -> &[Level<'t>] {
        self.as_slice()
    }
}

impl DerefMut for Path<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.as_mut_slice()
    }
}

impl<'t> Extend<Level<'t>> for Path<'t> {
    #[inline]
    fn extend<I: IntoIterator<Item = Level<'t>>>(&mut self, levels: I) {
        levels.into_iter().for_each(|l| self.push(l));
    }
}

impl<'t> FromIterator<Level<'t>> for Path<'t> {
    #[inline]
    fn from_iter<I: IntoIterator<Item = Level<'t>>>(levels: I) -> Self {
        let mut p = Path::new();
        p.extend(levels);
        p
    }
}

impl core::fmt::Debug for Path<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// `path` with its nodes taken as live for `'u`: for a walk kept beside
/// the tree it walks and carried across writes to that tree (a plain
/// tree's kept walk, a write cursor's position), whose nodes the borrow
/// checker cannot follow through the `&mut` (or writer lock) that changes
/// them. The writers' entry points ([`aim`](RawTree::aim),
/// [`store_walked`](RawTree::store_walked), …) take such a walk under the
/// contract that it is one of the tree as it is now.
///
/// # Safety
///
/// Read as a `Path<'u>`, the walk's nodes are live: it is a walk of the
/// tree as it is (its holder keeps it so: every change to the tree is a
/// write made from it, which answers whether it is still good), or it is
/// only written (walked afresh) until it is one again.
#[inline(always)]
pub(crate) unsafe fn rebind<'a, 'u>(path: &'a mut Path<'_>) -> &'a mut Path<'u> {
    // SAFETY: the two types differ in a lifetime alone; the nodes'
    // liveness is the caller's to keep.
    unsafe { &mut *ptr::from_mut(path).cast::<Path<'u>>() }
}

/// The depth from which a write's walk asks for the leaf's siblings too
/// ([`RawTree::walk_to_write`]): a leaf at this depth or deeper (a tree of
/// four levels or more: hundreds of leaves and up). A random insert into
/// a dense tree overflows its leaf about every other time and then reads
/// a sibling (to push into it), which in a big tree is rarely in the
/// cache; asked for on the way down, it arrives while the leaf is
/// searched and the write worked out. In a small tree everything is
/// cached and the asking would cost instructions for nothing.
const SIBLING_PREFETCH_DEPTH: usize = 3;

/// The height from which lookups ask for the next node as soon as they
/// know it: a tree of at most three levels (at most 273 nodes, 68 KiB; a
/// gap-tracking one 111 nodes) stays in the cache, where asking only costs
/// the instructions.
pub(crate) const PREFETCH_HEIGHT: usize = 4;

/// The untyped tree.
///
/// # Invariants
///
/// * `root` is null (every index empty) or the encoded root node, whose
///   parent word has the root bit; all leaves are `height` levels down.
/// * Every node reachable from `root` is live and owned by this tree; every
///   non-null leaf slot is a handle owned by this tree.
/// * The structural rules checked by `validate()` hold between operations.
///
/// Readers touch only `root`; of the rest, only `len` is written by most
/// writes, so it comes last: `ConcurrentMapleTree` places the struct so
/// that `len` starts a new cache line and a busy writer does not keep
/// invalidating the line every lookup starts from.
#[repr(C)]
pub(crate) struct RawTree {
    pub(crate) root: AtomicPtr<()>,
    pub(crate) height: Shared,
    pub(crate) gaps: bool,
    /// `alloc_cyclic` handed out the key type's last index, so its
    /// `next` wrapped to 0;
    /// the next cyclic allocation reports the wrap (kernel
    /// `MT_FLAGS_ALLOC_WRAPPED`).
    pub(crate) cyclic_wrapped: Shared,
    /// Entries stored (the one field nearly every write changes).
    pub(crate) len: Shared,
    /// Where this tree's nodes come from and go back to.
    pub(crate) slab: Slab,
}

/// A tree no reader can be in: made only from `&mut RawTree`
/// ([`RawTree::exclusive`]) and living no longer than that borrow. The
/// writes that change what a reader could be walking (several words of a
/// node in place, a split into the old leaf, a replaced node freed at
/// once) are methods of this type (`store/leaf.rs`, `store/split.rs`) or
/// take one (`store/rebuild.rs`). The concurrent tree's writer holds only
/// `&RawTree`, so where readers may exist none of them can be reached.
#[derive(Clone, Copy)]
pub(crate) struct Exclusive<'t>(&'t RawTree, NoReaders<'t>);

impl<'t> Exclusive<'t> {
    /// The proof the node writers that change several words in place ask
    /// for.
    #[inline(always)]
    pub(crate) fn proof(self) -> NoReaders<'t> {
        self.1
    }
}

impl Deref for Exclusive<'_> {
    type Target = RawTree;

    #[inline(always)]
    fn deref(&self) -> &RawTree {
        self.0
    }
}

/// How a write reaches the tree: through `&RawTree`, where readers may be
/// walking it, so that every change of more than one word is built in
/// fresh nodes; or through an [`Exclusive`], where none can be, so that
/// the cheaper in-place writes are open too.
pub(crate) trait Access<'t>: Copy + Deref<Target = RawTree> {
    /// The proof that no reader can be in the tree, where there is one.
    fn no_readers(self) -> Option<Exclusive<'t>>;

    /// The tree, for as long as the access lasts (so that the walks made
    /// through it carry that lifetime).
    fn tree(self) -> &'t RawTree;
}

impl<'t> Access<'t> for &'t RawTree {
    #[inline(always)]
    fn no_readers(self) -> Option<Exclusive<'t>> {
        None
    }

    #[inline(always)]
    fn tree(self) -> &'t RawTree {
        self
    }
}

impl<'t> Access<'t> for Exclusive<'t> {
    #[inline(always)]
    fn no_readers(self) -> Option<Exclusive<'t>> {
        Some(self)
    }

    #[inline(always)]
    fn tree(self) -> &'t RawTree {
        self.0
    }
}

/// A word that only the tree's single writer changes and anyone may read
/// (so that a writer holding only `&RawTree` can update it while readers
/// look on).
#[derive(Debug, Default)]
pub(crate) struct Shared(AtomicUsize);

impl Shared {
    const_unless_loom! {
        pub(crate) fn new(v: usize) -> Shared {
            Shared(AtomicUsize::new(v))
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set(&self, v: usize) {
        self.0.store(v, Ordering::Relaxed)
    }
}

// SAFETY: the raw tree is plain data plus owned heap nodes and the chunks
// they live in (no thread-local state); thread-safety of the values is
// enforced by the typed wrapper's bounds.
unsafe impl Send for RawTree {}
// SAFETY: as above. Through `&RawTree` readers only read atomics and
// nodes; the non-atomic parts are the writer's: the slab is changed only
// by the tree's single writer (its methods are `unsafe` and ask for
// exactly that) and read (`held_bytes`, for `stats`) only where no writer
// can run: through `&` to a plain tree, or under the concurrent tree's
// writer lock.
unsafe impl Sync for RawTree {}

impl RawTree {
    /// The proof that no reader can be in this tree while `&mut` lasts.
    #[inline(always)]
    pub(crate) fn exclusive(&mut self) -> Exclusive<'_> {
        // SAFETY: `&mut self` for as long as the proof lives: no reader can
        // be in the tree.
        Exclusive(self, unsafe { NoReaders::new() })
    }

    const_unless_loom! {
        pub(crate) fn new(gaps: bool) -> RawTree {
            RawTree {
                root: AtomicPtr::new(ptr::null_mut()),
                height: Shared::new(0),
                gaps,
                len: Shared::new(0),
                cyclic_wrapped: Shared::new(0),
                slab: Slab::new(),
            }
        }
    }

    /// Kind of the internal nodes of this tree.
    #[inline]
    pub(crate) fn inner_kind(&self) -> Kind {
        if self.gaps {
            Kind::Arange64
        } else {
            Kind::Range64
        }
    }

    #[inline]
    pub(crate) fn root_node(&self) -> Option<NodeRef<'_>> {
        let raw = self.root.load(Ordering::Acquire);
        if raw.is_null() {
            None
        } else {
            // SAFETY: by the type invariant a non-null root is an encoded
            // live node, alive while `self` is borrowed.
            Some(unsafe { NodeRef::decode(raw) })
        }
    }

    /// Whether lookups in this tree ask for each node below as soon as they
    /// know it (see [`PREFETCH_HEIGHT`]). (Not under loom, where reading
    /// the height would be one more point of interleaving for a mere hint.)
    #[inline]
    fn far(&self) -> bool {
        cfg!(not(loom)) && self.height.get() >= PREFETCH_HEIGHT
    }

    /// The value word stored at `index` (null if empty), while a writer may
    /// be replacing nodes: [`load`](Self::load) with the dead-node restart
    /// of [`lookup_rcu`](Self::lookup_rcu). The caller keeps the nodes
    /// alive (an epoch guard).
    #[inline]
    #[cfg_attr(any(not(feature = "std"), loom), allow(dead_code))]
    pub(crate) fn load_rcu(&self, index: u64) -> *mut () {
        let far = self.far();
        'restart: loop {
            let Some(mut node) = self.root_node() else {
                return ptr::null_mut();
            };
            loop {
                let off = node.find(index);
                let slot = node.slot(off);
                if node.is_dead() {
                    continue 'restart;
                }
                if node.is_leaf() {
                    return slot;
                }
                // SAFETY: a live internal node's used slot holds a child,
                // kept allocated by the caller's guard.
                node = unsafe { NodeRef::decode(slot) };
                if far {
                    node.prefetch();
                }
            }
        }
    }

    /// The value word stored at `index` (null if empty).
    #[inline]
    pub(crate) fn load(&self, index: u64) -> *mut () {
        let Some(mut node) = self.root_node() else {
            return ptr::null_mut();
        };
        let far = self.far();
        loop {
            let off = node.find(index);
            if node.is_leaf() {
                return node.slot(off);
            }
            // SAFETY: internal node, used slot (find stays inside count).
            node = unsafe { node.child(off) };
            if far {
                node.prefetch();
            }
        }
    }

    /// [`lookup`](Self::lookup) for readers racing an RCU-mode writer: a
    /// slot read from a node that turned out dead is discarded and the walk
    /// restarts from the root, so the answer comes from nodes that were live
    /// when read. The caller keeps the nodes alive (an epoch guard).
    #[inline]
    pub(crate) fn lookup_rcu(&self, index: u64) -> (u64, u64, *mut ()) {
        let far = self.far();
        'restart: loop {
            let Some(mut node) = self.root_node() else {
                return (0, u64::MAX, ptr::null_mut());
            };
            let (mut min, mut max) = (0, u64::MAX);
            loop {
                let off = node.find(index);
                let lo = node.slot_min(off, min);
                let hi = node.slot_max(off, max);
                let slot = node.slot(off);
                if node.is_dead() {
                    continue 'restart;
                }
                if node.is_leaf() {
                    return (lo, hi, slot);
                }
                // SAFETY: a live internal node's used slot holds a child,
                // kept allocated by the caller's guard.
                node = unsafe { NodeRef::decode(slot) };
                if far {
                    node.prefetch();
                }
                min = lo;
                max = hi;
            }
        }
    }

    /// The range containing `index` and its value word. (The same walk as
    /// [`lookup_rcu`](Self::lookup_rcu): without concurrent writers no dead
    /// node is reachable, so it never restarts.)
    #[inline]
    pub(crate) fn lookup(&self, index: u64) -> (u64, u64, *mut ()) {
        self.lookup_rcu(index)
    }

    /// Walks from the root to the leaf slot containing `index`, recording
    /// every level in `path` (cleared first). Leaves `path` empty for an
    /// empty tree.
    pub(crate) fn walk_into<'t>(&'t self, index: u64, path: &mut Path<'t>) {
        self.walk::<false>(index, path);
    }

    /// [`walk_into`](Self::walk_into) for a write: in a big tree it also
    /// asks the CPU for the leaf's siblings on the way down (see
    /// [`SIBLING_PREFETCH_DEPTH`]).
    pub(crate) fn walk_to_write<'t>(&'t self, index: u64, path: &mut Path<'t>) {
        self.walk::<true>(index, path);
    }

    #[inline(always)]
    fn walk<'t, const WRITE: bool>(&'t self, index: u64, path: &mut Path<'t>) {
        path.clear();
        if let Some(root) = self.root_node() {
            // SAFETY: the tree's root, live while `self` is borrowed; its
            // nodes change only as the callers' contracts allow (a reader
            // of the concurrent tree holds a guard).
            unsafe { descend::<WRITE>(root, index, path) };
        }
    }

    /// Walks `path` to the slot containing `index` and returns that slot's
    /// bounds and word, or `None` if it is empty (or the tree is), for the
    /// concurrent tree's erase of the entry, which then starts from `path`
    /// (its leaf holds the entry's start; the plain tree's erase walks the
    /// same way, from its kept walk when it can, see
    /// [`KeptTree`](crate::kept_walk::KeptTree)). The walk is a write's
    /// ([`walk_to_write`](Self::walk_to_write)): an erase often leaves its
    /// leaf below its minimum fill and takes a sibling in, and asking for
    /// the siblings on the way down hides the miss on the one it takes.
    // Used by the concurrent tree (feature `std`).
    #[cfg_attr(any(not(feature = "std"), loom), allow(dead_code))]
    #[inline]
    pub(crate) fn walk_to_entry<'t>(&'t self, index: u64, path: &mut Path<'t>) -> Option<(u64, u64, *mut ())> {
        self.walk_to_write(index, path);
        Self::entry_at(path)
    }

    /// The bounds and word of the entry in the slot `path` (a walk) ends
    /// at, or `None` if that slot is empty (or the path is).
    #[inline]
    pub(crate) fn entry_at(path: &Path<'_>) -> Option<(u64, u64, *mut ())> {
        let l = path.last()?;
        let w = l.leaf().slot(l.off);
        if w.is_null() {
            return None;
        }
        let (lo, hi) = l.slot_range();
        Some((lo, hi, w))
    }

    /// Points `path` (a walk of this tree made since its last change, or
    /// empty) at the leaf slot containing `index`: within its leaf when
    /// `index` lies inside the leaf's bounds (no walk; the levels above
    /// stay right, as they lead to that leaf), else by a fresh walk.
    ///
    /// # Safety
    ///
    /// `path` is empty or a walk of this tree as it is now: its nodes are
    /// live and its leaf's bounds are the leaf's (a walk made since the
    /// tree last changed, or kept through writes that answered that it is
    /// still good). A stale walk would be read through freed nodes.
    pub(crate) unsafe fn aim(&self, path: &mut Path<'_>, index: u64) {
        // SAFETY: a walk of this tree as it is (the caller's contract).
        let path = unsafe { rebind(path) };
        match path.last_mut() {
            Some(leaf) if leaf.min <= index && index <= leaf.max => {
                // Most often the slot the path points at holds `index`
                // already (an erase of the entry just found, a cursor
                // writing where it stands): checked on its two pivots. A
                // stale offset past the leaf's slots fails the check (the
                // pivot before it is unused, `u64::MAX`, never below).
                let node = leaf.leaf();
                let piv = node.pivots();
                let off = leaf.off;
                let holds = (off == 0 || piv[off - 1].load(Ordering::Relaxed) < index)
                    && (off == piv.len() || index <= piv[off].load(Ordering::Relaxed));
                if !holds {
                    leaf.off = leaf.node.find(index);
                }
            }
            _ => self.walk_into(index, path),
        }
    }

    /// The walk a write to `first` starts from: `at` (a cursor's walk)
    /// aimed at `first`, or, without one, a fresh walk into `own`.
    ///
    /// # Safety
    ///
    /// `at`, if given, is as [`aim`](Self::aim) asks.
    // Used by the concurrent tree (feature `std`).
    #[cfg_attr(any(not(feature = "std"), loom), allow(dead_code))]
    pub(crate) unsafe fn walk_for<'p, 't>(
        &'t self,
        at: Option<&'p mut Path<'_>>,
        own: &'p mut Path<'t>,
        first: u64,
    ) -> &'p mut Path<'t> {
        match at {
            Some(p) => {
                // SAFETY: as our caller promises of `at`: a walk of this
                // tree as it is.
                let p = unsafe { rebind(p) };
                // SAFETY: as above.
                unsafe { self.aim(p, first) };
                p
            }
            None => {
                self.walk_to_write(first, own);
                own
            }
        }
    }

    /// Frees every node, calling `drop_value` for each value word.
    pub(crate) fn clear_with(&mut self, drop_value: Option<&mut dyn FnMut(*mut ())>) {
        let raw = self.root.swap(ptr::null_mut(), Ordering::AcqRel);
        self.height.set(0);
        self.len.set(0);
        if !raw.is_null() {
            if let Some(f) = drop_value {
                let mut values = |n: NodeRef<'_>| {
                    if n.is_leaf() {
                        leaf_words(n, f);
                    }
                };
                // SAFETY: the root was an encoded live node; we just
                // unlinked it, so the subtree is ours alone, and the
                // callback frees nothing.
                unsafe { visit_subtree(NodeRef::decode(raw), &mut values) };
            }
            // SAFETY: `&mut self`: we are the slab's only user, and every
            // node it handed out belongs to the subtree just unlinked (a
            // tree frees or retires a node the moment it leaves the tree,
            // and retired ones are freed before a tree can be cleared).
            unsafe { self.slab.free_all() }
        }
    }
}

/// Calls `f` on every node of the subtree at `node`, children before
/// their parent and left to right (so leaves come in index order). The one
/// subtree visitor: counting, dropping values, freeing and retiring all go
/// through it. A node's children are read from it before `f` sees it, so
/// `f` may free the node it is given.
///
/// # Safety
///
/// `node` is live, and until this returns nobody changes or frees any
/// node of the subtree except `f`, which frees (if anything) only the node
/// it is handed.
pub(crate) unsafe fn visit_subtree<'t>(node: NodeRef<'t>, f: &mut dyn FnMut(NodeRef<'t>)) {
    if !node.is_leaf() {
        for i in 0..node.count() {
            // SAFETY: a live internal node's used slots hold live children;
            // `f` has not been handed this node yet, so it is still live.
            unsafe { visit_subtree(node.child(i), f) };
        }
    }
    f(node);
}

/// Hands every non-null word of `leaf` to `f`, in index order.
pub(crate) fn leaf_words(leaf: NodeRef<'_>, f: &mut dyn FnMut(*mut ())) {
    debug_assert!(leaf.is_leaf());
    for i in 0..leaf.count() {
        let s = leaf.slot(i);
        if !s.is_null() {
            f(s);
        }
    }
}

/// Frees `node` and everything below it, handing each value word to
/// `drop_value`. Without `drop_value` (values that need no drop, or that
/// the caller has taken out) leaf slots are not even read.
///
/// # Safety
///
/// `node` must be live, unreachable from any tree, and freed by nobody
/// else; its nodes came from `slab`, of which the caller is the only user
/// (as for [`Slab::free`]).
pub(crate) unsafe fn free_subtree<'f>(
    slab: &Slab,
    node: NodeRef<'_>,
    mut drop_value: Option<&mut (dyn FnMut(*mut ()) + 'f)>,
) {
    let mut free = |n: NodeRef<'_>| {
        if let (true, Some(f)) = (n.is_leaf(), drop_value.as_deref_mut()) {
            leaf_words(n, f);
        }
        // SAFETY: the caller hands us the only reference to this subtree,
        // from `slab`, and the slab to ourselves; the visitor hands each
        // node over once, after its children.
        unsafe { slab.free(n) };
    };
    // SAFETY: the subtree is live and ours alone (the caller's contract);
    // the callback frees only the node it is handed.
    unsafe { visit_subtree(node, &mut free) };
}

/// What a read cursor keeps of its tree: the way in for a fresh walk to
/// an index, and nothing else. Its field is private to this module, so a
/// read cursor's code cannot reach the tree to walk again from the root
/// to put itself back where it was: on a concurrent tree that walk would
/// land in a newer tree than the one the cursor was reading.
#[derive(Clone, Copy)]
pub(crate) struct Entrance<'a>(&'a RawTree);

impl<'a> Entrance<'a> {
    pub(crate) fn of(tree: &'a RawTree) -> Self {
        Entrance(tree)
    }

    /// A fresh walk to `index` in the tree as it is now.
    pub(crate) fn walk(self, index: u64) -> LeafWalk<'a> {
        LeafWalk::new(self.0, index)
    }
}

/// A walk over leaf slots in index order.
#[derive(Clone)]
pub(crate) struct LeafWalk<'t> {
    pub(crate) path: Path<'t>,
}

impl<'t> LeafWalk<'t> {
    #[inline]
    pub(crate) fn new(tree: &'t RawTree, index: u64) -> LeafWalk<'t> {
        let mut w = LeafWalk { path: Path::new() };
        tree.walk_into(index, &mut w.path);
        w
    }

    /// The current slot's bounds and value word; `None` for an empty tree.
    #[inline]
    pub(crate) fn current(&self) -> Option<(u64, u64, *mut ())> {
        let lv = self.path.last()?;
        let (lo, hi) = lv.slot_range();
        Some((lo, hi, lv.node.slot(lv.off)))
    }
}
