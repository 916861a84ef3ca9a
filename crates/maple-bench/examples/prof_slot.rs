fn main() {
    let mut t = maple_bench::workloads::kernel_tree(1030);
    let loops: u64 = std::env::args().nth(1).map_or(200_000, |s| s.parse().unwrap());
    let start = std::time::Instant::now();
    for _ in 0..loops {
        t.remove_range(105..=105).unwrap();
        t.store_range(100..=105, maple_bench::workloads::u(100)).unwrap();
    }
    println!("{:.1} ns per iteration", start.elapsed().as_secs_f64() * 1e9 / loops as f64);
}
