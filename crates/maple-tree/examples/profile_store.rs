//! A workload for profilers: builds trees by storing ranges in ascending or
//! random order (`cargo run --release --example profile_store -- rand`).
use maple_tree::{MapleTree, U63};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "slot" {
        // The kernel's slot-store loop.
        let mut t: MapleTree<U63> = MapleTree::with_gaps();
        for i in (0..=1030u64).step_by(10) {
            t.insert_range(i..=i + 5, U63::new_truncate(i)).unwrap();
        }
        for _ in 0..1_000_000 {
            t.remove_range(105..=105).unwrap();
            t.store_range(100..=105, U63::new_truncate(100)).unwrap();
        }
        println!("{}", t.len());
        return;
    }
    if mode == "iter" {
        let t: MapleTree<U63> =
            MapleTree::from_sorted((0..1000u64).map(|i| (i * 16..=i * 16 + 9, U63::new_truncate(i)))).unwrap();
        let mut sum = 0;
        for _ in 0..20_000 {
            sum += t.iter().map(|(_, v)| v.get()).sum::<u64>();
        }
        println!("{sum}");
        return;
    }
    let random = mode == "rand";
    let n = 100_000u64;
    let mut order: Vec<u64> = (0..n).collect();
    if random {
        // A fixed permutation (multiplicative hashing), no RNG dependency.
        order.sort_by_key(|&i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17));
    }
    let mut total = 0;
    for _ in 0..10 {
        let mut t: MapleTree<U63> = MapleTree::new();
        for &i in &order {
            t.store_range(i * 16..=i * 16 + 9, U63::new_truncate(i)).unwrap();
        }
        total += t.len();
    }
    println!("{total}");
}
