//! The typed tree and its normal API.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    marker::PhantomData,
    ops::{RangeBounds, RangeInclusive},
    ptr::{self, NonNull},
};

pub(crate) use crate::write::clone_word;
use crate::{
    error::{AllocError, Error, InsertError},
    handle::{is_value, reserved_word, Handle, HandleMut},
    kept_walk::KeptTree,
    key::{self, Key},
    node::NodeRef,
    raw::{Path, RawTree},
    store::{Removed, Store, Stored},
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
// `repr(transparent)`: `WriteGuard::tree` lends the concurrent tree's
// `KeptTree` out as a `&MapleTree`.
#[repr(transparent)]
pub struct MapleTree<V: Handle, K: Key = u64, W: Writes = InPlace> {
    pub(crate) raw: KeptTree,
    _values: PhantomData<V>,
    _keys: PhantomData<fn() -> K>,
    _writes: PhantomData<W>,
}

/// How a [`MapleTree`]'s writes change its nodes: [`InPlace`] (the
/// default) or [`FreshNodes`].
///
/// Through `&mut`, no reader can be walking a plain tree, so by default a
/// write changes a node in place wherever that is cheapest. A
/// [`ConcurrentMapleTree`](crate::ConcurrentMapleTree)'s writer cannot:
/// readers may be in any node, so every change of more than one word is
/// built in fresh nodes and published with one pointer store. A plain
/// tree of [`FreshNodes`] writes the same way, with the whole plain API:
/// the tests run the concurrent tree's write path against a model
/// through it.
pub trait Writes: sealed::Sealed + 'static {
    /// Whether every change of more than one word goes into fresh nodes.
    #[doc(hidden)]
    const FRESH: bool;
}

/// Writes in place where no reader can be: the default (see [`Writes`]).
#[derive(Debug)]
pub enum InPlace {}

/// Writes every change of more than one word into fresh nodes, as the
/// concurrent tree must (see [`Writes`]).
#[cfg(any(test, feature = "testing"))]
#[derive(Debug)]
pub enum FreshNodes {}

impl Writes for InPlace {
    const FRESH: bool = false;
}

#[cfg(any(test, feature = "testing"))]
impl Writes for FreshNodes {
    const FRESH: bool = true;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::InPlace {}
    #[cfg(any(test, feature = "testing"))]
    impl Sealed for super::FreshNodes {}
}

// SAFETY: the tree owns its values; moving it to another thread moves them.
unsafe impl<V: Handle + Send, K: Key, W: Writes> Send for MapleTree<V, K, W> {}
// SAFETY: `&MapleTree` hands out shared borrows of values only (the kept
// walk, the one part not shared with readers, is touched only through
// `&mut`).
unsafe impl<V: Handle + Sync, K: Key, W: Writes> Sync for MapleTree<V, K, W> {}

pub(crate) fn abort_oom() -> ! {
    liballoc::alloc::handle_alloc_error(core::alloc::Layout::new::<crate::node::Node>())
}

/// An empty tree without gap tracking, of any key type.
impl<V: Handle, K: Key> Default for MapleTree<V, K> {
    fn default() -> Self {
        Self::keyed()
    }
}

/// The constructors of a tree with `u64` keys. (They are not generic over
/// the key type, as `HashMap::new` is not over the hasher: a tree made
/// with no type named and used with integer literals would get `i32`
/// keys, the literals' fallback type. Other key types use
/// [`keyed`](MapleTree::keyed), [`Default`] or [`FromIterator`].)
impl<V: Handle> MapleTree<V> {
    const_unless_loom! {
        /// An empty tree without gap tracking. It allocates nothing until
        /// its first write, and is `const`: a `static` can hold one.
        ///
        /// ```
        /// use std::sync::Mutex;
        /// use maple_tree::MapleTree;
        ///
        /// static FRAMES: Mutex<MapleTree<u32>> = Mutex::new(MapleTree::new());
        /// FRAMES.lock().unwrap().insert_range(0x1000..=0x1fff, 7).unwrap();
        /// assert_eq!(FRAMES.lock().unwrap().load(0x1800), Some(7));
        /// ```
        pub fn new() -> Self {
            Self::keyed()
        }
    }

    /// A tree of the pairs, joining equal neighbours (`rangemap`'s
    /// `collect`); see [`extend_merging`](Self::extend_merging).
    pub fn from_iter_merging(iter: impl IntoIterator<Item = (RangeInclusive<u64>, V)>) -> Self
    where
        V: Clone + PartialEq,
    {
        let mut t = MapleTree::new();
        t.extend_merging(iter);
        t
    }

    const_unless_loom! {
        /// An empty gap-tracking tree (kernel `MT_FLAGS_ALLOC_RANGE`): internal
        /// nodes keep the largest empty range below each child, making
        /// [`empty_area`](Self::empty_area) O(log n).
        pub fn with_gaps() -> Self {
            Self::keyed_with_gaps()
        }
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
}

impl<V: Handle, K: Key> MapleTree<V, K> {
    const_unless_loom! {
        /// An empty tree of any key type without gap tracking: what
        /// [`new`](MapleTree::new) is for `u64` keys.
        ///
        /// ```
        /// use maple_tree::MapleTree;
        ///
        /// let mut temps: MapleTree<char, i16> = MapleTree::keyed();
        /// temps.insert_range(-40..=0, 'F').unwrap();
        /// temps.insert_range(1..=25, 'M').unwrap();
        /// assert_eq!(temps.load(-3), Some('F'));
        /// assert_eq!(temps.gaps(..).next(), Some(i16::MIN..=-41));
        /// ```
        pub fn keyed() -> Self {
            MapleTree::from_raw(RawTree::new(false))
        }
    }

    const_unless_loom! {
        /// An empty gap-tracking tree of any key type: what
        /// [`with_gaps`](MapleTree::with_gaps) is for `u64` keys.
        pub fn keyed_with_gaps() -> Self {
            MapleTree::from_raw(RawTree::new(true))
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl<V: Handle> MapleTree<V, u64, FreshNodes> {
    /// An empty tree that writes every change of more than one word into
    /// fresh nodes (see [`Writes`]), gap-tracking if `gaps`.
    ///
    /// ```
    /// use maple_tree::{FreshNodes, MapleTree, U63};
    /// let mut t = MapleTree::<U63, u64, FreshNodes>::fresh(true);
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// assert_eq!(t.empty_area(0..=99, 15), Ok(20));
    /// ```
    pub fn fresh(gaps: bool) -> Self {
        MapleTree::from_raw(RawTree::new(gaps))
    }
}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    pub(crate) const fn from_raw(raw: RawTree) -> Self {
        MapleTree { raw: KeptTree::new(raw), _values: PhantomData, _keys: PhantomData, _writes: PhantomData }
    }

    /// The same tree, written as `W2` says from now on (see [`Writes`]).
    #[cfg(any(test, feature = "testing"))]
    ///
    /// ```
    /// use maple_tree::{FreshNodes, MapleTree, U63};
    /// let t = MapleTree::from_sorted((0..100u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap()))).unwrap();
    /// let mut fresh = t.into_writes::<FreshNodes>();
    /// fresh.erase(50);
    /// assert_eq!(fresh.len(), 99);
    /// ```
    pub fn into_writes<W2: Writes>(self) -> MapleTree<V, K, W2> {
        MapleTree::from_raw(self.into_raw())
    }

    /// Takes the raw tree out (leaving an empty one to drop).
    #[cfg(any(test, feature = "testing", feature = "std"))]
    pub(crate) fn into_raw(mut self) -> RawTree {
        core::mem::replace(&mut self.raw, KeptTree::new(RawTree::new(false))).into_inner()
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
    pub fn load(&self, index: K) -> Option<V::Borrowed<'_>> {
        self.borrow(self.raw.load(index.to_index()))
    }

    /// The entry containing `index` with its range.
    pub fn get_range(&self, index: K) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
        let (lo, hi, v) = self.raw.lookup(index.to_index());
        self.borrow(v).map(|b| (key::span(lo, hi), b))
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
    pub fn range_at(&self, index: K) -> (RangeInclusive<K>, Option<V::Borrowed<'_>>) {
        let (lo, hi, v) = self.raw.lookup(index.to_index());
        (key::keys(lo, hi), self.borrow(v))
    }

    /// True if anything is stored at `index`.
    pub fn contains(&self, index: K) -> bool {
        is_value(self.raw.load(index.to_index()))
    }

    /// Marks `range` as reserved (the kernel's zero entry): it is occupied
    /// (inserts over it fail, gap searches skip it) but holds no value, so
    /// [`load`](Self::load), iteration and [`len`](Self::len) do not see it;
    /// a cursor does ([`Cursor::is_reserved`](crate::Cursor::is_reserved)). Storing over it or
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
    pub fn reserve_range(&mut self, range: impl RangeBounds<K>) -> Result<(), Error> {
        let (first, last) = key::inclusive(&range)?;
        let mut out = Stored::default();
        // SAFETY: first <= last; the marker is no handle and owns nothing.
        unsafe { self.write_raw(None, Store::new(first, last).entry(reserved_word()).insert_only(), &mut out) }
            .map(drop)
            .map_err(|(c, _)| c)
    }

    /// True if `index` lies in a reserved range (see
    /// [`reserve_range`](Self::reserve_range)).
    pub fn is_reserved(&self, index: K) -> bool {
        self.raw.load(index.to_index()) == reserved_word()
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
        at: Option<&mut Path<'_>>,
        op: Store<'_>,
        out: &mut Stored,
    ) -> Result<bool, (Error, *mut ())> {
        let (first, e) = (op.first, op.entry);
        let res = match at {
            Some(p) => {
                // SAFETY: `at` is a walk of this tree as it is (our
                // caller's contract, from `write_words`).
                unsafe { self.raw.aim(p, first) };
                // SAFETY: the caller's contract; `p` is aimed at `first`;
                // `&mut` rules out readers and other writers.
                unsafe { self.raw.store_mut_walked(W::FRESH, p, op, out) }
            }
            // Without a walk of its own, the write starts from the tree's
            // kept walk (see `kept_walk.rs`).
            // SAFETY: the caller's contract; `write_from_walk` gives a walk
            // to `first`, and `&mut` rules out readers and other writers;
            // `true` is the engine's word that the walk it was given is
            // still good.
            None => unsafe {
                self.raw.write_from_walk(first, |raw, path| {
                    raw.store_mut_walked(W::FRESH, path, op, out).map(|good| (good, good))
                })
            },
        };
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
    pub fn insert_range(&mut self, range: impl RangeBounds<K>, value: V) -> Result<(), InsertError<V>> {
        // SAFETY: no walk is given.
        unsafe { write::insert_range(self, None, key::inclusive(&range), value) }.map(drop)
    }

    /// Inserts `value` at the single index `index`.
    pub fn insert(&mut self, index: K, value: V) -> Result<(), InsertError<V>> {
        self.insert_range(index..=index, value)
    }

    /// Stores `value` over `range`, overwriting (and dropping) whatever was
    /// there. Entries that stick out of the range are trimmed; an entry cut in
    /// two by it keeps its value on the left and a clone on the right.
    pub fn store_range(&mut self, range: impl RangeBounds<K>, value: V) -> Result<(), InsertError<V>>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::store_range(self, None, key::inclusive(&range), value) }.map(drop)
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
        range: impl RangeBounds<K>,
        value: V,
    ) -> Result<RangeInclusive<K>, InsertError<V>>
    where
        V: Clone + PartialEq,
    {
        let (mut first, mut last) = match key::inclusive(&range) {
            Ok(b) => b,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        // Compare as the values themselves (no clone needed): the
        // neighbour's word and ours, each a live handle. (If a user's `==`
        // panics, the value leaks; nothing unsound.)
        let word = value.into_raw();
        let equal = |w: *mut ()| {
            is_value(w)
                // SAFETY: `w` is a value word of this tree, borrowed with
                // it; `word` is a live handle we own until `from_raw` below.
                && unsafe { V::with_ref(NonNull::new_unchecked(w), |theirs| V::with_ref(word, |ours| theirs == ours)) }
        };
        (first, last) = self.widen_to_neighbours(first, last, equal);
        // SAFETY: turned back once, from its own `into_raw`.
        let value = unsafe { V::from_raw(word) };
        // SAFETY: no walk is given.
        unsafe { write::store_range(self, None, Ok((first, last)), value) }.map(|_| key::span(first, last))
    }

    /// [`Extend::extend`] joining equal neighbours: each pair stored with
    /// [`store_range_merging`](Self::store_range_merging), in order, so a
    /// run of touching ranges with equal values becomes one entry (what
    /// `rangemap`'s `extend` does). Empty or inverted ranges are skipped;
    /// aborts on allocation failure, like `std`.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// t.extend_merging([(0..=9, 1), (10..=19, 1), (20..=29, 2)]);
    /// let entries: Vec<_> = t.iter().collect();
    /// assert_eq!(entries, [(0..=19, 1), (20..=29, 2)]);
    /// ```
    pub fn extend_merging(&mut self, iter: impl IntoIterator<Item = (RangeInclusive<K>, V)>)
    where
        V: Clone + PartialEq,
    {
        for (r, v) in iter {
            match self.store_range_merging(r, v) {
                Ok(_) | Err(InsertError { cause: Error::InvalidRange, .. }) => {}
                Err(_) => abort_oom(),
            }
        }
    }

    /// Stores `value` at the single index `index`, overwriting.
    pub fn store(&mut self, index: K, value: V) -> Result<(), InsertError<V>>
    where
        V: Clone,
    {
        self.store_range(index..=index, value)
    }

    /// Empties `range`: entries inside are dropped, entries sticking out are
    /// trimmed (an entry cut in two keeps a clone on the right).
    pub fn remove_range(&mut self, range: impl RangeBounds<K>) -> Result<(), Error>
    where
        V: Clone,
    {
        // SAFETY: no walk is given.
        unsafe { write::remove_range(self, None, key::inclusive(&range)) }.map(drop)
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
        range: impl RangeBounds<K>,
        value: V,
        rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved<K>) -> V,
    ) -> Result<(), InsertError<V>> {
        let (first, last) = match key::inclusive(&range) {
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
        mut rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved<K>) -> V,
    ) -> Result<(), (Error, Option<V>)> {
        if first > last {
            return Err((Error::InvalidRange, entry));
        }
        let mut piece = |w: *mut (), was: u64, f: u64, l: u64| {
            // SAFETY: the engine passes the non-null word of a live handle
            // of this tree, which `&mut self` keeps free of other borrows;
            // the borrow ends before the call returns.
            let old = unsafe { V::borrow(NonNull::new_unchecked(w)) };
            rebase(old, Moved { old: key::keys(was, l), new: key::keys(f, l) }).into_raw().as_ptr()
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
        range: impl RangeBounds<K>,
        rebase: impl for<'b> FnMut(V::Borrowed<'b>, Moved<K>) -> V,
    ) -> Result<(), Error> {
        let (first, last) = key::inclusive(&range)?;
        self.write_rebased(first, last, None, rebase).map_err(|(e, _)| e)
    }

    /// Removes the whole entry containing `index` and returns it.
    ///
    /// Aborts like `std` collections if a node cannot be allocated; see
    /// [`try_erase`](Self::try_erase).
    pub fn erase(&mut self, index: K) -> Option<V> {
        self.try_erase(index).unwrap_or_else(|_| abort_oom())
    }

    /// [`erase`](Self::erase) that reports allocation failure (the tree is
    /// then unchanged).
    pub fn try_erase(&mut self, index: K) -> Result<Option<V>, AllocError> {
        // One walk: the write starts from the walk that found the entry
        // (the tree's kept walk if it has one, see `kept_walk.rs`).
        let mut out = Stored::default();
        let erase = |raw: &mut RawTree, path: &mut Path<'_>| {
            let Some((lo, hi, _)) = RawTree::entry_at(path) else {
                // Nothing written: the walk is still one of the tree.
                return Ok((false, true));
            };
            // (A reserved range is erased too; it returns no value.)
            // SAFETY: lo <= hi; no entry and no `split` (nothing is cut:
            // the write covers its slot exactly); `path` is a walk of this
            // tree whose leaf holds `lo`; `&mut` rules out readers and
            // other writers.
            unsafe { raw.store_mut_walked(W::FRESH, path, Store::new(lo, hi).exact(), &mut out) }
                .map(|good| (true, good))
        };
        // SAFETY: `true` is the engine's word that the walk is still good,
        // or no write was made.
        let found = unsafe { self.raw.write_from_walk(index.to_index(), erase) };
        if !found.map_err(|_| AllocError)? {
            return Ok(None);
        }
        debug_assert!(out.removed.len() <= 1);
        // SAFETY: the one value the write took out; ours now.
        Ok(out.removed.single().map(|nn| unsafe { V::from_raw(nn) }))
    }

    /// Keeps only the entries for which `keep(range, value)` is true, in
    /// ascending order; the others are removed (their ranges left empty)
    /// and dropped. Reserved ranges are not values and stay. `BTreeMap`'s
    /// `retain`.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = (0..10u64).map(|i| (i * 10..=i * 10 + 4, i as u32)).collect();
    /// t.retain(|range, v| v % 3 == 0 && *range.start() < 80);
    /// let left: Vec<_> = t.iter().map(|(_, v)| v).collect();
    /// assert_eq!(left, [0, 3, 6]);
    /// ```
    pub fn retain(&mut self, mut keep: impl for<'b> FnMut(RangeInclusive<K>, V::Borrowed<'b>) -> bool) {
        let mut c = self.cursor_mut(K::from_index(0));
        let mut verdict = c.get_entry().map(|(r, v)| keep(r, v));
        loop {
            if verdict == Some(false) {
                drop(c.erase());
            }
            match c.next() {
                Some((r, v)) => verdict = Some(keep(r, v)),
                None => return,
            }
        }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        clear_values::<V>(&mut self.raw);
    }

    /// An empty tree of this one's flavour (gap tracking or not).
    fn empty_like(&self) -> Self {
        Self::from_raw(RawTree::new(self.tracks_gaps()))
    }

    /// Splits the tree in two at `at`: everything from `at` on moves to
    /// the returned tree (of the same flavour), everything before stays.
    /// An entry that holds both `at - 1` and `at` is cut: it keeps its part
    /// before `at`, and a clone of its value covers the rest in the new
    /// tree. Reserved ranges move as entries do. `BTreeMap`'s `split_off`;
    /// O(m log n) for the m entries that move. Aborts on allocation
    /// failure, like `std`.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut low: MapleTree<u32> = [(0..=9, 1), (10..=29, 2), (40..=49, 3)].into_iter().collect();
    /// let high = low.split_off(20);
    /// assert_eq!(low.iter().collect::<Vec<_>>(), [(0..=9, 1), (10..=19, 2)]);
    /// assert_eq!(high.iter().collect::<Vec<_>>(), [(20..=29, 2), (40..=49, 3)]);
    /// ```
    pub fn split_off(&mut self, at: K) -> Self
    where
        V: Clone,
    {
        let a = at.to_index();
        let mut right = self.empty_like();
        // What holds `at` and starts before it: its part from `at` on moves.
        let (lo, hi, _) = self.raw.lookup(a);
        if lo < a {
            let cut = self.get_range_cloned(at).map(|(_, v)| v);
            if cut.is_some() || self.is_reserved(at) {
                let tail = key::keys::<K>(a, hi);
                self.remove_range(tail.clone()).unwrap_or_else(|_| abort_oom());
                match cut {
                    Some(v) => right.insert_range(tail, v).unwrap_or_else(|_| abort_oom()),
                    None => right.reserve_range(tail).unwrap_or_else(|_| abort_oom()),
                }
            }
        }
        // The rest, range by range, taken out whole.
        let mut c = self.cursor_mut(at);
        loop {
            let here = c.range();
            let (lo, hi) = (here.start().to_index(), here.end().to_index());
            if lo >= a {
                if c.is_reserved() {
                    c.remove_range(here.clone()).unwrap_or_else(|_| abort_oom());
                    right.reserve_range(here).unwrap_or_else(|_| abort_oom());
                } else if let Some(v) = c.erase() {
                    right.insert_range(here, v).unwrap_or_else(|_| abort_oom());
                }
            }
            if hi >= K::MAX_INDEX || c.next_range().is_none() {
                return right;
            }
        }
    }

    /// Moves every entry of `other` into this tree, storing each over
    /// what is there (as [`store_range`](Self::store_range) does: what it
    /// overlaps is trimmed or cut), and leaves `other` empty. Reserved
    /// ranges move too. `BTreeMap`'s `append`; O(m log(n + m)). Aborts on
    /// allocation failure, like `std`.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut a: MapleTree<u32> = [(0..=9, 1), (20..=29, 2)].into_iter().collect();
    /// let mut b: MapleTree<u32> = [(5..=14, 7)].into_iter().collect();
    /// a.append(&mut b);
    /// assert!(b.is_empty());
    /// assert_eq!(a.iter().collect::<Vec<_>>(), [(0..=4, 1), (5..=14, 7), (20..=29, 2)]);
    /// ```
    pub fn append(&mut self, other: &mut Self)
    where
        V: Clone,
    {
        let reserved: Vec<_> =
            other.occupied().filter(|(_, _, v)| v.is_none()).map(|(lo, hi, _)| key::keys::<K>(lo, hi)).collect();
        let empty = other.empty_like();
        let taken = core::mem::replace(other, empty);
        for r in reserved {
            self.remove_range(r.clone()).unwrap_or_else(|_| abort_oom());
            self.reserve_range(r).unwrap_or_else(|_| abort_oom());
        }
        for (r, v) in taken {
            self.store_range(r, v).unwrap_or_else(|_| abort_oom());
        }
    }

    /// The entry with the lowest range, or `None` if the tree holds no
    /// value (reserved ranges are not values). `BTreeMap`'s
    /// `first_key_value`.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// assert_eq!(t.first(), None);
    /// t.insert_range(40..=49, 2).unwrap();
    /// t.insert_range(10..=19, 1).unwrap();
    /// assert_eq!(t.first(), Some((10..=19, 1)));
    /// assert_eq!(t.last(), Some((40..=49, 2)));
    /// ```
    pub fn first(&self) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
        self.first_in(..)
    }

    /// The entry with the highest range, or `None` if the tree holds no
    /// value. `BTreeMap`'s `last_key_value`.
    pub fn last(&self) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
        self.prev_before(K::from_index(K::MAX_INDEX))
    }

    /// First entry whose range ends at or after `index` (kernel `mt_find`).
    pub fn next_after(&self, index: K) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
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
    pub fn first_in(&self, range: impl RangeBounds<K>) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
        let (first, last) = key::inclusive(&range).ok()?;
        // Most often the entry holding `first`, or the one just past the
        // empty range holding it: two plain walks, cheaper than a cursor's
        // set-up; a cursor steps on from there (past reserved ranges).
        let (lo, hi, w) = self.raw.lookup(first);
        if let Some(b) = self.borrow(w) {
            return Some((key::keys(lo, hi), b));
        }
        let next = hi.checked_add(1).filter(|&n| n <= last)?;
        let (lo, hi, w) = self.raw.lookup(next);
        if let Some(b) = self.borrow(w) {
            return Some((key::keys(lo, hi), b));
        }
        let mut c = self.cursor(K::from_index(next));
        c.next().filter(|(r, _)| r.start().to_index() <= last)
    }

    /// Last entry that starts at or before `index` (kernel `mt_prev` from
    /// `index + 1`).
    pub fn prev_before(&self, index: K) -> Option<(RangeInclusive<K>, V::Borrowed<'_>)> {
        // Most often the entry holding `index`, or the one just before the
        // empty range holding it (empty ranges never touch): two plain
        // walks, the second through the lines the first brought in, as
        // `first_in` does; a cursor steps back from there (past reserved
        // ranges). Cheaper than a cursor made at `index` and stepped back:
        // no cursor's path is copied.
        let (lo, hi, w) = self.raw.lookup(index.to_index());
        if let Some(b) = self.borrow(w) {
            return Some((key::keys(lo, hi), b));
        }
        let before = lo.checked_sub(1)?;
        let (lo, hi, w) = self.raw.lookup(before);
        if let Some(b) = self.borrow(w) {
            return Some((key::keys(lo, hi), b));
        }
        let mut c = self.cursor(K::from_index(before));
        c.prev()
    }

    /// The entry containing `index` with its range, as an owned handle (a
    /// clone of the value).
    pub fn get_range_cloned(&self, index: K) -> Option<(RangeInclusive<K>, V)>
    where
        V: Clone,
    {
        let (lo, hi, w) = self.raw.lookup(index.to_index());
        // SAFETY: a value word of this tree, alive while `self` is borrowed.
        is_value(w).then(|| (key::keys(lo, hi), unsafe { V::clone_raw(NonNull::new_unchecked(w)) }))
    }

    /// Lowest `start` such that `[start, start + size - 1]` is empty and lies
    /// inside `window` (kernel `mas_empty_area`). O(log n) on gap-tracking
    /// trees; a leaf scan on plain ones.
    ///
    /// Errors: [`Error::InvalidRange`] for a size of 0 or a window that is
    /// invalid or smaller than `size`; [`Error::Busy`] if nothing fits.
    pub fn empty_area(&self, window: impl RangeBounds<K>, size: u64) -> Result<K, Error> {
        let (min, max) = key::inclusive(&window)?;
        self.raw.empty_area(min, max, size).map(K::from_index)
    }

    /// Highest `start` such that `[start, start + size - 1]` is empty and
    /// inside `window` (kernel `mas_empty_area_rev`).
    pub fn empty_area_rev(&self, window: impl RangeBounds<K>, size: u64) -> Result<K, Error> {
        let (min, max) = key::inclusive(&window)?;
        self.raw.empty_area_rev(min, max, size).map(K::from_index)
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
    pub fn empty_area_aligned(&self, window: impl RangeBounds<K>, size: u64, align: u64) -> Result<K, Error> {
        let (min, max) = aligned_window(&window, align)?;
        let mut from = min;
        loop {
            let start = self.raw.empty_area(from, max, size)?;
            // The gap holding `start` (cut to the window) and the first
            // aligned index in it.
            let gap_end = self.gaps(key::keys::<K>(start, max)).next().map_or(max, |g| g.end().to_index());
            if let Some(aligned) = start.checked_next_multiple_of(align) {
                if aligned.checked_add(size - 1).is_some_and(|last| last <= gap_end) {
                    return Ok(K::from_index(aligned));
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
    pub fn empty_area_rev_aligned(&self, window: impl RangeBounds<K>, size: u64, align: u64) -> Result<K, Error> {
        let (min, max) = aligned_window(&window, align)?;
        let mut to = max;
        loop {
            let start = self.raw.empty_area_rev(min, to, size)?;
            // The gap holding `start` (cut to the window): the aligned start
            // at or below `start` must not fall below it.
            let gap_start = self.gaps(key::keys::<K>(min, start)).next_back().map_or(min, |g| g.start().to_index());
            let aligned = start & !(align - 1);
            if aligned >= gap_start {
                return Ok(K::from_index(aligned));
            }
            if gap_start <= min || gap_start - min < size {
                return Err(Error::Busy);
            }
            to = gap_start - 1;
        }
    }

    /// Stores `value` in the lowest empty window of `size` inside `window`
    /// and returns its start (kernel `mtree_alloc_range`).
    pub fn alloc_range(&mut self, window: impl RangeBounds<K>, size: u64, value: V) -> Result<K, InsertError<V>> {
        write::alloc_range(self, key::inclusive(&window), size, value, false).map(K::from_index)
    }

    /// Stores `value` in the highest empty window of `size` inside `window`
    /// and returns its start (kernel `mtree_alloc_rrange`).
    pub fn alloc_range_rev(&mut self, window: impl RangeBounds<K>, size: u64, value: V) -> Result<K, InsertError<V>> {
        write::alloc_range(self, key::inclusive(&window), size, value, true).map(K::from_index)
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
        window: impl RangeBounds<K>,
        next: &mut K,
        value: V,
    ) -> Result<(K, bool), InsertError<V>> {
        write::alloc_cyclic(self, key::inclusive(&window), next, value)
    }

    pub(crate) fn build(&mut self, entries: impl IntoIterator<Item = (RangeInclusive<K>, V)>) -> Result<(), Error> {
        let iter = entries.into_iter().map(|(r, v)| (r.start().to_index(), r.end().to_index(), v.into_raw().as_ptr()));
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
        V: fmt::Debug,
    {
        let mut out = String::new();
        self.raw.dump(&mut out, &|w| match NonNull::new(w).filter(|_| is_value(w)) {
            Some(nn) => format!("{:?}", ValueOf::<V>::new(self, nn)),
            None => "-".into(),
        });
        out
    }

    /// Node statistics: how many nodes of each kind and the memory they use.
    pub fn stats(&self) -> Stats {
        // SAFETY: `&self` to a plain tree: nothing changes it meanwhile.
        unsafe { Stats::of(&self.raw) }
    }
}

/// Frees every node of `raw` and drops its values as `V`s; inline values
/// (nothing to drop: [`Handle::INLINE`]) are not even visited. (Whether
/// `V` has drop glue says nothing here: a `u64` has none, but its word is
/// a box the tree made.)
pub(crate) fn clear_values<V: Handle>(raw: &mut RawTree) {
    if !V::INLINE {
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

impl<V: Handle, K: Key, W: Writes> WriteTarget<V> for MapleTree<V, K, W> {
    unsafe fn write_words(&mut self, at: Option<&mut Path<'_>>, op: Store<'_>) -> Result<bool, (Error, *mut ())> {
        let mut out = Stored::default();
        // SAFETY: the caller's contract.
        let kept = unsafe { self.write_raw(at, op, &mut out) }?;
        // No reader can exist (`&mut self`): what left the tree goes now.
        Self::drop_removed(out.removed);
        Ok(kept)
    }

    fn raw(&self) -> &RawTree {
        &self.raw
    }
}

impl<V: Handle, K: Key, W: Writes> Drop for MapleTree<V, K, W> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<V: Handle + fmt::Debug, K: Key + fmt::Debug, W: Writes> fmt::Debug for MapleTree<V, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.raw_entries().map(|(lo, hi, w)| (key::keys::<K>(lo, hi), ValueOf::new(self, w))))
            .finish()
    }
}

/// A value word of a tree borrowed for `'t`, compared, hashed and printed
/// as the `V` it is ([`Handle::with_ref`]): what lets `==`, `Hash`, the
/// orderings and `Debug` ask only `V: PartialEq` (and so on), with no
/// `'static` needed.
struct ValueOf<'t, V: Handle>(NonNull<()>, PhantomData<&'t V>);

impl<'t, V: Handle> ValueOf<'t, V> {
    /// `w`, a value word of `tree`.
    fn new<K: Key, W: Writes>(tree: &'t MapleTree<V, K, W>, w: NonNull<()>) -> Self {
        debug_assert!(is_value(w.as_ptr()));
        let _ = tree;
        ValueOf(w, PhantomData)
    }

    fn with<R>(&self, f: impl FnOnce(&V) -> R) -> R {
        // SAFETY: a value word of a tree borrowed for `'t` (`new`): the
        // value lives and nothing changes it while `self` does.
        unsafe { V::with_ref(self.0, f) }
    }
}

impl<V: Handle + PartialEq> PartialEq for ValueOf<'_, V> {
    fn eq(&self, other: &Self) -> bool {
        self.with(|a| other.with(|b| a == b))
    }
}

impl<V: Handle + Eq> Eq for ValueOf<'_, V> {}

impl<V: Handle + PartialOrd> PartialOrd for ValueOf<'_, V> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        self.with(|a| other.with(|b| a.partial_cmp(b)))
    }
}

impl<V: Handle + Ord> Ord for ValueOf<'_, V> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.with(|a| other.with(|b| a.cmp(b)))
    }
}

impl<V: Handle + core::hash::Hash> core::hash::Hash for ValueOf<'_, V> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.with(|v| v.hash(state));
    }
}

impl<V: Handle + fmt::Debug> fmt::Debug for ValueOf<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with(|v| v.fmt(f))
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
impl<V: Handle + PartialEq, K: Key, W: Writes> PartialEq for MapleTree<V, K, W> {
    fn eq(&self, other: &Self) -> bool {
        // The occupied ranges fix the empty ones (empty ranges never
        // touch, `validate` checks it).
        self.len() == other.len() && self.occupied().eq(other.occupied())
    }
}

impl<V: Handle + Eq, K: Key, W: Writes> Eq for MapleTree<V, K, W> {}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// Every occupied range in ascending order, with its value (`None`:
    /// reserved): what `==`, `Hash` and the ordering compare.
    fn occupied(&self) -> impl Iterator<Item = (u64, u64, Option<ValueOf<'_, V>>)> + '_ {
        let mut c = self.cursor(K::from_index(0));
        let mut started = false;
        core::iter::from_fn(move || loop {
            if started {
                c.next_range()?;
            }
            started = true;
            let (r, reserved) = (c.range(), c.is_reserved());
            let (lo, hi) = (r.start().to_index(), r.end().to_index());
            match c.word() {
                Some(w) => return Some((lo, hi, Some(ValueOf::new(self, w)))),
                None if reserved => return Some((lo, hi, None)),
                None => {}
            }
        })
    }
}

/// Trees are ordered as their occupied ranges are, in ascending order,
/// lexicographically (as `BTreeMap`s are by their entries): each as
/// (first, last, value), a reserved range before a value over the same
/// bounds. Consistent with `==`.
///
/// ```
/// use maple_tree::MapleTree;
///
/// let a: MapleTree<u32> = [(0..=9, 1), (20..=29, 2)].into_iter().collect();
/// let b: MapleTree<u32> = [(0..=9, 1), (20..=29, 3)].into_iter().collect();
/// let c: MapleTree<u32> = [(0..=9, 1)].into_iter().collect();
/// assert!(a < b && c < a);
/// ```
impl<V: Handle + PartialOrd, K: Key, W: Writes> PartialOrd for MapleTree<V, K, W> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        self.occupied().partial_cmp(other.occupied())
    }
}

impl<V: Handle + Ord, K: Key, W: Writes> Ord for MapleTree<V, K, W> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.occupied().cmp(other.occupied())
    }
}

/// Hashes what [`PartialEq`] compares: each occupied range, whether it is
/// reserved, and its value.
impl<V: Handle + core::hash::Hash, K: Key, W: Writes> core::hash::Hash for MapleTree<V, K, W> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        self.occupied().for_each(|e| e.hash(state));
    }
}

/// `clone` is [`try_dup`](MapleTree::try_dup): an O(n) copy of the nodes,
/// then a clone of every value. Aborts on allocation failure, like `std`.
impl<V: Handle + Clone, K: Key, W: Writes> Clone for MapleTree<V, K, W> {
    fn clone(&self) -> Self {
        self.try_dup().unwrap_or_else(|_| abort_oom())
    }
}

/// The inclusive bounds of an aligned gap search's window, after checking
/// that `align` is a power of two (`InvalidRange` otherwise).
fn aligned_window<K: Key>(window: &impl RangeBounds<K>, align: u64) -> Result<(u64, u64), Error> {
    let bounds = key::inclusive(window)?;
    if !align.is_power_of_two() {
        return Err(Error::InvalidRange);
    }
    Ok(bounds)
}

/// Mutable access to values that a handle owns alone (`Box<T>`).
impl<V: HandleMut, K: Key, W: Writes> MapleTree<V, K, W> {
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
    pub fn get_mut(&mut self, index: K) -> Option<&mut V::Target> {
        let w = self.raw.load(index.to_index());
        if !is_value(w) {
            return None;
        }
        // SAFETY: a value word the tree owns; `&mut self` excludes every
        // other access to the tree's values while the result lives, and no
        // other handle shares this value (`HandleMut`).
        Some(unsafe { V::borrow_mut(NonNull::new_unchecked(w)) })
    }
}

/// Where a piece of a value was and is after a store moved its start; see
/// [`MapleTree::store_range_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved<K = u64> {
    /// The old value's range.
    pub old: RangeInclusive<K>,
    /// The piece's range (same end, later start).
    pub new: RangeInclusive<K>,
}

impl<K: Key> Moved<K> {
    /// How far the start moved: `new.start() - old.start()`.
    pub fn shift(&self) -> u64 {
        self.new.start().to_index() - self.old.start().to_index()
    }
}

/// Collects with [`store_range`](MapleTree::store_range) semantics: later
/// ranges overwrite earlier ones. Empty or inverted ranges are skipped.
impl<V: Handle + Clone, K: Key> FromIterator<(RangeInclusive<K>, V)> for MapleTree<V, K> {
    fn from_iter<I: IntoIterator<Item = (RangeInclusive<K>, V)>>(iter: I) -> Self {
        let mut t = MapleTree::keyed();
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
impl<V: Handle + Clone, K: Key, W: Writes> Extend<(RangeInclusive<K>, V)> for MapleTree<V, K, W> {
    fn extend<I: IntoIterator<Item = (RangeInclusive<K>, V)>>(&mut self, iter: I) {
        for (r, v) in iter {
            match self.store_range(r, v) {
                Ok(()) | Err(InsertError { cause: Error::InvalidRange, .. }) => {}
                Err(_) => abort_oom(),
            }
        }
    }
}
