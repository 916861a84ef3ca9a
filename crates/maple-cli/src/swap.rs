//! `maple swap-extents FILE`: the swap extents `swapon` would make of a
//! file, and how fast each design looks pages up in them.

use std::fmt::Write as _;

use crate::{replay::Failure, report_swap};

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Runs the command; returns the text to print.
#[cfg(target_os = "linux")]
pub fn run(path: &str, json: bool) -> Result<String, Failure> {
    use maple_mm::swap::{swap_extents_of_file, FiemapError};
    let (map, raw) = swap_extents_of_file(path).map_err(|e| Failure {
        msg: format!("{path}: {e}"),
        code: if matches!(e, FiemapError::Io(_)) { 2 } else { 1 },
    })?;
    let mut table = String::new();
    let rows = report_swap::lookup_table(&map, &[1, 2], 0.25, &mut table);
    if json {
        let mut out = String::new();
        let _ = write!(
            out,
            "{{\"file\":{},\"fiemap_extents\":{raw},\"extents\":{},\"pages\":{},\"tree_bytes\":{},\"lookups_per_second\":[",
            json_str(path),
            map.len(),
            map.pages(),
            map.bytes()
        );
        for (i, (t, l, o, m)) in rows.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"threads\":{t},\"list_cache\":{l:.0},\"ordered_map\":{o:.0},\"maple\":{m:.0}}}",
                if i > 0 { "," } else { "" }
            );
        }
        out.push_str("]}\n");
        return Ok(out);
    }
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
    let _ = (json_str, report_swap::synthetic);
    Err(Failure { msg: format!("{path}: reading file extents (FIEMAP) needs Linux"), code: 1 })
}
