//! A value for the concurrent stress tests: it records the range it was
//! stored for and whether it is alive (a magic word its `Drop` clears, and
//! a count of live values), and the first few failures readers report.

use std::sync::{
    atomic::{AtomicI64, AtomicU64, Ordering},
    Arc, Mutex,
};

/// What a live value holds in `magic`.
pub const MAGIC: u64 = 0x6d61_706c_6576_616c;

/// A value that records the range it was stored for and whether it is
/// alive; `sentinel` marks one a test's writer never touches.
#[derive(Debug)]
pub struct Val {
    pub magic: u64,
    pub first: u64,
    pub last: u64,
    pub sentinel: bool,
    pub live: Arc<AtomicI64>,
}

impl Val {
    pub fn new(first: u64, last: u64, live: &Arc<AtomicI64>) -> Box<Val> {
        live.fetch_add(1, Ordering::Relaxed);
        Box::new(Val { magic: MAGIC, first, last, sentinel: false, live: Arc::clone(live) })
    }
}

impl Clone for Val {
    fn clone(&self) -> Self {
        self.live.fetch_add(1, Ordering::Relaxed);
        Val { magic: MAGIC, first: self.first, last: self.last, sentinel: self.sentinel, live: Arc::clone(&self.live) }
    }
}

impl Drop for Val {
    fn drop(&mut self) {
        // SAFETY: a volatile write to our own field, so that the store is
        // not optimised away as dead: a reader that still sees this value
        // after its drop reports it.
        unsafe { std::ptr::write_volatile(&mut self.magic, 0) };
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What readers found wrong: how often, and the first few.
#[derive(Default)]
pub struct Report {
    pub count: AtomicU64,
    pub first: Mutex<Vec<String>>,
}

impl Report {
    pub fn fail(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first.lock().unwrap();
        if first.len() < 5 {
            first.push(what);
        }
    }

    /// The first failures, one a line.
    pub fn first(&self) -> String {
        self.first.lock().unwrap().join("\n")
    }
}

/// Fails the test if any reader reported something, with the first few.
pub fn assert_no_failures(report: &Report, passes: u64) {
    let failures = report.count.load(Ordering::Relaxed);
    assert_eq!(failures, 0, "{failures} reader errors in {passes} passes; the first:\n{}", report.first());
}

/// Once the tree is dropped and no reader is left: runs the deferred frees
/// until every value is dropped, and fails if one leaked or was dropped
/// twice.
pub fn assert_all_dropped(live: &AtomicI64) {
    for _ in 0..if cfg!(miri) { 40 } else { 200 } {
        if live.load(Ordering::Relaxed) == 0 {
            break;
        }
        maple_tree::collect_garbage();
    }
    assert_eq!(live.load(Ordering::Relaxed), 0, "values leaked or dropped twice");
}
