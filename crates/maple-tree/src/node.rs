//! The raw node layer: 256-byte nodes, tagged node pointers, and slot/pivot
//! access. This module knows only structure; ordering, fill and gap rules
//! belong to the modules that add `impl` blocks on top of it.
//!
//! # Layout (64-bit)
//!
//! ```text
//!  leaf / plain internal node (Range64)          gap-tracking internal (Arange64)
//!  +--------+----------------+----------------+   +--------+--------+---------+---------+------+
//!  | parent | pivot[0..15]   | slot[0..16]    |   | parent | pivot  | slot    | gap     | meta |
//!  | 8 B    | 15 x 8 = 120 B | 16 x 8 = 128 B |   | 8 B    | 9x8 B  | 10x8 B  | 10x8 B  | 16 B |
//!  +--------+----------------+----------------+   +--------+--------+---------+---------+------+
//!                    = 256 B                                       = 256 B
//! ```
//!
//! `pivot[i]` is the inclusive upper bound of `slot[i]`; slot `i` covers
//! `pivot[i-1] + 1 ..= pivot[i]` (slot 0 starts at the node's minimum) and
//! the last used slot ends at the node's maximum. A node does not store its
//! own bounds: the walk carries them down from the parent.
//!
//! Unused pivots hold [`PIVOT_UNUSED`] (`u64::MAX`). A used pivot is always
//! below the node's maximum, so it is never `u64::MAX`: the number of used
//! slots is one more than the number of used pivots, and a lookup can scan
//! pivots with `index <= pivot[i]` and stop at the first unused one without
//! knowing the count. This replaces the kernel's "metadata in the last
//! slot" trick; gap nodes keep the offset of their largest gap in `meta`.
//!
//! # Tagged pointers
//!
//! Nodes are 256-byte aligned, so the low 8 bits of a node address are free:
//!
//! ```text
//!  child pointer in a slot / the tree root:
//!   63                                  8 7        2 1   0
//!  +-------------------------------------+----------+-----+
//!  |        node address >> 8            |  0 0 0 0 | kind|   kind: 1 leaf, 2 range64, 3 arange64
//!  +-------------------------------------+----------+-----+
//!  parent word of a node:
//!  +-------------------------------------+----------------+
//!  |        parent address >> 8          | 0 0 0 0 0 0 0 R|   R: this node is the root (address 0)
//!  +-------------------------------------+----------------+
//! ```
//!
//! A node whose parent word points at itself is dead (replaced; waiting to
//! be reclaimed). The kernel also keeps the node's slot in its parent in
//! the low bits; nothing here walks upwards by parent words (cursors keep
//! their path), so they carry none, and a child that only shifts inside its
//! parent keeps its word (rewriting it would cost a cache miss).

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    marker::PhantomData,
    mem::{ManuallyDrop, MaybeUninit},
    ptr::{self, NonNull},
};

use crate::sync::{AtomicPtr, AtomicU64, Ordering};

use arrayvec::ArrayVec;

/// Slots in a leaf or plain internal node.
pub(crate) const RANGE64_SLOTS: usize = 16;
/// Slots in a gap-tracking internal node.
pub(crate) const ARANGE64_SLOTS: usize = 10;
/// Value of a pivot that is not in use.
pub(crate) const PIVOT_UNUSED: u64 = u64::MAX;
/// Deepest tree we support (the kernel's `MAPLE_HEIGHT_MAX`).
pub(crate) const MAX_HEIGHT: usize = 31;

const KIND_MASK: usize = 0b11;
const ROOT_BIT: usize = 0b1;
const ADDR_MASK: usize = !0xff;

/// The three node types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Kind {
    /// Leaf: 16 slots of values.
    Leaf = 1,
    /// Plain internal node: 16 child pointers.
    Range64 = 2,
    /// Gap-tracking internal node: 10 children and the largest gap below each.
    Arange64 = 3,
}

impl Kind {
    #[inline]
    pub(crate) const fn slots(self) -> usize {
        match self {
            Kind::Leaf | Kind::Range64 => RANGE64_SLOTS,
            Kind::Arange64 => ARANGE64_SLOTS,
        }
    }

    #[inline]
    pub(crate) const fn pivots(self) -> usize {
        self.slots() - 1
    }

    /// Minimum number of used slots for a node that is not the root and not
    /// on the right-most spine (kernel `mt_min_slots`).
    #[inline]
    pub(crate) const fn min_fill(self) -> usize {
        match self {
            Kind::Leaf | Kind::Range64 => 6,
            Kind::Arange64 => 4,
        }
    }

    #[inline]
    pub(crate) const fn is_leaf(self) -> bool {
        matches!(self, Kind::Leaf)
    }

    /// The kind in the low bits of a tagged pointer.
    ///
    /// # Safety
    ///
    /// `bits` is the address of a pointer tagged by [`NodeRef::encode`]:
    /// its low bits hold a `Kind` discriminant (1, 2 or 3; never 0).
    #[inline]
    unsafe fn from_bits(bits: usize) -> Kind {
        let tag = bits & KIND_MASK;
        debug_assert!(tag != 0, "an encoded node pointer carries its kind");
        // SAFETY: `Kind` is `repr(usize)` with the discriminants 1, 2 and
        // 3; `encode` tagged the pointer with one of them (the caller's
        // contract), and `KIND_MASK` keeps exactly those bits. (A match
        // with a default arm would cost every level of every walk.)
        unsafe { core::mem::transmute::<usize, Kind>(tag) }
    }
}

#[repr(C)]
pub(crate) struct RangeBody {
    pivot: [AtomicU64; RANGE64_SLOTS - 1],
    slot: [AtomicPtr<()>; RANGE64_SLOTS],
}

#[repr(C)]
pub(crate) struct ArangeBody {
    pivot: [AtomicU64; ARANGE64_SLOTS - 1],
    slot: [AtomicPtr<()>; ARANGE64_SLOTS],
    gap: [AtomicU64; ARANGE64_SLOTS],
    /// Offset of the largest gap.
    meta: AtomicU64,
    _spare: AtomicU64,
}

#[repr(C)]
union Body {
    range: ManuallyDrop<RangeBody>,
    arange: ManuallyDrop<ArangeBody>,
}

/// One tree node: exactly 256 bytes, 256-byte aligned.
///
/// # Invariants
///
/// The node's kind never changes between allocation and free; it is known
/// from the tagged pointer that leads to the node. A node is allocated
/// uninitialised except for its parent word; [`FreshNode::fill`] writes every
/// other field that is ever read before the node becomes reachable.
#[repr(C, align(256))]
pub(crate) struct Node {
    parent: AtomicPtr<Node>,
    body: Body,
}

// (Loom's instrumented atomics are larger than a word, so the layout is
// only pinned for real builds.)
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Node>() == 256);
const _: () = assert!(core::mem::align_of::<Node>() == 256);
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<RangeBody>() == 248);
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<ArangeBody>() == 248);
const _: () = assert!(core::mem::size_of::<usize>() == 8, "maple-tree needs a 64-bit target");

#[cfg(loom)]
impl Node {
    /// An empty node whose loom atomics are all constructed.
    pub(crate) fn loom_empty(kind: Kind) -> Node {
        use core::array::from_fn;
        let body = match kind {
            Kind::Arange64 => Body {
                arange: ManuallyDrop::new(ArangeBody {
                    pivot: from_fn(|_| AtomicU64::new(0)),
                    slot: from_fn(|_| AtomicPtr::new(ptr::null_mut())),
                    gap: from_fn(|_| AtomicU64::new(0)),
                    meta: AtomicU64::new(0),
                    _spare: AtomicU64::new(0),
                }),
            },
            _ => Body {
                range: ManuallyDrop::new(RangeBody {
                    pivot: from_fn(|_| AtomicU64::new(0)),
                    slot: from_fn(|_| AtomicPtr::new(ptr::null_mut())),
                }),
            },
        };
        Node { parent: AtomicPtr::new(ptr::null_mut()), body }
    }
}

/// One (upper bound, slot, gap) triple while a node's content is being
/// rebuilt. For leaves `slot` is a value handle (or null); for internal
/// nodes it is a tagged child pointer and `gap` the child's largest gap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub(crate) last: u64,
    pub(crate) slot: *mut (),
    pub(crate) gap: u64,
}

/// Content of up to a few nodes while a write is planned.
pub(crate) type Content = ArrayVec<Item, 64>;

/// The proof that no reader can be in a tree while `'t` lasts: what the
/// node writers that change several words of a node in place ask for. Only
/// [`Exclusive`](crate::raw::Exclusive) holds one, made with it from
/// `&mut RawTree`; the concurrent tree's writer, which holds `&RawTree`,
/// has none, so those writers cannot be reached where readers may be
/// (nor can an in-place pivot write race with a reader's plain pivot
/// reads, [`load_words`]).
#[derive(Clone, Copy)]
pub(crate) struct NoReaders<'t>(PhantomData<&'t mut ()>);

impl NoReaders<'_> {
    /// # Safety
    ///
    /// No reader can be in the tree while the lifetime lasts: the caller
    /// holds it through `&mut`.
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        NoReaders(PhantomData)
    }
}

/// A typed reference to a live node, read through a borrow `'t` of its
/// tree.
///
/// # Invariants
///
/// `ptr` points to a node allocated by [`crate::alloc`] whose kind is
/// `kind`, and the node stays allocated for as long as this value (or a
/// copy) is used. `'t` is the borrow it was read through: a walk from
/// `&'t RawTree` hands out `NodeRef<'t>` and everything below it, so a
/// reader's nodes (a plain tree borrowed, a concurrent tree read under a
/// guard of the same lifetime) cannot outlive what keeps them allocated.
/// Nodes are freed only by the tree's single writer once unreachable, and
/// through the grace period where readers may exist; the writer's own
/// walks kept across its writes are the documented exception
/// ([`rebind`](crate::raw::rebind)).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeRef<'t> {
    ptr: NonNull<Node>,
    kind: Kind,
    life: PhantomData<&'t Node>,
}

impl core::fmt::Debug for NodeRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}@{:p}", self.kind, self.ptr)
    }
}

/// A node taken out of its tree and marked dead, waiting to be freed
/// (after a grace period where readers may still be in it): an address
/// with nothing to read it by, so it carries no lifetime and can wait in a
/// write's results or the concurrent tree's batches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Unlinked(NonNull<Node>);

impl Unlinked {
    pub(crate) fn as_ptr(self) -> NonNull<Node> {
        self.0
    }
}

impl From<NodeRef<'_>> for Unlinked {
    #[inline]
    fn from(node: NodeRef<'_>) -> Unlinked {
        Unlinked(node.ptr)
    }
}

/// A node just allocated, not yet written: its body is uninitialised, so
/// it has none of [`NodeRef`]'s readers. Writing its content
/// ([`fill`](Self::fill), [`copy_of`](Self::copy_of)) is the only way to a
/// `NodeRef`, so no node can be read before it is written. Nothing can
/// reach it yet either, so those writes need no care for readers.
///
/// # Invariants
///
/// `ptr` is a cell handed out by [`Slab::alloc`](crate::alloc::Slab::alloc)
/// for a node of kind `kind`, with its parent word initialised (null) and
/// nothing else, reachable from no tree.
#[must_use = "a fresh node is freed by its slab only when the slab is"]
pub(crate) struct FreshNode {
    ptr: NonNull<Node>,
    kind: Kind,
}

impl FreshNode {
    /// Takes a newly allocated cell as a node of `kind`, and sets its
    /// parent word (to null).
    ///
    /// # Safety
    ///
    /// `ptr` is a node-sized, node-aligned cell owned by the caller and
    /// reachable from nowhere.
    #[inline]
    pub(crate) unsafe fn new(ptr: NonNull<Node>, kind: Kind) -> FreshNode {
        // SAFETY: the cell is allocated and ours (the caller's contract);
        // writing one field through a raw pointer reads nothing of the
        // uninitialised rest.
        unsafe { ptr::addr_of_mut!((*ptr.as_ptr()).parent).write(AtomicPtr::new(ptr::null_mut())) };
        FreshNode { ptr, kind }
    }

    /// The cell's address (for the slab, to free a cell never filled).
    pub(crate) fn as_ptr(&self) -> NonNull<Node> {
        self.ptr
    }

    /// Writes `items` (at most `kind.slots()`, at least one) as the node's
    /// content, as [`NodeRef::overwrite`] does, and hands the node out.
    #[inline]
    pub(crate) fn fill<'t>(self, items: &[Item]) -> NodeRef<'t> {
        // SAFETY: the cell is allocated for a node of this kind (type
        // invariant); its content is written right below, before anything
        // reads it.
        let node = unsafe { NodeRef::new(self.ptr, self.kind) };
        node.write_items(items);
        node
    }

    /// [`fill`](Self::fill) for a leaf, from its bounds and words apart
    /// (as [`LeafRef::write_run`] writes them).
    #[inline]
    pub(crate) fn fill_leaf<'t>(self, last: &[u64], slot: &[*mut ()]) -> NodeRef<'t> {
        assert!(self.kind.is_leaf(), "a leaf's content written into an internal node");
        // SAFETY: the cell is allocated for a leaf (type invariant and the
        // assertion); its content is written right below, before anything
        // reads it.
        let node = unsafe { NodeRef::new(self.ptr, self.kind) };
        // SAFETY: the leaf is fresh: nothing else can reach it.
        unsafe { LeafRef(node).write_words(last, slot, 0) };
        node
    }

    /// Makes the node a copy of `src` (a live node of the same kind), word
    /// for word, parent word included (the caller sets it), and hands it
    /// out.
    pub(crate) fn copy_of<'t>(self, src: NodeRef<'_>) -> NodeRef<'t> {
        assert_eq!(src.kind, self.kind, "a node copied into a node of another kind");
        // SAFETY: `src` is live (`NodeRef`'s invariant) and `self` is an
        // allocated cell nobody else can reach (this type's), so the two
        // node-sized regions are valid and distinct; `src`'s words are
        // atomics that change only under the tree's writer, whom the
        // caller's borrow of the source tree keeps away.
        unsafe { ptr::copy_nonoverlapping(src.ptr.as_ptr(), self.ptr.as_ptr(), 1) };
        // SAFETY: every word was just written, from a node of this kind.
        unsafe { NodeRef::new(self.ptr, self.kind) }
    }
}

impl core::fmt::Debug for FreshNode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fresh {:?}@{:p}", self.kind, self.ptr)
    }
}

impl<'t> NodeRef<'t> {
    /// # Safety
    ///
    /// `ptr` must point to a live node of kind `kind` that stays live for
    /// `'t`.
    #[inline]
    pub(crate) unsafe fn new(ptr: NonNull<Node>, kind: Kind) -> NodeRef<'t> {
        NodeRef { ptr, kind, life: PhantomData }
    }

    /// Decodes a tagged child pointer (from a slot or the root).
    ///
    /// # Safety
    ///
    /// `raw` must be a tagged pointer produced by [`NodeRef::encode`] for a
    /// node that outlives every use of the returned value.
    #[inline]
    pub(crate) unsafe fn decode(raw: *mut ()) -> NodeRef<'t> {
        // SAFETY: `raw` came from `encode` (this function's contract).
        let kind = unsafe { Kind::from_bits(raw.addr()) };
        let ptr = raw.map_addr(|a| a & ADDR_MASK).cast::<Node>();
        // SAFETY: the caller guarantees `raw` came from `encode` of a live
        // node, so the untagged address is that node's non-null address.
        unsafe { NodeRef::new(NonNull::new_unchecked(ptr), kind) }
    }

    /// The tagged pointer stored in a parent's slot or the tree root.
    #[inline]
    pub(crate) fn encode(self) -> *mut () {
        self.ptr.as_ptr().cast::<()>().map_addr(|a| a | self.kind as usize)
    }

    #[inline]
    pub(crate) fn kind(self) -> Kind {
        self.kind
    }

    #[inline]
    pub(crate) fn as_ptr(self) -> NonNull<Node> {
        self.ptr
    }

    #[inline]
    pub(crate) fn is_leaf(self) -> bool {
        self.kind.is_leaf()
    }

    #[inline]
    fn node(&self) -> &Node {
        #[cfg(loom)]
        crate::sync::freed::check(self.ptr.as_ptr().addr());
        // SAFETY: by the type invariant the node is live.
        unsafe { self.ptr.as_ref() }
    }

    #[inline]
    fn pivot_array(&self) -> &[AtomicU64] {
        let node = self.node();
        // SAFETY: the kind (type invariant of `Node`) says which union
        // field was written at allocation; both are plain atomics.
        unsafe {
            match self.kind {
                Kind::Arange64 => &node.body.arange.pivot[..],
                _ => &node.body.range.pivot[..],
            }
        }
    }

    #[inline]
    fn slot_array(&self) -> &[AtomicPtr<()>] {
        let node = self.node();
        // SAFETY: as in `pivot_array`.
        unsafe {
            match self.kind {
                Kind::Arange64 => &node.body.arange.slot[..],
                _ => &node.body.range.slot[..],
            }
        }
    }

    /// The pivot and slot arrays together, for a walk that reads both at
    /// one level (one dispatch on the kind instead of one per access; the
    /// write walk, with [`find_in`]).
    #[inline]
    pub(crate) fn arrays(&self) -> (&[AtomicU64], &[AtomicPtr<()>]) {
        (self.pivot_array(), self.slot_array())
    }

    /// A gap node's body, to read. (Only a tree that tracks gaps asks for
    /// them, and all its internal nodes are gap nodes: debug-asserted.)
    #[inline]
    fn arange(&self) -> &ArangeBody {
        debug_assert_eq!(self.kind, Kind::Arange64);
        // SAFETY: reading is sound on any node: the `arange` view of a
        // leaf's or plain node's body covers its pivots and slots, every
        // word of which `fill` (or a splice) wrote before the node was
        // reachable; on a gap node it is the node's own layout.
        unsafe { &self.node().body.arange }
    }

    /// A gap node's body, to write. Panics on any other node: a gap
    /// written into a leaf or plain node would land on a pivot or a child
    /// pointer, which later walks would follow.
    #[inline]
    fn arange_to_write(&self) -> &ArangeBody {
        assert_eq!(self.kind, Kind::Arange64, "gap written into a node without gaps");
        self.arange()
    }

    /// This node as a leaf, if it is one.
    #[inline]
    pub(crate) fn as_leaf(self) -> Option<LeafRef<'t>> {
        self.is_leaf().then_some(LeafRef(self))
    }

    #[inline]
    pub(crate) fn pivot(self, i: usize) -> u64 {
        self.pivot_array()[i].load(Ordering::Relaxed)
    }

    /// Sets pivot `i` (a used one) to `v`: the bound between slot `i` and
    /// slot `i + 1` moves.
    ///
    /// # Safety
    ///
    /// The node is in the tree the proof is for (a reader between this
    /// store and the rest of the write could be sent to a slot whose
    /// content does not cover its index: the proof rules readers out); the
    /// caller is its only writer. `v` keeps the pivots ascending, and what lies below slots
    /// `i` and `i + 1` covers their new bounds once the write is done.
    #[inline]
    pub(crate) unsafe fn set_pivot(self, _: NoReaders<'_>, i: usize, v: u64) {
        self.pivot_array()[i].store(v, Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn slot(self, i: usize) -> *mut () {
        self.slot_array()[i].load(Ordering::Acquire)
    }

    /// Stores `v` in slot `i`: one word, so a reader sees the old word or
    /// the new one, never a mix (the slot stores readers may meet).
    ///
    /// # Safety
    ///
    /// `v` is a word this slot may hold, as the walks and the value layer
    /// take for granted: in a leaf, null, a reserved marker or a value
    /// handle the tree owns from now on; in an internal node, the encoded
    /// pointer of a live node of the level below, covering the slot's
    /// range. `i` is a used slot.
    #[inline]
    pub(crate) unsafe fn set_slot(self, i: usize, v: *mut ()) {
        self.slot_array()[i].store(v, Ordering::Release)
    }

    /// A gap node's largest gaps below each child, read as a whole (the
    /// gap search scans them).
    #[inline]
    pub(crate) fn gap_array(&self) -> &[AtomicU64] {
        &self.arange().gap
    }

    #[inline]
    pub(crate) fn gap(self, i: usize) -> u64 {
        self.arange().gap[i].load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn gap_offset(self) -> usize {
        self.arange().meta.load(Ordering::Relaxed) as usize
    }

    #[inline]
    fn set_gap_offset(self, off: usize) {
        self.arange_to_write().meta.store(off as u64, Ordering::Relaxed)
    }

    /// Asks the CPU to start loading the whole node (its four cache lines)
    /// so that the pivot scan and the slot read that follows it overlap
    /// instead of missing the cache one after the other.
    #[inline(always)]
    pub(crate) fn prefetch(self) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.ptr.as_ptr().cast::<i8>();
            // SAFETY: prefetching has no architectural effect and is valid
            // for any address; these are inside the live 256-byte node.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(128));
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(192));
            }
        }
    }

    /// True if slot `i` (a used slot) is followed by another used slot:
    /// its pivot is in use. One load, unlike [`count`](Self::count).
    #[inline]
    pub(crate) fn has_next(self, i: usize) -> bool {
        i < self.kind.pivots() && self.pivot(i) != PIVOT_UNUSED
    }

    /// Number of used slots: one more than the used pivots. A used pivot
    /// ends a slot that has a successor, so it is below `u64::MAX`, and the
    /// unused ones are `u64::MAX`: the used pivots are the pivots below
    /// `u64::MAX`, counted as [`find`](Self::find) counts: the two-step
    /// search, cheaper than a linear scan or a binary search.
    #[inline]
    pub(crate) fn count(self) -> usize {
        self.find(PIVOT_UNUSED) + 1
    }

    /// Offset of the slot whose range contains `index` (which must lie
    /// inside the node's bounds): the number of pivots below `index`.
    /// Unused pivots are `u64::MAX`, never below, so no count is needed.
    /// Every walk finds its slot this way (lookups, writes, the gap
    /// search): see [`count_below`] for how, and docs/DESIGN.md, "Finding a
    /// slot", for what it was measured against.
    #[inline]
    pub(crate) fn find(self, index: u64) -> usize {
        let node = self.node();
        // SAFETY: as in `pivot_array`: the kind says which union field was
        // written at allocation; both are plain atomics.
        unsafe {
            match self.kind {
                Kind::Arange64 => count_below::<9, 3, 2>(&node.body.arange.pivot, index),
                _ => count_below::<15, 4, 3>(&node.body.range.pivot, index),
            }
        }
    }

    /// [`find`](Self::find) for an `index` known to lie at or after slot
    /// `from` (a used slot): steps forward from there, which beats the full
    /// scan when the answer is a slot or two away (a write's right end,
    /// usually in the slot its left end is in, or the next).
    #[inline]
    pub(crate) fn find_from(self, from: usize, index: u64) -> usize {
        let piv = self.pivot_array();
        let mut n = from;
        while n < piv.len() && piv[n].load(Ordering::Relaxed) < index {
            n += 1;
        }
        n
    }

    /// Inclusive upper bound of slot `i` in a node whose maximum is `max`.
    #[inline]
    pub(crate) fn slot_max(self, i: usize, max: u64) -> u64 {
        slot_hi(self.pivot_array(), i, max)
    }

    /// Lower bound of slot `i` in a node whose minimum is `min`.
    #[inline]
    pub(crate) fn slot_min(self, i: usize, min: u64) -> u64 {
        slot_lo(self.pivot_array(), i, min)
    }

    /// The child in slot `i` of an internal node.
    ///
    /// # Safety
    ///
    /// `self` must be an internal node and `i` a used slot; the child must
    /// outlive every use of the returned reference (it does while the tree is
    /// borrowed).
    #[inline]
    pub(crate) unsafe fn child(self, i: usize) -> NodeRef<'t> {
        debug_assert!(!self.is_leaf());
        // SAFETY: used slots of internal nodes hold encoded live children.
        unsafe { NodeRef::decode(self.slot(i)) }
    }

    /// The raw parent word.
    #[inline]
    pub(crate) fn parent_word(self) -> *mut Node {
        self.node().parent.load(Ordering::Acquire)
    }

    /// Records `parent` as this node's parent. (The word holds no slot
    /// offset, unlike the kernel's: nothing navigates by it, and without
    /// it the children that only shift within their parent keep their
    /// words, where rewriting them costs a cache miss each.)
    #[inline]
    pub(crate) fn set_parent(self, parent: NodeRef<'_>) {
        self.node().parent.store(parent.ptr.as_ptr(), Ordering::Release)
    }

    /// Marks this node as the root.
    #[inline]
    pub(crate) fn set_root_parent(self) {
        self.node().parent.store(ptr::without_provenance_mut(ROOT_BIT), Ordering::Release)
    }

    /// Marks this node dead: its parent word points at itself.
    #[inline]
    pub(crate) fn mark_dead(self) {
        self.node().parent.store(self.ptr.as_ptr(), Ordering::Release)
    }

    /// True once the node has been replaced (its parent word points at
    /// itself): a reader that meets it restarts from the root.
    #[inline]
    pub(crate) fn is_dead(self) -> bool {
        self.parent_word() == self.ptr.as_ptr()
    }

    /// Decoded parent word: `None` for the root, else the parent's address.
    pub(crate) fn parent_info(self) -> Option<usize> {
        let w = self.parent_word();
        if w.addr() & ROOT_BIT != 0 {
            None
        } else {
            Some(w.addr())
        }
    }

    #[inline]
    pub(crate) fn addr(self) -> usize {
        self.ptr.as_ptr().addr()
    }

    /// Largest empty range below this node (saturating at `u64::MAX`).
    pub(crate) fn max_gap(self, min: u64, max: u64) -> u64 {
        match self.kind {
            Kind::Arange64 => {
                // Unused gaps are 0, so the maximum over all ten is right.
                self.arange().gap.iter().map(|g| g.load(Ordering::Relaxed)).max().unwrap_or(0)
            }
            Kind::Leaf => {
                let piv = self.pivot_array();
                let slots = self.slot_array();
                let mut best = 0;
                let mut lo = min;
                // A used pivot ends its slot below the node's maximum; the
                // first unused one means the slot is the last, ending at `max`.
                let mut i = 0;
                while i < piv.len() {
                    let hi = piv[i].load(Ordering::Relaxed);
                    if hi == PIVOT_UNUSED {
                        break;
                    }
                    if slots[i].load(Ordering::Relaxed).is_null() {
                        best = best.max(hi - lo + 1);
                    }
                    lo = hi + 1;
                    i += 1;
                }
                if slots[i].load(Ordering::Relaxed).is_null() {
                    best = best.max(range_len(lo, max));
                }
                best
            }
            Kind::Range64 => u64::MAX,
        }
    }

    /// Appends the node's items (with `max` as the last bound) to `out`.
    pub(crate) fn read_items(self, max: u64, range: core::ops::Range<usize>, out: &mut Content) {
        // The arrays fetched once (one dispatch on the kind, not three per
        // item): this runs for every node a rebuild rewrites.
        let (piv, slots) = self.arrays();
        let gaps = (self.kind == Kind::Arange64).then(|| &self.arange().gap);
        for i in range {
            let gap = gaps.map_or(0, |g| g[i].load(Ordering::Relaxed));
            out.push(Item { last: slot_hi(piv, i, max), slot: slots[i].load(Ordering::Acquire), gap });
        }
    }

    /// Overwrites the content of a node in the tree with `items` (as
    /// [`FreshNode::fill`] writes a fresh one).
    ///
    /// # Safety
    ///
    /// The node is in the tree the proof is for, or fresh (its words
    /// change one after the other; the proof rules readers out); the
    /// caller is its only writer. `items` are what the node's place in the
    /// tree allows (the bounds inside the node's, the
    /// last one its maximum; words as for [`set_slot`](Self::set_slot)).
    pub(crate) unsafe fn overwrite(self, _: NoReaders<'_>, items: &[Item]) {
        self.write_items(items);
    }

    /// [`overwrite`](Self::overwrite) where the first `keep` items are the
    /// node's own already, each in its slot with its bound (a used pivot):
    /// their words are left as they are.
    ///
    /// # Safety
    ///
    /// As for [`overwrite`](Self::overwrite); and `keep` is below the
    /// node's slot count and `items[..keep]` are the node's first `keep`
    /// slots, as [`read_items`](Self::read_items) would read them now.
    pub(crate) unsafe fn overwrite_from(self, _: NoReaders<'_>, items: &[Item], keep: usize) {
        #[cfg(debug_assertions)]
        {
            let mut own = Content::new();
            debug_assert!(keep == 0 || keep < self.count(), "a kept item ends on the node's maximum");
            self.read_items(u64::MAX, 0..keep, &mut own);
            debug_assert!(
                own.iter().zip(items).all(|(a, b)| a.last == b.last && a.slot == b.slot),
                "keep {keep}: {own:?} against {items:?}"
            );
        }
        self.write_items_from(items, keep);
    }

    /// Writes `items` (at most `kind.slots()`, at least one) as the node's
    /// content; unused pivots become [`PIVOT_UNUSED`], unused slots null,
    /// and in a gap node the largest-gap offset is found. The parent word is
    /// left alone.
    fn write_items(self, items: &[Item]) {
        self.write_items_from(items, 0);
    }

    /// [`write_items`](Self::write_items) skipping the words of the first
    /// `keep` items, which hold them already. (Inlined into its two
    /// callers, so that fresh nodes, with no items to skip, pay nothing
    /// for the skipping.)
    #[inline(always)]
    fn write_items_from(self, items: &[Item], keep: usize) {
        let (piv, slots) = self.arrays();
        debug_assert!(!items.is_empty() && items.len() <= slots.len());
        let n = items.len();
        // Every pivot but the last item's is its bound; the rest unused.
        let kp = keep.min(n - 1);
        for (p, it) in piv[kp..].iter().zip(&items[kp..n - 1]) {
            p.store(it.last, Ordering::Relaxed);
        }
        for p in &piv[(n - 1).min(piv.len())..] {
            p.store(PIVOT_UNUSED, Ordering::Relaxed);
        }
        let ks = keep.min(n);
        for (s, it) in slots[ks..].iter().zip(&items[ks..]) {
            s.store(it.slot, Ordering::Release);
        }
        for s in &slots[n..] {
            s.store(ptr::null_mut(), Ordering::Release);
        }
        if self.kind == Kind::Arange64 {
            let gaps = &self.arange_to_write().gap;
            let mut best = 0;
            for (i, g) in gaps.iter().enumerate() {
                let v = items.get(i).map_or(0, |it| it.gap);
                g.store(v, Ordering::Relaxed);
                if v > items[best].gap {
                    best = i;
                }
            }
            self.set_gap_offset(best);
        }
    }

    /// [`LeafRef::splice`] for an internal node: `items`
    /// are child pointers with (in a gap node) their largest gaps; the
    /// largest-gap offset is found again. The callers set the parent words
    /// of children new to this node.
    ///
    /// # Safety
    ///
    /// As for `LeafRef::splice`: the node is in the tree the proof is for.
    pub(crate) unsafe fn splice_internal(self, _: NoReaders<'_>, from: usize, to: usize, count: usize, items: &[Item]) {
        debug_assert!(!self.is_leaf());
        let (piv, slots) = self.arrays();
        let gaps = (self.kind == Kind::Arange64).then(|| &self.arange_to_write().gap[..]);
        // SAFETY: this function's contract: no reader is in the node, and
        // the caller is the only writer.
        unsafe { splice_words(piv, slots, gaps, from, to, count, items) };
        if gaps.is_some() {
            self.refresh_gap_offset();
        }
    }

    /// Recomputes the largest-gap offset of a gap node.
    fn refresh_gap_offset(self) {
        let (mut best, mut best_gap) = (0, 0);
        for (i, gap) in self.arange().gap.iter().enumerate() {
            let gap = gap.load(Ordering::Relaxed); // unused gaps are 0
            if gap > best_gap {
                best = i;
                best_gap = gap;
            }
        }
        self.set_gap_offset(best);
    }

    /// Records `g` as the largest gap below child `off` of a gap node and
    /// keeps the node's largest-gap offset right: returns the node's own
    /// largest gap afterwards, or `None` if child `off`'s gap was already
    /// `g` (nothing changed, here or above). The offset is found again by a
    /// scan only when the child that held the largest gap shrank.
    pub(crate) fn set_child_gap(self, off: usize, g: u64) -> Option<u64> {
        let a = self.arange_to_write();
        let slot = &a.gap[off];
        let old = slot.load(Ordering::Relaxed);
        if old == g {
            return None;
        }
        slot.store(g, Ordering::Relaxed);
        let best = a.meta.load(Ordering::Relaxed) as usize;
        if best != off {
            let best_gap = a.gap[best].load(Ordering::Relaxed);
            if g <= best_gap {
                return Some(best_gap);
            }
            a.meta.store(off as u64, Ordering::Relaxed);
            return Some(g);
        } else if g > old {
            return Some(g);
        }
        // Child `off` held the largest gap and shrank.
        self.refresh_gap_offset();
        Some(self.gap(self.gap_offset()))
    }
}

/// A node known to be a leaf (checked when the value is made, by
/// [`NodeRef::as_leaf`] or [`Level::leaf`](crate::raw::Level::leaf)): the
/// accessors that read a node as a leaf live here, so the compiler keeps
/// them off internal nodes. (Leaves and plain internal nodes share one
/// layout, gap nodes do not: read as a leaf, a gap node's last slot would
/// be its spare word, which is never written.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct LeafRef<'t>(NodeRef<'t>);

impl<'t> From<LeafRef<'t>> for NodeRef<'t> {
    #[inline]
    fn from(leaf: LeafRef<'t>) -> NodeRef<'t> {
        leaf.0
    }
}

impl<'t> LeafRef<'t> {
    /// The leaf's pivots, without the layout dispatch of a [`NodeRef`]'s
    /// accessors (leaves have one layout).
    #[inline]
    pub(crate) fn pivots(&self) -> &[AtomicU64] {
        // SAFETY: the node is a leaf (this type's invariant), whose body is
        // the `range` layout, every word of it written by `fill` or a
        // splice before the leaf was reachable.
        unsafe { &self.0.node().body.range.pivot[..] }
    }

    /// The leaf's slots (see [`pivots`](Self::pivots)).
    #[inline]
    pub(crate) fn slots(&self) -> &[AtomicPtr<()>] {
        // SAFETY: as in `pivots`.
        unsafe { &self.0.node().body.range.slot[..] }
    }

    /// Slot `i`'s word.
    #[inline]
    pub(crate) fn slot(self, i: usize) -> *mut () {
        self.slots()[i].load(Ordering::Acquire)
    }

    /// Rewrites the leaf with `last.len()` slots (at least one, at most
    /// sixteen): slot `i` ends at `last[i]` (the last one at the leaf's
    /// maximum, so its bound is not stored) and holds `slot[i]`. The
    /// words of the first `keep` slots are left as they are. Unused
    /// pivots become [`PIVOT_UNUSED`], unused slots null.
    ///
    /// # Safety
    ///
    /// As for [`NodeRef::overwrite_from`]: the leaf is in the tree the
    /// proof is for; the bounds fit the leaf's place in the tree; `keep` is below its
    /// slot count and the first `keep` slots given are its own already.
    pub(crate) unsafe fn write_run(self, _: NoReaders<'_>, last: &[u64], slot: &[*mut ()], keep: usize) {
        #[cfg(debug_assertions)]
        {
            let count = self.0.count();
            debug_assert!(keep == 0 || keep < count, "a kept slot ends on the leaf's maximum");
            for i in 0..keep.min(last.len()) {
                debug_assert!(
                    self.slot(i) == slot[i] && (i + 1 == last.len() || self.0.pivot(i) == last[i]),
                    "kept slot {i} is not the leaf's own"
                );
            }
        }
        // SAFETY: this function's contract.
        unsafe { self.write_words(last, slot, keep) };
    }

    /// The writes of [`write_run`](Self::write_run) (also of a fresh leaf's
    /// [`fill_leaf`](FreshNode::fill_leaf)).
    ///
    /// # Safety
    ///
    /// No reader can be in the leaf (as for `write_run`), or it is fresh.
    #[inline(always)]
    unsafe fn write_words(self, last: &[u64], slot: &[*mut ()], keep: usize) {
        let (piv, slots) = (self.pivots(), self.slots());
        let n = last.len();
        assert!(n >= 1 && n == slot.len() && n <= slots.len(), "a leaf written with {n} slots");
        let kp = keep.min(n - 1);
        let ks = keep.min(n);
        // SAFETY: nobody else reads or writes the leaf (this function's
        // contract).
        unsafe {
            store_words(&last[kp..n - 1], &piv[kp..n - 1]);
            store_ptrs(&slot[ks..], &slots[ks..n]);
        }
        for p in &piv[n - 1..] {
            p.store(PIVOT_UNUSED, Ordering::Relaxed);
        }
        for s in &slots[n..] {
            s.store(ptr::null_mut(), Ordering::Release);
        }
    }

    /// Replaces slots `from..to` of a leaf that has `count` used slots with
    /// `items`, shifting the slots after them in place. The result must fit
    /// (at most 16 slots). When `items` are as many as the slots replaced,
    /// `count` is not read (callers may pass 0). Inlined into its callers,
    /// where `items`' length is often a constant.
    ///
    /// # Safety
    ///
    /// The leaf is in the tree the proof is for: several words change one
    /// after the other, and a reader between them could pair a pivot with
    /// the wrong slot and hand out a value the writer is about to drop
    /// (and the shifted words move as plain accesses, which would race
    /// with a reader's); the proof rules readers out. The caller is the
    /// tree's only writer.
    #[inline]
    pub(crate) unsafe fn splice(self, _: NoReaders<'_>, from: usize, to: usize, count: usize, items: &[Item]) {
        // SAFETY: this function's contract: no reader is in the leaf, and
        // the caller is the only writer.
        unsafe { splice_words(self.pivots(), self.slots(), None, from, to, count, items) };
    }

    /// Calls `f(first, last, word)` for every non-empty slot of a leaf
    /// with bounds `[min, max]`, in order, and stores the word `f` returns
    /// (if any) in place of the old one.
    ///
    /// # Safety
    ///
    /// `self` is a leaf no other thread can reach while this runs (an
    /// unpublished copy, or a tree held through `&mut`): a slot rewritten
    /// here must not be read half-way through a replacement by a reader
    /// who then drops or frees what it pointed to.
    pub(crate) unsafe fn for_each_entry(
        self,
        min: u64,
        max: u64,
        mut f: impl FnMut(u64, u64, *mut ()) -> Option<*mut ()>,
    ) {
        let piv = self.pivots();
        let slots = self.slots();
        let mut lo = min;
        for (i, s) in slots.iter().enumerate() {
            let p = if i < piv.len() { piv[i].load(Ordering::Relaxed) } else { PIVOT_UNUSED };
            let hi = p.min(max);
            let w = s.load(Ordering::Relaxed);
            if !w.is_null() {
                if let Some(new) = f(lo, hi, w) {
                    s.store(new, Ordering::Relaxed);
                }
            }
            if hi == max {
                break;
            }
            lo = hi + 1;
        }
    }
}

/// Copies `n` elements from `src` to `dst`: up to 31 (a node's arrays
/// hold 16 at most) as fixed-size block copies of 16, 8, 4, 2 and 1
/// elements, which the compiler inlines as a few vector moves, instead of
/// one `memcpy` of a length known only at run time (a call and a dispatch
/// on the length, dearer than the copy for a node's few dozen bytes);
/// more by one `memcpy`.
///
/// # Safety
///
/// As for [`ptr::copy_nonoverlapping`] of `n` elements.
#[cfg(not(loom))]
#[inline(always)]
unsafe fn copy_small<T: Copy>(src: *const T, dst: *mut T, n: usize) {
    if n >= 32 {
        // SAFETY: this function's contract.
        unsafe { ptr::copy_nonoverlapping(src, dst, n) };
        return;
    }
    let mut at = 0;
    for block in [16, 8, 4, 2, 1] {
        if n & block != 0 {
            // SAFETY: `at + block <= n`: the blocks taken are the set bits
            // of `n` (below 32), largest first; this function's contract
            // covers all `n` elements.
            unsafe { ptr::copy_nonoverlapping(src.add(at), dst.add(at), block) };
            at += block;
        }
    }
}

/// Copies the words of `src` into `dst` (of the same length) as plain
/// loads, which the compiler may merge and vectorise (atomic loads it may
/// not): a block move of a node's run of pivots.
///
/// # Safety
///
/// Nobody writes `src` meanwhile: the caller is the tree's only writer
/// (readers only read, and plain reads beside their atomic reads are no
/// race), or `src` is pivots of a node readers can reach (nothing writes
/// those in place then: every in-place writer of pivots asks for
/// [`NoReaders`], which the concurrent tree's writer cannot have; the
/// writes readers may meet are slot stores).
#[inline]
pub(crate) unsafe fn load_words(src: &[AtomicU64], dst: &mut [MaybeUninit<u64>]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(not(loom))]
    // SAFETY: `AtomicU64` has `u64`'s size and alignment (and
    // `MaybeUninit<u64>` too); both ranges are valid for `len` words and
    // distinct (one is a local buffer); no concurrent write (this
    // function's contract).
    unsafe {
        copy_small(src.as_ptr().cast::<u64>(), dst.as_mut_ptr().cast::<u64>(), src.len())
    };
    #[cfg(loom)]
    for (d, s) in dst.iter_mut().zip(src) {
        d.write(s.load(Ordering::Relaxed));
    }
}

/// [`load_words`] for slot words.
///
/// # Safety
///
/// As for [`load_words`].
#[inline]
pub(crate) unsafe fn load_ptrs(src: &[AtomicPtr<()>], dst: &mut [MaybeUninit<*mut ()>]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(not(loom))]
    // SAFETY: as in `load_words`: `AtomicPtr<()>` has `*mut ()`'s layout.
    unsafe {
        copy_small(src.as_ptr().cast::<*mut ()>(), dst.as_mut_ptr().cast::<*mut ()>(), src.len())
    };
    #[cfg(loom)]
    for (d, s) in dst.iter_mut().zip(src) {
        d.write(s.load(Ordering::Acquire));
    }
}

/// One word of `src` read as a plain load: where the value goes unused
/// (a fold over values that ignores their bounds) the compiler drops the
/// read, which it may not do with an atomic load.
///
/// # Safety
///
/// As for [`load_words`].
#[inline(always)]
pub(crate) unsafe fn read_word(src: &AtomicU64) -> u64 {
    #[cfg(not(loom))]
    // SAFETY: `AtomicU64` is an `UnsafeCell<u64>` of `u64`'s layout, so
    // its word may be read through a pointer from a shared reference; no
    // concurrent write (this function's contract).
    return unsafe { src.as_ptr().read() };
    #[cfg(loom)]
    return src.load(Ordering::Relaxed);
}

/// Writes `src` into the words `dst` (of the same length) as plain
/// stores: the block-move counterpart of [`load_words`].
///
/// # Safety
///
/// Nobody else reads or writes `dst` meanwhile: a node no reader can be in
/// (its writer holds [`NoReaders`]) or a fresh one.
#[inline]
unsafe fn store_words(src: &[u64], dst: &[AtomicU64]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(not(loom))]
    // SAFETY: `AtomicU64` is an `UnsafeCell<u64>` of `u64`'s layout, so its
    // words may be written through a pointer from a shared reference; the
    // ranges are valid and distinct; nobody else accesses `dst` (this
    // function's contract), so plain stores race with nothing.
    unsafe {
        copy_small(src.as_ptr(), dst.as_ptr().cast::<u64>().cast_mut(), src.len())
    };
    #[cfg(loom)]
    for (d, &s) in dst.iter().zip(src) {
        d.store(s, Ordering::Relaxed);
    }
}

/// [`store_words`] for slot words.
///
/// # Safety
///
/// As for [`store_words`].
#[inline]
unsafe fn store_ptrs(src: &[*mut ()], dst: &[AtomicPtr<()>]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(not(loom))]
    // SAFETY: as in `store_words`: `AtomicPtr<()>` is an `UnsafeCell` of
    // `*mut ()`'s layout.
    unsafe {
        copy_small(src.as_ptr(), dst.as_ptr().cast::<*mut ()>().cast_mut(), src.len())
    };
    #[cfg(loom)]
    for (d, &s) in dst.iter().zip(src) {
        d.store(s, Ordering::Release);
    }
}

/// The word moves of [`LeafRef::splice`] and
/// [`NodeRef::splice_internal`] over a node's arrays (`gaps` for a gap
/// node): slots `from..to` of `count` replaced by `items`, the rest shifted,
/// unused pivots `PIVOT_UNUSED`, unused slots null, unused gaps 0.
///
/// # Safety
///
/// No other thread reads or writes the arrays while this runs (no reader
/// can be in the node and the caller is the tree's only writer): the
/// shifted words move as plain, not atomic, accesses ([`move_tail`]).
#[inline(always)]
unsafe fn splice_words(
    piv: &[AtomicU64],
    slots: &[AtomicPtr<()>],
    gaps: Option<&[AtomicU64]>,
    from: usize,
    to: usize,
    count: usize,
    items: &[Item],
) {
    let pivs = piv.len();
    if items.len() == to - from {
        // As many slots as before: nothing moves, and `count` is not
        // needed. The last item keeps the replaced slot's end, so its
        // pivot is written only if that slot had one in use (it was not
        // the node's last slot).
        let last = items.len() - 1;
        for (k, it) in items.iter().enumerate() {
            let i = from + k;
            if i < pivs && (k < last || piv[i].load(Ordering::Relaxed) != PIVOT_UNUSED) {
                piv[i].store(it.last, Ordering::Relaxed);
            }
            slots[i].store(it.slot, Ordering::Relaxed);
            if let Some(g) = gaps {
                g[i].store(it.gap, Ordering::Relaxed);
            }
        }
        return;
    }
    debug_assert!(from < to && to <= count);
    let new_count = count - (to - from) + items.len();
    debug_assert!(new_count <= slots.len());
    let end = from + items.len(); // where the tail starts afterwards
    if end != to {
        // SAFETY: this function's contract.
        unsafe { move_tail(piv, slots, gaps, to, count, end) };
    }
    for (k, it) in items.iter().enumerate() {
        if from + k < pivs {
            piv[from + k].store(it.last, Ordering::Relaxed);
        }
        slots[from + k].store(it.slot, Ordering::Relaxed);
        if let Some(g) = gaps {
            g[from + k].store(it.gap, Ordering::Relaxed);
        }
    }
    if new_count - 1 < pivs {
        piv[new_count - 1].store(PIVOT_UNUSED, Ordering::Relaxed);
    }
    for i in new_count..count {
        if i < pivs {
            piv[i].store(PIVOT_UNUSED, Ordering::Relaxed);
        }
        slots[i].store(ptr::null_mut(), Ordering::Relaxed);
        if let Some(g) = gaps {
            g[i].store(0, Ordering::Relaxed);
        }
    }
}

/// The tail move of [`splice_words`]: slots `to..count` (with their
/// pivots and gaps) moved to start at `end`. The old last slot's pivot is
/// not moved: that slot ends at the node's maximum, so its pivot is
/// unused (or past the array) and the caller rewrites the new last one.
///
/// Outside loom the three runs move as plain block moves (`memmove`),
/// which an element-wise loop of atomic accesses cannot become: splices
/// happen only where no reader can be in the node (see
/// [`LeafRef::splice`]), so no atomic access races with these plain ones.
///
/// # Safety
///
/// As for [`splice_words`].
#[inline(always)]
unsafe fn move_tail(
    piv: &[AtomicU64],
    slots: &[AtomicPtr<()>],
    gaps: Option<&[AtomicU64]>,
    to: usize,
    count: usize,
    end: usize,
) {
    let moved = count - to;
    if moved == 0 {
        return;
    }
    let moved_piv = moved - 1;
    #[cfg(not(loom))]
    {
        assert!(end + moved <= slots.len() && end + moved_piv <= piv.len() && to + moved_piv <= piv.len());
        // SAFETY: both runs of each array are in bounds (checked above);
        // `copy` allows them to overlap; the atomics have their plain
        // types' layout, and their `UnsafeCell` lets a shared slice's
        // words be written; no other thread accesses them meanwhile (this
        // function's contract), so plain accesses race with nothing.
        unsafe {
            ptr::copy(piv.as_ptr().add(to).cast::<u64>(), piv.as_ptr().add(end).cast::<u64>().cast_mut(), moved_piv);
            ptr::copy(
                slots.as_ptr().add(to).cast::<*mut ()>(),
                slots.as_ptr().add(end).cast::<*mut ()>().cast_mut(),
                moved,
            );
            if let Some(g) = gaps {
                assert!(end + moved <= g.len());
                ptr::copy(g.as_ptr().add(to).cast::<u64>(), g.as_ptr().add(end).cast::<u64>().cast_mut(), moved);
            }
        }
    }
    #[cfg(loom)]
    {
        let mv = |i: usize, j: usize| {
            if i < to + moved_piv {
                piv[j].store(piv[i].load(Ordering::Relaxed), Ordering::Relaxed);
            }
            slots[j].store(slots[i].load(Ordering::Relaxed), Ordering::Relaxed);
            if let Some(g) = gaps {
                g[j].store(g[i].load(Ordering::Relaxed), Ordering::Relaxed);
            }
        };
        if end > to {
            for k in (0..moved).rev() {
                mv(to + k, end + k);
            }
        } else {
            for k in 0..moved {
                mv(to + k, end + k);
            }
        }
    }
}

/// [`NodeRef::find`] over a node's pivot array `piv` (fifteen pivots, or
/// nine in a gap node), for a walk that has the node's arrays already.
#[inline]
pub(crate) fn find_in(piv: &[AtomicU64], index: u64) -> usize {
    if let Ok(p) = <&[AtomicU64; 15]>::try_from(piv) {
        count_below::<15, 4, 3>(p, index)
    } else if let Ok(p) = <&[AtomicU64; 9]>::try_from(piv) {
        count_below::<9, 3, 2>(p, index)
    } else {
        // No node kind has another pivot count; still the right answer.
        piv.partition_point(|p| p.load(Ordering::Relaxed) < index)
    }
}

/// The number of the `N` pivots in `piv` (sorted; the unused ones are
/// `u64::MAX`) below `index`, in two steps of independent loads: the
/// pivots are seen as `M` blocks of `B` and a last block of `N - M * B`;
/// the `M` pivots that end the first blocks are compared at once, which
/// says which block holds the answer, then that block's pivots are
/// compared at once. No branch, and a chain of two loads, not five: a
/// binary search (four probes and a last comparison) waits on each probe
/// before it loads the next, and comparing all fifteen pivots takes two
/// and a half times the comparisons. For fifteen pivots, 3 + 3 loads (blocks of
/// four); for nine, 2 + 3 (blocks of three). Measured against both in one
/// process.
#[inline(always)]
fn count_below<const N: usize, const B: usize, const M: usize>(piv: &[AtomicU64; N], index: u64) -> usize {
    // The last block is a whole block or one short of it, so that step two
    // compares the same number of pivots in every block: a block's own end,
    // when step two compares it, is not below `index` (else step one would
    // have passed the block), and adds nothing.
    const { assert!(M * B < N && N - M * B <= B && N - M * B + 1 >= B) };
    let below = |i: usize| usize::from(piv[i].load(Ordering::Relaxed) < index);
    let mut block = 0;
    for k in 1..=M {
        block += below(k * B - 1);
    }
    // `block <= M`: the `min` tells the compiler so, which drops the bound
    // checks below.
    let base = block.min(M) * B;
    let mut n = base;
    for j in 0..N - M * B {
        n += below(base + j);
    }
    n
}

/// Bounds of slot `off` of a node whose pivots are `piv` and whose own
/// bounds are `[min, max]`: slot 0 starts at `min`, every other slot one
/// past its predecessor's pivot; a slot ends at its pivot, the last used
/// one (unused pivot, `u64::MAX`) or a slot past the pivots at `max`.
#[inline]
pub(crate) fn slot_bounds(piv: &[AtomicU64], off: usize, min: u64, max: u64) -> (u64, u64) {
    (slot_lo(piv, off, min), slot_hi(piv, off, max))
}

/// The lower half of [`slot_bounds`]: where slot `off` starts.
#[inline]
pub(crate) fn slot_lo(piv: &[AtomicU64], off: usize, min: u64) -> u64 {
    if off == 0 {
        min
    } else {
        piv[off - 1].load(Ordering::Relaxed) + 1
    }
}

/// The upper half of [`slot_bounds`].
#[inline]
fn slot_hi(piv: &[AtomicU64], off: usize, max: u64) -> u64 {
    if off < piv.len() {
        piv[off].load(Ordering::Relaxed).min(max)
    } else {
        max
    }
}

/// Number of indices in `[lo, hi]`, saturating at `u64::MAX`.
#[inline]
pub(crate) fn range_len(lo: u64, hi: u64) -> u64 {
    (hi - lo).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::Slab;

    #[test]
    fn layout_is_pinned() {
        assert_eq!(core::mem::size_of::<Node>(), 256);
        assert_eq!(core::mem::offset_of!(Node, body), 8);
        assert_eq!(core::mem::offset_of!(RangeBody, slot), 120);
        assert_eq!(core::mem::offset_of!(ArangeBody, slot), 72);
        assert_eq!(core::mem::offset_of!(ArangeBody, gap), 152);
        assert_eq!(core::mem::offset_of!(ArangeBody, meta), 232);
    }

    #[test]
    fn tags_round_trip_and_keep_provenance() {
        let slab = Slab::new();
        for kind in [Kind::Leaf, Kind::Range64, Kind::Arange64] {
            let one = [Item { last: u64::MAX, slot: ptr::null_mut(), gap: 0 }];
            // SAFETY: the slab is this test's alone.
            let n = unsafe { slab.alloc(kind) }.unwrap().fill(&one);
            let raw = n.encode();
            assert_eq!(raw.addr() & 0xff, kind as usize);
            // SAFETY: `raw` encodes the live node `n`.
            let back = unsafe { NodeRef::decode(raw) };
            assert_eq!(back, n);
            // SAFETY: the node is this test's alone (no reader can be in
            // it), and read only below.
            unsafe { back.set_pivot(NoReaders::new(), 0, 42) }; // writes through the decoded pointer
            assert_eq!(n.pivot(0), 42);
            // SAFETY: allocated above, freed once.
            unsafe { slab.free(n) };
        }
    }

    /// The ways to find a slot give the right slot at every index, in
    /// nodes of every kind and fill (the two-step count's blocks meet at
    /// fixed pivots, and every fill puts the answer in every block;
    /// `find_from` starts anywhere at or before the answer; a pivot array
    /// of no node kind's length still counts right).
    #[test]
    fn every_find_finds_the_slot_holding_the_index() {
        let slab = Slab::new();
        for kind in [Kind::Leaf, Kind::Range64, Kind::Arange64] {
            let one = [Item { last: u64::MAX, slot: ptr::null_mut(), gap: 0 }];
            // SAFETY: the slab is this test's alone.
            let n = unsafe { slab.alloc(kind) }.unwrap().fill(&one);
            for used in 1..=kind.slots() {
                // Slot i covers [3i, 3i + 2]; the last ends at the node's max.
                let items: Vec<Item> = (0..used as u64)
                    .map(|i| Item { last: i * 3 + 2, slot: core::ptr::without_provenance_mut(1), gap: 0 })
                    .collect();
                // SAFETY: the node is this test's alone: no reader can be
                // in it.
                unsafe { n.overwrite(NoReaders::new(), &items) };
                for index in 0..used as u64 * 3 + 4 {
                    let want = (index as usize / 3).min(used - 1);
                    assert_eq!(n.find(index), want, "{kind:?}, {used} slots, index {index}");
                    assert_eq!(find_in(n.pivot_array(), index), want, "{kind:?}, {used} slots, index {index}");
                    for from in 0..=want {
                        assert_eq!(n.find_from(from, index), want, "{kind:?}, {used} slots, from {from}");
                    }
                }
                assert_eq!(n.count(), used);
                let odd = &n.pivot_array()[..used.min(kind.pivots()) / 2];
                for index in 0..used as u64 * 3 + 4 {
                    assert_eq!(find_in(odd, index), (index as usize / 3).min(odd.len()));
                }
            }
            // SAFETY: allocated above, freed once.
            unsafe { slab.free(n) };
        }
    }

    #[test]
    fn fill_count_find_and_parent_words() {
        let slab = Slab::new();
        // SAFETY: the slab is this test's alone.
        let cell = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        let items: Vec<Item> = (0..5u64)
            .map(|i| Item {
                last: i * 10 + 9,
                slot: core::ptr::without_provenance_mut(((i as usize) << 1) | 1),
                gap: 0,
            })
            .collect();
        let leaf = cell.fill(&items);
        assert_eq!(leaf.count(), 5);
        assert_eq!(leaf.find(0), 0);
        assert_eq!(leaf.find(10), 1);
        assert_eq!(leaf.find(49), 4);
        assert_eq!(leaf.slot_max(4, 49), 49);
        assert_eq!(leaf.pivot(4), PIVOT_UNUSED);
        // Full node: 16 slots, all 15 pivots used.
        let full: Vec<Item> = (0..16u64).map(|i| Item { last: i, slot: core::ptr::null_mut(), gap: 0 }).collect();
        // SAFETY: the leaf is this test's alone: no reader can be in it.
        unsafe { leaf.overwrite(NoReaders::new(), &full) };
        assert_eq!(leaf.count(), 16);
        assert_eq!(leaf.find(15), 15);
        // SAFETY: as above.
        let cell = unsafe { slab.alloc(Kind::Arange64) }.unwrap();
        let kids: Vec<Item> =
            vec![Item { last: 99, slot: leaf.encode(), gap: 7 }, Item { last: u64::MAX, slot: leaf.encode(), gap: 30 }];
        let inner = cell.fill(&kids);
        assert_eq!((inner.count(), inner.gap_offset(), inner.max_gap(0, u64::MAX)), (2, 1, 30));
        leaf.set_parent(inner);
        assert_eq!(leaf.parent_info(), Some(inner.addr()));
        inner.set_root_parent();
        assert_eq!(inner.parent_info(), None);
        // SAFETY: allocated above, freed once each.
        unsafe {
            slab.free(leaf);
            slab.free(inner);
        }
    }
}
