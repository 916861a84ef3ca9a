//! Iteration: the entry-by-entry engine every iterator runs on
//! ([`RawIter`], from the front, with [`Back`] as its back end), the leaf
//! scans that folds use, and the typed iterators over it: [`Iter`],
//! [`IterMut`], [`RangeCloned`], [`IntoIter`] (the concurrent tree's
//! `ConcurrentIter` is in `concurrent.rs`, over the same engine).

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    marker::PhantomData,
    mem::MaybeUninit,
    ops::{RangeBounds, RangeInclusive},
    ptr::NonNull,
};

use crate::{
    handle::{is_value_word, value_mask, Handle, HandleMut},
    key::{self, Key},
    node::{load_ptrs, load_words, read_word, slot_bounds, slot_lo, LeafRef, NodeRef, PIVOT_UNUSED, RANGE64_SLOTS},
    raw::{descend, Children, LeafWalk, Level, Path, RawTree, PREFETCH_HEIGHT},
    sync::{AtomicPtr, AtomicU64, Ordering},
    tree::{MapleTree, Writes},
    write::Bounds,
};

/// The two ends of an iterator over entries, as words and bounds: what
/// [`Iter`], [`IterMut`], [`RangeCloned`] and the concurrent tree's
/// iterator share, each turning the word into its item. Every value slot
/// comes once: from the front ascending, from the back descending, until
/// the ends meet (by index: see [`RawIter`]).
///
/// `SHARED` (the concurrent tree's): a writer may change the tree while the
/// iterator lives, and either end may reach a newer version of a leaf than
/// the other read (the front by stepping on, the back by walking again from
/// the recorded root, whose subtrees a writer may have replaced), in which
/// an entry written meanwhile reaches into what the other end handed out.
/// `floor` keeps the lowest start the back handed out, `ceil` the highest
/// end the front did: the front stops at an entry reaching `floor` and the
/// back at one reaching down to `ceil` (the ends meet), and the back skips
/// an entry reaching `floor` (it met a newer version of what it handed
/// out). An entry present the whole time cannot reach either: it would
/// overlap what was handed out.
pub(crate) struct Entries<'t, const SHARED: bool> {
    pub(crate) raw: RawIter<'t, SHARED>,
    floor: Option<u64>,
    ceil: Option<u64>,
}

impl<'t, const SHARED: bool> Entries<'t, SHARED> {
    /// The ends of `raw`, neither walked yet.
    ///
    /// # Safety
    ///
    /// Without `SHARED`, the tree `raw` walks has not changed since it was
    /// made and does not change while the result lives (the plain tree's
    /// iterators, which borrow it), so that no slot is handed out twice
    /// (`IterMut` hands out `&mut`). With `SHARED`: the nodes reachable
    /// from the root `raw` recorded stay alive meanwhile, changed at most
    /// by the single-word slot stores readers may meet, and so do the
    /// values they held.
    #[inline]
    pub(crate) unsafe fn new(raw: RawIter<'t, SHARED>) -> Self {
        Entries { raw, floor: None, ceil: None }
    }

    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        let (lo, hi, nn) = self.raw.next_entry()?;
        if SHARED {
            if self.floor.is_some_and(|f| hi >= f) {
                // The ends meet (see `floor`).
                self.raw.finish();
                return None;
            }
            self.ceil = Some(hi);
        }
        Some((lo, hi, nn))
    }

    #[inline(always)]
    pub(crate) fn next_back(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        loop {
            let (lo, hi, nn) = self.raw.next_back_entry()?;
            if SHARED {
                if self.ceil.is_some_and(|c| lo <= c) {
                    // The ends meet (see `ceil`).
                    self.raw.finish();
                    return None;
                }
                if self.floor.is_some_and(|f| hi >= f) {
                    // Skipped (see `floor`).
                    continue;
                }
                self.floor = Some(lo);
            }
            return Some((lo, hi, nn));
        }
    }

    /// What is left from the front, leaf by leaf (see
    /// [`RawIter::fold_entries`]).
    #[inline]
    pub(crate) fn fold<B>(&mut self, init: B, mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B) -> B {
        if SHARED && self.floor.is_some() {
            // The back has handed out entries: every one from the front is
            // checked against them (`next`).
            let mut acc = init;
            while let Some((lo, hi, nn)) = self.next() {
                acc = f(acc, lo, hi, nn);
            }
            return acc;
        }
        self.raw.fold_entries::<true, B>(init, f)
    }

    /// What is left from the back, leaf by leaf (see
    /// [`RawIter::rfold_entries`]).
    #[inline]
    pub(crate) fn rfold<B>(&mut self, init: B, mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B) -> B {
        let (mut floor, ceil) = (self.floor, self.ceil);
        let g = |acc, lo, hi, nn| {
            if SHARED {
                if ceil.is_some_and(|c| lo <= c) || floor.is_some_and(|f| hi >= f) {
                    // As in `next_back` (what reaches down to `ceil` is
                    // below everything the back has left).
                    return acc;
                }
                floor = Some(lo);
            }
            f(acc, lo, hi, nn)
        };
        self.raw.rfold_entries::<B>(init, g)
    }
}

/// Iterator over entries with mutable values; see [`MapleTree::iter_mut`].
pub struct IterMut<'a, V: HandleMut, K: Key = u64> {
    pub(crate) entries: Entries<'a, false>,
    /// The tree stays borrowed mutably: nothing else reads or changes it.
    pub(crate) _tree: PhantomData<&'a mut MapleTree<V, K>>,
}

impl<V: HandleMut, K: Key> fmt::Debug for IterMut<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IterMut").finish_non_exhaustive()
    }
}

impl<'a, V: HandleMut + 'a, K: Key> Iterator for IterMut<'a, V, K> {
    type Item = (RangeInclusive<K>, &'a mut V::Target);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next()?;
        // SAFETY: `Entries` yields each value slot once, each slot holds
        // its own handle (a value is never stored in two slots), the tree is
        // borrowed mutably for `'a` so nothing else reaches its values, and
        // the handle stays alive while it is.
        Some((key::span(lo, hi), unsafe { V::borrow_mut(nn) }))
    }

    /// The last entry, found from the back.
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.fold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: each value slot once, of a tree borrowed
            // mutably for 'a.
            f(acc, (key::span(lo, hi), unsafe { V::borrow_mut(nn) }))
        })
    }
}

impl<'a, V: HandleMut + 'a, K: Key> DoubleEndedIterator for IterMut<'a, V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next_back()?;
        // SAFETY: as in `next`: the two ends never hand out the same slot
        // (`Entries`), so each value slot comes once.
        Some((key::span(lo, hi), unsafe { V::borrow_mut(nn) }))
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.rfold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next_back`: each value slot once, of a tree
            // borrowed mutably for 'a.
            f(acc, (key::span(lo, hi), unsafe { V::borrow_mut(nn) }))
        })
    }
}

impl<'a, V: HandleMut + 'a, K: Key> core::iter::FusedIterator for IterMut<'a, V, K> {}

/// [`MapleTree::values_mut`]: [`IterMut`]'s values, whose `fold` reads
/// whole leaves without their bounds.
struct ValuesMut<'a, V: HandleMut, K: Key> {
    inner: IterMut<'a, V, K>,
}

impl<'a, V: HandleMut + 'a, K: Key> Iterator for ValuesMut<'a, V, K> {
    type Item = &'a mut V::Target;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(_, v)| v)
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.inner.entries.raw.fold_values(init, |acc, nn| {
            // SAFETY: as in `IterMut::next`: each value slot once, of a
            // tree borrowed mutably for 'a.
            f(acc, unsafe { V::borrow_mut(nn) })
        })
    }
}

impl<'a, V: HandleMut + 'a, K: Key> DoubleEndedIterator for ValuesMut<'a, V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(_, v)| v)
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(self, init: B, mut f: F) -> B {
        self.inner.rfold(init, |acc, (_, v)| f(acc, v))
    }
}

impl<'a, V: HandleMut + 'a, K: Key> core::iter::FusedIterator for ValuesMut<'a, V, K> {}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// Iterates over all entries in ascending order.
    ///
    /// Consumers that take the whole iterator at once (`sum`, `for_each`,
    /// `fold`, `count`, `max`, …) run on its `fold`, which reads each leaf
    /// in one pass: fewer instructions per entry than a `for` loop, which
    /// steps with `next`.
    ///
    /// ```
    /// use maple_tree::{MapleTree, U63};
    ///
    /// let t: MapleTree<U63> = (0..100u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    /// let total: u64 = t.iter().map(|(_, v)| v.get()).sum();
    /// assert_eq!(total, (0..100).sum());
    /// ```
    pub fn iter(&self) -> Iter<'_, V, K> {
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
    pub fn range(&self, range: impl RangeBounds<K>) -> Iter<'_, V, K> {
        let (first, last, done) = iter_bounds(key::inclusive(&range));
        // No walk yet: each end walks on its first call.
        // SAFETY: the iterator borrows `self` for its lifetime: the tree
        // stays alive and unchanged meanwhile.
        let raw = unsafe { RawIter::lazy(&self.raw, first, last, done) };
        // SAFETY: as above: nothing changes the tree while it is borrowed.
        Iter { _tree: PhantomData, entries: unsafe { Entries::new(raw) } }
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
    pub fn range_cloned(&self, range: impl RangeBounds<K>) -> RangeCloned<'_, V, K>
    where
        V: Clone,
    {
        RangeCloned { inner: self.range(range) }
    }

    /// All entries as raw words.
    pub(crate) fn raw_entries(&self) -> impl Iterator<Item = (u64, u64, NonNull<()>)> + '_ {
        // SAFETY: the closure borrows `self`, so the tree stays alive and
        // unchanged while the iterator lives.
        let mut raw = unsafe { RawIter::<false>::lazy(&self.raw, 0, u64::MAX, false) };
        core::iter::from_fn(move || raw.next_entry())
    }
}

/// Entry-by-entry walk shared by the iterators: a front end that reads its
/// leaf in place, slot by slot from the lowest, and a back end ([`Back`])
/// that does the same from the highest, each keeping where it stands in
/// its leaf. (An end that steps on while the other has not walked reads
/// each further leaf whole into [`LeafCopy`] instead: see `copy`.)
///
/// The ends meet by index, not by node: the front hands out only slots
/// that start at or before `last`, which the back lowers below each entry
/// it hands out, and the back only slots that end at or after `lo`, where
/// the front's next slot starts. So each slot comes from one end at most,
/// whether or not the two stand on the same leaf, or (the concurrent
/// tree's) on two versions of one. Where an index would leave `u64`
/// (the back hands out the entry at 0, the front passes the tree's last
/// index), the end doing it stops the other outright.
///
/// `SHARED` is the concurrent tree's: without it the tree does not change
/// while the iterator lives ([`lazy`](Self::lazy)'s contract), and the
/// copies read a leaf's slots by plain loads, sixteen at a time
/// ([`value_mask`]); with it, one atomic load each.
pub(crate) struct RawIter<'t, const SHARED: bool> {
    walk: LeafWalk<'t>,
    /// The front's leaf while it has slots left there for the front: none
    /// before its first walk, between leaves, and once it has stopped.
    leaf: Option<LeafRef<'t>>,
    /// The next slot of `leaf` the front looks at.
    off: usize,
    /// The leaf the front has stepped onto while the back has not walked,
    /// read whole: a scan forwards alone hands out its entries from here,
    /// by the mask's lowest bit, with no branch per slot and no check per
    /// entry (nothing lowers `last` meanwhile). The back's first walk
    /// turns it back into a position in the leaf (`leaf`, `off`, `lo`).
    /// Or, the other way round, the leaf the back has stepped onto while
    /// the front has not walked (see [`Back::mask`]): the two never hold
    /// a copy at once, since each copies only while the other has not
    /// walked.
    copy: LeafCopy,
    /// The slots of `copy` not yet handed out that hold values and start
    /// at or before `last`, one bit each; empty while the front reads a
    /// leaf in place.
    mask: u32,
    /// Where the front's next slot starts (past its leaf's end between
    /// leaves): the back hands out only slots ending at or after it (and
    /// the first index). Before the front walks, the first index. Not kept
    /// while the front reads a copy: the back's first walk sets it
    /// (`uncopy`) before it reads it.
    lo: u64,
    /// The front's leaf's maximum.
    max: u64,
    /// The front hands out only slots starting at or before it: the
    /// iterator's last index, lowered below each entry the back hands out.
    last: u64,
    /// Where the front's walk starts: the iterator's first index.
    first: u64,
    /// The root the ends walk from first, while the front has not walked
    /// (see [`lazy`](Self::lazy)); the front's walk keeps it afterwards.
    pending: Option<NodeRef<'t>>,
    /// The front hands out nothing more: it has reached `last`, or the
    /// back has reached it.
    stopped: bool,
    back: Back<'t>,
}

/// A copy of one leaf's bounds and slot words, read in one pass, from
/// which the front hands out entries by slot number without reading the
/// node again and without a branch on where the slot lies (first, last,
/// inner) or on which slots hold values (the mask says).
///
/// Reading a leaf at once is also what readers of the concurrent tree
/// want: a leaf they can reach changes in place only by single-word slot
/// stores, and the words read stay alive while their guard does.
#[derive(Clone, Copy)]
pub(crate) struct LeafCopy {
    /// Slot `i` starts at `bound[i] + 1` (wrapping: `bound[0]` is the
    /// leaf's minimum less one) and ends at `bound[i + 1]`, capped at
    /// `max` (the last slot's pivot is unused, `u64::MAX`, or absent,
    /// `bound[16]`).
    ///
    /// `bound` and `words` are all set by every [`load`](Self::load) and
    /// read only for the slots it reported: a copy is made without zeroing
    /// them (264 bytes, a noticeable part of a short query).
    bound: [MaybeUninit<u64>; RANGE64_SLOTS + 1],
    /// The slot words.
    words: [MaybeUninit<*mut ()>; RANGE64_SLOTS],
    /// The leaf's maximum.
    max: u64,
}

impl LeafCopy {
    /// A copy of no leaf yet.
    #[inline(always)]
    const fn new() -> LeafCopy {
        LeafCopy {
            // (Inline consts: a repeated `uninit()` value compiles to a
            // memset of the arrays.)
            bound: [const { MaybeUninit::uninit() }; RANGE64_SLOTS + 1],
            words: [const { MaybeUninit::uninit() }; RANGE64_SLOTS],
            max: 0,
        }
    }

    /// Reads `leaf`, which spans `min..=max`, and returns the mask of its
    /// slots that hold values, one bit each.
    ///
    /// # Safety
    ///
    /// `leaf` is live, changed at most by the single-word slot stores
    /// readers may meet, and without `SHARED` not at all while the copy is
    /// read (a plain tree's, borrowed meanwhile).
    #[inline(always)]
    unsafe fn load<const SHARED: bool>(&mut self, leaf: LeafRef<'_>, min: u64, max: u64) -> u32 {
        let (piv, slots) = (leaf.pivots(), leaf.slots());
        self.bound[0] = MaybeUninit::new(min.wrapping_sub(1));
        // SAFETY: a leaf's pivots never change while it is reachable (the
        // writes readers may meet in place are single slot stores), and
        // this one is (the contract), so plain reads race with nothing.
        // One block copy, cheaper than fifteen atomic loads.
        unsafe { load_words(piv, &mut self.bound[1..RANGE64_SLOTS]) };
        self.bound[RANGE64_SLOTS] = MaybeUninit::new(PIVOT_UNUSED);
        self.max = max;
        // Unused slots are null, so only used slots can be in the mask.
        if !SHARED {
            // SAFETY: nothing changes the leaf meanwhile (the contract),
            // so plain loads race with nothing.
            // (The words are copied as pointers, which keeps their
            // provenance; the mask reads them again as integers.)
            return unsafe {
                load_ptrs(slots, &mut self.words);
                value_mask(leaf_arrays(&leaf).1)
            };
        }
        let mut mask = 0u32;
        for (i, (w, s)) in self.words.iter_mut().zip(slots).enumerate() {
            let v = s.load(Ordering::Acquire);
            *w = MaybeUninit::new(v);
            mask |= u32::from(is_value_word(v)) << i;
        }
        mask
    }

    /// Slot `i` of the leaf read: its bounds and word.
    ///
    /// # Safety
    ///
    /// `i` is in the mask the last [`load`](Self::load) returned: a leaf
    /// has been read, and slot `i` held a value.
    #[inline(always)]
    unsafe fn entry(&self, i: usize) -> (u64, u64, NonNull<()>) {
        let i = i & 15;
        // SAFETY: a read set all of `bound` and `words`; `i < 16`, so
        // `i + 1 <= 16`.
        let (lo, hi, w) = unsafe {
            (
                self.bound[i].assume_init().wrapping_add(1),
                self.bound[i + 1].assume_init().min(self.max),
                self.words[i].assume_init(),
            )
        };
        // SAFETY: slot `i` held a value (the contract), and value words
        // are non-null.
        (lo, hi, unsafe { NonNull::new_unchecked(w) })
    }
}

/// The lowest slot in a copy's non-empty value mask (the front's next).
#[inline(always)]
fn lowest_slot(mask: u32) -> usize {
    mask.trailing_zeros() as usize & 15
}

/// The highest slot in a copy's non-empty value mask (the back's next).
#[inline(always)]
fn highest_slot(mask: u32) -> usize {
    (31 - mask.leading_zeros()) as usize & 15
}

/// How many leaves ahead iteration prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Where an iterator over `range` starts and ends, and whether it is empty
/// from the start (an invalid range yields nothing).
#[inline]
pub(crate) fn iter_bounds(bounds: Bounds) -> (u64, u64, bool) {
    match bounds {
        Ok((first, last)) => (first, last, false),
        Err(_) => (0, 0, true),
    }
}

/// A leaf's pivots and slots as fixed-size arrays (the offsets a scan
/// uses are then checked at compile time or not at all).
#[inline(always)]
fn leaf_arrays<'a>(leaf: &'a LeafRef<'_>) -> (&'a [AtomicU64; RANGE64_SLOTS - 1], &'a [AtomicPtr<()>; RANGE64_SLOTS]) {
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    (piv.try_into().expect("a leaf has fifteen pivots"), slots.try_into().expect("a leaf has sixteen slots"))
}

/// `(lo, hi, w)` if `w` is a value word.
#[inline(always)]
fn value_entry(lo: u64, hi: u64, w: *mut ()) -> Option<(u64, u64, NonNull<()>)> {
    // (A value word is non-null.)
    if is_value_word(w) {
        NonNull::new(w).map(|nn| (lo, hi, nn))
    } else {
        None
    }
}

impl<'t, const SHARED: bool> RawIter<'t, SHARED> {
    /// An iterator over `first..=last` of `tree` (nothing if `done`) whose
    /// ends walk on their first calls, not here: what is made and never
    /// stepped forwards (`range(..=k).next_back()`, the entry at or
    /// before `k`; `.rev()`) walks only from the back, and making one
    /// costs no walk.
    ///
    /// # Safety
    ///
    /// Every node reachable from `tree`'s root now stays alive while the
    /// iterator lives, changed at most by the single-word slot stores
    /// readers may meet (the concurrent tree read under a guard that
    /// outlives the iterator); without `SHARED`, not changed at all (a
    /// plain tree borrowed for as long), so that the ends may read its
    /// leaves by plain loads. The root recorded here is walked from later,
    /// by the iterator's safe methods.
    #[inline]
    pub(crate) unsafe fn lazy(tree: &'t RawTree, first: u64, last: u64, done: bool) -> RawIter<'t, SHARED> {
        let pending = if done { None } else { tree.root_node() };
        // One literal (no local changed, then moved): the iterator's path
        // is 1.2 KiB, and each move of it a copy of all of that.
        RawIter {
            walk: LeafWalk { path: Path::new() },
            leaf: None,
            off: 0,
            copy: LeafCopy::new(),
            mask: 0,
            lo: first,
            max: 0,
            last,
            first,
            stopped: pending.is_none(),
            pending,
            back: Back::new(),
        }
    }

    /// Asks for the [`PREFETCH_AHEAD`] leaves after the one the walk has
    /// just reached under a parent (its first walk, or a step to a cousin
    /// leaf): one leaf's scan is much shorter than a miss to memory. The
    /// steps to a sibling after it ask for one more each
    /// ([`step_to_sibling`](Self::step_to_sibling)). Only in trees of
    /// [`PREFETCH_HEIGHT`] levels or more.
    #[inline(always)]
    fn prefetch_ahead(&self) {
        let path = &self.walk.path;
        if path.len() < PREFETCH_HEIGHT {
            // A smaller tree stays in the cache, as lookups assume.
            return;
        }
        let p = &path[path.len() - 2];
        if p.node.has_next(p.off) {
            // SAFETY: a live internal node (`lazy`'s contract), and
            // `p.off + 1` is after a used slot.
            unsafe { prefetch_from(p.node, p.off + 1) };
        }
    }

    /// Stands the front on the walk's leaf, at slot `off` (starting at
    /// `lo`).
    #[inline(always)]
    fn enter(&mut self, lv: Level<'t>, off: usize, lo: u64) {
        self.leaf = Some(lv.leaf());
        (self.off, self.lo, self.max) = (off, lo, lv.max);
    }

    /// The front's next entry in its leaf: from the copy while it has one
    /// (`mask`), else read in place, the slots from `off` up, until a value
    /// or the slot reaching `last` or the leaf's end. `None` when the leaf
    /// has none left for the front (`leaf` is then none).
    ///
    /// Slot `off` is always the front's to hand out: the back lowers
    /// `last` below each entry it hands out, and stops the front when it
    /// hands out the slot where the front stands.
    #[inline(always)]
    fn take(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.mask != 0 {
            return Some(self.take_copied());
        }
        let leaf = self.leaf?;
        let (mut i, mut lo, max) = (self.off, self.lo, self.max);
        let lim = self.last.min(max);
        let (piv, slots) = leaf_arrays(&leaf);
        // Slots before the last end at their pivots: a slot's pivot at or
        // above `lim` ends what the front wants of this leaf (the leaf's
        // last used slot has its pivot at `max` or unused, `u64::MAX`, so
        // the unused slots after it are never read).
        while i < RANGE64_SLOTS - 1 {
            // (The leaf is alive, `lazy`'s contract, and its pivots do not
            // change while a reader can reach it.)
            let w = slots[i].load(Ordering::Acquire);
            let p = piv[i].load(Ordering::Relaxed);
            i += 1;
            if p >= lim {
                return self.leave_leaf(lo, p, w);
            }
            if is_value_word(w) {
                (self.off, self.lo) = (i, p + 1);
                // SAFETY: a value word is non-null.
                return Some((lo, p, unsafe { NonNull::new_unchecked(w) }));
            }
            lo = p + 1;
        }
        // The last slot, which ends at the leaf's maximum.
        self.leave_leaf(lo, max, slots[RANGE64_SLOTS - 1].load(Ordering::Acquire))
    }

    /// The lowest entry left in the front's copy of its leaf (the mask is
    /// not empty).
    #[inline(always)]
    fn take_copied(&mut self) -> (u64, u64, NonNull<()>) {
        let i = lowest_slot(self.mask);
        self.mask &= self.mask - 1;
        // SAFETY: `i` was in the mask: a value slot of the leaf read.
        unsafe { self.copy.entry(i) }
    }

    /// Stands the front on the leaf `lv` it has stepped onto, from its
    /// first slot: read whole into the copy (`COPY`, for `next`, while the
    /// back has not walked), or in place.
    #[inline(always)]
    fn enter_stepped<const COPY: bool>(&mut self, lv: Level<'t>) {
        if COPY && !self.back.walked {
            // SAFETY: the walk's leaf, alive, and unchanged without
            // `SHARED` (`lazy`'s contract).
            let mut mask = unsafe { self.copy.load::<SHARED>(lv.leaf(), lv.min, lv.max) };
            if lv.max > self.last {
                // Up to the slot reaching `last` (the leaf's last at the
                // latest).
                mask &= u32::MAX >> (31 - (lv.node.find(self.last) & 15));
            }
            // (`off` past the slots: the front's leaf is the copy.)
            (self.mask, self.leaf, self.off, self.max) = (mask, None, RANGE64_SLOTS, lv.max);
        } else {
            self.enter(lv, 0, lv.min);
        }
    }

    /// Turns the front's copy of its leaf into a position in it (or past
    /// it), for the back's first walk: from then on `last` may fall, and
    /// the front reads in place. False if the front has handed out the
    /// tree's last entry: nothing is left for the back.
    #[cold]
    fn uncopy(&mut self) -> bool {
        if self.off != RANGE64_SLOTS {
            return true;
        }
        self.off = 0;
        if self.mask != 0 {
            let i = lowest_slot(self.mask);
            // SAFETY: `i` was in the mask: a value slot of the leaf read.
            let (lo, _, _) = unsafe { self.copy.entry(i) };
            let Some(&lv) = self.walk.path.last() else { return false };
            (self.mask, self.leaf, self.off, self.lo) = (0, Some(lv.leaf()), i, lo);
            return true;
        }
        // Spent: every value of the leaf up to `last` has been handed out.
        self.lo = self.max.wrapping_add(1);
        self.max != u64::MAX
    }

    /// The front's last slot of its leaf, from `lo` to `p` (capped at the
    /// leaf's maximum), holding `w`: the front has nothing left there.
    #[inline(always)]
    fn leave_leaf(&mut self, lo: u64, p: u64, w: *mut ()) -> Option<(u64, u64, NonNull<()>)> {
        let hi = p.min(self.max);
        self.leaf = None;
        self.lo = hi.wrapping_add(1);
        if hi == u64::MAX {
            // The front has passed the tree's last index: nothing is left
            // for the back (whose bound, `lo`, would wrap).
            self.back.stop();
        }
        value_entry(lo, hi, w)
    }

    /// The next non-empty slot that starts at or before `last` (the walk
    /// starts in the slot holding the first index, at or before `last`).
    #[inline(always)]
    pub(crate) fn next_entry(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        loop {
            if let Some(entry) = self.take() {
                return Some(entry);
            }
            if !self.step_front::<true>() {
                return None;
            }
        }
    }

    /// Moves the front to the next leaf it reads (the first: walks from
    /// the root `lazy` recorded); false if there is none: the front has
    /// reached `last` (what it has not handed out, the back has), or the
    /// back stopped it. Out of line: once per leaf.
    #[inline(never)]
    fn step_front<const COPY: bool>(&mut self) -> bool {
        if self.pending.is_some() || self.stopped {
            return self.walk_front();
        }
        if self.max >= self.last {
            self.finish();
            return false;
        }
        // The common case: the next leaf is a sibling, reached through the
        // parent's arrays.
        if let Some(lv) = self.step_to_sibling() {
            self.enter_stepped::<COPY>(lv);
            return true;
        }
        self.step_front_far::<COPY>()
    }

    /// Moves the walk to the next leaf under the same parent and returns
    /// it, asking for the one [`PREFETCH_AHEAD`] on; `None` (unmoved) at
    /// the parent's last child, or where the walk has no parent. The step
    /// is `LeafWalk::step_to_sibling`'s, written here again so that the
    /// prefetch reuses the parent's arrays and the bounds come from the
    /// leaf before: that step followed by a prefetch of its own costs a
    /// `for` loop about twenty instructions more a leaf.
    #[inline(always)]
    fn step_to_sibling(&mut self) -> Option<Level<'t>> {
        let (leaf, up) = self.walk.path.split_last_mut()?;
        let d = up.len().checked_sub(1)?;
        let p = &mut up[d];
        let kids = Children::of(&p.node);
        if !kids.has_next(p.off) {
            return None;
        }
        let k = p.off + 1;
        // SAFETY: slot `k` is used (the one before has a successor), and
        // the walk's nodes stay alive (`lazy`'s contract).
        let node = unsafe { kids.child(k) };
        p.off = k;
        let max = kids.piv.get(k).map_or(p.max, |x| x.load(Ordering::Relaxed).min(p.max));
        // (The leaf has a sibling after it: it does not end the key space.)
        *leaf = Level { node, min: leaf.max + 1, max, off: 0 };
        let lv = *leaf;
        // (A smaller tree stays in the cache, as lookups assume.)
        if d + 2 >= PREFETCH_HEIGHT {
            if kids.has_next(k + PREFETCH_AHEAD - 1) {
                // SAFETY: as above, for the slot that far on.
                unsafe { kids.child(k + PREFETCH_AHEAD) }.prefetch();
            } else {
                prefetch_cousin(&self.walk.path, d, k + PREFETCH_AHEAD);
            }
        }
        Some(lv)
    }

    /// [`step_front`](Self::step_front)'s first walk, from the root `lazy`
    /// recorded, unless the front has stopped.
    #[cold]
    #[inline(never)]
    fn walk_front(&mut self) -> bool {
        if self.stopped {
            return false;
        }
        if self.back.walked {
            self.uncopy_back();
        }
        let Some(root) = self.pending.take() else { return false };
        // SAFETY: the root `lazy` recorded, whose nodes stay alive while
        // the iterator lives (`lazy`'s contract).
        unsafe { descend::<false>(root, self.first, &mut self.walk.path) };
        let Some(&lv) = self.walk.path.last() else { return false };
        self.prefetch_ahead();
        self.enter(lv, lv.off, lv.node.slot_min(lv.off, lv.min));
        true
    }

    /// [`step_front`](Self::step_front) to a leaf under another parent.
    #[inline(never)]
    fn step_front_far<const COPY: bool>(&mut self) -> bool {
        if !self.walk.next_leaf() {
            self.finish();
            return false;
        }
        self.prefetch_ahead();
        let Some(&lv) = self.walk.path.last() else { return false };
        self.enter_stepped::<COPY>(lv);
        true
    }

    /// Folds `f` over the entries left from the front, leaf by leaf: what
    /// its leaf still holds, then each further leaf's slots straight from
    /// its arrays, with no call per entry back into the iterator (what
    /// `Iterator::fold`, hence `sum`, `for_each`, `count` and friends, run
    /// on). The leaves the range wants whole go through
    /// [`LeafWalk::fold_whole`] and [`scan_whole`]; with `BOUNDS` false
    /// their slots' bounds are not read (`f` gets `0, 0`). Leaves the
    /// iterator spent.
    #[inline]
    pub(crate) fn fold_entries<const BOUNDS: bool, B>(
        &mut self,
        init: B,
        mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B,
    ) -> B {
        let mut acc = init;
        if !self.stopped && self.pending.is_some() {
            if self.back.walked {
                self.uncopy_back();
            }
            if let Some(root) = self.pending.take() {
                // A front that has not walked (a fresh iterator: `sum` over
                // a range) walks here and scans its first leaf below, with
                // no call out.
                // SAFETY: the root `lazy` recorded, whose nodes stay alive
                // while the iterator lives (`lazy`'s contract).
                unsafe { descend::<false>(root, self.first, &mut self.walk.path) };
                if let Some(&lv) = self.walk.path.last() {
                    self.prefetch_ahead();
                    (self.leaf, self.off, self.max) = (Some(lv.leaf()), lv.off, lv.max);
                }
            }
        }
        loop {
            // What the front's copy of its leaf has left (`next` was
            // called before).
            while self.mask != 0 {
                let (lo, hi, nn) = self.take_copied();
                acc = f(acc, lo, hi, nn);
            }
            if self.leaf.take().is_some() {
                let Some(&lv) = self.walk.path.last() else { break };
                let end;
                if self.off == 0 && lv.max <= self.last {
                    // The range wants the leaf whole, and maybe some of
                    // its later siblings.
                    (acc, end) = self.walk.fold_whole(self.last, acc, |acc, leaf, min, max| {
                        // SAFETY: a leaf of the walk, whose pivots nothing
                        // writes (`lazy`'s contract).
                        unsafe {
                            scan_whole::<BOUNDS, false, B>(leaf, min, max, acc, &mut |acc, _, lo, hi, nn| {
                                f(acc, lo, hi, nn)
                            })
                        }
                    });
                    // Past the last leaf folded (the walk stands on it).
                    self.max = self.walk.path.last().map_or(u64::MAX, |l| l.max);
                } else {
                    // What the leaf has left, scanned in place (the
                    // iterator ends spent: its position is not kept).
                    (acc, end) = scan_leaf(Level { off: self.off, ..lv }, self.last, acc, |acc, lo, hi, w| {
                        match value_entry(lo, hi, w) {
                            Some((lo, hi, nn)) => f(acc, lo, hi, nn),
                            None => acc,
                        }
                    });
                }
                if end {
                    break;
                }
            }
            if !self.step_front::<false>() {
                break;
            }
        }
        self.finish();
        acc
    }

    /// [`fold_entries`](Self::fold_entries) for the values alone, with no
    /// bounds read where a leaf is wanted whole.
    #[inline]
    pub(crate) fn fold_values<B>(&mut self, init: B, mut f: impl FnMut(B, NonNull<()>) -> B) -> B {
        self.fold_entries::<false, B>(init, |acc, _, _, nn| f(acc, nn))
    }

    /// The back end's fold (what `DoubleEndedIterator::rfold`, hence
    /// `.rev()` with `sum`, `for_each`, `fold` and friends, runs on):
    /// entry by entry where the ends may meet or the range cuts a leaf,
    /// and every leaf before the back's under the same parent that lies
    /// wholly after the front's bound straight from its arrays, highest
    /// slot first, with no call per entry back into the iterator.
    #[inline]
    pub(crate) fn rfold_entries<B>(&mut self, init: B, mut f: impl FnMut(B, u64, u64, NonNull<()>) -> B) -> B {
        let mut acc = init;
        loop {
            while self.back.mask != 0 {
                let (lo, hi, nn) = self.take_back_copied();
                acc = f(acc, lo, hi, nn);
            }
            while let Some((lo, hi, nn)) = self.take_back() {
                acc = f(acc, lo, hi, nn);
            }
            // (The front does not move meanwhile.)
            let bound = self.lo.max(self.first);
            let scan = |acc, leaf, min, max| {
                // SAFETY: a leaf of the back's, whose pivots nothing writes
                // (`lazy`'s contract).
                unsafe {
                    scan_whole::<true, true, B>(leaf, min, max, acc, &mut |acc, _, lo, hi, nn| f(acc, lo, hi, nn))
                }
            };
            // SAFETY: `lazy`'s contract keeps the back's nodes alive.
            let (a, spent) = unsafe { self.back.fold_before(bound, acc, scan) };
            acc = a;
            if let Some(min) = spent {
                // As `take_back` leaves it after the leaf's lowest slot
                // (`min` lies above the front's bound: it is not 0).
                self.last = min - 1;
            }
            match self.next_back_slow() {
                Some((lo, hi, nn)) => acc = f(acc, lo, hi, nn),
                None => return acc,
            }
        }
    }

    /// Hands out nothing more, from either end.
    pub(crate) fn finish(&mut self) {
        self.stop_front();
        self.back.stop();
    }

    /// Known to hand out nothing more (both ends have stopped).
    pub(crate) fn is_done(&self) -> bool {
        self.stopped && self.back.walked && self.back.node.is_none()
    }

    /// Stops the front for good.
    #[inline(always)]
    fn stop_front(&mut self) {
        (self.leaf, self.mask, self.pending, self.stopped) = (None, 0, None, true);
    }

    /// The back's next entry in its leaf, read in place: the slots below
    /// `back.off` down, until a value or the slot reaching the front's
    /// bound `lo` or the leaf's first. `None` when the leaf has none left
    /// for the back (`back.off` is then 0).
    #[inline(always)]
    fn take_back(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        let b = &mut self.back;
        let (mut j, mut hi) = (b.off, b.hi);
        let bound = self.lo.max(self.first);
        let leaf = b.node?;
        if j == 0 || hi < bound {
            // (`hi < bound`: the front has handed out the rest.)
            b.off = 0;
            return None;
        }
        let (piv, slots) = leaf_arrays(&leaf);
        while j > 1 {
            j -= 1;
            let w = slots[j].load(Ordering::Acquire);
            // Slot `j` starts after the pivot before it.
            let p = piv[j - 1].load(Ordering::Relaxed);
            if p < bound {
                // The slot before ends before the front's bound: nothing
                // below this slot is the back's, and this one is where the
                // front stands (or, before it walks, the one holding the
                // first index): nothing is left for either end.
                self.finish();
                return value_entry(p + 1, hi, w);
            }
            if is_value_word(w) {
                // (A used slot's predecessor ends below the leaf's end.)
                (b.off, b.hi, self.last) = (j, p, p);
                // SAFETY: a value word is non-null.
                return Some((p + 1, hi, unsafe { NonNull::new_unchecked(w) }));
            }
            // (The pivots of unused slots, at the leaf's end, are unused:
            // `u64::MAX`.)
            hi = p.min(b.max);
        }
        // The first slot, which starts at the leaf's minimum.
        b.off = 0;
        let min = b.min;
        let e = value_entry(min, hi, slots[0].load(Ordering::Acquire));
        if min <= bound {
            // As above (and the entry at 0: `last` would wrap).
            self.finish();
        } else if e.is_some() {
            self.last = min - 1;
        }
        e
    }

    /// The highest entry left in the back's copy of its leaf (its mask is
    /// not empty).
    #[inline(always)]
    fn take_back_copied(&mut self) -> (u64, u64, NonNull<()>) {
        let i = highest_slot(self.back.mask);
        self.back.mask ^= 1 << i;
        // SAFETY: `i` was in the mask: a value slot of the leaf read.
        unsafe { self.copy.entry(i) }
    }

    /// Reads the leaf the back has stepped onto whole into the copy, while
    /// the front has not walked and the range wants the whole leaf: a scan
    /// backwards alone then hands out its entries by the mask's highest
    /// bit, with no branch per slot and no check per entry (the front's
    /// bound stays at the first index, below the leaf, and `last`, which
    /// nothing reads meanwhile, is set when the front walks: see
    /// [`uncopy_back`](Self::uncopy_back)). Out of line: the short
    /// queries that step back without it keep their walk's registers.
    #[inline(never)]
    fn copy_back(&mut self) {
        let b = &mut self.back;
        let Some(leaf) = b.node else { return };
        // SAFETY: the back's leaf, alive, and unchanged without `SHARED`
        // (`lazy`'s contract).
        b.mask = unsafe { self.copy.load::<SHARED>(leaf, b.min, b.max) };
        (b.off, b.copied) = (0, true);
    }

    /// Turns the back's copy of its leaf into a position in it, for the
    /// front's first walk: sets `last` below what the back has handed out
    /// (not kept while it reads copies), and stops both ends if the back
    /// has handed out everything.
    #[cold]
    #[inline(never)]
    fn uncopy_back(&mut self) {
        let b = &mut self.back;
        if b.mask != 0 {
            let i = highest_slot(b.mask);
            // SAFETY: `i` is in the mask: a value slot of the leaf read.
            let (_, hi, _) = unsafe { self.copy.entry(i) };
            // Slot `i` is the back's highest left: the front may hand out
            // what starts at or before its end.
            (b.mask, b.off, b.hi, self.last) = (0, i + 1, hi, hi);
        } else if b.node.is_some() && b.off == 0 {
            // The back's leaf is spent (a copy or in place): everything in
            // it from the first index up has been handed out.
            if b.min <= self.first {
                self.finish();
            } else {
                self.last = b.min - 1;
            }
        }
    }

    /// The entry before the last one the back end handed out (at first,
    /// the entry reaching `last`), unless the front has handed it out
    /// already: the back half of a double-ended iterator (see [`Back`]).
    ///
    /// With the concurrent tree, a writer may replace leaves between the
    /// two ends' walks, so that the back can stand on another version of
    /// the front's leaf: the ends meet by index all the same, so entries
    /// present the whole time come once; entries written meanwhile may
    /// come in their old form or their new one, or not at all.
    #[inline(always)]
    pub(crate) fn next_back_entry(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.back.mask != 0 {
            return Some(self.take_back_copied());
        }
        self.next_back_slow()
    }

    /// [`next_back_entry`](Self::next_back_entry) when the back does not
    /// read a copy: its leaf read in place, then the first walk and the
    /// steps back (onto a copy of the leaf, if the front has not walked
    /// and the range wants the leaf whole). Out of line: a scan backwards
    /// alone comes here once per leaf.
    #[inline(never)]
    fn next_back_slow(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.back.copied && self.pending.is_some() {
            // A scan backwards alone whose copy is spent: straight onto a
            // copy of the leaf before, if the range wants it whole.
            // SAFETY: `lazy`'s contract keeps the back's nodes alive.
            if unsafe { self.back.step_to_sibling::<true>(self.first) }.is_some() {
                self.copy_back();
                if self.back.mask != 0 {
                    return Some(self.take_back_copied());
                }
            }
        }
        loop {
            if let Some(entry) = self.take_back() {
                return Some(entry);
            }
            // While the front has not walked (`pending`), the back walks
            // from the root it will walk from.
            let root = match self.pending {
                Some(root) => root,
                None => self.walk.path.first()?.node,
            };
            if !self.back.walked {
                if !self.uncopy() {
                    self.finish();
                    return None;
                }
                // SAFETY: the root of the tree the iterator was made over,
                // whose nodes stay alive (`lazy`'s contract).
                unsafe { self.back.walk(root, self.last, true) };
            } else {
                // Its leaf has nothing left: the one before has, unless
                // the front's bound is in this leaf or before it.
                let min = self.back.node.map(|_| self.back.min)?;
                // SAFETY: as above.
                if min <= self.lo.max(self.first) || !unsafe { self.back.step_back(root) } {
                    // (What the back has not handed out, the front has.)
                    self.finish();
                    return None;
                }
                if self.pending.is_some() && self.back.min > self.first {
                    self.copy_back();
                    if self.back.mask != 0 {
                        return Some(self.take_back_copied());
                    }
                }
            }
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
fn prefetch_cousin(path: &Path<'_>, d: usize, k: usize) {
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
/// until the first `next_back`), and where it stands in the leaf. Three
/// levels, not a whole path, so that every iterator stays cheap to make
/// and move (a path is 1.2 KiB, and short range queries make and drop an
/// iterator each): a step back to a leaf under the parent before goes
/// through the grandparent, and only a step under another grandparent
/// walks from the root again.
#[derive(Clone)]
pub(crate) struct Back<'t> {
    /// The leaf: none before the first walk, or once the back has stopped.
    node: Option<LeafRef<'t>>,
    /// The leaf's bounds.
    min: u64,
    max: u64,
    /// The slots `0..off` of the leaf are left to look at.
    off: usize,
    /// Where slot `off - 1` ends.
    hi: u64,
    parent: Option<Level<'t>>,
    /// The parent's parent, in trees of three levels or more.
    grand: Option<Level<'t>>,
    /// A tree of [`PREFETCH_HEIGHT`] levels or more, where steps back ask
    /// for the leaves before (a smaller tree stays in the cache).
    tall: bool,
    /// The first walk asked only for the leaf before: the first step back
    /// asks for the leaves before that (see [`walk`](Self::walk)).
    ramp: bool,
    /// The back has walked (or stopped): it does not walk from the root
    /// again but to step back.
    walked: bool,
    /// The slots of the iterator's `copy` that hold values not yet handed
    /// out, one bit each, while the back reads a copy of its leaf (`off`
    /// is then 0; see [`RawIter::copy_back`]); else empty.
    mask: u32,
    /// The back's leaf was read into the copy (its entries come by
    /// `mask`, and once that is empty the leaf is spent).
    copied: bool,
}

impl<'t> Back<'t> {
    /// A back end that has not walked yet.
    #[inline]
    pub(crate) fn new() -> Back<'t> {
        Back {
            node: None,
            min: 0,
            max: 0,
            off: 0,
            hi: 0,
            parent: None,
            grand: None,
            tall: false,
            ramp: false,
            walked: false,
            mask: 0,
            copied: false,
        }
    }

    /// Hands out nothing more.
    #[inline(always)]
    fn stop(&mut self) {
        (self.node, self.parent, self.grand, self.off, self.walked, self.mask) = (None, None, None, 0, true, 0);
    }

    /// Stands on the leaf `lv`, with its slots `0..off` to look at, the
    /// last of them ending at `hi`.
    #[inline(always)]
    fn enter(&mut self, lv: Level<'t>, off: usize, hi: u64) {
        self.node = Some(lv.leaf());
        (self.min, self.max, self.off, self.hi, self.copied) = (lv.min, lv.max, off, hi, false);
    }

    /// Walks from `root` to the leaf holding `index` and stands there,
    /// with the slots up to the one holding `index` to look at.
    ///
    /// # Safety
    ///
    /// As for [`descend`]: `root` is the root of a tree whose nodes stay
    /// alive meanwhile.
    unsafe fn walk(&mut self, root: NodeRef<'t>, index: u64, first: bool) {
        let mut path = Path::new();
        // SAFETY: this function's contract.
        unsafe { descend::<false>(root, index, &mut path) };
        self.walked = true;
        let Some(&lv) = path.last() else { return self.stop() };
        let (_, hi) = lv.slot_range();
        self.enter(lv, lv.off + 1, hi);
        self.parent = path.len().checked_sub(2).map(|d| path[d]);
        self.grand = path.len().checked_sub(3).map(|d| path[d]);
        self.tall = path.len() >= PREFETCH_HEIGHT;
        if let Some(p) = self.parent {
            if first {
                // The first walk of a back end, often its only one (the
                // entry at or before an index, `range(..=k).next_back()`):
                // only the leaf before, where the next step back would go;
                // that step asks for the rest. Asking for more here slows
                // those one-entry queries and does not speed up `.rev()`.
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
    /// walk from `root`), with all its slots to look at; false at the
    /// tree's start.
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk).
    #[inline(always)]
    unsafe fn step_back(&mut self, root: NodeRef<'t>) -> bool {
        if self.node.is_none() {
            return false;
        }
        // SAFETY: this function's contract.
        if unsafe { self.step_to_sibling::<false>(0) }.is_some() {
            return true;
        }
        if self.min == 0 {
            return false;
        }
        // SAFETY: this function's contract.
        if unsafe { self.step_to_cousin() } {
            return true;
        }
        // SAFETY: this function's contract. The walk ends on the leaf
        // before, in its last slot (which ends at `min - 1`).
        unsafe { self.walk(root, self.min - 1, false) };
        true
    }

    /// Steps to the last leaf under the parent before this leaf's (the
    /// grandparent's slot before), with all its slots to look at; false
    /// (nothing changed) where there is no grandparent or the parent is its
    /// first child. What a walk from the root to the index before this
    /// leaf would find, without the walk.
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
        // All its slots, wherever its last used one is (`take_back`
        // passes the unused ones).
        self.enter(Level { node, min: lmin, max: lmax, off: 0 }, RANGE64_SLOTS, lmax);
        // Under a new parent: the leaves the next steps back reach, as a
        // walk onto it asks.
        // SAFETY: as above: a live internal node, `last` a used slot.
        unsafe { prefetch_before(parent, last) };
        true
    }

    /// Steps to the leaf before this one under the same parent, with all
    /// its slots to look at, and returns it; `None` (nothing changed) where
    /// the back's leaf has slots left to look at, the leaf is its parent's
    /// first, the back has not walked or has stopped, or, with `BOUNDED`,
    /// the leaf before starts at or below `above`.
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk): the back's nodes are alive.
    #[inline(always)]
    unsafe fn step_to_sibling<const BOUNDED: bool>(&mut self, above: u64) -> Option<Level<'t>> {
        if self.off != 0 {
            return None;
        }
        let p = self.parent?;
        let off = p.off.checked_sub(1)?;
        let kids = Children::of(&p.node);
        let min = slot_lo(kids.piv, off, p.min);
        if BOUNDED && min <= above {
            return None;
        }
        // SAFETY: a used slot (one before a used one) of a live internal
        // node (this function's contract) holds an encoded live child.
        let node = unsafe { kids.child(off) };
        if let Some(p) = self.parent.as_mut() {
            p.off = off;
        }
        // (The leaves under a parent tile its range: the one before ends
        // where this one starts, above the parent's minimum.)
        let max = self.min - 1;
        let lv = Level { node, min, max, off: 0 };
        // SAFETY: as above: a live internal node, `off` a used slot.
        unsafe { self.prefetch_on_step(p.node, &kids, off) };
        self.enter(lv, RANGE64_SLOTS, max);
        Some(lv)
    }

    /// Asks for the leaf [`PREFETCH_AHEAD`] before the one a step back has
    /// just reached, slot `off` of the back's parent `parent`, whose arrays
    /// are `kids` (on the first step after the first walk, the leaves up to
    /// that one: a walk onto a new parent asks for them all, and the first
    /// walk asked for the leaf before only). Only in trees of
    /// [`PREFETCH_HEIGHT`] levels or more: a smaller tree stays in the
    /// cache, as lookups assume.
    ///
    /// # Safety
    ///
    /// `parent` is a live internal node and `off` one of its used slots.
    #[inline(always)]
    unsafe fn prefetch_on_step(&mut self, parent: NodeRef<'t>, kids: &Children<'_>, off: usize) {
        if !self.tall {
        } else if core::mem::take(&mut self.ramp) {
            // SAFETY: this function's contract.
            unsafe { prefetch_before(parent, off) };
        } else if let Some(k) = off.checked_sub(PREFETCH_AHEAD) {
            // SAFETY: as above, for a slot further before (a used one).
            unsafe { kids.child(k) }.prefetch();
        } else if let Some(g) = self.grand {
            prefetch_cousin_before(g, PREFETCH_AHEAD - off);
        }
    }

    /// Folds `f(acc, leaf, min, max)` over the leaves before the back's
    /// under the same parent, highest first, while each starts above
    /// `above`: the leaves a scan backwards wants whole, taken straight
    /// from the parent's arrays, the back brought in step once after the
    /// loop. Leaves the back on the last leaf folded, spent, and returns
    /// that leaf's minimum (`None`, nothing changed, where
    /// [`step_to_sibling`](Self::step_to_sibling) would not step).
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk): the back's nodes are alive.
    #[inline(always)]
    unsafe fn fold_before<B>(
        &mut self,
        above: u64,
        mut acc: B,
        mut f: impl FnMut(B, LeafRef<'t>, u64, u64) -> B,
    ) -> (B, Option<u64>) {
        let (Some(p), 0) = (self.parent, self.off) else { return (acc, None) };
        let kids = Children::of(&p.node);
        // (The leaves under a parent tile its range: each one before ends
        // where the one after starts, above the parent's minimum.)
        let (mut off, mut max, mut last) = (p.off, self.min.wrapping_sub(1), None);
        while let Some(o) = off.checked_sub(1) {
            let min = slot_lo(kids.piv, o, p.min);
            if min <= above {
                break;
            }
            // SAFETY: a used slot (one before a used one) of a live
            // internal node (this function's contract) holds an encoded
            // live child, a leaf.
            let node = unsafe { kids.child(o) };
            // SAFETY: as above: a live internal node, `o` a used slot.
            unsafe { self.prefetch_on_step(p.node, &kids, o) };
            let leaf = node.as_leaf().expect("the children of a leaf's parent are leaves");
            acc = f(acc, leaf, min, max);
            (off, max, last) = (o, min - 1, Some(Level { node, min, max, off: 0 }));
        }
        let Some(lv) = last else { return (acc, None) };
        if let Some(p) = self.parent.as_mut() {
            p.off = off;
        }
        // Spent: no slot left to look at.
        self.enter(lv, 0, lv.min);
        (acc, Some(lv.min))
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
unsafe fn prefetch_before(parent: NodeRef<'_>, off: usize) {
    for k in off.saturating_sub(PREFETCH_AHEAD)..off {
        // SAFETY: this function's contract.
        unsafe { parent.child(k) }.prefetch();
    }
}

/// The slot before the one the level `l` stands on, with its bounds, or
/// `None` at its node's first slot.
#[inline(always)]
fn slot_before(l: &Level<'_>) -> Option<(usize, u64, u64)> {
    let off = l.off.checked_sub(1)?;
    let (min, max) = slot_bounds(l.node.arrays().0, off, l.min, l.max);
    Some((off, min, max))
}

/// Asks for the first [`PREFETCH_AHEAD`] leaves under the parent after the
/// one at `path[d]` (the next slot of its own parent, `path[d - 1]`): what
/// a scan of leaves wants next as it nears its parent's end. Nothing where
/// that parent is the grandparent's last child.
#[cold]
fn prefetch_next_parent(path: &Path<'_>, d: usize) {
    let Some(g) = d.checked_sub(1).map(|g| &path[g]) else { return };
    if !g.node.has_next(g.off) {
        return;
    }
    // SAFETY: `has_next` says the grandparent's next slot is used: it
    // holds a live child, the next parent.
    let next = unsafe { g.node.child(g.off + 1) };
    // SAFETY: as above: a live internal node, whose slot 0 is used.
    unsafe { prefetch_from(next, 0) };
}

/// Asks for the children of `parent` in the [`PREFETCH_AHEAD`] slots from
/// `from` on, up to its last used slot: the leaves the next steps forward
/// reach. The mirror of [`prefetch_before`].
///
/// # Safety
///
/// `parent` is a live internal node, and `from` its first slot or one
/// after a used slot (the slots it reaches are then used, while
/// `has_next` says so, and hold live children).
#[inline(always)]
unsafe fn prefetch_from(parent: NodeRef<'_>, from: usize) {
    for k in from..from + PREFETCH_AHEAD {
        if k > from && !parent.has_next(k - 1) {
            break;
        }
        // SAFETY: this function's contract: slot `from`, or one after a
        // used slot, of a live internal node.
        unsafe { parent.child(k) }.prefetch();
    }
}

/// Near the start of its parent, the leaf [`PREFETCH_AHEAD`] before the one
/// a backward walk stands on lies under the parent before: asks for it
/// there, the `back`-th child from that parent's end (its grandparent
/// level is `g`). The mirror of [`prefetch_cousin`].
#[cold]
fn prefetch_cousin_before(g: Level<'_>, back: usize) {
    let Some(off) = g.off.checked_sub(1) else { return };
    // SAFETY: the slot before a used one is used, and a live internal
    // node's used slots hold live children.
    let prev = unsafe { g.node.child(off) };
    if let Some(k) = prev.count().checked_sub(back) {
        // SAFETY: as above: `k` is below the parent's count.
        unsafe { prev.child(k) }.prefetch();
    }
}

impl<'t> LeafWalk<'t> {
    /// Folds `f(acc, leaf, min, max)` over the leaf the walk stands on and
    /// its later siblings under the same parent, in order, while they end
    /// at or before `last`: the leaves a range ending at `last` wants
    /// whole, taken straight from the parent's arrays, with no step of the
    /// walk per leaf. Leaves the walk on the last leaf folded and returns
    /// whether that leaf reached `last` or the tree's end. The walk's own
    /// leaf must end at or before `last`.
    #[inline(always)]
    pub(crate) fn fold_whole<B>(
        &mut self,
        last: u64,
        mut acc: B,
        mut f: impl FnMut(B, LeafRef<'t>, u64, u64) -> B,
    ) -> (B, bool) {
        let n = self.path.len();
        let Some(&lv) = self.path.last() else { return (acc, true) };
        acc = f(acc, lv.leaf(), lv.min, lv.max);
        let mut end = lv.max == last || lv.max == u64::MAX;
        let Some(d) = n.checked_sub(2) else { return (acc, end) };
        let p = self.path[d];
        let (piv, slots) = p.node.arrays();
        let count = p.node.count();
        // The walk is brought in step once, after the loop: `f` cannot
        // see it.
        let (mut k, mut cur, mut asked_next) = (p.off, lv, false);
        while !end && k + 1 < count {
            let (min, max) =
                (cur.max.wrapping_add(1), piv.get(k + 1).map_or(p.max, |x| x.load(Ordering::Relaxed).min(p.max)));
            if max > last {
                break;
            }
            k += 1;
            // SAFETY: slot `k` is below the count, so it holds a live
            // child: a leaf, one level above being leaves.
            let child = unsafe { NodeRef::decode(slots[k].load(Ordering::Acquire)) };
            if n < PREFETCH_HEIGHT {
                // (A smaller tree stays in the cache.)
            } else if k + PREFETCH_AHEAD < count {
                // SAFETY: as above.
                unsafe { p.node.child(k + PREFETCH_AHEAD) }.prefetch();
            } else if !asked_next {
                // The leaf that far on is under the next parent, where the
                // walk steps after the loop: its first leaves, once.
                asked_next = true;
                prefetch_next_parent(&self.path, d);
            }
            let leaf = child.as_leaf().expect("the children of a leaf's parent are leaves");
            acc = f(acc, leaf, min, max);
            cur = Level { node: child, min, max, off: 0 };
            end = max == last || max == u64::MAX;
        }
        self.path[d].off = k;
        self.path[n - 1] = cur;
        (acc, end)
    }
}

/// Calls `f(acc, slot, lo, hi, word)` for every value slot of `leaf`,
/// whose bounds are `min..=max`, in order (from the last slot down with
/// `REV`): all sixteen slots are read
/// (unused ones are null), with no count and no loop bound to check, and a
/// slot's bounds are read only when it holds a value and `BOUNDS` asks for
/// them (`0, 0` otherwise). Fully unrolled: the slot and pivot offsets are
/// constants. The pivots are read as plain loads, which the compiler drops
/// where `f` ignores the bounds.
///
/// # Safety
///
/// Nobody writes `leaf`'s pivots meanwhile, as for [`load_words`]: a leaf
/// of a plain tree borrowed meanwhile, or of the concurrent tree (whose
/// writer changes reachable leaves in place only by slot stores).
#[inline(always)]
pub(crate) unsafe fn scan_whole<const BOUNDS: bool, const REV: bool, B>(
    leaf: LeafRef<'_>,
    min: u64,
    max: u64,
    mut acc: B,
    f: &mut impl FnMut(B, usize, u64, u64, NonNull<()>) -> B,
) -> B {
    let (piv, slots) = leaf_arrays(&leaf);
    // SAFETY: nobody writes the pivots meanwhile (the contract).
    let piv = |i: usize| unsafe { read_word(&piv[i]) };
    // Slot `i` of the leaf, from `lo` to `hi`, if it holds a value. A used
    // slot after the first starts after its predecessor's pivot, which is
    // used (below `max`); one before the last ends at its pivot, unused
    // (`u64::MAX`) if it is the last used slot, so capped at `max`.
    macro_rules! slot {
        ($i:literal, $lo:expr, $hi:expr) => {{
            let w = slots[$i].load(Ordering::Acquire);
            if is_value_word(w) {
                let (lo, hi) = if BOUNDS { ($lo, $hi) } else { (0, 0) };
                // SAFETY: a value word is non-null.
                acc = f(acc, $i, lo, hi, unsafe { NonNull::new_unchecked(w) });
            }
        }};
        ($i:literal) => {
            slot!($i, piv($i - 1).wrapping_add(1), piv($i).min(max))
        };
    }
    if REV {
        slot!(15, piv(14).wrapping_add(1), max);
        slot!(14);
        slot!(13);
        slot!(12);
        slot!(11);
        slot!(10);
        slot!(9);
        slot!(8);
        slot!(7);
        slot!(6);
        slot!(5);
        slot!(4);
        slot!(3);
        slot!(2);
        slot!(1);
        slot!(0, min, piv(0).min(max));
    } else {
        slot!(0, min, piv(0).min(max));
        slot!(1);
        slot!(2);
        slot!(3);
        slot!(4);
        slot!(5);
        slot!(6);
        slot!(7);
        slot!(8);
        slot!(9);
        slot!(10);
        slot!(11);
        slot!(12);
        slot!(13);
        slot!(14);
        slot!(15, piv(14).wrapping_add(1), max);
    }
    acc
}

/// Calls `emit(acc, lo, hi, word)` for every slot of the leaf `lv` from
/// its slot `lv.off` up to the slot reaching `last` (or the leaf's end), in
/// order, threading the accumulator; returns it and whether the scan
/// reached `last` or the tree's end. The leaf's pivots never change while
/// it is reachable (in-place writes under readers are single slots): the
/// first unused pivot marks its last slot.
#[inline(always)]
pub(crate) fn scan_leaf<B>(
    lv: Level<'_>,
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
pub struct Iter<'a, V: Handle, K: Key = u64> {
    /// The tree stays borrowed: its values live while the iterator does.
    pub(crate) _tree: PhantomData<&'a MapleTree<V, K>>,
    pub(crate) entries: Entries<'a, false>,
}

impl<'a, V: Handle, K: Key> Iterator for Iter<'a, V, K> {
    type Item = (RangeInclusive<K>, V::Borrowed<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next()?;
        // SAFETY: `Entries` yields value words of the tree, which is
        // borrowed for 'a and keeps them alive meanwhile.
        Some((key::span(lo, hi), unsafe { V::borrow(nn) }))
    }

    /// The last entry, found from the back (not by stepping through all).
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.fold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the tree borrowed for 'a.
            f(acc, (key::span(lo, hi), unsafe { V::borrow(nn) }))
        })
    }
}

impl<V: Handle, K: Key> DoubleEndedIterator for Iter<'_, V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.entries.next_back()?;
        // SAFETY: as in `next`: value words of the tree borrowed for 'a.
        Some((key::span(lo, hi), unsafe { V::borrow(nn) }))
    }

    fn rfold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.entries.rfold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the tree borrowed for 'a.
            f(acc, (key::span(lo, hi), unsafe { V::borrow(nn) }))
        })
    }
}

impl<V: Handle, K: Key> core::iter::FusedIterator for Iter<'_, V, K> {}

/// Iterator of owned handles; see [`MapleTree::range_cloned`].
pub struct RangeCloned<'a, V: Handle + Clone, K: Key = u64> {
    pub(crate) inner: Iter<'a, V, K>,
}

impl<V: Handle + Clone, K: Key> Iterator for RangeCloned<'_, V, K> {
    type Item = (RangeInclusive<K>, V);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.inner.entries.next()?;
        // SAFETY: `Entries` yields value words of the borrowed tree, alive
        // while it is borrowed.
        Some((key::span(lo, hi), unsafe { V::clone_raw(nn) }))
    }

    /// The last entry, found from the back.
    fn last(mut self) -> Option<Self::Item> {
        self.next_back()
    }

    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        self.inner.entries.fold(init, |acc, lo, hi, nn| {
            // SAFETY: as in `next`: value words of the borrowed tree.
            f(acc, (key::span(lo, hi), unsafe { V::clone_raw(nn) }))
        })
    }
}

impl<V: Handle + Clone, K: Key> DoubleEndedIterator for RangeCloned<'_, V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let (lo, hi, nn) = self.inner.entries.next_back()?;
        // SAFETY: as in `next`: value words of the borrowed tree.
        Some((key::span(lo, hi), unsafe { V::clone_raw(nn) }))
    }
}

impl<V: Handle + Clone, K: Key> core::iter::FusedIterator for RangeCloned<'_, V, K> {}

impl<V: Handle + Clone, K: Key> fmt::Debug for RangeCloned<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeCloned").finish_non_exhaustive()
    }
}

impl<V: Handle, K: Key> fmt::Debug for Iter<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").field("done", &self.entries.raw.is_done()).finish_non_exhaustive()
    }
}

impl<V: HandleMut, K: Key, W: Writes> MapleTree<V, K, W> {
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
    pub fn iter_mut(&mut self) -> IterMut<'_, V, K> {
        self.range_mut(..)
    }

    /// The entries overlapping `range` with their values mutably,
    /// ascending. An invalid range yields nothing.
    pub fn range_mut(&mut self, range: impl RangeBounds<K>) -> IterMut<'_, V, K> {
        let (first, last, done) = iter_bounds(key::inclusive(&range));
        // SAFETY: the iterator borrows `self` mutably for its lifetime:
        // the tree stays alive, and nothing but the iterator (which
        // changes values, not slots) reaches it meanwhile.
        let raw = unsafe { RawIter::lazy(&self.raw, first, last, done) };
        // SAFETY: as above: the iterator changes values, never slots.
        IterMut { entries: unsafe { Entries::new(raw) }, _tree: PhantomData }
    }

    /// Every value mutably, ascending (or from the back).
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V::Target> + core::iter::FusedIterator + '_ {
        ValuesMut { inner: self.iter_mut() }
    }
}

impl<'a, V: Handle, K: Key, W: Writes> IntoIterator for &'a MapleTree<V, K, W> {
    type Item = (RangeInclusive<K>, V::Borrowed<'a>);
    type IntoIter = Iter<'a, V, K>;
    fn into_iter(self) -> Iter<'a, V, K> {
        self.iter()
    }
}

/// Owning iterator; see `IntoIterator for MapleTree`.
pub struct IntoIter<V, K = u64> {
    inner: liballoc::vec::IntoIter<(RangeInclusive<K>, V)>,
}

impl<V, K> Iterator for IntoIter<V, K> {
    type Item = (RangeInclusive<K>, V);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V, K> DoubleEndedIterator for IntoIter<V, K> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back()
    }
}

impl<V, K> ExactSizeIterator for IntoIter<V, K> {}

impl<V, K> core::iter::FusedIterator for IntoIter<V, K> {}

impl<V, K> fmt::Debug for IntoIter<V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoIter").field("remaining", &self.inner.len()).finish()
    }
}

impl<V: Handle, K: Key, W: Writes> IntoIterator for MapleTree<V, K, W> {
    type Item = (RangeInclusive<K>, V);
    type IntoIter = IntoIter<V, K>;
    /// Takes every entry out in ascending order (collected up front).
    fn into_iter(mut self) -> IntoIter<V, K> {
        let words: Vec<_> = self.raw_entries().collect();
        // Free the nodes but keep the values: they move into the iterator.
        self.raw.clear_with(None);
        let items: Vec<_> = words
            .into_iter()
            // SAFETY: the nodes are gone; each word is taken back once.
            .map(|(lo, hi, w)| (key::span(lo, hi), unsafe { V::from_raw(w) }))
            .collect();
        IntoIter { inner: items.into_iter() }
    }
}
