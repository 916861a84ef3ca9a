//! Swap extents: against a linear scan on random extent lists, bad input,
//! and a real fragmented file read with FIEMAP and checked with filefrag.

use maple_mm::swap::{SwapError, SwapExtents};
use proptest::prelude::*;

/// The old design's answer: walk the list.
fn scan(list: &[(u64, u64, u64)], page: u64) -> Option<u64> {
    list.iter().find(|&&(s, n, _)| s <= page && page < s + n).map(|&(s, _, b)| b + (page - s))
}

prop_compose! {
    /// Ascending extents with random gaps; some continue the previous one
    /// on disk (and must merge).
    fn extents()(steps in prop::collection::vec((0..3u64, 1..40u64, any::<bool>(), 0..10_000u64), 1..120)) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        let mut page = 0;
        for (gap, n, contiguous, block) in steps {
            let start = page + if contiguous { 0 } else { gap };
            let b = match out.last() {
                Some(&(s, pn, pb)) if contiguous && start == s + pn => pb + pn,
                _ => block * 64,
            };
            out.push((start, n, b));
            page = start + n;
        }
        out
    }
}

proptest! {
    #[test]
    fn map_and_discard_agree_with_a_linear_scan(list in extents(), probes in prop::collection::vec(0..6000u64, 1..200), span in 1..80u64) {
        let mut s = SwapExtents::new();
        for &(p, n, b) in &list {
            s.add_extent(p, n, b).unwrap();
        }
        prop_assert!(s.len() <= list.len());
        prop_assert_eq!(s.pages(), list.iter().map(|e| e.1).sum::<u64>());
        for &p in &probes {
            prop_assert_eq!(s.map(p).ok(), scan(&list, p));
        }
        for &p in &probes {
            let mut got = Vec::new();
            let r = s.discard_cluster(p, span, |b, n| got.push((b, n)));
            let covered = (p..p + span).all(|q| scan(&list, q).is_some());
            prop_assert_eq!(r.is_ok(), covered);
            if covered {
                // Every page's block, in order, from the pieces.
                let blocks: Vec<u64> = got.iter().flat_map(|&(b, n)| b..b + n).collect();
                let want: Vec<u64> = (p..p + span).map(|q| scan(&list, q).unwrap()).collect();
                prop_assert_eq!(blocks, want);
            } else {
                prop_assert!(got.is_empty());
            }
        }
        let it: u64 = s.iter().map(|e| e.1).sum();
        prop_assert_eq!(it, s.pages());
    }
}

#[test]
fn bad_extents_are_errors_and_change_nothing() {
    let mut s = SwapExtents::new();
    s.add_extent(0, 10, 100).unwrap();
    s.add_extent(20, 5, 50).unwrap();
    let before: Vec<_> = s.iter().collect();
    assert_eq!(s.add_extent(22, 5, 1), Err(SwapError::OutOfOrder { start_page: 22, next_page: 25 }));
    assert_eq!(s.add_extent(5, 1, 1).unwrap_err(), SwapError::OutOfOrder { start_page: 5, next_page: 25 });
    assert_eq!(s.add_extent(30, 0, 1), Err(SwapError::BadExtent));
    assert_eq!(s.add_extent(u64::MAX, 2, 1), Err(SwapError::BadExtent));
    assert_eq!(s.add_extent(40, 2, u64::MAX - 1), Err(SwapError::BadExtent));
    assert_eq!(s.iter().collect::<Vec<_>>(), before);
    assert_eq!(s.map(15), Err(SwapError::Unmapped(15)));
    assert_eq!(s.map(u64::MAX), Err(SwapError::Unmapped(u64::MAX)));
    assert_eq!(s.discard_cluster(8, 5, |_, _| panic!("nothing may be called")), Err(SwapError::Unmapped(10)));
    assert_eq!(s.discard_cluster(u64::MAX, 2, |_, _| ()), Err(SwapError::BadExtent));
    // Continuing on disk merges.
    s.add_extent(25, 5, 55).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.map(29), Ok(59));
}

/// Extent lists recorded from real fragmented files (FIEMAP via `filefrag
/// -v`): the map built from them has filefrag's extent count and maps every
/// page to the block the list says.
#[cfg(target_os = "linux")]
#[test]
fn recorded_fragmented_files() {
    use maple_mm::swap::{swap_extents_from, FileExtent};
    for name in ["fragmented-a", "fragmented-b"] {
        let path = format!("{}/tests/data/swap/{name}.extents", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let want: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("# filefrag: "))
            .and_then(|l| l.rsplit(": ").next())
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("filefrag count in the header");
        let raw: Vec<FileExtent> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                FileExtent {
                    logical: f[0].parse().unwrap(),
                    physical: f[1].parse().unwrap(),
                    length: f[2].parse().unwrap(),
                    flags: u32::from_str_radix(f[3], 16).unwrap(),
                }
            })
            .collect();
        let map = swap_extents_from(&raw, None).unwrap();
        assert_eq!(map.len(), want, "{name}");
        let pages: u64 = raw.iter().map(|e| e.length / 4096).sum();
        assert_eq!(map.pages(), pages);
        for page in 0..pages {
            let byte = page * 4096;
            let e = raw.iter().find(|e| e.logical <= byte && byte < e.logical + e.length).unwrap();
            assert_eq!(map.map(page), Ok((e.physical + byte - e.logical) / 4096), "{name} page {page}");
        }
    }
}

#[cfg(target_os = "linux")]
mod live {
    use std::{io::Write, os::unix::fs::FileExt, process::Command};

    use maple_mm::swap::{read_extents, swap_extents_from, swap_extents_of_file, FiemapError};

    /// Writes two files in alternating 4 KiB pieces, each fsynced, with a
    /// small third file now and then, so that the file system interleaves
    /// their blocks (19 extents on ext4 here).
    fn fragmented(dir: &std::path::Path) -> std::path::PathBuf {
        let a = dir.join("swap.a");
        let fa = std::fs::File::create(&a).unwrap();
        let fb = std::fs::File::create(dir.join("swap.b")).unwrap();
        let page = vec![0x5au8; 4096];
        for i in 0..200u64 {
            fa.write_all_at(&page, i * 4096).unwrap();
            fa.sync_all().unwrap();
            fb.write_all_at(&page, i * 4096).unwrap();
            fb.sync_all().unwrap();
            if i % 7 == 0 {
                let t = std::fs::File::create(dir.join(format!("t{i}"))).unwrap();
                t.write_all_at(&[1u8; 8192], 0).unwrap();
                t.sync_all().unwrap();
            }
        }
        let _ = (&fa).flush();
        a
    }

    #[test]
    fn a_fragmented_file_maps_page_for_page() {
        let dir = std::env::temp_dir().join(format!("maple-swap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = fragmented(&dir);
        let raw = match read_extents(&path) {
            Ok(r) => r,
            Err(FiemapError::Unsupported) => {
                eprintln!("FIEMAP is not supported on {}: skipped", dir.display());
                std::fs::remove_dir_all(&dir).unwrap();
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let (map, n) = swap_extents_of_file(&path).unwrap();
        assert_eq!(n, raw.len());
        // Every page maps to the block FIEMAP reports for it.
        let len = std::fs::metadata(&path).unwrap().len();
        for page in 0..len / 4096 {
            let byte = page * 4096;
            let e = raw.iter().find(|e| e.logical <= byte && byte < e.logical + e.length).unwrap();
            assert_eq!(map.map(page), Ok((e.physical + (byte - e.logical)) / 4096), "page {page}");
        }
        // The same from the list, as recorded data would give it.
        assert_eq!(
            swap_extents_from(&raw, Some(len)).unwrap().iter().collect::<Vec<_>>(),
            map.iter().collect::<Vec<_>>()
        );
        // filefrag counts physically discontiguous extents.
        if let Ok(out) = Command::new("filefrag").arg(&path).output() {
            let text = String::from_utf8_lossy(&out.stdout);
            let count: usize =
                text.rsplit(": ").next().and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            assert_eq!(count, map.len(), "filefrag: {text}");
        } else {
            eprintln!("filefrag is not installed: extent count not cross-checked");
        }
        eprintln!("{} FIEMAP extents, {} after merging, {} pages", raw.len(), map.len(), map.pages());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_whole_pages_below_the_size_count() {
        use std::os::unix::fs::FileExt;
        let dir = std::env::temp_dir().join(format!("maple-swap-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: usize| {
            let path = dir.join(name);
            let f = std::fs::File::create(&path).unwrap();
            f.write_all_at(&vec![7u8; bytes], 0).unwrap();
            f.sync_all().unwrap();
            (path, f)
        };
        // Four pages with a mebibyte allocated past the end (fallocate
        // with FALLOC_FL_KEEP_SIZE, as `fallocate -n`): Linux's swapfile
        // activation walks the file up to its size.
        let (path, f) = write("kept", 4 * 4096);
        // SAFETY: fallocate on an open file with integer arguments.
        let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 1, 0, 4 * 4096 + (1 << 20)) };
        match swap_extents_of_file(&path) {
            Err(FiemapError::Unsupported) => {
                eprintln!("FIEMAP is not supported on {}: skipped", dir.display());
                std::fs::remove_dir_all(&dir).unwrap();
                return;
            }
            Ok((map, _)) if rc == 0 => assert_eq!(map.pages(), 4),
            other => panic!("{other:?} (fallocate {rc})"),
        }
        // 10,000 bytes: two whole pages; 3 bytes: none.
        let (path, _f) = write("partial", 10_000);
        assert_eq!(swap_extents_of_file(&path).unwrap().0.pages(), 2);
        let (path, _f) = write("tiny", 3);
        assert!(matches!(swap_extents_of_file(&path), Err(FiemapError::Rejected(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_swapon_would_refuse() {
        let dir = std::env::temp_dir().join(format!("maple-swap-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A hole.
        let holey = dir.join("holey");
        let f = std::fs::File::create(&holey).unwrap();
        f.write_all_at(&[1u8; 4096], 0).unwrap();
        f.write_all_at(&[1u8; 4096], 1 << 20).unwrap();
        f.sync_all().unwrap();
        match swap_extents_of_file(&holey) {
            Err(FiemapError::Rejected(why)) => assert!(why.contains("hole"), "{why}"),
            Err(FiemapError::Unsupported) => {}
            other => panic!("a file with a hole was accepted: {other:?}"),
        }
        // An empty file.
        let empty = dir.join("empty");
        std::fs::File::create(&empty).unwrap();
        assert!(swap_extents_of_file(&empty).is_err());
        assert!(matches!(swap_extents_of_file(dir.join("missing")), Err(FiemapError::Io(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
