//! End-to-end tests of the `maple-report` binary.

use std::process::{Command, Output};

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_maple-report")).args(args).output().unwrap()
}

#[test]
fn report_writes_its_files_compares_and_updates_docs() {
    let dir = std::env::temp_dir().join(format!("maple-bench-report-{}", std::process::id()));
    let out_dir = dir.to_str().unwrap().to_string();
    let out = report(&["--tiny", "--only", "kernel,swap", "--out", &out_dir]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("faster than the kernel's C") && stdout.contains("[swap]"), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.lines().last().unwrap().contains("report.md, report.html, report.json"), "{stderr}");
    for f in ["report.md", "report.html", "report.json", "plots/swap-2000.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    // Against itself, and a document's marked block refreshed.
    let old = dir.join("old.json");
    std::fs::rename(dir.join("report.json"), &old).unwrap();
    let doc = dir.join("doc.md");
    std::fs::write(&doc, "# x\n<!-- maple-report:begin kernel -->\nstale\n<!-- maple-report:end kernel -->\n").unwrap();
    let out = report(&[
        "--tiny",
        "--only",
        "kernel",
        "--out",
        &out_dir,
        "--compare",
        old.to_str().unwrap(),
        "--update-docs",
        doc.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stdout).unwrap().contains("new/old"));
    assert!(dir.join("compare.md").exists());
    let doc_text = std::fs::read_to_string(&doc).unwrap();
    assert!(!doc_text.contains("stale") && doc_text.contains("| slot store |"), "{doc_text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_rejects_bad_arguments_before_measuring() {
    let out = report(&["--only", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown section \"nosuch\""));
    let bad = std::env::temp_dir().join(format!("maple-bad-{}.json", std::process::id()));
    std::fs::write(&bad, "{\"meta\": 3").unwrap();
    let out = report(&["--compare", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a maple report") && err.contains(bad.to_str().unwrap()), "{err}");
    assert!(out.stdout.is_empty(), "nothing measured");
    std::fs::remove_file(&bad).unwrap();
    let out = report(&["--quick", "--full"]);
    assert_eq!(out.status.code(), Some(2));
    // An output directory that cannot be made fails at once, not after
    // the measuring.
    let file = std::env::temp_dir().join(format!("maple-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, "").unwrap();
    let under = file.join("out");
    let out = report(&["--tiny", "--only", "kernel", "--out", under.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot create") && err.contains(under.to_str().unwrap()), "{err}");
    assert!(!err.contains("maple-report ["), "measured before failing: {err}");
    std::fs::remove_file(&file).unwrap();
}

/// The report's memory probe, run as the report runs it (a fresh process
/// told what to build): the resident growth it measures is at least the
/// bytes of the nodes it counts and not far above (the allocator's and the
/// slab's overheads are a few per cent; a fresh process reuses nothing).
#[test]
fn the_memory_probe_measures_a_fresh_tree() {
    let n = 200_000u64;
    let out = Command::new(env!("CARGO_BIN_EXE_maple-report"))
        .env(maple_bench::resident::PROBE_ENV, format!("random:{n}"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    if text.trim() == "unmeasured" && std::fs::metadata("/proc/self/status").is_err() {
        return; // no /proc on this system
    }
    // Resident bytes per range, and the share of them in huge pages.
    let figures: Vec<f64> =
        text.split_whitespace().map(|f| f.parse().unwrap_or_else(|_| panic!("probe printed {text:?}"))).collect();
    let [resident, huge_share] = figures[..] else { panic!("probe printed {text:?}") };
    assert!((0.0..=1.0).contains(&huge_share), "huge-page share {huge_share}");
    let mut t = maple_tree::MapleTree::with_gaps();
    for i in maple_bench::workloads::order(n, true) {
        let (f, l) = maple_bench::workloads::range(i);
        t.insert_range(f..=l, maple_bench::workloads::u(i)).unwrap();
    }
    let counted = t.stats().bytes_per_entry();
    assert!(
        resident >= counted && resident < counted * 1.5,
        "resident {resident} vs counted {counted} bytes per range"
    );
    // A probe asked for nonsense says so instead of guessing.
    let out = Command::new(env!("CARGO_BIN_EXE_maple-report"))
        .env(maple_bench::resident::PROBE_ENV, "sideways:10")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "unmeasured");
}
