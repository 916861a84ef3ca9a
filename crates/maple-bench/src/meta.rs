//! The report's header: machine, OS, compiler, commit, date, load.

use crate::model::Meta;

/// Reads what can be read about this machine now (load average "before").
pub fn collect() -> Meta {
    Meta {
        cpu: cpu_model().unwrap_or_else(|| "unknown".into()),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: memory_gib().unwrap_or(0.0),
        os: os().unwrap_or_else(|| std::env::consts::OS.into()),
        rustc: env!("MAPLE_BENCH_RUSTC").to_string(),
        commit: git_commit().unwrap_or_else(|| "unknown".into()),
        date: utc_now(),
        load_before: load_average(),
        ..Meta::default()
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn cpu_model() -> Option<String> {
    let info = read("/proc/cpuinfo")?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

fn memory_gib() -> Option<f64> {
    let info = read("/proc/meminfo")?;
    let kb: f64 = info.lines().find(|l| l.starts_with("MemTotal:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0 / 1024.0)
}

fn os() -> Option<String> {
    let release = read("/etc/os-release")?;
    let name = release.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))?.trim_matches('"').to_string();
    let kernel = read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
    Some(format!("{name}, Linux {kernel}"))
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let mut commit = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        commit.push_str(" (with uncommitted changes)");
    }
    Some(commit)
}

/// The 1, 5 and 15 minute load averages (zeros where unknown).
pub fn load_average() -> [f64; 3] {
    let mut out = [0.0; 3];
    if let Some(s) = read("/proc/loadavg") {
        for (o, x) in out.iter_mut().zip(s.split_whitespace()) {
            *o = x.parse().unwrap_or(0.0);
        }
    }
    out
}

/// Now, as `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_date_is_plausible() {
        let d = super::utc_now();
        assert!(d.ends_with(" UTC") && d.len() == 20, "{d}");
        assert!(d.as_str() >= "2024-01-01", "{d}");
    }
}
