//! Criterion benchmarks (workloads shared with `maple-report`, from
//! `maple_bench::workloads`): the maple tree against `BTreeMap<u64, (u64, V)>`
//! used as a range map (`range(..=i).next_back()`) and the `rangemap` crate.
//!
//! Every group varies the number of ranges (1 K, 100 K, 1 M; set
//! `MAPLE_BENCH_SIZES=1000,100000` to choose) and runs each structure on
//! the same data in the same run, so ratios are meaningful even on a noisy
//! machine. Data: ranges `[i*16, i*16+9]` (gaps of 6 between entries), as a
//! VMA-like layout.
//!
//! * `load`: lookups of random indices (hits and misses).
//! * `store_asc` / `store_rand`: building by inserting every range in
//!   ascending / random order; reported per insert.
//! * `iterate`: one full in-order pass; reported per entry.
//! * `erase`: erasing every entry in random order; per erase.
//! * `gap`: lowest free window of 64 (only one exists, placed at a random
//!   spot) inside the whole space; the baseline scans the BTreeMap.

use std::{collections::BTreeMap, hint::black_box, time::Duration};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use maple_bench::workloads::{btree, btree_gap, btree_load, maple, order, range, rmap, STEP};
use maple_tree::{MapleTree, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use rangemap::RangeInclusiveMap;

fn sizes() -> Vec<u64> {
    std::env::var("MAPLE_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 100_000, 1_000_000])
}

fn config(c: &mut Criterion) -> &mut Criterion {
    c
}

fn load(c: &mut Criterion) {
    let mut g = config(c).benchmark_group("load");
    for n in sizes() {
        let mut rng = SmallRng::seed_from_u64(n);
        let keys: Vec<u64> = (0..4096).map(|_| rng.gen_range(0..n * STEP)).collect();
        g.throughput(Throughput::Elements(keys.len() as u64));
        let t = maple(n, false);
        g.bench_with_input(BenchmarkId::new("maple", n), &keys, |b, keys| {
            b.iter(|| keys.iter().map(|&k| t.load(k).map_or(0, U63::get)).sum::<u64>())
        });
        let tg = maple(n, true);
        g.bench_with_input(BenchmarkId::new("maple-gaps", n), &keys, |b, keys| {
            b.iter(|| keys.iter().map(|&k| tg.load(k).map_or(0, U63::get)).sum::<u64>())
        });
        let m = btree(n);
        g.bench_with_input(BenchmarkId::new("btreemap", n), &keys, |b, keys| {
            b.iter(|| keys.iter().map(|&k| btree_load(&m, k).unwrap_or(0)).sum::<u64>())
        });
        let r = rmap(n);
        g.bench_with_input(BenchmarkId::new("rangemap", n), &keys, |b, keys| {
            b.iter(|| keys.iter().map(|&k| r.get(&k).copied().unwrap_or(0)).sum::<u64>())
        });
    }
    g.finish();
}

fn store(c: &mut Criterion) {
    for (name, random) in [("store_asc", false), ("store_rand", true)] {
        let mut g = config(c).benchmark_group(name);
        for n in sizes() {
            let ord = order(n, random);
            g.throughput(Throughput::Elements(n));
            g.bench_with_input(BenchmarkId::new("maple", n), &ord, |b, ord| {
                b.iter_batched(
                    MapleTree::<U63>::new,
                    |mut t| {
                        for &i in ord {
                            let (f, l) = range(i);
                            t.store_range(f..=l, U63::new_truncate(i)).unwrap();
                        }
                        t
                    },
                    BatchSize::PerIteration,
                )
            });
            g.bench_with_input(BenchmarkId::new("maple-gaps", n), &ord, |b, ord| {
                b.iter_batched(
                    MapleTree::<U63>::with_gaps,
                    |mut t| {
                        for &i in ord {
                            let (f, l) = range(i);
                            t.store_range(f..=l, U63::new_truncate(i)).unwrap();
                        }
                        t
                    },
                    BatchSize::PerIteration,
                )
            });
            g.bench_with_input(BenchmarkId::new("btreemap", n), &ord, |b, ord| {
                b.iter_batched(
                    BTreeMap::<u64, (u64, u64)>::new,
                    |mut m| {
                        for &i in ord {
                            let (f, l) = range(i);
                            m.insert(f, (l, i));
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
            g.bench_with_input(BenchmarkId::new("rangemap", n), &ord, |b, ord| {
                b.iter_batched(
                    RangeInclusiveMap::<u64, u64>::new,
                    |mut m| {
                        for &i in ord {
                            let (f, l) = range(i);
                            m.insert(f..=l, i);
                        }
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();
    }
}

fn iterate(c: &mut Criterion) {
    let mut g = config(c).benchmark_group("iterate");
    for n in sizes() {
        g.throughput(Throughput::Elements(n));
        let t = maple(n, false);
        g.bench_function(BenchmarkId::new("maple", n), |b| b.iter(|| t.iter().map(|(_, v)| v.get()).sum::<u64>()));
        let m = btree(n);
        g.bench_function(BenchmarkId::new("btreemap", n), |b| b.iter(|| m.values().map(|v| v.1).sum::<u64>()));
        let r = rmap(n);
        g.bench_function(BenchmarkId::new("rangemap", n), |b| b.iter(|| r.iter().map(|(_, v)| *v).sum::<u64>()));
    }
    g.finish();
}

fn erase(c: &mut Criterion) {
    let mut g = config(c).benchmark_group("erase");
    for n in sizes() {
        let ord = order(n, true);
        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::new("maple", n), &ord, |b, ord| {
            b.iter_batched(
                || maple(n, false),
                |mut t| {
                    for &i in ord {
                        black_box(t.erase(i * STEP));
                    }
                    t
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_with_input(BenchmarkId::new("btreemap", n), &ord, |b, ord| {
            b.iter_batched(
                || btree(n),
                |mut m| {
                    for &i in ord {
                        black_box(m.remove(&(i * STEP)));
                    }
                    m
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_with_input(BenchmarkId::new("rangemap", n), &ord, |b, ord| {
            b.iter_batched(
                || rmap(n),
                |mut m| {
                    for &i in ord {
                        let (f, l) = range(i);
                        m.remove(f..=l);
                    }
                    m
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn gap(c: &mut Criterion) {
    let mut g = config(c).benchmark_group("gap");
    for n in sizes() {
        let hole = SmallRng::seed_from_u64(n).gen_range(n / 4..n / 2 + 1);
        let mut t = maple(n, true);
        let mut m = btree(n);
        for k in hole..hole + 5 {
            t.erase(k * STEP);
            m.remove(&(k * STEP));
        }
        let want = Some(hole * STEP);
        assert_eq!(t.empty_area(.., 64).ok(), want);
        assert_eq!(btree_gap(&m, 64), want);
        g.bench_function(BenchmarkId::new("maple-gaps", n), |b| b.iter(|| t.empty_area(.., black_box(64))));
        g.bench_function(BenchmarkId::new("maple-gaps-rev", n), |b| {
            b.iter(|| t.empty_area_rev(..n * STEP - 100, black_box(64)))
        });
        g.bench_function(BenchmarkId::new("btreemap-scan", n), |b| b.iter(|| btree_gap(&m, black_box(64))));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = load, store, iterate, erase, gap
}
criterion_main!(benches);
