//! The random order of the report's kernel section and of its C driver
//! (`crates/maple-bench/kernel-c/kbench.c`, `kbench nodes-random`), so
//! that node counts and times compare with the kernel's tree on the same
//! sequence. Shared by the integration tests and `examples/profile_store.rs`
//! (which includes this file by path).

/// `0..n` in the order a Fisher-Yates shuffle driven by splitmix64 seeded
/// with 7 leaves them.
pub fn kernel_order(n: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    let mut state = 7u64;
    for i in (1..order.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// splitmix64, the shuffle's generator.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
