//! Iterating over the empty ranges of a tree ([`MapleTree::gaps`]).

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    iter::FusedIterator,
    ops::{ControlFlow, RangeInclusive},
};

use crate::{handle::Handle, node::slot_bounds, raw::LeafWalk, sync::Ordering, tree::MapleTree};

/// The empty ranges inside a window, ascending (or descending from the
/// back), each cut to the window; made by [`MapleTree::gaps`].
///
/// On a gap-tracking tree a step looks at the next few slots and, if no
/// gap is there, makes one O(log n) gap search, which skips full subtrees:
/// `k` gaps cost at most O((k + 1) log n) however many entries lie between
/// them. On a plain tree each step walks the leaf slots up to the next gap.
pub struct Gaps<'a, V: Handle> {
    tree: &'a MapleTree<V>,
    /// Lowest index not yet passed from the front.
    front: u64,
    /// Highest index not yet passed from the back.
    back: u64,
    done: bool,
    /// Where the front stopped last (on the gap it returned), so the next
    /// step starts there instead of at the root.
    fwd: Option<LeafWalk>,
    /// The same for the back.
    bwd: Option<LeafWalk>,
}

impl<V: Handle> fmt::Debug for Gaps<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gaps").field("front", &self.front).field("back", &self.back).field("done", &self.done).finish()
    }
}

/// Slots a gap-tracking tree walks before it searches: when gaps are
/// dense (one after every entry or few), the next one is a slot or two
/// away and a step finds it for less than a search from the root.
const NEAR: usize = 4;

/// What a bounded walk found.
enum Scan {
    /// An empty slot `[start, end]` (not yet cut to the window).
    Found(u64, u64),
    /// No gap before the window ends.
    None,
    /// The budget ran out first.
    Far,
}

impl<'a, V: Handle> Gaps<'a, V> {
    pub(crate) fn new(tree: &'a MapleTree<V>, window: Option<(u64, u64)>) -> Gaps<'a, V> {
        let (front, back, done) = match window {
            Some((f, b)) => (f, b, false),
            None => (0, 0, true),
        };
        Gaps { tree, front, back, done, fwd: None, bwd: None }
    }

    /// Walks forward from `w`'s slot (inclusive) for at most `budget`
    /// slots, looking for an empty one that starts at or below `hi`.
    fn scan_forward(w: &mut LeafWalk, hi: u64, budget: usize) -> Scan {
        let mut left = budget;
        let ((), found) = walk_slots(w, hi, (), |(), s, e, empty| {
            if empty {
                return ControlFlow::Break(((), Scan::Found(s, e)));
            }
            left -= 1;
            if left == 0 && e < hi {
                ControlFlow::Break(((), Scan::Far))
            } else {
                ControlFlow::Continue(())
            }
        });
        found.unwrap_or(Scan::None)
    }

    /// Walks back from `w`'s slot (inclusive) for at most `budget` slots,
    /// looking for an empty one that ends at or above `lo`.
    fn scan_backward(w: &mut LeafWalk, lo: u64, budget: usize) -> Scan {
        for _ in 0..budget {
            let Some((s, e, word)) = w.current() else { return Scan::Found(0, u64::MAX) };
            if e < lo {
                return Scan::None;
            }
            if word.is_null() {
                return Scan::Found(s, e);
            }
            if s <= lo || !w.prev() {
                return Scan::None;
            }
        }
        Scan::Far
    }
}

impl<V: Handle> Iterator for Gaps<'_, V> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<RangeInclusive<u64>> {
        if self.done {
            return None;
        }
        let (lo, hi) = (self.front, self.back);
        let raw = &self.tree.raw;
        let w = match self.fwd.as_mut() {
            // On the gap returned last: the slot after it starts at `lo`.
            Some(w) => {
                if !w.next() {
                    self.done = true;
                    return None;
                }
                w
            }
            None => self.fwd.insert(LeafWalk::new(raw, lo)),
        };
        let budget = if raw.gaps { NEAR } else { usize::MAX };
        let found = match Self::scan_forward(w, hi, budget) {
            Scan::Found(s, e) => Some((s, e)),
            Scan::None => None,
            // Far away: the lowest empty index at or above `lo` by the gap
            // search, which skips full subtrees; then its slot.
            Scan::Far => raw.empty_area(lo, hi, 1).ok().and_then(|s| {
                *w = LeafWalk::new(raw, s);
                w.current().map(|(s, e, _)| (s, e))
            }),
        };
        let Some((start, end)) = found else {
            self.done = true;
            return None;
        };
        let (start, end) = (start.max(lo), end.min(hi));
        if end >= hi {
            self.done = true;
        } else {
            self.front = end + 1;
        }
        Some(start..=end)
    }

    /// The gaps left, front to back, in one pass along the leaves (no call
    /// per gap back into the iterator): what `sum`, `count`, `for_each`
    /// and the other whole-iterator consumers run on. On a gap-tracking
    /// tree a run of `NEAR` entries without a gap still hands over to the
    /// gap search, as `next` does.
    fn fold<B, F: FnMut(B, RangeInclusive<u64>) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        if self.done {
            return acc;
        }
        let (lo, hi) = (self.front, self.back);
        let raw = &self.tree.raw;
        let mut w = match self.fwd.take() {
            // On the gap returned last: the slot after it starts at `lo`.
            Some(mut w) => {
                if !w.next() {
                    return acc;
                }
                w
            }
            None => LeafWalk::new(raw, lo),
        };
        let near = if raw.gaps { NEAR } else { usize::MAX };
        let mut run = 0;
        loop {
            let far;
            (acc, far) = walk_slots(&mut w, hi, acc, |acc, s, e, empty| {
                if empty {
                    run = 0;
                    ControlFlow::Continue(f(acc, s.max(lo)..=e.min(hi)))
                } else {
                    run += 1;
                    if run >= near && e < hi {
                        ControlFlow::Break((acc, e + 1))
                    } else {
                        ControlFlow::Continue(acc)
                    }
                }
            });
            // Far from the last gap: the gap search finds the next one,
            // skipping full subtrees; the walk goes there.
            let Some(from) = far else { return acc };
            match raw.empty_area(from, hi, 1) {
                Ok(at) => {
                    w = LeafWalk::new(raw, at);
                    run = 0;
                }
                Err(_) => return acc,
            }
        }
    }
}

/// Steps `w` forward along the leaf slots from the one it stands on,
/// reading each leaf's arrays directly (the path is consulted only to
/// change leaves), and calls `visit(acc, start, end, empty)` for every
/// slot that starts at or below `hi`, threading the accumulator. Stops when
/// `visit` breaks (the walk then stands on that slot; its value is
/// returned), after the slot reaching `hi`, or at the tree's end. An empty
/// tree is one empty slot over every index.
#[inline(always)]
fn walk_slots<A, R>(
    w: &mut LeafWalk,
    hi: u64,
    mut acc: A,
    mut visit: impl FnMut(A, u64, u64, bool) -> ControlFlow<(A, R), A>,
) -> (A, Option<R>) {
    loop {
        let Some(lv) = w.path.last_mut() else {
            return match visit(acc, 0, u64::MAX, true) {
                ControlFlow::Break((acc, r)) => (acc, Some(r)),
                ControlFlow::Continue(acc) => (acc, None),
            };
        };
        let leaf = lv.leaf();
        let (piv, slots) = (leaf.pivots(), leaf.slots());
        let mut s = slot_bounds(piv, lv.off, lv.min, lv.max).0;
        loop {
            let i = lv.off;
            // An unused pivot (`u64::MAX`) or none: the leaf's last slot,
            // which ends at the leaf's bound.
            let e = piv.get(i).map_or(lv.max, |p| p.load(Ordering::Relaxed).min(lv.max));
            if s > hi {
                return (acc, None);
            }
            acc = match visit(acc, s, e, slots[i].load(Ordering::Acquire).is_null()) {
                ControlFlow::Break((acc, r)) => return (acc, Some(r)),
                ControlFlow::Continue(acc) => acc,
            };
            if e >= hi {
                return (acc, None);
            }
            if e == lv.max {
                break;
            }
            lv.off = i + 1;
            s = e + 1;
        }
        // The leaf's last slot: on to the next leaf.
        if !w.next() {
            return (acc, None);
        }
    }
}

impl<V: Handle> DoubleEndedIterator for Gaps<'_, V> {
    fn next_back(&mut self) -> Option<RangeInclusive<u64>> {
        if self.done {
            return None;
        }
        let (lo, hi) = (self.front, self.back);
        let raw = &self.tree.raw;
        let w = match self.bwd.as_mut() {
            // On the gap returned last: the slot before it ends at `hi`.
            Some(w) => {
                if !w.prev() {
                    self.done = true;
                    return None;
                }
                w
            }
            None => self.bwd.insert(LeafWalk::new(raw, hi)),
        };
        let budget = if raw.gaps { NEAR } else { usize::MAX };
        let found = match Self::scan_backward(w, lo, budget) {
            Scan::Found(s, e) => Some((s, e)),
            Scan::None => None,
            // The highest empty index at or below `hi`, then its slot.
            Scan::Far => raw.empty_area_rev(lo, hi, 1).ok().and_then(|e| {
                *w = LeafWalk::new(raw, e);
                w.current().map(|(s, e, _)| (s, e))
            }),
        };
        let Some((start, end)) = found else {
            self.done = true;
            return None;
        };
        let (start, end) = (start.max(lo), end.min(hi));
        if start <= lo {
            self.done = true;
        } else {
            self.back = start - 1;
        }
        Some(start..=end)
    }
}

impl<V: Handle> FusedIterator for Gaps<'_, V> {}
