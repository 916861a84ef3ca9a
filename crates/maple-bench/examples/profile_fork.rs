//! Forks of one address space, for `valgrind --tool=callgrind` (instruction
//! counts are what compare two versions of the fork path here; wall time on
//! a shared machine is noise).
//!
//! `profile_fork [MODE] [VMAS] [FORKS]`: MODE `dup` (`AddressSpace::fork`,
//! the default), `insertion` (`fork_by_insertion`) or `tree` (the tree
//! alone duplicated); an address space of VMAS written, non-mergeable
//! anonymous VMAs (421 by default, the report's fork-scaling set-up), forked
//! FORKS times (2,000 by default), each child dropped at once.

use maple_bench::workloads::vma_space;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "dup".into());
    let vmas: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(421);
    let forks: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let mm = vma_space(vmas, false, true);
    let tree = mm.vma_tree();
    let mut total = 0usize;
    for _ in 0..forks {
        total += match mode.as_str() {
            "dup" => mm.fork().expect("fork").vma_count(),
            "insertion" => mm.fork_by_insertion().expect("fork").vma_count(),
            "tree" => tree.try_dup().expect("dup").len(),
            other => {
                eprintln!("profile_fork: unknown mode {other:?} (dup, insertion or tree)");
                std::process::exit(2);
            }
        };
    }
    println!("{total}");
}
