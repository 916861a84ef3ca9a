//! Lock-free readers: threads look ranges up while one writer keeps
//! changing the map; readers never block and never see a half-done write.
//!
//! `cargo run --release -p maple-tree --example concurrent_reader`

use std::sync::atomic::{AtomicBool, Ordering};

use maple_tree::{ConcurrentMapleTree, U63};

fn main() {
    let tree: ConcurrentMapleTree<U63> = ConcurrentMapleTree::new();
    {
        let mut w = tree.lock();
        for i in 0..10_000u64 {
            w.insert_range(i * 16..=i * 16 + 9, U63::new(i).unwrap()).unwrap();
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (tree, stop) = (&tree, &stop);
                s.spawn(move || {
                    let (mut hits, mut misses) = (0u64, 0u64);
                    let mut k = r;
                    while !stop.load(Ordering::Relaxed) {
                        // One guard for a batch of lookups: pinning costs a
                        // fence, so amortise it.
                        let g = tree.pin();
                        for _ in 0..1000 {
                            k = (k * 6364136223846793005 + 1442695040888963407) % 160_000;
                            match tree.load(k, &g) {
                                // Whatever a reader sees is a whole entry:
                                // the value always matches its range.
                                Some(v) => {
                                    assert_eq!(v.get(), k / 16);
                                    hits += 1
                                }
                                None => misses += 1,
                            }
                        }
                    }
                    (hits, misses)
                })
            })
            .collect();
        // The writer: erase and re-insert ranges as fast as it can.
        for i in 0..200_000u64 {
            let j = (i * 7919) % 10_000;
            let mut w = tree.lock();
            w.erase(j * 16).expect("memory for the write");
            w.insert_range(j * 16..=j * 16 + 9, U63::new(j).unwrap()).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for (r, h) in readers.into_iter().enumerate() {
            let (hits, misses) = h.join().unwrap();
            println!("reader {r}: {hits} hits, {misses} misses while the writer churned");
        }
    });
    tree.validate().unwrap();
}
