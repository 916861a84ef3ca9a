//! The write path: every store (insert, overwrite, erase, empty a range)
//! comes down to "put `entry` over `[first, last]`", from a walk to the
//! leaf holding `first` (a cursor's, the tree's kept walk, or a fresh one).
//!
//! One classifier, [`RawTree::classify`], looks at the walk, the request
//! and the access and returns the kind of the write ([`WriteKind`]); one
//! `match`, in [`RawTree::store_by`], runs it. Every write goes through
//! both (the trees' own writes, the cursors' and the concurrent
//! writer's). A write over exactly the range of the slot its walk stands
//! on says so ([`Store::exact`]): the classifier then tells the exact fit
//! and the erase of an entry from the slot's word alone. A cursor
//! replacing the range it stands on first asks the classifier alone
//! ([`replace_here`](RawTree::replace_here)), whose
//! exact-fit row then needs none of the match's lists of removed values
//! and retired nodes (the kernel's fork loop replaces every entry of a
//! copy this way). The access narrows the rows: through
//! `&RawTree` (the concurrent tree's writer: readers may be walking the
//! tree) only the rows marked "any" are open, and every multi-word change
//! is built in fresh nodes; an [`Exclusive`], which only `&mut RawTree`
//! can make, opens the in-place rows too.
//!
//! | row | when | access | done by | allocates | where it declines, the write goes on to |
//! | --- | --- | --- | --- | --- | --- |
//! | empty root | the tree is empty | any | a root leaf | 1 node | — |
//! | exact fit | an entry replaced by another over exactly its range | any | one slot store | nothing | — |
//! | erase entry | exactly one entry's range emptied | `Exclusive` | in place (a slot store, or the slot merged with its empty neighbours); at a leaf's end, the tail given to the next leaf; below the minimum fill, the next sibling or cousin taken in ([`leaf`]) | nothing | the lane |
//! | fill empty | a store inside one empty range | `Exclusive` | in place, or, if the leaf overflows, its refill with a sibling (push or split) where the parent takes it in place ([`leaf`], [`split`]) | nothing, or a split's leaf and its full parent's second half | the lane |
//! | lane | any other range that ends in its start's leaf | `Exclusive` | on the leaf's arrays: in place, the tail given to the next leaf, or the refill ([`leaf`]) | as fill empty | the general path |
//! | general | everything else | any | in-leaf store, then refill (push, split, take right: [`split`]) where no reader can be; else the [`rebuild`] (spanning stores, full parents, new root, collapse, cousins) | the rebuild: one to four fresh nodes per level it rebuilds, and a new root's | — (the rebuild does every write) |
//!
//! Every allocation comes before the first visible change, so a write
//! that cannot get its nodes fails with the tree as it was; nothing is
//! reserved ahead (the kernel's `mas_preallocate`), because nothing here
//! holds a lock that allocating could not be done under.
//!
//! The in-place rows walk nothing more and update gaps incrementally (a
//! leaf is rescanned only when its largest empty range may have shrunk).
//! The rebuild plans fresh nodes level by level (push into a sibling,
//! split, rebalance, new root) and publishes them with one pointer store.
//! Every row keeps the same guarantees: nothing visible changes until the
//! write cannot fail, and where readers may be they only ever see
//! single-word updates (the exact fit) or whole fresh nodes.
//!
//! The general path works out, before any change: the walk to `last`
//! (only if it lies beyond the leaf), the absorbed empty neighbours, the
//! one to three pieces that replace the touched slots, and the removed
//! values; then it tries its kinds in turn ([`general_kinds`]).

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr::{self, NonNull};

use arrayvec::ArrayVec;

use crate::{
    error::AllocError,
    handle::is_value,
    navigate::{empty_across, prefetch_siblings},
    node::{Content, Item, Kind, NodeRef, Unlinked},
    raw::{rebind, Access, Exclusive, Level, Path, RawTree},
    sync::Ordering,
};

mod leaf;
mod rebuild;
mod split;

use leaf::LeafWrite;

/// Makes the handle for a piece of a value a store cuts: given the old
/// value's word, the old value's first index and the piece's new `first`
/// and `last` (the piece ends where the old value did), a fresh handle (a
/// second owner of the value, or a new value for the new range).
pub(crate) type Piece<'a> = &'a mut dyn FnMut(*mut (), u64, u64, u64) -> *mut ();

/// One write as the engine sees it: put `entry` over `[first, last]`.
pub(crate) struct Store<'p> {
    pub(crate) first: u64,
    pub(crate) last: u64,
    /// Null (empty the range), a reserved marker, or a handle whose
    /// ownership passes to the tree when the write succeeds.
    pub(crate) entry: *mut (),
    /// Fail with [`StoreFail::Occupied`] unless the whole range is empty.
    pub(crate) insert_only: bool,
    /// Makes the handle for the right-hand piece of an entry the write
    /// cuts in two (made before anything changes); without it such a write
    /// fails with [`StoreFail::NeedSplit`].
    pub(crate) split: Option<Piece<'p>>,
    /// Also ask `split` for a new handle for a value whose front the write
    /// overwrites (values that record their own start).
    pub(crate) rebase: bool,
    /// `[first, last]` is exactly the range of the slot the walk stands
    /// on (an erase or a replace where a cursor or a lookup stands): the
    /// classifier then need not compare the bounds.
    pub(crate) exact: bool,
}

impl<'p> Store<'p> {
    /// Nothing over `[first, last]`, overwriting, cutting nothing in two;
    /// the methods below change that.
    pub(crate) fn new(first: u64, last: u64) -> Self {
        Store { first, last, entry: ptr::null_mut(), insert_only: false, split: None, rebase: false, exact: false }
    }

    pub(crate) fn entry(self, entry: *mut ()) -> Self {
        Store { entry, ..self }
    }

    pub(crate) fn insert_only(self) -> Self {
        Store { insert_only: true, ..self }
    }

    pub(crate) fn split(self, split: Piece<'p>) -> Self {
        Store { split: Some(split), ..self }
    }

    pub(crate) fn rebase(self) -> Self {
        Store { rebase: true, ..self }
    }

    pub(crate) fn exact(self) -> Self {
        Store { exact: true, ..self }
    }
}

/// The kind of a write: the table in the module docs, chosen once by
/// [`RawTree::classify`] from the walk and the request, and run by the one
/// `match` in [`RawTree::store_by`].
enum WriteKind<'t> {
    /// The tree is empty: it becomes a root leaf.
    EmptyRoot,
    /// One entry replaced by another over exactly its range: one slot
    /// store, at this walk level.
    ExactFit(Level<'t>),
    /// The removal of exactly one entry's range, where no reader can be:
    /// in place, or by the leaf's tail given to the next leaf, or by a
    /// refill with its sibling or cousin ([`leaf`]).
    EraseEntry(Exclusive<'t>),
    /// A store into one empty range (whose bounds these are), where no
    /// reader can be: in place, or by the leaf's refill with a sibling
    /// ([`leaf`]).
    FillEmpty(Exclusive<'t>, u64, u64),
    /// Any other write whose range ends in the leaf holding its start,
    /// where no reader can be: the in-leaf lane ([`leaf`]).
    Lane(Exclusive<'t>),
    /// Everything else: the general path, below.
    General,
}

impl WriteKind<'_> {
    /// At most how many nodes the write allocates in a tree of `height`
    /// levels: the table's "allocates" column, with the rows a kind may
    /// decline to (the kernel's `mas_prealloc_calc`). Every allocation
    /// comes before the first visible change, so the count is what a write
    /// needs free to succeed; the debug builds of the tests check each
    /// write against it ([`Budget`]).
    #[cfg(all(debug_assertions, feature = "fault-injection"))]
    fn max_nodes(&self, height: usize) -> usize {
        match self {
            WriteKind::EmptyRoot => 1,
            WriteKind::ExactFit(_) => 0,
            // Each declines, nothing changed, to the lane, then to the
            // general path, whose worst is the rebuild: up to four nodes a
            // level (the leaf level and every level above it, replaced in
            // turn) and a new root over them. A refill's two (a split's
            // leaf and its full parent's second half) lie below that.
            WriteKind::EraseEntry(_) | WriteKind::FillEmpty(..) | WriteKind::Lane(_) | WriteKind::General => {
                4 * height + 1
            }
        }
    }
}

/// The debug builds' check of a write against its kind's
/// [`max_nodes`](WriteKind::max_nodes): the nodes allocated while it
/// lives, at most the kind's count.
#[cfg(all(debug_assertions, feature = "fault-injection"))]
struct Budget {
    most: u64,
    before: u64,
}

#[cfg(all(debug_assertions, feature = "fault-injection"))]
impl Budget {
    fn new(kind: &WriteKind<'_>, height: usize) -> Budget {
        Budget { most: kind.max_nodes(height) as u64, before: crate::alloc::fault::allocated() }
    }
}

#[cfg(all(debug_assertions, feature = "fault-injection"))]
impl Drop for Budget {
    fn drop(&mut self) {
        let used = crate::alloc::fault::allocated() - self.before;
        debug_assert!(used <= self.most, "a write took {used} nodes, its kind at most {}", self.most);
    }
}

/// The general path's kinds that may decline, best first; the rebuild
/// does every write they decline (see the module docs).
enum GeneralKind<'t> {
    /// The change stays in one leaf, which keeps a legal fill.
    InLeaf(Exclusive<'t>),
    /// The leaf (and the next one, `across`) refilled with a sibling: a
    /// push, a split or a take, where the parent takes it in place.
    Refill(Exclusive<'t>),
}

/// The general kinds open to a write within one leaf (`same_leaf`) or
/// into the next one under the same parent (`across`), given the proof
/// that no reader can be in the tree: none without it.
#[inline]
fn general_kinds(ex: Option<Exclusive<'_>>, same_leaf: bool, across: bool) -> impl Iterator<Item = GeneralKind<'_>> {
    let in_leaf = ex.filter(|_| same_leaf).map(GeneralKind::InLeaf);
    let refill = ex.filter(|_| same_leaf || across).map(GeneralKind::Refill);
    [in_leaf, refill].into_iter().flatten()
}

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

/// The two slots a write's range begins and ends in (after absorbing empty
/// neighbours): the left one starts at `lmin` and holds `lval`, the right
/// one spans `[rmin, rmax]` and holds `rval`; `same_slot` if they are one.
struct Ends {
    lmin: u64,
    lval: *mut (),
    rmin: u64,
    rmax: u64,
    rval: *mut (),
    same_slot: bool,
}

/// The one to three slots that replace the ones a write touches.
struct Cut {
    /// The pieces: `piece[..n]`.
    piece: [Item; 3],
    n: usize,
    /// The left slot's front stays (as the first piece, same handle).
    keep_left: bool,
    /// The right slot's tail stays with its own handle (the last piece).
    keep_right: bool,
    /// The last piece holds a handle made for it by `split` (a value cut
    /// in two, or rebased): the caller's to drop if the write then fails.
    right_made: bool,
}

/// Works out the pieces of the write `[first, last] = entry` over `ends`.
/// Cutting a value in two needs a second owner for the right piece (a
/// reserved marker is simply kept on both sides); with `rebase`, a value
/// whose front the write overwrites gets a new handle for its new range
/// too. Those handles come from `split`, called here, before anything
/// changes; without it such a write fails with [`StoreFail::NeedSplit`].
#[inline(always)]
fn cut(
    first: u64,
    last: u64,
    entry: *mut (),
    ends: Ends,
    rebase: bool,
    split: &mut Option<Piece<'_>>,
) -> Result<Cut, StoreFail> {
    let Ends { lmin, lval, rmin, rmax, rval, same_slot } = ends;
    let keep_left = lmin < first;
    let has_right = rmax > last;
    let is_split = same_slot && keep_left && has_right && is_value(lval);
    let right_made = has_right && (is_split || rebase && is_value(rval));
    let right = if right_made {
        match split {
            Some(f) => f(rval, rmin, last + 1, rmax),
            None => return Err(StoreFail::NeedSplit),
        }
    } else {
        rval
    };
    let (piece, n) = lay_out(first, last, entry, lmin, lval, rmax, right);
    Ok(Cut { piece, n, keep_left, keep_right: has_right && !right_made, right_made })
}

/// The pieces of the write `[first, last] = entry` over a left slot that
/// starts at `lmin` holding `lval` and a right slot that ends at `rmax`:
/// the left slot's front (if it starts before `first`), the write, and the
/// right slot's tail holding `right` (if it ends after `last`), in
/// `piece[..n]`.
#[inline(always)]
pub(super) fn lay_out(
    first: u64,
    last: u64,
    entry: *mut (),
    lmin: u64,
    lval: *mut (),
    rmax: u64,
    right: *mut (),
) -> ([Item; 3], usize) {
    // The array is written whole, never piece by piece at a computed
    // offset: a later copy of it could then not be forwarded from those
    // scattered stores (a store-forwarding stall).
    let front = Item { last: first.wrapping_sub(1), slot: lval, gap: 0 };
    let mid = Item { last, slot: entry, gap: 0 };
    let back = Item { last: rmax, slot: right, gap: 0 };
    match (lmin < first, rmax > last) {
        (true, true) => ([front, mid, back], 3),
        (true, false) => ([front, mid, mid], 2),
        (false, true) => ([mid, back, back], 2),
        (false, false) => ([mid, mid, mid], 1),
    }
}

impl Cut {
    fn pieces(&self) -> &[Item] {
        &self.piece[..self.n]
    }
}

/// Value words a write took out of the tree; the typed layer drops them.
#[derive(Default)]
pub(crate) struct Removed(SmallList<NonNull<()>, 4>);

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
pub(crate) type Retired = SmallList<Unlinked, 4>;

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

/// What a successful store did. The caller passes an empty one in (so
/// that the common write moves nothing big through its results) and finds
/// it filled on success, still empty on failure.
#[derive(Default)]
pub(crate) struct Stored {
    pub(crate) removed: Removed,
    /// Written through `&RawTree`: replaced nodes, already marked dead,
    /// that readers may still be walking; the caller frees them after a
    /// grace period (the concurrent tree defers them with the values a
    /// write took out). Always empty through an `Exclusive` (they were
    /// freed at once).
    pub(crate) retired: Retired,
}

impl RawTree {
    /// Does the write `op` (see [`Store`]). On failure the tree is
    /// unchanged and the returned word (null or a made clone) is the
    /// caller's to drop.
    ///
    /// # Safety
    ///
    /// `first <= last`; `entry` is as [`Store`] says; `split` returns a
    /// fresh handle for the value behind the word it is given. The caller
    /// is the only writer (it holds the tree `&mut` or its write lock); the
    /// caller frees `retired` nodes and drops removed values only after
    /// every reader that could see them is gone. (Through `&self` every
    /// multi-word change is built in fresh nodes.)
    // The loom models write through this; the trees go through
    // `store_walked` (their own walk or a cursor's).
    #[cfg_attr(not(all(loom, test)), allow(dead_code))]
    pub(crate) unsafe fn store(&self, op: Store<'_>) -> Result<Stored, (StoreFail, *mut ())> {
        let mut lpath = Path::new();
        self.walk_to_write(op.first, &mut lpath);
        let mut out = Stored::default();
        // SAFETY: the caller's contract; `lpath` was just walked to `first`.
        unsafe { self.store_walked(&mut lpath, op, &mut out) }.map(|_| out)
    }

    /// [`store`](Self::store) from a walk the caller has made already (a
    /// cursor's position): `lpath` leads to the leaf slot containing
    /// `first`; what the write did goes into `out` (empty on entry, and
    /// left empty on failure). The result is true if `lpath` still leads to the
    /// leaf containing `first` afterwards (the write was an exact fit or
    /// stayed in its leaf, whose nodes all stay where they were; the
    /// offset within the leaf may be stale, see [`aim`](Self::aim)), so a
    /// cursor can go on from it without walking; false if `lpath` is stale.
    ///
    /// # Safety
    ///
    /// As for [`store`](Self::store); and `lpath` is a walk of this tree to
    /// `first` made since its last change (empty for an empty tree). What
    /// `t` is decides the kinds of write open (see the module docs).
    pub(crate) unsafe fn store_walked(
        &self,
        lpath: &mut Path<'_>,
        op: Store<'_>,
        out: &mut Stored,
    ) -> Result<bool, (StoreFail, *mut ())> {
        // SAFETY: the caller's contract: a walk of this tree as it is.
        let lpath = unsafe { rebind(lpath) };
        // SAFETY: the caller's contract.
        unsafe { Self::store_by(self, lpath, op, out) }
    }

    /// The one `match` over the kinds of write ([`WriteKind`]), for both
    /// accesses: `t` decides which kinds are open. Inlined into its
    /// callers, so that the kinds done straight from the walk cost no
    /// call; the lane and the general path are out of line
    /// ([`store_rest`](Self::store_rest)).
    ///
    /// # Safety
    ///
    /// As for [`store_walked`](Self::store_walked).
    #[inline(always)]
    unsafe fn store_by<'t>(
        t: impl Access<'t>,
        lpath: &mut Path<'t>,
        op: Store<'_>,
        out: &mut Stored,
    ) -> Result<bool, (StoreFail, *mut ())> {
        let kind = Self::classify(t, lpath, op.entry, op.exact, || (op.first, op.last));
        debug_assert!(op.first <= op.last);
        let (first, last, entry) = (op.first, op.last, op.entry);
        #[cfg(all(debug_assertions, feature = "fault-injection"))]
        let _budget = Budget::new(&kind, t.height.get());
        match kind {
            WriteKind::EmptyRoot => {
                // SAFETY: the caller makes us the only writer.
                let stored = unsafe { t.store_empty_root(first, last, entry) };
                stored.map(|()| false).map_err(|e| (e, ptr::null_mut()))
            }
            WriteKind::ExactFit(l) => {
                if op.insert_only {
                    return Err((StoreFail::Occupied, ptr::null_mut()));
                }
                // SAFETY: `lpath` is a current walk and we the only writer
                // (this function's contract); `entry` passes to the tree.
                out.removed.push(unsafe { t.replace_at(l, entry) });
                Ok(true)
            }
            WriteKind::EraseEntry(ex) => {
                // SAFETY: `ex`: no reader exists; we are the only writer;
                // `lpath` leads to the slot whose whole range is erased.
                match unsafe { ex.erase_entry_in_leaf(lpath, &mut out.removed) } {
                    Some(good) => Ok(good),
                    // SAFETY: as above; nothing changed.
                    None => unsafe { Self::store_rest(t, lpath, op, out, Some(ex)) },
                }
            }
            WriteKind::FillEmpty(ex, lo, hi) => {
                // SAFETY: `ex`: no reader exists; we are the only writer;
                // `lpath` leads to the empty slot `[lo, hi]`, which holds
                // `[first, last]`; `entry` is not null.
                match unsafe { ex.store_in_empty(lpath, first, last, entry, lo, hi) } {
                    Some(res) => res,
                    // SAFETY: as above; nothing changed.
                    None => unsafe { Self::store_rest(t, lpath, op, out, Some(ex)) },
                }
            }
            // SAFETY: the caller's contract; the range ends in the leaf.
            WriteKind::Lane(ex) => unsafe { Self::store_rest(t, lpath, op, out, Some(ex)) },
            // SAFETY: the caller's contract.
            WriteKind::General => unsafe { Self::store_rest(t, lpath, op, out, None) },
        }
    }

    /// The table's exact-fit row for a cursor replacing the range it
    /// stands on with `entry` (not null): the old word, if the classifier
    /// finds that row, else `None` with nothing changed (the write then
    /// goes through [`store_walked`](Self::store_walked)). A replace is a
    /// cursor's commonest write (the kernel's fork replaces every entry of
    /// a copy), and the row needs none of the match's lists.
    ///
    /// # Safety
    ///
    /// `lpath` is a walk of this tree made since its last change; the
    /// caller is the only writer; `entry` is a reserved marker or a
    /// handle, which passes to the tree if the row is taken.
    #[inline(always)]
    pub(crate) unsafe fn replace_here<'t>(t: impl Access<'t>, lpath: &Path<'t>, entry: *mut ()) -> Option<*mut ()> {
        debug_assert!(!entry.is_null());
        let slot = || lpath.last().map_or((0, u64::MAX), |l| l.leaf_range());
        match Self::classify(t, lpath, entry, true, slot) {
            // SAFETY: the caller's contract: a current walk, and we the
            // only writer.
            WriteKind::ExactFit(l) => Some(unsafe { t.replace_at(l, entry) }),
            _ => None,
        }
    }

    /// The kind of a write (the table in the module docs), from the walk
    /// `lpath`, the request and the access alone: `entry` over the range
    /// `range` gives, whose first index lies in the slot the walk stands
    /// on; `exact` if that range is exactly the slot's (then the exact fit
    /// and the erase of an entry are told from the words alone, and
    /// `range` is asked only for the other rows: a caller that has not
    /// read the bounds need not).
    #[inline(always)]
    fn classify<'t>(
        t: impl Access<'t>,
        lpath: &Path<'t>,
        entry: *mut (),
        exact: bool,
        range: impl FnOnce() -> (u64, u64),
    ) -> WriteKind<'t> {
        // (The walk of an empty tree is empty.)
        let Some(&l) = lpath.last() else {
            debug_assert!(t.root_node().is_none());
            return WriteKind::EmptyRoot;
        };
        let word = l.leaf().slot(l.off);
        let ex = t.no_readers();
        if exact && !word.is_null() {
            if !entry.is_null() {
                return WriteKind::ExactFit(l);
            }
            if let Some(ex) = ex {
                return WriteKind::EraseEntry(ex);
            }
        }
        let (first, last) = range();
        debug_assert!(!exact || l.leaf_range() == (first, last), "an exact write off its slot");
        debug_assert!(l.leaf_range().0 <= first && first <= l.leaf_range().1);
        if entry.is_null() {
            if let Some(ex) = ex.filter(|_| !word.is_null() && l.leaf_range() == (first, last)) {
                return WriteKind::EraseEntry(ex);
            }
        } else if !word.is_null() {
            if l.leaf_range() == (first, last) {
                return WriteKind::ExactFit(l);
            }
        } else if let Some(ex) = ex {
            let (lo, hi) = l.leaf_range();
            if last <= hi {
                return WriteKind::FillEmpty(ex, lo, hi);
            }
        }
        match ex {
            Some(ex) if last <= l.max => WriteKind::Lane(ex),
            _ => WriteKind::General,
        }
    }

    /// The kinds of write that are not done straight from the walk: the
    /// in-leaf lane first, given `lane` (the proof that no reader can be,
    /// for a range that ends in its start's leaf), then the general path:
    /// in-leaf store, refill and rebuild.
    ///
    /// # Safety
    ///
    /// As for [`store_walked`](Self::store_walked); with `lane`, `op.last`
    /// lies in the leaf `lpath` ends at.
    #[inline(never)]
    unsafe fn store_rest<'t>(
        t: impl Access<'t>,
        lpath: &mut Path<'t>,
        op: Store<'_>,
        out: &mut Stored,
        lane: Option<Exclusive<'t>>,
    ) -> Result<bool, (StoreFail, *mut ())> {
        let Store { mut first, mut last, entry, insert_only, mut split, rebase, exact: _ } = op;
        if let Some(ex) = lane {
            let w = LeafWrite { first, last, entry, insert_only, split: &mut split, rebase };
            // SAFETY: `ex`: no reader exists; we are the only writer
            // (the caller's contract); `lpath` leads to `first` and
            // `last` lies in its leaf.
            if let Some(done) = unsafe { ex.store_leaf_lane(lpath, w, &mut out.removed) } {
                // An emptied walk: the leaf was refilled with a sibling.
                return done.map(|()| !lpath.is_empty());
            }
        }
        let leaf = lpath.len() - 1;
        // What follows most often ends in a rebuild, which reads the leaf's
        // siblings (for a push, or to take one in): in a big tree they are
        // rarely in the cache, so start loading them now, to arrive while
        // the write is being worked out.
        prefetch_siblings(lpath);
        // The right path is only needed when the range leaves the leaf
        // (or an empty neighbour to absorb lies in the next one).
        let mut rpath = Path::new();
        rpath.extend(lpath.iter().copied());
        if last > lpath[leaf].max {
            t.tree().walk_into(last, &mut rpath);
        } else {
            rpath[leaf].off = rpath[leaf].node.find_from(lpath[leaf].off, last);
        }
        if entry.is_null() {
            // Empty ranges never touch: absorb empty neighbours.
            if let Some(lo) = t.empty_before(lpath, first) {
                first = lo;
            }
            if let Some(hi) = t.empty_after(&mut rpath, last) {
                last = hi;
            }
        }
        let l = lpath[leaf];
        let r = rpath[leaf];
        let (lleaf, rleaf) = (l.leaf(), r.leaf());
        let (lmin, lmax) = l.leaf_range();
        let (rmin, rmax) = r.leaf_range();
        let lval = lleaf.slot(l.off);
        let rval = rleaf.slot(r.off);
        let same_slot = l.node == r.node && l.off == r.off;

        if insert_only && !(lval.is_null() && lmax >= last) {
            return Err((StoreFail::Occupied, ptr::null_mut()));
        }

        let ends = Ends { lmin, lval, rmin, rmax, rval, same_slot };
        let cut = match cut(first, last, entry, ends, rebase, &mut split) {
            Ok(cut) => cut,
            Err(fail) => return Err((fail, ptr::null_mut())),
        };
        let (pieces, keep_left, keep_right, right_made) = (cut.pieces(), cut.keep_left, cut.keep_right, cut.right_made);
        let split_word = if right_made { pieces[pieces.len() - 1].slot } else { ptr::null_mut() };

        // The values that fall out of the tree, listed straight in `out`
        // (empty on entry; emptied again if the write fails), not built in
        // a local and moved: a move would copy it through words that
        // straddle the stores that built it.
        debug_assert_eq!(out.removed.len(), 0);
        let removed = &mut out.removed;
        if l.node == r.node {
            for k in l.off..=r.off {
                if !(k == l.off && keep_left || k == r.off && keep_right) {
                    removed.push(lleaf.slot(k));
                }
            }
        } else {
            for k in l.off..l.node.count() {
                if !(k == l.off && keep_left) {
                    removed.push(lleaf.slot(k));
                }
            }
            for k in 0..=r.off {
                if !(k == r.off && keep_right) {
                    removed.push(rleaf.slot(k));
                }
            }
        }
        let added = usize::from(is_value(entry)) + usize::from(right_made);

        // A write from one leaf into the next under the same parent.
        let across = (l.node != r.node
            && leaf > 0
            && lpath[leaf - 1].node == rpath[leaf - 1].node
            && rpath[leaf - 1].off == lpath[leaf - 1].off + 1)
            .then_some(r);
        for kind in general_kinds(t.no_readers(), l.node == r.node, across.is_some()) {
            match kind {
                GeneralKind::InLeaf(ex) => {
                    // SAFETY: `ex`: no reader exists; we are the only writer.
                    if unsafe { ex.store_in_leaf(lpath, r.off, pieces) } {
                        t.len.set(t.len.get() + added - out.removed.len());
                        // The leaf kept its place and bounds (only the offset
                        // of the slot holding `first` may have moved).
                        return Ok(true);
                    }
                }
                GeneralKind::Refill(ex) => {
                    let gone = out.removed.len();
                    // SAFETY: `ex`: no reader exists; we are the only writer;
                    // `lpath` and `r.off` (in `across`'s leaf, the next
                    // sibling, if given) are the write's walk, `pieces`
                    // replace its slots.
                    match unsafe { ex.split_leaf(lpath, l.off, across, r.off, pieces) } {
                        Some(Ok(())) => {
                            t.len.set(t.len.get() + added - gone);
                            return Ok(false);
                        }
                        Some(Err(e)) => {
                            // Nothing left the tree: the words listed are still
                            // in it.
                            *out = Stored::default();
                            return Err((e.into(), split_word));
                        }
                        None => {}
                    }
                }
            }
        }
        // The rebuild does every write the kinds above decline.
        // SAFETY: the caller's contract (only writer; retired nodes and
        // removed values freed after the readers that may see them).
        match unsafe { Self::rebuild(t, lpath, &mut rpath, pieces, out, added) } {
            Ok(()) => Ok(false),
            Err(e) => {
                // Nothing left the tree: the words listed are still in it.
                *out = Stored::default();
                Err((e, split_word))
            }
        }
    }

    /// [`store_walked`](Self::store_walked) through `&mut`, with the
    /// in-place writes open (or, for a tree that writes in fresh nodes,
    /// `fresh`, with the nodes retired freed at once: no reader can need
    /// them; `out.retired` is left empty). Inlined into the plain tree's
    /// write, so that the kinds done straight from the walk cost no call.
    ///
    /// # Safety
    ///
    /// As for [`store_walked`](Self::store_walked).
    #[inline(always)]
    pub(crate) unsafe fn store_mut_walked(
        &mut self,
        fresh: bool,
        lpath: &mut Path<'_>,
        op: Store<'_>,
        out: &mut Stored,
    ) -> Result<bool, (StoreFail, *mut ())> {
        if !fresh {
            // SAFETY: the caller's contract; `&mut self` makes us the only
            // writer and rules out readers. (Through an `Exclusive` nodes
            // are freed as they are replaced: nothing is retired.)
            // SAFETY: the caller's contract: a walk of this tree as it is.
            let lpath = unsafe { rebind(lpath) };
            // SAFETY: the caller's contract; `&mut self` makes us the only
            // writer and rules out readers.
            let res = unsafe { Self::store_by(self.exclusive(), lpath, op, out) };
            debug_assert!(out.retired.len() == 0, "a write through an `Exclusive` retired nodes");
            return res;
        }
        // SAFETY: as above.
        let res = unsafe { self.store_walked(lpath, op, out) };
        // A failed write hands nothing back: what it listed is still in the
        // tree (the fault-injection sweeps fail every write this way).
        debug_assert!(res.is_ok() || out.removed.len() == 0 && out.retired.len() == 0, "a failed write left results");
        let kept = res?;
        for n in out.retired.iter() {
            // SAFETY: retired nodes are unreachable and, with no readers,
            // need no grace period; each is listed once; `&mut self`.
            unsafe { self.slab.free(n) };
        }
        out.retired = Retired::default();
        Ok(kept)
    }

    /// If the range just before `first` is empty, returns its start and
    /// moves `lpath` onto it.
    fn empty_before(&self, lpath: &mut Path<'_>, first: u64) -> Option<u64> {
        let leaf = lpath.len() - 1;
        let l = &mut lpath[leaf];
        let (lmin, _) = l.leaf_range();
        if l.leaf().slot(l.off).is_null() {
            return Some(lmin);
        }
        if lmin != first || first == 0 {
            return None;
        }
        if l.off > 0 {
            if !l.leaf().slot(l.off - 1).is_null() {
                return None;
            }
            l.off -= 1;
            return Some(l.leaf_range().0);
        }
        // The previous range is the last of the previous leaf.
        empty_across(lpath, false)
    }

    /// If the range just after `last` is empty, returns its end and moves
    /// `rpath` onto it.
    fn empty_after(&self, rpath: &mut Path<'_>, last: u64) -> Option<u64> {
        let leaf = rpath.len() - 1;
        let r = &mut rpath[leaf];
        let (_, rmax) = r.leaf_range();
        if r.leaf().slot(r.off).is_null() {
            return Some(rmax);
        }
        if rmax != last || last == u64::MAX {
            return None;
        }
        if r.node.has_next(r.off) {
            if !r.leaf().slot(r.off + 1).is_null() {
                return None;
            }
            r.off += 1;
            return Some(r.leaf_range().1);
        }
        // The next range is the first of the next leaf.
        empty_across(rpath, true)
    }

    /// `node`'s item in its parent, for a node over `[min, max]`: its
    /// bound, its pointer, and (in a gap tree) its largest gap.
    #[inline]
    pub(super) fn item_for(&self, node: NodeRef<'_>, min: u64, max: u64) -> Item {
        let gap = if self.gaps { node.max_gap(min, max) } else { 0 };
        Item { last: max, slot: node.encode(), gap }
    }

    /// Store into an empty tree.
    ///
    /// # Safety
    ///
    /// As for [`store`](Self::store).
    unsafe fn store_empty_root(&self, first: u64, last: u64, entry: *mut ()) -> Result<(), StoreFail> {
        if entry.is_null() {
            return Ok(());
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
        let node = unsafe { self.slab.alloc(Kind::Leaf) }?.fill(&content);
        node.set_root_parent();
        self.root.store(node.encode(), Ordering::Release);
        self.height.set(1);
        self.len.set(usize::from(is_value(entry)));
        Ok(())
    }
}

/// A xorshift generator from `seed` (not zero), for the write tests'
/// random sequences.
#[cfg(test)]
pub(super) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
