//! The write path: every store (insert, overwrite, erase, empty a range)
//! comes down to "put `entry` over `[first, last]`".
//!
//! A write runs in two phases.
//!
//! 1. **Plan** (nothing visible changes). Walk to the leaves holding `first`
//!    and `last` (the left and right paths; they differ for a *spanning*
//!    store). Build the new content of the leaf level: the left leaf's
//!    entries before `first` (the one containing `first` trimmed), the new
//!    entry, the right leaf's entries after `last`. Then, level by level
//!    upwards: if the content is below minimum fill (and not on the right
//!    spine), pull in the next node to the right (sibling or cousin);
//!    distribute the content over 1–4 fresh nodes (balanced, never ending a
//!    leaf part on an empty slot when avoidable); the new nodes become the
//!    replacement items of the level above, surrounded by the untouched
//!    items of the left and right parents. Stop at the first level where one
//!    node is replaced by one node with the same bounds, or at the root
//!    (which may grow a level, or collapse). Every node is allocated here;
//!    a failed allocation frees the fresh nodes and returns with the tree
//!    untouched.
//! 2. **Commit** (cannot fail). Set the parent words of the children of the
//!    fresh nodes, publish the new subtree with one pointer store (or, when
//!    `&mut` access proves no reader exists, overwrite the one changed node
//!    in place), update the gaps of the ancestors, then free the replaced
//!    nodes and the subtrees that fell inside `[first, last]`.
//!
//! Exact-fit replacement of one value by another is a single slot store.

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr::{self, NonNull};

use arrayvec::ArrayVec;

use crate::{
    alloc::Slab,
    error::AllocError,
    handle::is_value,
    node::{Content, Item, Kind, NodeRef},
    raw::{free_subtree, Level, Path, RawTree},
    sync::Ordering,
};

/// Makes the handle for a piece of a value a store cuts: given the old
/// value's word, the old value's first index and the piece's new `first`
/// and `last` (the piece ends where the old value did), a fresh handle (a
/// second owner of the value, or a new value for the new range).
pub(crate) type Piece<'a> = &'a mut dyn FnMut(*mut (), u64, u64, u64) -> *mut ();

/// A list that lives inline up to `N` items (the common write touches one
/// or two) and spills to the heap beyond, so most writes allocate nothing
/// for their bookkeeping.
pub(crate) struct SmallList<T, const N: usize> {
    inline: ArrayVec<T, N>,
    spill: Vec<T>,
}

impl<T, const N: usize> Default for SmallList<T, N> {
    fn default() -> Self {
        SmallList { inline: ArrayVec::new(), spill: Vec::new() }
    }
}

impl<T: Copy, const N: usize> SmallList<T, N> {
    pub(crate) fn push(&mut self, item: T) {
        if let Err(e) = self.inline.try_push(item) {
            self.spill.push(e.element());
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.inline.len() + self.spill.len()
    }

    #[cfg(all(loom, test))]
    pub(crate) fn is_empty(&self) -> bool {
        self.inline.is_empty()
    }

    /// Every item, in the order pushed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.inline.iter().chain(&self.spill).copied()
    }
}

/// Value words a write took out of the tree; the typed layer drops them.
#[derive(Default)]
pub(crate) struct Removed(SmallList<NonNull<()>, 8>);

impl Removed {
    /// Records a word that left the tree (empty slots and reserved markers
    /// are not values and are skipped).
    pub(crate) fn push(&mut self, raw: *mut ()) {
        if !is_value(raw) {
            return;
        }
        if let Some(nn) = NonNull::new(raw) {
            self.0.push(nn);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Hands every removed word to `f`.
    pub(crate) fn for_each(&self, f: impl FnMut(NonNull<()>)) {
        self.0.iter().for_each(f);
    }

    /// The single removed word, if exactly one was removed.
    pub(crate) fn single(&self) -> Option<NonNull<()>> {
        (self.len() == 1).then(|| self.0.inline[0])
    }
}

/// Nodes a write replaced (see [`Stored::retired`]).
pub(crate) type Retired = SmallList<NodeRef, 8>;

/// Why the engine refused a store.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StoreFail {
    Alloc,
    /// The write would cut one entry in two and no way to copy it was given.
    NeedSplit,
    /// `insert_only` and something is stored in the range.
    Occupied,
}

impl From<StoreFail> for crate::error::Error {
    fn from(f: StoreFail) -> Self {
        match f {
            StoreFail::Alloc => Self::NoMemory,
            // Only reachable through a caller that cannot clone values; the
            // typed layer always supplies a clone where a cut is possible.
            StoreFail::NeedSplit => Self::InvalidRange,
            StoreFail::Occupied => Self::Occupied,
        }
    }
}

impl From<AllocError> for StoreFail {
    fn from(_: AllocError) -> StoreFail {
        StoreFail::Alloc
    }
}

/// What a successful store did.
pub(crate) struct Stored {
    pub(crate) removed: Removed,
    /// In RCU mode: replaced nodes, already marked dead, that readers may
    /// still be walking; the caller frees them after a grace period (with
    /// [`free_node`]). Always empty otherwise (they were freed at once).
    pub(crate) retired: Retired,
}

/// How the planned change becomes visible.
enum Publish {
    /// Overwrite this node with the final content (exclusive access only).
    InPlace { level: usize },
    /// Store this fresh node into its parent's slot (or as the root at level 0).
    Replace { level: usize, node: NodeRef },
    /// New root (possibly taller or shorter than before).
    Root { node: NodeRef, height: usize },
}

/// Free slots a push into a sibling must leave across the two nodes it
/// writes. A push rewrites both nodes, costing about what a split does, so
/// a push that leaves them nearly full is soon followed by another.
/// Measured on 100 K random inserts (callgrind): no push 20,429 nodes;
/// slack 5: 19,430 nodes for 6.6 % more instructions; slack 4 or 3: about
/// 18,200 (near the kernel's ~17,500) for 19–20 % more (docs/DESIGN.md).
const PUSH_SLACK: usize = 5;

/// Nodes allocated by a plan; freed again if the plan fails.
struct Fresh<'s> {
    slab: &'s Slab,
    nodes: ArrayVec<NodeRef, 160>,
}

impl<'s> Fresh<'s> {
    /// # Safety
    ///
    /// While the result lives, the caller is the only user of `slab` (as
    /// for [`Slab::alloc`]).
    unsafe fn new(slab: &'s Slab) -> Self {
        Fresh { slab, nodes: ArrayVec::new() }
    }

    fn alloc(&mut self, kind: Kind) -> Result<NodeRef, AllocError> {
        // SAFETY: `new`'s contract makes us the slab's only user.
        let n = unsafe { self.slab.alloc(kind) }?;
        self.nodes.push(n);
        Ok(n)
    }

    fn abandon(self) {
        for n in self.nodes {
            // SAFETY: these nodes, from this slab, were never published; the
            // slab is ours (`new`'s contract).
            unsafe { self.slab.free(n) };
        }
    }
}

/// End offsets of the parts `content` is cut into for nodes of `kind`:
/// as few parts as possible, balanced, and (for leaves) no part but the
/// last ends on an empty slot. If the fewest parts cannot avoid that (every
/// part full), one more part is used.
///
/// On the right-most spine (`right_spine`), parts are filled left to right
/// and the last part takes the remainder: that part is exempt from minimum
/// fill, and appending at the end of the index space (the common pattern
/// for ids and for stacks of mappings) then leaves full nodes behind instead
/// of half-full ones.
fn split_points(content: &[Item], kind: Kind, right_spine: bool) -> ArrayVec<usize, 8> {
    let n = content.len();
    let cap = kind.slots();
    let mut k = n.div_ceil(cap);
    loop {
        if let Some(ends) = try_split(content, kind, k, right_spine) {
            return ends;
        }
        k += 1;
    }
}

fn try_split(content: &[Item], kind: Kind, k: usize, right_spine: bool) -> Option<ArrayVec<usize, 8>> {
    let n = content.len();
    let cap = kind.slots();
    let mut ends = ArrayVec::new();
    let mut start = 0;
    for p in 0..k - 1 {
        let parts_left = k - p;
        let mut end = if right_spine {
            start + cap.min(n - start - (parts_left - 1))
        } else {
            start + (n - start).div_ceil(parts_left)
        };
        if kind.is_leaf() && content[end - 1].slot.is_null() {
            // The slot after an empty one is an entry (empties never touch):
            // take it too, or leave the empty one to the next part.
            if end - start < cap && n - (end + 1) >= parts_left - 1 {
                end += 1;
            } else if n - (end - 1) <= (parts_left - 1) * cap {
                end -= 1;
            } else {
                return None;
            }
        }
        ends.push(end);
        start = end;
    }
    ends.push(n);
    Some(ends)
}

impl RawTree {
    /// Stores `entry` (a value word, or null for "nothing") over
    /// `[first, last]`.
    ///
    /// With `insert_only`, fails with [`StoreFail::Occupied`] unless the
    /// whole range is empty. If the write cuts one existing entry in two,
    /// the right-hand piece gets `split(word)` (a second owner of the cut
    /// entry's value, made before anything changes); without `split` such a
    /// write fails with [`StoreFail::NeedSplit`]. On failure the tree is
    /// unchanged and the returned word (null or a made clone) is the
    /// caller's to drop.
    ///
    /// # Safety
    ///
    /// `first <= last`; `entry` is null or a handle whose ownership passes to
    /// the tree when the call succeeds; `split` returns a fresh handle for
    /// the value behind the word it is given. The caller is the only writer
    /// (it holds the tree `&mut` or its write lock), and unless `self.rcu`
    /// no reader exists; in RCU mode the caller frees `retired` nodes and
    /// drops removed values only after every reader that could see them is
    /// gone.
    pub(crate) unsafe fn store(
        &self,
        mut first: u64,
        mut last: u64,
        entry: *mut (),
        insert_only: bool,
        split: Option<Piece<'_>>,
        rebase: bool,
    ) -> Result<Stored, (StoreFail, *mut ())> {
        debug_assert!(first <= last);
        if self.root_node().is_none() {
            // SAFETY: the caller makes us the only writer.
            return unsafe { self.store_empty_root(first, last, entry) }.map_err(|e| (e, ptr::null_mut()));
        }
        let mut lpath = Path::new();
        self.walk_into(first, &mut lpath);
        let leaf = lpath.len() - 1;
        let mut rpath = Path::new();
        rpath.extend(lpath.iter().copied());
        if last > lpath[leaf].max {
            self.walk_into(last, &mut rpath);
        } else {
            rpath[leaf].off = rpath[leaf].node.find(last);
        }
        if entry.is_null() {
            // Empty ranges never touch: absorb empty neighbours.
            if let Some(lo) = self.empty_before(&mut lpath, first) {
                first = lo;
            }
            if let Some(hi) = self.empty_after(&mut rpath, last) {
                last = hi;
            }
        }
        let l = lpath[leaf];
        let r = rpath[leaf];
        let (lmin, lmax) = l.slot_range();
        let (rmin, rmax) = r.slot_range();
        let lval = l.node.slot(l.off);
        let rval = r.node.slot(r.off);
        let same_slot = l.node == r.node && l.off == r.off;

        if insert_only && !(lval.is_null() && lmax >= last) {
            return Err((StoreFail::Occupied, ptr::null_mut()));
        }
        // Exact fit of an entry over an entry (values or reserved markers):
        // one word, in place, safe for readers; no gap changes.
        if same_slot && lmin == first && lmax == last && !lval.is_null() && !entry.is_null() {
            l.node.set_slot(l.off, entry);
            let mut removed = Removed::default();
            removed.push(lval);
            self.len.set(self.len.get() + usize::from(is_value(entry)) - usize::from(is_value(lval)));
            return Ok(Stored { removed, retired: Retired::default() });
        }

        // Cutting a value in two needs a second owner for the right piece;
        // a reserved marker is simply kept on both sides. With `rebase`, a
        // value whose start the store moves (its front overwritten) gets a
        // new handle for its new range too. Made before anything changes.
        let is_split = same_slot && lmin < first && rmax > last && is_value(lval);
        let rebased = !is_split && rebase && rmax > last && is_value(rval);
        let split_word = if is_split || rebased {
            match split {
                Some(f) => f(rval, rmin, last + 1, rmax),
                None => return Err((StoreFail::NeedSplit, ptr::null_mut())),
            }
        } else {
            ptr::null_mut()
        };
        let keep_left = lmin < first;
        // The right neighbour's slot stays as it is (same handle), unless
        // it was cut in two or rebased.
        let keep_right = rmax > last && !is_split && !rebased;

        // The new slots that replace l.off ..= r.off, and the values that
        // fall out of the tree.
        let mut pieces: ArrayVec<Item, 3> = ArrayVec::new();
        if keep_left {
            pieces.push(Item { last: first - 1, slot: lval, gap: 0 });
        }
        pieces.push(Item { last, slot: entry, gap: 0 });
        if rmax > last {
            let v = if is_split || rebased { split_word } else { rval };
            pieces.push(Item { last: rmax, slot: v, gap: 0 });
        }
        let mut removed = Removed::default();
        if l.node == r.node {
            for k in l.off..=r.off {
                if !(k == l.off && keep_left || k == r.off && keep_right) {
                    removed.push(l.node.slot(k));
                }
            }
        } else {
            for k in l.off..l.node.count() {
                if !(k == l.off && keep_left) {
                    removed.push(l.node.slot(k));
                }
            }
            for k in 0..=r.off {
                if !(k == r.off && keep_right) {
                    removed.push(r.node.slot(k));
                }
            }
        }
        let delta_add = usize::from(is_value(entry)) + usize::from(is_split || rebased);

        // Fast path: the change stays inside one leaf that keeps a legal
        // fill, and `&mut` proves no reader exists: shift the tail in place.
        if !self.rcu && l.node == r.node {
            let count = l.node.count();
            let new_count = count - (r.off - l.off + 1) + pieces.len();
            let exempt = leaf == 0 || l.max == u64::MAX;
            let legal = new_count <= Kind::Leaf.slots()
                && (new_count >= Kind::Leaf.min_fill() || exempt)
                && !(leaf == 0 && new_count == 1 && entry.is_null());
            if legal {
                // SAFETY: `!self.rcu`: the tree is written through `&mut`
                // (the caller's contract for non-RCU stores), so no reader
                // exists.
                unsafe { l.node.splice_leaf(l.off, r.off + 1, count, &pieces) };
                self.update_gaps(&lpath, leaf);
                self.len.set(self.len.get() + delta_add - removed.len());
                return Ok(Stored { removed, retired: Retired::default() });
            }
        }

        // Leaf-level content.
        let mut content = Content::new();
        l.node.read_items(l.max, 0..l.off, &mut content);
        content.extend(pieces);
        let rcount = r.node.count();
        r.node.read_items(r.max, r.off + 1..rcount, &mut content);

        // Whole subtrees strictly between the two paths.
        let mut doomed: Vec<NodeRef> = Vec::new();
        for j in 0..leaf {
            let (a, b) = (lpath[j], rpath[j]);
            let (right_of_a, left_of_b) =
                if a.node == b.node { (a.off + 1..b.off, 0..0) } else { (a.off + 1..a.node.count(), 0..b.off) };
            for c in right_of_a {
                // SAFETY: internal node (above the leaves), used slot.
                doomed.push(unsafe { a.node.child(c) });
            }
            for c in left_of_b {
                // SAFETY: internal node (above the leaves), used slot.
                doomed.push(unsafe { b.node.child(c) });
            }
        }

        // SAFETY: the caller makes us the tree's only writer.
        let mut fresh = unsafe { Fresh::new(&self.slab) };
        let mut old: ArrayVec<NodeRef, 160> = ArrayVec::new();
        let plan = self.plan(&mut lpath, &mut rpath, &mut content, &mut fresh, &mut old);
        let publish = match plan {
            Ok(p) => p,
            Err(e) => {
                fresh.abandon();
                return Err((e.into(), split_word));
            }
        };

        // ---- commit: nothing below can fail ----
        for n in &fresh.nodes {
            if !n.is_leaf() {
                fix_children(*n);
            }
        }
        let top_level = self.publish(publish, &lpath, &content);
        if let Some(level) = top_level {
            self.update_gaps(&lpath, level);
        }
        // SAFETY: the caller makes us the only writer.
        unsafe { self.collapse_root(&mut old, &fresh) };
        let mut retired = Retired::default();
        if self.rcu {
            // Readers may still be inside: mark dead, hand over for a grace
            // period. Values inside doomed subtrees leave the tree now.
            for &n in &old {
                n.mark_dead();
                retired.push(n);
            }
            for d in doomed {
                collect_subtree(d, &mut retired, &mut removed);
            }
        } else {
            for &n in &old {
                // SAFETY: replaced nodes are unreachable now; each is listed
                // once; we are the only writer (the caller's contract).
                unsafe { self.slab.free(n) };
            }
            for d in doomed {
                // SAFETY: subtrees inside [first, last] are unreachable now.
                unsafe { free_subtree(&self.slab, d, Some(&mut |v| removed.push(v))) };
            }
        }
        self.len.set(self.len.get() + delta_add - removed.len());
        Ok(Stored { removed, retired })
    }

    /// [`store`](Self::store) through `&mut`: no reader can exist, so nodes
    /// retired in fresh-node mode are freed at once. Returns the removed
    /// value words.
    ///
    /// # Safety
    ///
    /// As for [`store`](Self::store).
    pub(crate) unsafe fn store_mut(
        &mut self,
        first: u64,
        last: u64,
        entry: *mut (),
        insert_only: bool,
        split: Option<Piece<'_>>,
        rebase: bool,
    ) -> Result<Removed, (StoreFail, *mut ())> {
        // SAFETY: the caller's contract; `&mut self` makes us the only writer
        // and rules out readers.
        let stored = unsafe { self.store(first, last, entry, insert_only, split, rebase) }?;
        for n in stored.retired.iter() {
            // SAFETY: retired nodes are unreachable and, with no readers,
            // need no grace period; each is listed once; `&mut self`.
            unsafe { self.slab.free(n) };
        }
        Ok(stored.removed)
    }

    /// If the range just before `first` is empty, returns its start and
    /// moves `lpath` onto it.
    fn empty_before(&self, lpath: &mut Path, first: u64) -> Option<u64> {
        let leaf = lpath.len() - 1;
        let l = &mut lpath[leaf];
        let (lmin, _) = l.slot_range();
        if l.node.slot(l.off).is_null() {
            return Some(lmin);
        }
        if lmin != first || first == 0 {
            return None;
        }
        if l.off > 0 {
            if !l.node.slot(l.off - 1).is_null() {
                return None;
            }
            l.off -= 1;
            return Some(l.slot_range().0);
        }
        // The previous range is in another leaf.
        let (lo, _, v) = self.lookup(first - 1);
        if !v.is_null() {
            return None;
        }
        self.walk_into(lo, lpath);
        Some(lo)
    }

    /// If the range just after `last` is empty, returns its end and moves
    /// `rpath` onto it.
    fn empty_after(&self, rpath: &mut Path, last: u64) -> Option<u64> {
        let leaf = rpath.len() - 1;
        let r = &mut rpath[leaf];
        let (_, rmax) = r.slot_range();
        if r.node.slot(r.off).is_null() {
            return Some(rmax);
        }
        if rmax != last || last == u64::MAX {
            return None;
        }
        if r.off + 1 < r.node.count() {
            if !r.node.slot(r.off + 1).is_null() {
                return None;
            }
            r.off += 1;
            return Some(r.slot_range().1);
        }
        let (_, hi, v) = self.lookup(last + 1);
        if !v.is_null() {
            return None;
        }
        self.walk_into(hi, rpath);
        Some(hi)
    }

    /// Store into an empty tree.
    ///
    /// # Safety
    ///
    /// As for [`store`](Self::store).
    unsafe fn store_empty_root(&self, first: u64, last: u64, entry: *mut ()) -> Result<Stored, StoreFail> {
        let none = Stored { removed: Removed::default(), retired: Retired::default() };
        if entry.is_null() {
            return Ok(none);
        }
        let mut content = Content::new();
        if first > 0 {
            content.push(Item { last: first - 1, slot: ptr::null_mut(), gap: 0 });
        }
        content.push(Item { last, slot: entry, gap: 0 });
        if last < u64::MAX {
            content.push(Item { last: u64::MAX, slot: ptr::null_mut(), gap: 0 });
        }
        // SAFETY: the caller makes us the only writer.
        let node = unsafe { self.slab.alloc(Kind::Leaf) }?;
        node.fill(&content);
        node.set_root_parent();
        self.root.store(node.encode(), Ordering::Release);
        self.height.set(1);
        self.len.set(usize::from(is_value(entry)));
        Ok(none)
    }

    /// Phase 1: allocate and fill every new node, level by level.
    fn plan(
        &self,
        lpath: &mut Path,
        rpath: &mut Path,
        content: &mut Content,
        fresh: &mut Fresh,
        old: &mut ArrayVec<NodeRef, 160>,
    ) -> Result<Publish, AllocError> {
        let leaf = lpath.len() - 1;
        let mut d = leaf;
        let mut cmin = lpath[leaf].min;
        let mut cmax = rpath[leaf].max;
        loop {
            let kind = if d == leaf { Kind::Leaf } else { self.inner_kind() };
            let mut extended = false;
            if d > 0 && content.len() < kind.min_fill() && cmax != u64::MAX {
                cmax = absorb_right(lpath, rpath, d, old, content);
                extended = true;
            }
            let mut ends = split_points(content, kind, cmax == u64::MAX);
            // Push into the right sibling before splitting (the kernel's
            // `mas_push_data`): a node that overflows into two, beside a
            // sibling (same parent) with room, is rewritten together with
            // that sibling as two nodes instead of becoming two beside it.
            // Random inserts then leave fuller nodes behind.
            if !extended && ends.len() == 2 && d > 0 && lpath[d].node == rpath[d].node {
                let p = lpath[d - 1];
                let fits = |off: usize| {
                    // SAFETY: `p` is an internal node (above level d) and the
                    // callers pass a used slot of it.
                    let sib = unsafe { p.node.child(off) };
                    content.len() + sib.count() + PUSH_SLACK <= 2 * kind.slots()
                };
                // One node at this level: both paths share the parent slot.
                if cmax != u64::MAX && p.off + 1 < p.node.count() && fits(p.off + 1) {
                    cmax = absorb_right(lpath, rpath, d, old, content);
                    extended = true;
                } else if p.off > 0 && fits(p.off - 1) {
                    let nb = left_sibling(lpath, d);
                    let mut joined = Content::new();
                    nb.node.read_items(nb.max, 0..nb.node.count(), &mut joined);
                    joined.extend(content.drain(..));
                    *content = joined;
                    cmin = nb.min;
                    extended = true;
                }
                if extended {
                    ends = split_points(content, kind, cmax == u64::MAX);
                }
            }
            let single = !extended && lpath[d].node == rpath[d].node;
            if single && ends.len() == 1 {
                if !self.rcu {
                    return Ok(Publish::InPlace { level: d });
                }
                let node = fresh.alloc(kind)?;
                node.fill(content);
                old.push(lpath[d].node);
                return Ok(Publish::Replace { level: d, node });
            }
            old.push(lpath[d].node);
            if rpath[d].node != lpath[d].node {
                old.push(rpath[d].node);
            }
            let mut up: ArrayVec<Item, 8> = ArrayVec::new();
            let mut start = 0;
            let mut part_min = cmin;
            for &end in &ends {
                let node = fresh.alloc(kind)?;
                let part = &content[start..end];
                node.fill(part);
                let part_max = part[part.len() - 1].last;
                let gap = if self.gaps { node.max_gap(part_min, part_max) } else { 0 };
                up.push(Item { last: part_max, slot: node.encode(), gap });
                part_min = part_max.wrapping_add(1);
                start = end;
            }
            if d == 0 {
                let mut height = lpath.len();
                while up.len() > 1 {
                    let node = fresh.alloc(self.inner_kind())?;
                    node.fill(&up);
                    let gap = if self.gaps { node.max_gap(0, u64::MAX) } else { 0 };
                    up.clear();
                    up.push(Item { last: u64::MAX, slot: node.encode(), gap });
                    height += 1;
                }
                // SAFETY: `up[0]` encodes a fresh node.
                let node = unsafe { NodeRef::decode(up[0].slot) };
                return Ok(Publish::Root { node, height });
            }
            let (lp, rp) = (lpath[d - 1], rpath[d - 1]);
            content.clear();
            lp.node.read_items(lp.max, 0..lp.off, content);
            content.extend(up);
            rp.node.read_items(rp.max, rp.off + 1..rp.node.count(), content);
            cmin = lp.min;
            cmax = rp.max;
            d -= 1;
        }
    }

    /// Makes the plan visible. Returns the level whose ancestors' gaps must
    /// be refreshed (None when the root changed).
    fn publish(&self, publish: Publish, lpath: &Path, content: &Content) -> Option<usize> {
        match publish {
            Publish::InPlace { level } => {
                let node = lpath[level].node;
                node.fill(content);
                if !node.is_leaf() {
                    fix_children(node);
                }
                Some(level)
            }
            Publish::Replace { level: 0, node } => {
                self.set_root(node, self.height.get());
                None
            }
            Publish::Replace { level, node } => {
                let p = lpath[level - 1];
                node.set_parent(p.node, p.off);
                p.node.set_slot(p.off, node.encode());
                Some(level)
            }
            Publish::Root { node, height } => {
                self.set_root(node, height);
                None
            }
        }
    }

    fn set_root(&self, node: NodeRef, height: usize) {
        node.set_root_parent();
        self.root.store(node.encode(), Ordering::Release);
        self.height.set(height);
    }

    /// Drops root levels with a single child, and a root leaf that holds
    /// only one empty range (the tree is then empty).
    ///
    /// # Safety
    ///
    /// As for [`store`](Self::store).
    unsafe fn collapse_root(&self, old: &mut ArrayVec<NodeRef, 160>, fresh: &Fresh<'_>) {
        let Some(mut node) = self.root_node() else {
            return;
        };
        // The freeing rule (docs/DESIGN.md, "Who frees"): in RCU mode a node
        // that readers could have reached since it was published waits for
        // the grace period. Every node here was reachable from the root
        // published above, fresh or not, so in RCU mode all of them are
        // retired; only without readers may a fresh one be freed at once.
        let retire = |n: NodeRef, old: &mut ArrayVec<NodeRef, 160>| {
            if !self.rcu && fresh.nodes.contains(&n) {
                // SAFETY: no reader exists (not RCU mode); a fresh node is
                // listed nowhere else and is now unreachable; we are the
                // only writer (this function's contract).
                unsafe { self.slab.free(n) };
            } else {
                old.push(n);
            }
        };
        let mut changed = false;
        while !node.is_leaf() && node.count() == 1 {
            // SAFETY: internal node with one used slot.
            let child = unsafe { node.child(0) };
            retire(node, old);
            node = child;
            self.height.set(self.height.get() - 1);
            changed = true;
        }
        if node.is_leaf() && node.count() == 1 && node.slot(0).is_null() {
            retire(node, old);
            self.root.store(ptr::null_mut(), Ordering::Release);
            self.height.set(0);
        } else if changed {
            self.set_root(node, self.height.get());
        }
    }

    /// Refreshes the gap recorded for `lpath[level].node`'s position in each
    /// ancestor, stopping as soon as a value does not change. A parent's own
    /// largest gap is kept incrementally through its largest-gap offset; it
    /// is rescanned only when its largest child gap shrank.
    pub(crate) fn update_gaps(&self, lpath: &Path, level: usize) {
        if !self.gaps {
            return;
        }
        if level == 0 {
            return;
        }
        // The node now in the parent's slot (a fresh one may have replaced
        // `lpath[level].node`).
        let p = lpath[level - 1];
        // SAFETY: internal node, used slot.
        let child = unsafe { p.node.child(p.off) };
        let mut g = child.max_gap(lpath[level].min, lpath[level].max);
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

/// Marks every node of an unlinked subtree dead and lists it in `retired`,
/// and its value words in `removed` (RCU mode: freed after a grace period).
fn collect_subtree(node: NodeRef, retired: &mut Retired, removed: &mut Removed) {
    for i in 0..node.count() {
        if node.is_leaf() {
            removed.push(node.slot(i));
        } else {
            // SAFETY: internal node, used slot; the subtree is still allocated.
            collect_subtree(unsafe { node.child(i) }, retired, removed);
        }
    }
    node.mark_dead();
    retired.push(node);
}

/// Points every child of `node` back at it.
fn fix_children(node: NodeRef) {
    for i in 0..node.count() {
        // SAFETY: internal node, used slot.
        unsafe { node.child(i) }.set_parent(node, i);
    }
}

/// Moves the right path at level `d` to the next node to the right (a
/// sibling, or a cousin under a different parent) and returns it. Nodes that
/// leave the right path are queued in `old`. The caller has checked that
/// the current right node is not on the right-most spine, so a neighbour
/// exists.
fn right_neighbour(lpath: &Path, rpath: &mut Path, d: usize, old: &mut ArrayVec<NodeRef, 160>) -> Level {
    let mut j = d;
    while j > 0 {
        j -= 1;
        if rpath[j].off + 1 < rpath[j].node.count() {
            break;
        }
    }
    debug_assert!(rpath[j].off + 1 < rpath[j].node.count(), "no right neighbour");
    for k in j + 1..=d {
        if rpath[k].node != lpath[k].node {
            old.push(rpath[k].node);
        }
    }
    rpath[j].off += 1;
    rpath.truncate(j + 1);
    while rpath.len() <= d {
        let top = rpath[rpath.len() - 1];
        let (min, max) = top.slot_range();
        // SAFETY: internal node (we are above level d), used slot.
        let node = unsafe { top.node.child(top.off) };
        rpath.push(Level { node, min, max, off: 0 });
    }
    rpath[d]
}

/// Moves `rpath` at level `d` onto the next node to the right (see
/// [`right_neighbour`]), appends that node's items to `content`, and
/// returns the new right bound of the content.
fn absorb_right(
    lpath: &Path,
    rpath: &mut Path,
    d: usize,
    old: &mut ArrayVec<NodeRef, 160>,
    content: &mut Content,
) -> u64 {
    let nb = right_neighbour(lpath, rpath, d, old);
    nb.node.read_items(nb.max, 0..nb.node.count(), content);
    nb.max
}

/// Moves `lpath` at level `d` onto the left sibling (same parent) of the
/// node it is on, and returns that level. The node it leaves stays on
/// `rpath`, which the caller retires with it.
fn left_sibling(lpath: &mut Path, d: usize) -> Level {
    let p = &mut lpath[d - 1];
    debug_assert!(p.off > 0, "no left sibling");
    p.off -= 1;
    let (min, max) = p.slot_range();
    // SAFETY: internal node (above level d), used slot.
    let node = unsafe { p.node.child(p.off) };
    lpath[d] = Level { node, min, max, off: 0 };
    lpath[d]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf that overflows beside a sibling with room is rewritten with
    /// it as two leaves (a push), not split into a third; the contents
    /// stay exact. Either direction: the right sibling first, else the
    /// left one.
    #[test]
    fn an_overflowing_leaf_pushes_into_a_sibling_with_room() {
        use crate::{MapleTree, U63};
        let leaves = |t: &MapleTree<U63>| t.stats().leaves;
        // Twenty touching ranges: a full first leaf (16 slots), a second
        // with the other four and the empty rest.
        let build = || -> MapleTree<U63> {
            MapleTree::from_sorted((0..20u64).map(|i| (i * 10..=i * 10 + 9, U63::new(i).unwrap()))).unwrap()
        };
        let mut t = build();
        assert_eq!(leaves(&t), 2);
        // Cutting an entry of the full leaf in three needs two more slots.
        t.store_range(52..=53, U63::new(99).unwrap()).unwrap();
        assert_eq!(leaves(&t), 2, "split instead of a push into the right sibling");
        t.validate().unwrap();
        let got: Vec<_> = t.iter().map(|(r, v)| (r, v.get())).collect();
        assert_eq!(got.len(), 22);
        assert_eq!(got[5..8], [(50..=51, 5), (52..=53, 99), (54..=59, 5)]);
        // The left sibling: the last leaf (no right sibling: it ends the
        // index space) overflows when the first has room.
        let mut t = build();
        t.store_range(0..=99, U63::new(7).unwrap()).unwrap(); // first leaf: 7 slots
        for (k, at) in [161u64, 164, 167, 171, 174, 177].into_iter().enumerate() {
            // Each point cuts an entry of the last leaf in three: 5 slots
            // become 17 at the sixth.
            t.store_range(at..=at, U63::new(50 + k as u64).unwrap()).unwrap();
        }
        t.validate().unwrap();
        assert_eq!(t.len(), 11 + 12);
        assert_eq!(leaves(&t), 2, "split instead of a push into the left sibling");
        assert_eq!(t.load(167).map(U63::get), Some(52));
        assert_eq!(t.load(168).map(U63::get), Some(16));
    }

    fn items(pattern: &[bool]) -> Content {
        pattern
            .iter()
            .enumerate()
            .map(|(i, &full)| Item {
                last: i as u64,
                slot: if full { ptr::without_provenance_mut(1) } else { ptr::null_mut() },
                gap: 0,
            })
            .collect()
    }

    #[test]
    fn split_points_balance_and_avoid_ending_on_empty() {
        for n in 1..=54usize {
            // Alternate entries and empty slots, as a fragmented leaf would.
            let pattern: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
            let c = items(&pattern);
            for (kind, spine) in
                [Kind::Leaf, Kind::Range64, Kind::Arange64].into_iter().flat_map(|k| [(k, false), (k, true)])
            {
                let ends = split_points(&c, kind, spine);
                assert_eq!(*ends.last().unwrap(), n);
                let mut start = 0;
                for (p, &end) in ends.iter().enumerate() {
                    let size = end - start;
                    assert!(size <= kind.slots(), "n={n} {kind:?}: part of {size}");
                    let exempt = spine && p + 1 == ends.len();
                    if ends.len() > 1 && !exempt {
                        assert!(size >= kind.min_fill(), "n={n} {kind:?} spine={spine}: part of {size}");
                    }
                    assert!(size >= 1);
                    if kind.is_leaf() && p + 1 < ends.len() {
                        assert!(!c[end - 1].slot.is_null(), "n={n}: leaf part ends on empty");
                    }
                    start = end;
                }
            }
        }
    }
}
