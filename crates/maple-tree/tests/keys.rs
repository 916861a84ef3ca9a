//! Keys other than `u64`, as a user switching over would check them: the
//! `rangemap` crate as the oracle for maps and sets of every integer key
//! type and of `char` (through a newtype, as `rangemap` has no `char`
//! steps), keys near each type's lowest and highest value and across
//! `char`'s surrogate hole, both tree flavours, every query after every
//! call; then what only the tree has (the empty ranges at the ends of the
//! key space, gap searches, allocation, cursors, split and append, the
//! complement of a set) against the same answers worked out by hand.

mod common;

use std::{fmt::Debug, ops::RangeInclusive};

use common::words;
use maple_tree::{Error, Key, MapleSet, MapleTree};
use rangemap::{RangeInclusiveMap, RangeInclusiveSet, StepLite};

/// A `char` key for `rangemap`, which steps integers only: its steps skip
/// the surrogates, written here from the Unicode rule itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Ch(char);

impl StepLite for Ch {
    fn add_one(&self) -> Self {
        Ch(if self.0 == '\u{d7ff}' { '\u{e000}' } else { char::from_u32(self.0 as u32 + 1).unwrap() })
    }
    fn sub_one(&self) -> Self {
        Ch(if self.0 == '\u{e000}' { '\u{d7ff}' } else { char::from_u32(self.0 as u32 - 1).unwrap() })
    }
}

/// A user's newtype key: three lines, no `unsafe`.
impl Key for Ch {
    const MAX_INDEX: u64 = char::MAX_INDEX;
    fn to_index(self) -> u64 {
        self.0.to_index()
    }
    fn from_index(index: u64) -> Self {
        Ch(char::from_index(index))
    }
}

trait TestKey: Key + Ord + Debug + StepLite + std::hash::Hash {}
impl<K: Key + Ord + Debug + StepLite + std::hash::Hash> TestKey for K {}

fn key<K: Key>(i: u64) -> K {
    K::from_index(i)
}

/// The windows of `span` indices the random calls land in: at the bottom
/// and the top of `K`'s keys, and at `mid` (zero of a signed type, the
/// surrogate hole of `char`).
fn windows<K: Key>(span: u64, mid: u64) -> Vec<u64> {
    let span = span.min(K::MAX_INDEX);
    let mut w = vec![0, K::MAX_INDEX - (span - 1)];
    if mid > span && mid < K::MAX_INDEX - 2 * span {
        w.push(mid - span / 2);
    }
    w
}

/// The random calls' ranges: in the window of `span` indices from
/// `base` (cut to the key type), each up to 24 keys long, with the
/// window of 8 keys either side that the queries after each call look at.
struct Calls {
    next: Box<dyn FnMut() -> u64>,
    base: u64,
    span: u64,
    top: u64,
}

impl Calls {
    fn new<K: Key>(seed: u64, base: u64, span: u64, gaps: bool) -> Calls {
        let span = span.min((K::MAX_INDEX - base).saturating_add(1));
        let next = Box::new(words(seed ^ base ^ u64::from(gaps) ^ K::MAX_INDEX));
        Calls { next, base, span, top: base + (span - 1) }
    }

    fn steps() -> usize {
        if cfg!(miri) {
            20
        } else {
            1_500
        }
    }

    fn word(&mut self) -> u64 {
        (self.next)()
    }

    /// The next call's range, and the window around it, as indices.
    fn range(&mut self) -> ((u64, u64), (u64, u64)) {
        let first = self.base + self.word() % self.span;
        let last = first.saturating_add(self.word() % 24).min(self.top);
        ((first, last), (first.saturating_sub(8).max(self.base), last.saturating_add(8).min(self.top)))
    }
}

fn map_against_rangemap<K: TestKey>(base: u64, span: u64, gaps: bool) {
    let what = format!("{} base {base:#x}, gaps {gaps}", std::any::type_name::<K>());
    let mut theirs: RangeInclusiveMap<K, u32> = RangeInclusiveMap::new();
    let mut ours: MapleTree<u32, K> = if gaps { MapleTree::keyed_with_gaps() } else { MapleTree::keyed() };
    let mut calls = Calls::new::<K>(0x2545_f491_4f6c_dd1d, base, span, gaps);
    for step in 0..Calls::steps() {
        let ((first, last), (lo, hi)) = calls.range();
        let range = key::<K>(first)..=key::<K>(last);
        let v = (calls.word() % 3) as u32;
        if calls.word() % 4 == 0 {
            theirs.remove(range.clone());
            ours.remove_range(range).unwrap();
        } else {
            theirs.insert(range.clone(), v);
            ours.store_range_merging(range, v).unwrap();
        }
        ours.validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        let t: Vec<_> = theirs.iter().map(|(r, v)| (r.clone(), *v)).collect();
        assert_eq!(ours.iter().collect::<Vec<_>>(), t, "{what} step {step}");
        assert_eq!(ours.first(), theirs.first_range_value().map(|(r, v)| (r.clone(), *v)), "{what} step {step}");
        assert_eq!(ours.last(), theirs.last_range_value().map(|(r, v)| (r.clone(), *v)), "{what} step {step}");
        for i in lo..=hi {
            let k = key::<K>(i);
            assert_eq!(ours.load(k), theirs.get(&k).copied(), "{what} step {step} key {k:?}");
            assert_eq!(ours.get_range(k), theirs.get_key_value(&k).map(|(r, v)| (r.clone(), *v)), "{what} {k:?}");
        }
        let window = key::<K>(lo)..=key::<K>(hi);
        let t: Vec<_> = theirs.overlapping(&window).map(|(r, v)| (r.clone(), *v)).collect();
        assert_eq!(ours.range(window.clone()).collect::<Vec<_>>(), t, "{what} step {step}: {window:?}");
        let t: Vec<_> = theirs.gaps(&window).collect();
        assert_eq!(ours.gaps(window.clone()).collect::<Vec<_>>(), t, "{what} step {step}: gaps {window:?}");
    }
    // The whole key space, both ends included.
    let all = key::<K>(0)..=key::<K>(K::MAX_INDEX);
    assert_eq!(ours.gaps(..).collect::<Vec<_>>(), theirs.gaps(&all).collect::<Vec<_>>(), "{what}: all gaps");
    assert_eq!(ours.gaps(..).rev().count(), theirs.gaps(&all).count(), "{what}: all gaps, back");
    // A cursor steps over every range, empty or not, and stops at the last key.
    let mut c = ours.cursor(key(0));
    let mut ranges = vec![c.range()];
    while let Some((r, _)) = c.next_range() {
        ranges.push(r);
    }
    assert_eq!(ranges.first().map(|r| *r.start()), Some(key(0)), "{what}: first range");
    assert_eq!(ranges.last().map(|r| *r.end()), Some(key(K::MAX_INDEX)), "{what}: last range");
    assert_eq!(c.range(), *ranges.last().unwrap(), "{what}: the cursor stays on the last range");
    while c.prev_range().is_some() {}
    assert_eq!(c.range(), ranges[0], "{what}: back to the first");
}

fn set_against_rangemap<K: TestKey>(base: u64, span: u64, gaps: bool) {
    let what = format!("{} set base {base:#x}, gaps {gaps}", std::any::type_name::<K>());
    let mut theirs: RangeInclusiveSet<K> = RangeInclusiveSet::new();
    let mut ours: MapleSet<K> = if gaps { MapleSet::keyed_with_gaps() } else { MapleSet::keyed() };
    let mut calls = Calls::new::<K>(0x9e37_79b9_7f4a_7c15, base, span, gaps);
    for step in 0..Calls::steps() {
        let ((first, last), (lo, hi)) = calls.range();
        let range = key::<K>(first)..=key::<K>(last);
        if calls.word() % 3 == 0 {
            theirs.remove(range.clone());
            ours.remove(range).unwrap();
        } else {
            theirs.insert(range.clone());
            let joined = ours.insert(range.clone()).unwrap();
            assert_eq!(Some(&joined), theirs.get(range.start()), "{what} step {step}: the joined range");
        }
        ours.as_tree().validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        let t: Vec<_> = theirs.iter().cloned().collect();
        assert_eq!(ours.iter().collect::<Vec<_>>(), t, "{what} step {step}");
        for i in lo..=hi {
            let k = key::<K>(i);
            assert_eq!(ours.contains(k), theirs.contains(&k), "{what} step {step} key {k:?}");
        }
        let window = key::<K>(lo)..=key::<K>(hi);
        let t: Vec<_> = theirs.gaps(&window).collect();
        assert_eq!(ours.gaps(window.clone()).collect::<Vec<_>>(), t, "{what} step {step}: gaps");
    }
    let all = key::<K>(0)..=key::<K>(K::MAX_INDEX);
    let complement: Vec<_> = theirs.gaps(&all).collect();
    assert_eq!(ours.complement().iter().collect::<Vec<_>>(), complement, "{what}: complement");
    assert_eq!((&!&ours | &ours).iter().collect::<Vec<_>>(), [all], "{what}: a set and its complement");
    let mut shuffled: Vec<_> = theirs.iter().cloned().collect();
    shuffled.reverse();
    assert_eq!(shuffled.into_iter().collect::<MapleSet<K>>(), ours, "{what}: collect");
}

fn every_window<K: TestKey>(mid: u64) {
    for base in windows::<K>(3_000, mid) {
        for gaps in [false, true] {
            map_against_rangemap::<K>(base, 3_000, gaps);
            set_against_rangemap::<K>(base, 3_000, gaps);
        }
    }
}

#[test]
fn unsigned_keys_against_rangemap() {
    every_window::<u8>(0);
    every_window::<u16>(0);
    every_window::<u32>(0);
    every_window::<usize>(0);
}

#[test]
fn signed_keys_against_rangemap() {
    every_window::<i8>(0);
    every_window::<i16>(0i16.to_index());
    every_window::<i32>(0i32.to_index());
    every_window::<i64>(0i64.to_index());
}

#[test]
fn char_keys_against_rangemap() {
    every_window::<Ch>(Ch('\u{e000}').to_index());
}

/// The empty range past the last entry ends at the last key; gap searches
/// with an open end stop there; so do allocations.
#[test]
fn the_key_space_ends_at_the_last_key() {
    let mut t: MapleTree<u32, u8> = MapleTree::keyed_with_gaps();
    assert_eq!(t.range_at(7), (0..=255, None));
    t.insert_range(250..=252, 1).unwrap();
    assert_eq!(t.range_at(253), (253..=255, None));
    assert_eq!(t.gaps(..).collect::<Vec<_>>(), [0..=249, 253..=255]);
    assert_eq!(t.empty_area_rev(.., 3), Ok(253));
    assert_eq!(t.empty_area(250.., 4), Err(Error::Busy));
    assert_eq!(t.alloc_range_rev(.., 2, 2).unwrap(), 254);
    assert_eq!(t.alloc_range(250.., 2, 3).unwrap_err().cause, Error::Busy);
    t.insert_range(253..=253, 4).unwrap();
    // Full to the top: the last range is an entry, and no range follows.
    let mut c = t.cursor(254);
    assert_eq!(c.range(), 254..=255);
    assert_eq!(c.next_range(), None);
    assert_eq!(c.range(), 254..=255);
    assert_eq!(t.last().map(|(r, _)| r), Some(254..=255));
    assert_eq!(t.next_after(255).map(|(r, _)| r), Some(254..=255));
    assert!(t.first_in(255..=255).is_some());
    // Open and excluded ends at either end of the type.
    assert_eq!(t.range(..).count(), 3);
    assert_eq!(t.range(..250).count(), 0);
    assert_eq!(t.insert_range(..0, 9).unwrap_err().cause, Error::InvalidRange);
    assert_eq!(t.remove_range((std::ops::Bound::Excluded(255), std::ops::Bound::Unbounded)), Err(Error::InvalidRange));
    t.validate().unwrap();
}

#[test]
fn signed_keys_keep_their_order() {
    let mut t: MapleTree<u32, i32> = MapleTree::keyed();
    t.insert_range(-10..=-1, 1).unwrap();
    t.insert_range(0..=9, 2).unwrap();
    t.insert_range(i32::MIN..=i32::MIN + 1, 3).unwrap();
    t.insert_range(i32::MAX..=i32::MAX, 4).unwrap();
    let entries: Vec<_> = t.iter().collect();
    assert_eq!(entries, [(i32::MIN..=i32::MIN + 1, 3), (-10..=-1, 1), (0..=9, 2), (i32::MAX..=i32::MAX, 4)]);
    assert_eq!(t.gaps(-20..=20).collect::<Vec<_>>(), [-20..=-11, 10..=20]);
    assert_eq!(t.prev_before(-11).map(|(r, _)| r), Some(i32::MIN..=i32::MIN + 1));
    assert_eq!(t.range(-5..5).map(|(_, v)| v).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(t.range(..).rev().map(|(_, v)| v).collect::<Vec<_>>(), [4, 2, 1, 3]);
    assert_eq!(t.empty_area(.., 1), Ok(i32::MIN + 2));
    assert_eq!(t.empty_area_rev(.., 1), Ok(i32::MAX - 1));
    // Aligned searches align the key: -16 is a multiple of 16.
    assert_eq!(t.empty_area_aligned(-30.., 4, 16), Ok(-16));
    assert_eq!(t.empty_area_aligned(-30.., 12, 16), Ok(16));
    let high = t.split_off(0);
    assert_eq!(t.iter().map(|(_, v)| v).collect::<Vec<_>>(), [3, 1]);
    assert_eq!(high.iter().map(|(_, v)| v).collect::<Vec<_>>(), [2, 4]);
    let mut high = high;
    t.append(&mut high);
    assert_eq!(t.len(), 4);
    t.validate().unwrap();
}

/// `alloc_cyclic` wraps at the key type's last key, as at `u64::MAX`.
#[test]
fn cyclic_ids_wrap_at_the_last_key() {
    let mut t: MapleTree<u32, u8> = MapleTree::keyed_with_gaps();
    let mut next: u8 = 254;
    assert_eq!(t.alloc_cyclic(.., &mut next, 0).unwrap(), (254, false));
    assert_eq!(t.alloc_cyclic(.., &mut next, 0).unwrap(), (255, false));
    assert_eq!(next, 0);
    assert_eq!(t.alloc_cyclic(.., &mut next, 0).unwrap(), (0, true));
    assert_eq!(t.alloc_cyclic(.., &mut next, 0).unwrap(), (1, false));
}

/// Chars around the surrogate hole are neighbours; no range the tree
/// reports starts or ends inside it.
#[test]
fn char_keys_step_over_the_surrogates() {
    let mut t: MapleTree<u32, char> = MapleTree::keyed_with_gaps();
    t.insert_range('\u{d700}'..='\u{d7ff}', 1).unwrap();
    t.insert_range('\u{e000}'..='\u{e0ff}', 1).unwrap();
    assert_eq!(t.range_at('\u{d6ff}').0, '\0'..='\u{d6ff}');
    assert_eq!(t.range_at('\u{e100}').0, '\u{e100}'..=char::MAX);
    assert_eq!(t.gaps(..).collect::<Vec<_>>(), ['\0'..='\u{d6ff}', '\u{e100}'..=char::MAX]);
    // The two ranges touch across the hole: a merging store joins them.
    assert_eq!(t.store_range_merging('\u{d7ff}'..='\u{e000}', 1).unwrap(), '\u{d700}'..='\u{e0ff}');
    assert_eq!(t.len(), 1);
    assert_eq!(t.empty_area('\u{d600}'.., 0x200), Ok('\u{e100}'));
    let letters: MapleSet<char> = ['a'..='z', 'A'..='Z'].into_iter().collect();
    let not: Vec<RangeInclusive<char>> = letters.complement().iter().collect();
    assert_eq!(not, ['\0'..='@', '['..='`', '{'..=char::MAX]);
}

/// Rebased stores report where a piece moved in keys; `shift` counts keys.
#[test]
fn moved_pieces_are_in_keys() {
    let mut t: MapleTree<Box<i64>, i64> = MapleTree::keyed();
    t.insert_range(-100..=99, Box::new(-100)).unwrap();
    t.store_range_with(-10..=9, Box::new(0), |old, m| {
        assert_eq!((m.old.clone(), m.new.clone(), m.shift()), (-100..=99, 10..=99, 110));
        Box::new(old + m.shift() as i64)
    })
    .unwrap();
    assert_eq!(t.get_range(50).map(|(r, v)| (r, *v)), Some((10..=99, 10)));
}

/// Printing, equality and serde speak in keys.
#[test]
fn keys_print_and_round_trip() {
    let mut t: MapleTree<u32, i16> = MapleTree::keyed();
    t.insert_range(-3..=-1, 7).unwrap();
    assert_eq!(format!("{t:?}"), "{-3..=-1: 7}");
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(json, "[[-3,-1,7]]");
    let back: MapleTree<u32, i16> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
    let s: MapleSet<char> = serde_json::from_str("[[\"a\",\"c\"],[\"d\",\"f\"]]").unwrap();
    assert_eq!(format!("{s:?}"), "{'a'..='f'}");
    let e = serde_json::from_str::<MapleSet<char>>("[[\"z\",\"a\"]]").unwrap_err().to_string();
    assert!(e.contains("'z'..='a' is backwards"), "{e}");
}

/// The concurrent tree with signed keys: a writer inserts ranges (each
/// valued by its own first key) and erases them while readers iterate
/// from either end and walk cursors; every entry a reader sees holds its
/// own start, in ascending order of keys, negative ones first.
#[test]
fn concurrent_readers_see_signed_keys_in_order() {
    use maple_tree::ConcurrentMapleTree;
    use std::sync::atomic::{AtomicBool, Ordering};

    let t: ConcurrentMapleTree<i32, i16> = ConcurrentMapleTree::keyed_with_gaps();
    let done = AtomicBool::new(false);
    let steps = if cfg!(miri) { 50 } else { 20_000 };
    std::thread::scope(|s| {
        for r in 0..2 {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let mut seen = 0u64;
                while !done.load(Ordering::Relaxed) || seen == 0 {
                    let g = t.pin();
                    let forward: Vec<_> = if r == 0 { t.iter(&g).collect() } else { t.iter(&g).rev().collect() };
                    for (range, v) in &forward {
                        assert_eq!(*v, i32::from(*range.start()), "an entry holds its own start");
                    }
                    let starts: Vec<i16> = forward.iter().map(|(r, _)| *r.start()).collect();
                    let mut sorted = starts.clone();
                    sorted.sort_unstable();
                    if r == 1 {
                        sorted.reverse();
                    }
                    assert_eq!(starts, sorted, "in order of keys");
                    let mut c = t.cursor(-1, &g);
                    if let Some((range, v)) = c.next() {
                        assert!(*range.start() >= -1 || range.contains(&-1));
                        assert_eq!(v, i32::from(*range.start()));
                    }
                    seen += forward.len() as u64 + 1;
                }
            });
        }
        let mut next = words(7);
        let mut w = t.lock();
        for _ in 0..steps {
            let first = (next() % 4000) as i16 - 2000;
            let last = first.saturating_add((next() % 8) as i16);
            if next() % 3 == 0 {
                w.erase(first).unwrap();
            } else {
                let _ = w.insert_range(first..=last, i32::from(first));
            }
        }
        assert_eq!(w.tree().empty_area(.., 1), Ok(i16::MIN));
        assert_eq!(t.empty_area(.., 1), Ok(i16::MIN));
        drop(w);
        done.store(true, Ordering::Relaxed);
    });
    t.validate().unwrap();
    let plain = t.into_inner();
    assert!(plain.iter().all(|(r, v)| v == i32::from(*r.start())));
}
