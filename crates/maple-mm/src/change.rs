//! What a call changed: the vocabulary an address space's observer hears
//! after each call ([`AddressSpace::set_observer`]) and
//! [`AddressSpace::diff`] returns, and the sweep that finds it.
//!
//! [`AddressSpace::set_observer`]: crate::AddressSpace::set_observer
//! [`AddressSpace::diff`]: crate::AddressSpace::diff
//!
//! A change is about pages and their attributes, not about how they are
//! cut into VMAs: a merge or a split that leaves every page's attributes
//! as they were is no change. So replaying the changes on a simple map of
//! ranges (an emulator's page table, a translation cache's index)
//! reproduces the space's pages and attributes exactly, whatever the VMA
//! boundaries.

use core::{fmt, mem::ManuallyDrop, ops::Range};

use crate::{
    vma::{Vma, VmaData},
    vma_slab::VmaRef,
};

/// One change to the pages of an address space, with the attributes
/// before and after (read them through [`vma`](Change::vma) and
/// [`old_vma`](Change::old_vma)).
///
/// ```
/// use maple_mm::{AddressSpace, Change, MapFlags, Prot, PAGE_SIZE};
/// use std::sync::{Arc, Mutex};
///
/// let mut mm = AddressSpace::new();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
/// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
/// mm.mmap(0x10000, 4 * PAGE_SIZE, Prot::RW, anon, None, 0)?;
/// mm.mprotect(0x11000, PAGE_SIZE, Prot::READ)?;
/// assert!(mm.munmap(0x10001, PAGE_SIZE).is_err()); // a failed call: nothing
/// assert_eq!(
///     *seen.lock().unwrap(),
///     [
///         "mapped 10000-14000 rw-p",
///         "changed 11000-12000 rw-p -> r--p",
///     ]
/// );
/// # Ok::<(), maple_mm::Errno>(())
/// ```
#[derive(Clone)]
pub enum Change {
    /// `range` was unmapped and is now mapped.
    Mapped {
        /// The pages.
        range: Range<u64>,
        /// Their attributes.
        new: VmaRef,
    },
    /// `range` was mapped and is now unmapped.
    Unmapped {
        /// The pages.
        range: Range<u64>,
        /// Their attributes before.
        old: VmaRef,
    },
    /// `range` stays mapped with other attributes (protection, flags such
    /// as locks, seals and advice, name, memory policy, or the anon_vma a
    /// first write gives it).
    Changed {
        /// The pages.
        range: Range<u64>,
        /// Their attributes before.
        old: VmaRef,
        /// Their attributes now.
        new: VmaRef,
    },
    /// The pages of `from` moved to `to` (`mremap`) with their attributes
    /// and contents, keeping their file offsets; `from` is now unmapped.
    /// The target was unmapped first (reported as [`Unmapped`](Change::Unmapped)
    /// before this). Changes the move made besides (a grown tail, a merge
    /// giving the pages another anon_vma, what `MREMAP_DONTUNMAP` leaves
    /// at `from`) follow as changes of their own.
    Moved {
        /// Where the pages were.
        from: Range<u64>,
        /// Where they start now.
        to: u64,
    },
}

impl Change {
    /// The pages changed: for a move, where they are now.
    pub fn range(&self) -> Range<u64> {
        match self {
            Change::Mapped { range, .. } | Change::Unmapped { range, .. } | Change::Changed { range, .. } => {
                range.clone()
            }
            Change::Moved { from, to } => *to..*to + (from.end - from.start),
        }
    }

    /// The pages as they are now, if mapped and not moved: their range and
    /// attributes as a [`Vma`] (not necessarily a whole VMA).
    pub fn vma(&self) -> Option<Vma<'_>> {
        match self {
            Change::Mapped { range, new } | Change::Changed { range, new, .. } => {
                Some(Vma { start: range.start, end: range.end, data: new })
            }
            _ => None,
        }
    }

    /// The pages as they were, if they were mapped and did not move.
    pub fn old_vma(&self) -> Option<Vma<'_>> {
        match self {
            Change::Unmapped { range, old } | Change::Changed { range, old, .. } => {
                Some(Vma { start: range.start, end: range.end, data: old })
            }
            _ => None,
        }
    }
}

fn perms(v: Option<Vma<'_>>) -> String {
    v.map_or(String::new(), |v| String::from_utf8_lossy(&v.perms()).into_owned())
}

impl fmt::Display for Change {
    /// One line: the kind, the range in hex (as the maps file writes it),
    /// and the permissions before and after.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.range();
        match self {
            Change::Mapped { .. } => write!(f, "mapped {:x}-{:x} {}", r.start, r.end, perms(self.vma())),
            Change::Unmapped { .. } => write!(f, "unmapped {:x}-{:x} {}", r.start, r.end, perms(self.old_vma())),
            Change::Changed { .. } => {
                write!(f, "changed {:x}-{:x} {} -> {}", r.start, r.end, perms(self.old_vma()), perms(self.vma()))
            }
            Change::Moved { from, to } => write!(f, "moved {:x}-{:x} to {:x}", from.start, from.end, to),
        }
    }
}

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Mapped { range, new } => {
                f.debug_struct("Mapped").field("range", range).field("new", &Vma::at(range, new)).finish()
            }
            Change::Unmapped { range, old } => {
                f.debug_struct("Unmapped").field("range", range).field("old", &Vma::at(range, old)).finish()
            }
            Change::Changed { range, old, new } => f
                .debug_struct("Changed")
                .field("range", range)
                .field("old", &Vma::at(range, old))
                .field("new", &Vma::at(range, new))
                .finish(),
            Change::Moved { from, to } => f.debug_struct("Moved").field("from", from).field("to", to).finish(),
        }
    }
}

impl<'a> Vma<'a> {
    fn at(range: &Range<u64>, data: &'a VmaData) -> Vma<'a> {
        Vma { start: range.start, end: range.end, data }
    }
}

/// Told every change a call made to an address space, in order, once the
/// call has made them all (see
/// [`AddressSpace::set_observer`](crate::AddressSpace::set_observer)). Any
/// `FnMut(&Change)` is one.
pub trait Observer: Send {
    /// One change.
    fn change(&mut self, change: &Change);
}

impl<F: FnMut(&Change) + Send> Observer for F {
    fn change(&mut self, change: &Change) {
        self(change)
    }
}

/// What [`Events::tell_writes`] told, in debug builds (to check against
/// a sweep); nothing in release builds.
#[cfg(debug_assertions)]
pub(crate) type Told = Vec<String>;
/// What [`Events::tell_writes`] told, in debug builds (to check against
/// a sweep); nothing in release builds.
#[cfg(not(debug_assertions))]
pub(crate) type Told = ();

/// An address space's observer and what the call under way has moved.
pub(crate) struct Events {
    /// In a mutex only so that an address space stays `Sync` with an
    /// observer that is only `Send`: reached through `&mut`, never locked.
    observer: std::sync::Mutex<Box<dyn Observer>>,
    /// Ranges moved by the call under way, in order: `(start, end, to)`.
    pub(crate) moves: Vec<(u64, u64, u64)>,
    /// The call's writes to the tree, in order (`None` for a removal):
    /// the old entries with these applied are the new ones, without a
    /// second walk.
    pub(crate) writes: smallvec::SmallVec<[Write; 4]>,
    /// How deep in nested calls: only the outermost reports.
    pub(crate) depth: u32,
}

impl Events {
    pub(crate) fn new(observer: Box<dyn Observer>) -> Events {
        Events {
            observer: std::sync::Mutex::new(observer),
            moves: Vec::new(),
            writes: smallvec::SmallVec::new(),
            depth: 0,
        }
    }

    /// Tells the changes the call's writes made to the window `[lo, hi)`
    /// whose pieces before the call are `old` (see [`diff_writes`]).
    pub(crate) fn tell_writes(&mut self, old: &[Piece], lo: u64, hi: u64) -> Told {
        let observer = self.observer.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut teller = Teller::new(&mut **observer);
        diff_writes(old, &self.writes, lo, hi, &mut teller);
        teller.finish();
        #[cfg(debug_assertions)]
        return teller.told;
    }

    pub(crate) fn tell(&mut self, changes: &[Change]) {
        // (A panic in an observer poisons nothing the space relies on.)
        let observer = self.observer.get_mut().unwrap_or_else(|p| p.into_inner());
        for c in changes {
            observer.change(c);
        }
    }
}

/// A piece of a space: `[start, end)` and its attributes.
pub(crate) type Piece = (u64, u64, VmaRef);

/// The changes of one call: most calls make one or two.
pub(crate) type Changes = smallvec::SmallVec<[Change; 2]>;

/// The same attributes, everything a VMA records compared by value (two
/// records made apart but equal are no change; two opens of one file, at
/// the same offsets, are the same pages).
pub(crate) fn same_attrs(a: &VmaData, b: &VmaData) -> bool {
    if core::ptr::eq(a, b) {
        // One record (a piece the call left alone).
        return true;
    }
    let backing = match (a.backing.file(), b.backing.file()) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            core::ptr::eq(x, y)
                || (x.same_file(y)
                    && (x.path.as_str(), x.writable, x.sysv_shm) == (y.path.as_str(), y.writable, y.sysv_shm))
        }
        _ => false,
    };
    a.flags == b.flags
        && backing
        && a.off_base == b.off_base
        && a.name == b.name
        && a.anon == b.anon
        && a.policy == b.policy
        && crate::vma::same_extra(&a.extra, &b.extra)
}

/// A change as a sweep finds it, borrowing the attributes from the pieces
/// it compares: mapped without `old`, unmapped without `new`, changed with
/// both.
#[derive(Clone, Copy)]
pub(crate) struct Found<'a> {
    start: u64,
    end: u64,
    old: Option<&'a VmaRef>,
    new: Option<&'a VmaRef>,
}

impl<'a> Found<'a> {
    fn mapped(start: u64, end: u64, new: &'a VmaRef) -> Found<'a> {
        Found { start, end, old: None, new: Some(new) }
    }

    fn unmapped(start: u64, end: u64, old: &'a VmaRef) -> Found<'a> {
        Found { start, end, old: Some(old), new: None }
    }

    fn changed(start: u64, end: u64, old: &'a VmaRef, new: &'a VmaRef) -> Found<'a> {
        Found { start, end, old: Some(old), new: Some(new) }
    }

    /// The change, owning its references.
    fn to_change(self) -> Change {
        let range = self.start..self.end;
        match (self.old, self.new) {
            (None, Some(new)) => Change::Mapped { range, new: new.clone() },
            (Some(old), None) => Change::Unmapped { range, old: old.clone() },
            (Some(old), Some(new)) => Change::Changed { range, old: old.clone(), new: new.clone() },
            (None, None) => unreachable!("a found change maps, unmaps or changes"),
        }
    }

    /// Whether `next` continues this change: the same kind, touching, with
    /// the same attributes.
    fn joins(&self, next: &Found<'_>) -> bool {
        let same = |a: Option<&VmaRef>, b: Option<&VmaRef>| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => same_attrs(a, b),
            _ => false,
        };
        self.end == next.start && same(self.old, next.old) && same(self.new, next.new)
    }

    /// A change already made, as found.
    fn of(c: &Change) -> Option<Found<'_>> {
        Some(match c {
            Change::Mapped { range, new } => Found::mapped(range.start, range.end, new),
            Change::Unmapped { range, old } => Found::unmapped(range.start, range.end, old),
            Change::Changed { range, old, new } => Found::changed(range.start, range.end, old, new),
            Change::Moved { .. } => return None,
        })
    }
}

/// Tells `observer` the change `f` found, holding its references without
/// counting them: a count is an atomic read-modify-write, otherwise among
/// the largest parts of an observer's cost. The records stay alive
/// throughout, borrowed by `f`; the change is made here, lent to the
/// observer, and never dropped, so no count is given back that was not
/// taken. An observer keeping a clone counts its own references.
#[allow(unsafe_code)]
fn tell_uncounted(observer: &mut dyn Observer, f: Found<'_>) {
    // SAFETY: a bitwise copy of a borrowed reference, kept in the
    // `ManuallyDrop` below and so never dropped, and gone when this
    // function returns, while the borrow keeps its record alive.
    let copy = |r: &VmaRef| unsafe { core::ptr::read(r) };
    let range = f.start..f.end;
    let change = ManuallyDrop::new(match (f.old, f.new) {
        (None, Some(new)) => Change::Mapped { range, new: copy(new) },
        (Some(old), None) => Change::Unmapped { range, old: copy(old) },
        (Some(old), Some(new)) => Change::Changed { range, old: copy(old), new: copy(new) },
        (None, None) => return,
    });
    observer.change(&change);
}

/// Where a sweep puts the changes it finds, in order.
pub(crate) trait Sink<'a> {
    /// One more change, joined to the one before where the two are one.
    fn add(&mut self, f: Found<'a>);
}

impl Sink<'_> for Changes {
    #[inline]
    fn add(&mut self, f: Found<'_>) {
        if let Some(last) = self.last_mut() {
            if Found::of(last).is_some_and(|l| l.joins(&f)) {
                if let Change::Mapped { range, .. } | Change::Unmapped { range, .. } | Change::Changed { range, .. } =
                    last
                {
                    range.end = f.end;
                }
                return;
            }
        }
        self.push(f.to_change());
    }
}

/// Changes told to an observer as they are found, without a list and
/// without counting references: the last is held until the next cannot
/// join it, or [`finish`](Self::finish).
pub(crate) struct Teller<'a, 'o> {
    observer: &'o mut dyn Observer,
    held: Option<Found<'a>>,
    /// What it told, to check against a sweep.
    #[cfg(debug_assertions)]
    pub(crate) told: Vec<String>,
}

impl<'a, 'o> Teller<'a, 'o> {
    pub(crate) fn new(observer: &'o mut dyn Observer) -> Teller<'a, 'o> {
        Teller {
            observer,
            held: None,
            #[cfg(debug_assertions)]
            told: Vec::new(),
        }
    }

    fn tell(&mut self, f: Found<'a>) {
        #[cfg(debug_assertions)]
        self.told.push(format!("{:?}", f.to_change()));
        tell_uncounted(self.observer, f);
    }

    /// Tells the change held back.
    pub(crate) fn finish(&mut self) {
        if let Some(f) = self.held.take() {
            self.tell(f);
        }
    }
}

impl<'a> Sink<'a> for Teller<'a, '_> {
    #[inline]
    fn add(&mut self, f: Found<'a>) {
        match &mut self.held {
            Some(last) if last.joins(&f) => last.end = f.end,
            held => {
                if let Some(prev) = held.replace(f) {
                    self.tell(prev);
                }
            }
        }
    }
}

/// The changes that turn `before` into `after`, appended to `out`: both
/// sorted, their pieces not overlapping.
pub(crate) fn diff_into<'a>(before: &'a [Piece], after: &'a [Piece], out: &mut impl Sink<'a>) {
    let (mut i, mut j) = (0, 0);
    let Some(mut pos) = [before.first(), after.first()].into_iter().flatten().map(|p| p.0).min() else {
        return;
    };
    loop {
        while before.get(i).is_some_and(|p| p.1 <= pos) {
            i += 1;
        }
        while after.get(j).is_some_and(|p| p.1 <= pos) {
            j += 1;
        }
        // What holds `pos` on each side, and where that next changes.
        let (b, b_next) = holding(before.get(i), pos);
        let (a, a_next) = holding(after.get(j), pos);
        let Some(next) = [b_next, a_next].into_iter().flatten().min() else { return };
        match (b, a) {
            (None, None) => {}
            (None, Some(n)) => out.add(Found::mapped(pos, next, n)),
            (Some(o), None) => out.add(Found::unmapped(pos, next, o)),
            (Some(o), Some(n)) => {
                if !same_attrs(o, n) {
                    out.add(Found::changed(pos, next, o, n));
                }
            }
        }
        pos = next;
    }
}

/// The attributes at `pos` given the first piece not ending at or before
/// it, and where that next changes.
fn holding(p: Option<&Piece>, pos: u64) -> (Option<&VmaRef>, Option<u64>) {
    match p {
        Some(p) if p.0 <= pos => (Some(&p.2), Some(p.1)),
        Some(p) => (None, Some(p.0)),
        None => (None, None),
    }
}

/// `pieces` cut to `[lo, hi)`.
pub(crate) fn clip(pieces: &[Piece], lo: u64, hi: u64) -> Vec<Piece> {
    pieces.iter().filter(|p| p.0 < hi && p.1 > lo).map(|(s, e, d)| ((*s).max(lo), (*e).min(hi), d.clone())).collect()
}

/// A write a call made to the tree, noted for its observer: `[start, end)`
/// holds the value since, or was emptied for `None`.
pub(crate) type Write = (u64, u64, Option<VmaRef>);

/// `pieces` (sorted, apart) with `[s, e)` cut out of them, and `(s, e, v)`
/// put in its place if `v` is given.
pub(crate) fn splice<T: Clone, A: smallvec::Array<Item = (u64, u64, T)>>(
    pieces: &mut smallvec::SmallVec<A>,
    s: u64,
    e: u64,
    mut v: Option<T>,
) {
    let mut out = smallvec::SmallVec::<A>::new();
    let put = |out: &mut smallvec::SmallVec<A>, v: &mut Option<T>| {
        if let Some(v) = v.take() {
            out.push((s, e, v));
        }
    };
    for (ps, pe, d) in pieces.drain(..) {
        if pe <= s {
            out.push((ps, pe, d));
            continue;
        }
        if ps >= e {
            put(&mut out, &mut v);
            out.push((ps, pe, d));
            continue;
        }
        if ps < s {
            out.push((ps, s, d.clone()));
        }
        put(&mut out, &mut v);
        if pe > e {
            out.push((e, pe, d));
        }
    }
    put(&mut out, &mut v);
    *pieces = out;
}

/// The changes a call's `writes` (in the order made) made to the pages of
/// `[lo, hi)`, whose pieces before the call are `old`, appended to `out`.
///
/// Only pages a write covers can have changed, and what they hold now is
/// what the last write covering them put there: the changes come from the
/// writes and the old pieces under them, without reading the tree again
/// or rebuilding the window.
pub(crate) fn diff_writes<'a>(old: &'a [Piece], writes: &'a [Write], lo: u64, hi: u64, out: &mut impl Sink<'a>) {
    fn clipped(w: &Write, lo: u64, hi: u64) -> (u64, u64, Option<&VmaRef>) {
        (w.0.max(lo), w.1.min(hi), w.2.as_ref())
    }
    // Most calls end with a write covering all their others (`MAP_FIXED`
    // empties its range, then maps it): the last is then all there is.
    if let Some((last, earlier)) = writes.split_last() {
        if earlier.iter().all(|w| last.0 <= w.0 && w.1 <= last.1) {
            let w = clipped(last, lo, hi);
            if w.0 < w.1 {
                diff_over(old, &[w], out);
            }
            return;
        }
    }
    // Later writes over earlier ones: what each page was last given.
    let mut now = smallvec::SmallVec::<[(u64, u64, Option<&VmaRef>); 4]>::new();
    for w in writes {
        let (s, e, v) = clipped(w, lo, hi);
        if s < e {
            splice(&mut now, s, e, Some(v));
        }
    }
    diff_over(old, &now, out);
}

/// The changes made by writing `now` (sorted, apart; `None` empties)
/// over `old`.
fn diff_over<'a>(old: &'a [Piece], now: &[(u64, u64, Option<&'a VmaRef>)], out: &mut impl Sink<'a>) {
    let mut rest = old;
    for &(s, e, v) in now {
        // The old pieces not ending before this write.
        while let [p, tail @ ..] = rest {
            if p.1 > s {
                break;
            }
            rest = tail;
        }
        let mut pos = s;
        while let [p, tail @ ..] = rest {
            if p.0 >= e {
                break;
            }
            if p.0 > pos {
                gap(out, pos, p.0, v);
            }
            let (from, to) = (p.0.max(pos), p.1.min(e));
            pos = to;
            match v {
                None => out.add(Found::unmapped(from, to, &p.2)),
                Some(n) if !same_attrs(&p.2, n) => out.add(Found::changed(from, to, &p.2, n)),
                Some(_) => {}
            }
            if p.1 > e {
                // (It may lie under the next write too.)
                break;
            }
            rest = tail;
        }
        if pos < e {
            gap(out, pos, e, v);
        }
    }
}

/// `old` (the pieces of `[lo, hi)` before a call) with the call's
/// `writes` applied, and the changes from one to the other found by a
/// sweep: the long way round, to check [`diff_writes`].
#[cfg(any(test, debug_assertions))]
pub(crate) fn applied(old: &[Piece], writes: &[Write], lo: u64, hi: u64) -> (Vec<Piece>, Changes) {
    let mut after: smallvec::SmallVec<[Piece; 4]> = old.iter().cloned().collect();
    for (s, e, v) in writes {
        let (s, e) = ((*s).max(lo), (*e).min(hi));
        if s < e {
            splice(&mut after, s, e, v.clone());
        }
    }
    let mut swept = Changes::new();
    diff_into(old, &after, &mut swept);
    (after.into_vec(), swept)
}

/// Pages that were unmapped, written with `v`.
fn gap<'a>(out: &mut impl Sink<'a>, s: u64, e: u64, v: Option<&'a VmaRef>) {
    if let Some(n) = v {
        out.add(Found::mapped(s, e, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AddressSpace, MapFlags, Prot};

    const P: u64 = 0x1000;

    /// The changes of `writes` over `old`, told from the writes and swept
    /// from the rebuilt window: the two must agree.
    fn told(old: &[Piece], writes: &[Write]) -> Vec<String> {
        let mut fast = Changes::new();
        diff_writes(old, writes, 0, u64::MAX, &mut fast);
        let (_, swept) = applied(old, writes, 0, u64::MAX);
        let fast: Vec<String> = fast.iter().map(|c| c.to_string()).collect();
        assert_eq!(fast, swept.iter().map(|c| c.to_string()).collect::<Vec<_>>());
        fast
    }

    /// Changes are told holding uncounted references: an observer that
    /// keeps clones must own them past the call and past the space (under
    /// Miri, a count given back that was not taken is a use after free).
    #[test]
    fn an_observer_keeps_what_it_is_told() {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Change>::new()));
        let keep = std::sync::Arc::clone(&kept);
        let mut mm = AddressSpace::new();
        mm.set_observer(move |c: &Change| keep.lock().unwrap().push(c.clone()));
        let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        mm.mmap(0x10000, 4 * P, Prot::RW, f, None, 0).unwrap();
        mm.mprotect(0x11000, P, Prot::READ).unwrap();
        mm.mprotect(0x11000, P, Prot::RW).unwrap();
        mm.munmap(0x10000, 2 * P).unwrap();
        drop(mm);
        let kept = kept.lock().unwrap();
        assert_eq!(
            kept.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            [
                "mapped 10000-14000 rw-p",
                "changed 11000-12000 rw-p -> r--p",
                "changed 11000-12000 r--p -> rw-p",
                "unmapped 10000-12000 rw-p",
            ]
        );
    }

    #[test]
    fn writes_under_one_piece_and_beside_it() {
        let mut mm = AddressSpace::new();
        let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        mm.mmap(0x10000, 10 * P, Prot::RW, f, None, 0).unwrap();
        mm.mmap(0x40000, P, Prot::READ, f, None, 0).unwrap();
        let old = mm.entries(0x10000, 0x1a000);
        let rw = old[0].2.clone();
        let ro = mm.entries(0x40000, 0x41000)[0].2.clone();
        // Two writes apart under one piece: both seen.
        assert_eq!(
            told(&old, &[(0x12000, 0x13000, Some(ro.clone())), (0x15000, 0x16000, Some(ro.clone()))]),
            ["changed 12000-13000 rw-p -> r--p", "changed 15000-16000 rw-p -> r--p"]
        );
        // Touching writes under one piece, the second changing nothing.
        assert_eq!(
            told(&old, &[(0x12000, 0x13000, Some(ro.clone())), (0x13000, 0x14000, Some(rw.clone()))]),
            ["changed 12000-13000 rw-p -> r--p"]
        );
        // Holes unmapped, joined where they touch; pages mapped past it.
        assert_eq!(
            told(&old, &[(0x11000, 0x12000, None), (0x12000, 0x13000, None), (0x19000, 0x1c000, Some(ro.clone()))]),
            ["unmapped 11000-13000 rw-p", "changed 19000-1a000 rw-p -> r--p", "mapped 1a000-1c000 r--p"]
        );
        // A write a later one covers leaves nothing of its own.
        assert_eq!(
            told(&old, &[(0x12000, 0x13000, None), (0x11000, 0x14000, Some(ro.clone()))]),
            ["changed 11000-14000 rw-p -> r--p"]
        );
        // Later writes over earlier ones, partly.
        assert_eq!(
            told(&old, &[(0x12000, 0x16000, Some(ro)), (0x13000, 0x14000, Some(rw)), (0x15000, 0x1b000, None)]),
            ["changed 12000-13000 rw-p -> r--p", "changed 14000-15000 rw-p -> r--p", "unmapped 15000-1a000 rw-p"]
        );
    }
}
