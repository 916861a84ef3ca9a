//! `maple swap-extents FILE`: the swap extents `swapon` would make of a
//! file, and how fast each design looks pages up in them.

use std::fmt::Write as _;

use crate::replay::Failure;

/// Runs the command; returns the text to print.
#[cfg(target_os = "linux")]
pub fn run(path: &str, json: bool) -> Result<String, Failure> {
    use maple_mm::swap::{swap_extents_of_file, FiemapError};
    let (map, raw) = swap_extents_of_file(path).map_err(|e| Failure {
        msg: format!("{path}: {e}"),
        code: if matches!(e, FiemapError::Io(_)) { 2 } else { 1 },
    })?;
    let rows = maple_bench::experiments::lookup_rates(&map, &[1, 2], 0.25);
    if json {
        let out = serde_json::json!({
            "file": path,
            "fiemap_extents": raw,
            "extents": map.len(),
            "pages": map.pages(),
            "tree_bytes": map.bytes(),
            "lookups_per_second": rows.iter().map(|&(t, l, o, m)| serde_json::json!({
                "threads": t, "list_cache": l.round(), "ordered_map": o.round(), "maple": m.round()
            })).collect::<Vec<_>>(),
        });
        return Ok(format!("{out}\n"));
    }
    let table = maple_bench::render::markdown_table(&maple_bench::experiments::lookup_table("lookups", &rows));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{path}: {raw} extents as FIEMAP reports them, {} after merging, {} pages",
        map.len(),
        map.pages()
    );
    let _ = writeln!(out, "tree: {} bytes ({:.1} per extent)\n", map.bytes(), map.bytes() as f64 / map.len() as f64);
    let _ = writeln!(out, "random page lookups:\n");
    out.push_str(&table);
    Ok(out)
}

/// Runs the command (FIEMAP is Linux only).
#[cfg(not(target_os = "linux"))]
pub fn run(path: &str, _json: bool) -> Result<String, Failure> {
    Err(Failure { msg: format!("{path}: reading file extents (FIEMAP) needs Linux"), code: 1 })
}
