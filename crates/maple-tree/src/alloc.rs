//! Node memory: every node of a tree comes from, and goes back to, that
//! tree's [`Slab`], so that one place counts allocations and (with the
//! `fault-injection` feature) can fail the N-th on purpose.
//!
//! A slab carves nodes out of 4 KiB chunks aligned to 4 KiB: the first
//! 256-byte cell of a chunk is its header, the other fifteen are nodes,
//! packed 256 bytes apart (the global allocator's 256-byte-aligned blocks
//! land 512 bytes apart, twice the memory and half the nodes per cache
//! page). A node finds its chunk by masking its address. Chunks with free
//! cells are kept on a list; a chunk whose last node is freed leaves the
//! tree at once, except for one spare kept to absorb the free-then-allocate
//! pairs of splits and merges. A tree therefore holds at most one empty
//! chunk, and its nodes sit together in memory (a duplicate's nodes come
//! out in the order they are copied). Empty chunks wait in a per-thread
//! pool (at most 256) for the next tree; chunks come from the global
//! allocator sixteen at a time (a 64 KiB block) and a block goes back when
//! all its chunks have.
//!
//! A slab has no locks: only a tree's single writer allocates and frees
//! (through `&mut`, or holding the concurrent tree's writer lock, which
//! also frees retired nodes once their grace period is over), which is
//! what the `unsafe` of [`Slab::alloc`] and [`Slab::free`] asks of callers.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    cell::Cell,
    ptr::{addr_of_mut, NonNull},
    sync::atomic::{AtomicUsize, Ordering},
};

use liballoc::alloc::{alloc, dealloc, Layout};

use crate::{
    error::AllocError,
    node::{Kind, Node, NodeRef},
};

/// Bytes per chunk, and its alignment.
const CHUNK: usize = 4096;
/// Bytes per cell (one node).
#[cfg_attr(loom, allow(dead_code))]
const CELL: usize = core::mem::size_of::<Node>();
/// Cells per chunk, the header's included.
#[cfg_attr(loom, allow(dead_code))]
const CELLS: usize = CHUNK / CELL;
/// A chunk's `free` mask with every node cell free (cell 0 is the header).
#[cfg_attr(loom, allow(dead_code))]
const ALL_FREE: u16 = !1;

#[cfg_attr(all(feature = "std", not(loom)), allow(dead_code))]
const CHUNK_LAYOUT: Layout = match Layout::from_size_align(CHUNK, CHUNK) {
    Ok(l) => l,
    Err(_) => panic!("chunk layout"),
};

#[cfg(not(loom))]
const _: () = assert!(
    CELL == 256 && CELLS == 16 && core::mem::size_of::<Header>() <= CELL && BLOCK_CHUNKS * CHUNK < 128 * 1024,
    "sixteen 256-byte cells per chunk, the header fitting in the first"
);

/// The first cell of a chunk. Read and written field by field through raw
/// pointers only (never a reference to a whole header): the `block_live`
/// of a block's first chunk may be counted down by another thread while
/// the slab owning that chunk updates its other fields.
#[repr(C)]
struct Header {
    /// Bit `i` set: cell `i` is free.
    free: u16,
    /// Neighbours on the slab's list of chunks with free cells (null at
    /// the ends; both null when the chunk is full or the spare).
    prev: *mut Header,
    next: *mut Header,
    /// Neighbours on the slab's list of every chunk holding a node.
    all_prev: *mut Header,
    all_next: *mut Header,
    /// The first chunk of the block this chunk was carved from (see
    /// `block`); set once when the block is made, never rewritten.
    block: *mut Header,
    /// In a block's first chunk: chunks of the block not yet given back
    /// to it (any thread may give one back).
    block_live: AtomicUsize,
}

/// The node memory of one tree; see the module docs.
pub(crate) struct Slab {
    /// First chunk with at least one free and one used cell.
    #[cfg_attr(loom, allow(dead_code))]
    partial: Cell<*mut Header>,
    /// An empty chunk kept for the next allocation, or null.
    spare: Cell<*mut Header>,
    /// First of every chunk holding at least one node (full or not).
    #[cfg_attr(loom, allow(dead_code))]
    all: Cell<*mut Header>,
    /// Chunks on the `all` list.
    #[cfg_attr(loom, allow(dead_code))]
    listed: Cell<usize>,
    /// Loom builds take nodes from the global allocator one by one: the
    /// ones handed out, for [`Slab::free_all`].
    #[cfg(loom)]
    handed: core::cell::RefCell<liballoc::vec::Vec<NonNull<Node>>>,
}

impl Default for Slab {
    fn default() -> Self {
        Slab::new()
    }
}

impl core::fmt::Debug for Slab {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slab").finish_non_exhaustive()
    }
}

impl Slab {
    pub(crate) const fn new() -> Slab {
        Slab {
            partial: Cell::new(core::ptr::null_mut()),
            spare: Cell::new(core::ptr::null_mut()),
            all: Cell::new(core::ptr::null_mut()),
            listed: Cell::new(0),
            #[cfg(loom)]
            handed: core::cell::RefCell::new(liballoc::vec::Vec::new()),
        }
    }

    /// Bytes of chunk memory this slab holds: the chunks holding nodes and
    /// its spare (loom builds: nodes handed out times their size).
    ///
    /// Read it only while nobody allocates or frees (`&` to a plain tree,
    /// or the concurrent tree's writer lock).
    pub(crate) fn held_bytes(&self) -> usize {
        #[cfg(not(loom))]
        {
            (self.listed.get() + usize::from(!self.spare.get().is_null())) * CHUNK
        }
        #[cfg(loom)]
        {
            self.handed.borrow().len() * core::mem::size_of::<Node>()
        }
    }

    /// Frees every node this slab has handed out and not taken back, at
    /// once: O(chunks), no node is read. A tree that drops or clears all
    /// its nodes (values dropped first, if they need it), or a copy that
    /// failed part way, uses this instead of freeing node by node.
    ///
    /// # Safety
    ///
    /// As for [`alloc`](Self::alloc); and none of those nodes is reachable
    /// or used by anyone any more.
    pub(crate) unsafe fn free_all(&self) {
        #[cfg(not(loom))]
        {
            let mut h = self.all.replace(core::ptr::null_mut());
            self.partial.set(core::ptr::null_mut());
            self.listed.set(0);
            while !h.is_null() {
                // SAFETY: `h` is a live chunk of this slab (on its list of
                // chunks holding nodes); the caller gives up every node in
                // it, so the whole chunk is ours again.
                unsafe {
                    let next = (*h).all_next;
                    #[cfg(feature = "fault-injection")]
                    for _ in 0..(ALL_FREE & !(*h).free).count_ones() {
                        fault::on_free();
                    }
                    self.keep_empty(h);
                    h = next;
                }
            }
        }
        #[cfg(loom)]
        for n in self.handed.borrow_mut().drain(..) {
            #[cfg(feature = "fault-injection")]
            fault::on_free();
            freed::record(n.as_ptr().addr());
            // SAFETY: allocated by `take_cell` with this layout; handed out
            // and given up by the caller, freed once.
            unsafe { dealloc(n.as_ptr().cast(), Layout::new::<Node>()) }
        }
    }

    /// Allocates a node of `kind`. Its parent word is null; every other
    /// field is uninitialised until [`NodeRef::fill`] writes it, so callers
    /// must fill the node before anyone reads it.
    ///
    /// # Safety
    ///
    /// The caller is the only thread using this slab for the whole call:
    /// it owns the tree (or holds `&mut` to it), or holds the concurrent
    /// tree's writer lock.
    pub(crate) unsafe fn alloc(&self, kind: Kind) -> Result<NodeRef, AllocError> {
        #[cfg(feature = "fault-injection")]
        if fault::should_fail() {
            return Err(AllocError);
        }
        // SAFETY: the caller makes us the slab's only user.
        let ptr = unsafe { self.take_cell() }?;
        #[cfg(feature = "fault-injection")]
        fault::on_alloc();
        #[cfg(loom)]
        freed::forget(ptr.as_ptr().addr());
        // SAFETY: `ptr` is a node-sized, node-aligned block we own; the kind
        // is fixed from here on.
        let node = unsafe { NodeRef::new(ptr, kind) };
        #[cfg(loom)]
        // SAFETY: loom's atomics must be constructed, not just stored into:
        // write a fully built empty node over the fresh block.
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
    /// As for [`alloc`](Self::alloc); and `node` came from `alloc` of this
    /// slab, is not freed twice, and nobody can reach it after this call.
    pub(crate) unsafe fn free(&self, node: NodeRef) {
        #[cfg(feature = "fault-injection")]
        fault::on_free();
        let ptr = node.as_ptr();
        #[cfg(loom)]
        freed::record(ptr.as_ptr().addr());
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.give_back(ptr) }
    }

    /// Loom's nodes are bigger than a cell: loom builds use the global
    /// allocator directly (the slab is single-threaded; loom has nothing to
    /// check in it).
    ///
    /// # Safety
    ///
    /// As for [`alloc`](Self::alloc).
    #[cfg(loom)]
    unsafe fn take_cell(&self) -> Result<NonNull<Node>, AllocError> {
        // SAFETY: `Node` has non-zero size.
        let n = NonNull::new(unsafe { alloc(Layout::new::<Node>()) }.cast()).ok_or(AllocError)?;
        self.handed.borrow_mut().push(n);
        Ok(n)
    }

    /// # Safety
    ///
    /// As for [`free`](Self::free).
    #[cfg(loom)]
    unsafe fn give_back(&self, ptr: NonNull<Node>) {
        self.handed.borrow_mut().retain(|&n| n != ptr);
        // SAFETY: allocated by `take_cell` with this layout, freed once.
        unsafe { dealloc(ptr.as_ptr().cast(), Layout::new::<Node>()) }
    }

    /// A free cell: the lowest of the first chunk with room, else of the
    /// spare chunk, else of a new chunk.
    ///
    /// # Safety
    ///
    /// As for [`alloc`](Self::alloc).
    #[cfg(not(loom))]
    unsafe fn take_cell(&self) -> Result<NonNull<Node>, AllocError> {
        let mut h = self.partial.get();
        if h.is_null() {
            h = self.spare.replace(core::ptr::null_mut());
            if h.is_null() {
                h = pool::take();
            }
            if h.is_null() {
                return Err(AllocError);
            }
            // SAFETY: `h` is a chunk of ours that no list holds (the spare or
            // a fresh one): its list fields are ours to (re)write (its block
            // fields stay); the first chunk of the all-list, if any, is a
            // live chunk of this slab.
            unsafe {
                addr_of_mut!((*h).free).write(ALL_FREE);
                addr_of_mut!((*h).prev).write(core::ptr::null_mut());
                addr_of_mut!((*h).next).write(core::ptr::null_mut());
                addr_of_mut!((*h).all_prev).write(core::ptr::null_mut());
                addr_of_mut!((*h).all_next).write(self.all.get());
                // Field by field through the raw pointer, never a `&mut` to
                // a whole header: another thread may be counting down the
                // `block_live` of a block's first chunk meanwhile.
                let first = self.all.get();
                if !first.is_null() {
                    (*first).all_prev = h;
                }
            }
            self.all.set(h);
            self.listed.set(self.listed.get() + 1);
            self.partial.set(h);
        }
        // SAFETY: `h` heads the partial list, so it is a live chunk of this
        // slab with a free cell, and we are the slab's only user.
        unsafe {
            let free = (*h).free;
            debug_assert!(free != 0);
            let i = free.trailing_zeros() as usize;
            (*h).free = free & !(1 << i);
            if (*h).free == 0 {
                self.unlink(h);
            }
            // Cell `i` of the chunk: inside the chunk's allocation, which
            // the pointer derives from.
            Ok(NonNull::new_unchecked(h.cast::<u8>().add(i * CELL).cast::<Node>()))
        }
    }

    /// Marks `ptr`'s cell free; frees its chunk if it emptied (keeping one
    /// spare).
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free).
    #[cfg(not(loom))]
    unsafe fn give_back(&self, ptr: NonNull<Node>) {
        let p = ptr.as_ptr().cast::<u8>();
        // The chunk is the 4 KiB-aligned block the cell was carved from;
        // `map_addr` keeps the provenance of that allocation.
        let h = p.map_addr(|a| a & !(CHUNK - 1)).cast::<Header>();
        let i = (p.addr() & (CHUNK - 1)) / CELL;
        // SAFETY: `ptr` came from `take_cell` of this slab, so `h` is the
        // header of one of its live chunks, and cell `i` (not the header,
        // not free: no double free) is in use.
        unsafe {
            let was = (*h).free;
            debug_assert!(i != 0 && was & (1 << i) == 0, "node freed twice or not from this slab");
            (*h).free = was | (1 << i);
            if was == 0 {
                // It was full: it has room again.
                self.push(h);
            }
            if (*h).free == ALL_FREE {
                self.unlink(h);
                unlink_from(&self.all, h, |c| (addr_of_mut!((*c).all_prev), addr_of_mut!((*c).all_next)));
                self.listed.set(self.listed.get() - 1);
                self.keep_empty(h);
            }
        }
    }

    /// Keeps the emptied chunk `h` as the spare; the spare it replaces (if
    /// any) goes to the pool.
    ///
    /// # Safety
    ///
    /// `h` is an empty chunk of this slab that no list holds; we are the
    /// only user.
    #[cfg(not(loom))]
    unsafe fn keep_empty(&self, h: *mut Header) {
        let old = self.spare.replace(h);
        if !old.is_null() {
            // SAFETY: the old spare is an empty chunk of ours no list holds:
            // nothing in it is in use.
            unsafe { pool::give(old) };
        }
    }

    /// Puts chunk `h` at the front of the partial list.
    ///
    /// # Safety
    ///
    /// `h` is a live chunk of this slab on no list; we are the only user.
    #[cfg(not(loom))]
    unsafe fn push(&self, h: *mut Header) {
        let head = self.partial.get();
        // SAFETY: `h` and `head` (if any) are live chunks of this slab.
        unsafe {
            (*h).prev = core::ptr::null_mut();
            (*h).next = head;
            if !head.is_null() {
                (*head).prev = h;
            }
        }
        self.partial.set(h);
    }

    /// Takes chunk `h` off the partial list.
    ///
    /// # Safety
    ///
    /// `h` is a live chunk on this slab's partial list; we are the only user.
    #[cfg(not(loom))]
    unsafe fn unlink(&self, h: *mut Header) {
        // SAFETY: `h` and its neighbours are live chunks of this slab.
        unsafe {
            unlink_from(&self.partial, h, |c| (addr_of_mut!((*c).prev), addr_of_mut!((*c).next)));
            (*h).prev = core::ptr::null_mut();
            (*h).next = core::ptr::null_mut();
        }
    }
}

impl Drop for Slab {
    /// Frees the spare chunk. Every node was freed before (a tree frees
    /// its nodes when it is dropped), so no other chunk is left; if one is
    /// (a leak elsewhere), it is left alone rather than freed under a node
    /// someone may still hold.
    fn drop(&mut self) {
        let spare = self.spare.replace(core::ptr::null_mut());
        if !spare.is_null() {
            // SAFETY: an empty chunk of ours that no list holds.
            unsafe { pool::give(spare) }
        }
    }
}

/// Takes chunk `h` off the doubly-linked list that starts at `head` and
/// whose links `links` locates in a header (previous, next).
///
/// # Safety
///
/// `h` is on that list, every chunk on it is live, and nobody else uses
/// the list meanwhile.
#[cfg(not(loom))]
unsafe fn unlink_from(
    head: &Cell<*mut Header>,
    h: *mut Header,
    links: impl Fn(*mut Header) -> (*mut *mut Header, *mut *mut Header),
) {
    // SAFETY: the caller's contract: `h` and its neighbours are live, and
    // the links are fields of their headers, written through raw places.
    unsafe {
        let (hp, hn) = links(h);
        let (prev, next) = (*hp, *hn);
        if prev.is_null() {
            head.set(next);
        } else {
            *links(prev).1 = next;
        }
        if !next.is_null() {
            *links(next).0 = prev;
        }
    }
}

/// Chunks come from the global allocator in blocks of [`BLOCK_CHUNKS`]
/// (64 KiB, aligned to 4 KiB): glibc places 4 KiB blocks aligned to 4 KiB
/// 8 KiB apart (each one's alignment slop is left unused), which would
/// double the memory of every node; a 64 KiB block wastes at most one page
/// in sixteen. A block goes back to the global allocator once all its
/// chunks are given back to it ([`give_to_block`]), by whichever thread
/// gives the last one.
#[cfg_attr(not(all(feature = "std", not(loom))), allow(dead_code))]
const BLOCK_CHUNKS: usize = 16;

#[cfg_attr(not(all(feature = "std", not(loom))), allow(dead_code))]
const BLOCK_LAYOUT: Layout = match Layout::from_size_align(BLOCK_CHUNKS * CHUNK, CHUNK) {
    Ok(l) => l,
    Err(_) => panic!("block layout"),
};

/// A new block of `chunks` chunks (its layout `layout`), each chunk's
/// `block` field set; the chunks, or none if memory ran out.
///
/// # Safety
///
/// `layout` is `chunks` chunks, aligned to a chunk.
#[cfg_attr(loom, allow(dead_code))]
unsafe fn new_block(chunks: usize, layout: Layout) -> Option<impl Iterator<Item = *mut Header>> {
    // SAFETY: the layout has non-zero size.
    let base = unsafe { alloc(layout) }.cast::<Header>();
    if base.is_null() {
        return None;
    }
    // SAFETY: the block is ours; every chunk lies inside it.
    unsafe {
        addr_of_mut!((*base).block_live).write(AtomicUsize::new(chunks));
        for i in 0..chunks {
            let h = base.cast::<u8>().add(i * CHUNK).cast::<Header>();
            addr_of_mut!((*h).block).write(base);
        }
        Some((0..chunks).map(move |i| base.cast::<u8>().add(i * CHUNK).cast::<Header>()))
    }
}

/// Gives an empty chunk back to its block; frees the block if that was
/// its last chunk out.
///
/// # Safety
///
/// `h` is an empty chunk made by [`new_block`] with `layout` for its
/// block, that nobody holds any more.
#[cfg_attr(loom, allow(dead_code))]
unsafe fn give_to_block(h: *mut Header, layout: Layout) {
    // SAFETY: a block lives while any of its chunks is out, and `h` is.
    // AcqRel: every use of the block's chunks happens before the free.
    unsafe {
        let base = (*h).block;
        if (*base).block_live.fetch_sub(1, Ordering::AcqRel) == 1 {
            dealloc(base.cast(), layout);
        }
    }
}

/// Empty chunks kept per thread between trees (a fork's copy is built and
/// dropped again and again: without this, every copy would fault its
/// memory in afresh after the global allocator gave it back to the
/// system), and the rest of the block the last new chunk came from. At
/// most [`POOL_CHUNKS`] chunks; beyond that they go back to their blocks,
/// and all of them when the thread exits.
#[cfg(all(feature = "std", not(loom)))]
mod pool {
    use core::cell::RefCell;

    use super::{give_to_block, new_block, Header, BLOCK_CHUNKS, BLOCK_LAYOUT};

    /// Most chunks kept per thread (1 MiB).
    pub(super) const POOL_CHUNKS: usize = 256;

    struct Pool(liballoc::vec::Vec<*mut Header>);

    impl Drop for Pool {
        fn drop(&mut self) {
            for h in self.0.drain(..) {
                // SAFETY: pooled chunks are empty, from blocks of
                // `BLOCK_LAYOUT`, and owned by the pool alone.
                unsafe { give_to_block(h, BLOCK_LAYOUT) }
            }
        }
    }

    std::thread_local! {
        static POOL: RefCell<Pool> = const { RefCell::new(Pool(liballoc::vec::Vec::new())) };
    }

    /// An empty chunk: from this thread's pool, else from a new block
    /// (whose other chunks join the pool); null if memory ran out.
    pub(super) fn take() -> *mut Header {
        let pooled = POOL.try_with(|p| p.borrow_mut().0.pop()).ok().flatten();
        if let Some(h) = pooled {
            return h;
        }
        // SAFETY: `BLOCK_LAYOUT` is `BLOCK_CHUNKS` chunks, chunk-aligned.
        let Some(mut chunks) = (unsafe { new_block(BLOCK_CHUNKS, BLOCK_LAYOUT) }) else {
            return core::ptr::null_mut();
        };
        let first = chunks.next().unwrap_or(core::ptr::null_mut());
        for h in chunks {
            // SAFETY: a fresh, empty chunk of a block of `BLOCK_LAYOUT`.
            unsafe { give(h) };
        }
        first
    }

    /// Keeps `h` for reuse, or gives it back to its block if the pool is
    /// full (or gone, during thread teardown).
    ///
    /// # Safety
    ///
    /// `h` is an empty chunk from [`take`] that nobody else holds.
    pub(super) unsafe fn give(h: *mut Header) {
        let kept = POOL
            .try_with(|p| {
                let mut p = p.borrow_mut();
                (p.0.len() < POOL_CHUNKS).then(|| p.0.push(h)).is_some()
            })
            .unwrap_or(false);
        if !kept {
            // SAFETY: the caller's contract.
            unsafe { give_to_block(h, BLOCK_LAYOUT) }
        }
    }
}

/// Without `std` (no thread-locals) or under loom: no pool, and a block
/// per chunk.
#[cfg(not(all(feature = "std", not(loom))))]
mod pool {
    use super::{give_to_block, new_block, Header, CHUNK_LAYOUT};

    #[cfg_attr(loom, allow(dead_code))]
    pub(super) fn take() -> *mut Header {
        // SAFETY: `CHUNK_LAYOUT` is one chunk, chunk-aligned.
        unsafe { new_block(1, CHUNK_LAYOUT) }.and_then(|mut c| c.next()).unwrap_or(core::ptr::null_mut())
    }

    /// # Safety
    ///
    /// `h` is an empty chunk from [`take`] that nobody else holds.
    pub(super) unsafe fn give(h: *mut Header) {
        // SAFETY: the caller's contract: a block of one chunk.
        unsafe { give_to_block(h, CHUNK_LAYOUT) }
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Chunk base of a node.
    fn chunk_of(n: NodeRef) -> usize {
        n.as_ptr().as_ptr().addr() & !(CHUNK - 1)
    }

    #[test]
    fn nodes_are_packed_fifteen_to_a_chunk() {
        let slab = Slab::new();
        let mut nodes: Vec<NodeRef> = Vec::new();
        for _ in 0..45 {
            // SAFETY: the slab is this test's alone.
            nodes.push(unsafe { slab.alloc(Kind::Leaf) }.unwrap());
        }
        let mut chunks: Vec<usize> = nodes.iter().map(|&n| chunk_of(n)).collect();
        chunks.dedup();
        assert_eq!(chunks.len(), 3, "45 nodes fill exactly three chunks");
        for w in nodes.chunks(15) {
            for (i, n) in w.iter().enumerate() {
                // Cells 1..=15 in order, 256 bytes apart.
                assert_eq!(n.as_ptr().as_ptr().addr() - chunk_of(*n), (i + 1) * CELL);
            }
        }
        for n in nodes {
            // SAFETY: the slab is this test's alone; each node is freed once.
            unsafe { slab.free(n) };
        }
        assert!(slab.partial.get().is_null(), "every chunk emptied and left the list");
        assert!(!slab.spare.get().is_null(), "one empty chunk is kept");
    }

    #[test]
    fn a_freed_cell_is_reused_and_an_emptied_chunk_returns() {
        let slab = Slab::new();
        // SAFETY: the slab is this test's alone; each node is freed once.
        let a = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        // SAFETY: the slab is this test's alone; each node is freed once.
        let b = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        let addr_a = a.as_ptr();
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe { slab.free(a) };
        // SAFETY: the slab is this test's alone; each node is freed once.
        let c = unsafe { slab.alloc(Kind::Range64) }.unwrap();
        assert_eq!(c.as_ptr(), addr_a, "the lowest free cell comes first");
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe {
            slab.free(b);
            slab.free(c);
        }
        // The chunk is now the spare: the next allocation takes it again.
        let spare = slab.spare.get();
        // SAFETY: the slab is this test's alone; each node is freed once.
        let d = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        assert_eq!(chunk_of(d), spare.addr());
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe { slab.free(d) };
        // A full chunk that gets a cell back is used again before a chunk
        // with more room.
        let mut v: Vec<NodeRef> = Vec::new();
        for _ in 0..17 {
            // SAFETY: the slab is this test's alone.
            v.push(unsafe { slab.alloc(Kind::Leaf) }.unwrap());
        }
        let freed = v.swap_remove(3);
        let addr = freed.as_ptr();
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe { slab.free(freed) };
        // SAFETY: the slab is this test's alone; each node is freed once.
        let again = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        assert_eq!(again.as_ptr(), addr);
        v.push(again);
        for n in v {
            // SAFETY: the slab is this test's alone; each node is freed once.
            unsafe { slab.free(n) };
        }
        assert!(slab.partial.get().is_null());
    }

    /// A tree built on one thread and dropped on another: its chunks go to
    /// the second thread's pool, and back to their blocks when that thread
    /// exits, while the first thread still holds the rest of the block in
    /// its own pool (Miri checks that every block is freed exactly once,
    /// by whichever thread gives its last chunk back, and that nothing
    /// leaks).
    #[cfg(feature = "std")]
    #[test]
    fn chunks_go_back_to_their_block_from_any_thread() {
        let n = if cfg!(miri) { 200 } else { 20_000 };
        let builder = std::thread::spawn(move || {
            let mut t = crate::MapleTree::<crate::U63>::new();
            for i in 0..n {
                t.insert_range(i * 10..=i * 10 + 5, crate::U63::new(i).unwrap()).unwrap();
            }
            t
        });
        let t = builder.join().unwrap();
        assert!(t.stats().held_bytes >= (t.stats().leaves + t.stats().internal) * CELL);
        let dropper = std::thread::spawn(move || drop(t));
        dropper.join().unwrap();
    }

    /// Random allocations and frees against a model: no cell is handed out
    /// twice (each live node keeps a distinct stamp), and a full chunk that
    /// gets a free cell back is used again.
    #[test]
    fn random_alloc_free_never_overlaps() {
        let slab = Slab::new();
        let mut live: Vec<(NodeRef, u64)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let steps = if cfg!(miri) { 400 } else { 20_000 };
        for step in 0..steps {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if live.is_empty() || x % 5 < 3 {
                // SAFETY: the slab is ours.
                let n = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
                n.set_pivot(0, step);
                live.push((n, step));
            } else {
                let (n, stamp) = live.swap_remove((x >> 8) as usize % live.len());
                assert_eq!(n.pivot(0), stamp, "a live node was overwritten");
                // SAFETY: allocated above, freed once.
                unsafe { slab.free(n) };
            }
        }
        for (n, stamp) in live {
            assert_eq!(n.pivot(0), stamp);
            // SAFETY: as above.
            unsafe { slab.free(n) };
        }
        assert!(slab.partial.get().is_null());
    }
}
