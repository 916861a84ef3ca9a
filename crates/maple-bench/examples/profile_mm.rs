//! Address-space calls, for `valgrind --tool=callgrind` (instruction counts
//! compare two versions of the call paths; wall time on a shared machine is
//! noise).
//!
//! `profile_mm [MODE] [VMAS] [CALLS]`: MODE `map` (a one-page mapping made
//! and removed in a hole, the default), `protect` (a page protected and
//! restored inside a VMA) or `find` (`find_vma` at scattered addresses);
//! an address space of VMAS two-page VMAs with one-page holes (10,000 by
//! default, the report's mm-calls set-up); CALLS pairs or lookups (20,000).
//! `observed-map` and `observed-protect` are `map` and `protect` with an
//! observer that counts the changes.

use std::hint::black_box;

use maple_bench::workloads::{counting_observer, holey_space, map_pairs, middle, protect_pairs, BASE};
use maple_mm::PAGE_SIZE;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "map".into());
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let mut mm = holey_space(n);
    let (hole, page) = middle(n);
    let (observer, told) = counting_observer();
    let mode = match mode.strip_prefix("observed-") {
        Some(m) => {
            mm.set_observer(observer);
            m.to_string()
        }
        None => mode,
    };
    let mut total = 0u64;
    match mode.as_str() {
        "map" => map_pairs(&mut mm, calls, hole),
        "protect" => protect_pairs(&mut mm, calls, page),
        "find" => {
            for k in 0..calls {
                let a = BASE + (k.wrapping_mul(2_654_435_761) % (n * 3)) * PAGE_SIZE;
                total += mm.find_vma(black_box(a)).map_or(0, |v| v.start());
            }
        }
        other => {
            eprintln!("profile_mm: unknown mode {other:?} (map, protect or find, observed-map, observed-protect)");
            std::process::exit(2);
        }
    }
    println!("{} VMAs, {total}, {} changes told", mm.vma_count(), told.load(std::sync::atomic::Ordering::Relaxed));
}
