//! One memory call per address space at a time: the tracer's order is
//! the kernel's.
//!
//! The kernel runs the calls that change an address space one after
//! another under its mmap lock, but ptrace reports their exits in
//! whatever order the tracer happens to collect them: two threads'
//! calls can return in the other order from the one they ran in. So the
//! tracer lets one such call per space run at a time: a thread that
//! stops at the entry of one while another call of its space is running
//! stays stopped (held) until that call has returned and been applied.
//! Each call then runs alone in its space, and the order the tracer
//! applies them in is the order they ran in.
//!
//! A call that sleeps until another thread of the program acts (`mlock`
//! of a FUSE file served by the program itself, `MAP_POPULATE` over a
//! userfaultfd range) would wait forever for a thread held behind it.
//! Every such call sleeps only after its change to the space is done
//! (the kernel populates pages after it drops the mmap lock), so when a
//! running call is seen asleep past a deadline, the gate lets its space
//! loose: the held threads start, calls of that space start at once
//! until none is running, and they are applied in the order they
//! return. The tracer says when that happened; the program never waits
//! on the gate for longer than the deadline.
//!
//! This file is bookkeeping only: it says which threads may start; the
//! tracer resumes them.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

/// A thread, as ptrace names it.
pub type Tid = i32;

/// The calls of one address space.
#[derive(Debug, Default)]
struct Space {
    /// Threads whose call is running, and since when the first of them
    /// runs (at most one thread unless `loose`).
    running: Vec<Tid>,
    since: Option<Instant>,
    /// Threads stopped at a call's entry, in the order they stopped.
    held: VecDeque<Tid>,
    /// A running call slept past the deadline: calls start at once
    /// until none is running.
    loose: bool,
}

/// Which calls may run, per address space.
#[derive(Debug, Default)]
pub struct Gate {
    spaces: HashMap<u64, Space>,
    /// The space of each thread that is running or held.
    of: HashMap<Tid, u64>,
}

impl Gate {
    /// `tid` stopped at the entry of a call that changes space `mm`:
    /// `true` if it may run now (it is then running), `false` if it is
    /// held until [`leave`](Self::leave) starts it.
    pub fn enter(&mut self, tid: Tid, mm: u64, now: Instant) -> bool {
        self.forget(tid);
        self.of.insert(tid, mm);
        let s = self.spaces.entry(mm).or_default();
        if s.running.is_empty() || s.loose {
            if s.running.is_empty() {
                s.since = Some(now);
            }
            s.running.push(tid);
            true
        } else {
            s.held.push_back(tid);
            false
        }
    }

    /// `tid`'s call has ended (its exit, its fork event) or `tid` is gone:
    /// the thread to start now, if one was held.
    pub fn leave(&mut self, tid: Tid, now: Instant) -> Option<Tid> {
        let mm = self.forget(tid)?;
        let s = self.spaces.get_mut(&mm)?;
        if !s.running.is_empty() {
            return None;
        }
        s.loose = false;
        let next = s.held.pop_front();
        match next {
            Some(n) => {
                s.running.push(n);
                s.since = Some(now);
            }
            None => {
                self.spaces.remove(&mm);
            }
        }
        next
    }

    /// Takes `tid` out of whatever it was in; its space.
    fn forget(&mut self, tid: Tid) -> Option<u64> {
        let mm = self.of.remove(&tid)?;
        if let Some(s) = self.spaces.get_mut(&mm) {
            s.running.retain(|&t| t != tid);
            s.held.retain(|&t| t != tid);
        }
        Some(mm)
    }

    /// Whether `tid`'s space has no call running but its own, in order:
    /// what `/proc` shows then is what the calls applied so far made.
    pub fn alone(&self, tid: Tid) -> bool {
        let Some(s) = self.of.get(&tid).and_then(|mm| self.spaces.get(mm)) else { return true };
        !s.loose && s.running.iter().all(|&t| t == tid)
    }

    /// Whether any thread is held.
    pub fn holding(&self) -> bool {
        self.spaces.values().any(|s| !s.held.is_empty())
    }

    /// The running calls that have held others for longer than `after`.
    pub fn overdue(&self, now: Instant, after: Duration) -> Vec<Tid> {
        self.spaces
            .values()
            .filter(|s| !s.loose && !s.held.is_empty())
            .filter(|s| s.since.is_some_and(|t| now.duration_since(t) > after))
            .filter_map(|s| s.running.first().copied())
            .collect()
    }

    /// Lets `tid`'s space loose (its running call sleeps): the held
    /// threads, which may all start now.
    pub fn loosen(&mut self, tid: Tid) -> Vec<Tid> {
        let Some(s) = self.of.get(&tid).and_then(|mm| self.spaces.get_mut(mm)) else { return Vec::new() };
        s.loose = true;
        let held: Vec<Tid> = s.held.drain(..).collect();
        s.running.extend(&held);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_per_space_in_the_order_they_stopped() {
        let t0 = Instant::now();
        let mut g = Gate::default();
        assert!(g.enter(1, 7, t0));
        assert!(!g.enter(2, 7, t0));
        assert!(!g.enter(3, 7, t0));
        // Another space runs meanwhile.
        assert!(g.enter(4, 8, t0));
        assert!(!g.alone(2) && g.alone(1) && g.alone(4));
        assert_eq!(g.leave(1, t0), Some(2));
        assert_eq!(g.leave(2, t0), Some(3));
        assert_eq!(g.leave(3, t0), None);
        assert!(!g.holding());
        assert_eq!(g.leave(4, t0), None);
        assert!(g.spaces.is_empty() && g.of.is_empty());
    }

    #[test]
    fn a_thread_gone_while_held_or_running_frees_its_place() {
        let t0 = Instant::now();
        let mut g = Gate::default();
        assert!(g.enter(1, 7, t0));
        assert!(!g.enter(2, 7, t0));
        assert!(!g.enter(3, 7, t0));
        // 2 is killed while held; 1 while running.
        assert_eq!(g.leave(2, t0), None);
        assert_eq!(g.leave(1, t0), Some(3));
        // A thread that was never in is nothing.
        assert_eq!(g.leave(9, t0), None);
        assert_eq!(g.leave(3, t0), None);
        assert!(g.spaces.is_empty());
    }

    #[test]
    fn a_sleeping_call_lets_its_space_loose_until_none_runs() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(200);
        let mut g = Gate::default();
        assert!(g.enter(1, 7, t0));
        assert!(!g.enter(2, 7, t0));
        assert!(g.overdue(t0, Duration::from_millis(100)).is_empty());
        assert_eq!(g.overdue(later, Duration::from_millis(100)), vec![1]);
        assert_eq!(g.loosen(1), vec![2]);
        // Loose: a new call starts at once; nothing is compared.
        assert!(g.enter(3, 7, later));
        assert!(!g.alone(3) && !g.alone(1));
        assert_eq!(g.leave(2, later), None);
        assert_eq!(g.leave(3, later), None);
        assert_eq!(g.leave(1, later), None);
        // Ordered again.
        assert!(g.enter(4, 7, later));
        assert!(!g.enter(5, 7, later));
        assert!(g.alone(4));
    }
}
