//! Writes that stay inside one leaf and change it in place, and the gap
//! bookkeeping every write ends with.
//!
//! * **Exact fit** (the kernel's slot store of one word): an entry replaced
//!   by another over exactly its range. One slot store, safe for readers
//!   in any mode; no gap changes.
//! * **In-leaf store** (the kernel's node store, done in place): the one to
//!   three new slots replace the touched slots of one leaf and the rest
//!   shift; allowed when the leaf keeps a legal fill and `&mut` access
//!   proves no reader exists. Nothing is allocated, so nothing can fail.
//!
//! Gap tracking is incremental: a write knows the largest empty range it
//! made and the largest it shrank or removed, so the leaf's largest gap is
//! known without a rescan unless the write shrank the very range that was
//! largest.

use super::{Removed, Retired, Stored};
use crate::{
    handle::is_value,
    node::{range_len, slot_bounds, Item, Kind},
    raw::{Level, Path, RawTree},
};

impl RawTree {
    /// Exact fit: `entry` (not null) replaces the entry (value or reserved
    /// marker) in `l`'s slot over the same range.
    pub(super) fn store_exact(&self, l: Level, entry: *mut ()) -> Stored {
        let mut removed = Removed::default();
        removed.push(self.replace_at(l, entry));
        Stored { removed, retired: Retired::default() }
    }

    /// [`store_exact`](Self::store_exact) where a cursor stands: writes
    /// `entry` (not null) into the slot `l` points at, which holds an entry
    /// (not null), and returns the old word. One word written, safe for
    /// readers in any mode; no gap changes; the walk stays good.
    pub(crate) fn replace_at(&self, l: Level, entry: *mut ()) -> *mut () {
        debug_assert!(!entry.is_null());
        let old = l.node.leaf_slot(l.off);
        debug_assert!(!old.is_null());
        l.node.set_slot(l.off, entry);
        self.len.set(self.len.get() + usize::from(is_value(entry)) - usize::from(is_value(old)));
        old
    }

    /// In-leaf store: replaces slots `lpath`'s leaf offset `..= r_off` of
    /// the leaf at the end of `lpath` with `pieces` (whose last bound is the
    /// last replaced slot's), shifting the slots after them, if the leaf
    /// keeps a legal fill; then refreshes the gaps above. Returns false
    /// (nothing changed) when the result would not be a legal leaf.
    ///
    /// # Safety
    ///
    /// No reader can be in the tree (not RCU mode: the tree is written
    /// through `&mut`) and the caller is its only writer.
    pub(super) unsafe fn store_in_leaf(&self, lpath: &Path, r_off: usize, pieces: &[Item]) -> bool {
        let leaf = lpath.len() - 1;
        let l = lpath[leaf];
        let count = l.node.count_from(r_off);
        let new_count = count - (r_off - l.off + 1) + pieces.len();
        // The root leaf and the right-most leaf are exempt from minimum fill;
        // a root leaf left holding one empty range means an empty tree,
        // which the rebuild handles (it frees the leaf).
        let exempt = leaf == 0 || l.max == u64::MAX;
        let legal = new_count <= Kind::Leaf.slots()
            && (new_count >= Kind::Leaf.min_fill() || exempt)
            && !(leaf == 0 && new_count == 1 && pieces[0].slot.is_null());
        if !legal {
            return false;
        }
        // The gap change, measured before the slots move: the largest empty
        // range the write shrinks or removes, and the largest it leaves.
        let mut lost = 0;
        let mut made = 0;
        if self.gaps && leaf > 0 {
            let piv = l.node.leaf_pivots();
            for k in l.off..=r_off {
                if l.node.leaf_slot(k).is_null() {
                    let (lo, hi) = slot_bounds(piv, k, l.min, l.max);
                    lost = lost.max(range_len(lo, hi));
                }
            }
            let mut lo = l.leaf_range().0;
            for p in pieces {
                if p.slot.is_null() {
                    made = made.max(range_len(lo, p.last));
                }
                lo = p.last.wrapping_add(1);
            }
        }
        // SAFETY: no reader exists (this function's contract), so the words
        // may change one after the other.
        unsafe { l.node.splice_leaf(l.off, r_off + 1, count, pieces) };
        if self.gaps && leaf > 0 {
            let p = lpath[leaf - 1];
            let had = p.node.gap(p.off);
            let now = if made > had {
                // Larger than every empty range the leaf had.
                made
            } else if lost < had || made == had {
                // A range of the old largest size is still there (untouched,
                // or just made), and none is larger.
                return true;
            } else {
                l.node.max_gap(l.min, l.max)
            };
            self.propagate_gap(lpath, leaf, now);
        }
        true
    }

    /// Refreshes the gap recorded for `lpath[level].node`'s position in each
    /// ancestor, stopping as soon as a value does not change. A parent's own
    /// largest gap is kept incrementally through its largest-gap offset; it
    /// is rescanned only when its largest child gap shrank.
    pub(crate) fn update_gaps(&self, lpath: &Path, level: usize) {
        if !self.gaps || level == 0 {
            return;
        }
        // The node now in the parent's slot (a fresh one may have replaced
        // `lpath[level].node`).
        let p = lpath[level - 1];
        // SAFETY: internal node, used slot.
        let child = unsafe { p.node.child(p.off) };
        self.propagate_gap(lpath, level, child.max_gap(lpath[level].min, lpath[level].max));
    }

    /// Records `g` as the largest gap below `lpath[level]`'s slot in its
    /// parent, and so on upwards while the parents' largest gaps change.
    fn propagate_gap(&self, lpath: &Path, level: usize, mut g: u64) {
        let mut j = level;
        while j > 0 {
            let p = lpath[j - 1];
            let old = p.node.gap(p.off);
            if old == g {
                return;
            }
            p.node.set_gap(p.off, g);
            let best = p.node.gap_offset();
            if g > p.node.gap(best) || best == p.off && g > old {
                p.node.set_gap_offset(p.off);
            } else if best == p.off {
                p.node.refresh_gap_offset();
            }
            g = p.node.gap(p.node.gap_offset());
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{MapleTree, U63};

    fn u(v: u64) -> U63 {
        U63::new(v).unwrap()
    }

    /// Writes inside one leaf keep the ancestors' gaps exact in every case
    /// of the incremental update: a larger empty range made, the largest
    /// one shrunk (rescan), an equal one made, a smaller one touched.
    #[test]
    fn in_leaf_writes_keep_gaps_exact() {
        // Three leaves' worth of [i*10, i*10+5] with 4-wide gaps between.
        let mut t = MapleTree::with_gaps();
        for i in 0..30u64 {
            t.insert_range(i * 10..=i * 10 + 5, u(i)).unwrap();
        }
        assert!(t.stats().leaves >= 2);
        let check = |t: &MapleTree<U63>, want: u64| {
            t.validate().unwrap();
            // The largest gap below the last entry, found by gap search.
            let brute = t.gaps(0..=299).find(|g| g.end() - g.start() + 1 >= want).map(|g| *g.start());
            assert_eq!(t.empty_area(0..=299, want).ok(), brute);
        };
        // Neighbours of [20, 25] narrowed to one-wide gaps, then [20, 25]
        // removed: made 11 > 4 while only smaller gaps were lost.
        t.insert_range(16..=18, u(91)).unwrap();
        t.insert_range(26..=28, u(92)).unwrap();
        check(&t, 4);
        t.remove_range(20..=25).unwrap();
        check(&t, 11);
        t.insert_range(20..=25, u(2)).unwrap(); // the 11 shrinks: rescan
        check(&t, 4);
        t.remove_range(105..=105).unwrap(); // made 5 > 4
        check(&t, 5);
        t.store_range(100..=105, u(10)).unwrap(); // the 5 shrinks back: rescan
        check(&t, 4);
        t.remove_range(40..=45).unwrap(); // made 16
        check(&t, 16);
        t.insert_range(41..=41, u(99)).unwrap(); // 16 shrinks: rescan to 10
        check(&t, 10);
        t.insert_range(47..=47, u(98)).unwrap(); // a smaller range touched
        check(&t, 5);
        t.remove_range(41..=41).unwrap(); // made 6 next to 5s
        check(&t, 6);
    }
}
