//! The typed tree and its normal API.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    marker::PhantomData,
    mem::MaybeUninit,
    ops::{RangeBounds, RangeInclusive},
    ptr::{self, NonNull},
};

pub(crate) use crate::write::{clone_word, to_inclusive};
use crate::{
    cursor::{Cursor, CursorMut},
    error::{AllocError, Error, InsertError},
    handle::{is_value, reserved_word, Handle, HandleMut},
    node::{load_words, slot_bounds, LeafRef, NodeRef, PIVOT_UNUSED, RANGE64_SLOTS},
    raw::{descend, LeafWalk, Level, Path, RawTree, PREFETCH_HEIGHT},
    store::{Removed, Store, Stored},
    sync::Ordering,
    validate::ValidateError,
    write::{self, WriteTarget},
};

/// A map from non-overlapping inclusive `u64` ranges to values: the Linux
/// maple tree.
///
/// A fresh tree is one empty range `[0, u64::MAX]`. Storing over a range
/// overwrites whatever was there, trimming or splitting neighbours; storing
/// nothing empties a range. Values are [`Handle`]s: `Box<T>`, `Arc<T>` or
/// inline integers ([`crate::U63`]).
///
/// ```
/// use maple_tree::MapleTree;
/// let mut t: MapleTree<Box<&str>> = MapleTree::new();
/// t.insert_range(0x1000..=0x1fff, Box::new("text")).unwrap();
/// t.insert_range(0x3000..0x4000, Box::new("data")).unwrap();
/// assert_eq!(t.load(0x1234), Some(&"text"));
/// assert_eq!(t.load(0x2000), None);
/// let (range, v) = t.next_after(0x2000).unwrap();
/// assert_eq!((range, *v), (0x3000..=0x3fff, "data"));
/// ```
// `repr(transparent)`: `ConcurrentMapleTree::with_mut` lends its `RawTree`
// out as a `MapleTree`.
#[repr(transparent)]
pub struct MapleTree<V: Handle> {
    pub(crate) raw: RawTree,
    _values: PhantomData<V>,
}

// SAFETY: the tree owns its values; moving it to another thread moves them.
unsafe impl<V: Handle + Send> Send for MapleTree<V> {}
// SAFETY: `&MapleTree` hands out shared borrows of values only.
unsafe impl<V: Handle + Sync> Sync for MapleTree<V> {}

pub(crate) fn abort_oom() -> ! {
    liballoc::alloc::handle_alloc_error(core::alloc::Layout::new::<crate::node::Node>())
}

impl<V: Handle> Default for MapleTree<V> {
    fn default() -> Self {
        Self::new()
    }
}

// Used by the concurrent tree (feature `std`).
#[cfg_attr(any(not(feature = "std"), loom), allow(dead_code))]
impl<V: Handle> MapleTree<V> {
    pub(crate) fn from_raw(raw: RawTree) -> Self {
        MapleTree { raw, _values: PhantomData }
    }

    /// Takes the raw tree out (leaving an empty one to drop).
    pub(crate) fn into_raw(mut self) -> RawTree {
        core::mem::replace(&mut self.raw, RawTree::new(false))
    }

    /// An empty tree without gap tracking.
    pub fn new() -> Self {
        MapleTree { raw: RawTree::new(false), _values: PhantomData }
    }

    /// An empty gap-tracking tree (kernel `MT_FLAGS_ALLOC_RANGE`): internal
    /// nodes keep the largest empty range below each child, making
    /// [`empty_area`](Self::empty_area) O(log n).
    pub fn with_gaps() -> Self {
        MapleTree { raw: RawTree::new(true), _values: PhantomData }
    }

    /// Whether this tree tracks gaps.
    pub fn tracks_gaps(&self) -> bool {
        self.raw.gaps
    }

    /// Number of entries (non-empty ranges).
    pub fn len(&self) -> usize {
        self.raw.len.get()
    }

    /// True if no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.raw.len.get() == 0
    }

    /// Levels of nodes (0 for an empty tree).
    pub fn height(&self) -> usize {
        self.raw.height.get()
    }

    /// The value behind a slot word (`None` for empty and reserved).
    #[inline]
    pub(crate) fn borrow<'a>(&'a self, raw: *mut ()) -> Option<V::Borrowed<'a>> {
        if !is_value(raw) {
            return None;
        }
        // SAFETY: value words are handles owned by the tree, alive while
        // `self` is borrowed.
        Some(unsafe { V::borrow(NonNull::new_unchecked(raw)) })
    }

    /// The value stored at `index`.
    #[inline]
    pub fn load(&self, index: u64) -> Option<V::Borrowed<'_>> {
        self.borrow(self.raw.load(index))
    }

    /// The entry containing `index` with its range.
    pub fn get_range(&self, index: u64) -> Option<(RangeInclusive<u64>, V::Borrowed<'_>)> {
        let (lo, hi, v) = self.raw.lookup(index);
        self.borrow(v).map(|b| (lo..=hi, b))
    }

    /// The range holding `index`, with its value: an entry, or the empty
    /// (or reserved) range around `index` with `None` (kernel `mas_walk`).
    /// One walk tells both what is at `index` and where the next entry
    /// can start: an empty range never borders another, so the index past
    /// it holds an entry, if anything.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    /// let mut t: MapleTree<U63> = MapleTree::new();
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// t.insert_range(40..=49, U63::new(2).unwrap()).unwrap();
    /// assert_eq!(t.range_at(15).0, 10..=19);
    /// let (hole, v) = t.range_at(25);
    /// assert_eq!((hole.clone(), v), (20..=39, None));
    /// assert_eq!(t.get_range(hole.end() + 1).map(|(r, _)| r), Some(40..=49));
    /// assert_eq!(t.range_at(50), (50..=u64::MAX, None));
    /// ```
    pub fn range_at(&self, index: u64) -> (RangeInclusive<u64>, Option<V::Borrowed<'_>>) {
        let (lo, hi, v) = self.raw.lookup(index);
        (lo..=hi, self.borrow(v))
    }

    /// True if anything is stored at `index`.
    pub fn contains(&self, index: u64) -> bool {
        is_value(self.raw.load(index))
    }

    /// Marks `range` as reserved (the kernel's zero entry): it is occupied
    /// (inserts over it fail, gap searches skip it) but holds no value, so
    /// [`load`](Self::load), iteration and [`len`](Self::len) do not see it;
    /// a cursor does ([`Cursor::is_reserved`]). Storing over it or
    /// [`erase`](Self::erase) removes it. Fails like
    /// [`insert_range`](Self::insert_range) if anything is stored there.
    ///
    /// ```
    /// use maple_tree::{Error, MapleTree, U63};
    /// let mut t: MapleTree<U63> = MapleTree::new();
    /// t.reserve_range(10..=19).unwrap();
    /// assert_eq!(t.load(15), None);
    /// assert!(t.is_reserved(15));
    /// assert_eq!(t.insert(15, U63::from(1u32)).unwrap_err().cause, Error::Occupied);
    /// assert_eq!((t.len(), t.iter().count()), (0, 0));
    /// ```
    pub fn reserve_range(&mut self, range: impl RangeBounds<u64>) -> Result<(), Error> {
        let (first, last) = to_inclusive(&range)?;
        let mut out = Stored::default();
        // SAFETY: first <= last; the marker is no handle and owns nothing.
        unsafe { self.write_raw(None, Store::new(first, last).entry(reserved_word()).insert_only(), &mut out) }
            .map(drop)
            .map_err(|(c, _)| c)
    }

    /// True if `index` lies in a reserved range (see
    /// [`reserve_range`](Self::reserve_range)).
    pub fn is_reserved(&self, index: u64) -> bool {
        self.raw.load(index) == reserved_word()
    }

    /// The writes that need the removed values themselves (erase, the
    /// rebasing stores, allocation): `op` with `entry` (or nothing) as its
    /// entry, from a fresh walk. Returns the removed value words, or gives
    /// `entry` back on failure.
    ///
    /// # Safety
    ///
    /// `op.first <= op.last`, and `op`'s `split`, if any, returns a fresh
    /// handle of this tree's `V` for the value behind the word it is given
    /// (as [`RawTree::store`] asks).
    unsafe fn write(&mut self, entry: Option<V>, op: Store<'_>) -> Result<Removed, (Error, Option<V>)> {
        let e = entry.map_or(ptr::null_mut(), |v| v.into_raw().as_ptr());
        let mut out = Stored::default();
        // SAFETY: first <= last and `split` as asked (our contract); `e` is
        // null or a fresh handle; no walk is given.
        unsafe { self.write_raw(None, op.entry(e), &mut out) }.map(|_| out.removed).map_err(|(c, w)| {
            // SAFETY: the engine did not keep this word; we own it again.
            (c, NonNull::new(w).map(|nn| unsafe { V::from_raw(nn) }))
        })
    }

    /// [`write`](Self::write) with the entry as a word in `op` (handed back
    /// as a word on failure), from the walk `at` if given; what the write
    /// took out goes into `out` (empty on entry, left empty on failure).
    ///
    /// # Safety
    ///
    /// As for [`WriteTarget::write_words`].
    unsafe fn write_raw(
        &mut self,
        at: Option<&mut Path>,
        op: Store<'_>,
        out: &mut Stored,
    ) -> Result<bool, (Error, *mut ())> {
        let first = op.first;
        // Without a walk of its own, the write starts from the tree's kept
        // walk (see `kept_walk.rs`), or, in a short tree, walks afresh.
        let (mut kept, mut own) = (None, Path::new());
        let path = match at {
            Some(p) => {
                // SAFETY: `at` is a walk of this tree as it is (our
                // caller's contract, from `write_words`).
                unsafe { self.raw.aim(p, first) };
                p
            }
            None => self.raw.start_walk(&mut kept, &mut own, first),
        };
        let e = op.entry;
        // The commonest writes go straight from the walk: the removal of
        // exactly one entry, a store into an empty range with room.
        let direct = if e.is_null() {
            // SAFETY: `&mut self` rules out readers and other writers;
            // `path` is a walk of this tree as it is (just aimed at
            // `first`; the kept walk only while it is one).
            unsafe { self.raw.erase_in_leaf(path, first, op.last, &mut out.removed) }.map(Ok)
        } else {
            // SAFETY: as above; `first <= last` and `e` is a fresh handle
            // or a marker (the caller's contract).
            unsafe { self.raw.store_in_empty(path, first, op.last, e) }
        };
        let res = match direct {
            Some(res) => res,
            // SAFETY: the caller's contract; `path` was just aimed at
            // `first` (the kept walk only while it is a walk of the tree
            // as it is).
            None => unsafe { self.raw.store_mut_walked(path, op, out) },
        };
        if let Some(walk) = kept {
            // SAFETY: lent by this tree; the only change since is the
            // write just made from it, and `true` is the engine's word
            // that the walk is still good.
            unsafe { self.raw.put_kept_walk(walk, matches!(res, Ok(true))) };
        }
        res.map_err(|(fail, unused_clone)| {
            // SAFETY: a clone the engine made and did not keep.
            unsafe { write::drop_unused::<V>(unused_clone) };
            (fail.into(), e)
        })
    }

    fn drop_removed(removed: Removed) {
        // SAFETY: the tree gave up these words; each is dropped once.
        removed.for_each(|nn| drop(unsafe { V::from_raw(nn) }));
    }

    /// Stores `value` over `range` only if every index in it is empty.
    ///
    /// ```
    /// use maple_tree::{Error, MapleTree, U63};
    /// let mut t = MapleTree::new();
    /// t.insert_range(5..=9, U63::from(1u32)).unwrap();
    /// let err = t.insert_range(9..=12, U63::from(2u32)).unwrap_err();
    /// assert_eq!((err.cause, err.value.get()), (Error::Occupied, 2));
    /// ```
    pub fn insert_range(&mut self, range: impl RangeBounds<u64>, value: V) -> Result<(), InsertError<V>> {
        // SAFETY: no walk is given.
        unsafe { write::insert_range(self, None, range, value) }.map(drop)
    }

    /// Inserts `value` at the single index `index`.
    pub fn insert(&mut self, index: u64, value: V) -> Result<(), InsertError<V>> {
        self.insert_range(index..=index, value)
    }

    /// Stores `value` over `range`, overwriting (and dropping) whatever was
    /// there. Entries that stick out of the range are trimmed; an entry cut in
    /// two by it keeps its value on the left and a clone on the right.
    pub fn store_range(&mut self, range: impl RangeBounds<u64>, value: V) -> Result<(), InsertError<V>>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::store_range(self, None, range, value) }.map(drop)
    }

    /// The range as an entry: [`Vacant`](crate::RangeEntry::Vacant) if
    /// every index in it is empty (fill it with
    /// [`insert`](crate::VacantRange::insert)), else
    /// [`Occupied`](crate::RangeEntry::Occupied) by the lowest entry
    /// overlapping it (see it, or take it out). Errors: an invalid range.
    ///
    /// ```
    /// use maple_tree::{MapleTree, RangeEntry, U63};
    ///
    /// let mut t = MapleTree::new();
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// match t.entry(15..=30).unwrap() {
    ///     RangeEntry::Occupied(o) => assert_eq!((o.range(), o.get().map(U63::get)), (10..=19, Some(1))),
    ///     RangeEntry::Vacant(_) => unreachable!(),
    /// }
    /// if let RangeEntry::Vacant(v) = t.entry(20..=30).unwrap() {
    ///     v.insert(U63::new(2).unwrap()).unwrap();
    /// }
    /// assert_eq!(t.load(25).map(U63::get), Some(2));
    /// ```
    pub fn entry(&mut self, range: impl RangeBounds<u64>) -> Result<crate::RangeEntry<'_, V>, Error> {
        let (first, last) = to_inclusive(&range)?;
        Ok(crate::RangeEntry::new(self, first, last))
    }

    /// [`store_range`](Self::store_range), then merged with a neighbour
    /// that touches the range and holds an equal value (`==` on the
    /// borrowed values), so that runs of equal values stay one entry — the
    /// policy `rangemap` always applies; plain `store_range` never merges.
    /// Returns the range the value covers in the end.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let one = U63::new(1).unwrap();
    /// let mut t = MapleTree::new();
    /// t.store_range_merging(0..=9, one).unwrap();
    /// assert_eq!(t.store_range_merging(20..=29, one).unwrap(), 20..=29);
    /// // Filling the hole joins all three.
    /// assert_eq!(t.store_range_merging(10..=19, one).unwrap(), 0..=29);
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn store_range_merging(
        &mut self,
        range: impl RangeBounds<u64>,
        value: V,
    ) -> Result<RangeInclusive<u64>, InsertError<V>>
    where
        V: Clone,
        for<'b> V::Borrowed<'b>: PartialEq,
    {
        let (mut first, mut last) = match to_inclusive(&range) {
            Ok(b) => b,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        // Compare through the value's own borrow: no clone needed. (If a
        // user's `==` panics, the value leaks; nothing unsound.)
        let word = value.into_raw();
        {
            // SAFETY: `word` is a live handle we own until `from_raw` below,
            // and this borrow ends before that.
            let ours = unsafe { V::borrow(word) };
            if let Some(prev) = first.checked_sub(1) {
                let (lo, _, w) = self.raw.lookup(prev);
                if self.borrow(w).is_some_and(|theirs| theirs == ours) {
                    first = lo;
                }
            }
            if let Some(next) = last.checked_add(1) {
                let (_, hi, w) = self.raw.lookup(next);
                if self.borrow(w).is_some_and(|theirs| theirs == ours) {
                    last = hi;
                }
            }
        }
        // SAFETY: turned back once, from its own `into_raw`.
        let value = unsafe { V::from_raw(word) };
        self.store_range(first..=last, value).map(|()| first..=last)
    }

    /// Stores `value` at the single index `index`, overwriting.
    pub fn store(&mut self, index: u64, value: V) -> Result<(), InsertError<V>>
    where
        V: Clone,
    {
        self.store_range(index..=index, value)
    }

    /// Empties `range`: entries inside are dropped, entries sticking out are
    /// trimmed (an entry cut in two keeps a clone on the right).
    pub fn remove_range(&mut self, range: impl RangeBounds<u64>) -> Result<(), Error>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::remove_range(self, None, range) }.map(drop)
    }

    /// [`store_range`](Self::store_range) for values that record their own
    /// range (a file offset, a VMA's start, a slice of a buffer): whenever
    /// the store leaves a piece of an old value starting somewhere new —
    /// the right part of a value it cuts in two, or a value whose front it
    /// overwrites — `rebase(old, moved)` makes that piece's value from the
    /// old one and where it was and is now ([`Moved`]). A piece
    /// whose start does not move (a left part, a value whose end was cut)
    /// keeps its value. Needs no `Clone`; at most one call per store. If the
    /// store fails, the value `rebase` made is dropped and nothing changes.
    ///
    /// ```
    /// use maple_tree::{MapleTree, Moved};
    ///
    /// // Each value: the file offset of its range's first index.
    /// let mut t: MapleTree<Box<u64>> = MapleTree::new();
    /// t.insert_range(100..=199, Box::new(0)).unwrap();
    /// let offset = |old: &u64, m: Moved| Box::new(old + m.shift());
    /// // Cut [100, 199] in three: the right piece starts at 150, offset 50.
    /// t.store_range_with(120..=149, Box::new(900), offset).unwrap();
    /// assert_eq!(t.get_range(150).map(|(r, v)| (r, *v)), Some((150..=199, 50)));
    /// assert_eq!(t.get_range(100).map(|(r, v)| (r, *v)), Some((100..=119, 0)));
    /// // Overwrite the front of [150, 199]: what is left starts at 160.
    /// t.store_range_with(140..=159, Box::new(7), offset).unwrap();
    /// assert_eq!(t.get_range(160).map(|(r, v)| (r, *v)), Some((160..=199, 60)));
    /// // Remove the front of that: offset 70 from 170 on.
    /// t.remove_range_with(160..=169, offset).unwrap();
    /// assert_eq!(t.get_range(170).map(|(r, v)| (r, *v)), Some((170..=199, 70)));
    /// ```
    pub fn store_range_with(
        &mut self,
        range: impl RangeBounds<u64>,
        value: V,
        rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved) -> V,
    ) -> Result<(), InsertError<V>> {
        let (first, last) = match to_inclusive(&range) {
            Ok(b) => b,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        self.write_rebased(first, last, Some(value), rebase)
            .map_err(|(cause, v)| InsertError { value: v.expect("value handed back"), cause })
    }

    /// The write behind [`store_range_with`](Self::store_range_with) and
    /// [`remove_range_with`](Self::remove_range_with): the engine's piece
    /// hook turned into a call of `rebase`, values taken out dropped.
    fn write_rebased(
        &mut self,
        first: u64,
        last: u64,
        entry: Option<V>,
        mut rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved) -> V,
    ) -> Result<(), (Error, Option<V>)> {
        if first > last {
            return Err((Error::InvalidRange, entry));
        }
        let mut piece = |w: *mut (), was: u64, f: u64, l: u64| {
            // SAFETY: the engine passes the non-null word of a live handle
            // of this tree, which `&mut self` keeps free of other borrows;
            // the borrow ends before the call returns.
            let old = unsafe { V::borrow(NonNull::new_unchecked(w)) };
            rebase(old, Moved { old: was..=l, new: f..=l }).into_raw().as_ptr()
        };
        // SAFETY: first <= last (checked above); `piece` returns a fresh
        // handle, `rebase`'s value turned into a word.
        let removed = unsafe { self.write(entry, Store::new(first, last).split(&mut piece).rebase()) }?;
        Self::drop_removed(removed);
        Ok(())
    }

    /// [`remove_range`](Self::remove_range) for values that record their
    /// own range: the piece left starting at `range`'s end + 1 (the right
    /// part of a value cut in two, or a value whose front was removed) gets
    /// `rebase(old, moved)`, as in [`store_range_with`](Self::store_range_with).
    pub fn remove_range_with(
        &mut self,
        range: impl RangeBounds<u64>,
        rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved) -> V,
    ) -> Result<(), Error> {
        let (first, last) = to_inclusive(&range)?;
        self.write_rebased(first, last, None, rebase).map_err(|(e, _)| e)
    }

    /// Removes the whole entry containing `index` and returns it.
    ///
    /// Aborts like `std` collections if a node cannot be allocated; see
    /// [`try_erase`](Self::try_erase).
    pub fn erase(&mut self, index: u64) -> Option<V> {
        self.try_erase(index).unwrap_or_else(|_| abort_oom())
    }

    /// [`erase`](Self::erase) that reports allocation failure (the tree is
    /// then unchanged).
    pub fn try_erase(&mut self, index: u64) -> Result<Option<V>, AllocError> {
        // One walk: the write starts from the walk that found the entry
        // (the tree's kept walk if it has one, see `kept_walk.rs`).
        let (mut kept, mut own) = (None, Path::new());
        let path = self.raw.start_walk(&mut kept, &mut own, index);
        let Some((lo, hi, _)) = RawTree::entry_at(path) else {
            if let Some(walk) = kept {
                // SAFETY: lent by this tree, which has not changed since
                // (no write was made), so the walk is one of it as it is.
                unsafe { self.raw.put_kept_walk(walk, true) };
            }
            return Ok(None);
        };
        // (A reserved range is erased too; it returns no value.)
        let mut out = Stored::default();
        // SAFETY: `&mut self` rules out readers and other writers; `path`
        // is a walk of this tree made just now or kept while the tree did
        // not change, ending at an entry.
        let res = if let Some(good) = unsafe { self.raw.erase_entry_in_leaf(path, &mut out.removed) } {
            Ok(good)
        } else {
            // SAFETY: lo <= hi; no entry and no `split` (nothing is cut:
            // the write covers its slot exactly); `path` is a walk of this
            // tree to `index`, made just now or kept while the tree did
            // not change, whose leaf holds `lo`.
            unsafe { self.raw.store_mut_walked(path, Store::new(lo, hi), &mut out) }
        };
        if let Some(walk) = kept {
            // SAFETY: as in `write_raw`: the write just made from it is
            // the only change, and `true` is the engine's word.
            unsafe { self.raw.put_kept_walk(walk, matches!(res, Ok(true))) };
        }
        res.map_err(|_| AllocError)?;
        debug_assert!(out.removed.len() <= 1);
        // SAFETY: the one value the write took out; ours now.
        Ok(out.removed.single().map(|nn| unsafe { V::from_raw(nn) }))
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        clear_values::<V>(&mut self.raw);
    }

    /// First entry whose range ends at or after `index` (kernel `mt_find`).
    pub fn next_after(&self, index: u64) -> Option<(RangeInclusive<u64>, V::Borrowed<'_>)> {
        self.first_in(index..)
    }

    /// The first entry overlapping `range` (kernel `mt_find` with a
    /// maximum), or `None` (also for an empty or inverted range).
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let mut t = MapleTree::new();
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// t.insert_range(40..=49, U63::new(2).unwrap()).unwrap();
    /// assert_eq!(t.first_in(15..30).map(|(r, v)| (r, v.get())), Some((10..=19, 1)));
    /// assert_eq!(t.first_in(20..40).map(|(r, _)| r), None);
    /// assert_eq!(t.first_in(20..).map(|(r, _)| r), Some(40..=49));
    /// ```
    pub fn first_in(&self, range: impl RangeBounds<u64>) -> Option<(RangeInclusive<u64>, V::Borrowed<'_>)> {
        let (first, last) = to_inclusive(&range).ok()?;
        // Most often the entry holding `first`, or the one just past the
        // empty range holding it: two plain walks, cheaper than a cursor's
        // set-up; a cursor steps on from there (past reserved ranges).
        let (lo, hi, w) = self.raw.lookup(first);
        if let Some(b) = self.borrow(w) {
            return Some((lo..=hi, b));
        }
        let next = hi.checked_add(1).filter(|&n| n <= last)?;
        let (lo, hi, w) = self.raw.lookup(next);
        if let Some(b) = self.borrow(w) {
            return Some((lo..=hi, b));
        }
        let mut c = self.cursor(next);
        c.next().filter(|(r, _)| *r.start() <= last)
    }

    /// Last entry that starts at or before `index` (kernel `mt_prev` from
    /// `index + 1`).
    pub fn prev_before(&self, index: u64) -> Option<(RangeInclusive<u64>, V::Borrowed<'_>)> {
        // Most often the entry holding `index`, or the one just before the
        // empty range holding it (empty ranges never touch): two plain
        // walks, the second through the lines the first brought in, as
        // `first_in` does; a cursor steps back from there (past reserved
        // ranges). Against a cursor made at `index` and stepped back: 433
        // instructions per call instead of 582 at 100 K ranges (no copy of
        // a cursor's path), 1.5x as fast there and 1.3-1.4x at 1 M
        //.
        let (lo, hi, w) = self.raw.lookup(index);
        if let Some(b) = self.borrow(w) {
            return Some((lo..=hi, b));
        }
        let before = lo.checked_sub(1)?;
        let (lo, hi, w) = self.raw.lookup(before);
        if let Some(b) = self.borrow(w) {
            return Some((lo..=hi, b));
        }
        let mut c = self.cursor(before);
        c.prev()
    }

    /// Iterates over all entries in ascending order.
    ///
    /// Consumers that take the whole iterator at once (`sum`, `for_each`,
    /// `fold`, `count`, `max`, …) run on its `fold`, which reads each leaf
    /// in one pass: about a third fewer instructions per entry than a `for`
    /// loop, which steps with `next`.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let t: MapleTree<U63> = (0..100u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    /// let total: u64 = t.iter().map(|(_, v)| v.get()).sum();
    /// assert_eq!(total, (0..100).sum());
    /// ```
    pub fn iter(&self) -> Iter<'_, V> {
        self.range(..)
    }

    /// Iterates over the entries that overlap `range`, ascending (or from
    /// the back: the iterator is double-ended). An invalid range yields
    /// nothing.
    ///
    /// Making the iterator walks nothing: each end walks from the root on
    /// its first call. So the two commonest short queries are one walk
    /// each: the entry at or after `k` (`range(k..).next()`, as
    /// [`next_after`](Self::next_after)) and the entry at or before it
    /// (`range(..=k).next_back()`, as [`prev_before`](Self::prev_before)).
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let t: MapleTree<U63> = (1..10u64).map(|i| (i * 100..=i * 100 + 49, U63::new(i).unwrap())).collect();
    /// // The mapping at or below an address, and the first one above it.
    /// let below = t.range(..=575).next_back().map(|(r, v)| (r, v.get()));
    /// assert_eq!(below, Some((500..=549, 5)));
    /// assert_eq!(t.range(576..).next().map(|(r, _)| r), Some(600..=649));
    /// // Everything overlapping a window, highest first.
    /// let hits: Vec<u64> = t.range(240..=430).rev().map(|(_, v)| v.get()).collect();
    /// assert_eq!(hits, [4, 3, 2]);
    /// ```
    #[inline]
    pub fn range(&self, range: impl RangeBounds<u64>) -> Iter<'_, V> {
        let (first, last, done) = iter_bounds(&range);
        // No walk yet: each end walks on its first call.
        // SAFETY: the iterator borrows `self` for its lifetime: the tree
        // stays alive and unchanged meanwhile.
        let raw = unsafe { RawIter::lazy(&self.raw, first, last, done) };
        Iter { _tree: PhantomData, raw, back: Back::new() }
    }

    /// Like [`range`](Self::range), but yields owned handles: a clone of
    /// each value (for `Arc` values, one more reference to the same one).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use maple_tree::MapleTree;
    /// let mut t: MapleTree<Arc<String>> = MapleTree::new();
    /// t.insert_range(0..=9, Arc::new("ten".to_string())).unwrap();
    /// let (r, v) = t.range_cloned(..).next().unwrap();
    /// assert_eq!((r, v.as_str(), Arc::strong_count(&v)), (0..=9, "ten", 2));
    /// ```
    #[inline]
    pub fn range_cloned(&self, range: impl RangeBounds<u64>) -> RangeCloned<'_, V>
    where
        V: Clone,
    {
        RangeCloned { inner: self.range(range) }
    }

    /// The entry containing `index` with its range, as an owned handle (a
    /// clone of the value).
    pub fn get_range_cloned(&self, index: u64) -> Option<(RangeInclusive<u64>, V)>
    where
        V: Clone,
    {
        let (lo, hi, w) = self.raw.lookup(index);
        // SAFETY: a value word of this tree, alive while `self` is borrowed.
        is_value(w).then(|| (lo..=hi, unsafe { V::clone_raw(NonNull::new_unchecked(w)) }))
    }

    /// A read cursor positioned at the range containing `index`.
    pub fn cursor(&self, index: u64) -> Cursor<'_, V> {
        // SAFETY: `&'a self` keeps the tree, its nodes and values alive and
        // unchanged for the cursor's lifetime.
        unsafe { Cursor::on_raw(&self.raw, index) }
    }

    /// A write cursor positioned at the range containing `index`.
    pub fn cursor_mut(&mut self, index: u64) -> CursorMut<'_, V> {
        CursorMut::new(self, index)
    }

    /// Lowest `start` such that `[start, start + size - 1]` is empty and lies
    /// inside `window` (kernel `mas_empty_area`). O(log n) on gap-tracking
    /// trees; a leaf scan on plain ones.
    ///
    /// Errors: [`Error::InvalidRange`] for a size of 0 or a window that is
    /// invalid or smaller than `size`; [`Error::Busy`] if nothing fits.
    pub fn empty_area(&self, window: impl RangeBounds<u64>, size: u64) -> Result<u64, Error> {
        let (min, max) = to_inclusive(&window)?;
        self.raw.empty_area(min, max, size)
    }

    /// The empty ranges inside `window`, ascending (`.rev()` for
    /// descending), each cut to the window: the complement of
    /// [`range`](Self::range). Reserved ranges are not empty. On a
    /// gap-tracking tree each gap is found by an O(log n) search that skips
    /// full subtrees; on a plain tree the leaves are walked. An invalid
    /// window yields nothing.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let mut t: MapleTree<U63> = MapleTree::with_gaps();
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// t.insert_range(30..=39, U63::new(2).unwrap()).unwrap();
    /// let holes: Vec<_> = t.gaps(0..=49).collect();
    /// assert_eq!(holes, [0..=9, 20..=29, 40..=49]);
    /// assert_eq!(t.gaps(15..35).rev().next(), Some(20..=29));
    /// ```
    pub fn gaps(&self, window: impl RangeBounds<u64>) -> crate::Gaps<'_, V> {
        crate::Gaps::new(self, to_inclusive(&window).ok())
    }

    /// Highest `start` such that `[start, start + size - 1]` is empty and
    /// inside `window` (kernel `mas_empty_area_rev`).
    pub fn empty_area_rev(&self, window: impl RangeBounds<u64>, size: u64) -> Result<u64, Error> {
        let (min, max) = to_inclusive(&window)?;
        self.raw.empty_area_rev(min, max, size)
    }

    /// Lowest `start`, a multiple of `align` (a power of two), such that
    /// `[start, start + size - 1]` is empty and inside `window` — what
    /// `get_unmapped_area` asks for a huge-page-aligned mapping. Each gap
    /// too small once aligned costs one more O(log n) search; the answer is
    /// the lowest aligned fit, not just a fit inside a gap padded by
    /// `align`.
    ///
    /// Errors: as [`empty_area`](Self::empty_area), and
    /// [`Error::InvalidRange`] if `align` is not a power of two.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let mut t = MapleTree::with_gaps();
    /// t.insert_range(0..=0x0fff, U63::new(1).unwrap()).unwrap();
    /// assert_eq!(t.empty_area(.., 0x2000), Ok(0x1000));
    /// assert_eq!(t.empty_area_aligned(.., 0x2000, 0x4000), Ok(0x4000));
    /// assert_eq!(t.empty_area_rev_aligned(..0x9fff, 0x2000, 0x4000), Ok(0x4000));
    /// ```
    pub fn empty_area_aligned(&self, window: impl RangeBounds<u64>, size: u64, align: u64) -> Result<u64, Error> {
        let (min, max) = aligned_window(&window, align)?;
        let mut from = min;
        loop {
            let start = self.raw.empty_area(from, max, size)?;
            // The gap holding `start` (cut to the window) and the first
            // aligned index in it.
            let gap_end = self.gaps(start..=max).next().map_or(max, |g| *g.end());
            if let Some(aligned) = start.checked_next_multiple_of(align) {
                if aligned.checked_add(size - 1).is_some_and(|last| last <= gap_end) {
                    return Ok(aligned);
                }
            }
            // What is left of the window may be too small for `size`: that
            // is no room, not a bad window.
            if gap_end >= max || max - gap_end < size {
                return Err(Error::Busy);
            }
            from = gap_end + 1;
        }
    }

    /// Highest aligned `start` (see [`empty_area_aligned`](Self::empty_area_aligned))
    /// such that `[start, start + size - 1]` is empty and inside `window`.
    pub fn empty_area_rev_aligned(&self, window: impl RangeBounds<u64>, size: u64, align: u64) -> Result<u64, Error> {
        let (min, max) = aligned_window(&window, align)?;
        let mut to = max;
        loop {
            let start = self.raw.empty_area_rev(min, to, size)?;
            // The gap holding `start` (cut to the window): the aligned start
            // at or below `start` must not fall below it.
            let gap_start = self.gaps(min..=start).next_back().map_or(min, |g| *g.start());
            let aligned = start & !(align - 1);
            if aligned >= gap_start {
                return Ok(aligned);
            }
            if gap_start <= min || gap_start - min < size {
                return Err(Error::Busy);
            }
            to = gap_start - 1;
        }
    }

    fn alloc_at(&mut self, found: Result<u64, Error>, size: u64, value: V) -> Result<u64, InsertError<V>> {
        let start = match found {
            Ok(s) => s,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        let Some(last) = write::window_last(start, size) else {
            return Err(InsertError { value, cause: Error::InvalidRange });
        };
        // SAFETY: start <= last (just computed); no `split`.
        match unsafe { self.write(Some(value), Store::new(start, last).insert_only()) } {
            Ok(_) => Ok(start),
            Err((cause, v)) => Err(InsertError { value: v.expect("value handed back"), cause }),
        }
    }

    /// Stores `value` in the lowest empty window of `size` inside `window`
    /// and returns its start (kernel `mtree_alloc_range`).
    pub fn alloc_range(&mut self, window: impl RangeBounds<u64>, size: u64, value: V) -> Result<u64, InsertError<V>> {
        let found = self.empty_area(window, size);
        self.alloc_at(found, size, value)
    }

    /// Stores `value` in the highest empty window of `size` inside `window`
    /// and returns its start (kernel `mtree_alloc_rrange`).
    pub fn alloc_range_rev(
        &mut self,
        window: impl RangeBounds<u64>,
        size: u64,
        value: V,
    ) -> Result<u64, InsertError<V>> {
        let found = self.empty_area_rev(window, size);
        self.alloc_at(found, size, value)
    }

    /// Allocates one id in `window`, searching upwards from `*next` and
    /// wrapping once to the start of the window (kernel
    /// `mtree_alloc_cyclic`). Returns the id and whether the search wrapped;
    /// `*next` becomes the id after it (which may lie past the window: the
    /// next call then wraps).
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    /// let mut t = MapleTree::with_gaps();
    /// let mut next = 0;
    /// let v = || U63::from(0u32);
    /// assert_eq!(t.alloc_cyclic(0..=2, &mut next, v()).unwrap(), (0, false));
    /// assert_eq!(t.alloc_cyclic(0..=2, &mut next, v()).unwrap(), (1, false));
    /// t.erase(0);
    /// assert_eq!(t.alloc_cyclic(0..=2, &mut next, v()).unwrap(), (2, false));
    /// assert_eq!(t.alloc_cyclic(0..=2, &mut next, v()).unwrap(), (0, true));
    /// ```
    pub fn alloc_cyclic(
        &mut self,
        window: impl RangeBounds<u64>,
        next: &mut u64,
        value: V,
    ) -> Result<(u64, bool), InsertError<V>> {
        let (lo, hi) = match to_inclusive(&window) {
            Ok(b) => b,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        let (found, wrapped) = self.raw.cyclic_search(lo, hi, *next);
        let id = self.alloc_at(found, 1, value)?;
        self.raw.cyclic_taken(id, next);
        Ok((id, wrapped))
    }

    /// Builds a plain tree from entries sorted by range, in O(n), with every
    /// node full except along the right-most spine.
    ///
    /// Fails with [`Error::InvalidRange`] if the ranges are not ascending and
    /// disjoint or one has `first > last` (all values are dropped then).
    pub fn from_sorted(entries: impl IntoIterator<Item = (RangeInclusive<u64>, V)>) -> Result<Self, Error> {
        let mut t = Self::new();
        t.build(entries)?;
        Ok(t)
    }

    /// [`from_sorted`](Self::from_sorted) for a gap-tracking tree.
    pub fn from_sorted_with_gaps(entries: impl IntoIterator<Item = (RangeInclusive<u64>, V)>) -> Result<Self, Error> {
        let mut t = Self::with_gaps();
        t.build(entries)?;
        Ok(t)
    }

    fn build(&mut self, entries: impl IntoIterator<Item = (RangeInclusive<u64>, V)>) -> Result<(), Error> {
        let iter = entries.into_iter().map(|(r, v)| (*r.start(), *r.end(), v.into_raw().as_ptr()));
        self.raw.build_sorted(iter, &mut |w| {
            // SAFETY: the builder hands back words it did not keep, once each.
            drop(unsafe { V::from_raw(NonNull::new_unchecked(w)) })
        })
    }

    /// Checks every structural invariant (see the crate docs).
    pub fn validate(&self) -> Result<(), ValidateError> {
        self.raw.validate()
    }

    /// A text picture of the nodes, for debugging.
    pub fn dump(&self) -> String
    where
        for<'a> V::Borrowed<'a>: fmt::Debug,
    {
        let mut out = String::new();
        self.raw.dump(&mut out, &|w| match self.borrow(w) {
            Some(b) => format!("{b:?}"),
            None => "-".into(),
        });
        out
    }

    /// Node statistics: how many nodes of each kind and the memory they use.
    pub fn stats(&self) -> Stats {
        // SAFETY: `&self` to a plain tree: nothing changes it meanwhile.
        unsafe { Stats::of(&self.raw) }
    }

    /// Test hook: build every multi-word change in fresh nodes, as the
    /// concurrent mode will, instead of updating in place.
    #[doc(hidden)]
    pub fn set_fresh_node_writes(&mut self, on: bool) {
        self.raw.rcu = on;
    }
}

/// Frees every node of `raw` and drops its values as `V`s; values that
/// need no drop (inline integers) are not even visited.
pub(crate) fn clear_values<V: Handle>(raw: &mut RawTree) {
    if core::mem::needs_drop::<V>() {
        raw.clear_with(Some(&mut |w| {
            if is_value(w) {
                // SAFETY: each value word is handed over exactly once.
                drop(unsafe { V::from_raw(NonNull::new_unchecked(w)) })
            }
        }));
    } else {
        raw.clear_with(None);
    }
}

impl Stats {
    /// Counts the nodes of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` does not change meanwhile (it is borrowed from a plain tree,
    /// or its writer lock is held), so no node it reaches is freed.
    pub(crate) unsafe fn of(raw: &RawTree) -> Stats {
        let mut s = Stats { height: raw.height.get(), entries: raw.len.get(), ..Stats::default() };
        if let Some(root) = raw.root_node() {
            let mut count = |n: NodeRef| {
                if n.is_leaf() {
                    s.leaves += 1;
                } else {
                    s.internal += 1;
                }
            };
            // SAFETY: the root is live and stays so (our contract); the
            // callback frees nothing.
            unsafe { crate::raw::visit_subtree(root, &mut count) };
        }
        s.bytes = (s.leaves + s.internal) * core::mem::size_of::<crate::node::Node>();
        s.held_bytes = raw.slab.held_bytes();
        s
    }
}

/// Node statistics of a tree; see [`MapleTree::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Levels of nodes.
    pub height: usize,
    /// Entries stored.
    pub entries: usize,
    /// Leaf nodes.
    pub leaves: usize,
    /// Internal nodes.
    pub internal: usize,
    /// Bytes of node memory (256 per node).
    pub bytes: usize,
    /// Bytes of memory the tree holds for its nodes: the 4 KiB chunks they
    /// are carved from (16 nodes each; free cells included) and at most one
    /// empty spare chunk, each with its share of its block's header chunks
    /// (1/170 more). On Linux the 2 MiB blocks are mapped from the kernel
    /// and nothing else is spent on them; elsewhere the global allocator
    /// adds about two pages per block (1/256). Without the `std` feature a
    /// chunk holds 15 nodes and its own header. Not counted: the walk a
    /// tree of two levels or more keeps from its last write (about a
    /// kilobyte from the global allocator, taken on its 33rd write; see
    /// the crate docs, "Writes").
    pub held_bytes: usize,
}

impl Stats {
    /// Node bytes per stored entry (0 for an empty tree).
    pub fn bytes_per_entry(&self) -> f64 {
        if self.entries == 0 {
            0.0
        } else {
            self.bytes as f64 / self.entries as f64
        }
    }
}

impl<V: Handle> WriteTarget<V> for MapleTree<V> {
    unsafe fn write_words(&mut self, at: Option<&mut Path>, op: Store<'_>) -> Result<bool, (Error, *mut ())> {
        let mut out = Stored::default();
        // SAFETY: the caller's contract.
        let kept = unsafe { self.write_raw(at, op, &mut out) }?;
        // No reader can exist (`&mut self`): what left the tree goes now.
        Self::drop_removed(out.removed);
        Ok(kept)
    }
}

impl<V: Handle> Drop for MapleTree<V> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<V: Handle> fmt::Debug for MapleTree<V>
where
    for<'a> V::Borrowed<'a>: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Two trees are equal when they hold the same entries (the same ranges,
/// with equal values) and reserve the same ranges, however they were built
/// and whether or not they track gaps.
///
/// ```
/// use maple_tree::{MapleTree, U63};
///
/// let items = || (0..100u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap()));
/// let sorted = MapleTree::from_sorted(items()).unwrap();
/// let mut backwards: MapleTree<U63> = MapleTree::with_gaps();
/// for (r, v) in items().rev() {
///     backwards.insert_range(r, v).unwrap();
/// }
/// assert_eq!(sorted, backwards);
/// backwards.reserve_range(1000..=1009).unwrap();
/// assert_ne!(sorted, backwards);
/// ```
impl<V: Handle> PartialEq for MapleTree<V>
where
    for<'a> V::Borrowed<'a>: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Range by range, empty ones included: a tree's ranges are fixed by
        // its content (empty ranges never touch, `validate` checks it).
        let (mut a, mut b) = (self.cursor(0), other.cursor(0));
        loop {
            if a.range() != b.range() || a.is_reserved() != b.is_reserved() || a.get() != b.get() {
                return false;
            }
            match (a.next_range(), b.next_range()) {
                (Some(_), Some(_)) => {}
                (None, None) => return true,
                _ => return false,
            }
        }
    }
}

impl<V: Handle> Eq for MapleTree<V> where for<'a> V::Borrowed<'a>: Eq {}

/// Hashes what [`PartialEq`] compares: each occupied range, whether it is
/// reserved, and its value.
impl<V: Handle> core::hash::Hash for MapleTree<V>
where
    for<'a> V::Borrowed<'a>: core::hash::Hash,
{
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        let mut c = self.cursor(0);
        loop {
            if c.get().is_some() || c.is_reserved() {
                c.range().hash(state);
                c.is_reserved().hash(state);
                c.get().hash(state);
            }
            if c.next_range().is_none() {
                return;
            }
        }
    }
}

/// `clone` is [`try_dup`](MapleTree::try_dup): an O(n) copy of the nodes,
/// then a clone of every value. Aborts on allocation failure, like `std`.
impl<V: Handle + Clone> Clone for MapleTree<V> {
    fn clone(&self) -> Self {
        self.try_dup().unwrap_or_else(|_| abort_oom())
    }
}

impl<V: Handle> MapleTree<V> {
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
    pub fn try_dup_map<W: Handle>(
        &self,
        mut f: impl FnMut(RangeInclusive<u64>, V::Borrowed<'_>) -> W,
    ) -> Result<MapleTree<W>, AllocError> {
        let (copy, leaves) = self.raw.dup_nodes(true)?;
        // Until every word is replaced, the copy holds words of `self`:
        // the guard frees it without dropping those if `f` panics.
        let mut guard = DupGuard::<W> { raw: copy, replaced: 0, _w: PhantomData };
        for (leaf, min, max) in leaves {
            let replace = |lo: u64, hi: u64, w| {
                let v = self.borrow(w)?;
                let new = f(lo..=hi, v).into_raw().as_ptr();
                guard.replaced += 1;
                Some(new)
            };
            // SAFETY: `leaf` belongs to the unpublished copy, which only
            // this function can reach.
            unsafe { leaf.for_each_entry(min, max, replace) };
        }
        let raw = core::mem::replace(&mut guard.raw, RawTree::new(false));
        core::mem::forget(guard);
        Ok(MapleTree { raw, _values: PhantomData })
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
    pub fn try_dup_map_fallible<W: Handle, E>(
        &self,
        mut f: impl FnMut(RangeInclusive<u64>, V::Borrowed<'_>) -> Result<W, E>,
    ) -> Result<MapleTree<W>, DupError<E>> {
        self.dup_words(|r, v, _| f(r, v).map(|w| w.into_raw().as_ptr()))
    }

    /// [`try_dup_map_fallible`](Self::try_dup_map_fallible) where the map
    /// function may also keep the value: `Ok(None)` gives the copy a clone
    /// of the source's handle (for `Arc` values, one more reference to the
    /// same value: no allocation), `Ok(Some(v))` a new value. Fork uses it
    /// to share the records of VMAs whose copy would be identical.
    pub fn try_dup_share_or_map<E>(
        &self,
        mut f: impl FnMut(RangeInclusive<u64>, V::Borrowed<'_>) -> Result<Option<V>, E>,
    ) -> Result<MapleTree<V>, DupError<E>>
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
    /// the copy, as a `W`). If `f` fails, the rest of the copy is marked
    /// with reserved entries (it never owned those words) and the copy is
    /// dropped: the values made so far, and every node, are freed.
    fn dup_words<W: Handle, E>(
        &self,
        mut f: impl FnMut(RangeInclusive<u64>, V::Borrowed<'_>, *mut ()) -> Result<*mut (), E>,
    ) -> Result<MapleTree<W>, DupError<E>> {
        let (copy, leaves) = self.raw.dup_nodes(true).map_err(DupError::Alloc)?;
        // Until every word is replaced (or marked), the copy holds words of
        // `self`, and the guard knows which.
        let mut guard = DupGuard::<W> { raw: copy, replaced: 0, _w: PhantomData };
        let mut failed: Option<(u64, E)> = None;
        for (leaf, min, max) in leaves {
            let replace = |lo: u64, hi: u64, w| {
                if failed.is_some() {
                    // Past the failure point: the kernel's zero entry.
                    return Some(reserved_word());
                }
                let v = self.borrow(w)?;
                match f(lo..=hi, v, w) {
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
        let raw = core::mem::replace(&mut guard.raw, RawTree::new(false));
        let made = guard.replaced;
        core::mem::forget(guard);
        let copy = MapleTree::<W> { raw, _values: PhantomData };
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
        let (copy, leaves) = raw.dup_nodes(!V::INLINE)?;
        for (leaf, min, max) in leaves {
            // SAFETY: `leaf` belongs to the unpublished copy; `w` is a live
            // handle of the source (the copy only shares it). A panic in
            // `clone` leaks the copy's nodes at worst (a `RawTree` drops
            // no node), never a double drop.
            unsafe { leaf.for_each_entry(min, max, |_, _, w| is_value(w).then(|| clone_word::<V>(w))) };
        }
        Ok(MapleTree { raw: copy, _values: PhantomData })
    }
}

/// The inclusive bounds of an aligned gap search's window, after checking
/// that `align` is a power of two (`InvalidRange` otherwise).
fn aligned_window(window: &impl RangeBounds<u64>, align: u64) -> Result<(u64, u64), Error> {
    let bounds = to_inclusive(window)?;
    if !align.is_power_of_two() {
        return Err(Error::InvalidRange);
    }
    Ok(bounds)
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
    raw: RawTree,
    replaced: usize,
    _w: PhantomData<W>,
}

impl<W: Handle> Drop for DupGuard<W> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<W>() {
            self.raw.clear_with(None);
            return;
        }
        let mut seen = 0;
        let replaced = self.replaced;
        self.raw.clear_with(Some(&mut |w| {
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

/// Mutable access to values that a handle owns alone (`Box<T>`).
impl<V: HandleMut> MapleTree<V> {
    /// The value stored at `index`, mutably.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<Box<Vec<u32>>> = MapleTree::new();
    /// t.insert_range(10..=19, Box::new(vec![1])).unwrap();
    /// t.get_mut(15).unwrap().push(2);
    /// assert_eq!(t.load(10).unwrap(), &[1, 2]);
    /// assert!(t.get_mut(20).is_none());
    /// ```
    pub fn get_mut(&mut self, index: u64) -> Option<&mut V::Target> {
        let w = self.raw.load(index);
        if !is_value(w) {
            return None;
        }
        // SAFETY: a value word the tree owns; `&mut self` excludes every
        // other access to the tree's values while the result lives, and no
        // other handle shares this value (`HandleMut`).
        Some(unsafe { V::borrow_mut(NonNull::new_unchecked(w)) })
    }

    /// Every entry with its value mutably, ascending.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<Box<u64>> = MapleTree::new();
    /// t.insert_range(0..=9, Box::new(1)).unwrap();
    /// t.insert_range(20..=29, Box::new(2)).unwrap();
    /// for (r, v) in t.iter_mut() {
    ///     *v += r.start();
    /// }
    /// assert_eq!(t.values_mut().map(|v| *v).collect::<Vec<_>>(), [1, 22]);
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, V> {
        self.range_mut(..)
    }

    /// The entries overlapping `range` with their values mutably,
    /// ascending. An invalid range yields nothing.
    pub fn range_mut(&mut self, range: impl RangeBounds<u64>) -> IterMut<'_, V> {
        let (first, last, done) = iter_bounds(&range);
        // SAFETY: the iterator borrows `self` mutably for its lifetime:
        // the tree stays alive, and nothing but the iterator (which
        // changes values, not slots) reaches it meanwhile.
        let raw = unsafe { RawIter::lazy(&self.raw, first, last, done) };
        IterMut { raw, back: Back::new(), _tree: PhantomData }
    }

    /// Every value mutably, ascending.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V::Target> + '_ {
        self.iter_mut().map(|(_, v)| v)
    }
}

/// Where a piece of a value was and is after a store moved its start; see
/// [`MapleTree::store_range_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// The old value's range.
    pub old: RangeInclusive<u64>,
    /// The piece's range (same end, later start).
    pub new: RangeInclusive<u64>,
}

impl Moved {
    /// How far the start moved: `new.start() - old.start()`.
    pub fn shift(&self) -> u64 {
        self.new.start() - self.old.start()
    }
}

/// Iterator over entries with mutable values; see [`MapleTree::iter_mut`].
pub struct IterMut<'a, V: HandleMut> {
    raw: RawIter,
    back: Back,
    /// The tree stays borrowed mutably: nothing else reads or changes it.
    _tree: PhantomData<&'a mut MapleTree<V>>,
}

impl<V: HandleMut> fmt::Debug for IterMut<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IterMut").finish_non_exhaustive()
    }
}

impl<'a, V: HandleMut + 'a> Iterator for IterMut<'a, V> {
    type Item = (RangeInclusive<u64>, &'a mut V::Target);

    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.raw.next_entry()?;
        // SAFETY: `next_entry` yields each value slot once, each slot holds
        // its own handle (a value is never stored in two slots), the tree is
        // borrowed mutably for `'a` so nothing else reaches its values, and
        // the handle stays alive while it is.
        Some((lo..=hi, unsafe { V::borrow_mut(nn) }))
    }

    /// The last entry, found from the back.
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.raw.fold_entries(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: each value slot once, of a tree borrowed
            // mutably for 'a.
            f(acc, (lo..=hi, unsafe { V::borrow_mut(nn) }))
        })
    }
}

impl<'a, V: HandleMut + 'a> DoubleEndedIterator for IterMut<'a, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        // SAFETY: the tree is borrowed mutably for 'a: nothing changes it
        // while the iterator lives.
        let (lo, hi, nn) = unsafe { self.raw.next_back_entry::<false>(&mut self.back) }?;
        // SAFETY: as in `next`: the two ends never hand out the same slot
        // (`next_back_entry`), so each value slot comes once.
        Some((lo..=hi, unsafe { V::borrow_mut(nn) }))
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let g = |acc, lo, hi, nn| {
            // SAFETY: as in `next_back`: each value slot once, of a tree
            // borrowed mutably for 'a.
            f(acc, (lo..=hi, unsafe { V::borrow_mut(nn) }))
        };
        // SAFETY: as in `next_back`.
        unsafe { self.raw.rfold_entries::<false, B>(&mut self.back, init, g) }
    }
}

impl<'a, V: HandleMut + 'a> core::iter::FusedIterator for IterMut<'a, V> {}

impl<V: Handle> MapleTree<V> {
    /// All entries as raw words.
    pub(crate) fn raw_entries(&self) -> impl Iterator<Item = (u64, u64, NonNull<()>)> + '_ {
        // SAFETY: the closure borrows `self`, so the tree stays alive and
        // unchanged while the iterator lives.
        let mut raw = unsafe { RawIter::lazy(&self.raw, 0, u64::MAX, false) };
        core::iter::from_fn(move || raw.next_entry())
    }
}

/// Entry-by-entry walk shared by the iterators. Each leaf is read once, in
/// one tight pass without a branch per slot, into a copy of its bounds and
/// words and a mask of the slots holding values, which `next_entry` then
/// hands out (the next one is the mask's lowest bit); the root-to-leaf
/// path is consulted once per leaf.
///
/// Reading a leaf at once is also what readers of the concurrent tree
/// want: a leaf they can reach changes in place only by single-word slot
/// stores, and the words read stay alive while their guard does.
pub(crate) struct RawIter {
    walk: LeafWalk,
    /// The current leaf's slot bounds: slot `i` starts at `bound[i] + 1`
    /// (wrapping: `bound[0]` is the leaf's minimum less one) and ends at
    /// `bound[i + 1]`, capped at `max` (the last slot's pivot is unused,
    /// `u64::MAX`, or absent, `bound[16]`).
    ///
    /// `bound` and `words` are all set by every leaf read
    /// ([`load_leaf`](Self::load_leaf)) and read only for slots in `mask`,
    /// which is empty until the first: an iterator is made without
    /// zeroing them (264 bytes: 35 instructions of the ~580 of a
    /// predecessor query in a small tree).
    bound: [MaybeUninit<u64>; RANGE64_SLOTS + 1],
    /// The current leaf's slot words.
    words: [MaybeUninit<*mut ()>; RANGE64_SLOTS],
    /// The current leaf's maximum.
    max: u64,
    /// The slots not yet handed out that hold values, one bit each.
    mask: u32,
    /// The mask holds the last entries to hand out: the scan reached
    /// `last` or the tree's last leaf, the tree is empty, or the iterator
    /// was made done (an invalid range).
    last_leaf: bool,
    last: u64,
    /// Where the front end starts: the iterator's first index.
    first: u64,
    /// The root the front end walks from on its first call, while it has
    /// not walked yet (see [`lazy`](Self::lazy)). A front that has not
    /// walked with `last_leaf` set never will: the back has handed out
    /// everything.
    pending: Option<NodeRef>,
    /// The back end stops the front (sets `last_leaf`) when it hands out
    /// an entry that starts at or below this: the index after the front's
    /// leaf, or, before the front has walked, the first index. (One
    /// comparison for both, in the back's hot path.)
    stop: u64,
}

/// How many leaves ahead iteration prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Where an iterator over `range` starts and ends, and whether it is empty
/// from the start (an invalid range yields nothing).
#[inline]
pub(crate) fn iter_bounds(range: &impl RangeBounds<u64>) -> (u64, u64, bool) {
    match to_inclusive(range) {
        Ok((first, last)) => (first, last, false),
        Err(_) => (0, 0, true),
    }
}

impl RawIter {
    /// An iterator over `first..=last` of `tree` (nothing if `done`) whose
    /// front end walks on its first call, not here: what is made and
    /// never stepped forwards (`range(..=k).next_back()`, the entry at or
    /// before `k`; `.rev()`) walks only from the back, and making one
    /// costs no walk.
    ///
    /// # Safety
    ///
    /// Every node reachable from `tree`'s root now stays alive while the
    /// iterator lives, changed at most by the single-word slot stores
    /// readers may meet: a plain tree borrowed for as long (which then
    /// does not change at all), or the concurrent tree read under a guard
    /// that outlives the iterator. The root recorded here is walked from
    /// later, by the iterator's safe methods.
    #[inline]
    pub(crate) unsafe fn lazy(tree: &RawTree, first: u64, last: u64, done: bool) -> RawIter {
        let pending = if done { None } else { tree.root_node() };
        // One literal (no local changed, then moved): the iterator is
        // ~1.3 KiB, and each move of it a copy of all of that.
        RawIter {
            walk: LeafWalk { path: Path::new() },
            bound: [MaybeUninit::uninit(); RANGE64_SLOTS + 1],
            words: [MaybeUninit::uninit(); RANGE64_SLOTS],
            max: 0,
            mask: 0,
            // (An empty tree: nothing to hand out.)
            last_leaf: pending.is_none(),
            last,
            first,
            pending,
            stop: first,
        }
    }

    /// The front end's first walk, from the root [`lazy`](Self::lazy)
    /// recorded, if it has not walked yet and the back has not handed out
    /// everything (`last_leaf`); true if it walked.
    #[inline(always)]
    fn start_front(&mut self) -> bool {
        if self.last_leaf {
            return false;
        }
        let Some(root) = self.pending.take() else { return false };
        self.walk_front(root);
        true
    }

    /// [`start_front`](Self::start_front)'s walk, out of line.
    #[cold]
    #[inline(never)]
    fn walk_front(&mut self, root: NodeRef) {
        // SAFETY: the root `lazy` recorded, whose nodes stay alive while
        // the iterator lives (`lazy`'s contract).
        unsafe { descend::<false>(root, self.first, &mut self.walk.path) };
        self.load_leaf(true);
    }

    /// Prefetches the leaves `PREFETCH_AHEAD` on from the one the walk has
    /// just reached (one leaf's scan is much shorter than a miss to
    /// memory): the one that far ahead, and those before it too when the
    /// walk has just come under this parent (its start, or a step to a
    /// cousin leaf).
    #[inline(always)]
    fn prefetch_ahead(&self, fresh: bool) {
        let path = &self.walk.path;
        let Some(d) = path.len().checked_sub(2) else { return };
        let p = &path[d];
        if !fresh && p.off != 0 {
            // A step to the next sibling: the one leaf that far ahead is
            // the only one not asked for yet (no loop, no copy of the
            // level: this runs once per leaf).
            let k = p.off + PREFETCH_AHEAD;
            if p.node.has_next(k - 1) {
                // SAFETY: an internal node's used slot (`has_next` of the
                // one before) holds a live child.
                unsafe { p.node.child(k) }.prefetch();
            } else if path.len() >= PREFETCH_HEIGHT {
                prefetch_cousin(path, d, k);
            }
            return;
        }
        for k in p.off + 1..=p.off + PREFETCH_AHEAD {
            if !p.node.has_next(k - 1) {
                break;
            }
            // SAFETY: as above.
            unsafe { p.node.child(k) }.prefetch();
        }
    }

    /// Reads the leaf the walk stands on: its bounds, its words, and the
    /// mask of its value slots from the walk's current slot up to the slot
    /// reaching `last`.
    fn load_leaf(&mut self, fresh: bool) {
        let Some(&lv) = self.walk.path.last() else {
            // An empty tree.
            self.last_leaf = true;
            return;
        };
        self.prefetch_ahead(fresh);
        let leaf = lv.leaf();
        let (piv, slots) = (leaf.pivots(), leaf.slots());
        self.bound[0] = MaybeUninit::new(lv.min.wrapping_sub(1));
        // SAFETY: a leaf's pivots never change while it is reachable (the
        // writes readers may meet in place are single slot stores), and
        // this one is (the walk's; `lazy`'s contract keeps it alive), so
        // plain reads race with nothing. One block copy: 1.03-1.04x as
        // fast a `for` loop as fifteen atomic loads (`profile_store ab`).
        unsafe { load_words(piv, &mut self.bound[1..RANGE64_SLOTS]) };
        self.bound[RANGE64_SLOTS] = MaybeUninit::new(PIVOT_UNUSED);
        // Unused slots are null, so only used slots can be in the mask.
        let mut mask = 0u32;
        for (i, (w, s)) in self.words.iter_mut().zip(slots).enumerate() {
            let v = s.load(Ordering::Acquire);
            *w = MaybeUninit::new(v);
            mask |= u32::from(is_value(v)) << i;
        }
        // From the walk's slot on.
        mask &= u32::MAX << lv.off;
        self.max = lv.max;
        // (The back's leaf lies after this one: `max` is below `u64::MAX`
        // whenever the back reads `stop`.)
        self.stop = lv.max.wrapping_add(1);
        if lv.max > self.last {
            // The slot reaching `last` is in this leaf, at the latest its
            // last: nothing after it.
            let mut i = lv.off;
            // (`bound[i + 1]` is pivot `i`, read again from the leaf.)
            while i < RANGE64_SLOTS - 1 && piv[i].load(Ordering::Relaxed) < self.last {
                i += 1;
            }
            mask &= u32::MAX >> (31 - i);
            self.last_leaf = true;
        } else {
            self.last_leaf = lv.max == self.last || lv.max == u64::MAX;
        }
        self.mask = mask;
    }

    /// Takes the next entry of the loaded leaf, if one is left.
    #[inline(always)]
    fn take(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.mask == 0 {
            return None;
        }
        // `& 15`: a leaf has 16 slots (spares the bound checks).
        let i = self.mask.trailing_zeros() as usize & 15;
        self.mask &= self.mask - 1;
        // SAFETY: `i` was the mask's lowest bit.
        Some(unsafe { self.loaded_entry(i) })
    }

    /// Takes the last entry of the loaded leaf, if one is left (the back
    /// end's, where the two ends meet).
    fn take_last(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.mask == 0 {
            return None;
        }
        let i = (31 - self.mask.leading_zeros()) as usize & 15;
        self.mask &= !(1 << i);
        // SAFETY: `i` was the mask's highest bit.
        Some(unsafe { self.loaded_entry(i) })
    }

    /// Slot `i` of the loaded leaf: its bounds and word.
    ///
    /// # Safety
    ///
    /// `i` is (or was, just taken out) in the mask: a leaf has been read,
    /// and slot `i` holds a value.
    #[inline(always)]
    unsafe fn loaded_entry(&self, i: usize) -> (u64, u64, NonNull<()>) {
        // SAFETY: the mask is empty until a leaf read, which set all of
        // `bound` and `words` (see `bound`); `i < 16`, so `i + 1 <= 16`.
        let (lo, hi, w) = unsafe {
            (
                self.bound[i].assume_init().wrapping_add(1),
                self.bound[i + 1].assume_init().min(self.max),
                self.words[i].assume_init(),
            )
        };
        // SAFETY: the mask holds value slots only (the contract), and
        // value words are non-null.
        (lo, hi, unsafe { NonNull::new_unchecked(w) })
    }

    /// Folds `f` over the entries left, leaf by leaf: what the loaded leaf
    /// still holds, then each further leaf's slots straight from its
    /// arrays, with no copy and no call per entry back into the iterator (what
    /// `Iterator::fold`, hence `sum`, `for_each`, `count` and friends, run
    /// on).
    #[inline]
    pub(crate) fn fold_entries<B>(&mut self, init: B, mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B) -> B {
        let mut acc = init;
        self.start_front();
        loop {
            while let Some((lo, hi, nn)) = self.take() {
                acc = f(acc, lo, hi, nn);
            }
            if self.last_leaf || !self.walk.next_leaf() {
                return acc;
            }
            self.prefetch_ahead(false);
            let Some(&lv) = self.walk.path.last() else { return acc };
            let end;
            (acc, end) = scan_leaf(lv, self.last, acc, |acc, lo, hi, v| {
                if is_value(v) {
                    // SAFETY: a value word is non-null.
                    f(acc, lo, hi, unsafe { NonNull::new_unchecked(v) })
                } else {
                    acc
                }
            });
            self.last_leaf = end;
        }
    }

    /// The back end's fold (what `DoubleEndedIterator::rfold`, hence
    /// `.rev()` with `sum`, `for_each`, `fold` and friends, runs on):
    /// entry by entry through [`next_back_entry`](Self::next_back_entry)
    /// where the ends may meet or the range cuts a leaf, and every leaf
    /// wholly after the front's (or, before the front has walked, after
    /// `first`) under the back's parent straight from its arrays, highest
    /// slot first, with no mask and no call per entry back into the
    /// iterator.
    ///
    /// # Safety
    ///
    /// As for `next_back_entry`.
    #[inline]
    pub(crate) unsafe fn rfold_entries<const SHARED: bool, B>(
        &mut self,
        back: &mut Back,
        init: B,
        mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B,
    ) -> B {
        let mut acc = init;
        loop {
            // SAFETY: this function's contract keeps the back's nodes
            // alive.
            let next = (!self.last_leaf && back.mask == 0)
                .then(|| unsafe { back.step_to_sibling::<true, false>(self.stop) })
                .flatten();
            if let Some(lv) = next {
                acc = rscan_leaf(lv, acc, |acc, lo, hi, w| {
                    if is_value(w) {
                        // SAFETY: a value word is non-null.
                        f(acc, lo, hi, unsafe { NonNull::new_unchecked(w) })
                    } else {
                        acc
                    }
                });
                // As `pop_back` leaves it after the leaf's lowest entry
                // (`lv.min` lies above `stop`, so it is not 0).
                self.last = lv.min - 1;
                continue;
            }
            // SAFETY: this function's contract.
            match unsafe { self.next_back_entry::<SHARED>(back) } {
                Some((lo, hi, nn)) => acc = f(acc, lo, hi, nn),
                None => return acc,
            }
        }
    }

    /// Hands out nothing more, from either end.
    #[cfg_attr(any(not(feature = "std"), loom), allow(dead_code))]
    pub(crate) fn finish(&mut self) {
        self.last_leaf = true;
        self.mask = 0;
        self.pending = None;
    }

    /// Nothing is left to hand out.
    pub(crate) fn is_done(&self) -> bool {
        self.last_leaf && self.mask == 0
    }

    /// The entry before the last one the back end `back` handed out (at
    /// first, the entry reaching `last`), unless the front end has handed
    /// it out already: the back half of a double-ended iterator.
    ///
    /// The back end walks leaves down from `last` (see [`Back`]), starting
    /// on its first call from the root the front's walk recorded. It
    /// hands out the values of each leaf from the highest slot down, and
    /// keeps the front from reaching what it has handed out by lowering
    /// `last` below each entry it hands out (a call that steps onto a leaf
    /// hands out an entry of it, or has met the front), so `last` lies in
    /// the back's leaf (or ends the leaf before it), and the front, which
    /// stops on the leaf reaching `last` (told so when `last` falls to its
    /// leaf's end), never passes it. Where the two ends meet, on the leaf
    /// whose range reaches into the front's (in a tree that does not
    /// change, the front's leaf itself), both take from the front's copy
    /// of its leaf, lowest and highest bit, and the front stops there for
    /// good (`last_leaf`), whatever `last` says.
    ///
    /// `SHARED`: the concurrent tree, read under a guard, where a writer
    /// may replace leaves between the two ends' walks (so that the back
    /// can stand on another version of the front's leaf, and meets it by
    /// range, entry by entry) and store into a slot the back has seen (so
    /// that a slot in its mask may hold no value by the time it is read).
    /// Entries present the whole time come once; entries written meanwhile
    /// may come in their old form or their new one, or not at all.
    ///
    /// # Safety
    ///
    /// Without `SHARED`: the tree this iterator walks has not changed since
    /// it was made and does not change while it lives (the plain tree's
    /// iterators, which borrow it), so that no slot is handed out twice
    /// (`IterMut` hands out `&mut`). With `SHARED`: the nodes reachable
    /// from the root the iterator recorded stay alive while it lives,
    /// changed at most by the single-word slot stores readers may meet,
    /// and so do the values they held meanwhile (the concurrent tree read
    /// under a guard).
    #[inline]
    pub(crate) unsafe fn next_back_entry<const SHARED: bool>(
        &mut self,
        back: &mut Back,
    ) -> Option<(u64, u64, NonNull<()>)> {
        // The common case: the back's own leaf still has values, and the
        // front cannot be on it (the front stands on the back's leaf only
        // with `last_leaf` set: it stops on the leaf reaching `last`, and
        // the back, meeting it, sets it too).
        if !self.last_leaf {
            // A leaf done with: the step to the leaf before under the same
            // parent, when that leaf lies wholly after where the front
            // stands (or, before the front has walked, after `first`), has
            // nothing to check but that: the slow path's meeting and
            // cutting do not arise.
            let ready = back.mask != 0 || {
                // SAFETY: this function's contract keeps the back's nodes
                // alive.
                let stepped = unsafe { back.step_to_sibling::<true, true>(self.stop) }.is_some();
                // (The step leaves the mask of the leaf it steps to.)
                stepped && back.mask != 0
            };
            if ready {
                if let Some(lv) = back.leaf {
                    if let Some(entry) = self.pop_back::<SHARED>(back, lv) {
                        return Some(entry);
                    }
                }
            }
        }
        // SAFETY: this function's contract.
        unsafe { self.next_back_slow::<SHARED>(back) }
    }

    /// Hands out the highest value slot of `back`'s own leaf `lv` (its
    /// mask is not empty) and lowers `last` below it. Always `Some`
    /// without `SHARED`; with it, `None` once the mask is empty (its
    /// remaining slots no longer hold values) or where the back has met
    /// the front and the front's copy has nothing left.
    #[inline(always)]
    fn pop_back<const SHARED: bool>(&mut self, back: &mut Back, lv: Level) -> Option<(u64, u64, NonNull<()>)> {
        loop {
            if SHARED && back.mask == 0 {
                return None;
            }
            let i = (31 - back.mask.leading_zeros()) as usize & 15;
            back.mask &= !(1 << i);
            let leaf = lv.leaf();
            let (lo, hi) = slot_bounds(leaf.pivots(), i, lv.min, lv.max);
            if SHARED && self.pending.is_none() && lo <= self.max {
                // The entry starts in the front's leaf, of which the back
                // stands on another version (a writer replaced leaves
                // between the two ends' walks): the ends meet, and what is
                // left there is the front copy's.
                self.last_leaf = true;
                back.mask = 0;
                return self.take_last();
            }
            // (`lo` is 0 only for an entry holding `first`, after which
            // `last` is not read again.)
            self.last = lo.wrapping_sub(1);
            if lo <= self.stop {
                // Nothing is left after the front's leaf: the front must not
                // step on (it only steps while `last` lies beyond its leaf, so
                // the leaf it steps onto reaches `last`). Or, before the front
                // has walked, the entry holding `first` is handed out: nothing
                // is left at all (`last_leaf` keeps the front from walking).
                self.last_leaf = true;
            }
            let w = leaf.slot(i);
            if SHARED && !is_value(w) {
                // No value any more. (A guard: the in-place stores readers
                // may meet write values today, but the word is read again
                // here, and `NonNull` must not rest on that.)
                continue;
            }
            // SAFETY: a value word (the mask holds value slots only, in a
            // tree that does not change; checked above in one that does)
            // is non-null.
            return Some((lo, hi, unsafe { NonNull::new_unchecked(w) }));
        }
    }

    /// [`next_back_entry`](Self::next_back_entry) when the back's leaf has
    /// nothing left for it: the first walk, the steps back, and the ends
    /// meeting.
    ///
    /// # Safety
    ///
    /// As for `next_back_entry`.
    #[inline(never)]
    unsafe fn next_back_slow<const SHARED: bool>(&mut self, back: &mut Back) -> Option<(u64, u64, NonNull<()>)> {
        if self.is_done() {
            return None;
        }
        // While the front has not walked (`pending`), it has no leaf to
        // meet, and the back walks from the root it will walk from.
        let front_max = self.walk.path.last().map(|l| l.max);
        let root = match self.pending {
            Some(root) => root,
            None => self.walk.path.first()?.node,
        };
        if back.leaf.is_none() {
            // SAFETY: the root of the tree the iterator was made over,
            // whose nodes stay alive (this function's contract).
            unsafe { back.walk(root, self.last, true) };
        }
        loop {
            let lv = back.leaf?;
            // The back's leaf lies at or after the front's: it reaches into
            // the front's range only where it is the front's leaf, or, in
            // a tree that changes, another version of it, which may reach
            // beyond the front's: there the back hands out what it holds
            // above the front's leaf first (`pop_back` meets the front at
            // the first entry that starts inside it).
            if front_max.is_some_and(|m| lv.min <= m) && (!SHARED || back.mask == 0) {
                // The ends meet: what is left is the front's, and it need
                // not step on (what lies after has been handed out).
                self.last_leaf = true;
                return self.take_last();
            }
            if self.pending.is_some() && lv.min <= self.first {
                // The leaf the front would start on: the back ends at the
                // slot holding `first`.
                back.mask &= u32::MAX << lv.node.find(self.first);
                if back.mask == 0 {
                    // Nothing is left at all (the front's mask is empty:
                    // it has not walked).
                    self.last_leaf = true;
                    return None;
                }
            }
            if back.mask != 0 {
                if let Some(entry) = self.pop_back::<SHARED>(back, lv) {
                    return Some(entry);
                }
                // (`SHARED`: slots holding no value any more, or the ends
                // met.)
                if self.is_done() {
                    return None;
                }
                continue;
            }
            // SAFETY: as for the walk above.
            if !unsafe { back.step_back(root) } {
                return None;
            }
        }
    }

    /// The next non-empty slot that starts at or before `last`. (The walk
    /// starts in the slot holding the first index, at or before `last`,
    /// and stops after the slot reaching `last`, so no slot it looks at
    /// starts beyond `last`.)
    #[inline]
    pub(crate) fn next_entry(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        loop {
            if let Some(entry) = self.take() {
                return Some(entry);
            }
            if self.last_leaf || !self.walk.next_leaf() {
                // (A front that has not walked has an empty path: it walks
                // here, on its first call.)
                if self.start_front() {
                    continue;
                }
                self.last_leaf = true;
                return None;
            }
            self.load_leaf(false);
        }
    }
}

/// Near the end of its parent, the leaf [`PREFETCH_AHEAD`] on from the one
/// a forward walk stands on lies under the next parent: asks for it there
/// (the `k`-th child of the parent at `path[d]`, counted on into the next
/// one under the same grandparent), so that the walk does not wait for the
/// first leaves of each parent. (The walk asks for the next parent's
/// other leaves when it reaches it.)
/// Called only in trees of four levels or more, as lookups prefetch
/// ([`PREFETCH_HEIGHT`]): a smaller tree stays in the cache.
#[cold]
fn prefetch_cousin(path: &Path, d: usize, k: usize) {
    let Some(g) = d.checked_sub(1).map(|g| &path[g]) else { return };
    if !g.node.has_next(g.off) {
        return;
    }
    let j = k - path[d].node.count();
    // SAFETY: `has_next` says the grandparent's next slot is used: it
    // holds a live child, the next parent.
    let next = unsafe { g.node.child(g.off + 1) };
    if j == 0 || next.has_next(j - 1) {
        // SAFETY: slot `j` of the next parent is used (its first, or one
        // after a used one).
        unsafe { next.child(j) }.prefetch();
    }
}

/// The back end of a double-ended iterator over a [`MapleTree`] (see
/// [`RawIter::next_back_entry`]): its leaf and the leaf's parent (none
/// until the first `next_back`), and the value slots of the leaf not yet
/// handed out. Three levels, not a whole path, so that every iterator
/// stays cheap to make and move (a path is 1.2 KiB; carrying a second one
/// made short range queries 15–20 % slower): a step back to a leaf under
/// the parent before goes through the grandparent, and only a step under
/// another grandparent walks from the root again.
#[derive(Clone)]
pub(crate) struct Back {
    leaf: Option<Level>,
    parent: Option<Level>,
    /// The parent's parent, in trees of three levels or more.
    grand: Option<Level>,
    /// A tree of [`PREFETCH_HEIGHT`] levels or more, where steps back ask
    /// for leaves under the parent before.
    tall: bool,
    mask: u32,
    /// The first walk asked only for the leaf before: the first step back
    /// asks for the leaves before that (see [`walk`](Self::walk)).
    ramp: bool,
}

impl Back {
    /// A back end that has not walked yet.
    #[inline]
    pub(crate) fn new() -> Back {
        Back { leaf: None, parent: None, grand: None, tall: false, mask: 0, ramp: false }
    }

    /// Walks from `root` to the leaf holding `index` and stands there,
    /// with the value slots up to the one holding `index` to hand out.
    ///
    /// # Safety
    ///
    /// As for [`descend`]: `root` is the root of a tree that stays alive
    /// and unchanged meanwhile.
    unsafe fn walk(&mut self, root: NodeRef, index: u64, first: bool) {
        let mut path = Path::new();
        // SAFETY: this function's contract.
        unsafe { descend::<false>(root, index, &mut path) };
        self.leaf = path.last().copied();
        self.parent = path.len().checked_sub(2).map(|d| path[d]);
        self.grand = path.len().checked_sub(3).map(|d| path[d]);
        self.tall = path.len() >= PREFETCH_HEIGHT;
        self.mask = self.leaf.map_or(0, |lv| value_mask(lv.leaf(), lv.off));
        if let Some(p) = self.parent {
            if first {
                // The first walk of a back end, often its only one (the
                // entry at or before an index, `range(..=k).next_back()`):
                // only the leaf before, where the next step back would go;
                // that step asks for the rest. Asking for four leaves here
                // made those one-entry queries on a tree of a million
                // ranges 1.16-1.21x as slow (`profile_store ab`, `pred`),
                // and `.rev()` over the whole tree no faster.
                if let Some(k) = p.off.checked_sub(1) {
                    // SAFETY: the slot before a used one is used, and a
                    // live internal node's used slots hold live children.
                    unsafe { p.node.child(k) }.prefetch();
                }
                self.ramp = true;
                return;
            }
            // Under a new parent: ask for the leaves the next steps back
            // reach (each step asks for the one `PREFETCH_AHEAD` before
            // it, see `step_back`).
            // SAFETY: the walk's parent level: a live internal node, and
            // the slot it took is used.
            unsafe { prefetch_before(p.node, p.off) };
        }
    }

    /// Steps to the leaf before this one (under the same parent, or by a
    /// walk from `root`), with all its value slots to hand out; false at
    /// the tree's start.
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk).
    // (Inline: out of line, its call cost `.rev()` 2 % more instructions.)
    #[inline(always)]
    unsafe fn step_back(&mut self, root: NodeRef) -> bool {
        let Some(leaf) = self.leaf else { return false };
        // SAFETY: this function's contract.
        if unsafe { self.step_to_sibling::<false, true>(0) }.is_some() {
            return true;
        }
        if leaf.min == 0 {
            return false;
        }
        // SAFETY: this function's contract.
        if unsafe { self.step_to_cousin() } {
            return true;
        }
        // SAFETY: this function's contract. The walk ends on the leaf
        // before, in its last slot (which ends at `leaf.min - 1`).
        unsafe { self.walk(root, leaf.min - 1, false) };
        true
    }

    /// Steps to the last leaf under the parent before this leaf's (the
    /// grandparent's slot before), with all its value slots to hand out;
    /// false (nothing changed) where there is no grandparent or the parent
    /// is its first child. What a walk from the root to the index before
    /// this leaf would find, without the walk (`.rev().sum()` 1.07–1.10× as
    /// fast at 1 K and 100 K ranges; even at 1 M, where the walk's cost was
    /// the misses the step takes too).
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk): the back's nodes are alive.
    #[inline(never)]
    unsafe fn step_to_cousin(&mut self) -> bool {
        let Some(g) = &mut self.grand else { return false };
        let Some((off, min, max)) = slot_before(g) else { return false };
        g.off = off;
        // SAFETY: a used slot (one before a used one) of a live internal
        // node (this function's contract) holds an encoded live child, here
        // an internal node (the grandparent is two levels above a leaf).
        let parent = unsafe { g.node.child(off) };
        let last = parent.count() - 1;
        let (ppiv, pslots) = parent.arrays();
        let (lmin, lmax) = slot_bounds(ppiv, last, min, max);
        // SAFETY: as above: `last` is the parent's last used slot.
        let node = unsafe { NodeRef::decode(pslots[last].load(Ordering::Acquire)) };
        self.parent = Some(Level { node: parent, min, max, off: last });
        // Its last slot, wherever that is (as `step_to_sibling` says).
        let lv = Level { node, min: lmin, max: lmax, off: RANGE64_SLOTS - 1 };
        self.leaf = Some(lv);
        self.mask = value_mask(lv.leaf(), lv.off);
        // Under a new parent: the leaves the next steps back reach, as a
        // walk onto it asks.
        // SAFETY: as above: a live internal node, `last` a used slot.
        unsafe { prefetch_before(parent, last) };
        true
    }

    /// Steps to the leaf before this one under the same parent, with all
    /// its value slots to hand out (with `MASK`; without, none: the caller
    /// reads the leaf itself), and returns it; `None` (nothing changed)
    /// where the leaf is its parent's first, the back has not walked, or,
    /// with `BOUNDED`, the leaf before starts at or below `above`.
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk): the back's nodes are alive.
    #[inline(always)]
    unsafe fn step_to_sibling<const BOUNDED: bool, const MASK: bool>(&mut self, above: u64) -> Option<Level> {
        let p = self.parent.as_mut()?;
        let (off, min, max) = slot_before(p)?;
        if BOUNDED && min <= above {
            return None;
        }
        p.off = off;
        // SAFETY: a used slot (one before a used one) of a live internal
        // node (this function's contract) holds an encoded live child.
        let node = unsafe { p.node.child(off) };
        // Its last slot, wherever that is: unused slots are empty and never
        // in a value mask, so no count is needed.
        let lv = Level { node, min, max, off: RANGE64_SLOTS - 1 };
        if core::mem::take(&mut self.ramp) {
            // The first step after the first walk: the leaves before this
            // one, up to `PREFETCH_AHEAD` back, as a walk onto a new parent
            // asks (the first walk asked for this one only).
            // SAFETY: as above: a live internal node, `off` a used slot.
            unsafe { prefetch_before(p.node, off) };
        } else if let Some(k) = off.checked_sub(PREFETCH_AHEAD) {
            // SAFETY: as above, for a slot further before.
            unsafe { p.node.child(k) }.prefetch();
        } else if let Some(g) = self.grand.filter(|_| self.tall) {
            prefetch_cousin_before(g, PREFETCH_AHEAD - off);
        }
        self.leaf = Some(lv);
        self.mask = if MASK { value_mask(lv.leaf(), lv.off) } else { 0 };
        Some(lv)
    }
}

/// Asks for the children of `parent` in the [`PREFETCH_AHEAD`] slots
/// before `off`, the leaves the next steps back reach.
///
/// # Safety
///
/// `parent` is a live internal node and `off` one of its used slots (so
/// the slots before it are used too, and hold live children).
#[inline(always)]
unsafe fn prefetch_before(parent: NodeRef, off: usize) {
    for k in off.saturating_sub(PREFETCH_AHEAD)..off {
        // SAFETY: this function's contract.
        unsafe { parent.child(k) }.prefetch();
    }
}

/// The slot before the one the level `l` stands on, with its bounds, or
/// `None` at its node's first slot.
#[inline(always)]
fn slot_before(l: &Level) -> Option<(usize, u64, u64)> {
    let off = l.off.checked_sub(1)?;
    let (min, max) = slot_bounds(l.node.arrays().0, off, l.min, l.max);
    Some((off, min, max))
}

/// Near the start of its parent, the leaf [`PREFETCH_AHEAD`] before the one
/// a backward walk stands on lies under the parent before: asks for it
/// there, the `back`-th child from that parent's end (its grandparent
/// level is `g`). The mirror of [`prefetch_cousin`].
#[cold]
fn prefetch_cousin_before(g: Level, back: usize) {
    let Some(off) = g.off.checked_sub(1) else { return };
    // SAFETY: the slot before a used one is used, and a live internal
    // node's used slots hold live children.
    let prev = unsafe { g.node.child(off) };
    if let Some(k) = prev.count().checked_sub(back) {
        // SAFETY: as above: `k` is below the parent's count.
        unsafe { prev.child(k) }.prefetch();
    }
}

/// The slots `0..=upto` of `leaf` that hold values, one bit each.
fn value_mask(leaf: LeafRef, upto: usize) -> u32 {
    // All sixteen (a loop of fixed length, unrolled), then cut.
    let mut mask = 0u32;
    for (i, s) in leaf.slots().iter().enumerate() {
        mask |= u32::from(is_value(s.load(Ordering::Acquire))) << i;
    }
    mask & (u32::MAX >> (31 - (upto & 15)))
}

/// Calls `emit(acc, lo, hi, word)` for every slot of the leaf `lv` from
/// its slot `lv.off` up to the slot reaching `last` (or the leaf's end), in
/// order, threading the accumulator; returns it and whether the scan
/// reached `last` or the tree's end. The leaf's pivots never change while
/// it is reachable (in-place writes under readers are single slots): the
/// first unused pivot marks its last slot.
#[inline(always)]
pub(crate) fn scan_leaf<B>(
    lv: Level,
    last: u64,
    mut acc: B,
    mut emit: impl FnMut(B, u64, u64, *mut ()) -> B,
) -> (B, bool) {
    let leaf = lv.leaf();
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    let (mut i, mut lo) = (lv.off, lv.node.slot_min(lv.off, lv.min));
    if lv.max <= last {
        // The whole leaf is wanted: no slot can end the iteration early.
        while i < RANGE64_SLOTS - 1 {
            let p = piv[i].load(Ordering::Relaxed);
            if p == PIVOT_UNUSED {
                break;
            }
            acc = emit(acc, lo, p, slots[i].load(Ordering::Acquire));
            // A pivot below the leaf's last slot is below its bound.
            lo = p + 1;
            i += 1;
        }
        acc = emit(acc, lo, lv.max, slots[i].load(Ordering::Acquire));
        (acc, lv.max == last || lv.max == u64::MAX)
    } else {
        // `lv.max > last`: the slot reaching `last` is in this leaf, at the
        // latest its last slot (which ends at `lv.max`).
        loop {
            let p = if i < RANGE64_SLOTS - 1 { piv[i].load(Ordering::Relaxed) } else { PIVOT_UNUSED };
            let hi = if p == PIVOT_UNUSED { lv.max } else { p };
            acc = emit(acc, lo, hi, slots[i].load(Ordering::Acquire));
            if hi >= last {
                return (acc, true);
            }
            i += 1;
            lo = hi + 1;
        }
    }
}

/// Calls `emit(acc, lo, hi, word)` for every used slot of the leaf `lv`,
/// from its last down to its first, threading the accumulator (the
/// mirror of [`scan_leaf`] for a whole leaf). The leaf's pivots never
/// change while it is reachable; its last used slot ends at `lv.max`.
#[inline(always)]
fn rscan_leaf<B>(lv: Level, mut acc: B, mut emit: impl FnMut(B, u64, u64, *mut ()) -> B) -> B {
    let leaf = lv.leaf();
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    // `& 15`: a leaf has 16 slots (spares the bound checks).
    let mut i = (lv.node.count() - 1) & 15;
    let mut hi = lv.max;
    while i > 0 {
        let lo = piv[i - 1].load(Ordering::Relaxed) + 1;
        acc = emit(acc, lo, hi, slots[i].load(Ordering::Acquire));
        hi = lo - 1;
        i -= 1;
    }
    emit(acc, lv.min, hi, slots[0].load(Ordering::Acquire))
}

/// Iterator over entries in ascending order; see [`MapleTree::iter`].
///
/// Double-ended: `.rev()` walks the entries from the last one down, and
/// the two ends can be mixed (each entry comes once).
///
/// ```
/// use maple_tree::{MapleTree, U63};
///
/// let t: MapleTree<U63> = (0..10u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
/// // The last three entries starting below 75, highest first.
/// let top: Vec<u64> = t.range(..75).rev().take(3).map(|(_, v)| v.get()).collect();
/// assert_eq!(top, [7, 6, 5]);
/// let mut it = t.iter();
/// assert_eq!(it.next_back().map(|(r, _)| r), Some(90..=94));
/// assert_eq!(it.next().map(|(r, _)| r), Some(0..=4));
/// assert_eq!(it.count(), 8);
/// ```
pub struct Iter<'a, V: Handle> {
    /// The tree stays borrowed: its values live while the iterator does.
    _tree: PhantomData<&'a MapleTree<V>>,
    raw: RawIter,
    back: Back,
}

impl<'a, V: Handle> Iterator for Iter<'a, V> {
    type Item = (RangeInclusive<u64>, V::Borrowed<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.raw.next_entry()?;
        // SAFETY: `next_entry` yields value words of the tree, which is
        // borrowed for 'a and keeps them alive meanwhile.
        Some((lo..=hi, unsafe { V::borrow(nn) }))
    }

    /// The last entry, found from the back (not by stepping through all).
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.raw.fold_entries(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the tree borrowed for 'a.
            f(acc, (lo..=hi, unsafe { V::borrow(nn) }))
        })
    }
}

impl<V: Handle> DoubleEndedIterator for Iter<'_, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        // SAFETY: the tree is borrowed for 'a: nothing changes it while
        // the iterator lives.
        let (lo, hi, nn) = unsafe { self.raw.next_back_entry::<false>(&mut self.back) }?;
        // SAFETY: as in `next`: value words of the tree borrowed for 'a.
        Some((lo..=hi, unsafe { V::borrow(nn) }))
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let g = |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the tree borrowed for 'a.
            f(acc, (lo..=hi, unsafe { V::borrow(nn) }))
        };
        // SAFETY: as in `next_back`.
        unsafe { self.raw.rfold_entries::<false, B>(&mut self.back, init, g) }
    }
}

impl<V: Handle> core::iter::FusedIterator for Iter<'_, V> {}

/// Iterator of owned handles; see [`MapleTree::range_cloned`].
pub struct RangeCloned<'a, V: Handle + Clone> {
    inner: Iter<'a, V>,
}

impl<V: Handle + Clone> Iterator for RangeCloned<'_, V> {
    type Item = (RangeInclusive<u64>, V);
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.inner.raw.next_entry()?;
        // SAFETY: `next_entry` yields value words of the borrowed tree,
        // alive while it is borrowed.
        Some((lo..=hi, unsafe { V::clone_raw(nn) }))
    }

    /// The last entry, found from the back.
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.inner.raw.fold_entries(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the borrowed tree.
            f(acc, (lo..=hi, unsafe { V::clone_raw(nn) }))
        })
    }
}

impl<V: Handle + Clone> DoubleEndedIterator for RangeCloned<'_, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        // SAFETY: the tree is borrowed: nothing changes it while the
        // iterator lives.
        let (lo, hi, nn) = unsafe { self.inner.raw.next_back_entry::<false>(&mut self.inner.back) }?;
        // SAFETY: as in `next`: value words of the borrowed tree.
        Some((lo..=hi, unsafe { V::clone_raw(nn) }))
    }
}

impl<V: Handle + Clone> core::iter::FusedIterator for RangeCloned<'_, V> {}

impl<V: Handle + Clone> fmt::Debug for RangeCloned<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeCloned").finish_non_exhaustive()
    }
}

impl<V: Handle> fmt::Debug for Iter<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").field("done", &self.raw.is_done()).finish_non_exhaustive()
    }
}

impl<'a, V: Handle> IntoIterator for &'a MapleTree<V> {
    type Item = (RangeInclusive<u64>, V::Borrowed<'a>);
    type IntoIter = Iter<'a, V>;
    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

/// Owning iterator; see `IntoIterator for MapleTree`.
pub struct IntoIter<V> {
    inner: liballoc::vec::IntoIter<(RangeInclusive<u64>, V)>,
}

impl<V> Iterator for IntoIter<V> {
    type Item = (RangeInclusive<u64>, V);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V> ExactSizeIterator for IntoIter<V> {}

impl<V> fmt::Debug for IntoIter<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoIter").field("remaining", &self.inner.len()).finish()
    }
}

impl<V: Handle> IntoIterator for MapleTree<V> {
    type Item = (RangeInclusive<u64>, V);
    type IntoIter = IntoIter<V>;
    /// Takes every entry out in ascending order (collected up front).
    fn into_iter(mut self) -> IntoIter<V> {
        let words: Vec<_> = self.raw_entries().collect();
        // Free the nodes but keep the values: they move into the iterator.
        self.raw.clear_with(None);
        let items: Vec<_> = words
            .into_iter()
            // SAFETY: the nodes are gone; each word is taken back once.
            .map(|(lo, hi, w)| (lo..=hi, unsafe { V::from_raw(w) }))
            .collect();
        IntoIter { inner: items.into_iter() }
    }
}

/// Collects with [`store_range`](MapleTree::store_range) semantics: later
/// ranges overwrite earlier ones. Empty or inverted ranges are skipped.
impl<V: Handle + Clone> FromIterator<(RangeInclusive<u64>, V)> for MapleTree<V> {
    fn from_iter<I: IntoIterator<Item = (RangeInclusive<u64>, V)>>(iter: I) -> Self {
        let mut t = MapleTree::new();
        t.extend(iter);
        t
    }
}

/// Stores each pair with [`store_range`](MapleTree::store_range); empty or
/// inverted ranges are skipped. Aborts on allocation failure, like `std`.
///
/// Each write starts from the walk the tree kept from the last one (see
/// [the crate docs](crate#writes)): a pair that starts in the leaf the
/// previous one was written to (ranges in ascending order, or close
/// together) is stored without a walk from the root.
impl<V: Handle + Clone> Extend<(RangeInclusive<u64>, V)> for MapleTree<V> {
    fn extend<I: IntoIterator<Item = (RangeInclusive<u64>, V)>>(&mut self, iter: I) {
        for (r, v) in iter {
            match self.store_range(r, v) {
                Ok(()) | Err(InsertError { cause: Error::InvalidRange, .. }) => {}
                Err(_) => abort_oom(),
            }
        }
    }
}
