//! The general write: rebuild the touched part of the tree in fresh
//! nodes.
//!
//! 1. **Plan** (nothing visible changes). Build the new content of the leaf
//!    level: the left leaf's entries before the write, the new pieces, the
//!    right leaf's entries after it. Then, level by level upwards: if the
//!    content is below minimum fill (and not on the right spine), pull in
//!    the next node to the right (sibling or cousin); if it would split in
//!    two beside a sibling with room, take the sibling in instead (a push);
//!    distribute the content over 1–4 fresh nodes (balanced, never ending a
//!    leaf part on an empty slot when avoidable); the new nodes become the
//!    replacement items of the level above, surrounded by the untouched
//!    items of the left and right parents. Stop at the first level where one
//!    node is replaced by one node with the same bounds, or at the root
//!    (which may grow a level, or collapse). Every node is allocated here;
//!    a failed allocation frees the fresh nodes and returns with the tree
//!    untouched. Given an [`Exclusive`] (no reader can be in the tree),
//!    where the parent takes a level's new nodes in place, the old leaves are listed to take the first parts
//!    themselves (a push then allocates nothing, a split one leaf).
//! 2. **Commit** (cannot fail). Set the parent words of the children of the
//!    fresh nodes, publish the new subtree with one pointer store (or, when
//!    `&mut` access proves no reader exists, overwrite the one changed node
//!    in place, or write the listed old leaves and splice the parent in
//!    place), update the gaps of the ancestors, then free the replaced
//!    nodes and the subtrees that fell inside the written range.

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr;

use arrayvec::ArrayVec;

use super::{Removed, Retired, StoreFail, Stored};
use crate::{
    alloc::Slab,
    error::AllocError,
    navigate::{descend_left_edge_to, fork_level, sibling_at},
    node::{Content, Item, Kind, NodeRef},
    raw::{free_subtree, leaf_words, visit_subtree, Access, Exclusive, Level, Path, RawTree},
    sync::Ordering,
};

/// How the planned change becomes visible.
// One per rebuild, on its stack: boxing the splice would cost an allocation.
#[allow(clippy::large_enum_variant)]
enum Publish<'t> {
    /// Overwrite this leaf with the final content, in place: no reader can
    /// be in it (`ex`).
    InPlace { level: usize, ex: Exclusive<'t> },
    /// Replace the slots of this internal node from the path's slot to
    /// `to` (of `count`) with `up`, the new nodes of the level below,
    /// shifting the others, in place (no reader can be in it: `ex`); first
    /// overwrite the old leaves the plan listed for reuse (some of `up`)
    /// with their parts.
    Splice { level: usize, to: usize, count: usize, up: ArrayVec<Item, 8>, ex: Exclusive<'t> },
    /// Store this fresh node into its parent's slot (or as the root at level 0).
    Replace { level: usize, node: NodeRef<'t> },
    /// New root (possibly taller or shorter than before).
    Root { node: NodeRef<'t>, height: usize },
}

/// Free slots a push into a sibling must leave across the two leaves it
/// writes. The kernel's slacks, as its `mas_push_data` reads (two for
/// leaves, one for internal nodes; its sibling is left one or two short
/// of full, ours full: [`PUSH_SIBLING_ROOM`]). A push rewrites both
/// nodes, costing about what a split does, and the less room it leaves
/// the sooner the next one comes: the trade is time for nodes.
///
/// These slacks leave fewer nodes than the kernel's own tree at every
/// size the report measures (docs/BENCHMARKS.md, the node counts against
/// the kernel's); less slack saves a few nodes more but pushes so often
/// that random inserts slow down. Odd slacks leave more nodes than the
/// even one below them.
const PUSH_SLACK: usize = 2;

/// [`PUSH_SLACK`] for internal nodes.
const PUSH_SLACK_INNER: usize = 1;

/// The push rule's slack for nodes of `kind`.
#[inline]
fn push_slack(kind: Kind) -> usize {
    if kind.is_leaf() {
        PUSH_SLACK
    } else {
        PUSH_SLACK_INNER
    }
}

/// The push rule, for the rebuild and the in-place refill alike: `n`
/// items of `kind` that overflow one node go into it and a sibling of
/// `sibling` items where the pair keeps the push slack free (right sibling
/// first, then left, is the callers' order).
#[inline]
pub(super) fn push_fits(n: usize, sibling: usize, kind: Kind) -> bool {
    n + sibling + push_slack(kind) <= 2 * kind.slots()
}

/// The underflow rule, for both too: `n` items of `kind` are too few for
/// a node, unless it ends the tree (the right-most spine is exempt).
#[inline]
pub(super) fn underflows(n: usize, kind: Kind, right_spine: bool) -> bool {
    n < kind.min_fill() && !right_spine
}

/// Where the content of a node that overflows goes, by one rule for the
/// rebuild (at every level) and the in-place refill (a leaf and its
/// parent): a sibling under the same parent with room for a push takes
/// part of it (the right one first, then the left), else the node splits.
/// The siblings' counts are asked for only as the rule needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Overflow {
    PushRight,
    PushLeft,
    Split,
}

/// The rule of [`Overflow`], for `n` items of `kind`, given the item
/// counts of the right and left siblings (`None`: no such sibling).
#[inline(always)]
pub(super) fn overflow(
    n: usize,
    kind: Kind,
    right: impl FnOnce() -> Option<usize>,
    left: impl FnOnce() -> Option<usize>,
) -> Overflow {
    if right().is_some_and(|c| push_fits(n, c, kind)) {
        Overflow::PushRight
    } else if left().is_some_and(|c| push_fits(n, c, kind)) {
        Overflow::PushLeft
    } else {
        Overflow::Split
    }
}

/// Where a push's content (`total` items: the node's and its sibling's,
/// in key order; `empty(i)`: item `i` is an empty slot) is cut in two,
/// for both the rebuild and the refill: for leaves the sibling's part
/// nearly full and the rest to the node the write went to, for internal
/// nodes balanced (`right_spine`: the pair ends the tree). `None` where
/// the leaves' biased cut cannot be made (the rebuild then cuts balanced;
/// the refill leaves the write to it).
#[inline(always)]
pub(super) fn push_cut(
    total: usize,
    empty: impl Fn(usize) -> bool + Copy,
    kind: Kind,
    shape: Overflow,
    right_spine: bool,
) -> Option<usize> {
    if kind.is_leaf() {
        let sibling_part = kind.slots() - PUSH_SIBLING_ROOM;
        let want = if shape == Overflow::PushLeft { sibling_part } else { total.saturating_sub(sibling_part) };
        biased_split(total, empty, kind, want)
    } else {
        let ends = split_points_by(total, empty, kind, right_spine);
        (ends.len() == 2).then(|| ends[0])
    }
}

/// Free slots a leaf push leaves in the sibling: none. The leaf that
/// overflowed takes the rest, and with it the pair's slack for the next
/// inserts: with the slacks above this leaves the fewest nodes at small
/// sizes and large. Internal nodes are cut in balanced halves.
pub(super) const PUSH_SIBLING_ROOM: usize = 0;

/// An old leaf that takes one part of the new content in place of a fresh
/// node (where no reader can be in it and its parent takes the level's
/// new nodes in place): written at commit, so a plan that fails has changed nothing.
/// The reused leaves take the first parts, so the `k`-th of them is item
/// `k` of the level's new nodes (whose gap is found at commit).
struct Reuse<'t> {
    node: NodeRef<'t>,
    /// The part: `content[start..end]`, lower bound `min`.
    start: usize,
    end: usize,
    min: u64,
    /// Leading items of the part that are the node's own already, unmoved.
    keep: usize,
}

/// Nodes allocated by a plan; freed again if the plan fails.
struct Fresh<'t> {
    slab: &'t Slab,
    nodes: ArrayVec<NodeRef<'t>, 160>,
}

impl<'t> Fresh<'t> {
    /// # Safety
    ///
    /// While the result lives, the caller is the only user of `slab` (as
    /// for [`Slab::alloc`]).
    unsafe fn new(slab: &'t Slab) -> Self {
        Fresh { slab, nodes: ArrayVec::new() }
    }

    /// A fresh node of `kind` holding `items`.
    fn alloc(&mut self, kind: Kind, items: &[Item]) -> Result<NodeRef<'t>, AllocError> {
        // SAFETY: `new`'s contract makes us the slab's only user.
        let n = unsafe { self.slab.alloc(kind) }?.fill(items);
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
pub(super) fn split_points(content: &[Item], kind: Kind, right_spine: bool) -> ArrayVec<usize, 8> {
    split_points_by(content.len(), |i| content[i].slot.is_null(), kind, right_spine)
}

/// [`split_points`] for `n` items of which `empty(i)` says which are empty
/// slots.
pub(super) fn split_points_by(
    n: usize,
    empty: impl Fn(usize) -> bool + Copy,
    kind: Kind,
    right_spine: bool,
) -> ArrayVec<usize, 8> {
    let mut k = n.div_ceil(kind.slots());
    loop {
        if let Some(ends) = try_split(n, empty, kind, k, right_spine) {
            return ends;
        }
        k += 1;
    }
}

/// The end of the first of two parts `n` items are cut into, at `want` or
/// a slot either side of it: both parts legal (within capacity and minimum
/// fill) and the first not ending on an empty slot (`empty(i)`: item `i`
/// is one). `None` if none is.
pub(super) fn biased_split(n: usize, empty: impl Fn(usize) -> bool, kind: Kind, want: usize) -> Option<usize> {
    let cap = kind.slots();
    let min = kind.min_fill();
    [want, want + 1, want.wrapping_sub(1)]
        .into_iter()
        .find(|&e| e >= min && e <= cap && n - e >= min && n - e <= cap && !empty(e - 1))
}

/// [`split_points`] into exactly `k` parts, if that can be done, for `n`
/// items of which `empty(i)` says which are empty slots.
pub(super) fn try_split(
    n: usize,
    empty: impl Fn(usize) -> bool,
    kind: Kind,
    k: usize,
    right_spine: bool,
) -> Option<ArrayVec<usize, 8>> {
    let mut ends = ArrayVec::new();
    let mut start = 0;
    for p in 0..k - 1 {
        let end = next_cut(n, &empty, kind, start, k - p, right_spine)?;
        ends.push(end);
        start = end;
    }
    ends.push(n);
    Some(ends)
}

/// The end of the part that starts at `start` when items `start..n` are
/// cut into `parts_left` parts (see [`split_points`]): balanced, or full
/// on the right spine, and for leaves not ending on an empty slot (the
/// slot after one is then taken too, or the empty one left to the next
/// part). `None` if no end is legal.
#[inline]
pub(super) fn next_cut(
    n: usize,
    empty: impl Fn(usize) -> bool,
    kind: Kind,
    start: usize,
    parts_left: usize,
    right_spine: bool,
) -> Option<usize> {
    let cap = kind.slots();
    let mut end = if right_spine {
        start + cap.min(n - start - (parts_left - 1))
    } else {
        start + (n - start).div_ceil(parts_left)
    };
    if kind.is_leaf() && empty(end - 1) {
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
    Some(end)
}

impl RawTree {
    /// The general write: `pieces` replace the slots from `lpath`'s leaf
    /// slot to `rpath`'s; `out.removed` lists the values that leave the
    /// tree (the rebuild adds those of whole subtrees the write covers, and
    /// the replaced nodes to `out.retired`) and `added` how many enter it.
    /// On failure nothing has changed (and `out` is the caller's to empty).
    /// The access `t` is both the tree and, where it is an [`Exclusive`],
    /// the proof that no reader can be in it: one value, so the proof the
    /// in-place steps use is always this tree's.
    ///
    /// # Safety
    ///
    /// As for [`store`](RawTree::store).
    // Out of line: its plan buffers (about 10 KiB of stack) would otherwise
    // make every write's frame that big, the writes the lane finishes in
    // place too.
    #[inline(never)]
    pub(super) unsafe fn rebuild<'t>(
        t: impl Access<'t>,
        lpath: &mut Path<'t>,
        rpath: &mut Path<'t>,
        pieces: &[Item],
        out: &mut Stored,
        added: usize,
    ) -> Result<(), StoreFail> {
        let (this, ex) = (t.tree(), t.no_readers());
        let leaf = lpath.len() - 1;
        let (l, r) = (lpath[leaf], rpath[leaf]);
        // Leaf-level content.
        let mut content = Content::new();
        l.node.read_items(l.max, 0..l.off, &mut content);
        content.extend(pieces.iter().copied());
        let rcount = r.node.count();
        r.node.read_items(r.max, r.off + 1..rcount, &mut content);

        // Whole subtrees strictly between the two paths.
        let mut doomed: Vec<NodeRef<'t>> = Vec::new();
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
        let mut fresh = unsafe { Fresh::new(&this.slab) };
        let mut old: ArrayVec<NodeRef<'t>, 160> = ArrayVec::new();
        let mut reuse = ArrayVec::new();
        let plan = this.plan(ex, lpath, rpath, &mut content, &mut fresh, &mut old, &mut reuse);
        let publish = match plan {
            Ok(p) => p,
            Err(e) => {
                fresh.abandon();
                return Err(e.into());
            }
        };

        // ---- commit: nothing below can fail ----
        for n in &fresh.nodes {
            if !n.is_leaf() {
                fix_children(*n);
            }
        }
        // SAFETY: the plan just made from these paths, unchanged since (the
        // parent words above only); we are the only writer (our contract).
        let top_level = unsafe { this.publish(publish, lpath, &content, &reuse) };
        if let Some(level) = top_level {
            this.update_gaps(lpath, level);
        }
        // SAFETY: the caller makes us the only writer.
        unsafe { this.collapse_root(ex, &mut old, &fresh) };
        let Stored { removed, retired } = out;
        if let Some(ex) = ex {
            for &n in &old {
                // SAFETY: `ex`: no reader can be in them; replaced nodes are
                // unreachable now; each is listed once; we are the only
                // writer (the caller's contract).
                unsafe { ex.slab.free(n) };
            }
            for d in doomed {
                // SAFETY: as above: subtrees inside [first, last] are
                // unreachable now, and no reader is in them.
                unsafe { free_subtree(&ex.slab, d, Some(&mut |v| removed.push(v))) };
            }
        } else {
            // Readers may still be inside: mark dead, hand over for a grace
            // period. Values inside doomed subtrees leave the tree now.
            for &n in &old {
                n.mark_dead();
                retired.push(n.into());
            }
            for d in doomed {
                collect_subtree(d, retired, removed);
            }
        }
        this.len.set(this.len.get() + added - removed.len());
        Ok(())
    }

    /// Phase 1: allocate and fill every new node, level by level; list in
    /// `reuse` the old leaves that take a part at commit instead (only
    /// with `ex`, where no reader can be in them).
    #[allow(clippy::too_many_arguments)]
    fn plan<'t>(
        &'t self,
        ex: Option<Exclusive<'t>>,
        lpath: &mut Path<'t>,
        rpath: &mut Path<'t>,
        content: &mut Content,
        fresh: &mut Fresh<'t>,
        old: &mut ArrayVec<NodeRef<'t>, 160>,
        reuse: &mut ArrayVec<Reuse<'t>, 2>,
    ) -> Result<Publish<'t>, AllocError> {
        let leaf = lpath.len() - 1;
        // The leaf's items before this offset open the content unchanged.
        let mut leaf_kept = lpath[leaf].off;
        let mut d = leaf;
        let mut cmin = lpath[leaf].min;
        let mut cmax = rpath[leaf].max;
        loop {
            let kind = if d == leaf { Kind::Leaf } else { self.inner_kind() };
            let mut extended = false;
            if d > 0 && underflows(content.len(), kind, cmax == u64::MAX) {
                cmax = absorb_right(lpath, rpath, d, old, content);
                extended = true;
            }
            let mut ends = split_points(content, kind, cmax == u64::MAX);
            // Push into the right sibling before splitting (the kernel's
            // `mas_push_data`): a node that overflows into two, beside a
            // sibling (same parent) with room, is rewritten together with
            // that sibling as two nodes instead of becoming two beside it.
            // Random inserts then leave fuller nodes behind.
            // Push into a sibling before splitting (the kernel's
            // `mas_push_data`): a node that overflows into two, beside a
            // sibling (same parent) with room, is rewritten together with
            // that sibling as two nodes instead of becoming two beside it.
            // Random inserts then leave fuller nodes behind.
            if !extended && ends.len() == 2 && d > 0 && lpath[d].node == rpath[d].node {
                let p = lpath[d - 1];
                // SAFETY: `p` is an internal node (above level d) and the
                // offsets asked for are used slots of it.
                let count_at = |off: usize| unsafe { p.node.child(off) }.count();
                // One node at this level: both paths share the parent slot.
                let right = || (cmax != u64::MAX && p.off + 1 < p.node.count()).then(|| count_at(p.off + 1));
                let left = || (p.off > 0).then(|| count_at(p.off - 1));
                let shape = overflow(content.len(), kind, right, left);
                match shape {
                    Overflow::PushRight => {
                        cmax = absorb_right(lpath, rpath, d, old, content);
                        extended = true;
                    }
                    Overflow::PushLeft => {
                        let nb = left_sibling(lpath, d);
                        // The sibling's items go in front (read after,
                        // rotated: no copy of the whole content).
                        let k = nb.node.count();
                        nb.node.read_items(nb.max, 0..k, content);
                        content.rotate_right(k);
                        // All but the last: its bound becomes a pivot.
                        leaf_kept = k - 1;
                        cmin = nb.min;
                        extended = true;
                    }
                    Overflow::Split => {}
                }
                if extended {
                    let n = content.len();
                    ends = match push_cut(n, |i| content[i].slot.is_null(), kind, shape, cmax == u64::MAX) {
                        Some(e) => [e, n].into_iter().collect(),
                        None => split_points(content, kind, cmax == u64::MAX),
                    };
                }
            }
            let single = !extended && lpath[d].node == rpath[d].node;
            if single && ends.len() == 1 {
                if let Some(ex) = ex {
                    debug_assert!(d == leaf, "internal nodes take the splice below");
                    return Ok(Publish::InPlace { level: d, ex });
                }
                let node = fresh.alloc(kind, content)?;
                old.push(lpath[d].node);
                return Ok(Publish::Replace { level: d, node });
            }
            // Where the parent takes the new nodes in place, the old leaves
            // take their parts in place too (the first ones; a fresh leaf
            // for any part beyond): a split then allocates one leaf, a push
            // none, and the content mostly lands in nodes already in the
            // cache.
            let splice = ex.and_then(|ex| Some((ex.parent_takes(lpath, rpath, d, ends.len())?, ex)));
            let mut olds: ArrayVec<NodeRef<'t>, 2> = ArrayVec::new();
            olds.push(lpath[d].node);
            if rpath[d].node != lpath[d].node {
                olds.push(rpath[d].node);
            }
            let reusing = d == leaf && splice.is_some();
            let mut up: ArrayVec<Item, 8> = ArrayVec::new();
            let mut start = 0;
            let mut part_min = cmin;
            for (i, &end) in ends.iter().enumerate() {
                let part = &content[start..end];
                let part_max = part[part.len() - 1].last;
                if reusing && i < olds.len() {
                    let keep = if i == 0 { leaf_kept } else { 0 };
                    reuse.push(Reuse { node: olds[i], start, end, min: part_min, keep });
                    up.push(Item { last: part_max, slot: olds[i].encode(), gap: 0 });
                } else {
                    let node = fresh.alloc(kind, part)?;
                    up.push(self.item_for(node, part_min, part_max));
                }
                part_min = part_max.wrapping_add(1);
                start = end;
            }
            old.extend(olds.into_iter().skip(reuse.len()));
            if d == 0 {
                let mut height = lpath.len();
                while up.len() > 1 {
                    let node = fresh.alloc(self.inner_kind(), &up)?;
                    up.clear();
                    up.push(self.item_for(node, 0, u64::MAX));
                    height += 1;
                }
                // SAFETY: `up[0]` encodes a fresh node.
                let node = unsafe { NodeRef::decode(up[0].slot) };
                return Ok(Publish::Root { node, height });
            }
            let (lp, rp) = (lpath[d - 1], rpath[d - 1]);
            if let Some((count, ex)) = splice {
                return Ok(Publish::Splice { level: d - 1, to: rp.off, count, up, ex });
            }
            debug_assert!(reuse.is_empty());
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
    ///
    /// # Safety
    ///
    /// `publish`, `content` and `reuse` are what [`plan`](Self::plan) made
    /// of `lpath` on this tree, with nothing changed since but the fresh
    /// nodes' children's parent words; the caller is the tree's only writer
    /// (as for [`store`](RawTree::store)). The in-place kinds (`InPlace`,
    /// `Splice` with its reused leaves) carry the proof that no reader can
    /// be in the nodes they write; the plan makes them only with content
    /// that fits the nodes' places.
    unsafe fn publish<'t>(
        &'t self,
        publish: Publish<'t>,
        lpath: &Path<'t>,
        content: &Content,
        reuse: &[Reuse<'t>],
    ) -> Option<usize> {
        match publish {
            Publish::InPlace { level, ex } => {
                debug_assert!(ptr::eq(&*ex, self), "the proof is this tree's");
                // SAFETY: `ex`: no reader can be in the leaf; the content is
                // the leaf's own, rewritten over its bounds (this
                // function's contract).
                unsafe { lpath[level].node.overwrite(ex.proof(), content) };
                Some(level)
            }
            Publish::Splice { level, to, count, mut up, ex } => {
                debug_assert!(ptr::eq(&*ex, self), "the proof is this tree's");
                for (at, r) in reuse.iter().enumerate() {
                    let part = &content[r.start..r.end];
                    // SAFETY: `ex`: no reader can be in the leaf; the part's
                    // bounds are the ones the splice below gives the node;
                    // its first `keep` items are the node's own, in place
                    // (this function's contract).
                    unsafe { r.node.overwrite_from(ex.proof(), part, r.keep) };
                    if self.gaps {
                        up[at].gap = r.node.max_gap(r.min, part[part.len() - 1].last);
                    }
                }
                let Level { node, off, .. } = lpath[level];
                // SAFETY: `ex`: no reader can be in the node.
                unsafe { node.splice_internal(ex.proof(), off, to + 1, count, &up) };
                // Only the fresh children need their parent word: the others
                // stay under this node, shifted or not. (Touching them would
                // cost a cache miss each in a big tree.)
                for i in off..off + up.len() {
                    // SAFETY: an internal node's used slot (the fresh nodes
                    // were spliced in at the path's slot).
                    unsafe { node.child(i) }.set_parent(node);
                }
                Some(level)
            }
            Publish::Replace { level: 0, node } => {
                self.set_root(node, self.height.get());
                None
            }
            Publish::Replace { level, node } => {
                let p = lpath[level - 1];
                node.set_parent(p.node);
                // SAFETY: the fresh node replaces the one in this slot,
                // over the same range, one level down; a single word, so
                // readers see the old subtree or the new one.
                unsafe { p.node.set_slot(p.off, node.encode()) };
                Some(level)
            }
            Publish::Root { node, height } => {
                self.set_root(node, height);
                None
            }
        }
    }

    fn set_root(&self, node: NodeRef<'_>, height: usize) {
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
    unsafe fn collapse_root<'t>(
        &'t self,
        ex: Option<Exclusive<'t>>,
        old: &mut ArrayVec<NodeRef<'t>, 160>,
        fresh: &Fresh<'t>,
    ) {
        let Some(mut node) = self.root_node() else {
            return;
        };
        // The freeing rule (docs/DESIGN.md, "Who frees"): where readers may
        // exist, a node they could have reached since it was published
        // waits for the grace period. Every node here was reachable from
        // the root published above, fresh or not, so then all of them are
        // retired; only without readers (`ex`) may a fresh one be freed at
        // once.
        let retire = |n: NodeRef<'t>, old: &mut ArrayVec<NodeRef<'t>, 160>| {
            if let (Some(ex), true) = (ex, fresh.nodes.contains(&n)) {
                // SAFETY: `ex`: no reader exists; a fresh node is
                // listed nowhere else and is now unreachable; we are the
                // only writer (this function's contract).
                unsafe { ex.slab.free(n) };
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
}

impl<'t> Exclusive<'t> {
    /// If the parent of level `d` (one node on both paths) can take `parts`
    /// new nodes in place of the ones the paths lead to at `d`, keeping a
    /// legal fill (what the general step would find, with no items read or
    /// written but the ones that move): its slot count. Only where no
    /// reader can be in the parent.
    fn parent_takes(self, lpath: &Path<'t>, rpath: &Path<'t>, d: usize, parts: usize) -> Option<usize> {
        if d == 0 {
            return None;
        }
        let (lp, rp) = (lpath[d - 1], rpath[d - 1]);
        if lp.node != rp.node {
            return None;
        }
        let inner = self.inner_kind();
        let count = lp.node.count();
        let n = count - (rp.off - lp.off + 1) + parts;
        let exempt = d == 1 || rp.max == u64::MAX;
        (n <= inner.slots() && (n >= inner.min_fill() || exempt)).then_some(count)
    }
}

/// Marks every node of an unlinked subtree dead and lists it in `retired`,
/// and its value words in `removed` (freed after a grace period).
fn collect_subtree(node: NodeRef<'_>, retired: &mut Retired, removed: &mut Removed) {
    let mut collect = |n: NodeRef<'_>| {
        if n.is_leaf() {
            leaf_words(n, &mut |w| removed.push(w));
        }
        n.mark_dead();
        retired.push(n.into());
    };
    // SAFETY: the subtree was just unlinked by the tree's only writer (us)
    // and stays allocated until its grace period ends; the callback frees
    // nothing.
    unsafe { visit_subtree(node, &mut collect) };
}

/// Points every child of `node` back at it.
fn fix_children(node: NodeRef<'_>) {
    for i in 0..node.count() {
        // SAFETY: internal node, used slot.
        unsafe { node.child(i) }.set_parent(node);
    }
}

/// Moves the right path at level `d` to the next node to the right (a
/// sibling, or a cousin under a different parent) and returns it. Nodes that
/// leave the right path are queued in `old`. The caller has checked that
/// the current right node is not on the right-most spine, so a neighbour
/// exists.
fn right_neighbour<'t>(
    lpath: &Path<'t>,
    rpath: &mut Path<'t>,
    d: usize,
    old: &mut ArrayVec<NodeRef<'t>, 160>,
) -> Level<'t> {
    let j = fork_level(rpath, d, true).unwrap_or(0);
    debug_assert!(rpath[j].node.has_next(rpath[j].off), "no right neighbour");
    for k in j + 1..=d {
        if rpath[k].node != lpath[k].node {
            old.push(rpath[k].node);
        }
    }
    rpath[j].off += 1;
    rpath.truncate(j + 1);
    descend_left_edge_to(rpath, d);
    rpath[d]
}

/// Moves `rpath` at level `d` onto the next node to the right (see
/// [`right_neighbour`]), appends that node's items to `content`, and
/// returns the new right bound of the content.
fn absorb_right<'t>(
    lpath: &Path<'t>,
    rpath: &mut Path<'t>,
    d: usize,
    old: &mut ArrayVec<NodeRef<'t>, 160>,
    content: &mut Content,
) -> u64 {
    let nb = right_neighbour(lpath, rpath, d, old);
    nb.node.read_items(nb.max, 0..nb.node.count(), content);
    nb.max
}

/// Moves `lpath` at level `d` onto the left sibling (same parent) of the
/// node it is on, and returns that level. The node it leaves stays on
/// `rpath`, which the caller retires with it.
fn left_sibling<'t>(lpath: &mut Path<'t>, d: usize) -> Level<'t> {
    debug_assert!(lpath[d - 1].off > 0, "no left sibling");
    sibling_at(lpath, d, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FreshNodes, InPlace, MapleTree, Writes, U63};

    /// A leaf that overflows beside a sibling with room is rewritten with
    /// it as two leaves (a push), not split into a third; the contents
    /// stay exact. Either direction: the right sibling first, else the
    /// left one.
    #[test]
    fn an_overflowing_leaf_pushes_into_a_sibling_with_room() {
        use crate::{MapleTree, U63};
        let leaves = |t: &MapleTree<U63>| t.stats().leaves;
        // Used slots of each leaf under the (internal) root.
        let fills = |t: &MapleTree<U63>| -> Vec<usize> {
            let root = t.raw.root_node().unwrap();
            // SAFETY: the root of a two-leaf tree is internal; used slots.
            (0..root.count()).map(|i| unsafe { root.child(i) }.count()).collect()
        };
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
        // 18 + 5 slots: the sibling filled to all but its room, the rest
        // left where the insert went.
        let sibling = Kind::Leaf.slots() - PUSH_SIBLING_ROOM;
        assert_eq!(fills(&t), [23 - sibling, sibling]);
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
        assert_eq!(fills(&t)[0], sibling, "the left sibling filled to all but its room");
        assert_eq!(t.load(167).map(U63::get), Some(52));
        assert_eq!(t.load(168).map(U63::get), Some(16));
    }

    /// Written in place, a push rewrites both leaves where they are and a
    /// split keeps the first part in the old leaf (one fresh leaf for the
    /// second); written in fresh nodes, every rewritten leaf is fresh. The contents
    /// stay exact either way, in gap trees too.
    #[test]
    fn splits_and_pushes_reuse_the_old_leaves_only_in_place() {
        for gaps in [false, true] {
            pushes_and_splits::<InPlace>(gaps);
            pushes_and_splits::<FreshNodes>(gaps);
        }
    }

    fn pushes_and_splits<W: Writes>(gaps: bool) {
        let fresh = W::FRESH;
        // The root's children: each one's address and fill.
        let children = |t: &MapleTree<U63, u64, W>| -> Vec<(usize, usize)> {
            let root = t.raw.root_node().unwrap();
            // SAFETY: the root of these trees is internal; used slots.
            let child = |i| unsafe { root.child(i) };
            (0..root.count()).map(|i| (child(i).as_ptr().addr().get(), child(i).count())).collect()
        };
        // `ranges` touching ranges of 10, bulk-built: full leaves.
        let build = |ranges: u64| -> MapleTree<U63, u64, W> {
            let mut t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            for i in 0..ranges {
                t.insert_range(i * 10..=i * 10 + 9, U63::new(i).unwrap()).unwrap();
            }
            t.into_writes()
        };
        let check = |t: &MapleTree<U63, u64, W>, ranges: u64, cut: u64| {
            t.validate().unwrap();
            let mut want: Vec<_> = (0..ranges).map(|i| (i * 10..=i * 10 + 9, i)).collect();
            let i = (cut / 10) as usize;
            want.splice(i..=i, [(cut - 2..=cut - 1, cut / 10), (cut..=cut, 99), (cut + 1..=cut + 7, cut / 10)]);
            let got: Vec<_> = t.iter().map(|(r, v)| (r, v.get())).collect();
            assert_eq!(got, want, "gaps {gaps}, fresh {fresh}");
        };
        // A push: the two leaves of 16 and 4 slots take 2 more.
        let mut t = build(20);
        let before = children(&t);
        assert_eq!(before.len(), 2);
        t.store_range(52..=52, U63::new(99).unwrap()).unwrap();
        let after = children(&t);
        check(&t, 20, 52);
        assert_eq!(after.len(), 2, "a push");
        for (a, b) in before.iter().zip(&after) {
            assert_eq!(a.0 == b.0, !fresh, "gaps {gaps}, fresh {fresh}: a pushed leaf moved or stayed");
        }
        // A split: the first leaf's only sibling is full too.
        let fills = |c: &[(usize, usize)]| c.iter().map(|c| c.1).collect::<Vec<_>>();
        let mut t = build(64);
        let before = children(&t);
        assert_eq!(fills(&before), [16, 16, 16, 16, 1]);
        t.store_range(22..=22, U63::new(99).unwrap()).unwrap();
        check(&t, 64, 22);
        let after = children(&t);
        assert_eq!(fills(&after), [9, 9, 16, 16, 16, 1], "a split");
        assert_eq!(after[0].0 == before[0].0, !fresh, "gaps {gaps}, fresh {fresh}: the split leaf");
        assert!(before.iter().all(|b| b.0 != after[1].0), "the second part is fresh");
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
