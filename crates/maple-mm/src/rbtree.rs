//! The structures the maple tree replaced in Linux 6.1, as a baseline:
//! VMAs in a red-black tree keyed by start, each node holding the largest
//! free gap in its subtree (`rb_subtree_gap`, for `get_unmapped_area`);
//! the VMAs linked in address order (`vm_next`/`vm_prev`); and a
//! four-entry lookup cache indexed by page number, invalidated by a
//! sequence number that every change of the tree bumps (the per-thread
//! `vmacache`).
//!
//! Rules as in Linux 5.17's `mm/mmap.c`: a VMA's own gap is its start
//! minus its predecessor's end (0 for the first); a node's subtree gap is
//! the largest own gap in its subtree, kept by every insertion, removal
//! and rotation; the top-down search (`unmapped_area_topdown`) looks right
//! first and skips any subtree whose largest gap is too small.
//!
//! Nodes live in one vector and link by index, so the structure is safe
//! code; a freed slot is reused. [`RbTree::validate`] checks every rule
//! (colours, order, parents, gaps, list, cache) and runs after every step
//! of this module's random tests.
//!
//! ```
//! use maple_mm::rbtree::RbTree;
//!
//! let mut t = RbTree::new();
//! t.store(0x1000..0x3000, 'a');
//! t.store(0x8000..0x9000, 'b');
//! assert_eq!(t.find(0x2fff), Some((0x1000..0x3000, &'a')));
//! // The highest free 0x2000 bytes below 0x8000.
//! assert_eq!(t.empty_area_rev(0..0x8000, 0x2000), Some(0x6000));
//! t.store(0x2000..0x8800, 'c'); // cuts both neighbours
//! assert_eq!(t.iter().map(|(r, v)| (r.start, *v)).collect::<Vec<_>>(), [(0x1000, 'a'), (0x2000, 'c'), (0x8800, 'b')]);
//! t.validate().unwrap();
//! ```

use core::{
    cell::Cell,
    ops::Range,
    sync::atomic::{AtomicU64, Ordering},
};

const NIL: u32 = u32::MAX;

/// Cache slots (Linux's `VMACACHE_SIZE`).
const CACHE_SLOTS: usize = 4;

#[derive(Clone, Debug)]
struct Node<V> {
    start: u64,
    end: u64,
    /// The left and right children.
    kids: [u32; 2],
    parent: u32,
    red: bool,
    /// The largest own gap in this subtree.
    gap: u64,
    prev: u32,
    next: u32,
    /// `None` in a freed slot.
    value: Option<V>,
}

/// A thread's four-entry lookup cache (Linux keeps it in the task): valid
/// for the tree numbered `tree` while `seq` is that tree's.
#[derive(Clone, Copy, Debug)]
struct Cache {
    tree: u64,
    seq: u64,
    slots: [u32; CACHE_SLOTS],
}

thread_local! {
    static CACHE: Cell<Cache> = const { Cell::new(Cache { tree: 0, seq: 0, slots: [NIL; CACHE_SLOTS] }) };
    static STATS: Cell<CacheStats> = const { Cell::new(CacheStats { hits: 0, misses: 0 }) };
}

/// Tree numbers, never reused (0 is no tree).
static TREE_IDS: AtomicU64 = AtomicU64::new(1);

fn tree_id() -> u64 {
    TREE_IDS.fetch_add(1, Ordering::Relaxed)
}

/// How a thread's lookup cache did (see [`RbTree::find_vma`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that walked the tree.
    pub misses: u64,
}

/// Non-overlapping ranges `[start, end)` with a value each, in the
/// red-black tree with subtree gaps, list and lookup cache of Linux
/// before the maple tree (see the [module docs](self)).
#[derive(Debug)]
pub struct RbTree<V> {
    /// This tree's number, for the threads' caches.
    id: u64,
    nodes: Vec<Node<V>>,
    free: Vec<u32>,
    root: u32,
    head: u32,
    tail: u32,
    len: usize,
    /// Bumped by every change (`vmacache_invalidate`).
    seq: u64,
}

impl<V: Clone> Clone for RbTree<V> {
    /// A copy with a number of its own (a cache filled on one is never
    /// read for the other).
    fn clone(&self) -> Self {
        RbTree {
            id: tree_id(),
            nodes: self.nodes.clone(),
            free: self.free.clone(),
            root: self.root,
            head: self.head,
            tail: self.tail,
            len: self.len,
            seq: self.seq,
        }
    }
}

impl<V> Default for RbTree<V> {
    fn default() -> Self {
        RbTree::new()
    }
}

impl<V> RbTree<V> {
    /// An empty tree.
    pub fn new() -> RbTree<V> {
        RbTree { id: tree_id(), nodes: Vec::new(), free: Vec::new(), root: NIL, head: NIL, tail: NIL, len: 0, seq: 0 }
    }

    /// Ranges stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory the structure holds (nodes, free slots and the
    /// tree's own fields; the lookup cache is the thread's), for comparing
    /// footprints.
    pub fn memory(&self) -> usize {
        self.nodes.capacity() * core::mem::size_of::<Node<V>>()
            + self.free.capacity() * 4
            + core::mem::size_of::<Self>()
    }

    /// The calling thread's lookup cache: its hits and misses so far,
    /// over every tree it looked up in.
    pub fn cache_stats(&self) -> CacheStats {
        STATS.with(Cell::get)
    }

    fn n(&self, i: u32) -> &Node<V> {
        &self.nodes[i as usize]
    }

    fn m(&mut self, i: u32) -> &mut Node<V> {
        &mut self.nodes[i as usize]
    }

    fn entry(&self, i: u32) -> (Range<u64>, &V) {
        let n = self.n(i);
        (n.start..n.end, n.value.as_ref().expect("a live node"))
    }

    /// The range containing `addr` (`vma_lookup`: `find_vma`, then a
    /// check that the answer contains `addr`).
    pub fn find(&self, addr: u64) -> Option<(Range<u64>, &V)> {
        self.find_vma(addr).filter(|(r, _)| r.contains(&addr))
    }

    /// The lowest node ending above `addr` (`find_vma`'s answer).
    fn first_ending_above(&self, addr: u64) -> u32 {
        let (mut i, mut best) = (self.root, NIL);
        while i != NIL {
            let n = self.n(i);
            if n.end > addr {
                best = i;
                if n.start <= addr {
                    break;
                }
                i = n.kids[0];
            } else {
                i = n.kids[1];
            }
        }
        best
    }

    /// The first range ending above `addr` (containing it or after it),
    /// as `find_vma` answers: from the calling thread's cache if one of its
    /// four slots holds a range of this tree containing `addr`, else by a
    /// walk down the tree, whose answer then takes the slot of `addr`'s
    /// page (the cache is emptied first if it was another tree's or an
    /// older version's, as `vmacache_valid` does).
    pub fn find_vma(&self, addr: u64) -> Option<(Range<u64>, &V)> {
        let found = self.find_vma_node(addr);
        (found != NIL).then(|| self.entry(found))
    }

    /// [`find_vma`](Self::find_vma)'s node (`NIL` for none).
    fn find_vma_node(&self, addr: u64) -> u32 {
        let mut cache = CACHE.with(Cell::get);
        if cache.tree != self.id || cache.seq != self.seq {
            cache = Cache { tree: self.id, seq: self.seq, slots: [NIL; CACHE_SLOTS] };
        }
        let mut stats = STATS.with(Cell::get);
        let hit = cache.slots.iter().find(|&&i| i != NIL && self.n(i).start <= addr && addr < self.n(i).end);
        let found = match hit {
            Some(&i) => {
                stats.hits += 1;
                i
            }
            None => {
                stats.misses += 1;
                let found = self.first_ending_above(addr);
                if found != NIL {
                    cache.slots[((addr >> 12) as usize) % CACHE_SLOTS] = found;
                }
                found
            }
        };
        STATS.with(|s| s.set(stats));
        CACHE.with(|c| c.set(cache));
        found
    }

    /// [`find_vma`](Self::find_vma)'s answer and the range before it (the
    /// last range, if there is no answer), by the list: Linux's
    /// `find_vma_prev`, one lookup.
    #[allow(clippy::type_complexity)]
    pub fn find_vma_prev(&self, addr: u64) -> (Option<(Range<u64>, &V)>, Option<(Range<u64>, &V)>) {
        let found = self.find_vma_node(addr);
        let prev = if found == NIL { self.tail } else { self.n(found).prev };
        ((found != NIL).then(|| self.entry(found)), (prev != NIL).then(|| self.entry(prev)))
    }

    /// The last range starting at or below `addr` (from
    /// [`find_vma_prev`](Self::find_vma_prev)).
    pub fn last_at_or_below(&self, addr: u64) -> Option<(Range<u64>, &V)> {
        match self.find_vma_prev(addr) {
            (Some(vma), _) if vma.0.start <= addr => Some(vma),
            (_, prev) => prev,
        }
    }

    /// Every range in address order, by the list.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter { tree: self, i: self.head, end: u64::MAX }
    }

    /// The ranges overlapping `r`, in order: a walk to the first, then
    /// the list.
    pub fn range(&self, r: Range<u64>) -> Iter<'_, V> {
        let i = if r.start < r.end { self.first_ending_above(r.start) } else { NIL };
        Iter { tree: self, i, end: r.end }
    }

    /// A node's own gap: from its predecessor's end (or 0) to its start.
    fn own_gap(&self, i: u32) -> u64 {
        let n = self.n(i);
        n.start - if n.prev == NIL { 0 } else { self.n(n.prev).end }
    }

    fn subtree_gap(&self, i: u32) -> u64 {
        if i == NIL {
            0
        } else {
            self.n(i).gap
        }
    }

    /// Recomputes one node's subtree gap from its children's.
    fn recompute(&mut self, i: u32) {
        let g = self.own_gap(i).max(self.subtree_gap(self.n(i).kids[0])).max(self.subtree_gap(self.n(i).kids[1]));
        self.m(i).gap = g;
    }

    /// Recomputes the gaps from `i` up towards the root after a change
    /// at `i` (`vma_gap_update`'s propagation), stopping at the first
    /// node whose gap comes out unchanged: the ones above it stand.
    fn propagate(&mut self, mut i: u32) {
        while i != NIL {
            let old = self.n(i).gap;
            self.recompute(i);
            if self.n(i).gap == old {
                return;
            }
            i = self.n(i).parent;
        }
    }

    /// Turns `x` down to side `dir` (0: left), its other child rising
    /// into its place; the two nodes' gaps are recomputed (the subtree's
    /// as a whole is unchanged).
    fn rotate(&mut self, x: u32, dir: usize) {
        let y = self.n(x).kids[1 - dir];
        let inner = self.n(y).kids[dir];
        self.m(x).kids[1 - dir] = inner;
        if inner != NIL {
            self.m(inner).parent = x;
        }
        self.replace_child(x, y);
        self.m(y).kids[dir] = x;
        self.m(x).parent = y;
        self.recompute(x);
        self.recompute(y);
    }

    /// Puts `new` where `old` hangs from its parent (or the root).
    fn replace_child(&mut self, old: u32, new: u32) {
        let p = self.n(old).parent;
        if new != NIL {
            self.m(new).parent = p;
        }
        if p == NIL {
            self.root = new;
        } else if self.n(p).kids[0] == old {
            self.m(p).kids[0] = new;
        } else {
            self.m(p).kids[1] = new;
        }
    }

    fn is_red(&self, i: u32) -> bool {
        i != NIL && self.n(i).red
    }

    /// Links a new node for `[start, end)` (free of other nodes).
    fn insert_node(&mut self, start: u64, end: u64, value: V) -> u32 {
        let node = Node {
            start,
            end,
            kids: [NIL; 2],
            parent: NIL,
            red: true,
            gap: 0,
            prev: NIL,
            next: NIL,
            value: Some(value),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        // Down the tree, noting the neighbours in address order.
        let (mut p, mut pred, mut succ) = (NIL, NIL, NIL);
        let mut cur = self.root;
        let mut left = false;
        while cur != NIL {
            p = cur;
            left = start < self.n(cur).start;
            if left {
                succ = cur;
                cur = self.n(cur).kids[0];
            } else {
                pred = cur;
                cur = self.n(cur).kids[1];
            }
        }
        self.m(i).parent = p;
        if p == NIL {
            self.root = i;
        } else if left {
            self.m(p).kids[0] = i;
        } else {
            self.m(p).kids[1] = i;
        }
        // The list (`__vma_link_list`).
        self.m(i).prev = pred;
        self.m(i).next = succ;
        if pred == NIL {
            self.head = i;
        } else {
            self.m(pred).next = i;
        }
        if succ == NIL {
            self.tail = i;
        } else {
            self.m(succ).prev = i;
        }
        // Gaps first (the node's own, and its successor's, which now ends
        // at the new node), then the colours, whose rotations keep them.
        self.propagate(i);
        if succ != NIL {
            self.propagate(succ);
        }
        self.insert_fixup(i);
        self.len += 1;
        i
    }

    /// Restores the colours after `z` was linked red; `d` is the side of
    /// `z`'s parent under the grandparent, the mirror cases one.
    fn insert_fixup(&mut self, mut z: u32) {
        while self.is_red(self.n(z).parent) {
            let p = self.n(z).parent;
            let g = self.n(p).parent;
            let d = usize::from(p != self.n(g).kids[0]);
            let u = self.n(g).kids[1 - d];
            if self.is_red(u) {
                self.m(p).red = false;
                self.m(u).red = false;
                self.m(g).red = true;
                z = g;
            } else {
                if z == self.n(p).kids[1 - d] {
                    z = p;
                    self.rotate(z, d);
                }
                let p = self.n(z).parent;
                let g = self.n(p).parent;
                self.m(p).red = false;
                self.m(g).red = true;
                self.rotate(g, 1 - d);
            }
        }
        let r = self.root;
        self.m(r).red = false;
    }

    /// Unlinks node `z` and frees its slot, returning its value.
    fn erase_node(&mut self, z: u32) -> V {
        let (prev, next) = (self.n(z).prev, self.n(z).next);
        if prev == NIL {
            self.head = next;
        } else {
            self.m(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.m(next).prev = prev;
        }
        // Out of the tree (CLRS), noting where the structure changed and
        // the child that took a removed black node's place.
        let (x, x_parent, removed_black);
        if self.n(z).kids[0] == NIL || self.n(z).kids[1] == NIL {
            let child = if self.n(z).kids[0] == NIL { self.n(z).kids[1] } else { self.n(z).kids[0] };
            x_parent = self.n(z).parent;
            removed_black = !self.n(z).red;
            self.replace_child(z, child);
            x = child;
        } else {
            // The successor (the list's next) takes z's place.
            let y = next;
            removed_black = !self.n(y).red;
            x = self.n(y).kids[1];
            if self.n(y).parent == z {
                x_parent = y;
            } else {
                x_parent = self.n(y).parent;
                self.replace_child(y, x);
                let zr = self.n(z).kids[1];
                self.m(y).kids[1] = zr;
                self.m(zr).parent = y;
            }
            self.replace_child(z, y);
            let zl = self.n(z).kids[0];
            self.m(y).kids[0] = zl;
            self.m(zl).parent = y;
            self.m(y).red = self.n(z).red;
        }
        // Gaps: along the changed path, and the successor's own gap (it
        // now starts after the predecessor).
        let mut i = x_parent;
        while i != NIL {
            self.recompute(i);
            i = self.n(i).parent;
        }
        if next != NIL {
            self.propagate(next);
        }
        if removed_black {
            self.erase_fixup(x, x_parent);
        }
        self.len -= 1;
        self.free.push(z);
        let node = self.m(z);
        node.kids[0] = NIL;
        node.kids[1] = NIL;
        node.parent = NIL;
        node.value.take().expect("a live node")
    }

    /// Restores the colours after a black node left from under `parent`
    /// (`x` took its place, maybe nil); `d` is `x`'s side, the mirror
    /// cases one.
    fn erase_fixup(&mut self, mut x: u32, mut parent: u32) {
        while x != self.root && !self.is_red(x) {
            let d = usize::from(x != self.n(parent).kids[0]);
            let mut w = self.n(parent).kids[1 - d];
            if self.is_red(w) {
                self.m(w).red = false;
                self.m(parent).red = true;
                self.rotate(parent, d);
                w = self.n(parent).kids[1 - d];
            }
            let [near, far] = [self.n(w).kids[d], self.n(w).kids[1 - d]];
            if !self.is_red(near) && !self.is_red(far) {
                self.m(w).red = true;
                x = parent;
                parent = self.n(x).parent;
            } else {
                if !self.is_red(far) {
                    self.m(near).red = false;
                    self.m(w).red = true;
                    self.rotate(w, 1 - d);
                    w = self.n(parent).kids[1 - d];
                }
                self.m(w).red = self.n(parent).red;
                self.m(parent).red = false;
                let far = self.n(w).kids[1 - d];
                if far != NIL {
                    self.m(far).red = false;
                }
                self.rotate(parent, d);
                x = self.root;
                parent = NIL;
            }
        }
        if x != NIL {
            self.m(x).red = false;
        }
    }

    /// The lowest `start` such that `[start, start + len)` is free and
    /// inside `window` (`unmapped_area`).
    pub fn empty_area(&self, window: Range<u64>, len: u64) -> Option<u64> {
        if len == 0 || window.end < window.start || window.end - window.start < len {
            return None;
        }
        let fits = |lo: u64, hi: u64| {
            let (lo, hi) = (lo.max(window.start), hi.min(window.end));
            hi > lo && hi - lo >= len
        };
        // In-order, left first, skipping subtrees whose gaps are too small
        // or lie wholly outside the window.
        let mut stack = Vec::new();
        let mut i = self.root;
        loop {
            while i != NIL && self.n(i).gap >= len {
                stack.push(i);
                // Gaps of the left subtree end at or below this start.
                i = if self.n(i).start > window.start { self.n(i).kids[0] } else { NIL };
            }
            let Some(top) = stack.pop() else { break };
            let n = self.n(top);
            let lo = if n.prev == NIL { 0 } else { self.n(n.prev).end };
            if lo >= window.end {
                break;
            }
            if fits(lo, n.start) {
                return Some(lo.max(window.start));
            }
            i = n.kids[1];
        }
        let last = if self.tail == NIL { 0 } else { self.n(self.tail).end };
        fits(last, u64::MAX).then(|| last.max(window.start))
    }

    /// The highest `start` such that `[start, start + len)` is free and
    /// inside `window` (`unmapped_area_topdown`).
    pub fn empty_area_rev(&self, window: Range<u64>, len: u64) -> Option<u64> {
        if len == 0 || window.end < window.start || window.end - window.start < len {
            return None;
        }
        let fits = |lo: u64, hi: u64| {
            let (lo, hi) = (lo.max(window.start), hi.min(window.end));
            hi > lo && hi - lo >= len
        };
        // Above the last range first (Linux checks `highest_vm_end`).
        let last = if self.tail == NIL { 0 } else { self.n(self.tail).end };
        if fits(last, u64::MAX) {
            return Some(window.end - len);
        }
        // In reverse order, right first.
        let mut stack = Vec::new();
        let mut i = self.root;
        loop {
            while i != NIL && self.n(i).gap >= len {
                stack.push(i);
                // Gaps of the right subtree start at or above this end.
                i = if self.n(i).end < window.end { self.n(i).kids[1] } else { NIL };
            }
            let Some(top) = stack.pop() else { break };
            let n = self.n(top);
            if n.start <= window.start {
                break;
            }
            let lo = if n.prev == NIL { 0 } else { self.n(n.prev).end };
            if fits(lo, n.start) {
                return Some(n.start.min(window.end) - len);
            }
            i = n.kids[0];
        }
        None
    }

    /// Checks every rule: red-black colours and black heights, order and
    /// parents, no overlaps, every subtree gap, the list against the
    /// tree's order, the count, and a cache holding only live nodes that
    /// are current.
    pub fn validate(&self) -> Result<(), String> {
        if self.root != NIL && (self.n(self.root).red || self.n(self.root).parent != NIL) {
            return Err("the root is red or has a parent".into());
        }
        let mut order = Vec::new();
        self.check(self.root, &mut order)?;
        if order.len() != self.len {
            return Err(format!("{} nodes, count {}", order.len(), self.len));
        }
        let listed: Vec<u32> = {
            let mut v = Vec::new();
            let mut i = self.head;
            while i != NIL && v.len() <= self.len {
                v.push(i);
                i = self.n(i).next;
            }
            v
        };
        if listed != order {
            return Err("the list is not the tree's order".into());
        }
        for w in order.windows(2) {
            if self.n(w[0]).end > self.n(w[1]).start || self.n(w[1]).prev != w[0] {
                return Err(format!("{:#x} overlaps or is not linked back", self.n(w[1]).start));
            }
        }
        if order.first().copied().unwrap_or(NIL) != self.head || order.last().copied().unwrap_or(NIL) != self.tail {
            return Err("head or tail wrong".into());
        }
        let cache = CACHE.with(Cell::get);
        if cache.tree == self.id && cache.seq == self.seq {
            for &i in &cache.slots {
                if i != NIL && (i as usize >= self.nodes.len() || self.n(i).value.is_none()) {
                    return Err(format!("the cache holds freed slot {i}"));
                }
            }
        }
        Ok(())
    }

    /// Checks the subtree at `i`, appending its nodes in order; returns
    /// its black height.
    fn check(&self, i: u32, order: &mut Vec<u32>) -> Result<u32, String> {
        if i == NIL {
            return Ok(1);
        }
        let n = self.n(i);
        if n.value.is_none() || n.start >= n.end {
            return Err(format!("node {i}: freed or empty"));
        }
        for c in [n.kids[0], n.kids[1]] {
            if c != NIL && self.n(c).parent != i {
                return Err(format!("node {i}: a child's parent is wrong"));
            }
            if n.red && self.is_red(c) {
                return Err(format!("{:#x}: red under red", self.n(c).start));
            }
        }
        let lh = self.check(n.kids[0], order)?;
        order.push(i);
        let rh = self.check(n.kids[1], order)?;
        if lh != rh {
            return Err(format!("{:#x}: black heights {lh} and {rh}", n.start));
        }
        if n.kids[0] != NIL && self.n(n.kids[0]).start >= n.start
            || n.kids[1] != NIL && self.n(n.kids[1]).start <= n.start
        {
            return Err(format!("{:#x}: out of order", n.start));
        }
        let want = self.own_gap(i).max(self.subtree_gap(n.kids[0])).max(self.subtree_gap(n.kids[1]));
        if n.gap != want {
            return Err(format!("{:#x}: subtree gap {:#x}, want {want:#x}", n.start, n.gap));
        }
        Ok(lh + u32::from(!n.red))
    }
}

/// The ranges of an [`RbTree`] in order, by the list (see
/// [`RbTree::iter`]).
#[derive(Debug)]
pub struct Iter<'a, V> {
    tree: &'a RbTree<V>,
    i: u32,
    /// Ranges starting here or above are not given.
    end: u64,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (Range<u64>, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.i == NIL || self.tree.n(self.i).start >= self.end {
            return None;
        }
        let e = self.tree.entry(self.i);
        self.i = self.tree.n(self.i).next;
        Some(e)
    }
}

impl<V: Clone> RbTree<V> {
    /// Stores `value` over `r`, cutting the ranges there (their pieces
    /// outside `r` keep their values). An empty `r` stores nothing.
    pub fn store(&mut self, r: Range<u64>, value: V) {
        if r.start >= r.end {
            return;
        }
        self.remove(r.clone());
        self.insert_node(r.start, r.end, value);
        self.seq += 1;
    }

    /// Empties `r`, cutting the ranges across its ends.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        let mut i = self.first_ending_above(r.start);
        while i != NIL && self.n(i).start < r.end {
            let next = self.n(i).next;
            let (s, e) = (self.n(i).start, self.n(i).end);
            let v = self.erase_node(i);
            if s < r.start {
                self.insert_node(s, r.start, v.clone());
            }
            if e > r.end {
                self.insert_node(r.end, e, v);
            }
            i = next;
        }
        self.seq += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{rngs::SmallRng, Rng, SeedableRng};

    use super::*;

    /// The model: start → (end, value).
    type Model = BTreeMap<u64, (u64, u32)>;

    fn model_store(m: &mut Model, r: Range<u64>, v: Option<u32>) {
        let hit: Vec<u64> = m.range(..r.end).filter(|(_, (e, _))| *e > r.start).map(|(s, _)| *s).collect();
        for s in hit {
            let (e, old) = m.remove(&s).unwrap();
            if s < r.start {
                m.insert(s, (r.start, old));
            }
            if e > r.end {
                m.insert(r.end, (e, old));
            }
        }
        if let Some(v) = v {
            m.insert(r.start, (r.end, v));
        }
    }

    fn free_at(m: &Model, lo: u64, hi: u64) -> bool {
        m.range(..hi).all(|(_, (e, _))| *e <= lo)
    }

    /// Random stores, removals, lookups and gap searches against a
    /// `BTreeMap` of ranges, validating after every step.
    #[test]
    fn agrees_with_a_range_model() {
        let steps = if cfg!(miri) { 200 } else { 20_000 };
        for seed in 0..if cfg!(miri) { 1 } else { 8 } {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut t: RbTree<u32> = RbTree::new();
            let mut m = Model::new();
            let span = [64u64, 512, 4096][seed as usize % 3];
            for step in 0..steps {
                let a = rng.gen_range(0..span) * 0x1000;
                let len = rng.gen_range(1..24u64) * 0x1000;
                match rng.gen_range(0..10) {
                    0..=3 => {
                        let v = rng.gen();
                        t.store(a..a + len, v);
                        model_store(&mut m, a..a + len, Some(v));
                    }
                    4..=5 => {
                        t.remove(a..a + len);
                        model_store(&mut m, a..a + len, None);
                    }
                    6 => {
                        let hi = a + rng.gen_range(0..span) * 0x1000;
                        let want = (a..=hi.saturating_sub(len))
                            .step_by(0x1000)
                            .find(|&s| s + len <= hi && free_at(&m, s, s + len));
                        assert_eq!(t.empty_area(a..hi, len), want, "seed {seed} step {step}: empty_area");
                        let starts: Vec<u64> = (a..=hi.saturating_sub(len)).step_by(0x1000).collect();
                        let want_rev =
                            starts.into_iter().rev().find(|&s| s + len <= hi && s >= a && free_at(&m, s, s + len));
                        assert_eq!(t.empty_area_rev(a..hi, len), want_rev, "seed {seed} step {step}: empty_area_rev");
                    }
                    _ => {
                        let addr = a + rng.gen_range(0..0x1000);
                        let want = m
                            .range(..=addr)
                            .next_back()
                            .filter(|(_, (e, _))| *e > addr)
                            .map(|(s, (e, v))| (*s..*e, *v));
                        assert_eq!(t.find(addr).map(|(r, v)| (r, *v)), want, "seed {seed} step {step}: find");
                        let after = m.range(..).find(|(_, (e, _))| *e > addr).map(|(s, (e, v))| (*s..*e, *v));
                        assert_eq!(t.find_vma(addr).map(|(r, v)| (r, *v)), after, "find_vma");
                        let (vma, prev) = t.find_vma_prev(addr);
                        let want_prev = match &after {
                            Some(a) => m.range(..a.0.start).next_back(),
                            None => m.iter().next_back(),
                        };
                        assert_eq!(vma.map(|(r, v)| (r, *v)), after, "find_vma_prev");
                        assert_eq!(
                            prev.map(|(r, v)| (r, *v)),
                            want_prev.map(|(s, (e, v))| (*s..*e, *v)),
                            "find_vma_prev's prev"
                        );
                        let below = m.range(..=addr).next_back().map(|(s, (e, v))| (*s..*e, *v));
                        assert_eq!(t.last_at_or_below(addr).map(|(r, v)| (r, *v)), below, "last_at_or_below");
                        let lo = addr & !0xfff;
                        let hi = lo + len;
                        let within: Vec<(u64, u64, u32)> = t.range(lo..hi).map(|(r, v)| (r.start, r.end, *v)).collect();
                        let want: Vec<(u64, u64, u32)> = m
                            .iter()
                            .filter(|(s, (e, _))| **s < hi && *e > lo)
                            .map(|(s, (e, v))| (*s, *e, *v))
                            .collect();
                        assert_eq!(within, want, "range");
                    }
                }
                t.validate().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                let listed: Vec<(u64, u64, u32)> = t.iter().map(|(r, v)| (r.start, r.end, *v)).collect();
                let want: Vec<(u64, u64, u32)> = m.iter().map(|(s, (e, v))| (*s, *e, *v)).collect();
                assert_eq!(listed, want, "seed {seed} step {step}");
            }
            let stats = t.cache_stats();
            assert!(stats.hits > 0 && stats.misses > 0, "{stats:?}");
        }
    }
}
