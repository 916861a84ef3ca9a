//! A deliberately simple reference model: a `BTreeMap` from range start to
//! (range end, value), and helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

pub mod counted;
pub mod shuffle;
pub mod values;

/// Random words from `seed`, by the shuffle's splitmix64: the random
/// tests' source.
pub fn words(mut seed: u64) -> impl FnMut() -> u64 {
    move || shuffle::splitmix64(&mut seed)
}

use maple_tree::{Error, MapleTree, Writes, U63};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub map: BTreeMap<u64, (u64, u64)>,
}

/// Model value of a reserved range (never a `U63`).
pub const RESERVED: u64 = u64::MAX;

impl Model {
    /// Range (value or reserved) containing `index`.
    pub fn get_any(&self, index: u64) -> Option<(u64, u64, u64)> {
        let (&s, &(e, v)) = self.map.range(..=index).next_back()?;
        (e >= index).then_some((s, e, v))
    }

    /// Entry (with a value) containing `index`.
    pub fn get(&self, index: u64) -> Option<(u64, u64, u64)> {
        self.get_any(index).filter(|e| e.2 != RESERVED)
    }

    /// Empties `[first, last]`, trimming/splitting neighbours.
    pub fn clear(&mut self, first: u64, last: u64) {
        let overlapping: Vec<_> =
            self.map.range(..=last).filter(|(_, &(e, _))| e >= first).map(|(&s, &(e, v))| (s, e, v)).collect();
        for (s, e, v) in overlapping {
            self.map.remove(&s);
            if s < first {
                self.map.insert(s, (first - 1, v));
            }
            if e > last {
                self.map.insert(last + 1, (e, v));
            }
        }
    }

    pub fn store(&mut self, first: u64, last: u64, v: u64) {
        self.clear(first, last);
        self.map.insert(first, (last, v));
    }

    pub fn is_free(&self, first: u64, last: u64) -> bool {
        !self.map.range(..=last).any(|(_, &(e, _))| e >= first)
    }

    /// Removes the range containing `index` (reserved too); returns it if
    /// it held a value.
    pub fn erase(&mut self, index: u64) -> Option<(u64, u64, u64)> {
        let (s, e, v) = self.get_any(index)?;
        self.map.remove(&s);
        (v != RESERVED).then_some((s, e, v))
    }

    /// First entry whose range ends at or after `index`.
    pub fn next(&self, index: u64) -> Option<(u64, u64, u64)> {
        self.get(index).or_else(|| self.map.range(index..).map(|(&s, &(e, v))| (s, e, v)).find(|e| e.2 != RESERVED))
    }

    /// Last entry starting at or before `index`.
    pub fn prev(&self, index: u64) -> Option<(u64, u64, u64)> {
        self.map.range(..=index).rev().map(|(&s, &(e, v))| (s, e, v)).find(|e| e.2 != RESERVED)
    }

    /// Entries with values (reserved ranges left out).
    pub fn values(&self) -> Vec<(u64, u64, u64)> {
        self.entries().into_iter().filter(|e| e.2 != RESERVED).collect()
    }

    /// Free runs (maximal empty ranges) in ascending order.
    pub fn free_runs(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut next: Option<u64> = Some(0);
        for (&s, &(e, _)) in &self.map {
            if let Some(n) = next {
                if s > n {
                    out.push((n, s - 1));
                }
            }
            next = e.checked_add(1);
        }
        if let Some(n) = next {
            out.push((n, u64::MAX));
        }
        out
    }

    pub fn gap(&self, min: u64, max: u64, size: u64, rev: bool) -> Result<u64, Error> {
        if size == 0 || min > max || (max - min).saturating_add(1) < size {
            return Err(Error::InvalidRange);
        }
        let fits = |(a, b): (u64, u64)| {
            let lo = a.max(min);
            let hi = b.min(max);
            (lo <= hi && (hi - lo).saturating_add(1) >= size).then_some((lo, hi))
        };
        let runs = self.free_runs();
        let found = if rev {
            runs.into_iter().rev().find_map(fits).map(|(_, hi)| hi - (size - 1))
        } else {
            runs.into_iter().find_map(fits).map(|(lo, _)| lo)
        };
        found.ok_or(Error::Busy)
    }

    /// Lowest (or highest) start that is a multiple of `align` and fits
    /// `size` in a free run inside `[min, max]`.
    pub fn gap_aligned(&self, min: u64, max: u64, size: u64, align: u64, rev: bool) -> Result<u64, Error> {
        if size == 0 || min > max || (max - min).saturating_add(1) < size || !align.is_power_of_two() {
            return Err(Error::InvalidRange);
        }
        let fits = |(a, b): (u64, u64)| -> Option<u64> {
            let (lo, hi) = (a.max(min), b.min(max));
            if lo > hi || (hi - lo).saturating_add(1) < size {
                return None;
            }
            if rev {
                let s = (hi - (size - 1)) & !(align - 1);
                (s >= lo).then_some(s)
            } else {
                let s = lo.checked_next_multiple_of(align)?;
                (s.checked_add(size - 1)? <= hi).then_some(s)
            }
        };
        let runs = self.free_runs();
        let found = if rev { runs.into_iter().rev().find_map(fits) } else { runs.into_iter().find_map(fits) };
        found.ok_or(Error::Busy)
    }

    pub fn entries(&self) -> Vec<(u64, u64, u64)> {
        self.map.iter().map(|(&s, &(e, v))| (s, e, v)).collect()
    }
}

/// Checks a store of `x` over `[f, l]` (its result reduced to the error
/// cause) against the model, and applies it there.
pub fn expect_store(res: Result<(), Error>, m: &mut Model, (f, l, x): (u64, u64, u64), what: &str) {
    if f > l {
        assert_eq!(res, Err(Error::InvalidRange), "{what}");
    } else {
        assert_eq!(res, Ok(()), "{what}");
        m.store(f, l, x);
    }
}

/// Checks an insert of `x` into `[f, l]` against the model (it must fail
/// unless the range is valid and free), and applies it there.
pub fn expect_insert(res: Result<(), Error>, m: &mut Model, (f, l, x): (u64, u64, u64), what: &str) {
    if f > l {
        assert_eq!(res, Err(Error::InvalidRange), "{what}");
    } else if m.is_free(f, l) {
        assert_eq!(res, Ok(()), "{what}");
        m.store(f, l, x);
    } else {
        assert_eq!(res, Err(Error::Occupied), "{what}");
    }
}

/// Checks emptying `[f, l]` against the model, and applies it there.
pub fn expect_clear(res: Result<(), Error>, m: &mut Model, (f, l): (u64, u64), what: &str) {
    if f > l {
        assert_eq!(res, Err(Error::InvalidRange), "{what}");
    } else {
        assert_eq!(res, Ok(()), "{what}");
        m.clear(f, l);
    }
}

/// Keys for property tests: mostly below `max`, sometimes 0 or at the very
/// top of the index space.
pub fn key(max: u64) -> impl proptest::strategy::Strategy<Value = u64> + Clone {
    use proptest::prelude::*;
    prop_oneof![
        8 => 0..max,
        1 => Just(0u64),
        1 => (u64::MAX - 64)..=u64::MAX,
    ]
}

pub fn v(x: u64) -> U63 {
    U63::new_truncate(x)
}

/// An empty tree of `U63`s, gap-tracking if `gaps`, written as `W` says.
pub fn empty<W: Writes>(gaps: bool) -> MapleTree<U63, u64, W> {
    if gaps { MapleTree::with_gaps() } else { MapleTree::new() }.into_writes()
}

pub fn entries<W: Writes>(t: &MapleTree<U63, u64, W>) -> Vec<(u64, u64, u64)> {
    t.iter().map(|(r, v)| (*r.start(), *r.end(), v.get())).collect()
}

/// Validates and compares the full contents, with a dump on failure.
pub fn check<W: Writes>(t: &MapleTree<U63, u64, W>, m: &Model, what: &str) {
    if let Err(e) = t.validate() {
        panic!("{what}: {e}\n{}", t.dump());
    }
    let got = entries(t);
    let want = m.values();
    if got != want {
        panic!("{what}: contents differ\n got {got:x?}\nwant {want:x?}\n{}", t.dump());
    }
    assert_eq!(t.len(), want.len(), "{what}: len");
}
