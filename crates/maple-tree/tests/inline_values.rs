//! Small `Copy` values stored inline in the slots (`Inline`): every
//! built-in kind, tuples and a user's own type, through random writes of
//! every kind against a per-index model, with values near each type's
//! least and greatest; `validate()` after every write.

use std::fmt::Debug;

mod common;

use maple_tree::{ConcurrentMapleTree, Handle, Inline};

/// A user's own small type, made storable without `unsafe`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Frame {
    page: u32,
    dirty: bool,
}

impl Inline for Frame {
    const BITS: u32 = 33;
    fn to_bits(self) -> u64 {
        u64::from(self.page) | u64::from(self.dirty) << 32
    }
    fn from_bits(bits: u64) -> Self {
        Frame { page: bits as u32, dirty: bits >> 32 & 1 != 0 }
    }
}
maple_tree::inline_value!(Frame);

/// Keys the writes touch: `0..SPAN` (fewer under Miri, which looks at
/// the words' encoding rather than at long sequences).
const SPAN: u64 = if cfg!(miri) { 60 } else { 700 };
const STEPS: usize = if cfg!(miri) { 15 } else { 3_000 };

/// The shared value model (`common::values`) on both flavours (one under
/// Miri, which looks at the words' encoding rather than long sequences).
fn against_model<V>(what: &str, pick: impl Fn(u64) -> V)
where
    V: for<'a> Handle<Borrowed<'a> = V> + Inline + Clone + PartialEq + Debug + 'static,
{
    let flavours: &[bool] = if cfg!(miri) { &[true] } else { &[false, true] };
    for &gaps in flavours {
        common::values::against_model(what, gaps, (SPAN, STEPS), &pick, |v| v);
    }
}

/// A random word, often one of the type's extremes (the two at each end).
fn edge(r: u64, least: u64, most: u64) -> u64 {
    match r % 8 {
        0 => least,
        1 => least.wrapping_add(1),
        2 => most.wrapping_sub(1),
        3 => most,
        _ => r >> 3,
    }
}

#[test]
fn unsigned_integers() {
    against_model("u8", |r| edge(r, 0, u8::MAX.into()) as u8);
    against_model("u16", |r| edge(r, 0, u16::MAX.into()) as u16);
    against_model("u32", |r| edge(r, 0, u32::MAX.into()) as u32);
}

#[test]
fn signed_integers() {
    against_model("i8", |r| edge(r, i8::MIN as u64, i8::MAX as u64) as i8);
    against_model("i16", |r| edge(r, i16::MIN as u64, i16::MAX as u64) as i16);
    against_model("i32", |r| edge(r, i32::MIN as u64, i32::MAX as u64) as i32);
}

#[test]
fn bool_char_and_unit() {
    against_model("bool", |r| r & 1 != 0);
    against_model("char", |r| match r % 4 {
        0 => '\0',
        1 => char::MAX,
        2 => '\u{d7ff}',
        _ => char::from_u32((r >> 2) as u32 % 0x11_0000).unwrap_or('\u{e000}'),
    });
    against_model("()", |_| ());
}

#[test]
fn tuples_and_a_users_type() {
    against_model("(u16, u16)", |r| (edge(r, 0, 0xffff) as u16, edge(r >> 20, 0, 0xffff) as u16));
    against_model("(bool, u8, i32)", |r| {
        (r & 1 != 0, (r >> 1) as u8, edge(r >> 9, i32::MIN as u64, i32::MAX as u64) as i32)
    });
    against_model("(u32, u16)", |r| (edge(r, 0, u32::MAX.into()) as u32, (r >> 40) as u16));
    // A negative first part must not spill into the second.
    against_model("(i8, u16, i16)", |r| {
        (
            edge(r, i8::MIN as u64, i8::MAX as u64) as i8,
            (r >> 8) as u16,
            edge(r >> 24, i16::MIN as u64, i16::MAX as u64) as i16,
        )
    });
    against_model("Frame", |r| Frame { page: edge(r, 0, u32::MAX.into()) as u32, dirty: r >> 63 != 0 });
}

/// Inline values in the concurrent tree: readers on other threads see
/// each range's value whole while one writer keeps replacing it. (Not
/// under Miri's strict provenance, which the epoch collector does not
/// keep; the concurrent tests run `U63`, the same encoding, under Miri.)
#[test]
#[cfg_attr(miri, ignore)]
fn concurrent_readers_see_whole_inline_values() {
    let t: ConcurrentMapleTree<(u32, u16)> = ConcurrentMapleTree::new();
    let rounds = 20_000;
    for i in 0..64u64 {
        t.lock().store_range(i * 10..=i * 10 + 5, (i as u32, i as u16)).unwrap();
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            for round in 0..rounds {
                let i = round % 64;
                let v = (round as u32, round as u16);
                t.lock().store_range(i * 10..=i * 10 + 5, v).unwrap();
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                let g = t.pin();
                for k in 0..rounds {
                    let i = k % 64;
                    let (a, b) = t.load(i * 10 + 3, &g).expect("a range is always there");
                    // Every value written pairs a number with its own low
                    // 16 bits.
                    assert_eq!(a as u16, b, "torn value at {i}");
                }
            });
        }
    });
}
