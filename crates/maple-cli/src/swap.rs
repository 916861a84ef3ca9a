//! `maple swap-extents FILE`: the swap extents `swapon` would make of a
//! file: which run of swap pages lies in which run of disk blocks (in
//! pages), read with FIEMAP and merged as the kernel merges them.

use std::fmt::Write as _;

use crate::replay::Failure;

/// Runs the command; returns the text to print.
#[cfg(target_os = "linux")]
pub fn run(path: &str, json: bool) -> Result<String, Failure> {
    use maple_mm::swap::swap_extents_of_file;
    // FIEMAP on a directory answers for the directory's own blocks:
    // refuse it as swapon does.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(Failure {
                msg: format!("{path}: not a regular file (swapon takes a file or a device)"),
                code: 2,
            })
        }
        Err(e) => return Err(Failure { msg: format!("cannot read {path}: {}", crate::io_reason(&e)), code: 2 }),
        Ok(_) => {}
    }
    let (map, raw) = swap_extents_of_file(path).map_err(|e| {
        let msg = match e {
            maple_mm::swap::FiemapError::Io(e) => format!("cannot read {path}: {}", crate::io_reason(&e)),
            e => format!("{path}: {e}"),
        };
        Failure { msg, code: 2 }
    })?;
    if map.is_empty() {
        return Err(Failure {
            msg: format!("{path}: no whole page to swap to (the file is empty or shorter than a page)"),
            code: 2,
        });
    }
    if json {
        let extents: Vec<_> = map
            .iter()
            .map(|(page, pages, block)| serde_json::json!({ "first_page": page, "pages": pages, "first_block": block }))
            .collect();
        let out = serde_json::json!({
            "file": path,
            "fiemap_extents": raw,
            "pages": map.pages(),
            "tree_bytes": map.bytes(),
            "extents": extents,
        });
        return Ok(format!("{out}\n"));
    }
    let mut out = String::new();
    let n = |count: u64, one: &str, many: &str| format!("{count} {}", if count == 1 { one } else { many });
    let _ = writeln!(
        out,
        "{path}: {} of {} ({} as FIEMAP reports them); the tree takes {} bytes",
        n(map.len() as u64, "swap extent", "swap extents"),
        n(map.pages(), "page", "pages"),
        n(raw as u64, "extent", "extents"),
        map.bytes()
    );
    let _ = writeln!(out, "{:>5}  {:>21}  {:>21}  {:>10}", "ext", "swap pages", "disk blocks (pages)", "pages");
    for (i, (page, pages, block)) in map.iter().enumerate() {
        let _ = writeln!(
            out,
            "{i:>5}  {:>21}  {:>21}  {pages:>10}",
            format!("{page}..{}", page + pages - 1),
            format!("{block}..{}", block + pages - 1)
        );
    }
    Ok(out)
}

/// Runs the command (FIEMAP is Linux only).
#[cfg(not(target_os = "linux"))]
pub fn run(path: &str, _json: bool) -> Result<String, Failure> {
    Err(Failure { msg: format!("{path}: reading file extents (FIEMAP) needs Linux"), code: 2 })
}
