//! Comparing maps files page by page, shared by the replay tests.
#![allow(dead_code)] // each test uses part of it

/// Mappings the kernel makes without system calls: left out of every
/// comparison.
pub fn kernel_made(line: &str) -> bool {
    ["[stack]", "[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]"].iter().any(|l| line.ends_with(l))
}

/// (start, end, "rwxp") of every compared VMA.
pub fn ranges(maps: &str) -> Vec<(u64, u64, String)> {
    maps.lines()
        .filter(|l| !kernel_made(l))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (s, e) = f[0].split_once('-').unwrap();
            (u64::from_str_radix(s, 16).unwrap(), u64::from_str_radix(e, 16).unwrap(), f[1].to_string())
        })
        .collect()
}

/// The address ranges whose pages differ (mapped or not, rwx,
/// private/shared).
pub fn page_diff(want: &str, got: &str) -> Vec<String> {
    let (a, b) = (ranges(want), ranges(got));
    let mut cuts: Vec<u64> = a.iter().chain(&b).flat_map(|r| [r.0, r.1]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let at = |v: &[(u64, u64, String)], x: u64| v.iter().find(|r| r.0 <= x && x < r.1).map(|r| r.2.clone());
    cuts.windows(2)
        .filter_map(|w| {
            let (pa, pb) = (at(&a, w[0]), at(&b, w[0]));
            (pa != pb).then(|| format!("{:x}-{:x}: want {pa:?}, got {pb:?}", w[0], w[1]))
        })
        .collect()
}

/// How many of `want`'s compared lines appear in `got` exactly, of how many.
pub fn matching_lines(want: &str, got: &str) -> (usize, usize) {
    let w: Vec<&str> = want.lines().filter(|l| !kernel_made(l)).collect();
    let g: Vec<&str> = got.lines().collect();
    (w.iter().filter(|l| g.contains(l)).count(), w.len())
}
