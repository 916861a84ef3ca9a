//! Iterating over the empty ranges of a tree ([`MapleTree::gaps`]).

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    iter::FusedIterator,
    marker::PhantomData,
    ops::{RangeBounds, RangeInclusive},
};

use crate::{
    handle::Handle,
    iter::scan_leaf,
    key::{self, Key},
    node::RANGE64_SLOTS,
    raw::{LeafWalk, Level, Path, RawTree},
    sync::Ordering,
    tree::{MapleTree, Writes},
};

/// The empty ranges inside a window, ascending (or descending from the
/// back), each cut to the window; made by [`MapleTree::gaps`].
///
/// Each end reads the gaps a leaf at a time: `next` (`next_back`) hands
/// out the gaps of the leaf it scanned last, and scans the next (previous)
/// leaf when they run out; `fold` and `rfold` (hence `sum`, `count`,
/// `for_each`) scan the leaves straight through. On a gap-tracking tree, a
/// leaf that ends in a run of entries hands over to one O(log n) gap
/// search, which skips full subtrees: `k` gaps cost at most
/// O((k + 1) log n) however many entries lie between them. On a plain
/// tree the leaves are walked.
pub struct Gaps<'a, V: Handle, K: Key = u64> {
    raw: &'a RawTree,
    _tree: PhantomData<&'a MapleTree<V, K>>,
    /// Lowest index not yet passed from the front.
    front: u64,
    /// Highest index not yet passed from the back.
    back: u64,
    done: bool,
    /// The front's walk along the leaves, ascending.
    fwd: Side<'a>,
    /// The gaps of the front's last leaf that `next` has not handed out.
    fbuf: LeafGaps,
    /// The back's walk, descending.
    bwd: Side<'a>,
    /// The gaps of the back's last leaf, descending, that `next_back` has
    /// not handed out.
    bbuf: LeafGaps,
}

impl<V: Handle, K: Key> fmt::Debug for Gaps<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gaps").field("front", &self.front).field("back", &self.back).field("done", &self.done).finish()
    }
}

/// Entries in a row after which a gap-tracking tree searches for the next
/// gap (at the end of the leaf) instead of walking on: when gaps are
/// dense (one after every entry or few), the next one is a slot or two
/// away and a walk finds it for less than a search from the root.
const NEAR: usize = 4;

/// Where one end's next leaf scan starts.
#[derive(Clone, Copy)]
enum Resume {
    /// Nothing scanned yet: a walk to the window's start (or end, from the
    /// back).
    Start,
    /// The first slot of the leaf after the walk's (from the back: the
    /// last slot of the leaf before).
    Step,
    /// The slot of the lowest gap at or above this index (from the back:
    /// the highest at or below it): the last leaf scanned ended in a run
    /// of entries, in a gap-tracking tree.
    Search(u64),
    /// This end has scanned up to the window's other end.
    End,
}

/// One end of a [`Gaps`]: a walk along the leaves.
struct Side<'t> {
    walk: LeafWalk<'t>,
    resume: Resume,
    /// Entries in a row since the last gap seen.
    run: usize,
}

/// The gaps of one leaf, `start[pos..len]` and `end[pos..len]` (a leaf
/// holds at most `RANGE64_SLOTS` empty slots), in the order its end met
/// them.
struct LeafGaps {
    start: [u64; RANGE64_SLOTS],
    end: [u64; RANGE64_SLOTS],
    pos: u8,
    len: u8,
}

impl LeafGaps {
    fn new() -> LeafGaps {
        LeafGaps { start: [0; RANGE64_SLOTS], end: [0; RANGE64_SLOTS], pos: 0, len: 0 }
    }

    /// The next gap held, if any.
    fn pop(&mut self) -> Option<(u64, u64)> {
        (self.pos < self.len).then(|| {
            let i = usize::from(self.pos);
            self.pos += 1;
            (self.start[i], self.end[i])
        })
    }

    /// Fills the buffer with the gaps of the next leaf (in the direction
    /// `forward`) that has any, read by `side` inside `[lo, hi]` (`n & 15`
    /// is `n`: at most 16 slots, and it spares a bound check); false if
    /// there are none.
    fn refill<'t>(&mut self, side: &mut Side<'t>, raw: &'t RawTree, forward: bool, lo: u64, hi: u64) -> bool {
        let (start, end) = (&mut self.start, &mut self.end);
        let n = side.scan(raw, forward, lo, hi, 0usize, true, |n, s, e| {
            start[n & 15] = s;
            end[n & 15] = e;
            n + 1
        });
        (self.pos, self.len) = (0, n as u8);
        n > 0
    }
}

impl<'t> Side<'t> {
    fn new() -> Side<'t> {
        Side { walk: LeafWalk { path: Path::new() }, resume: Resume::Start, run: 0 }
    }

    /// Scans leaves from where this end stopped, in the direction
    /// `forward`, calling `emit(acc, start, end)` for every empty slot that
    /// overlaps `[lo, hi]`, cut to it, threading the accumulator: up to
    /// the window's other end, or (`one_leaf`) only until a leaf has had a
    /// gap.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn scan<B>(
        &mut self,
        raw: &'t RawTree,
        forward: bool,
        lo: u64,
        hi: u64,
        mut acc: B,
        one_leaf: bool,
        mut emit: impl FnMut(B, u64, u64) -> B,
    ) -> B {
        let near = if raw.gaps { NEAR } else { usize::MAX };
        loop {
            match self.resume {
                Resume::End => return acc,
                Resume::Start => raw.walk_into(if forward { lo } else { hi }, &mut self.walk.path),
                Resume::Step => {
                    // The window may have shrunk from the other end since
                    // the last scan: it may end in the leaf scanned.
                    let (min, max) = self.walk.path.last().map_or((0, u64::MAX), |lv| (lv.min, lv.max));
                    let stepped =
                        if forward { max < hi && self.walk.next_leaf() } else { min > lo && self.walk.prev_leaf() };
                    if !stepped {
                        self.resume = Resume::End;
                        return acc;
                    }
                }
                // The gap search skips full subtrees; the walk goes to the
                // gap it finds.
                Resume::Search(from) => {
                    let found = if forward { raw.empty_area(from, hi, 1) } else { raw.empty_area_rev(lo, from, 1) };
                    match found {
                        Ok(at) => {
                            raw.walk_into(at, &mut self.walk.path);
                            self.run = 0;
                        }
                        Err(_) => {
                            self.resume = Resume::End;
                            return acc;
                        }
                    }
                }
            }
            let Some(&lv) = self.walk.path.last() else {
                // An empty tree: one empty range over every index.
                self.resume = Resume::End;
                return emit(acc, lo, hi);
            };
            let mut found = false;
            let end;
            let mut note = |acc, s, e| {
                found = true;
                emit(acc, s, e)
            };
            (acc, end) = if forward {
                scan_leaf_gaps(lv, lo, hi, &mut self.run, acc, &mut note)
            } else {
                scan_leaf_gaps_back(lv, lo, hi, &mut self.run, acc, &mut note)
            };
            // Not at the end: the leaf ends inside the window, so the
            // index next to it does not overflow.
            self.resume = if end {
                Resume::End
            } else if self.run >= near {
                Resume::Search(if forward { lv.max + 1 } else { lv.min - 1 })
            } else {
                Resume::Step
            };
            if found && one_leaf {
                return acc;
            }
        }
    }
}

/// Calls `emit(acc, start, end)` for every empty slot of the leaf `lv`
/// from its slot `lv.off` up to the slot reaching `hi` (or the leaf's end),
/// cut to `[lo, hi]`, threading the accumulator; keeps `run`, the entries
/// in a row since the last gap. Returns the accumulator and whether the
/// scan reached `hi` or the tree's end: the entries' leaf scan
/// ([`scan_leaf`]), keeping the empty slots. The first slot scanned starts
/// at or below `hi` (the walk's: at the window's start, a gap the search
/// found inside it, or the first of a leaf after one that ended below
/// `hi`).
#[inline(always)]
fn scan_leaf_gaps<B>(
    lv: Level<'_>,
    lo: u64,
    hi: u64,
    run: &mut usize,
    acc: B,
    mut emit: impl FnMut(B, u64, u64) -> B,
) -> (B, bool) {
    let mut r = *run;
    let (acc, end) = scan_leaf(lv, hi, acc, |acc, s, e, word| {
        if word.is_null() {
            r = 0;
            emit(acc, s.max(lo), e.min(hi))
        } else {
            r += 1;
            acc
        }
    });
    *run = r;
    (acc, end)
}

/// [`scan_leaf_gaps`] backwards: every empty slot of the leaf `lv` from its
/// slot `lv.off` down to the slot reaching `lo` (or the leaf's first), in
/// descending order, cut to `[lo, hi]`. Returns whether the scan reached
/// `lo` or the tree's start. The first slot scanned ends at or above `lo`.
#[inline(always)]
fn scan_leaf_gaps_back<B>(
    lv: Level<'_>,
    lo: u64,
    hi: u64,
    run: &mut usize,
    mut acc: B,
    mut emit: impl FnMut(B, u64, u64) -> B,
) -> (B, bool) {
    let leaf = lv.leaf();
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    let mut i = lv.off;
    let mut e = lv.node.slot_max(i, lv.max);
    let mut r = *run;
    loop {
        let s = if i == 0 { lv.min } else { piv[i - 1].load(Ordering::Relaxed) + 1 };
        if slots[i].load(Ordering::Acquire).is_null() {
            acc = emit(acc, s.max(lo), e.min(hi));
            r = 0;
        } else {
            r += 1;
        }
        // The slot starting at the tree's first index starts at or below
        // `lo` too.
        if s <= lo {
            *run = r;
            return (acc, true);
        }
        if i == 0 {
            break;
        }
        e = s - 1;
        i -= 1;
    }
    *run = r;
    (acc, false)
}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
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
    pub fn gaps(&self, window: impl RangeBounds<K>) -> Gaps<'_, V, K> {
        Gaps::new(&self.raw, key::inclusive(&window).ok())
    }
}

impl<'a, V: Handle, K: Key> Gaps<'a, V, K> {
    pub(crate) fn new(raw: &'a RawTree, window: Option<(u64, u64)>) -> Gaps<'a, V, K> {
        let (front, back, done) = match window {
            Some((f, b)) => (f, b, false),
            None => (0, 0, true),
        };
        Gaps {
            raw,
            _tree: PhantomData,
            front,
            back,
            done,
            fwd: Side::new(),
            fbuf: LeafGaps::new(),
            bwd: Side::new(),
            bbuf: LeafGaps::new(),
        }
    }
}

impl<V: Handle, K: Key> Iterator for Gaps<'_, V, K> {
    type Item = RangeInclusive<K>;

    fn next(&mut self) -> Option<RangeInclusive<K>> {
        if self.done {
            return None;
        }
        let (raw, lo, hi) = (self.raw, self.front, self.back);
        let (start, end) = match self.fbuf.pop() {
            Some(gap) => gap,
            None => {
                if !self.fbuf.refill(&mut self.fwd, raw, true, lo, hi) {
                    self.done = true;
                    return None;
                }
                self.fbuf.pop()?
            }
        };
        // The back may have moved since the leaf was scanned.
        if start > self.back {
            self.done = true;
            return None;
        }
        let end = end.min(self.back);
        if end >= self.back {
            self.done = true;
        } else {
            self.front = end + 1;
        }
        Some(key::span(start, end))
    }

    /// The gaps left, front to back, in one pass along the leaves (no call
    /// per gap back into the iterator): what `sum`, `count`, `for_each`
    /// and the other whole-iterator consumers run on.
    fn fold<B, F: FnMut(B, RangeInclusive<K>) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        if self.done {
            return acc;
        }
        let back = self.back;
        // What `next` buffered first (the back may have moved since).
        while let Some((start, end)) = self.fbuf.pop() {
            if start > back {
                return acc;
            }
            acc = f(acc, key::span(start, end.min(back)));
            if end >= back {
                return acc;
            }
        }
        self.fwd.scan(self.raw, true, self.front, back, acc, false, |acc, s, e| f(acc, key::span(s, e)))
    }
}

impl<V: Handle, K: Key> DoubleEndedIterator for Gaps<'_, V, K> {
    fn next_back(&mut self) -> Option<RangeInclusive<K>> {
        if self.done {
            return None;
        }
        let (raw, lo, hi) = (self.raw, self.front, self.back);
        let (start, end) = match self.bbuf.pop() {
            Some(gap) => gap,
            None => {
                if !self.bbuf.refill(&mut self.bwd, raw, false, lo, hi) {
                    self.done = true;
                    return None;
                }
                self.bbuf.pop()?
            }
        };
        // The front may have moved since the leaf was scanned.
        if end < self.front {
            self.done = true;
            return None;
        }
        let start = start.max(self.front);
        if start <= self.front {
            self.done = true;
        } else {
            self.back = start - 1;
        }
        Some(key::span(start, end))
    }

    /// The gaps left, back to front, in one pass along the leaves.
    fn rfold<B, F: FnMut(B, RangeInclusive<K>) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        if self.done {
            return acc;
        }
        let front = self.front;
        // What `next_back` buffered first (the front may have moved since).
        while let Some((start, end)) = self.bbuf.pop() {
            if end < front {
                return acc;
            }
            acc = f(acc, key::span(start.max(front), end));
            if start <= front {
                return acc;
            }
        }
        self.bwd.scan(self.raw, false, front, self.back, acc, false, |acc, s, e| f(acc, key::span(s, e)))
    }
}

impl<V: Handle, K: Key> FusedIterator for Gaps<'_, V, K> {}

#[cfg(test)]
mod tests {
    #[allow(unused_imports)]
    use crate::prelude::*;
    use crate::{MapleTree, U63};

    /// The gaps of `t` inside `[a, b]`, from its entries.
    fn brute(t: &MapleTree<U63>, a: u64, b: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut next = Some(a);
        for (r, _) in t.range(a..=b) {
            if let Some(from) = next.filter(|&from| from < *r.start()) {
                out.push((from, r.start() - 1));
            }
            next = r.end().checked_add(1);
        }
        if let Some(from) = next.filter(|&from| from <= b) {
            out.push((from, b));
        }
        out
    }

    /// Every way of reading `gaps(a..=b)`: `next`, `fold`, `next_back`,
    /// `rfold`, both ends in turn, `fold` after `k` steps from the front and `j` from the back
    /// (the back moving below gaps the front has buffered), and the
    /// mirror of that with `rfold`.
    fn check(t: &MapleTree<U63>, a: u64, b: u64, what: &str) {
        let want = brute(t, a, b);
        let pair = |r: core::ops::RangeInclusive<u64>| (*r.start(), *r.end());
        assert_eq!(t.gaps(a..=b).map(pair).collect::<Vec<_>>(), want, "{what}: next, [{a}, {b}]");
        let folded = t.gaps(a..=b).fold(Vec::new(), |mut v, r| {
            v.push(pair(r));
            v
        });
        assert_eq!(folded, want, "{what}: fold, [{a}, {b}]");
        let mut back: Vec<_> = t.gaps(a..=b).rev().map(pair).collect();
        back.reverse();
        assert_eq!(back, want, "{what}: next_back, [{a}, {b}]");
        let mut rfolded = t.gaps(a..=b).rfold(Vec::new(), |mut v, r| {
            v.push(pair(r));
            v
        });
        rfolded.reverse();
        assert_eq!(rfolded, want, "{what}: rfold, [{a}, {b}]");
        let (mut front, mut rear) = (Vec::new(), Vec::new());
        let mut it = t.gaps(a..=b);
        while let Some(g) = it.next() {
            front.push(pair(g));
            match it.next_back() {
                Some(g) => rear.push(pair(g)),
                None => break,
            }
        }
        assert_eq!(it.next(), None, "{what}: fused, [{a}, {b}]");
        front.extend(rear.into_iter().rev());
        assert_eq!(front, want, "{what}: both ends in turn, [{a}, {b}]");
        let steps: &[(usize, usize)] =
            if cfg!(miri) { &[(1, 2), (3, 1)] } else { &[(0, 1), (1, 1), (1, 2), (2, 1), (3, 3), (1, 5), (6, 1)] };
        for &(k, j) in steps {
            let mut it = t.gaps(a..=b);
            let front: Vec<_> = it.by_ref().take(k).map(pair).collect();
            let mut rear: Vec<_> = (0..j).map_while(|_| it.next_back()).map(pair).collect();
            rear.reverse();
            let mut got = front;
            got.extend(it.fold(Vec::new(), |mut v, r| {
                v.push(pair(r));
                v
            }));
            got.extend(rear);
            assert_eq!(got, want, "{what}: {k} from the front, {j} from the back, then fold, [{a}, {b}]");
            // And the mirror: steps from each end, then `rfold`.
            let mut it = t.gaps(a..=b);
            let rear: Vec<_> = it.by_ref().rev().take(k).map(pair).collect();
            let front: Vec<_> = (0..j).map_while(|_| it.next()).map(pair).collect();
            let mut middle = it.rfold(Vec::new(), |mut v, r| {
                v.push(pair(r));
                v
            });
            middle.reverse();
            let mut got = front;
            got.extend(middle);
            got.extend(rear.into_iter().rev());
            assert_eq!(got, want, "{what}: {k} from the back, {j} from the front, then rfold, [{a}, {b}]");
        }
    }

    /// Trees of several leaves with a gap after every entry, with long
    /// runs of touching entries (which hand over to the gap search on a
    /// gap-tracking tree) and with gaps where leaves meet; windows starting
    /// and ending on every kind of bound.
    #[test]
    fn gaps_read_every_way_match_the_entries() {
        let v = |i: u64| U63::new(i).unwrap();
        let n = if cfg!(miri) { 30 } else { 120 };
        for gaps in [false, true] {
            // A gap after every entry; then every third entry widened to
            // touch the next, except around every seventh, so runs of
            // entries of many lengths lie between the gaps.
            let mut dense: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            for i in 0..n {
                dense.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
            }
            let mut runs = MapleTree::from_sorted((0..n).map(|i| (i * 10..=i * 10 + 5, v(i)))).unwrap();
            if gaps {
                runs = MapleTree::from_sorted_with_gaps((0..n).map(|i| (i * 10..=i * 10 + 5, v(i)))).unwrap();
            }
            for i in (0..n).filter(|i| i % 7 != 0) {
                runs.store_range(i * 10 + 6..=i * 10 + 9, v(1000 + i)).unwrap();
            }
            for (name, t) in [("dense", &dense), ("runs", &runs)] {
                t.validate().unwrap();
                assert!(t.height() >= 2, "{name}");
                let what = format!("{name}, gaps {gaps}");
                let step = if cfg!(miri) { 71 } else { 7 };
                let bounds: Vec<u64> = (0..n * 10 + 20).step_by(step).chain([u64::MAX - 1, u64::MAX]).collect();
                for &a in &bounds {
                    for &b in bounds.iter().filter(|&&b| b >= a).step_by(if cfg!(miri) { 4 } else { 1 }) {
                        check(t, a, b, &what);
                    }
                }
            }
        }
        // And an empty tree: one gap, the window.
        check(&MapleTree::new(), 5, 9, "empty");
    }
}
