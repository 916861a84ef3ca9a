//! The merging inserts of `nodit` (`insert_merge_touching`,
//! `insert_merge_overlapping`, `insert_merge_touching_or_overlapping`): a
//! new range joined with the entries beside it or under it, the whole
//! under the new value, in one write. (`store_range_merging`, which joins
//! only neighbours holding an equal value, is `rangemap`'s `insert`.)

#[allow(unused_imports)]
use crate::prelude::*;

use core::ops::{RangeBounds, RangeInclusive};

use crate::{
    error::{Error, InsertError},
    handle::Handle,
    key::{self, Key},
    tree::{MapleTree, Writes},
    write,
};

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// Inserts `value` over `range`, joined with the entries that touch it
    /// (end just before it or start just after it, whatever they hold):
    /// the joined range holds `value`, and their values are dropped.
    /// Returns the joined range. Fails, handing `value` back and changing
    /// nothing, if anything is stored inside `range` ([`Error::Occupied`]),
    /// if the range is invalid, or if a node cannot be allocated. (An
    /// entry is a value or a [reserved](Self::reserve_range) range.)
    ///
    /// ```
    /// use maple_tree::{Error, MapleTree};
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// t.insert_range(0..=9, 1).unwrap();
    /// t.insert_range(20..=29, 2).unwrap();
    /// assert_eq!(t.insert_merge_touching(10..=19, 3).unwrap(), 0..=29);
    /// assert_eq!(t.iter().collect::<Vec<_>>(), [(0..=29, 3)]);
    /// assert_eq!(t.insert_merge_touching(25..=35, 4).unwrap_err().cause, Error::Occupied);
    /// ```
    pub fn insert_merge_touching(
        &mut self,
        range: impl RangeBounds<K>,
        value: V,
    ) -> Result<RangeInclusive<K>, InsertError<V>> {
        self.insert_merge(range, value, true, false)
    }

    /// Stores `value` over `range` joined with every entry that overlaps
    /// it: the joined range, from the lowest start among them to the
    /// highest end, holds `value`, and their values are dropped (nothing
    /// is trimmed or cut in two, so `V` need not be `Clone`). Returns the
    /// joined range.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// t.insert_range(0..=9, 1).unwrap();
    /// t.insert_range(20..=29, 2).unwrap();
    /// t.insert_range(30..=39, 3).unwrap();
    /// assert_eq!(t.insert_merge_overlapping(5..=24, 4).unwrap(), 0..=29);
    /// assert_eq!(t.iter().collect::<Vec<_>>(), [(0..=29, 4), (30..=39, 3)]);
    /// ```
    pub fn insert_merge_overlapping(
        &mut self,
        range: impl RangeBounds<K>,
        value: V,
    ) -> Result<RangeInclusive<K>, InsertError<V>> {
        self.insert_merge(range, value, false, true)
    }

    /// [`insert_merge_overlapping`](Self::insert_merge_overlapping), also
    /// joined with the entries that touch the result.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// t.insert_range(0..=9, 1).unwrap();
    /// t.insert_range(20..=29, 2).unwrap();
    /// t.insert_range(30..=39, 3).unwrap();
    /// assert_eq!(t.insert_merge_touching_or_overlapping(5..=24, 4).unwrap(), 0..=39);
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn insert_merge_touching_or_overlapping(
        &mut self,
        range: impl RangeBounds<K>,
        value: V,
    ) -> Result<RangeInclusive<K>, InsertError<V>> {
        self.insert_merge(range, value, true, true)
    }

    /// `first..=last` widened to the entries just before and just after it
    /// whose words `join` accepts (the merging stores' and inserts' one
    /// rule for neighbours).
    #[inline]
    pub(crate) fn widen_to_neighbours(&self, first: u64, last: u64, join: impl Fn(*mut ()) -> bool) -> (u64, u64) {
        let lo = first.checked_sub(1).map(|before| self.raw.lookup(before)).filter(|&(_, _, w)| join(w));
        let hi = last.checked_add(1).map(|after| self.raw.lookup(after)).filter(|&(_, _, w)| join(w));
        (lo.map_or(first, |(lo, _, _)| lo), hi.map_or(last, |(_, hi, _)| hi))
    }

    /// The three above: `range` widened to the entries holding its ends
    /// (`overlapping`; else it must be empty), then to those touching it
    /// (`touching`), stored in one write.
    fn insert_merge(
        &mut self,
        range: impl RangeBounds<K>,
        value: V,
        touching: bool,
        overlapping: bool,
    ) -> Result<RangeInclusive<K>, InsertError<V>> {
        let (mut first, mut last) = match key::inclusive(&range) {
            Ok(b) => b,
            Err(cause) => return Err(InsertError { value, cause }),
        };
        // (The tree keeps no two empty slots side by side, so a free run
        // is one slot, and an entry is one slot.)
        let (lo, hi, w) = self.raw.lookup(first);
        if overlapping {
            if !w.is_null() {
                first = lo;
            }
            let (_, hi, w) = self.raw.lookup(last);
            if !w.is_null() {
                last = hi;
            }
        } else if !w.is_null() || hi < last {
            return Err(InsertError { value, cause: Error::Occupied });
        }
        if touching {
            (first, last) = self.widen_to_neighbours(first, last, |w| !w.is_null());
        }
        // SAFETY: no walk is given.
        unsafe { write::store_whole(self, None, Ok((first, last)), value) }.map(|_| key::span(first, last))
    }
}
