//! `serde` round trips and malformed input (feature `serde`).

use maple_tree::{MapleTree, U63};
use proptest::prelude::*;

fn entries<V: maple_tree::Handle>(t: &MapleTree<V>) -> Vec<(u64, u64)> {
    t.iter().map(|(r, _)| (*r.start(), *r.end())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 128 }, ..ProptestConfig::default() })]

    /// Any tree reads back as the same entries, with `validate()` clean,
    /// in both flavours.
    #[test]
    fn round_trip(ops in prop::collection::vec((0u64..5000, 0u64..40, any::<u32>()), 0..300), gaps: bool) {
        let mut t: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
        for &(f, len, v) in &ops {
            t.store_range(f..=f + len, U63::new(v.into()).unwrap()).unwrap();
        }
        // Reserved ranges are not values: not written, so not read back.
        t.reserve_range(6000..=6010).unwrap();
        let json = serde_json::to_string(&t).unwrap();
        let back: MapleTree<U63> = serde_json::from_str(&json).unwrap();
        back.validate().unwrap();
        let want: Vec<_> = t.iter().map(|(r, v)| (r, v.get())).collect();
        let got: Vec<_> = back.iter().map(|(r, v)| (r, v.get())).collect();
        prop_assert_eq!(got, want);
        prop_assert!(!back.is_reserved(6005));
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }
}

#[test]
fn boxed_values_and_the_format() {
    let mut t: MapleTree<Box<String>> = MapleTree::new();
    t.insert_range(0x10..=0x1f, Box::new("a".into())).unwrap();
    t.insert_range(0x30..=0x30, Box::new("b".into())).unwrap();
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(json, r#"[[16,31,"a"],[48,48,"b"]]"#);
    let back: MapleTree<Box<String>> = serde_json::from_str(&json).unwrap();
    assert_eq!(back.load(0x18).map(|s| s.as_str()), Some("a"));
    // Order does not matter on the way in.
    let back: MapleTree<Box<String>> = serde_json::from_str(r#"[[48,48,"b"],[16,31,"a"]]"#).unwrap();
    assert_eq!(entries(&back), [(16, 31), (48, 48)]);
}

#[test]
fn malformed_input_is_an_error_naming_the_entry() {
    let bad =
        |json: &str| serde_json::from_str::<MapleTree<U63>>(json).err().map(|e| e.to_string()).unwrap_or_default();
    let e = bad("[[0,9,1],[5,20,2]]");
    assert!(e.contains("entry 1") && e.contains("occupied"), "{e}");
    let e = bad("[[0,9,1],[30,20,2]]");
    assert!(e.contains("entry 1") && e.contains("backwards"), "{e}");
    let e = bad("[[0,9,9223372036854775808]]");
    assert!(e.contains("63 bits"), "{e}");
    assert!(!bad(r#"{"a": 1}"#).is_empty());
    assert!(!bad("[[0,9]]").is_empty());
    assert!(!bad("[[0,9,1]").is_empty());
}

#[test]
fn a_field_can_ask_for_gap_tracking() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Space {
        #[serde(with = "maple_tree::serde_with_gaps")]
        areas: MapleTree<U63>,
    }
    let s: Space = serde_json::from_str(r#"{"areas": [[0, 99, 1], [200, 299, 2]]}"#).unwrap();
    assert!(s.areas.tracks_gaps());
    assert_eq!(s.areas.empty_area(.., 100), Ok(100));
    s.areas.validate().unwrap();
    let plain: MapleTree<U63> = serde_json::from_str("[[0, 99, 1]]").unwrap();
    assert!(!plain.tracks_gaps());
    assert_eq!(serde_json::to_string(&s).unwrap(), r#"{"areas":[[0,99,1],[200,299,2]]}"#);
}

#[test]
fn a_set_is_its_ranges() {
    let s: maple_tree::MapleSet = [0..=9, 20..=29, 30..=31].into_iter().collect();
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(json, "[[0,9],[20,31]]");
    let back: maple_tree::MapleSet = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
    // Any order, touching and overlapping pairs join as inserts do.
    let joined: maple_tree::MapleSet = serde_json::from_str("[[20,25],[0,9],[26,31],[5,12]]").unwrap();
    assert_eq!(format!("{joined:?}"), "{0..=12, 20..=31}");
    let err = serde_json::from_str::<maple_tree::MapleSet>("[[0,9],[7,3]]").unwrap_err().to_string();
    assert!(err.contains("range 1: 7..=3 is backwards"), "{err}");
}
