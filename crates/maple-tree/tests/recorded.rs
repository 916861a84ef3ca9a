//! Replays the 29 recorded operation sequences (real VMA trees that once
//! broke range-tree implementations), validating and comparing with the
//! model after every operation, on both tree flavours and write modes.

mod common;

use std::path::Path;

use common::*;
use maple_tree::{FreshNodes, MapleTree, Writes, U63};

fn replay(name: &str, text: &str, gaps: bool, fresh: bool) {
    if fresh {
        replay_on(MapleTree::<U63, u64, FreshNodes>::fresh(gaps), name, text);
    } else {
        replay_on(if gaps { MapleTree::with_gaps() } else { MapleTree::new() }, name, text);
    }
}

fn replay_on<W: Writes>(mut t: MapleTree<U63, u64, W>, name: &str, text: &str) {
    let mut m = Model::default();
    let mut max_height = 0;
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [op, f, l] = parts[..] else { panic!("{name}:{}: bad line {line:?}", lineno + 1) };
        let f: u64 = f.parse().unwrap();
        let l: u64 = l.parse().unwrap();
        match op {
            "store" => {
                t.store_range(f..=l, v(f)).unwrap();
                m.store(f, l, f);
            }
            "snull" => {
                t.remove_range(f..=l).unwrap();
                m.clear(f, l);
            }
            "erase" => {
                let got = t.erase(f).map(|x| x.get());
                assert_eq!(got, m.erase(f).map(|e| e.2), "{name}:{}", lineno + 1);
            }
            other => panic!("{name}:{}: unknown op {other}", lineno + 1),
        }
        check(&t, &m, &format!("{name}:{} ({line})", lineno + 1));
        max_height = max_height.max(t.height());
    }
    assert!(max_height >= 1, "{name}: nothing stored");
}

#[test]
fn all_recorded_sets() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-recorded");
    let modes = std::fs::read_to_string(dir.join("modes.txt")).unwrap();
    let mut sets = 0;
    for line in modes.lines() {
        let Some((name, mode)) = line.split_once(' ') else {
            continue;
        };
        let text = std::fs::read_to_string(dir.join(format!("{name}.ops"))).unwrap();
        let gaps = mode.trim() == "gaps";
        for (g, fresh) in [(gaps, false), (!gaps, false), (gaps, true)] {
            replay(name, &text, g, fresh);
        }
        sets += 1;
    }
    assert_eq!(sets, 29);
}
