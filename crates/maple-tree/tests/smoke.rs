mod common;
use common::*;
use maple_tree::MapleTree;

#[test]
fn sequential_and_reverse() {
    for gaps in [false, true] {
        for rev in [false, true] {
            let mut t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            let mut m = Model::default();
            let n = if cfg!(miri) { 24 } else { 1000u64 };
            for i in 0..n {
                let i = if rev { n - i } else { i };
                t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
                m.store(i * 10, i * 10 + 5, i);
                check(&t, &m, &format!("insert {i}"));
            }
            for i in 0..n {
                let i = if rev { n - i } else { i };
                assert_eq!(t.erase(i * 10 + 2).map(|x| x.get()), Some(i));
                m.erase(i * 10);
                check(&t, &m, &format!("erase {i}"));
            }
        }
    }
}
