fn main() {
    let named = std::env::args().nth(1).as_deref() == Some("named");
    let mm = maple_bench::workloads::vma_space(65536, named, false);
    let t = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..300 {
        n += mm.fork().unwrap().vma_count();
    }
    println!("{} {:.2} ms per fork", n, t.elapsed().as_secs_f64() * 1e3 / 300.0);
}
