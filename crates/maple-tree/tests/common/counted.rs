//! A value that counts, per thread, how many of it are alive: a test
//! that ends with none alive has dropped every value it made exactly
//! once.

use std::cell::Cell;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

#[derive(Debug, PartialEq)]
pub struct Tracked(pub u64);

impl Tracked {
    pub fn new(x: u64) -> Tracked {
        LIVE.with(|l| l.set(l.get() + 1));
        Tracked(x)
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Self {
        Tracked::new(self.0)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(l.get() - 1));
    }
}

/// How many `Tracked` values are alive on this thread.
pub fn live() -> i64 {
    LIVE.with(|l| l.get())
}
