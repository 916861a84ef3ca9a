//! A maple tree that readers use without locks while one writer at a time
//! changes it: the kernel's RCU mode.
//!
//! # Reading
//!
//! Readers [`pin`](ConcurrentMapleTree::pin) an epoch and read under the
//! returned [`ReadGuard`]; values they see stay alive until the guard is
//! dropped, even if a writer replaces or removes them meanwhile. Reading
//! takes no lock, writes nothing shared, and never waits for the writer.
//!
//! What a reader may see during a concurrent write: each lookup returns the
//! value the index had either before or after the write (never a torn or
//! freed entry); an iteration may show some entries from before and some
//! from after one write, but always in ascending order and never the same
//! index twice.
//!
//! # Writing
//!
//! [`lock`](ConcurrentMapleTree::lock) serialises writers and hands out a
//! [`WriteGuard`]. Every multi-word change is built in fresh nodes and
//! published by one pointer store (release); only single-word updates (an
//! exact-fit replacement, a gap value) happen in place. Replaced nodes are
//! marked dead, so readers that meet one restart from the root, and are
//! freed, like replaced or erased values, only after every reader that
//! could have seen them has unpinned.
//!
//! # Reclamation
//!
//! `crossbeam-epoch`: reading costs one thread-local pin (no shared
//! counter, no atomic read-modify-write on shared memory), which keeps the
//! read path flat on many cores. The writer gathers what its writes unlinked
//! into batches and keeps them; the collector only sets a batch's flag when
//! no reader can still see it, and the writer frees it on its own thread
//! during a later write or [`WriteGuard::reclaim`]. Readers thus never free
//! memory the writer allocated nor run a value's `Drop`, and dropping the
//! tree frees every batch at once, on the dropping thread.
//!
//! # The freeing rule
//!
//! In RCU mode, a node (or value) that readers could have reached at any
//! time since it was published is freed only after a grace period: it is
//! marked dead, put in a batch, and freed once that batch's flag is set.
//! A node may be freed at once only if it was never published (a write
//! that failed while planning) or under `&mut` (no reader can exist). Every
//! call of `Slab::free` in the crate falls in one of these cases, and says
//! which.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    marker::PhantomData,
    ops::{RangeBounds, RangeInclusive},
    ptr::NonNull,
};
use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard,
    },
};

mod cursor;

pub use cursor::WriteCursor;

use crossbeam_epoch as epoch;
use crossbeam_utils::CachePadded;

use crate::{
    alloc::Slab,
    cursor::Cursor,
    error::{Error, InsertError},
    handle::{is_value, reserved_word, Handle},
    iter::{iter_bounds, Entries, RawIter},
    kept_walk::KeptTree,
    key::{self, Key},
    node::Unlinked,
    raw::{Path, RawTree},
    store::{Store, Stored},
    tree::{abort_oom, clear_values, MapleTree, Stats},
    write::{self, WriteTarget},
};

/// A pinned epoch: values and nodes read under it stay allocated until it
/// is dropped. Made by [`ConcurrentMapleTree::pin`].
#[must_use]
pub struct ReadGuard {
    _epoch: epoch::Guard,
}

impl fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadGuard").finish_non_exhaustive()
    }
}

/// A maple tree with lock-free readers; see "Locking and reading" in the
/// [crate docs](crate).
///
/// ```
/// use std::sync::Arc;
/// use maple_tree::{ConcurrentMapleTree, U63};
///
/// let t = Arc::new(ConcurrentMapleTree::<U63>::new());
/// t.lock().insert_range(10..=19, U63::from(1u32)).unwrap();
/// let reader = {
///     let t = Arc::clone(&t);
///     std::thread::spawn(move || {
///         let g = t.pin();
///         t.load(15, &g).map(U63::get)
///     })
/// };
/// t.lock().store_range(15..=15, U63::from(2u32)).unwrap();
/// let seen = reader.join().unwrap();
/// assert!(seen == Some(1) || seen == Some(2));
/// assert_eq!(t.load_with(15, |v| v.map(U63::get)), Some(2));
/// ```
pub struct ConcurrentMapleTree<V: Handle + Send + Sync + 'static, K: Key = u64> {
    // Readers touch only `raw.root` (and the nodes); `raw.len`, the
    // writer's lock and its garbage live on other cache lines, so a busy
    // writer does not make every lookup miss on the line holding the root.
    raw: Lines,
    writer: CachePadded<Mutex<Writer<V>>>,
    _keys: PhantomData<fn() -> K>,
}

/// A [`RawTree`] placed so that its `len` (written by nearly every write)
/// starts a cache line and `root` (read by every lookup) ends the one
/// before.
#[repr(C, align(128))]
struct Lines {
    _pad: [u8; LINES_PAD],
    /// A raw tree in the plain tree's wrapper, so that the writer can
    /// lend it out as one (`WriteGuard::tree`); its kept walk stays
    /// empty: only a plain tree's own writes keep one.
    raw: KeptTree,
}

const LINES_PAD: usize = 128 - core::mem::offset_of!(RawTree, len);
const _: () = assert!(
    core::mem::offset_of!(RawTree, root) == 0 && core::mem::offset_of!(RawTree, len) <= 64,
    "root first and len within a line of it, for the padding scheme"
);

impl core::ops::Deref for Lines {
    type Target = RawTree;
    fn deref(&self) -> &RawTree {
        &self.raw
    }
}

impl core::ops::DerefMut for Lines {
    fn deref_mut(&mut self) -> &mut RawTree {
        &mut self.raw
    }
}

impl Lines {
    fn new(raw: RawTree) -> Lines {
        Lines { _pad: [0; LINES_PAD], raw: KeptTree::new(raw) }
    }
}

/// What only the writer touches: the garbage of recent writes, and the
/// sealed batches waiting for their grace period.
struct Writer<V: Handle + Send + 'static> {
    pending: Batch<V>,
    /// Sealed batches, oldest first, each with the flag that the epoch
    /// collector sets (on whichever thread it runs) once no reader can
    /// still see the batch. The batches themselves never leave the writer:
    /// it frees them on its own thread at a later write or
    /// [`WriteGuard::reclaim`], and whoever drops the tree frees the rest.
    /// Readers therefore never free memory the writer allocated nor run a
    /// value's `Drop`, and no node or value of this tree is ever freed by a
    /// thread that does not hold the writer lock or own the tree.
    sealed: VecDeque<(Arc<AtomicBool>, Batch<V>)>,
}

/// Retired nodes and removed values waiting for their grace period.
struct Batch<V: Handle + Send + 'static> {
    nodes: Vec<Unlinked>,
    values: Vec<NonNull<()>>,
    _v: PhantomData<V>,
}

// SAFETY: a batch is unreachable from the tree; its values are `Send` and
// the nodes are plain memory owned by the batch.
unsafe impl<V: Handle + Send + 'static> Send for Batch<V> {}

impl<V: Handle + Send + 'static> Batch<V> {
    /// An empty batch that allocates nothing yet.
    fn new() -> Self {
        Batch { nodes: Vec::new(), values: Vec::new(), _v: PhantomData }
    }

    /// An empty batch with room for a full one (no regrowth while filling).
    fn with_room() -> Self {
        Batch { nodes: Vec::with_capacity(BATCH), values: Vec::with_capacity(BATCH), _v: PhantomData }
    }

    fn len(&self) -> usize {
        self.nodes.len() + self.values.len()
    }
}

impl<V: Handle + Send + 'static> Batch<V> {
    /// Frees the batch's nodes into `slab` and drops its values.
    ///
    /// # Safety
    ///
    /// No reader can hold the batch's nodes or values (its grace period
    /// passed, or the tree is owned); its nodes came from `slab`, and the
    /// caller is the slab's only user (it holds the writer lock or owns the
    /// tree).
    unsafe fn free(mut self, slab: &Slab) {
        for n in self.nodes.drain(..) {
            // SAFETY: the caller's contract; each node is listed once.
            unsafe { slab.free(n) };
        }
    }
}

impl<V: Handle + Send + 'static> Drop for Batch<V> {
    /// Drops the values. Nodes go back only through [`Batch::free`] (a
    /// batch dropped without it, which the crate never does, would leak
    /// its nodes rather than free them into the wrong place).
    fn drop(&mut self) {
        debug_assert!(self.nodes.is_empty(), "a batch's nodes were not freed");
        for w in self.values.drain(..) {
            // SAFETY: removed words are values the tree gave up, listed once.
            drop(unsafe { V::from_raw(w) });
        }
    }
}

/// Garbage items (nodes plus values) per batch handed to the collector.
const BATCH: usize = 32;

// SAFETY: values are `Send + Sync`; the raw tree is atomics and owned nodes;
// writers are serialised by the mutex and readers only read.
unsafe impl<V: Handle + Send + Sync + 'static, K: Key> Send for ConcurrentMapleTree<V, K> {}
// SAFETY: as above.
unsafe impl<V: Handle + Send + Sync + 'static, K: Key> Sync for ConcurrentMapleTree<V, K> {}

impl<V: Handle + Send + Sync + 'static, K: Key> Default for ConcurrentMapleTree<V, K> {
    fn default() -> Self {
        Self::keyed()
    }
}

/// The constructors of a tree with `u64` keys (see [`MapleTree::new`] on
/// why they are not generic over the key type).
impl<V: Handle + Send + Sync + 'static> ConcurrentMapleTree<V> {
    /// An empty tree without gap tracking.
    pub fn new() -> Self {
        Self::keyed()
    }

    /// An empty gap-tracking tree.
    pub fn with_gaps() -> Self {
        Self::keyed_with_gaps()
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> fmt::Debug for ConcurrentMapleTree<V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrentMapleTree").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> ConcurrentMapleTree<V, K> {
    fn with_raw(raw: RawTree) -> Self {
        ConcurrentMapleTree {
            raw: Lines::new(raw),
            writer: CachePadded::new(Mutex::new(Writer { pending: Batch::new(), sealed: VecDeque::new() })),
            _keys: PhantomData,
        }
    }

    /// An empty tree of any key type without gap tracking: what
    /// [`new`](ConcurrentMapleTree::new) is for `u64` keys (see
    /// [`MapleTree::keyed`]).
    pub fn keyed() -> Self {
        Self::with_raw(RawTree::new(false))
    }

    /// An empty gap-tracking tree of any key type.
    pub fn keyed_with_gaps() -> Self {
        Self::with_raw(RawTree::new(true))
    }

    /// Pins the current epoch for reading.
    pub fn pin(&self) -> ReadGuard {
        ReadGuard { _epoch: epoch::pin() }
    }

    fn borrow<'g>(&'g self, w: *mut ()) -> Option<V::Borrowed<'g>> {
        if !is_value(w) {
            return None;
        }
        // SAFETY: a value word read under a pinned guard stays alive until
        // the guard (which outlives 'g) is dropped: writers defer its drop.
        Some(unsafe { V::borrow(NonNull::new_unchecked(w)) })
    }

    /// The value at `index`, valid while `guard` lives.
    pub fn load<'g>(&'g self, index: K, guard: &'g ReadGuard) -> Option<V::Borrowed<'g>> {
        let _ = guard;
        self.borrow(self.raw.load_rcu(index.to_index()))
    }

    /// The entry containing `index` with its range.
    pub fn get_range<'g>(&'g self, index: K, guard: &'g ReadGuard) -> Option<(RangeInclusive<K>, V::Borrowed<'g>)> {
        let _ = guard;
        let (lo, hi, w) = self.raw.lookup_rcu(index.to_index());
        self.borrow(w).map(|b| (key::keys(lo, hi), b))
    }

    /// Calls `f` with the value at `index` (pinning for the duration).
    pub fn load_with<R>(&self, index: K, f: impl FnOnce(Option<V::Borrowed<'_>>) -> R) -> R {
        let g = self.pin();
        f(self.load(index, &g))
    }

    /// A clone of the value at `index` (for `Arc` and `Copy`-like values).
    pub fn load_cloned(&self, index: K) -> Option<V>
    where
        V: Clone,
    {
        let _g = self.pin();
        let w = self.raw.load_rcu(index.to_index());
        // SAFETY: a live value word of this tree, kept alive by `_g`.
        is_value(w).then(|| unsafe { V::clone_raw(NonNull::new_unchecked(w)) })
    }

    /// The entries overlapping `range`, ascending, under `guard`; from the
    /// back too (`.rev()`, `next_back`, and both ends mixed), so that the
    /// entry at or before an index is `range(..=k, &g).next_back()`.
    ///
    /// Readers do not wait for the writer: the iterator walks the nodes it
    /// reached even if the writer replaces them meanwhile. An entry present
    /// the whole time comes exactly once, in order; an entry written
    /// meanwhile may come in its old form, its new one, or not at all.
    ///
    /// ```
    /// use maple_tree::{ConcurrentMapleTree, U63};
    ///
    /// let t: ConcurrentMapleTree<U63> = (0..10u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    /// let g = t.pin();
    /// // The last entry starting at or before 57.
    /// let (r, v) = t.range(..=57, &g).next_back().unwrap();
    /// assert_eq!((r, v.get()), (50..=54, 5));
    /// // The three highest entries, highest first.
    /// let top: Vec<u64> = t.iter(&g).rev().take(3).map(|(_, v)| v.get()).collect();
    /// assert_eq!(top, [9, 8, 7]);
    /// ```
    pub fn range<'g>(&'g self, range: impl RangeBounds<K>, guard: &'g ReadGuard) -> ConcurrentIter<'g, V, K> {
        let _ = guard;
        let (first, last, done) = iter_bounds(key::inclusive(&range));
        // The walk comes with the first call, as `MapleTree::range`'s does.
        // SAFETY: the root is read now, under `guard`, which outlives the
        // iterator ('g) and keeps every node reachable from that root
        // alive; writers change such nodes only by single-word slot
        // stores (RCU mode).
        let raw = unsafe { RawIter::lazy(&self.raw, first, last, done) };
        // SAFETY: as above: `SHARED`'s contract.
        ConcurrentIter { _tree: PhantomData, entries: unsafe { Entries::new(raw) } }
    }

    /// A read cursor at the range containing `index`, under `guard`. It
    /// moves only through the nodes its walk reached, even if a writer
    /// replaces them meanwhile, so it shows a consistent (possibly slightly
    /// old) picture. Under one guard:
    ///
    /// * [`range`](Cursor::range) is the range the last step returned (a
    ///   step that finds nothing leaves the cursor where it was), and
    ///   [`get`](Cursor::get) is a value stored for that whole range;
    /// * [`next_range`](Cursor::next_range) starts right after the range
    ///   left and [`prev_range`](Cursor::prev_range) ends right before it;
    ///   they find nothing only at `u64::MAX` and at 0;
    /// * [`next`](Cursor::next) and [`prev`](Cursor::prev) never step over
    ///   an entry present the whole time.
    ///
    /// [`seek`](Cursor::seek) walks afresh, so what it finds may be newer
    /// than what the cursor saw before.
    ///
    /// ```
    /// use maple_tree::{ConcurrentMapleTree, U63};
    /// let t: ConcurrentMapleTree<U63> = (1..4u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    /// let g = t.pin();
    /// let mut c = t.cursor(22, &g);
    /// assert_eq!(c.range(), 20..=24);
    /// assert_eq!(c.next_range().map(|(r, v)| (r, v.is_some())), Some((25..=29, false)));
    /// assert_eq!(c.next().map(|(r, v)| (r, v.get())), Some((30..=34, 3)));
    /// assert!(c.next().is_none()); // nothing after: the cursor stays
    /// assert_eq!(c.range(), 30..=34);
    /// ```
    pub fn cursor<'g>(&'g self, index: K, guard: &'g ReadGuard) -> Cursor<'g, V, K> {
        let _ = guard;
        // SAFETY: the guard (living for 'g) keeps every node and value the
        // cursor can reach from being freed, and writers change reachable
        // nodes only as RCU publication allows.
        unsafe { Cursor::on_raw(&self.raw, index.to_index()) }
    }

    /// All entries, ascending, under `guard`.
    pub fn iter<'g>(&'g self, guard: &'g ReadGuard) -> ConcurrentIter<'g, V, K> {
        self.range(.., guard)
    }

    /// Entries stored (a snapshot that may be stale by the time it is read).
    pub fn len(&self) -> usize {
        self.raw.len.get()
    }

    /// Levels of nodes (a snapshot; 0 for an empty tree).
    pub fn height(&self) -> usize {
        self.raw.height.get()
    }

    /// True if no entry is stored (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lowest free window of `size` in `window`; see
    /// [`MapleTree::empty_area`]. Without the lock the answer may be stale.
    pub fn empty_area(&self, window: impl RangeBounds<K>, size: u64) -> Result<K, Error> {
        let (min, max) = key::inclusive(&window)?;
        let _g = self.pin();
        self.raw.empty_area(min, max, size).map(K::from_index)
    }

    /// Takes the writer lock. Waits for another writer, never for readers.
    /// Taking it again on a thread that already holds it deadlocks: write
    /// through the guard you have.
    pub fn lock(&self) -> WriteGuard<'_, V, K> {
        // A writer that panicked left the tree consistent (writes commit
        // atomically), so a poisoned lock is safe to take over.
        let state = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        WriteGuard { tree: self, state }
    }

    /// Takes the writer lock if no other writer holds it.
    pub fn try_lock(&self) -> Option<WriteGuard<'_, V, K>> {
        let state = match self.writer.try_lock() {
            Ok(s) => s,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(WriteGuard { tree: self, state })
    }

    /// Node statistics (under the writer lock, so they describe one state;
    /// nodes waiting for their grace period are not counted).
    pub fn stats(&self) -> Stats {
        let _w = self.lock();
        // SAFETY: the writer lock is held, so no write changes the tree.
        unsafe { Stats::of(&self.raw) }
    }

    /// Checks every invariant (under the writer lock).
    pub fn validate(&self) -> Result<(), crate::ValidateError> {
        let _w = self.lock();
        self.raw.validate()
    }

    /// Runs `f` on the tree as a plain [`MapleTree`]. `&mut self` proves
    /// that no reader or writer exists, so this needs no lock or pin, writes
    /// may rewrite nodes in place, and removed values are handed back (or
    /// dropped) at once, as with a `MapleTree`; garbage left by earlier
    /// concurrent writes is freed first.
    ///
    /// ```
    /// use maple_tree::{ConcurrentMapleTree, U63};
    /// let mut t = ConcurrentMapleTree::<U63>::new();
    /// let old = t.with_mut(|m| {
    ///     m.insert_range(0..=9, U63::from(1u32)).unwrap();
    ///     m.erase(5)
    /// });
    /// assert_eq!(old.map(U63::get), Some(1));
    /// assert!(t.is_empty());
    /// ```
    pub fn with_mut<R>(&mut self, f: impl FnOnce(&mut MapleTree<V, K>) -> R) -> R {
        self.free_garbage();
        // The tree is lent out as a plain tree and put back, even if `f`
        // panics; `&mut self` means no reader or writer can reach it
        // meanwhile, so its writes in place are sound.
        let mut lent = Lent { home: &mut self.raw, tree: MapleTree::keyed() };
        core::mem::swap(lent.home, &mut *lent.tree.raw);
        f(&mut lent.tree)
    }

    /// Back to a plain tree (no readers can exist: `self` is owned).
    pub fn into_inner(mut self) -> MapleTree<V, K> {
        self.free_garbage();
        MapleTree::from_raw(core::mem::replace(&mut *self.raw, RawTree::new(false)))
    }
}

/// A concurrent tree's nodes lent out as a plain tree by
/// [`ConcurrentMapleTree::with_mut`], and given back when it goes.
struct Lent<'a, V: Handle, K: Key> {
    home: &'a mut RawTree,
    tree: MapleTree<V, K>,
}

impl<V: Handle, K: Key> Drop for Lent<'_, V, K> {
    fn drop(&mut self) {
        // (The plain tree keeps the empty tree it was made with, and
        // drops it.)
        core::mem::swap(self.home, &mut *self.tree.raw);
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> From<MapleTree<V, K>> for ConcurrentMapleTree<V, K> {
    fn from(t: MapleTree<V, K>) -> Self {
        Self::with_raw(t.into_raw())
    }
}

/// A duplicate made under the writer lock (readers keep reading); see
/// [`MapleTree::try_dup`]. Aborts on allocation failure, like `std`.
impl<V: Handle + Clone + Send + Sync + 'static, K: Key> Clone for ConcurrentMapleTree<V, K> {
    fn clone(&self) -> Self {
        let copy = self.lock().try_dup().unwrap_or_else(|_| abort_oom());
        Self::from(copy)
    }
}

/// Collects like [`MapleTree`]'s `FromIterator` (later ranges overwrite).
impl<V: Handle + Clone + Send + Sync + 'static, K: Key> FromIterator<(RangeInclusive<K>, V)>
    for ConcurrentMapleTree<V, K>
{
    fn from_iter<I: IntoIterator<Item = (RangeInclusive<K>, V)>>(iter: I) -> Self {
        Self::from(MapleTree::from_iter(iter))
    }
}

/// Stores each pair through [`with_mut`](ConcurrentMapleTree::with_mut)
/// (`&mut self`: in place, no lock); see [`MapleTree`]'s `Extend`.
impl<V: Handle + Clone + Send + Sync + 'static, K: Key> Extend<(RangeInclusive<K>, V)> for ConcurrentMapleTree<V, K> {
    fn extend<I: IntoIterator<Item = (RangeInclusive<K>, V)>>(&mut self, iter: I) {
        self.with_mut(|m| m.extend(iter));
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> ConcurrentMapleTree<V, K> {
    /// Frees the writer's pending garbage and every sealed batch, due or
    /// not. `&mut self`: no reader is left (every read borrows the tree),
    /// so no grace period is needed. The collector may still run the
    /// deferred functions of those batches later; they only set a flag
    /// that nobody reads any more.
    fn free_garbage(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        let slab = &self.raw.slab;
        // SAFETY: `&mut self`: no reader can hold anything, and we are the
        // slab's only user; the batches' nodes are this tree's.
        unsafe {
            core::mem::replace(&mut w.pending, Batch::new()).free(slab);
            for (_, b) in w.sealed.drain(..) {
                b.free(slab);
            }
        }
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> Drop for ConcurrentMapleTree<V, K> {
    fn drop(&mut self) {
        // `&mut self`: no reader or writer is left.
        self.free_garbage();
        clear_values::<V>(&mut self.raw);
    }
}

/// Runs deferred frees that are due: pins and flushes the calling
/// thread's epoch state a few times. Garbage is otherwise freed in batches
/// as threads pin; tests call this to count drops deterministically once no
/// other thread is reading.
#[cfg(feature = "testing")]
pub fn collect_garbage() {
    // Each flush collects a bounded number of bags; the epoch must also
    // advance twice past the newest garbage.
    for _ in 0..if cfg!(miri) { 64 } else { 4096 } {
        epoch::pin().flush();
    }
}

/// Iterator over a [`ConcurrentMapleTree`] under a [`ReadGuard`], from
/// either end (see [`ConcurrentMapleTree::range`]): every entry present
/// the whole time comes once, in order, however a writer changes the tree
/// meanwhile.
pub struct ConcurrentIter<'g, V: Handle + Send + Sync + 'static, K: Key = u64> {
    /// The tree and the guard stay borrowed: the values read live while
    /// the iterator does.
    _tree: PhantomData<&'g ConcurrentMapleTree<V, K>>,
    /// The ends, which meet by index (see `Entries`).
    entries: Entries<'g, true>,
}

impl<'g, V: Handle + Send + Sync + 'static, K: Key> Iterator for ConcurrentIter<'g, V, K> {
    type Item = (RangeInclusive<K>, V::Borrowed<'g>);
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next()?;
        // SAFETY: value words read under the guard that 'g borrows;
        // writers defer their drop until that guard is gone.
        Some((key::span(lo, hi), unsafe { V::borrow(nn) }))
    }

    /// The last entry, found from the back.
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.fold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words read under the guard 'g
            // borrows.
            f(acc, (key::span(lo, hi), unsafe { V::borrow(nn) }))
        })
    }
}

impl<'g, V: Handle + Send + Sync + 'static, K: Key> DoubleEndedIterator for ConcurrentIter<'g, V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next_back()?;
        // SAFETY: as in `next`: a value word read under the guard.
        Some((key::span(lo, hi), unsafe { V::borrow(nn) }))
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.rfold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: a value word read under the guard.
            f(acc, (key::span(lo, hi), unsafe { V::borrow(nn) }))
        })
    }
}

impl<'g, V: Handle + Send + Sync + 'static, K: Key> core::iter::FusedIterator for ConcurrentIter<'g, V, K> {}

impl<V: Handle + Send + Sync + 'static, K: Key> fmt::Debug for ConcurrentIter<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrentIter").finish_non_exhaustive()
    }
}

impl<V: Handle + Send + 'static> Writer<V> {
    /// Queues what a write unlinked (replaced nodes, removed value words)
    /// for the grace period; a full batch is sealed.
    fn defer(&mut self, nodes: impl Iterator<Item = Unlinked>, values: impl FnOnce(&mut Vec<NonNull<()>>)) {
        self.pending.nodes.extend(nodes);
        values(&mut self.pending.values);
        if self.pending.len() >= BATCH {
            self.seal();
        }
    }

    /// Defers the pending batch past every reader pinned now.
    fn seal(&mut self) {
        if self.pending.len() == 0 {
            return;
        }
        let batch = core::mem::replace(&mut self.pending, Batch::with_room());
        let due = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&due);
        let guard = epoch::pin();
        // SAFETY: the closure owns only a reference count of an atomic flag
        // (`Send`, `'static`); running it late, or never, frees nothing.
        unsafe { guard.defer_unchecked(move || flag.store(true, Ordering::Release)) };
        // Everything in `batch` was unlinked before the pin above, so once
        // the flag is set (after every reader pinned before then has
        // unpinned) nothing can reach the batch.
        self.sealed.push_back((due, batch));
        // Hand the deferred function to the global queue now and try to
        // advance the epoch: batches then come due a few at a time, small
        // enough for the tree's slab to reuse, instead of thousands of nodes
        // at once after crossbeam's own every-128-pins collection.
        guard.flush();
    }

    /// Frees, on this thread, the sealed batches whose grace period has
    /// passed (oldest first; a batch sealed later that is already due waits
    /// for the ones before it).
    ///
    /// # Safety
    ///
    /// `slab` is the tree's, and the caller holds the writer lock.
    unsafe fn reap(&mut self, slab: &Slab) {
        while let Some((due, _)) = self.sealed.front() {
            // Acquire: pairs with the collector's release store, which comes
            // after every reader of the batch has unpinned.
            if !due.load(Ordering::Acquire) {
                break;
            }
            if let Some((_, batch)) = self.sealed.pop_front() {
                // SAFETY: its flag is set: no reader can reach it; the
                // caller's contract covers the slab.
                unsafe { batch.free(slab) };
            }
        }
    }
}

/// The writer's handle; see [`ConcurrentMapleTree::lock`].
#[must_use]
pub struct WriteGuard<'a, V: Handle + Send + Sync + 'static, K: Key = u64> {
    tree: &'a ConcurrentMapleTree<V, K>,
    state: MutexGuard<'a, Writer<V>>,
}

impl<V: Handle + Send + Sync + 'static, K: Key> fmt::Debug for WriteGuard<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGuard").finish_non_exhaustive()
    }
}

impl<'a, V: Handle + Send + Sync + 'static, K: Key> WriteGuard<'a, V, K> {
    /// One RCU-mode store from a fresh walk (see [`WriteTarget::write_words`]).
    ///
    /// # Safety
    ///
    /// `op.first <= op.last` and its words are as
    /// [`WriteTarget::write_words`] asks.
    unsafe fn write(&mut self, op: Store<'_>) -> Result<(), (Error, *mut ())> {
        // SAFETY: our contract; no walk is given.
        unsafe { self.write_words(None, op) }.map(drop)
    }

    /// Hands the garbage of earlier writes to the epoch collector and frees
    /// whatever every reader has finished with. Writes do this by
    /// themselves in batches; call it after a burst of writes to give
    /// memory back (and drop removed values) sooner.
    ///
    /// Removed values are dropped here or inside a later write, on this
    /// thread and with the writer lock held: a value's `Drop` must not take
    /// the same tree's lock.
    pub fn reclaim(&mut self) {
        self.state.seal();
        // SAFETY: the lock is ours; the slab is the tree's.
        unsafe { self.state.reap(&self.tree.raw.slab) };
    }

    pub(crate) fn raw(&self) -> &RawTree {
        &self.tree.raw
    }

    /// The tree as it stands, for reading under the lock with the whole
    /// [`MapleTree`] read API (lookups, iteration, gap search, cursors,
    /// `validate`). Values borrowed from it cannot outlive the borrow of
    /// the guard, so no write (which needs `&mut`) can free them meanwhile.
    ///
    /// ```
    /// use maple_tree::{ConcurrentMapleTree, U63};
    /// let t = ConcurrentMapleTree::<U63>::with_gaps();
    /// let mut w = t.lock();
    /// w.insert_range(10..=19, U63::from(1u32)).unwrap();
    /// assert_eq!(w.tree().next_after(0).map(|(r, _)| r), Some(10..=19));
    /// assert_eq!(w.tree().empty_area(0..=100, 10), Ok(0));
    /// ```
    pub fn tree(&self) -> &MapleTree<V, K> {
        let raw: *const KeptTree = &self.tree.raw.raw;
        // SAFETY: `MapleTree<V, K>` is a `repr(transparent)` `KeptTree` whose
        // value words are `V`s, as this tree's are. Only `&self` methods
        // are reachable through the shared reference, and none of them
        // writes. Holding the writer lock (this guard) means no other
        // thread changes or frees anything while the borrow lives, and our
        // own writes need `&mut self`, which the borrow excludes; readers
        // elsewhere only read.
        unsafe { &*raw.cast::<MapleTree<V, K>>() }
    }

    /// Replaces the entry `path` stands on (a walk made under this lock
    /// since the last write) by `value`, if the write is the table's exact
    /// fit: one word, which readers see before or after; the old value
    /// waits for the grace period like any removed one. Otherwise hands
    /// `value` back, nothing changed.
    ///
    /// # Safety
    ///
    /// `path` is a walk of this tree made under this lock since the last
    /// write.
    pub(crate) unsafe fn replace_here(&mut self, path: &Path<'_>, value: V) -> Result<(), V> {
        let e = value.into_raw().as_ptr();
        // SAFETY: a current walk (the caller's contract) under the writer
        // lock we hold; the handle passes to the tree if the row is taken.
        let Some(old) = (unsafe { RawTree::replace_here(&*self.tree.raw, path, e) }) else {
            // SAFETY: the handle made above, not taken.
            return Err(unsafe { V::from_raw(NonNull::new_unchecked(e)) });
        };
        let old = NonNull::new(old).filter(|_| is_value(old));
        self.state.defer(core::iter::empty(), |v| v.extend(old));
        Ok(())
    }

    /// Stores `value` over `[lo, hi]`, one current range (so nothing is
    /// cut in two).
    pub(crate) fn store_exact(&mut self, lo: u64, hi: u64, value: V) -> Result<(), InsertError<V>> {
        if lo > hi {
            return Err(InsertError { value, cause: Error::InvalidRange });
        }
        let e = value.into_raw().as_ptr();
        // SAFETY: lo <= hi (checked); `e` is a fresh handle; no `split`.
        unsafe { self.write(Store::new(lo, hi).exact().entry(e)) }.map_err(|(c, w)| Self::give_back(w, c))
    }

    /// Empties `[lo, hi]`, one current range.
    pub(crate) fn clear_exact(&mut self, lo: u64, hi: u64) -> Result<(), Error> {
        if lo > hi {
            return Err(Error::InvalidRange);
        }
        // SAFETY: lo <= hi (checked); no entry, no `split`.
        unsafe { self.write(Store::new(lo, hi).exact()) }.map_err(|(c, _)| c)
    }

    fn give_back(value: *mut (), cause: Error) -> InsertError<V> {
        // SAFETY: the failed store did not keep `value`, a fresh handle.
        InsertError { value: unsafe { V::from_raw(NonNull::new_unchecked(value)) }, cause }
    }

    /// Stores `value` over `range` if it is empty; see
    /// [`MapleTree::insert_range`].
    pub fn insert_range(&mut self, range: impl RangeBounds<K>, value: V) -> Result<(), InsertError<V>> {
        // SAFETY: no walk is given.
        unsafe { write::insert_range(self, None, key::inclusive(&range), value) }.map(drop)
    }

    /// Stores `value` over `range`, overwriting; see
    /// [`MapleTree::store_range`].
    pub fn store_range(&mut self, range: impl RangeBounds<K>, value: V) -> Result<(), InsertError<V>>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::store_range(self, None, key::inclusive(&range), value) }.map(drop)
    }

    /// Empties `range`; see [`MapleTree::remove_range`].
    pub fn remove_range(&mut self, range: impl RangeBounds<K>) -> Result<(), Error>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::remove_range(self, None, key::inclusive(&range)) }.map(drop)
    }

    /// Removes the entry containing `index`. Its value is dropped after the
    /// readers that may see it are gone; returns whether one was removed.
    pub fn erase(&mut self, index: K) -> Result<bool, Error> {
        // One walk: the write starts from the walk that found the entry.
        let mut path = Path::new();
        let Some((lo, hi, w)) = self.tree.raw.walk_to_entry(index.to_index(), &mut path) else { return Ok(false) };
        // SAFETY: lo <= hi; no entry and nothing cut (the write covers its
        // slot exactly); `path` is a walk of this tree to `index`, made
        // just now under the lock (no other writer), whose leaf holds `lo`.
        unsafe { self.write_words(Some(&mut path), Store::new(lo, hi).exact()) }
            .map(|_| is_value(w))
            .map_err(|(c, _)| c)
    }

    /// Reserves `range`; see [`MapleTree::reserve_range`].
    pub fn reserve_range(&mut self, range: impl RangeBounds<K>) -> Result<(), Error> {
        let (first, last) = key::inclusive(&range)?;
        // SAFETY: `key::inclusive` gives first <= last; the reserved marker
        // is a word a slot may hold; no `split`.
        unsafe { self.write(Store::new(first, last).entry(reserved_word()).insert_only()) }.map_err(|(c, _)| c)
    }

    /// Stores `value` in the lowest free window of `size` in `window`; the
    /// search and the store happen under the lock, so they agree.
    pub fn alloc_range(&mut self, window: impl RangeBounds<K>, size: u64, value: V) -> Result<K, InsertError<V>> {
        write::alloc_range(self, key::inclusive(&window), size, value, false).map(K::from_index)
    }

    /// Stores `value` in the highest free window of `size` in `window`.
    pub fn alloc_range_rev(&mut self, window: impl RangeBounds<K>, size: u64, value: V) -> Result<K, InsertError<V>> {
        write::alloc_range(self, key::inclusive(&window), size, value, true).map(K::from_index)
    }

    /// Allocates one id in `window`, searching upwards from `*next` and
    /// wrapping once; see [`MapleTree::alloc_cyclic`].
    ///
    /// ```
    /// use maple_tree::{ConcurrentMapleTree, U63};
    /// let t = ConcurrentMapleTree::with_gaps();
    /// let mut w = t.lock();
    /// let mut next = 0;
    /// assert_eq!(w.alloc_cyclic(0..=1, &mut next, U63::from(7u32)).unwrap(), (0, false));
    /// assert_eq!(w.alloc_cyclic(0..=1, &mut next, U63::from(8u32)).unwrap(), (1, false));
    /// w.erase(0).unwrap();
    /// assert_eq!(w.alloc_cyclic(0..=1, &mut next, U63::from(9u32)).unwrap(), (0, true));
    /// ```
    pub fn alloc_cyclic(
        &mut self,
        window: impl RangeBounds<K>,
        next: &mut K,
        value: V,
    ) -> Result<(K, bool), InsertError<V>> {
        write::alloc_cyclic(self, key::inclusive(&window), next, value)
    }

    /// Duplicates the tree (see [`MapleTree::try_dup`]) while readers keep
    /// reading: the writer lock keeps other writers out during the copy.
    pub fn try_dup(&self) -> Result<MapleTree<V, K>, crate::AllocError>
    where
        V: Clone,
    {
        MapleTree::dup_raw(&self.tree.raw)
    }
}

impl<V: Handle + Send + Sync + 'static, K: Key> WriteTarget<V> for WriteGuard<'_, V, K> {
    /// An RCU-mode store; its garbage (replaced nodes, removed values)
    /// joins the pending batch, which goes to the epoch collector when
    /// full. Only an exact fit keeps the walk good (every other write
    /// builds fresh nodes).
    unsafe fn write_words(&mut self, at: Option<&mut Path<'_>>, op: Store<'_>) -> Result<bool, (Error, *mut ())> {
        debug_assert!(!op.rebase, "no rebasing writes through the concurrent tree");
        // Free what is due first, so this write's nodes come from the cache.
        // SAFETY: the lock is ours; the slab is the tree's.
        unsafe { self.state.reap(&self.tree.raw.slab) };
        let mut own = Path::new();
        // SAFETY: `at`, if given, is a walk of this tree made under this
        // lock since its last change (our contract, from `write_words`).
        let path = unsafe { self.tree.raw.walk_for(at, &mut own, op.first) };
        let entry = op.entry;
        let mut stored = Stored::default();
        // SAFETY: the mutex makes us the only writer; through `&RawTree`
        // the engine changes nothing readers can see except by single-word
        // stores and publication, and hands back what it unlinked; `path`
        // was just aimed at `first`; the rest is the caller's contract.
        let res = unsafe { self.tree.raw.store_walked(path, op, &mut stored) };
        match res {
            Ok(kept) => {
                self.state.defer(stored.retired.iter(), |v| stored.removed.for_each(|w| v.push(w)));
                Ok(kept)
            }
            Err((fail, unused)) => {
                // SAFETY: a clone the engine made and did not keep.
                unsafe { write::drop_unused::<V>(unused) };
                Err((fail.into(), entry))
            }
        }
    }

    fn raw(&self) -> &RawTree {
        &self.tree.raw
    }
}
