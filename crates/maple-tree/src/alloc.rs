//! Node memory: every node of a tree comes from, and goes back to, that
//! tree's [`Slab`], so that one place counts allocations and (with the
//! `fault-injection` feature) can fail the N-th on purpose.
//!
//! A slab carves nodes out of 4 KiB chunks, sixteen 256-byte cells each,
//! packed 256 bytes apart (the global allocator's 256-byte-aligned blocks
//! land 512 bytes apart, twice the memory and half the nodes per cache
//! page). Chunks come in 2 MiB blocks aligned to their size, mapped from
//! the kernel on Linux (elsewhere, and under Miri, from the global
//! allocator): the block's first three chunks hold the 24-byte headers
//! of all 512 (free cells, list links), so a node finds its chunk's header
//! by masking its address, and the headers cost 1/170 over the nodes; no
//! other memory is spent on a block. (The global allocator adds about two
//! pages of its own per block, 1/256 more: see [`map_block`]; smaller
//! blocks would keep the header share and multiply the allocator's.)
//!
//! A block is as big, and as aligned, as an x86-64 huge page, so that the
//! kernel can map it with one TLB entry instead of 512: a random lookup in
//! a tree of a million ranges misses the TLB on nearly every node below
//! the top levels otherwise (under virtualisation, a 2-D page walk
//! each). On Linux a new block is mapped
//! with small pages only (`MADV_NOHUGEPAGE`: a small tree makes resident
//! only the pages it touches, whatever the system's transparent huge page
//! setting), and once every chunk of it has been handed out, if a big
//! tree (one already holding four blocks of nodes, 8 MiB) took the last,
//! its pages, all resident by then, are collapsed into one huge page
//! (`MADV_HUGEPAGE`, then `MADV_COLLAPSE`, Linux 6.1 and later): no
//! memory is added, and the tree's last, partly used block stays in small
//! pages. Elsewhere, on older kernels and under Miri, blocks stay in small
//! pages.
//!
//! Chunks with free cells are kept on a list; a chunk whose last node is
//! freed leaves the tree at once, except for one spare kept to absorb the
//! free-then-allocate pairs of splits and merges. A tree therefore holds
//! at most one empty chunk, and its nodes sit together in memory (a
//! duplicate's nodes come out in the order they are copied). Empty chunks
//! wait in a per-thread pool (at most 32 blocks', 64 MiB, until the thread
//! exits or calls [`trim_thread_cache`]) for the next tree, and a block
//! goes back to the system when all its chunks have.
//! Without `std` there are no thread-locals to keep a block's other
//! chunks in, so each chunk is a block of its own, aligned to 4 KiB, whose
//! first cell is its header (fifteen nodes per chunk).
//!
//! A slab has no locks: only a tree's single writer allocates and frees
//! (through `&mut`, or holding the concurrent tree's writer lock, which
//! also frees retired nodes once their grace period is over), which is
//! what the `unsafe` of [`Slab::alloc`] and [`Slab::free`] asks of callers.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    cell::Cell,
    ptr::NonNull,
    sync::atomic::{AtomicUsize, Ordering},
};

// Loom's nodes come from the global allocator one by one.
#[cfg(loom)]
use liballoc::alloc::{alloc, dealloc, Layout};

#[cfg(not(loom))]
use core::ptr::addr_of_mut;

use crate::{
    error::AllocError,
    node::{FreshNode, Kind, Node, Unlinked},
};

/// Bytes per chunk, and its alignment.
const CHUNK: usize = 4096;
/// Bytes per cell (one node).
#[cfg_attr(loom, allow(dead_code))]
const CELL: usize = core::mem::size_of::<Node>();
/// Cells per chunk, the header's included.
#[cfg_attr(loom, allow(dead_code))]
const CELLS: usize = CHUNK / CELL;
/// Chunks per block (see the module docs): 512 with `std`, the first
/// three holding the headers of the others; one without, holding its own header
/// in its first cell.
#[cfg(all(feature = "std", not(loom)))]
const BLOCK_CHUNKS: usize = 512;
#[cfg(not(all(feature = "std", not(loom))))]
const BLOCK_CHUNKS: usize = 1;
/// Bytes per block, and its alignment.
const BLOCK: usize = BLOCK_CHUNKS * CHUNK;
/// Bytes between two headers in a block's header chunks: a header's
/// size, so that 512 headers fill exactly three chunks (3/512 of the
/// block's memory). Two headers in eight straddle a cache line; chunks of
/// one block go to one thread's pool, so trees on different threads
/// rarely share a header's line.
const HEADER_STRIDE: usize = core::mem::size_of::<Header>();
/// Where a block's count of chunks out lives, from its start: with `std`
/// the first header slot, whose chunk holds headers and so needs none;
/// without, just after the chunk's own header in its first cell.
const LIVE_AT: usize = if BLOCK_CHUNKS > 1 { 0 } else { HEADER_STRIDE };
/// The first chunk of a block that holds nodes: after the header chunks
/// (none when a chunk holds its own header).
const FIRST_NODE_CHUNK: usize = if BLOCK_CHUNKS > 1 { (BLOCK_CHUNKS * HEADER_STRIDE).div_ceil(CHUNK) } else { 0 };
/// Chunks of a block that hold nodes.
const NODE_CHUNKS: usize = BLOCK_CHUNKS - FIRST_NODE_CHUNK;
/// True for a slab holding `chunks` chunks of nodes that is a big tree's,
/// whose blocks get huge pages (see the module docs): four blocks' worth,
/// 8 MiB, about 32,000 nodes (180,000 ranges inserted in a random order),
/// beyond what a second-level TLB of small pages covers (about 1,500
/// entries, 6 MiB). Below that huge pages gain little and the collapse
/// (a 2 MiB copy per block) costs more than it saves.
#[cfg_attr(loom, allow(dead_code))]
fn is_big(chunks: usize) -> bool {
    chunks >= 4 * NODE_CHUNKS
}
/// A chunk's `free` mask with every node cell free: all sixteen when the
/// headers are apart, else all but cell 0, the header.
#[cfg_attr(loom, allow(dead_code))]
const ALL_FREE: u16 = if BLOCK_CHUNKS > 1 { !0 } else { !1 };

#[cfg(not(loom))]
const _: () = assert!(
    CELL == 256
        && CELLS == 16
        && HEADER_STRIDE == 24
        && HEADER_STRIDE % core::mem::align_of::<Header>() == 0
        && LIVE_AT + core::mem::size_of::<AtomicUsize>() <= CELL
        && LIVE_AT % core::mem::align_of::<AtomicUsize>() == 0,
    "sixteen 256-byte cells per chunk; headers of 24 bytes, packed; the block's count fits in a header slot (or \
     beside the header in a chunk's first cell)"
);

#[cfg(all(feature = "std", not(loom)))]
const _: () =
    assert!(HEADER_STRIDE * BLOCK_CHUNKS <= FIRST_NODE_CHUNK * CHUNK, "a block's headers fit in its header chunks");

/// The header of the chunk that holds address `p` (a node cell).
#[cfg_attr(loom, allow(dead_code))]
fn header_of<T>(p: *mut T) -> *mut Header {
    let a = p.addr();
    let chunk = (a & (BLOCK - 1)) / CHUNK;
    // Inside the block's allocation, which `p` derives from.
    p.cast::<u8>().with_addr((a & !(BLOCK - 1)) + chunk * HEADER_STRIDE).cast()
}

/// Cell `i` of the chunk whose header is `h`.
#[cfg_attr(loom, allow(dead_code))]
fn cell_of(h: *mut Header, i: usize) -> *mut Node {
    let a = h.addr();
    let chunk = (a & (BLOCK - 1)) / HEADER_STRIDE;
    // Inside the block's allocation, which `h` derives from.
    h.cast::<u8>().with_addr((a & !(BLOCK - 1)) + chunk * CHUNK + i * CELL).cast()
}

/// The header of a chunk, in its block's header chunks (or its own first
/// cell). Read and written field by field through raw pointers only (never
/// a reference to a whole header): headers share cache lines, and a
/// block's count of chunks out (see [`LIVE_AT`]) sits beside them, which
/// another thread may count down while the slab owning a chunk of that
/// block updates that chunk's header.
#[repr(C)]
struct Header {
    /// Bit `i` set: cell `i` is free.
    free: u16,
    /// Neighbours on the slab's list of chunks holding nodes (null at the
    /// ends; both null when the chunk is on no list: the spare, pooled).
    prev: *mut Header,
    next: *mut Header,
}

/// A block's count of chunks out: not yet given back to it (any thread
/// may give one back).
fn block_live(base: *mut u8) -> *mut AtomicUsize {
    base.wrapping_add(LIVE_AT).cast()
}

/// The node memory of one tree; see the module docs.
///
/// The chunks holding nodes are on one list, full ones first, then those
/// with free cells (partial), so that a chunk filling up only moves the
/// boundary between the two; a full chunk that gets a cell back moves to
/// the front of the partial part, which is where cells are taken.
pub(crate) struct Slab {
    /// First chunk with at least one free and one used cell: where the
    /// partial part of the list starts (null: every chunk is full).
    #[cfg_attr(loom, allow(dead_code))]
    partial: Cell<*mut Header>,
    /// An empty chunk kept for the next allocation, or null.
    spare: Cell<*mut Header>,
    /// First and last of every chunk holding at least one node.
    #[cfg_attr(loom, allow(dead_code))]
    all: Cell<*mut Header>,
    #[cfg_attr(loom, allow(dead_code))]
    last: Cell<*mut Header>,
    /// Chunks on the list.
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
            last: Cell::new(core::ptr::null_mut()),
            listed: Cell::new(0),
            #[cfg(loom)]
            handed: core::cell::RefCell::new(liballoc::vec::Vec::new()),
        }
    }

    /// Bytes of chunk memory this slab holds: the chunks holding nodes and
    /// its spare, each with its share of its block's header chunk (loom
    /// builds: nodes handed out times their size).
    ///
    /// Read it only while nobody allocates or frees (`&` to a plain tree,
    /// or the concurrent tree's writer lock).
    pub(crate) fn held_bytes(&self) -> usize {
        #[cfg(not(loom))]
        {
            (self.listed.get() + usize::from(!self.spare.get().is_null())) * BLOCK / NODE_CHUNKS
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
            self.last.set(core::ptr::null_mut());
            self.partial.set(core::ptr::null_mut());
            self.listed.set(0);
            while !h.is_null() {
                // SAFETY: `h` is a live chunk of this slab (on its list of
                // chunks holding nodes); the caller gives up every node in
                // it, so the whole chunk is ours again.
                unsafe {
                    let next = (*h).next;
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
            crate::sync::freed::record(n.as_ptr().addr());
            // SAFETY: allocated by `take_cell` with this layout; handed out
            // and given up by the caller, freed once.
            unsafe { dealloc(n.as_ptr().cast(), Layout::new::<Node>()) }
        }
    }

    /// Allocates a node of `kind`. Its parent word is null; every other
    /// field is uninitialised until [`FreshNode::fill`] or
    /// [`FreshNode::copy_of`] writes it, which is also what makes it a
    /// [`NodeRef`] that can be read.
    ///
    /// # Safety
    ///
    /// The caller is the only thread using this slab for the whole call:
    /// it owns the tree (or holds `&mut` to it), or holds the concurrent
    /// tree's writer lock.
    pub(crate) unsafe fn alloc(&self, kind: Kind) -> Result<FreshNode, AllocError> {
        #[cfg(feature = "fault-injection")]
        if fault::should_fail() {
            return Err(AllocError);
        }
        // SAFETY: the caller makes us the slab's only user.
        let ptr = unsafe { self.take_cell() }?;
        #[cfg(feature = "fault-injection")]
        fault::on_alloc();
        #[cfg(loom)]
        crate::sync::freed::forget(ptr.as_ptr().addr());
        #[cfg(loom)]
        // SAFETY: loom's atomics must be constructed, not just stored into:
        // write a fully built empty node over the fresh block.
        unsafe {
            ptr.as_ptr().write(Node::loom_empty(kind))
        };
        // SAFETY: `ptr` is a node-sized, node-aligned cell that `take_cell`
        // handed to us alone; nothing links to it yet.
        Ok(unsafe { FreshNode::new(ptr, kind) })
    }

    /// Frees a node that was never filled (an allocation a failed write
    /// gives back before using it).
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free).
    pub(crate) unsafe fn free_fresh(&self, node: FreshNode) {
        // SAFETY: the caller's guarantees, passed on; the node was never
        // published, so nobody can reach it.
        unsafe { self.free_cell(node.as_ptr()) }
    }

    /// Frees a node.
    ///
    /// # Safety
    ///
    /// As for [`alloc`](Self::alloc); and `node` came from `alloc` of this
    /// slab, is not freed twice, and nobody can reach it after this call.
    pub(crate) unsafe fn free(&self, node: impl Into<Unlinked>) {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.free_cell(node.into().as_ptr()) }
    }

    /// [`free`](Self::free) by address.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free).
    unsafe fn free_cell(&self, ptr: NonNull<Node>) {
        #[cfg(feature = "fault-injection")]
        fault::on_free();
        #[cfg(loom)]
        crate::sync::freed::record(ptr.as_ptr().addr());
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
                h = pool::take(is_big(self.listed.get()));
            }
            if h.is_null() {
                return Err(AllocError);
            }
            // SAFETY: `h` is a chunk of ours that no list holds (the spare or
            // a fresh one): its header is ours to (re)write, field by field
            // through the raw pointer (never a `&mut` to a whole header: see
            // `Header`).
            unsafe {
                addr_of_mut!((*h).free).write(ALL_FREE);
                // Every chunk listed is full: `h` starts the partial part,
                // at the end.
                self.insert_before(h, core::ptr::null_mut());
            }
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
                // Full: the partial part starts after it.
                self.partial.set((*h).next);
            }
            // Cell `i` of the chunk: in its block's allocation, non-null.
            Ok(NonNull::new_unchecked(cell_of(h, i)))
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
        let p = ptr.as_ptr();
        // The header of the 4 KiB chunk the cell was carved from, found by
        // masking (keeping the provenance of the block's allocation).
        let h = header_of(p);
        let i = (p.addr() & (CHUNK - 1)) / CELL;
        // SAFETY: `ptr` came from `take_cell` of this slab, so `h` is the
        // header of one of its live chunks, and cell `i` (a node cell, not
        // free: no double free) is in use.
        unsafe {
            let was = (*h).free;
            debug_assert!(ALL_FREE & !was & (1 << i) != 0, "node freed twice or not from this slab");
            (*h).free = was | (1 << i);
            if was == 0 {
                // It was full: it has room again, and is where the next
                // cell is taken.
                self.unlink(h);
                self.insert_before(h, self.partial.get());
                self.partial.set(h);
            }
            if (*h).free == ALL_FREE {
                self.unlink(h);
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

    /// Puts chunk `h` on the list just before `at` (at the end if `at` is
    /// null).
    ///
    /// # Safety
    ///
    /// `h` is a live chunk of this slab on no list, `at` null or a chunk on
    /// the list; we are the only user.
    #[cfg(not(loom))]
    unsafe fn insert_before(&self, h: *mut Header, at: *mut Header) {
        // SAFETY: `at` (if any) is a live chunk of this slab.
        let prev = if at.is_null() { self.last.get() } else { unsafe { (*at).prev } };
        // SAFETY: `prev` and `at` are neighbours on the list (or its ends),
        // `h` a live chunk between them.
        unsafe {
            self.join(prev, h);
            self.join(h, at);
        }
    }

    /// Makes `b` follow `a` on the list: null `a` makes `b` the first
    /// chunk, null `b` makes `a` the last.
    ///
    /// # Safety
    ///
    /// `a` and `b` are null or live chunks of this slab; we are the only
    /// user. (Written field by field, never through a `&mut Header`.)
    #[cfg(not(loom))]
    unsafe fn join(&self, a: *mut Header, b: *mut Header) {
        // SAFETY: this function's contract.
        unsafe {
            if a.is_null() {
                self.all.set(b);
            } else {
                addr_of_mut!((*a).next).write(b);
            }
            if b.is_null() {
                self.last.set(a);
            } else {
                addr_of_mut!((*b).prev).write(a);
            }
        }
    }

    /// Takes chunk `h` off the list; if it started the partial part, the
    /// next one does.
    ///
    /// # Safety
    ///
    /// `h` is a live chunk on this slab's list; we are the only user.
    #[cfg(not(loom))]
    unsafe fn unlink(&self, h: *mut Header) {
        // SAFETY: `h` and its neighbours are live chunks of this slab.
        unsafe {
            let (prev, next) = ((*h).prev, (*h).next);
            self.join(prev, next);
            if self.partial.get() == h {
                self.partial.set(next);
            }
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

/// A new block, its count of chunks out set; the headers of its node
/// chunks, or none if memory ran out. Its pages are small ones (see the
/// module docs).
#[cfg_attr(loom, allow(dead_code))]
fn new_block() -> Option<impl Iterator<Item = *mut Header>> {
    let base = map_block();
    if base.is_null() {
        return None;
    }
    small_pages(base);
    // SAFETY: the block is ours and nobody else has seen it; its count of
    // chunks out and every node chunk's header lie inside it (the header
    // chunks, or the chunk's first cell), aligned (checked at compile
    // time).
    unsafe {
        block_live(base).write(AtomicUsize::new(NODE_CHUNKS));
        Some((FIRST_NODE_CHUNK..BLOCK_CHUNKS).map(move |k| base.add(k * HEADER_STRIDE).cast::<Header>()))
    }
}

#[cfg(all(feature = "std", not(loom), not(miri), target_os = "linux"))]
mod blocks {
    //! Blocks from the kernel: aligned anonymous mappings, with huge-page
    //! advice.

    use super::{Header, BLOCK};

    /// `madvise` advice to collapse a range into huge pages now (Linux 6.1's
    /// `MADV_COLLAPSE`; not in every libc's headers).
    const MADV_COLLAPSE: libc::c_int = 25;

    /// A block of [`BLOCK`] bytes aligned to its size, from the kernel:
    /// blocks are aligned so that a node finds its header by masking, and the
    /// global allocator serves such an allocation with pages of its own
    /// (glibc: its chunk headers, about two resident pages per block, 0.18
    /// bytes per range after a million random inserts, and, once a block has
    /// been freed, from its heap, where the alignment slack can be reused and
    /// the block is not given back to the system when freed). Mapped twice
    /// the size, the slack on both sides unmapped. Null if memory ran out.
    pub(super) fn map_block() -> *mut u8 {
        let len = 2 * BLOCK;
        // SAFETY: a fresh private anonymous mapping, at an address the kernel
        // chooses: it overlaps nothing of ours or anyone's.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return core::ptr::null_mut();
        }
        let p = p.cast::<u8>();
        let head = p.addr().next_multiple_of(BLOCK) - p.addr();
        let tail = len - head - BLOCK;
        // SAFETY: both ranges are parts of the mapping just made, outside the
        // aligned block kept, and nobody has seen any of it. A failed unmap
        // (it cannot fail on page-aligned parts of a mapping but for lack of
        // kernel memory to split it) leaves the slack mapped and untouched:
        // address space, not memory.
        unsafe {
            if head > 0 {
                libc::munmap(p.cast(), head);
            }
            if tail > 0 {
                libc::munmap(p.add(head + BLOCK).cast(), tail);
            }
            p.add(head)
        }
    }

    /// Gives the block at `base` back to the system.
    ///
    /// # Safety
    ///
    /// `base` came from [`map_block`], and nothing in the block is used any
    /// more.
    pub(super) unsafe fn unmap_block(base: *mut u8) {
        // SAFETY: the caller's contract: the block is our mapping, unused. (A
        // failure, for lack of kernel memory, would leak the block, not
        // corrupt anything.)
        unsafe { libc::munmap(base.cast(), BLOCK) };
    }

    /// Asks the kernel to map the new block at `base` with small pages only.
    /// Advice only: a kernel that refuses it changes nothing.
    pub(super) fn small_pages(base: *mut u8) {
        // SAFETY: `[base, base + BLOCK)` is a block of ours; this advice
        // changes how the kernel maps its pages, never their contents or who
        // may use them, so it cannot affect any access, ours or the global
        // allocator's.
        let _ = unsafe { libc::madvise(base.cast(), BLOCK, libc::MADV_NOHUGEPAGE) };
    }

    /// Asks the kernel to map the block holding the chunk `h`, every page of
    /// which is resident, with one huge page from now on. Advice only: a
    /// kernel without huge pages (or older than 6.1) refuses it, and nothing
    /// changes.
    pub(super) fn huge_page(h: *mut Header) {
        // The block's start, with the provenance of its allocation.
        let base = h.map_addr(|a| a & !(BLOCK - 1)).cast::<libc::c_void>();
        // SAFETY: `h`'s block is live (the caller holds one of its chunks);
        // as in `small_pages`, this advice changes how the kernel maps the
        // block's pages (collapsing copies each into the huge page), never
        // their contents or who may use them.
        unsafe {
            if libc::madvise(base, BLOCK, libc::MADV_HUGEPAGE) == 0 {
                let _ = libc::madvise(base, BLOCK, MADV_COLLAPSE);
            }
        }
    }
}

#[cfg(not(all(feature = "std", not(loom), not(miri), target_os = "linux")))]
mod blocks {
    //! Blocks from the global allocator: elsewhere than on Linux, under
    //! Miri (which has no `mmap` of this kind), without `std`, and for
    //! loom's nodes. No huge-page advice.
    #![cfg_attr(loom, allow(dead_code))]

    use liballoc::alloc::{alloc, dealloc, Layout};

    use super::BLOCK;

    /// A block's layout, where blocks come from the global allocator (see
    /// [`map_block`]).
    const BLOCK_LAYOUT: Layout = match Layout::from_size_align(BLOCK, BLOCK) {
        Ok(l) => l,
        Err(_) => panic!("block layout"),
    };

    /// A block from the global allocator, or null.
    pub(super) fn map_block() -> *mut u8 {
        // SAFETY: the layout has non-zero size.
        unsafe { alloc(BLOCK_LAYOUT) }
    }

    /// # Safety
    ///
    /// `base` came from [`map_block`], and nothing in the block is used any
    /// more.
    pub(super) unsafe fn unmap_block(base: *mut u8) {
        // SAFETY: the caller's contract: allocated by `map_block` with this
        // layout, freed once.
        unsafe { dealloc(base, BLOCK_LAYOUT) }
    }

    pub(super) fn small_pages(_base: *mut u8) {}

    #[cfg(all(feature = "std", not(loom)))]
    pub(super) fn huge_page(_h: *mut super::Header) {}
}

#[cfg(all(feature = "std", not(loom)))]
use blocks::huge_page;
use blocks::{map_block, small_pages, unmap_block};

/// Gives an empty chunk back to its block; frees the block if that was
/// its last chunk out.
///
/// # Safety
///
/// `h` is the header of an empty chunk made by [`new_block`] that nobody
/// holds any more.
#[cfg_attr(loom, allow(dead_code))]
unsafe fn give_to_block(h: *mut Header) {
    // The block's start, with the provenance of its allocation.
    let base = h.cast::<u8>().map_addr(|a| a & !(BLOCK - 1));
    // SAFETY: a block lives while any of its chunks is out, and `h`'s is;
    // its count was written by `new_block` and is only used atomically.
    // AcqRel: every use of the block's chunks happens before the free.
    unsafe {
        if (*block_live(base)).fetch_sub(1, Ordering::AcqRel) == 1 {
            #[cfg(all(test, feature = "std", not(loom)))]
            pool::FREED_BLOCKS.with(|n| n.set(n.get() + 1));
            unmap_block(base);
        }
    }
}

/// Empty chunks kept per thread between trees, and the rest of the block
/// the last new chunk came from. A program that drops a tree and builds
/// another (a fork's copy, made and dropped again and again; a map rebuilt
/// from scratch) builds it in memory it already has: without the pool,
/// every chunk would be faulted in afresh, zeroed by the kernel, after its
/// block went back to the system. At most [`POOL_CHUNKS`](pool::POOL_CHUNKS)
/// chunks; beyond that they go back to their blocks, and all of them when
/// the thread exits or calls [`trim_thread_cache`].
#[cfg(all(feature = "std", not(loom)))]
mod pool {
    use core::cell::RefCell;

    use super::{give_to_block, huge_page, new_block, Header, CHUNK};

    /// Most chunks kept per thread: 32 blocks' (64 MiB), the nodes of about
    /// 1.4 M ranges inserted in a random order: enough that rebuilding a
    /// tree of a million ranges faults in no page. The global allocator
    /// keeps the nodes of a dropped `BTreeMap` in its heap likewise.
    pub(super) const POOL_CHUNKS: usize = 32 * super::NODE_CHUNKS;

    struct Pool(liballoc::vec::Vec<*mut Header>);

    impl Drop for Pool {
        fn drop(&mut self) {
            for h in self.0.drain(..) {
                // SAFETY: pooled chunks are empty, from `new_block`, and
                // owned by the pool alone.
                unsafe { give_to_block(h) }
            }
        }
    }

    std::thread_local! {
        static POOL: RefCell<Pool> = const { RefCell::new(Pool(liballoc::vec::Vec::new())) };
    }

    /// Chunks in this thread's pool.
    #[cfg(test)]
    pub(crate) fn pooled() -> usize {
        POOL.with(|p| p.borrow().0.len())
    }

    /// Gives every chunk of this thread's pool back to its block (a block
    /// goes back to the system once all its chunks have); the bytes of the
    /// chunks given up.
    pub(super) fn trim() -> usize {
        let chunks = POOL.try_with(|p| core::mem::take(&mut p.borrow_mut().0)).unwrap_or_default();
        let bytes = chunks.len() * CHUNK;
        for h in chunks {
            // SAFETY: pooled chunks are empty, from `new_block`, and owned
            // by the pool alone, which has just let go of them.
            unsafe { give_to_block(h) }
        }
        bytes
    }

    #[cfg(test)]
    std::thread_local! {
        /// Blocks this thread asked huge pages for (whether or not the
        /// kernel, or Miri, gave any).
        pub(crate) static HUGE_PAGED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
        /// Blocks this thread gave back to the system.
        pub(crate) static FREED_BLOCKS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }

    /// An empty chunk: from this thread's pool, else from a new block
    /// (whose other chunks join the pool); null if memory ran out. `big`:
    /// the chunk is for a big tree, whose taking the last chunk of a block
    /// gets that block a huge page (see the module docs).
    pub(super) fn take(big: bool) -> *mut Header {
        let pooled = POOL
            .try_with(|p| {
                let mut p = p.borrow_mut();
                p.0.pop().map(|h| (h, p.0.is_empty()))
            })
            .ok()
            .flatten();
        if let Some((h, dry)) = pooled {
            // The pool runs dry: it was last empty when the newest block
            // was made (a block is only made then), whose chunks went in
            // under any that came back later, so every chunk of that block
            // has now been handed out (and, but for `h`, touched: a chunk
            // taken gets a node at once), and `h`, at the bottom, is one
            // of them.
            if big && dry {
                #[cfg(test)]
                HUGE_PAGED.with(|n| n.set(n.get() + 1));
                huge_page(h);
            }
            return h;
        }
        let Some(mut chunks) = new_block() else {
            return core::ptr::null_mut();
        };
        let first = chunks.next().unwrap_or(core::ptr::null_mut());
        for h in chunks {
            // SAFETY: a fresh, empty chunk from `new_block`.
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
            unsafe { give_to_block(h) }
        }
    }
}

/// Without `std` (no thread-locals) or under loom: no pool, and a block
/// per chunk.
#[cfg(not(all(feature = "std", not(loom))))]
mod pool {
    use super::{give_to_block, new_block, Header};

    #[cfg_attr(loom, allow(dead_code))]
    pub(super) fn take(_big: bool) -> *mut Header {
        new_block().and_then(|mut c| c.next()).unwrap_or(core::ptr::null_mut())
    }

    /// # Safety
    ///
    /// `h` is an empty chunk from [`take`] that nobody else holds.
    pub(super) unsafe fn give(h: *mut Header) {
        // SAFETY: the caller's contract.
        unsafe { give_to_block(h) }
    }

    /// Nothing kept, nothing to give back.
    pub(super) fn trim() -> usize {
        0
    }
}

/// Gives the calling thread's cache of empty node memory back to the
/// system, and returns its size in bytes.
///
/// A dropped tree's node chunks stay with the thread that dropped it, up
/// to 64 MiB (the nodes of about 1.4 M ranges), so that the next tree it
/// builds need not have the kernel fault in and zero that memory again:
/// a program that rebuilds or copies trees (a fork's copy, a map rebuilt
/// from scratch) runs its inserts faster for it. The cache goes
/// back to the system when the thread exits; a long-lived thread that is
/// done with big trees can give it back now. Memory goes back 2 MiB at a
/// time: a block in which a live tree still has nodes stays mapped until
/// those are freed too (and their chunks, freed on this thread, come to
/// this cache again). Without `std` there is no cache, and this returns
/// 0.
///
/// ```
/// use maple_tree::{MapleTree, U63};
///
/// let mut t = MapleTree::new();
/// for i in 0..10_000u64 {
///     t.insert_range(i * 10..=i * 10 + 5, U63::new_truncate(i)).unwrap();
/// }
/// drop(t);
/// // The tree's nodes went to this thread's cache...
/// assert!(maple_tree::trim_thread_cache() > 0);
/// // ... and now back to the system.
/// assert_eq!(maple_tree::trim_thread_cache(), 0);
/// ```
pub fn trim_thread_cache() -> usize {
    pool::trim()
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

    // The hooks are inlined into the allocator so that the profiling
    // builds (examples, which get this feature through the
    // dev-dependency) count what the library does, not how the hooks
    // happened to be partitioned.
    #[inline]
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

    #[inline]
    pub(crate) fn on_alloc() {
        ALLOCS.with(|c| c.set(c.get() + 1));
    }

    #[inline]
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
    use crate::node::{Item, NodeRef};
    use core::ptr;

    /// Chunk base of a node.
    fn chunk_of(n: &FreshNode) -> usize {
        n.as_ptr().as_ptr().addr() & !(CHUNK - 1)
    }

    #[test]
    fn nodes_are_packed_sixteen_to_a_chunk() {
        // Fifteen without `std`, whose chunks hold their own header.
        let per_chunk = ALL_FREE.count_ones() as usize;
        let first_cell = ALL_FREE.trailing_zeros() as usize;
        assert_eq!(per_chunk, if cfg!(feature = "std") { 16 } else { 15 });
        let slab = Slab::new();
        let mut nodes: Vec<FreshNode> = Vec::new();
        for _ in 0..3 * per_chunk {
            // SAFETY: the slab is this test's alone.
            nodes.push(unsafe { slab.alloc(Kind::Leaf) }.unwrap());
        }
        let mut chunks: Vec<usize> = nodes.iter().map(chunk_of).collect();
        chunks.dedup();
        assert_eq!(chunks.len(), 3, "three chunks' worth of nodes fill exactly three chunks");
        for w in nodes.chunks(per_chunk) {
            for (i, n) in w.iter().enumerate() {
                // The node cells in order, 256 bytes apart, and each finds
                // its chunk's header, which is not in a node cell.
                let p = n.as_ptr().as_ptr();
                assert_eq!(p.addr() - chunk_of(n), (first_cell + i) * CELL);
                assert_eq!(cell_of(header_of(p), first_cell + i), p);
                assert!(!w.iter().any(|m| m.as_ptr().as_ptr().addr() == header_of(p).addr()));
            }
        }
        if cfg!(feature = "std") {
            // With `std`, the headers sit in the block's header chunks.
            for n in &nodes {
                let h = header_of(n.as_ptr().as_ptr()).addr();
                assert!(h - (h & !(BLOCK - 1)) < FIRST_NODE_CHUNK * CHUNK, "header in a header chunk");
            }
            assert_eq!(slab.held_bytes(), 3 * BLOCK / NODE_CHUNKS, "three chunks and their share of the headers");
        }
        for n in nodes {
            // SAFETY: the slab is this test's alone; each node is freed once.
            unsafe { slab.free_fresh(n) };
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
        unsafe { slab.free_fresh(a) };
        // SAFETY: the slab is this test's alone; each node is freed once.
        let c = unsafe { slab.alloc(Kind::Range64) }.unwrap();
        assert_eq!(c.as_ptr(), addr_a, "the lowest free cell comes first");
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe {
            slab.free_fresh(b);
            slab.free_fresh(c);
        }
        // The chunk is now the spare: the next allocation takes it again.
        let spare = slab.spare.get();
        // SAFETY: the slab is this test's alone; each node is freed once.
        let d = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        assert_eq!(header_of(d.as_ptr().as_ptr()), spare);
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe { slab.free_fresh(d) };
        // A full chunk that gets a cell back is used again before a chunk
        // with more room.
        let mut v: Vec<FreshNode> = Vec::new();
        for _ in 0..17 {
            // SAFETY: the slab is this test's alone.
            v.push(unsafe { slab.alloc(Kind::Leaf) }.unwrap());
        }
        let freed = v.swap_remove(3);
        let addr = freed.as_ptr();
        // SAFETY: the slab is this test's alone; each node is freed once.
        unsafe { slab.free_fresh(freed) };
        // SAFETY: the slab is this test's alone; each node is freed once.
        let again = unsafe { slab.alloc(Kind::Leaf) }.unwrap();
        assert_eq!(again.as_ptr(), addr);
        v.push(again);
        for n in v {
            // SAFETY: the slab is this test's alone; each node is freed once.
            unsafe { slab.free_fresh(n) };
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

    /// A block's chunks are all handed out before another block is made
    /// (none is left unused, which would waste its memory once the block
    /// is in a huge page), and a block gets a huge page when a big tree
    /// takes its last chunk: not while the tree is smaller, and not when a
    /// small tree takes that chunk. On fresh threads, whose pools start
    /// empty. (Not under Miri: 40,000 nodes; the slab's unsafe code is
    /// exercised by the tests above.)
    #[cfg(all(feature = "std", not(loom)))]
    #[cfg_attr(miri, ignore = "40,000 nodes")]
    #[test]
    fn a_block_is_used_up_before_the_next_and_a_big_tree_gets_it_a_huge_page() {
        let block = |n: &FreshNode| n.as_ptr().as_ptr().addr() & !(BLOCK - 1);
        let huge_paged = || pool::HUGE_PAGED.with(|n| n.get());
        for big_takes_last in [true, false] {
            std::thread::spawn(move || {
                let (small, big) = (Slab::new(), Slab::new());
                // Blocks in the order their first chunk was handed out, with
                // the chunks handed out from each.
                let mut blocks: Vec<(usize, Vec<usize>)> = Vec::new();
                let mut note = |n: FreshNode| {
                    if blocks.iter().any(|b| b.1.contains(&chunk_of(&n))) {
                        return; // a chunk handed out before
                    }
                    if blocks.last().map(|b| b.0) != Some(block(&n)) {
                        assert!(blocks.iter().all(|b| b.0 != block(&n)), "a chunk of an earlier block");
                        blocks.push((block(&n), Vec::new()));
                    }
                    blocks.last_mut().unwrap().1.push(chunk_of(&n));
                };
                // SAFETY: the slabs are this thread's alone.
                let alloc = |slab: &Slab| unsafe { slab.alloc(Kind::Leaf) }.unwrap();
                note(alloc(&small));
                // The big slab grows to the size of a big tree: the blocks
                // it used up meanwhile got no huge page.
                while !is_big(big.listed.get()) {
                    note(alloc(&big));
                }
                assert_eq!(huge_paged(), 0);
                // It takes the current block's chunks but the last; the
                // last goes to it or to the small slab, whose chunk is full.
                while pool::pooled() > 1 || !big.partial.get().is_null() {
                    note(alloc(&big));
                }
                let last = if big_takes_last { &big } else { &small };
                while pool::pooled() == 1 {
                    note(alloc(last));
                }
                assert_eq!(huge_paged(), usize::from(big_takes_last));
                // Every block but the newest was used up before the next.
                assert!(blocks.len() > 4);
                for (_, chunks) in &blocks[..blocks.len() - 1] {
                    assert_eq!(chunks.len(), NODE_CHUNKS);
                }
                // SAFETY: every node of both slabs is given up.
                unsafe {
                    small.free_all();
                    big.free_all();
                }
            })
            .join()
            .unwrap();
        }
    }

    /// A thread keeps at most `POOL_CHUNKS` empty chunks, the rest going
    /// back to their blocks, and `trim_thread_cache` gives those back too:
    /// every block goes back to the system once all its chunks have. On a
    /// fresh thread, whose pool starts empty. Chunks are taken and given
    /// back without a node in them, so only the blocks' header chunks are
    /// ever touched. (Under Miri with one block instead of 35.)
    #[cfg(all(feature = "std", not(loom)))]
    #[test]
    fn the_thread_cache_is_bounded_and_trimmed() {
        std::thread::spawn(|| {
            let blocks = if cfg!(miri) { 1 } else { pool::POOL_CHUNKS / NODE_CHUNKS + 3 };
            // The last block's chunks but three.
            let taken = blocks * NODE_CHUNKS - 3;
            let chunks: Vec<*mut Header> = (0..taken).map(|_| pool::take(false)).collect();
            assert!(chunks.iter().all(|h| !h.is_null()));
            assert_eq!(pool::pooled(), 3, "a new block's chunks wait in the pool");
            let freed = || pool::FREED_BLOCKS.with(|n| n.get());
            for h in chunks {
                // SAFETY: each chunk came from `take`, holds no node, and is
                // given back once.
                unsafe { pool::give(h) };
            }
            let kept = pool::pooled();
            assert_eq!(kept, pool::POOL_CHUNKS.min(blocks * NODE_CHUNKS), "the pool keeps up to its bound");
            // The chunks beyond the bound went back to their blocks, and
            // two blocks emptied: the pool holds the newest block's last
            // three chunks, and the first chunks given back, which fill
            // the first 32 blocks' worth but three.
            assert_eq!(freed(), blocks.saturating_sub(pool::POOL_CHUNKS / NODE_CHUNKS + 1));
            assert_eq!(trim_thread_cache(), kept * CHUNK);
            assert_eq!((pool::pooled(), freed()), (0, blocks), "every block is back with the system");
            assert_eq!(trim_thread_cache(), 0);
        })
        .join()
        .unwrap();
    }

    /// A leaf's content whose first pivot is `stamp`.
    fn stamped(stamp: u64) -> [Item; 2] {
        [Item { last: stamp, slot: ptr::null_mut(), gap: 0 }, Item { last: u64::MAX, slot: ptr::null_mut(), gap: 0 }]
    }

    /// Checks the slab's list against its definition: every chunk holding
    /// nodes on it once, linked both ways, `last` at its end and `listed`
    /// its length; the full chunks first, `partial` at the first with a
    /// free cell; no empty chunk on it; `live` cells in use in all.
    fn check_lists(slab: &Slab, live: usize) {
        let (mut h, mut prev) = (slab.all.get(), core::ptr::null_mut());
        let (mut chunks, mut used, mut seen_partial) = (0, 0, false);
        while !h.is_null() {
            // SAFETY: chunks on the list are live chunks of the slab, which
            // this test alone uses.
            let (free, back, next) = unsafe { ((*h).free, (*h).prev, (*h).next) };
            assert_eq!(back, prev, "chunk {chunks}: its back link");
            assert_ne!(free, ALL_FREE, "chunk {chunks}: an empty chunk stays listed");
            if free == 0 {
                assert!(!seen_partial, "chunk {chunks}: a full chunk after one with room");
            } else if !seen_partial {
                assert_eq!(slab.partial.get(), h, "chunk {chunks}: `partial` is not the first with room");
                seen_partial = true;
            }
            used += (ALL_FREE & !free).count_ones() as usize;
            chunks += 1;
            (prev, h) = (h, next);
        }
        assert_eq!(slab.last.get(), prev, "`last` ends the list");
        assert!(seen_partial || slab.partial.get().is_null(), "`partial` set with every chunk full");
        assert_eq!((chunks, used), (slab.listed.get(), live), "chunks listed, cells used");
    }

    /// Random allocations and frees against a model: no cell is handed out
    /// twice (each live node keeps a distinct stamp), a full chunk that
    /// gets a free cell back is used again, and the slab's list keeps its
    /// shape after every step.
    #[test]
    fn random_alloc_free_never_overlaps() {
        let slab = Slab::new();
        let mut live: Vec<(NodeRef<'_>, u64)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let steps = if cfg!(miri) { 400 } else { 20_000 };
        for step in 0..steps {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if live.is_empty() || x % 5 < 3 {
                // SAFETY: the slab is ours.
                let n = unsafe { slab.alloc(Kind::Leaf) }.unwrap().fill(&stamped(step));
                live.push((n, step));
            } else {
                let (n, stamp) = live.swap_remove((x >> 8) as usize % live.len());
                assert_eq!(n.pivot(0), stamp, "a live node was overwritten");
                // SAFETY: allocated above, freed once.
                unsafe { slab.free(n) };
            }
            if !cfg!(miri) || step % 8 == 0 {
                check_lists(&slab, live.len());
            }
        }
        let mut left = live.len();
        for (n, stamp) in live {
            assert_eq!(n.pivot(0), stamp);
            // SAFETY: as above.
            unsafe { slab.free(n) };
            left -= 1;
            check_lists(&slab, left);
        }
        assert!(slab.partial.get().is_null());
    }
}
