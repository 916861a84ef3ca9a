//! [`MapleSet`]: a set of `u64` indices held as disjoint ranges in a maple
//! tree without values, and the set operations on sorted range streams
//! ([`Combined`]).

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    iter::{FusedIterator, Peekable},
    ops::{BitAnd, BitOr, BitXor, Not, RangeBounds, RangeInclusive, Sub},
};

use crate::{
    error::Error,
    gap_iter::Gaps,
    iter::{IntoIter, Iter},
    key::{self, Key},
    tree::{abort_oom, MapleTree},
};

/// A set of `u64` indices, held as the fewest disjoint inclusive ranges:
/// ranges that touch or overlap are joined as they go in (as `rangemap`'s
/// `RangeInclusiveSet` does), so two sets are equal exactly when they
/// hold the same indices. It is a [`MapleTree<()>`](MapleTree) (the unit
/// value takes no room: [`Inline`](crate::Inline)), so lookups, gap
/// searches and iteration cost what they cost on the map.
///
/// ```
/// use maple_tree::MapleSet;
///
/// let mut pages = MapleSet::new();
/// pages.insert(0..=9).unwrap();
/// pages.insert(20..=29).unwrap();
/// // Filling the hole joins all three.
/// assert_eq!(pages.insert(10..=19).unwrap(), 0..=29);
/// pages.remove(5..=6).unwrap();
/// assert_eq!(pages.iter().collect::<Vec<_>>(), [0..=4, 7..=29]);
///
/// let dirty: MapleSet = [3..=8, 40..=41].into_iter().collect();
/// assert_eq!((&pages & &dirty).iter().collect::<Vec<_>>(), [3..=4, 7..=8]);
/// assert_eq!(pages.difference(&dirty).collect::<Vec<_>>(), [0..=2, 9..=29]);
/// ```
///
/// A gap-tracking set ([`with_gaps`](Self::with_gaps)) finds free windows
/// in O(log n), an ID or address allocator's search:
///
/// ```
/// use maple_tree::MapleSet;
///
/// let mut used = MapleSet::with_gaps();
/// used.insert(0..=99).unwrap();
/// used.insert(104..=199).unwrap();
/// assert_eq!(used.empty_area(.., 4), Ok(100));
/// assert_eq!(used.empty_area(.., 5), Ok(200));
/// ```
pub struct MapleSet<K: Key = u64> {
    tree: MapleTree<(), K>,
}

/// The constructors of a set of `u64` indices (not generic over the key
/// type for the reason [`MapleTree::new`] is not); other key types use
/// [`keyed`](MapleSet::keyed), [`Default`] or [`FromIterator`].
impl MapleSet {
    const_unless_loom! {
        /// An empty set.
        pub fn new() -> Self {
            Self::keyed()
        }
    }

    const_unless_loom! {
        /// An empty set on a gap-tracking tree: [`empty_area`](Self::empty_area)
        /// in O(log n).
        pub fn with_gaps() -> Self {
            Self::keyed_with_gaps()
        }
    }
}

impl<K: Key> MapleSet<K> {
    const_unless_loom! {
        /// An empty set of any key type: what [`new`](MapleSet::new) is
        /// for `u64`.
        ///
        /// ```
        /// use maple_tree::MapleSet;
        ///
        /// let mut letters: MapleSet<char> = MapleSet::keyed();
        /// letters.insert('a'..='z').unwrap();
        /// letters.insert('A'..='Z').unwrap();
        /// assert!(letters.contains('q') && !letters.contains('!'));
        /// assert_eq!(letters.complement().iter().nth(1), Some('['..='`'));
        /// ```
        pub fn keyed() -> Self {
            MapleSet { tree: MapleTree::keyed() }
        }
    }

    const_unless_loom! {
        /// An empty gap-tracking set of any key type.
        pub fn keyed_with_gaps() -> Self {
            MapleSet { tree: MapleTree::keyed_with_gaps() }
        }
    }

    /// Adds the indices of `range` and returns the range that holds them
    /// now (joined with every range it touched or overlapped). An empty or
    /// reversed range is [`Error::InvalidRange`]; on
    /// [`Error::NoMemory`] the set is unchanged.
    pub fn insert(&mut self, range: impl RangeBounds<K>) -> Result<RangeInclusive<K>, Error> {
        self.tree.store_range_merging(range, ()).map_err(|e| e.cause)
    }

    /// Removes the indices of `range` (a range partly inside keeps the
    /// rest). An empty or reversed range is [`Error::InvalidRange`]; on
    /// [`Error::NoMemory`] the set is unchanged.
    pub fn remove(&mut self, range: impl RangeBounds<K>) -> Result<(), Error> {
        self.tree.remove_range(range)
    }

    /// True if `index` is in the set.
    pub fn contains(&self, index: K) -> bool {
        self.tree.contains(index)
    }

    /// The range of the set that holds `index`.
    pub fn get(&self, index: K) -> Option<RangeInclusive<K>> {
        self.tree.get_range(index).map(|(r, ())| r)
    }

    /// True if any index of `range` is in the set (an empty or reversed
    /// range holds none).
    pub fn overlaps(&self, range: impl RangeBounds<K>) -> bool {
        self.tree.range(range).next().is_some()
    }

    /// The number of ranges (not of indices).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// True if the set holds no index.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        self.tree.clear();
    }

    /// The lowest range.
    pub fn first(&self) -> Option<RangeInclusive<K>> {
        self.tree.first().map(|(r, ())| r)
    }

    /// The highest range.
    pub fn last(&self) -> Option<RangeInclusive<K>> {
        self.tree.last().map(|(r, ())| r)
    }

    /// The ranges, ascending (or from the back: the iterator is
    /// double-ended).
    pub fn iter(&self) -> Ranges<'_, K> {
        Ranges(self.tree.iter())
    }

    /// The ranges that overlap `range`, whole (not clipped to it).
    pub fn range(&self, range: impl RangeBounds<K>) -> Ranges<'_, K> {
        Ranges(self.tree.range(range))
    }

    /// The ranges of indices not in the set inside `window`, clipped to it
    /// (see [`MapleTree::gaps`]).
    pub fn gaps(&self, window: impl RangeBounds<K>) -> Gaps<'_, (), K> {
        self.tree.gaps(window)
    }

    /// The lowest start of `size` indices in a row inside `window`, none
    /// of them in the set (see [`MapleTree::empty_area`]).
    pub fn empty_area(&self, window: impl RangeBounds<K>, size: u64) -> Result<K, Error> {
        self.tree.empty_area(window, size)
    }

    /// The highest such start (see [`MapleTree::empty_area_rev`]).
    pub fn empty_area_rev(&self, window: impl RangeBounds<K>, size: u64) -> Result<K, Error> {
        self.tree.empty_area_rev(window, size)
    }

    /// The indices in `self` or in `other`, as ranges, ascending.
    pub fn union<'a>(&'a self, other: &'a Self) -> Combined<Ranges<'a, K>, Ranges<'a, K>> {
        Combined::new(self.iter(), other.iter(), |a, b| a || b)
    }

    /// The indices in both.
    pub fn intersection<'a>(&'a self, other: &'a Self) -> Combined<Ranges<'a, K>, Ranges<'a, K>> {
        Combined::new(self.iter(), other.iter(), |a, b| a && b)
    }

    /// The indices in `self` and not in `other`.
    pub fn difference<'a>(&'a self, other: &'a Self) -> Combined<Ranges<'a, K>, Ranges<'a, K>> {
        Combined::new(self.iter(), other.iter(), |a, b| a && !b)
    }

    /// The indices in exactly one of the two.
    pub fn symmetric_difference<'a>(&'a self, other: &'a Self) -> Combined<Ranges<'a, K>, Ranges<'a, K>> {
        Combined::new(self.iter(), other.iter(), |a, b| a != b)
    }

    /// The indices not in the set, as a new set (also `!&set`).
    ///
    /// ```
    /// use maple_tree::MapleSet;
    ///
    /// let s: MapleSet = [0..=9, 20..=u64::MAX].into_iter().collect();
    /// assert_eq!((!&s).iter().collect::<Vec<_>>(), [10..=19]);
    /// ```
    pub fn complement(&self) -> Self {
        Self::from_sorted_ranges(self.gaps(..))
    }

    /// True if every index of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.difference(other).next().is_none()
    }

    /// True if every index of `other` is in `self`.
    pub fn is_superset(&self, other: &Self) -> bool {
        other.is_subset(self)
    }

    /// True if no index is in both.
    pub fn is_disjoint(&self, other: &Self) -> bool {
        self.intersection(other).next().is_none()
    }

    /// Splits the set at `at`: the indices from `at` on move to the
    /// returned set (of the same flavour). O(m log n) for the m ranges
    /// that move; aborts on allocation failure, like `std`.
    ///
    /// ```
    /// use maple_tree::MapleSet;
    ///
    /// let mut low: MapleSet = [0..=9, 20..=29].into_iter().collect();
    /// let high = low.split_off(25);
    /// assert_eq!(format!("{low:?} {high:?}"), "{0..=9, 20..=24} {25..=29}");
    /// ```
    pub fn split_off(&mut self, at: K) -> Self {
        MapleSet { tree: self.tree.split_off(at) }
    }

    /// Adds every index of `other` and leaves it empty. Aborts on
    /// allocation failure, like `std`.
    pub fn append(&mut self, other: &mut Self) {
        self.extend(other.iter());
        other.clear();
    }

    /// The tree underneath: its ranges hold `()`.
    pub fn as_tree(&self) -> &MapleTree<(), K> {
        &self.tree
    }

    /// The tree underneath, for the map's own API.
    pub fn into_tree(self) -> MapleTree<(), K> {
        self.tree
    }

    /// A set of the indices `tree` holds (touching entries joined).
    pub fn from_tree(tree: &MapleTree<(), K>) -> Self {
        Self::from_sorted_ranges(tree.iter().map(|(r, ())| r))
    }

    /// A set from ranges ascending by start, each its own or overlapping,
    /// touching or apart from the last: joined as they come, then built in
    /// O(n). Aborts on allocation failure, like `std`.
    fn from_sorted_ranges(ranges: impl IntoIterator<Item = RangeInclusive<K>>) -> Self {
        let indices = ranges.into_iter().map(|r| (r.start().to_index(), r.end().to_index()));
        let joined = Join { ranges: indices, pending: None };
        let mut tree = MapleTree::keyed();
        match tree.build(joined.map(|(s, e)| (key::span(s, e), ()))) {
            Ok(()) => MapleSet { tree },
            // Joined ranges are ascending and apart: only memory can fail.
            Err(_) => abort_oom(),
        }
    }
}

/// Joins touching and overlapping ranges of a stream ascending by start.
struct Join<I> {
    ranges: I,
    pending: Option<(u64, u64)>,
}

impl<I: Iterator<Item = (u64, u64)>> Iterator for Join<I> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        for (s, e) in self.ranges.by_ref() {
            match self.pending {
                None => self.pending = Some((s, e)),
                Some((ps, pe)) if s <= pe.saturating_add(1) => self.pending = Some((ps, pe.max(e))),
                Some((ps, pe)) => {
                    self.pending = Some((s, e));
                    return Some((ps, pe));
                }
            }
        }
        self.pending.take()
    }
}

impl<K: Key> Clone for MapleSet<K> {
    fn clone(&self) -> Self {
        MapleSet { tree: self.tree.clone() }
    }
}

/// An empty set.
impl<K: Key> Default for MapleSet<K> {
    fn default() -> Self {
        Self::keyed()
    }
}

/// Sets are equal when they hold the same indices.
impl<K: Key> PartialEq for MapleSet<K> {
    fn eq(&self, other: &Self) -> bool {
        self.tree == other.tree
    }
}

impl<K: Key> Eq for MapleSet<K> {}

/// Ordered as their ranges are, ascending, lexicographically.
impl<K: Key> PartialOrd for MapleSet<K> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Key> Ord for MapleSet<K> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.tree.cmp(&other.tree)
    }
}

impl<K: Key> core::hash::Hash for MapleSet<K> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.tree.hash(state);
    }
}

impl<K: Key + fmt::Debug> fmt::Debug for MapleSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Collects ranges in any order; empty or reversed ones are skipped.
impl<K: Key> FromIterator<RangeInclusive<K>> for MapleSet<K> {
    fn from_iter<I: IntoIterator<Item = RangeInclusive<K>>>(iter: I) -> Self {
        let mut ranges: Vec<(u64, u64)> =
            iter.into_iter().map(|r| (r.start().to_index(), r.end().to_index())).filter(|(s, e)| s <= e).collect();
        ranges.sort_unstable();
        Self::from_sorted_ranges(ranges.into_iter().map(|(s, e)| key::span(s, e)))
    }
}

/// Adds each range; empty or reversed ones are skipped. Aborts on
/// allocation failure, like `std`.
impl<K: Key> Extend<RangeInclusive<K>> for MapleSet<K> {
    fn extend<I: IntoIterator<Item = RangeInclusive<K>>>(&mut self, iter: I) {
        for r in iter {
            match self.insert(r) {
                Ok(_) | Err(Error::InvalidRange) => {}
                Err(_) => abort_oom(),
            }
        }
    }
}

/// The ranges, ascending (or from the back).
impl<K: Key> IntoIterator for MapleSet<K> {
    type Item = RangeInclusive<K>;
    type IntoIter = IntoRanges<K>;

    fn into_iter(self) -> IntoRanges<K> {
        IntoRanges(self.tree.into_iter())
    }
}

/// The owning iterator of a [`MapleSet`]'s ranges.
pub struct IntoRanges<K = u64>(IntoIter<(), K>);

impl<K> Iterator for IntoRanges<K> {
    type Item = RangeInclusive<K>;

    fn next(&mut self) -> Option<RangeInclusive<K>> {
        self.0.next().map(|(r, ())| r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<K> DoubleEndedIterator for IntoRanges<K> {
    fn next_back(&mut self) -> Option<RangeInclusive<K>> {
        self.0.next_back().map(|(r, ())| r)
    }
}

impl<K> ExactSizeIterator for IntoRanges<K> {}

impl<K> FusedIterator for IntoRanges<K> {}

impl<K> fmt::Debug for IntoRanges<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoRanges").field("remaining", &self.0.len()).finish()
    }
}

impl<'a, K: Key> IntoIterator for &'a MapleSet<K> {
    type Item = RangeInclusive<K>;
    type IntoIter = Ranges<'a, K>;

    fn into_iter(self) -> Ranges<'a, K> {
        self.iter()
    }
}

macro_rules! set_operator {
    ($trait:ident, $method:ident, $op:ident, $doc:literal) => {
        #[doc = $doc]
        impl<K: Key> $trait<&MapleSet<K>> for &MapleSet<K> {
            type Output = MapleSet<K>;

            fn $method(self, other: &MapleSet<K>) -> MapleSet<K> {
                MapleSet::from_sorted_ranges(self.$op(other))
            }
        }
    };
}

/// The complement, as a new set.
impl<K: Key> Not for &MapleSet<K> {
    type Output = MapleSet<K>;

    fn not(self) -> MapleSet<K> {
        self.complement()
    }
}

set_operator!(BitOr, bitor, union, "The union, as a new set (built in O(n)).");
set_operator!(BitAnd, bitand, intersection, "The intersection, as a new set.");
set_operator!(Sub, sub, difference, "The difference, as a new set.");
set_operator!(BitXor, bitxor, symmetric_difference, "The symmetric difference, as a new set.");

/// The ranges of a [`MapleSet`], ascending or from the back.
pub struct Ranges<'a, K: Key = u64>(Iter<'a, (), K>);

impl<K: Key> Iterator for Ranges<'_, K> {
    type Item = RangeInclusive<K>;

    #[inline]
    fn next(&mut self) -> Option<RangeInclusive<K>> {
        self.0.next().map(|(r, ())| r)
    }
}

impl<K: Key> DoubleEndedIterator for Ranges<'_, K> {
    #[inline]
    fn next_back(&mut self) -> Option<RangeInclusive<K>> {
        self.0.next_back().map(|(r, ())| r)
    }
}

impl<K: Key> FusedIterator for Ranges<'_, K> {}

impl<K: Key> fmt::Debug for Ranges<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ranges").finish_non_exhaustive()
    }
}

/// A set operation on two streams of disjoint ranges ascending by start
/// (two sets' [`iter`](MapleSet::iter), a map's keys, any sorted list):
/// the ranges of the indices that `keep` says to keep, given whether each
/// stream holds them, joined where they touch. Each call walks both
/// streams once, in step: O(n + m) in all.
///
/// ```
/// use maple_tree::{Combined, MapleTree};
///
/// // Which mapped ranges of a map are not in a list of ranges?
/// let mut vmas: MapleTree<u32> = MapleTree::new();
/// vmas.insert_range(0..=99, 1).unwrap();
/// vmas.insert_range(200..=299, 2).unwrap();
/// let locked = [50..=249];
/// let keys = vmas.iter().map(|(r, _)| r);
/// let unlocked: Vec<_> = Combined::new(keys, locked, |mapped, locked| mapped && !locked).collect();
/// assert_eq!(unlocked, [0..=49, 250..=299]);
/// ```
pub struct Combined<A: Iterator, B: Iterator> {
    a: Peekable<A>,
    b: Peekable<B>,
    /// Where the part of the key space not yet looked at starts; `None`
    /// past `u64::MAX`.
    pos: Option<u64>,
    keep: fn(bool, bool) -> bool,
}

impl<K, A, B> Combined<A, B>
where
    K: Key,
    A: Iterator<Item = RangeInclusive<K>>,
    B: Iterator<Item = RangeInclusive<K>>,
{
    /// Combines `a` and `b` (each ascending, disjoint, and without empty
    /// ranges) by `keep(in_a, in_b)`, which must be false for an index in
    /// neither (what lies past both streams is never looked at).
    pub fn new(
        a: impl IntoIterator<IntoIter = A>,
        b: impl IntoIterator<IntoIter = B>,
        keep: fn(bool, bool) -> bool,
    ) -> Self {
        Combined { a: a.into_iter().peekable(), b: b.into_iter().peekable(), pos: Some(0), keep }
    }

    /// The next stretch from `pos` on which neither stream changes: its
    /// bounds and whether to keep it; `None` once both streams are done.
    fn piece(&mut self) -> Option<(u64, u64, bool)> {
        let pos = self.pos?;
        while self.a.next_if(|r| r.end().to_index() < pos).is_some() {}
        while self.b.next_if(|r| r.end().to_index() < pos).is_some() {}
        let index = |r: &RangeInclusive<K>| (r.start().to_index(), r.end().to_index());
        let (a, b) = (self.a.peek().map(index), self.b.peek().map(index));
        if a.is_none() && b.is_none() {
            self.pos = None;
            return None;
        }
        let inside = |r: &Option<(u64, u64)>| r.is_some_and(|(s, _)| s <= pos);
        // Where a stream's membership next changes: the end of the range
        // `pos` is in, or just before the next one.
        let until = |r: &Option<(u64, u64)>, inside: bool| match *r {
            None => u64::MAX,
            Some((_, e)) if inside => e,
            Some((s, _)) => s - 1,
        };
        let (in_a, in_b) = (inside(&a), inside(&b));
        let end = until(&a, in_a).min(until(&b, in_b));
        self.pos = end.checked_add(1);
        Some((pos, end, (self.keep)(in_a, in_b)))
    }
}

impl<K, A, B> Iterator for Combined<A, B>
where
    K: Key,
    A: Iterator<Item = RangeInclusive<K>>,
    B: Iterator<Item = RangeInclusive<K>>,
{
    type Item = RangeInclusive<K>;

    fn next(&mut self) -> Option<RangeInclusive<K>> {
        let mut out: Option<(u64, u64)> = None;
        while let Some((lo, hi, kept)) = self.piece() {
            match (kept, out) {
                (true, None) => out = Some((lo, hi)),
                // The stretches follow each other: kept ones in a row join.
                (true, Some((s, _))) => out = Some((s, hi)),
                (false, Some(_)) => break,
                (false, None) => {}
            }
        }
        out.map(|(s, e)| key::span(s, e))
    }
}

impl<K, A, B> FusedIterator for Combined<A, B>
where
    K: Key,
    A: Iterator<Item = RangeInclusive<K>>,
    B: Iterator<Item = RangeInclusive<K>>,
{
}

impl<A: Iterator, B: Iterator> fmt::Debug for Combined<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Combined").field("pos", &self.pos).finish_non_exhaustive()
    }
}
