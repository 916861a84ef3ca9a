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
//! So while a space has a call in flight, each call of it that returns is
//! applied where its result agrees with the model: after the calls
//! applied before it (the order of returns), or before the last few of
//! those that returned after it began (applied again after it, on the
//! space as it was before the first of the kept calls), whichever
//! position first gives every one of them its logged result. A call no position
//! satisfies waits for the calls still in flight, and for the others
//! waiting, and is tried again whenever one of them is applied. When none is left in flight, calls applied earlier may
//! have run in another order (a thread's `mremap` moving what another's
//! `MAP_FIXED` had just put in its place agrees either way, until a
//! later call shows which): each of the last [`KEPT`] calls is moved
//! after those that began before it returned, one position at a time,
//! the calls after it applied again; the first move that makes every
//! call agree stays.
//! Failing that, the first to return of the calls waiting is applied
//! after all others, its disagreement reported with the lines of the
//! calls it overlapped, and the rest are tried again. A log that does not overlap goes the plain
//! way, at no cost; one that does pays a copy of the space when a run
//! of overlapping calls begins, and each kept call is applied twice
//! (the second time to that copy, when it leaves the window), with a
//! copy of the space every [`MARK_EVERY`] kept calls, from which an
//! order tried at a position is applied. Trying other orders happens
//! only where a result disagrees, and is bounded: [`PER_CALL`]
//! applications per returning call, and once a replay has spent
//! [`PER_REPLAY`] none (a log no order fits, one with lines missing,
//! costs a few seconds at most).

use std::{cell::RefCell, rc::Rc};

use super::{is_memory_call, ReplayError, Replayer};
use crate::{
    space::AddressSpace,
    strace::parse::{parse_line, Event},
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
}

impl Overlap {
    /// Appends `c`, applied: `space` is the base with every applied call.
    fn push(&mut self, c: Logged, space: &AddressSpace) {
        self.applied.push(c);
        if self.applied.len() % MARK_EVERY == 0 {
            self.marks.push((self.applied.len(), space.clone()));
        }
    }

    /// The latest copy of the space with at most the first `at` applied
    /// calls, and how many it has.
    fn mark_before(&self, at: usize) -> (&AddressSpace, usize) {
        self.marks.iter().rev().find(|(i, _)| *i <= at).map_or((&self.base, 0), |(i, m)| (m, *i))
    }
}

type Key = *const RefCell<AddressSpace>;

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
            },
        };
        let budget = if self.order_spent < PER_REPLAY { PER_CALL } else { 0 };
        ov.budget.set(budget);
        let mut queue = vec![call];
        loop {
            while let Some(c) = queue.pop() {
                if self.place(&space, &mut ov, &c)? || self.move_earlier(&space, &mut ov, &c)? {
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
            ov.push(c, &space.borrow());
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
        if oldest.is_some() || overlapped {
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
        self.apply_logged(c)?;
        if self.stats.disagreements.len() == mark.0 {
            ov.push(c.clone(), &space.borrow());
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
            if self.try_order(space, ov, (&prefix, first), at, order)? {
                return Ok(true);
            }
        }
        // The space as it was: with every applied call.
        self.advance(space, &mut prefix, &ov.applied[first..])?;
        *space.borrow_mut() = prefix;
        Ok(false)
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
        if self.in_flight(Rc::as_ptr(space), Some(c.pid)).is_some() {
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
                let (mark, done) = ov.mark_before(i);
                let mark = mark.clone();
                if self.try_order(space, ov, (&mark, done), i, order)? {
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
        from: (&AddressSpace, usize),
        at: usize,
        order: Vec<Logged>,
    ) -> Result<bool, ReplayError> {
        let Some(state) = self.trial(space, ov, from, at, &order)? else { return Ok(false) };
        *space.borrow_mut() = state;
        // (The one new call is counted; the others were.)
        self.stats.applied += 1;
        ov.applied.truncate(at);
        ov.applied.extend(order);
        ov.marks.retain(|(i, _)| *i <= at);
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
        std::mem::swap(&mut *space.borrow_mut(), &mut state);
        let mark = (self.stats.disagreements.len(), self.stats.applied);
        let mut agreed = true;
        let res = (|| {
            for l in &ov.applied[done..at] {
                self.apply_logged(l)?;
            }
            let before = self.stats.disagreements.len();
            for l in order {
                self.apply_logged(l)?;
                if self.stats.disagreements.len() > before {
                    agreed = false;
                    break;
                }
            }
            Ok(())
        })();
        self.stats.disagreements.truncate(mark.0);
        self.stats.applied = mark.1;
        std::mem::swap(&mut *space.borrow_mut(), &mut state);
        res.map(|()| agreed.then_some(state))
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
        std::mem::swap(&mut *space.borrow_mut(), base);
        let mark = (self.stats.disagreements.len(), self.stats.applied);
        let res = calls.iter().try_for_each(|l| self.apply_logged(l));
        self.stats.disagreements.truncate(mark.0);
        self.stats.applied = mark.1;
        std::mem::swap(&mut *space.borrow_mut(), base);
        res
    }

    /// Applies a logged call through the plain path.
    fn apply_logged(&mut self, l: &Logged) -> Result<(), ReplayError> {
        let parsed = parse_line(&l.line).map_err(|e| ReplayError { line: l.no, msg: e.0 })?;
        match parsed.event {
            Event::Call { name, args, ret, ret_text } => self.call(l.no, l.pid, name, args, ret, ret_text),
            _ => Ok(()),
        }
    }

    /// Applies every held call, after all others (at the end of a log).
    pub(super) fn flush_held(&mut self) -> Result<(), ReplayError> {
        let keys: Vec<Key> = self.overlaps.keys().copied().collect();
        for key in keys {
            let Some(ov) = self.overlaps.remove(&key) else { continue };
            for c in ov.held {
                self.apply_logged(&c)?;
            }
        }
        Ok(())
    }
}

/// Whether two calls were in flight at once (each began before the other
/// returned).
fn overlap(a: &Logged, b: &Logged) -> bool {
    a.entry < b.no && b.entry < a.no
}
