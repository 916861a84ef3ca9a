//! Calls that overlapped in a log, applied in an order their results
//! allow.
//!
//! strace writes a call that another thread's line interrupts in two
//! halves, `<unfinished ...>` at its entry and `<... resumed>` at its
//! return; the kernel ran it at some moment in between, under the
//! space's mmap lock. Two calls of one space whose halves interleave
//! could have run in either order, and the order of their returns (the
//! order the lines give) is often not the one they ran in: one thread's
//! `munmap` returns after another's `mmap` was given the range it freed.
//!
//! So while a space has a call in flight, each call of it that returns
//! goes through these steps, the first that gives every call its logged
//! result winning:
//!
//! 1. **Place**: after the calls applied before it (the order of
//!    returns), or before the last few of those that returned after it
//!    began (they are applied again after it, from a copy of the space).
//! 2. **Move earlier**: one of the last [`KEPT`] calls moved after those
//!    that began before it returned, the calls after it applied again (a
//!    thread's `mremap` moving what another's `MAP_FIXED` had just put
//!    in its place agrees either way, until a later call shows which).
//!    Skipped while a call in flight could still change its result (its
//!    range reaches the call's, see [`Reach`]; or it may map anywhere and
//!    the kernel did not place the call: a new mapping cannot free a
//!    place).
//! 3. **Switch**: an alternative space agrees (below).
//! 4. **Wait** for the calls in flight and the others waiting, tried again
//!    whenever one of them is applied; when none is left, the first to
//!    return goes after all others, its disagreement reported with the
//!    lines of the calls it overlapped.
//!
//! **Alternatives.** Two overlapping calls of one range can agree in
//! either order and leave different layouts (thread 1's `munmap` and
//! thread 2's `MAP_FIXED` of one page). When a call placed after the
//! others also agrees before the last of them it shares a page with,
//! the space that order leaves is kept beside the model's (at most
//! [`ALTERNATIVES`]) and every later call applied to it too; it goes
//! when a result rules it out or the layouts are alike again, and it
//! becomes the model's when a call agrees with it and nothing else (a
//! decision the log shows hundreds of calls later, past the window of
//! kept calls). One still apart at the end is the log's own ambiguity,
//! told in [`ReplayStats::undecided`](super::ReplayStats::undecided).
//!
//! A log that does not overlap goes the plain way, at no cost; one that
//! does pays a copy of the space when a run of overlapping calls begins,
//! and each kept call is applied twice (the second time to that copy,
//! when it leaves the window), with a copy of the space every
//! [`MARK_EVERY`] kept calls, from which an order tried at a position is
//! applied, and one before each call returning while another thread's
//! is in flight (the last [`NEAR`]), from which its other order is. Trying
//! orders after a disagreement is bounded: [`PER_CALL`] applications per
//! returning call, and once a replay has spent [`PER_REPLAY`] none (a
//! log no order fits, one with lines missing, costs a few seconds at
//! most).

use std::{cell::RefCell, rc::Rc};

use super::{is_memory_call, names_range, ReplayError, Replayer};
use crate::{
    space::AddressSpace,
    strace::parse::{arg_value, parse_line, split_args, Event},
    PAGE_SIZE,
};

/// A memory call as the log gave it, to be applied (again) in some order.
#[derive(Clone, Debug)]
pub(super) struct Logged {
    /// The line it returned on (its number in disagreements).
    pub no: usize,
    /// The line it began on.
    pub entry: usize,
    pub pid: u32,
    /// The call as one line: `PID NAME(ARGS) = RESULT`.
    pub line: String,
}

/// How many calls of a space that overlapped others are kept for a later
/// disagreement to reorder (two racing threads' calls can show a wrong
/// order some hundred calls later).
const KEPT: usize = 512;

/// How many calls in a row that no other line split end the record of
/// a run of overlapping calls (and its window).
const QUIET: usize = 64;

/// How many other orders a space follows at once (see `Overlap::alts`).
const ALTERNATIVES: usize = 8;

/// How far back among the calls it overlapped a call's other order is
/// looked for (see `Overlap::alts`).
const NEAR: usize = 8;

/// Kept calls between two copies of the space (see `Overlap::marks`).
const MARK_EVERY: usize = 32;

/// How many calls the orders one returning call tries may apply in all
/// (a few tenths of a second)...
const PER_CALL: usize = 1 << 18;

/// ...until a replay has applied this many in trying orders (some
/// seconds): then its calls go where they first agree, or last, and a
/// log no order fits (a log with lines missing) costs no more.
const PER_REPLAY: usize = 1 << 21;

/// The calls of one space returned while another of its calls was in
/// flight.
pub(super) struct Overlap {
    /// The space before the first of `applied`.
    base: AddressSpace,
    /// Applied, in this order.
    applied: Vec<Logged>,
    /// Disagreeing wherever tried, waiting for a call in flight.
    held: Vec<Logged>,
    /// Copies of the space along `applied`: `(i, the base with the first
    /// i applied)`, every [`MARK_EVERY`] calls, so that an order tried at
    /// some position applies the calls from the mark before it, not from
    /// the base.
    marks: Vec<(usize, AddressSpace)>,
    /// Calls the orders tried for the call being placed may still apply
    /// (see [`PER_CALL`]).
    budget: std::cell::Cell<usize>,
    /// The space before each of the last [`NEAR`] applied calls (while
    /// they were applied in this order), for a call's other order.
    recent: std::collections::VecDeque<Option<AddressSpace>>,
    /// The other order of two calls that agreed both ways but left
    /// different spaces, followed call by call until a result rules it
    /// out or the spaces are alike again (at most [`ALTERNATIVES`]).
    alts: Vec<Alternative>,
}

/// A space the log allows as well as the model's.
struct Alternative {
    /// The lines the two calls returned on, the later one first in this
    /// order.
    lines: (usize, usize),
    space: AddressSpace,
}

impl Overlap {
    /// Appends `c`, applied: `space` is the base with every applied call.
    /// `before` is the space before `c`, kept (in `recent`) where a call
    /// of another thread was in flight when `c` returned: only such a
    /// call can come back to go before `c`.
    fn push(&mut self, c: Logged, space: &AddressSpace, before: Option<AddressSpace>) {
        self.applied.push(c);
        if self.applied.len() % MARK_EVERY == 0 {
            self.marks.push((self.applied.len(), space.clone()));
        }
        if self.recent.len() >= NEAR {
            self.recent.pop_front();
        }
        self.recent.push_back(before);
    }

    /// The latest copy of the space with at most the first `at` applied
    /// calls, and how many it has.
    fn mark_before(&self, at: usize) -> (&AddressSpace, usize) {
        self.marks.iter().rev().find(|(i, _)| *i <= at).map_or((&self.base, 0), |(i, m)| (m, *i))
    }
}

type Key = *const RefCell<AddressSpace>;

/// Where an order tried starts (see `Replayer::trial`).
enum Start<'a> {
    /// The latest copy in `Overlap::marks` with at most this many kept
    /// calls.
    MarkBefore(usize),
    /// This space, with this many kept calls applied.
    Space(&'a AddressSpace, usize),
}

impl Replayer {
    /// Whether memory call `name` of `pid` returning now takes the
    /// ordered path: its space has another call in flight, or calls
    /// applied while one was. (Not while changes are recorded: a trial
    /// would be told to the observer.)
    pub(super) fn overlapping(&self, pid: u32, name: &str) -> bool {
        if self.heard.is_some() || !is_memory_call(name) {
            return false;
        }
        let Some(proc) = self.procs.get(&pid) else { return false };
        let key = Rc::as_ptr(&proc.space);
        self.overlaps.contains_key(&key) || self.in_flight(key, Some(pid)).is_some()
    }

    /// The earliest entry line of a memory call of space `key` in flight
    /// (in a thread other than `but`).
    fn in_flight(&self, key: Key, but: Option<u32>) -> Option<usize> {
        self.pending
            .iter()
            .filter(|(p, (name, _, _))| Some(**p) != but && is_memory_call(name))
            .filter(|(p, _)| self.procs.get(p).is_some_and(|q| Rc::as_ptr(&q.space) == key))
            .map(|(_, (_, _, entry))| *entry)
            .min()
    }

    /// Whether a call of space `key` in flight in another thread than
    /// `c`'s may change what `c` found: it reaches `c`'s range or next to
    /// it (merges), or it may map where its text does not say and `c`
    /// is not a placed call (a new mapping cannot free a place).
    fn in_flight_touching(&self, key: Key, c: &Logged) -> bool {
        let mine = Reach::of_logged(c);
        self.pending
            .iter()
            .filter(|(p, (name, _, _))| **p != c.pid && is_memory_call(name))
            .filter(|(p, _)| self.procs.get(p).is_some_and(|q| Rc::as_ptr(&q.space) == key))
            .any(|(_, (name, args, _))| {
                let theirs = Reach::of(name, args, None);
                theirs.meets(&mine) || (theirs.places && !mine.placed)
            })
    }

    /// Applies `call` (and whatever was held for it) in an order the
    /// results allow.
    pub(super) fn ordered(&mut self, call: Logged) -> Result<(), ReplayError> {
        let space = Rc::clone(&self.procs[&call.pid].space);
        let key = Rc::as_ptr(&space);
        let mut ov = match self.overlaps.remove(&key) {
            Some(ov) => ov,
            None => Overlap {
                base: space.borrow().clone(),
                applied: Vec::new(),
                held: Vec::new(),
                marks: Vec::new(),
                budget: std::cell::Cell::new(0),
                recent: std::collections::VecDeque::new(),
                alts: Vec::new(),
            },
        };
        let budget = if self.order_spent < PER_REPLAY { PER_CALL } else { 0 };
        ov.budget.set(budget);
        let mut queue = vec![call];
        loop {
            while let Some(c) = queue.pop() {
                if self.place(&space, &mut ov, &c)?
                    || self.move_earlier(&space, &mut ov, &c)?
                    || self.switch(&space, &mut ov, &c)?
                {
                    // What waited may fit now: oldest first.
                    queue.extend(ov.held.drain(..).rev());
                } else {
                    // A call in flight, or one held, may have to go first.
                    ov.held.push(c);
                }
            }
            if ov.held.is_empty() || self.in_flight(key, None).is_some() {
                break;
            }
            // Every call has returned and none of those held fits: the
            // first to return goes after all, disagreeing, and said so
            // with the calls it could have gone among; the others are
            // tried again after it.
            let first = (0..ov.held.len()).min_by_key(|&i| ov.held[i].no).unwrap_or(0);
            let c = ov.held.remove(first);
            ov.alts.clear();
            let mark = self.stats.disagreements.len();
            self.apply_logged(&c)?;
            let among: Vec<String> = ov.applied.iter().filter(|a| overlap(a, &c)).map(|a| a.no.to_string()).collect();
            if !among.is_empty() {
                let note = format!(
                    " (it overlapped the calls returned on lines {}; no order of them gives every result the log shows, so it is applied after them)",
                    among.join(", ")
                );
                for d in &mut self.stats.disagreements[mark..] {
                    d.msg.push_str(&note);
                }
            }
            ov.push(c, &space.borrow(), None);
            queue.extend(ov.held.drain(..).rev());
        }
        // Kept: the calls that returned after the earliest still able to
        // move (in flight, or held) began, and the last few. The others
        // go into the base. With nothing to keep, the record goes.
        let oldest = ov.held.iter().map(|h| h.entry).chain(self.in_flight(key, None)).min();
        let keep_from = ov.applied.len().saturating_sub(KEPT);
        let gone = ov.applied[..keep_from].iter().take_while(|a| oldest.is_none_or(|e| a.no <= e)).count();
        // (A run of calls that did not overlap ends the record: the
        // window is not kept for the calls of a thread alone.)
        let overlapped = ov.applied[gone..].iter().rev().take(QUIET).any(|a| a.entry < a.no);
        if oldest.is_some() || overlapped || !ov.alts.is_empty() {
            let gone: Vec<Logged> = ov.applied.drain(..gone).collect();
            ov.marks.retain_mut(|(i, _)| i.checked_sub(gone.len()).map(|j| *i = j).is_some());
            self.order_spent += budget - ov.budget.get();
            self.advance(&space, &mut ov.base, &gone)?;
            self.overlaps.insert(key, ov);
        } else {
            self.order_spent += budget - ov.budget.get();
        }
        Ok(())
    }

    /// Tries `c` after the calls applied (on the space as it is), then
    /// before each of the last that returned after it began. Returns
    /// whether a position agreed; if not, the space is as before.
    fn place(&mut self, space: &Rc<RefCell<AddressSpace>>, ov: &mut Overlap, c: &Logged) -> Result<bool, ReplayError> {
        let mark = (self.stats.disagreements.len(), self.stats.applied);
        let before = self.in_flight(Rc::as_ptr(space), Some(c.pid)).map(|_| space.borrow().clone());
        self.apply_logged(c)?;
        if self.stats.disagreements.len() == mark.0 {
            self.follow(space, ov, c)?;
            self.other_order(space, ov, c)?;
            ov.push(c.clone(), &space.borrow(), before);
            return Ok(true);
        }
        self.stats.disagreements.truncate(mark.0);
        self.stats.applied = mark.1;
        let movable = ov.applied.iter().rev().take_while(|a| a.no > c.entry).count();
        // The space before the first call `c` may go before, made once:
        // each position is tried from it.
        let first = ov.applied.len() - movable;
        let (mark, done) = ov.mark_before(first);
        let mut prefix = mark.clone();
        self.advance(space, &mut prefix, &ov.applied[done..first])?;
        let cost = movable + 1;
        for back in 1..=movable {
            if ov.budget.get() < cost {
                break;
            }
            let at = ov.applied.len() - back;
            let order: Vec<Logged> = std::iter::once(c.clone()).chain(ov.applied[at..].iter().cloned()).collect();
            if self.try_order(space, ov, Start::Space(&prefix, first), at, order)? {
                self.follow(space, ov, c)?;
                return Ok(true);
            }
        }
        // The space as it was: with every applied call.
        self.advance(space, &mut prefix, &ov.applied[first..])?;
        *space.borrow_mut() = prefix;
        Ok(false)
    }

    /// Runs `f` with `other`, a space beside the model's, in the model's
    /// place, then puts both back: the disagreements and counts `f`
    /// makes are dropped.
    fn beside<R>(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        other: &mut AddressSpace,
        f: impl FnOnce(&mut Replayer) -> Result<R, ReplayError>,
    ) -> Result<R, ReplayError> {
        std::mem::swap(&mut *space.borrow_mut(), other);
        let mark = (self.stats.disagreements.len(), self.stats.applied);
        let res = f(self);
        self.stats.disagreements.truncate(mark.0);
        self.stats.applied = mark.1;
        std::mem::swap(&mut *space.borrow_mut(), other);
        res
    }

    /// Applies `c` to `other`, a space beside the model's, and tells
    /// whether it agreed.
    fn apply_beside(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        other: &mut AddressSpace,
        c: &Logged,
    ) -> Result<bool, ReplayError> {
        self.beside(space, other, |r| {
            let before = r.stats.disagreements.len();
            r.apply_logged(c)?;
            Ok(r.stats.disagreements.len() == before)
        })
    }

    /// Applies `c` to each alternative space: one it disagrees with, or
    /// that is now the model's, is dropped.
    fn follow(&mut self, space: &Rc<RefCell<AddressSpace>>, ov: &mut Overlap, c: &Logged) -> Result<(), ReplayError> {
        let mut kept = Vec::new();
        for mut alt in std::mem::take(&mut ov.alts) {
            if self.apply_beside(space, &mut alt.space, c)? && !same_layout(&alt.space, &space.borrow()) {
                kept.push(alt);
            }
        }
        ov.alts = kept;
        Ok(())
    }

    /// `c` disagrees wherever it goes among the kept calls: if it agrees
    /// with an alternative space, that becomes the model's (the kept
    /// calls were of the order it replaces: the record starts again from
    /// it). The alternatives are tried on copies: `c` may yet go elsewhere.
    fn switch(&mut self, space: &Rc<RefCell<AddressSpace>>, ov: &mut Overlap, c: &Logged) -> Result<bool, ReplayError> {
        for i in 0..ov.alts.len() {
            let mut trial = ov.alts[i].space.clone();
            if self.apply_beside(space, &mut trial, c)? {
                ov.alts.clear();
                *space.borrow_mut() = trial;
                self.stats.applied += 1;
                ov.base = space.borrow().clone();
                ov.applied.clear();
                ov.marks.clear();
                ov.recent.clear();
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `c` agreed after the kept calls: if it also agrees before the
    /// last of them it shares a page with and that was in flight with it,
    /// and the space that order leaves differs, that space is followed
    /// as an alternative (the log may not decide between them).
    fn other_order(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        ov: &mut Overlap,
        c: &Logged,
    ) -> Result<(), ReplayError> {
        if ov.alts.len() >= ALTERNATIVES {
            return Ok(());
        }
        let movable = ov.applied.iter().rev().take_while(|a| a.no > c.entry).count().min(NEAR);
        if movable == 0 {
            return Ok(());
        }
        let reach = Reach::of_logged(c);
        let Some(back) = (1..=movable).find(|&b| Reach::of_logged(&ov.applied[ov.applied.len() - b]).shares(&reach))
        else {
            return Ok(());
        };
        let at = ov.applied.len() - back;
        let order: Vec<Logged> = std::iter::once(c.clone()).chain(ov.applied[at..].iter().cloned()).collect();
        let kept: &Overlap = ov;
        // The space before call `at` (kept: `c` was in flight when it
        // returned, unless the kept calls were reordered since).
        let Some(before) = kept.recent.len().checked_sub(back).and_then(|i| kept.recent.get(i)?.as_ref()) else {
            return Ok(());
        };
        // (Outside the budget: at most NEAR + 1 applications.)
        let budget = kept.budget.replace(usize::MAX);
        let alt = self.trial(space, kept, (before, at), at, &order);
        kept.budget.set(budget);
        if let Some(alt) = alt? {
            if !same_layout(&alt, &space.borrow()) {
                ov.alts.push(Alternative { lines: (c.no, ov.applied[at].no), space: alt });
            }
        }
        Ok(())
    }

    /// Moves one call applied earlier after some of those that followed
    /// it (only past calls that began before it returned), the latest
    /// call and the shortest move first, then applies `c`: keeps the
    /// first move under which every call agrees. If none does, the space
    /// is as before.
    fn move_earlier(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        ov: &mut Overlap,
        c: &Logged,
    ) -> Result<bool, ReplayError> {
        if self.in_flight_touching(Rc::as_ptr(space), c) {
            // (A call in flight may yet go first: wait for it.)
            return Ok(false);
        }
        let n = ov.applied.len();
        for i in (0..n.saturating_sub(1)).rev() {
            if ov.budget.get() < n + 1 {
                break;
            }
            let moved = ov.applied[i].clone();
            // After calls i+1..=j, each of which began before it returned.
            let past: Vec<usize> = (i + 1..n).take_while(|&j| ov.applied[j].entry < moved.no).collect();
            for j in past {
                let order = ov.applied[i + 1..=j]
                    .iter()
                    .cloned()
                    .chain(std::iter::once(moved.clone()))
                    .chain(ov.applied[j + 1..].iter().cloned())
                    .chain(std::iter::once(c.clone()))
                    .collect();
                if self.try_order(space, ov, Start::MarkBefore(i), i, order)? {
                    self.follow(space, ov, c)?;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The kept calls up to `at`, then `order`: if every call of `order`
    /// agrees, the space becomes that and the kept calls those.
    fn try_order(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        ov: &mut Overlap,
        start: Start<'_>,
        at: usize,
        order: Vec<Logged>,
    ) -> Result<bool, ReplayError> {
        let from = match start {
            Start::MarkBefore(i) => ov.mark_before(i),
            Start::Space(s, done) => (s, done),
        };
        let Some(state) = self.trial(space, ov, from, at, &order)? else { return Ok(false) };
        *space.borrow_mut() = state;
        // (The one new call is counted; the others were.)
        self.stats.applied += 1;
        ov.applied.truncate(at);
        ov.applied.extend(order);
        ov.marks.retain(|(i, _)| *i <= at);
        ov.recent.clear();
        Ok(true)
    }

    /// `from` (the base with the first `done` kept calls applied) with the
    /// kept calls up to `at` and then `order` applied,
    /// if every call of `order` agrees (none, once the call's budget is
    /// spent: [`PER_CALL`]). The live space and the counts are as before either way.
    fn trial(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        ov: &Overlap,
        (from, done): (&AddressSpace, usize),
        at: usize,
        order: &[Logged],
    ) -> Result<Option<AddressSpace>, ReplayError> {
        let Some(left) = ov.budget.get().checked_sub(at - done + order.len()) else { return Ok(None) };
        ov.budget.set(left);
        let mut state = from.clone();
        let agreed = self.beside(space, &mut state, |r| {
            for l in &ov.applied[done..at] {
                r.apply_logged(l)?;
            }
            let before = r.stats.disagreements.len();
            for l in order {
                r.apply_logged(l)?;
                if r.stats.disagreements.len() > before {
                    return Ok(false);
                }
            }
            Ok(true)
        })?;
        Ok(agreed.then_some(state))
    }

    /// Applies `calls` to `base` (as they were applied to the space, their
    /// disagreements told then).
    fn advance(
        &mut self,
        space: &Rc<RefCell<AddressSpace>>,
        base: &mut AddressSpace,
        calls: &[Logged],
    ) -> Result<(), ReplayError> {
        if calls.is_empty() {
            return Ok(());
        }
        self.beside(space, base, |r| calls.iter().try_for_each(|l| r.apply_logged(l)))
    }

    /// Applies a logged call through the plain path.
    fn apply_logged(&mut self, l: &Logged) -> Result<(), ReplayError> {
        let parsed = parse_line(&l.line).map_err(|e| ReplayError { line: l.no, msg: e.0 })?;
        match parsed.event {
            Event::Call { name, args, ret, ret_text } => self.call(l.no, l.pid, name, args, ret, ret_text),
            _ => Ok(()),
        }
    }

    /// Applies every held call, after all others (at the end of a log),
    /// and tells the orders the log did not decide.
    pub(super) fn flush_held(&mut self) -> Result<(), ReplayError> {
        let keys: Vec<Key> = self.overlaps.keys().copied().collect();
        for key in keys {
            let Some(ov) = self.overlaps.remove(&key) else { continue };
            let exact = ov.held.is_empty();
            for c in ov.held {
                self.apply_logged(&c)?;
            }
            if exact {
                self.stats.undecided.extend(ov.alts.iter().map(|a| (a.lines.1, a.lines.0)));
            }
        }
        self.stats.undecided.sort_unstable();
        Ok(())
    }
}

/// Whether two spaces have the same VMAs (bounds, protection, flags).
fn same_layout(a: &AddressSpace, b: &AddressSpace) -> bool {
    a.vma_count() == b.vma_count()
        && a.iter().zip(b.iter()).all(|(v, w)| v.range() == w.range() && v.prot() == w.prot() && v.flags() == w.flags())
}

/// The memory a call reaches, as far as its text shows.
#[derive(Debug, Default)]
struct Reach {
    /// Address ranges `[start, end)` it reads or changes.
    ranges: Vec<(u64, u64)>,
    /// It may reach anywhere (a call whose ranges the text does not give).
    all: bool,
    /// It may map at an address its text does not give (in flight: the
    /// result is not known yet).
    places: bool,
    /// The kernel chose its address (an `mmap` without `MAP_FIXED`, a
    /// moving `mremap`) and the result gives it.
    placed: bool,
}

impl Reach {
    /// A returned call's reach.
    fn of_logged(l: &Logged) -> Reach {
        match parse_line(&l.line).map(|p| p.event) {
            Ok(Event::Call { name, args, ret, .. }) => {
                let ret = match ret {
                    crate::strace::parse::Ret::Value(v) => Some(v as u64),
                    _ => None,
                };
                Reach::of(name, args, Some(ret))
            }
            _ => Reach { all: true, ..Reach::default() },
        }
    }

    /// The reach of `name(args)`; `ret` is `None` in flight, `Some(None)`
    /// for a failed call.
    fn of(name: &str, args: &str, ret: Option<Option<u64>>) -> Reach {
        let a = split_args(args);
        let num = |i: usize| a.get(i).and_then(|s| arg_value(s, &[]).ok());
        let flag = |i: usize, f: &str| a.get(i).is_some_and(|s| s.contains(f));
        let span = |at: Option<u64>, len: Option<u64>| at.zip(len).map(|(s, n)| (s, s.saturating_add(n)));
        let mut r = Reach::default();
        match name {
            "mmap" | "mmap2" => {
                let fixed = flag(3, "MAP_FIXED");
                if fixed {
                    r.ranges.extend(span(num(0), num(1)));
                } else {
                    match ret {
                        None => r.places = true,
                        Some(Some(at)) => {
                            r.placed = true;
                            r.ranges.extend(span(Some(at), num(1)));
                        }
                        Some(None) => {}
                    }
                }
            }
            "mremap" => {
                r.ranges.extend(span(num(0), num(1)));
                r.ranges.extend(span(num(0), num(2)));
                match ret {
                    None if flag(3, "MREMAP_FIXED") => r.ranges.extend(span(num(4), num(2))),
                    None => r.places = flag(3, "MREMAP_MAYMOVE"),
                    Some(Some(to)) => {
                        r.placed = Some(to) != num(0);
                        r.ranges.extend(span(Some(to), num(2)));
                    }
                    Some(None) => {}
                }
            }
            _ if names_range(name) => r.ranges.extend(span(num(0), num(1))),
            _ => r.all = true,
        }
        if r.ranges.is_empty() && !r.places && ret.is_none() && !r.all {
            // (Arguments cut short in flight: anything.)
            r.all = true;
        }
        r
    }

    /// Whether two reaches share a page (calls that do not commute: the
    /// layouts their two orders leave may differ).
    fn shares(&self, other: &Reach) -> bool {
        self.all || other.all || self.ranges.iter().any(|&(s, e)| other.ranges.iter().any(|&(t, f)| s < f && t < e))
    }

    /// Whether two reaches share a page or touch (a merge across the
    /// boundary).
    fn meets(&self, other: &Reach) -> bool {
        self.all
            || other.all
            || self.ranges.iter().any(|&(s, e)| {
                other.ranges.iter().any(|&(t, f)| s <= f.saturating_add(PAGE_SIZE) && t <= e.saturating_add(PAGE_SIZE))
            })
    }
}

/// Whether two calls were in flight at once (each began before the other
/// returned).
fn overlap(a: &Logged, b: &Logged) -> bool {
    a.entry < b.no && b.entry < a.no
}
