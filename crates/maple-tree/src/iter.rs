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
    handle::{is_value_word, Handle, HandleMut},
    key::{self, Key},
    node::{load_words, slot_bounds, LeafRef, NodeRef, PIVOT_UNUSED, RANGE64_SLOTS},
    raw::{descend, LeafWalk, Level, Path, RawTree, PREFETCH_HEIGHT},
    sync::{AtomicPtr, AtomicU64, Ordering},
    tree::{MapleTree, Writes},
    write::Bounds,
};

/// The two ends of an iterator over entries, as words and bounds: what
/// [`Iter`], [`IterMut`], [`RangeCloned`] and the concurrent tree's
/// iterator share, each turning the word into its item. Every value slot
/// comes once: from the front ascending, from the back descending, until
/// the ends meet.
///
/// `SHARED` (the concurrent tree's): a writer may change the tree while the
/// iterator lives, and either end may reach a newer version of a leaf than
/// the back read before (the front by stepping on, the back by walking
/// again from the recorded root, whose subtrees a writer may have
/// replaced), in which an entry written meanwhile reaches into what the
/// back handed out. `floor` keeps the lowest start the back handed out:
/// the front stops at an entry reaching it (the ends meet) and the back
/// skips one. An entry present the whole time cannot reach it: it would
/// overlap what the back handed out.
pub(crate) struct Entries<'t, const SHARED: bool> {
    pub(crate) raw: RawIter<'t>,
    back: Back<'t>,
    floor: Option<u64>,
}

impl<'t, const SHARED: bool> Entries<'t, SHARED> {
    /// The ends of `raw`, neither walked yet.
    ///
    /// # Safety
    ///
    /// As [`RawIter::next_back_entry`] asks of its `SHARED`: without it,
    /// the tree `raw` walks does not change while the result lives; with
    /// it, the nodes reachable from the root `raw` recorded stay alive
    /// meanwhile, changed at most by the single-word slot stores readers
    /// may meet, and so do the values they held.
    #[inline]
    pub(crate) unsafe fn new(raw: RawIter<'t>) -> Self {
        Entries { raw, back: Back::new(), floor: None }
    }

    #[inline]
    pub(crate) fn next(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        let (lo, hi, nn) = self.raw.next_entry()?;
        if SHARED && self.floor.is_some_and(|f| hi >= f) {
            // The ends meet (see `floor`).
            self.raw.finish();
            return None;
        }
        Some((lo, hi, nn))
    }

    #[inline]
    pub(crate) fn next_back(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        loop {
            // SAFETY: `new`'s contract.
            let (lo, hi, nn) = unsafe { self.raw.next_back_entry::<SHARED>(&mut self.back) }?;
            if SHARED {
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
        let mut floor = self.floor;
        let g = |acc, lo, hi, nn| {
            if SHARED {
                if floor.is_some_and(|f| hi >= f) {
                    // As in `next_back`.
                    return acc;
                }
                floor = Some(lo);
            }
            f(acc, lo, hi, nn)
        };
        // SAFETY: `new`'s contract.
        unsafe { self.raw.rfold_entries::<SHARED, B>(&mut self.back, init, g) }
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
        let mut raw = unsafe { RawIter::lazy(&self.raw, 0, u64::MAX, false) };
        core::iter::from_fn(move || raw.next_entry())
    }
}

/// Entry-by-entry walk shared by the iterators. Each leaf is read once
/// into a [`LeafCopy`] and a mask of the slots holding values, which
/// `next_entry` then hands out (the next one is the mask's lowest bit);
/// the root-to-leaf path is consulted once per leaf.
pub(crate) struct RawIter<'t> {
    walk: LeafWalk<'t>,
    /// The current leaf, read ([`load_leaf`](Self::load_leaf)).
    copy: LeafCopy,
    /// The slots of `copy` not yet handed out that hold values, one bit
    /// each (empty until the first leaf read).
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
    pending: Option<NodeRef<'t>>,
    /// The back end stops the front (sets `last_leaf`) when it hands out
    /// an entry that starts at or below this: the index after the front's
    /// leaf, or, before the front has walked, the first index. (One
    /// comparison for both, in the back's hot path.)
    stop: u64,
}

/// A copy of one leaf's bounds and slot words, read in one pass, from
/// which an end of an iterator hands out entries by slot number without
/// reading the node again and without a branch on where the slot lies
/// (first, last, inner): the front end and the back end keep one each.
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

    /// Reads the leaf `lv` stands on and returns the mask of its slots
    /// that hold values, one bit each.
    ///
    /// # Safety
    ///
    /// `lv`'s node is a live leaf, changed at most by the single-word slot
    /// stores readers may meet.
    #[inline(always)]
    unsafe fn load(&mut self, lv: Level<'_>) -> u32 {
        let leaf = lv.leaf();
        let (piv, slots) = (leaf.pivots(), leaf.slots());
        self.bound[0] = MaybeUninit::new(lv.min.wrapping_sub(1));
        // SAFETY: a leaf's pivots never change while it is reachable (the
        // writes readers may meet in place are single slot stores), and
        // this one is (the contract), so plain reads race with nothing.
        // One block copy, cheaper than fifteen atomic loads.
        unsafe { load_words(piv, &mut self.bound[1..RANGE64_SLOTS]) };
        self.bound[RANGE64_SLOTS] = MaybeUninit::new(PIVOT_UNUSED);
        // Unused slots are null, so only used slots can be in the mask.
        let mut mask = 0u32;
        for (i, (w, s)) in self.words.iter_mut().zip(slots).enumerate() {
            let v = s.load(Ordering::Acquire);
            *w = MaybeUninit::new(v);
            mask |= u32::from(is_value_word(v)) << i;
        }
        self.max = lv.max;
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

impl<'t> RawIter<'t> {
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
    pub(crate) unsafe fn lazy(tree: &'t RawTree, first: u64, last: u64, done: bool) -> RawIter<'t> {
        let pending = if done { None } else { tree.root_node() };
        // One literal (no local changed, then moved): the iterator is
        // ~1.3 KiB, and each move of it a copy of all of that.
        RawIter {
            walk: LeafWalk { path: Path::new() },
            copy: LeafCopy::new(),
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
    fn walk_front(&mut self, root: NodeRef<'t>) {
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
        // SAFETY: the walk's leaf, alive (`lazy`'s contract).
        let mut mask = unsafe { self.copy.load(lv) };
        // From the walk's slot on.
        mask &= u32::MAX << lv.off;
        // (The back's leaf lies after this one: `max` is below `u64::MAX`
        // whenever the back reads `stop`.)
        self.stop = lv.max.wrapping_add(1);
        if lv.max > self.last {
            // The slot reaching `last` is in this leaf, at the latest its
            // last: nothing after it.
            let mut i = lv.off;
            let leaf = lv.leaf();
            let piv = leaf.pivots();
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
        // SAFETY: `i` was in the mask: a value slot of the leaf read.
        Some(unsafe { self.copy.entry(i) })
    }

    /// Takes the last entry of the loaded leaf, if one is left (the back
    /// end's, where the two ends meet).
    fn take_last(&mut self) -> Option<(u64, u64, NonNull<()>)> {
        if self.mask == 0 {
            return None;
        }
        let i = (31 - self.mask.leading_zeros()) as usize & 15;
        self.mask &= !(1 << i);
        // SAFETY: as in `take`.
        Some(unsafe { self.copy.entry(i) })
    }

    /// Folds `f` over the entries left, leaf by leaf: what the loaded leaf
    /// still holds, then each further leaf's slots straight from its
    /// arrays, with no copy and no call per entry back into the iterator
    /// (what `Iterator::fold`, hence `sum`, `for_each`, `count` and
    /// friends, run on). The leaves the range wants whole go through
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
        // A front that has not walked yet (a fresh iterator: `sum` over a
        // range) reads its first leaf in place too, with no copy.
        let mut fresh = false;
        if !self.last_leaf {
            if let Some(root) = self.pending.take() {
                // SAFETY: the root `lazy` recorded, whose nodes stay alive
                // while the iterator lives (`lazy`'s contract).
                unsafe { descend::<false>(root, self.first, &mut self.walk.path) };
                self.prefetch_ahead(true);
                fresh = true;
            }
        }
        while let Some((lo, hi, nn)) = self.take() {
            acc = f(acc, lo, hi, nn);
        }
        loop {
            if !core::mem::take(&mut fresh) {
                if self.last_leaf || !self.walk.next_leaf() {
                    break;
                }
                self.prefetch_ahead(false);
            }
            let Some(&lv) = self.walk.path.last() else { break };
            if lv.off == 0 && lv.max <= self.last {
                (acc, self.last_leaf) = self.walk.fold_whole(self.last, acc, |acc, leaf, min, max| {
                    scan_whole::<BOUNDS, false, B>(leaf, min, max, acc, &mut |acc, _, lo, hi, nn| f(acc, lo, hi, nn))
                });
                continue;
            }
            let end;
            (acc, end) = scan_leaf(lv, self.last, acc, |acc, lo, hi, w| {
                if is_value_word(w) {
                    // SAFETY: a value word is non-null.
                    f(acc, lo, hi, unsafe { NonNull::new_unchecked(w) })
                } else {
                    acc
                }
            });
            self.last_leaf = end;
        }
        // (Spent: the front did not keep its copy in step.)
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
        back: &mut Back<'t>,
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
                acc = scan_whole::<true, true, B>(lv.leaf(), lv.min, lv.max, acc, &mut |acc, _, lo, hi, nn| {
                    f(acc, lo, hi, nn)
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
        back: &mut Back<'t>,
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
                if let Some(entry) = self.pop_back::<SHARED>(back) {
                    return Some(entry);
                }
            }
        }
        // SAFETY: this function's contract.
        unsafe { self.next_back_slow::<SHARED>(back) }
    }

    /// Hands out the highest value slot of `back`'s own leaf (its mask is
    /// not empty) and lowers `last` below it. Always `Some` without
    /// `SHARED`; with it, `None` where the back has met the front and the
    /// front's copy has nothing left.
    #[inline(always)]
    fn pop_back<const SHARED: bool>(&mut self, back: &mut Back<'t>) -> Option<(u64, u64, NonNull<()>)> {
        debug_assert_ne!(back.mask, 0);
        let i = (31 - back.mask.leading_zeros()) as usize & 15;
        back.mask &= !(1 << i);
        // SAFETY: `i` was in the back's mask, which holds value slots of
        // the leaf its copy read.
        let (lo, hi, nn) = unsafe { back.copy.entry(i) };
        if SHARED && self.pending.is_none() && lo <= self.copy.max {
            // The entry starts in the front's leaf, of which the back
            // stands on another version (a writer replaced leaves between
            // the two ends' walks): the ends meet, and what is left there
            // is the front copy's.
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
        Some((lo, hi, nn))
    }

    /// [`next_back_entry`](Self::next_back_entry) when the back's leaf has
    /// nothing left for it: the first walk, the steps back, and the ends
    /// meeting.
    ///
    /// # Safety
    ///
    /// As for `next_back_entry`.
    #[inline(never)]
    unsafe fn next_back_slow<const SHARED: bool>(&mut self, back: &mut Back<'t>) -> Option<(u64, u64, NonNull<()>)> {
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
                // (`None`: `SHARED`, and the ends met with nothing left.)
                return self.pop_back::<SHARED>(back);
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
/// until the first `next_back`), and the value slots of the leaf not yet
/// handed out. Three levels, not a whole path, so that every iterator
/// stays cheap to make and move (a path is 1.2 KiB, and short range
/// queries make and drop an iterator each): a step back to a leaf under
/// the parent before goes through the grandparent, and only a step under
/// another grandparent walks from the root again.
#[derive(Clone)]
pub(crate) struct Back<'t> {
    leaf: Option<Level<'t>>,
    parent: Option<Level<'t>>,
    /// The parent's parent, in trees of three levels or more.
    grand: Option<Level<'t>>,
    /// A tree of [`PREFETCH_HEIGHT`] levels or more, where steps back ask
    /// for leaves under the parent before.
    tall: bool,
    /// The leaf, read when the back steps onto it (not by the steps
    /// `rfold` takes, which scan leaves in place).
    copy: LeafCopy,
    /// The slots of `copy` not yet handed out that hold values.
    mask: u32,
    /// The first walk asked only for the leaf before: the first step back
    /// asks for the leaves before that (see [`walk`](Self::walk)).
    ramp: bool,
}

impl<'t> Back<'t> {
    /// A back end that has not walked yet.
    #[inline]
    pub(crate) fn new() -> Back<'t> {
        Back { leaf: None, parent: None, grand: None, tall: false, copy: LeafCopy::new(), mask: 0, ramp: false }
    }

    /// Walks from `root` to the leaf holding `index` and stands there,
    /// with the value slots up to the one holding `index` to hand out.
    ///
    /// # Safety
    ///
    /// As for [`descend`]: `root` is the root of a tree that stays alive
    /// and unchanged meanwhile.
    unsafe fn walk(&mut self, root: NodeRef<'t>, index: u64, first: bool) {
        let mut path = Path::new();
        // SAFETY: this function's contract.
        unsafe { descend::<false>(root, index, &mut path) };
        self.leaf = path.last().copied();
        self.parent = path.len().checked_sub(2).map(|d| path[d]);
        self.grand = path.len().checked_sub(3).map(|d| path[d]);
        self.tall = path.len() >= PREFETCH_HEIGHT;
        // SAFETY: the walk's leaf, alive (this function's contract).
        self.mask = self.leaf.map_or(0, |lv| unsafe { self.copy.load(lv) } & up_to(lv.off));
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
    /// walk from `root`), with all its value slots to hand out; false at
    /// the tree's start.
    ///
    /// # Safety
    ///
    /// As for [`walk`](Self::walk).
    // (Inline: it runs once per leaf of every backward scan.)
    #[inline(always)]
    unsafe fn step_back(&mut self, root: NodeRef<'t>) -> bool {
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
    /// this leaf would find, without the walk.
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
        // SAFETY: the leaf just stepped to, alive (this function's
        // contract).
        self.mask = unsafe { self.copy.load(lv) };
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
    unsafe fn step_to_sibling<const BOUNDED: bool, const MASK: bool>(&mut self, above: u64) -> Option<Level<'t>> {
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
        // SAFETY: as above.
        self.mask = if MASK { unsafe { self.copy.load(lv) } } else { 0 };
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

/// The slots `0..=upto` of a leaf, one bit each.
#[inline(always)]
fn up_to(upto: usize) -> u32 {
    u32::MAX >> (31 - (upto & 15))
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
        let (mut k, mut cur) = (p.off, lv);
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
            if k + PREFETCH_AHEAD < count {
                // SAFETY: as above.
                unsafe { p.node.child(k + PREFETCH_AHEAD) }.prefetch();
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
/// constants.
#[inline(always)]
pub(crate) fn scan_whole<const BOUNDS: bool, const REV: bool, B>(
    leaf: LeafRef<'_>,
    min: u64,
    max: u64,
    mut acc: B,
    f: &mut impl FnMut(B, usize, u64, u64, NonNull<()>) -> B,
) -> B {
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    let piv: &[AtomicU64; RANGE64_SLOTS - 1] = piv.try_into().expect("a leaf has fifteen pivots");
    let slots: &[AtomicPtr<()>; RANGE64_SLOTS] = slots.try_into().expect("a leaf has sixteen slots");
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
            slot!($i, piv[$i - 1].load(Ordering::Relaxed).wrapping_add(1), piv[$i].load(Ordering::Relaxed).min(max))
        };
    }
    if REV {
        slot!(15, piv[14].load(Ordering::Relaxed).wrapping_add(1), max);
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
        slot!(0, min, piv[0].load(Ordering::Relaxed).min(max));
    } else {
        slot!(0, min, piv[0].load(Ordering::Relaxed).min(max));
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
        slot!(15, piv[14].load(Ordering::Relaxed).wrapping_add(1), max);
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
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V, K> DoubleEndedIterator for IntoIter<V, K> {
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
