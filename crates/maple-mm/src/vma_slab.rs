//! The slab of VMA records: the attributes of a VMA ([`VmaData`]) behind
//! a counted reference ([`VmaRef`]), in 64-byte cells carved from 4 KiB
//! chunks — this crate's `vm_area_cachep`.
//!
//! Why not `Arc<VmaData>`: fork shares a record with the child for every
//! VMA it copies, so it touches (counts a reference on) every record of
//! the space. From the global allocator, records land wherever the
//! allocations around them left room — between the name strings of named
//! VMAs, say — and a fork of many named VMAs would spend most of its time
//! in cache misses on records spread over megabytes. Here records made one
//! after another sit next to each other whatever else is allocated, 63 to
//! a chunk, one per cache line.
//!
//! # The chunk protocol
//!
//! Each thread allocates from a chunk of its own (a thread-local
//! [`Owner`]): first cells that were freed and handed back to it, then
//! cells never used, and when the chunk is full it lets the chunk go and
//! takes a fresh one. A record is freed by whichever thread drops its last
//! reference (records are shared between address spaces and threads): the
//! cell is pushed on its chunk's `returned` stack (a lock-free push; only
//! the owner takes cells off, all at once, by swapping the head out, so
//! there is no ABA), then the chunk's `live` count is decremented.
//!
//! `live` counts the chunk's records plus one while an owner holds the
//! chunk, plus the counts the owner holds in reserve for records to come:
//! it adds them 63 at a time, and a new record takes one over, so making a
//! record is no atomic operation. A record freed by the thread that owns
//! its chunk skips the stack: the cell goes on the owner's own free list
//! and its count back into the reserve. A record of another chunk freed
//! by a thread joins that thread's pending chain instead, and the chain is
//! pushed on its chunk's stack whole, with one decrement, when the thread
//! frees a record of yet another chunk or lets its chunk go: a thread that
//! frees many records of one chunk does two atomic operations for them
//! all, not two each. (All this matters for fork: a child's records are
//! made, and when the child goes, freed, by one thread, and a big child's
//! records fill many chunks. So does the free of a record whose count is
//! one, which reads the count instead of decrementing it: no other
//! reference exists to change it. And a fork makes its records through a
//! [`Maker`], which holds the thread's owner for the whole copy instead of
//! looking it up once per record.)
//! Whoever brings `live` to zero (the last free after the owner let go, or
//! the owner letting go, with its reserve, of a chunk whose records are all
//! gone) frees the chunk; every push happened before its own decrement
//! (release), and the freeing thread acquires them all, so no thread
//! touches a chunk after it is freed. Cells returned to a chunk its owner
//! has let go are not reused: the chunk goes back to the system when its
//! last record does. That bounds what a long-lived record can keep alive
//! to one chunk, and in practice chunks empty quickly (a chunk is let go
//! only when full, and its records die in roughly the order they were
//! made). A pending chain keeps at most one more chunk per thread alive
//! until the thread's next free of another chunk, or its exit.

#![allow(unsafe_code)]

use core::{fmt, mem::MaybeUninit, ops::Deref, ptr::NonNull};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};

#[cfg(loom_mm)]
use loom::sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering};
#[cfg(not(loom_mm))]
use std::sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering};

use crate::vma::VmaData;

/// One record: its reference count and its attributes. Free cells hold
/// the next free cell's address where the attributes were.
#[repr(C, align(64))]
struct Cell {
    refs: AtomicUsize,
    data: MaybeUninit<VmaData>,
}

/// Cell 0 of a chunk.
#[repr(C)]
struct Header {
    /// Records in the chunk, plus one while an owner holds it.
    live: AtomicUsize,
    /// Cells freed since the owner last looked (a stack linked through
    /// the cells).
    returned: AtomicPtr<Cell>,
}

const CELL: usize = core::mem::size_of::<Cell>();

/// Bytes per chunk (a power of two: a cell finds its chunk by masking its
/// address). Loom models use chunks of three records, so that a handful
/// of operations reaches every case.
#[cfg(not(loom_mm))]
const CHUNK: usize = 4096;
#[cfg(loom_mm)]
const CHUNK: usize = (4 * CELL).next_power_of_two();

/// Cells per chunk, the header's included.
const CELLS: usize = CHUNK / CELL;

const CHUNK_LAYOUT: Layout = match Layout::from_size_align(CHUNK, CHUNK) {
    Ok(l) => l,
    Err(_) => panic!("chunk layout"),
};

const _: () = assert!(core::mem::size_of::<Header>() <= CELL && CELLS >= 4, "a header fits in a cell");
#[cfg(not(loom_mm))]
const _: () = assert!(CELL == 64, "a record is one cache line");

/// Loom builds keep a register of chunks (on the test's OS thread, where
/// loom runs every model thread): each access to a chunk checks that it
/// was not freed, a second free fails, and a model can check that every
/// chunk it made was freed.
#[cfg(loom_mm)]
mod chunks {
    use std::{cell::RefCell, collections::HashSet};

    std::thread_local! {
        static FREED: RefCell<HashSet<usize>> = RefCell::new(HashSet::new());
        static LIVE: core::cell::Cell<isize> = const { core::cell::Cell::new(0) };
    }

    pub(super) fn made<T>(h: *mut T) {
        FREED.with(|f| f.borrow_mut().remove(&h.addr()));
        LIVE.with(|l| l.set(l.get() + 1));
    }

    pub(super) fn freed<T>(h: *mut T) {
        assert!(FREED.with(|f| f.borrow_mut().insert(h.addr())), "a chunk was freed twice");
        LIVE.with(|l| l.set(l.get() - 1));
    }

    pub(super) fn check<T>(h: *mut T) {
        assert!(!FREED.with(|f| f.borrow().contains(&h.addr())), "a chunk was used after it was freed");
    }

    /// Chunks made and not yet freed on this thread.
    #[cfg(test)]
    pub(super) fn live() -> isize {
        LIVE.with(|l| l.get())
    }
}

#[cfg(not(loom_mm))]
mod chunks {
    #[inline(always)]
    pub(super) fn made<T>(_: *mut T) {}
    #[inline(always)]
    pub(super) fn freed<T>(_: *mut T) {}
    #[inline(always)]
    pub(super) fn check<T>(_: *mut T) {}
}

/// The chunk a cell was carved from (keeping the chunk's provenance).
fn header_of(cell: *mut Cell) -> *mut Header {
    cell.map_addr(|a| a & !(CHUNK - 1)).cast()
}

/// Where a free cell keeps the next one's address.
fn next_slot(cell: *mut Cell) -> *mut *mut Cell {
    // SAFETY: `data` is inside the cell; no memory is read here.
    unsafe { core::ptr::addr_of_mut!((*cell).data).cast() }
}

/// A thread's allocation state: the chunk it carves records from.
pub(crate) struct Owner {
    /// The chunk this owner holds (counted in its `live`), or null.
    chunk: *mut Header,
    /// Free cells of `chunk`: taken from its `returned` stack, or given
    /// back by this thread itself (see [`Owner::give_back_own`]).
    free: *mut Cell,
    /// Index of the first never-used cell of `chunk`.
    fresh: usize,
    /// Counts of `chunk`'s `live` this owner holds beyond its own one,
    /// for records it has yet to make: a record takes one over, a record
    /// this thread frees back into the chunk hands its count back, so
    /// neither touches `live`.
    reserved: usize,
    /// Cells of one other chunk that this thread freed and has not yet
    /// handed back: a chain linked through the cells, from `pending` to
    /// `pending_tail`, `pending_n` long, whose records' counts are still in
    /// that chunk's `live`. Handed back (one push of the whole chain, one
    /// decrement) when this thread frees a cell of yet another chunk and
    /// when the owner is let go; so at most one chunk per thread outlives
    /// its records for a while.
    pending: *mut Cell,
    pending_tail: *mut Cell,
    pending_n: usize,
}

/// Counts an owner adds to `live` at a time for records to come (one
/// atomic increment per this many records, not one per record).
const RESERVE: usize = CELLS;

impl Owner {
    pub(crate) const fn new() -> Owner {
        Owner {
            chunk: core::ptr::null_mut(),
            free: core::ptr::null_mut(),
            fresh: CELLS,
            reserved: 0,
            pending: core::ptr::null_mut(),
            pending_tail: core::ptr::null_mut(),
            pending_n: 0,
        }
    }

    /// A cell for a new record (counted in its chunk's `live`); its
    /// contents are uninitialised. Aborts if memory runs out, as `Arc::new`
    /// does.
    ///
    /// Inline, and short: a free cell or a never-used one of the chunk
    /// held, and a count from the reserve. Everything else (the chunk full,
    /// the reserve empty) is out of line.
    #[inline]
    fn take(&mut self) -> NonNull<Cell> {
        let cell = match self.next_cell() {
            Some(c) => c,
            None => self.take_slow(),
        };
        if self.reserved == 0 {
            self.add_reserve();
        }
        // One of our counts becomes the new record's.
        self.reserved -= 1;
        cell
    }

    /// A free cell of the chunk held, else a never-used one; `None` if it
    /// has neither (or no chunk is held: then `fresh == CELLS`).
    #[inline]
    fn next_cell(&mut self) -> Option<NonNull<Cell>> {
        let c = if !self.free.is_null() {
            let c = self.free;
            // SAFETY: `c` is a free cell of our chunk; its link was written
            // by this thread (`give_back_own`) or by the thread that returned
            // it, before the release CAS that our acquire swap read.
            self.free = unsafe { next_slot(c).read() };
            c
        } else if self.fresh < CELLS {
            // SAFETY: `fresh < CELLS` only while we hold a chunk (`let_go`
            // sets it to `CELLS`): a cell inside that chunk's allocation.
            let c = unsafe { self.chunk.cast::<u8>().add(self.fresh * CELL) }.cast::<Cell>();
            self.fresh += 1;
            c
        } else {
            return None;
        };
        chunks::check(self.chunk);
        // SAFETY: cells are inside an allocation, so never null.
        Some(unsafe { NonNull::new_unchecked(c) })
    }

    /// [`take`](Self::take)'s cell when the chunk held has no free or
    /// never-used cell: the cells other threads returned to it, else a
    /// fresh chunk (the full one let go).
    #[cold]
    #[inline(never)]
    fn take_slow(&mut self) -> NonNull<Cell> {
        if !self.chunk.is_null() {
            chunks::check(self.chunk);
            // SAFETY: we hold `chunk` (its `live` counts us), so it is alive.
            // Acquire: the pushers wrote the links before their release CAS.
            self.free = unsafe { (*self.chunk).returned.swap(core::ptr::null_mut(), Ordering::Acquire) };
            if let Some(c) = self.next_cell() {
                return c;
            }
            self.let_go();
        }
        // SAFETY: `CHUNK_LAYOUT` has non-zero size.
        let h = unsafe { alloc(CHUNK_LAYOUT) }.cast::<Header>();
        if h.is_null() {
            handle_alloc_error(CHUNK_LAYOUT);
        }
        // SAFETY: a fresh chunk, ours alone; the header is built in place,
        // with our own count and a reserve for records to come.
        unsafe {
            h.write(Header { live: AtomicUsize::new(1 + RESERVE), returned: AtomicPtr::new(core::ptr::null_mut()) })
        };
        chunks::made(h);
        self.chunk = h;
        self.reserved = RESERVE;
        // Cell 0 is the header; cell 1 is the new record's.
        self.fresh = 2;
        // SAFETY: cell 1 is inside the chunk (`CELLS >= 4`), and an address
        // inside an allocation is never null.
        unsafe { NonNull::new_unchecked(h.cast::<u8>().add(CELL).cast::<Cell>()) }
    }

    /// Adds [`RESERVE`] counts to the held chunk's `live` for records to
    /// come (one atomic operation per that many records).
    #[cold]
    fn add_reserve(&mut self) {
        chunks::check(self.chunk);
        // SAFETY: we hold the chunk (a cell was just taken from it). Relaxed:
        // the count only decides who frees the chunk, and that thread
        // synchronises with every other through the release decrements.
        unsafe { (*self.chunk).live.fetch_add(RESERVE, Ordering::Relaxed) };
        self.reserved = RESERVE;
    }

    /// Takes back a dead record's cell: if it belongs to the chunk this
    /// owner holds, the cell joins the owner's free cells and the record's
    /// count of `live` becomes the owner's; else it joins the pending chain
    /// of its chunk (the chain of another chunk handed back first). Neither
    /// is an atomic operation: a thread that frees many records of one
    /// chunk (a child address space dropped after a fork) hands them back
    /// with one push and one decrement.
    ///
    /// # Safety
    ///
    /// As for [`give_back_chain`], for the chain of this one cell: it came
    /// from [`Owner::take`] (of any owner), its record has been dropped,
    /// and nothing refers to it any more.
    #[inline]
    unsafe fn give_back_own(&mut self, cell: NonNull<Cell>) {
        let c = cell.as_ptr();
        let h = header_of(c);
        if h == self.chunk {
            // SAFETY: the cell is unused (the caller's contract) and in the
            // chunk we hold; only its owner (us) reads the free list.
            unsafe { next_slot(c).write(self.free) };
            self.free = c;
            self.reserved += 1;
            return;
        }
        if !self.pending.is_null() && header_of(self.pending) != h {
            self.flush_pending();
        }
        if self.pending.is_null() {
            self.pending_tail = c;
        }
        // SAFETY: the cell is unused (the caller's contract) and no other
        // thread can reach it: its count is still in `live`, and it is on
        // no list but ours.
        unsafe { next_slot(c).write(self.pending) };
        self.pending = c;
        self.pending_n += 1;
    }

    /// Hands the pending chain back to its chunk: one push, one decrement
    /// (which frees the chunk if they were its last records).
    #[cold]
    fn flush_pending(&mut self) {
        let head = core::mem::replace(&mut self.pending, core::ptr::null_mut());
        let n = core::mem::replace(&mut self.pending_n, 0);
        if !head.is_null() {
            // SAFETY: the chain's cells are unused cells of one chunk, linked
            // from `head` to `pending_tail`, and their `n` counts are still
            // in that chunk's `live`: we give them up here.
            unsafe { give_back_chain(head, self.pending_tail, n) };
        }
    }

    /// Stops allocating from the current chunk; frees it if no record in
    /// it is left.
    fn let_go(&mut self) {
        self.flush_pending();
        let h = core::mem::replace(&mut self.chunk, core::ptr::null_mut());
        self.free = core::ptr::null_mut();
        self.fresh = CELLS;
        let counts = 1 + core::mem::replace(&mut self.reserved, 0);
        if !h.is_null() {
            // SAFETY: we held `h` with `counts` counts: they keep it alive
            // until this call. (Free cells on our list are simply
            // forgotten: they are in no record's count.)
            unsafe { release_chunk(h, counts) };
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.let_go();
    }
}

/// Drops `n` counts of chunk `h`; frees it if they were the last.
///
/// # Safety
///
/// The caller holds `n` counts of `h` (a record in it, or an owner's) and
/// gives them up here.
unsafe fn release_chunk(h: *mut Header, n: usize) {
    chunks::check(h);
    // SAFETY: our counts keep `h` alive until the decrement. Release: our
    // earlier writes to the chunk (a push, the record's drop) happen before
    // whoever frees it; that thread acquires them with the fence.
    if unsafe { (*h).live.fetch_sub(n, Ordering::Release) } == n {
        fence(Ordering::Acquire);
        chunks::freed(h);
        // SAFETY: no record and no owner is left, so nobody can reach the
        // chunk; it was allocated with `CHUNK_LAYOUT`.
        unsafe {
            core::ptr::drop_in_place(h);
            dealloc(h.cast(), CHUNK_LAYOUT);
        }
    }
}

/// Returns a chain of dead records' cells to their chunk: the chain is
/// pushed on the chunk's `returned` stack whole, then their counts are
/// dropped from `live` at once.
///
/// # Safety
///
/// The cells, from `head` to `tail` through their links, are `n` cells of
/// one chunk that came from [`Owner::take`], whose records have been
/// dropped and which nothing refers to any more; their records' counts are
/// still in the chunk's `live`, and the caller gives them up here.
unsafe fn give_back_chain(head: *mut Cell, tail: *mut Cell, n: usize) {
    let h = header_of(head);
    chunks::check(h);
    // SAFETY: the records' counts in `live` keep the chunk alive until
    // `release_chunk` below; the cells are ours to write.
    unsafe {
        let mut top = (*h).returned.load(Ordering::Relaxed);
        loop {
            next_slot(tail).write(top);
            // Release: the links are written before the cells are visible.
            match (*h).returned.compare_exchange_weak(top, head, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => top = now,
            }
        }
        release_chunk(h, n);
    }
}

#[cfg(not(loom_mm))]
std::thread_local! {
    static OWNER: core::cell::RefCell<Owner> = const { core::cell::RefCell::new(Owner::new()) };
}

/// A cell from this thread's owner, or (during thread teardown, when the
/// thread-local is gone) from an owner made for this one record.
#[cfg(not(loom_mm))]
fn take_cell() -> NonNull<Cell> {
    OWNER.try_with(|o| o.borrow_mut().take()).unwrap_or_else(|_| Owner::new().take())
}

#[cfg(loom_mm)]
loom::thread_local! {
    static OWNER: core::cell::RefCell<Owner> = core::cell::RefCell::new(Owner::new());
}

#[cfg(loom_mm)]
fn take_cell() -> NonNull<Cell> {
    OWNER.with(|o| o.borrow_mut().take())
}

/// Makes records one after another (a fork's copies) from this thread's
/// owner, borrowed once for all of them (see [`with_maker`]), so that a
/// record costs no thread-local access.
pub(crate) struct Maker<'a> {
    owner: &'a mut Owner,
}

impl Maker<'_> {
    /// A new record holding `data` (as [`VmaRef::new`]).
    #[inline]
    pub(crate) fn make(&mut self, data: VmaData) -> VmaRef {
        // SAFETY: the cell was just taken.
        unsafe { VmaRef::in_cell(self.owner.take(), data) }
    }
}

/// Runs `f` with a [`Maker`] on this thread's owner. Records dropped on
/// this thread meanwhile go straight back to their chunks (the owner is
/// borrowed). If the owner is in use already or gone (thread teardown),
/// the maker works from an owner of its own, let go afterwards.
pub(crate) fn with_maker<R>(f: impl FnOnce(&mut Maker<'_>) -> R) -> R {
    let mut f = Some(f);
    let done = owner_with(|o| {
        let f = f.take()?;
        Some(match o {
            Some(owner) => f(&mut Maker { owner }),
            None => f(&mut Maker { owner: &mut Owner::new() }),
        })
    });
    match (done, f) {
        (Some(r), _) => r,
        // The thread-local is gone: `f` was not run.
        (None, Some(f)) => f(&mut Maker { owner: &mut Owner::new() }),
        (None, None) => unreachable!("with_maker ran its closure and lost the result"),
    }
}

/// Runs `f` on this thread's owner (`None` if it is borrowed already);
/// `None` without running `f` if the thread-local is gone.
#[cfg(not(loom_mm))]
fn owner_with<R>(f: impl FnOnce(Option<&mut Owner>) -> Option<R>) -> Option<R> {
    OWNER
        .try_with(|o| match o.try_borrow_mut() {
            Ok(mut o) => f(Some(&mut o)),
            Err(_) => f(None),
        })
        .ok()
        .flatten()
}

#[cfg(loom_mm)]
fn owner_with<R>(f: impl FnOnce(Option<&mut Owner>) -> Option<R>) -> Option<R> {
    OWNER.with(|o| match o.try_borrow_mut() {
        Ok(mut o) => f(Some(&mut o)),
        Err(_) => f(None),
    })
}

/// Returns a dead record's cell through this thread's owner
/// ([`Owner::give_back_own`]: no atomic operation), or, when the owner is
/// in use (by a [`Maker`]) or gone (thread teardown), straight to its
/// chunk.
///
/// # Safety
///
/// As for [`give_back_chain`], for the chain of this one cell.
unsafe fn return_cell(cell: NonNull<Cell>) {
    let own = OWNER
        .try_with(|o| {
            o.try_borrow_mut()
                .map(|mut o| {
                    // SAFETY: the caller's contract.
                    unsafe { o.give_back_own(cell) }
                })
                .is_ok()
        })
        .unwrap_or(false);
    if !own {
        // SAFETY: the caller's contract; the owner did not take the cell.
        unsafe { give_back_chain(cell.as_ptr(), cell.as_ptr(), 1) };
    }
}

/// A counted reference to a VMA's attributes: what the address space's
/// tree holds for each VMA. Cloning it (a split, a fork) copies no
/// attributes; the record is freed with its last reference. Reads go
/// through `Deref` (the fields are crate-private: read them through
/// [`Vma`](crate::Vma)).
pub struct VmaRef(NonNull<Cell>);

// SAFETY: a shared, immutable `VmaData` (which is `Send + Sync`: checked
// below) with an atomic count and a chunk protocol that any thread may free
// through, as for `Arc<VmaData>`.
unsafe impl Send for VmaRef {}

/// The claim above, checked: a field that is not `Send + Sync` added to
/// `VmaData` fails the build here.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<VmaData>();
};
// SAFETY: as above.
unsafe impl Sync for VmaRef {}

impl VmaRef {
    /// A new record holding `data`.
    pub(crate) fn new(data: VmaData) -> VmaRef {
        // SAFETY: the cell was just taken.
        unsafe { VmaRef::in_cell(take_cell(), data) }
    }

    /// The record in `cell`.
    ///
    /// # Safety
    ///
    /// `cell` was just taken from an owner ([`Owner::take`]): unused, and
    /// counted in its chunk's `live`.
    #[inline]
    unsafe fn in_cell(cell: NonNull<Cell>, data: VmaData) -> VmaRef {
        // SAFETY: an unused cell (the caller's contract) is ours alone
        // until published.
        unsafe { cell.as_ptr().write(Cell { refs: AtomicUsize::new(1), data: MaybeUninit::new(data) }) };
        VmaRef(cell)
    }

    /// True if both refer to the same record.
    pub fn ptr_eq(a: &VmaRef, b: &VmaRef) -> bool {
        a.0 == b.0
    }

    /// References to this record (VMAs in any address space, and clones).
    pub fn ref_count(&self) -> usize {
        // SAFETY: our reference keeps the cell alive.
        unsafe { self.0.as_ref() }.refs.load(Ordering::Relaxed)
    }
}

impl Deref for VmaRef {
    type Target = VmaData;
    fn deref(&self) -> &VmaData {
        // SAFETY: the cell holds an initialised record while a reference
        // to it exists.
        unsafe { self.0.as_ref().data.assume_init_ref() }
    }
}

impl Clone for VmaRef {
    fn clone(&self) -> VmaRef {
        // SAFETY: our reference keeps the cell alive. Relaxed, as `Arc`:
        // a new reference is made from an existing one.
        let old = unsafe { self.0.as_ref() }.refs.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc`: an overflowing count would free a record in use.
            std::process::abort();
        }
        VmaRef(self.0)
    }
}

impl Drop for VmaRef {
    fn drop(&mut self) {
        // SAFETY: our reference keeps the cell alive until the decrement.
        let refs = &unsafe { self.0.as_ref() }.refs;
        // A count of one is ours alone: no other reference exists to clone
        // or drop it, so it cannot change, and the record is ours to free
        // without a read-modify-write (a child's records after a fork, most
        // records at an unmap). Acquire: it reads the value the last other
        // reference's release decrement left, so every use of the record
        // through those happens before it is dropped, as the fence below
        // ensures on the other way.
        if refs.load(Ordering::Acquire) != 1 {
            // Release/acquire as `Arc`: every use of the record by other
            // references happens before it is dropped.
            if refs.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
        }
        // SAFETY: ours was the last reference: the record is dropped once
        // and the cell, now unused, goes back to its chunk.
        unsafe {
            let c = self.0.as_ptr();
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*c).refs));
            (*c).data.assume_init_drop();
            return_cell(self.0);
        }
    }
}

impl fmt::Debug for VmaRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

// SAFETY: the word is the cell's address: non-null, 64-byte aligned inside
// an allocation (so never the tree's reserved top-page marker); `from_raw`
// takes back the reference `into_raw` gave up; a borrow is valid while the
// tree holds that reference.
unsafe impl maple_tree::Handle for VmaRef {
    type Borrowed<'a> = &'a VmaData;

    fn into_raw(self) -> NonNull<()> {
        core::mem::ManuallyDrop::new(self).0.cast()
    }

    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        VmaRef(raw.cast())
    }

    unsafe fn borrow<'a>(raw: NonNull<()>) -> &'a VmaData {
        // SAFETY: the caller's contract: the tree's reference keeps the
        // record alive and initialised for 'a.
        unsafe { raw.cast::<Cell>().as_ref().data.assume_init_ref() }
    }
}

/// A record's attributes for the tests: private anonymous, read-only,
/// told apart by `off_base`.
#[cfg(test)]
fn test_data(i: u64) -> VmaData {
    use crate::{vma::Backing, VmFlags};
    VmaData {
        flags: VmFlags::READ,
        backing: Backing::Anon,
        off_base: i,
        name: None,
        anon: None,
        extra: None,
        policy: None,
    }
}

#[cfg(all(test, not(loom_mm)))]
mod tests {
    use super::*;
    use crate::vma::VmaData;

    fn data(i: u64) -> VmaData {
        test_data(i)
    }

    #[test]
    fn records_made_in_a_row_sit_in_a_row() {
        let rs: Vec<VmaRef> = (0..200).map(|i| VmaRef::new(data(i))).collect();
        let mut next_to = 0;
        for w in rs.windows(2) {
            if w[1].0.as_ptr().addr() == w[0].0.as_ptr().addr() + CELL {
                next_to += 1;
            }
        }
        // A test runs on a thread of its own, so on a chunk of its own:
        // all but the three jumps to a new chunk (63 records each).
        assert_eq!(next_to, 199 - 3);
        for (i, r) in rs.iter().enumerate() {
            assert_eq!(r.off_base, i as u64);
        }
    }

    #[test]
    fn a_record_lives_until_its_last_reference() {
        let a = VmaRef::new(data(7));
        let b = a.clone();
        assert!(VmaRef::ptr_eq(&a, &b));
        assert_eq!(a.ref_count(), 2);
        drop(a);
        assert_eq!(b.ref_count(), 1);
        assert_eq!(b.off_base, 7);
    }

    /// A record dropped on the thread that made it, while that thread
    /// still allocates from its chunk, goes straight back to the thread's
    /// free cells: the next record takes that very cell (before, it went
    /// to the chunk's shared stack, read only once the chunk was full).
    /// Then many rounds of making and dropping, and a thread exit: Miri
    /// checks that the chunk's count still balances (it is freed, once).
    #[test]
    fn a_record_dropped_by_its_maker_is_reused_at_once() {
        std::thread::spawn(|| {
            let keep = VmaRef::new(data(1));
            let a = VmaRef::new(data(2));
            let cell = a.0;
            drop(a);
            let b = VmaRef::new(data(3));
            assert_eq!(b.0, cell, "the dropped cell was not reused");
            assert_eq!((keep.off_base, b.off_base), (1, 3));
            let rounds = if cfg!(miri) { 3 * CELLS } else { 50 * CELLS };
            let mut held = Vec::new();
            for i in 0..rounds as u64 {
                held.push(VmaRef::new(data(i)));
                if i % 3 != 0 {
                    drop(held.swap_remove(held.len() / 2));
                }
            }
            for (i, r) in held.iter().enumerate() {
                assert_eq!(r.ref_count(), 1, "record {i}");
            }
        })
        .join()
        .unwrap();
    }

    /// A thread that frees records of a chunk it has let go keeps their
    /// cells in its pending chain (no atomic operation each) and hands the
    /// chain back whole, with one decrement of `live`, when it frees a
    /// record of yet another chunk; a record kept alive keeps the chunk.
    #[test]
    fn records_of_a_let_go_chunk_are_handed_back_as_one_chain() {
        std::thread::spawn(|| {
            let per = CELLS - 1;
            // Chunks X (full, let go), Y (full, let go) and Z (held).
            let mut rs: Vec<VmaRef> = (0..2 * per as u64 + 3).map(|i| VmaRef::new(data(i))).collect();
            let (x, y) = (header_of(rs[0].0.as_ptr()), header_of(rs[per].0.as_ptr()));
            assert!(x != y && header_of(rs[2 * per].0.as_ptr()) != y);
            // The chunks are read only while a record keeps them alive, and
            // no other thread touches them.
            // SAFETY: as just said.
            let live = |h: *mut Header| unsafe { (*h).live.load(Ordering::Relaxed) };
            let returned = |h: *mut Header| {
                let mut n = 0;
                // SAFETY: as above.
                let mut c = unsafe { (*h).returned.load(Ordering::Relaxed) };
                while !c.is_null() {
                    n += 1;
                    // SAFETY: a returned cell of a live chunk holds its link.
                    c = unsafe { next_slot(c).read() };
                }
                n
            };
            let y_records: Vec<VmaRef> = rs.drain(per..2 * per).collect();
            let keep = rs.remove(0);
            // X's records but one: pending, nothing handed back yet.
            rs.drain(..per - 1).for_each(drop);
            assert_eq!((live(x), returned(x)), (per, 0), "X's frees were handed back one by one");
            // Y's records: X's chain goes back whole, Y's wait.
            let y_last = y_records.len();
            let mut y_records = y_records;
            let y_kept = y_records.pop();
            drop(y_records);
            assert_eq!((live(x), returned(x)), (1, per - 1), "X's chain was not handed back");
            assert_eq!((live(y), returned(y)), (y_last, 0), "Y's frees were handed back one by one");
            assert_eq!(keep.off_base, 0);
            // Letting go hands back Y's chain; Y lives on with its one
            // record, X with its.
            OWNER.with(|o| o.borrow_mut().let_go());
            assert_eq!((live(y), returned(y)), (1, y_last - 1));
            assert_eq!((live(x), returned(x)), (1, per - 1));
            assert_eq!(y_kept.map(|r| r.off_base), Some(2 * per as u64 - 1));
            for (i, r) in rs.iter().enumerate() {
                assert_eq!(r.off_base, (2 * per + i) as u64);
            }
        })
        .join()
        .unwrap();
    }

    /// A maker's records sit in a row in the thread's chunk, and the
    /// thread's owner goes on after them (the next record follows); a
    /// record dropped while the maker holds the owner goes back to its
    /// chunk's shared stack and is reused all the same. A maker made while
    /// another holds the owner works from an owner of its own.
    #[test]
    fn a_maker_makes_records_from_the_threads_chunk() {
        std::thread::spawn(|| {
            let first = VmaRef::new(data(0));
            let early = VmaRef::new(data(1));
            let (made, nested) = with_maker(|maker| {
                let made: Vec<VmaRef> = (2..6).map(|i| maker.make(data(i))).collect();
                drop(early);
                let nested = with_maker(|inner| inner.make(data(99)));
                (made, nested)
            });
            assert_eq!(nested.off_base, 99);
            assert_ne!(header_of(nested.0.as_ptr()), header_of(first.0.as_ptr()), "a nested maker shared the owner");
            let next = VmaRef::new(data(6));
            let addr = |r: &VmaRef| r.0.as_ptr().addr();
            for (i, r) in made.iter().enumerate() {
                assert_eq!(addr(r), addr(&first) + (i + 2) * CELL, "record {i} not in a row");
                assert_eq!(r.off_base, i as u64 + 2);
            }
            assert_eq!(addr(&next), addr(&first) + 6 * CELL, "the owner did not come back");
            // `early`'s cell went to the chunk's stack: taken once the
            // chunk's never-used cells run out.
            let rest: Vec<VmaRef> = (7..CELLS as u64).map(|i| VmaRef::new(data(i))).collect();
            assert!(rest.iter().any(|r| addr(r) == addr(&first) + CELL), "the returned cell was not reused");
        })
        .join()
        .unwrap();
    }

    /// Records dropped on other threads come back to the owner's chunk and
    /// are reused; chunks let go are freed (Miri checks that nothing leaks
    /// and that no freed memory is touched).
    #[test]
    fn records_freed_on_other_threads_are_reused() {
        // Whole chunks (this test's thread starts without one), so that the
        // last one is full and a new record must reuse a returned cell to
        // stay in it.
        let n = (CELLS as u64 - 1) * if cfg!(miri) { 2 } else { 80 };
        let rs: Vec<VmaRef> = (0..n).map(|i| VmaRef::new(data(i))).collect();
        let last_chunk = header_of(rs[rs.len() - 1].0.as_ptr());
        let handles: Vec<_> = rs
            .chunks(n as usize / 3 + 1)
            .map(|part| {
                let part: Vec<VmaRef> = part.to_vec();
                std::thread::spawn(move || drop(part))
            })
            .collect();
        drop(rs);
        for h in handles {
            h.join().unwrap();
        }
        // The current chunk got its cells back; new records reuse them.
        let again: Vec<VmaRef> = (0..CELLS as u64 - 1).map(|i| VmaRef::new(data(i + 1))).collect();
        for (i, r) in again.iter().enumerate() {
            assert_eq!(header_of(r.0.as_ptr()), last_chunk, "record {i} not in the reused chunk");
            assert_eq!(r.off_base, i as u64 + 1);
        }
    }
}

#[cfg(all(test, loom_mm))]
mod loom_tests {
    use super::*;
    use crate::vma::VmaData;
    use loom::thread;

    /// What a thread's exit does to its owner (loom runs thread-local
    /// destructors outside the model, so the models do it themselves):
    /// lets its chunk go and hands its pending chain back.
    fn exit_thread() {
        OWNER.with(|o| o.borrow_mut().let_go());
    }

    /// Drops `r` on a thread of its own, which then exits.
    fn drop_elsewhere(r: VmaRef) -> thread::JoinHandle<()> {
        thread::spawn(move || {
            drop(r);
            exit_thread();
        })
    }

    /// This thread exits, and by then every chunk the model made is freed.
    fn exit_and_check() {
        exit_thread();
        assert_eq!(chunks::live(), 0, "a chunk leaked");
    }

    fn data(i: u64) -> VmaData {
        test_data(i)
    }

    /// The owner fills a chunk (three records), another thread drops one of
    /// them while the owner makes a fourth (reusing the returned cell, or
    /// letting the full chunk go for a new one) and then exits: in every
    /// interleaving each live record keeps its contents, no chunk is used
    /// after it is freed or freed twice, and every chunk is freed.
    #[test]
    fn loom_free_races_the_owner() {
        loom::model(|| {
            let a = VmaRef::new(data(1));
            let b = VmaRef::new(data(2));
            let c = VmaRef::new(data(3));
            let t = drop_elsewhere(b);
            let d = VmaRef::new(data(4));
            t.join().unwrap();
            assert_eq!((a.off_base, c.off_base, d.off_base), (1, 3, 4));
            drop((a, c, d));
            exit_and_check();
        });
    }

    /// The owner drops a record of the chunk it holds (taken straight back,
    /// with no atomic operation) while another thread drops one of the same
    /// chunk (pushed on the shared stack); then the owner makes records
    /// past the chunk's end. The counts balance in every interleaving:
    /// each record keeps its contents and the chunks are freed, once.
    #[test]
    fn loom_owner_and_another_thread_free_in_one_chunk() {
        loom::model(|| {
            let a = VmaRef::new(data(1));
            let b = VmaRef::new(data(2));
            let t = drop_elsewhere(b);
            drop(a);
            let c = VmaRef::new(data(3));
            let d = VmaRef::new(data(4));
            let e = VmaRef::new(data(5));
            t.join().unwrap();
            assert_eq!((c.off_base, d.off_base, e.off_base), (3, 4, 5));
            drop((c, d, e));
            exit_and_check();
        });
    }

    /// The two last references to a record are dropped on two threads at
    /// once (one of them may see a count of one and skip the decrement):
    /// the cell comes back exactly once, so the next records all get cells
    /// of their own, and nothing leaks.
    #[test]
    fn loom_last_two_references_dropped_at_once() {
        loom::model(|| {
            let a = VmaRef::new(data(1));
            let b = a.clone();
            let t = drop_elsewhere(b);
            drop(a);
            t.join().unwrap();
            let c = VmaRef::new(data(2));
            let d = VmaRef::new(data(3));
            let e = VmaRef::new(data(4));
            assert!(!VmaRef::ptr_eq(&c, &d) && !VmaRef::ptr_eq(&c, &e) && !VmaRef::ptr_eq(&d, &e));
            assert_eq!((c.off_base, d.off_base, e.off_base), (2, 3, 4));
            drop((c, d, e));
            exit_and_check();
        });
    }

    /// The owner frees records of a chunk it has let go (a pending chain)
    /// while another thread frees one of the same chunk (a push of its
    /// own); then the owner lets go, handing the chain back. Every chunk
    /// is freed, once, in every interleaving.
    #[test]
    fn loom_pending_chain_races_another_free() {
        loom::model(|| {
            let a = VmaRef::new(data(1));
            let b = VmaRef::new(data(2));
            let c = VmaRef::new(data(3));
            let d = VmaRef::new(data(4));
            let t = drop_elsewhere(b);
            drop(a);
            drop(c);
            assert_eq!(d.off_base, 4);
            drop(d);
            t.join().unwrap();
            exit_and_check();
        });
    }

    /// A maker holds the thread's owner while another thread frees one of
    /// its records; then the owner is let go.
    #[test]
    fn loom_maker_races_a_free() {
        loom::model(|| {
            let (t, b, c) = with_maker(|maker| {
                let a = maker.make(data(1));
                let t = drop_elsewhere(a);
                (t, maker.make(data(2)), maker.make(data(3)))
            });
            t.join().unwrap();
            assert_eq!((b.off_base, c.off_base), (2, 3));
            drop((b, c));
            exit_and_check();
        });
    }

    /// The owner lets its chunk go while the last record in it is dropped
    /// on another thread: exactly one of them frees it.
    #[test]
    fn loom_last_free_races_let_go() {
        loom::model(|| {
            let a = VmaRef::new(data(1));
            let t = drop_elsewhere(a);
            exit_thread();
            t.join().unwrap();
            assert_eq!(chunks::live(), 0, "a chunk leaked");
        });
    }
}
