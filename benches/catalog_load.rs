//! Benchmark: load + validate File-Based Catalogs, capstan against `opm validate`, in one run.
//!
//! Workloads: (a) every catalog of `../shared/corpus/community-operators-prod/catalogs/v4.20`
//! (one directory, YAML), (b) `catalog::generate::generate(500, 20, 5, 42)` — 10,000 bundles in
//! 500 packages — written as JSON in opm's layout to a temporary directory.
//!
//! Each tool runs as a child process (`capstan catalog validate DIR`, `opm validate DIR`) so that
//! both pay process start-up and both are measured the same way: wall time from spawn to exit,
//! and peak resident memory from the kernel's `ru_maxrss` of that child (`wait4`). The table
//! gives medians over `CAPSTAN_BENCH_RUNS` runs (default 7) and the ratios; targets: capstan at
//! least 5x faster, under a third of opm's peak memory.
//!
//! opm is found at `$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`, else on `PATH`; when
//! absent, the opm columns are skipped with a note. Run: `cargo bench --bench catalog_load`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan::catalog::{generate, parse};

/// `$CAPSTAN_SHARED`, else `<repo>/../shared`, else `/work/shared`.
fn shared() -> PathBuf {
    if let Some(p) = std::env::var_os("CAPSTAN_SHARED") {
        return PathBuf::from(p);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if sibling.exists() { sibling } else { PathBuf::from("/work/shared") }
}

fn find_opm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAPSTAN_OPM") {
        return Some(PathBuf::from(p));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".cache/capstan/peers/bin/opm");
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("opm")).find(|p| p.is_file())
    })
}

/// One run of a child process: wall time, peak RSS in KiB, and whether it exited 0.
fn run_child(program: &Path, args: &[&str]) -> (Duration, u64, bool) {
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it for the child we spawned and reaps it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(r, pid, "wait4 failed for {}", program.display());
    std::mem::forget(child); // already reaped
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (elapsed, usage.ru_maxrss as u64, ok)
}

fn median<T: Copy + Ord>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

struct Measured {
    time: Duration,
    rss_kib: u64,
}

fn measure(program: &Path, args: &[&str], runs: usize) -> Option<Measured> {
    let mut times = Vec::with_capacity(runs);
    let mut rss = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (t, r, ok) = run_child(program, args);
        if !ok {
            eprintln!("note: {} {} failed; not counted", program.display(), args.join(" "));
            return None;
        }
        times.push(t);
        rss.push(r);
    }
    Some(Measured { time: median(times), rss_kib: median(rss) })
}

fn dir_size(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument, if any, selects workloads by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let runs: usize = std::env::var("CAPSTAN_BENCH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(7).max(1);
    let capstan = PathBuf::from(env!("CARGO_BIN_EXE_capstan"));
    let opm = find_opm();

    let corpus = shared().join("corpus/community-operators-prod/catalogs/v4.20");
    let tmp = tempfile::tempdir().expect("temp dir");
    let generated = tmp.path().join("generated");
    let cfg = generate::generate(500, 20, 5, 42);
    let bundles = cfg.bundles.len();
    parse::write_dir(&cfg, &generated).expect("write generated catalog");
    drop(cfg);

    let workloads: Vec<(String, PathBuf)> = vec![
        ("community-operators v4.20 (37 packages, YAML)".to_string(), corpus),
        (format!("generated: {bundles} bundles in 500 packages (JSON)"), generated),
    ];

    println!("## Catalog load and validate\n");
    println!("Median of {runs} runs per cell; each run is a child process (`capstan catalog validate DIR` / `opm validate DIR`); peak memory is the child's `ru_maxrss`.\n");
    match &opm {
        Some(p) => {
            let version = Command::new(p).arg("version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            println!("opm: `{}` ({})\n", p.display(), version.unwrap_or_default());
        }
        None => println!("note: opm not found ($CAPSTAN_OPM, ~/.cache/capstan/peers/bin/opm, PATH); opm columns skipped.\n"),
    }
    println!("| workload | size on disk | capstan time | opm time | speedup | capstan peak RSS | opm peak RSS | memory ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, dir) in &workloads {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let d = dir.to_str().expect("utf-8 path");
        let size = dir_size(dir);
        let Some(c) = measure(&capstan, &["catalog", "validate", d], runs) else { continue };
        let o = opm.as_ref().and_then(|p| measure(p, &["validate", d], runs));
        let (ot, speed, orss, ratio) = match &o {
            Some(o) => (
                ms(o.time),
                format!("{:.1}x", o.time.as_secs_f64() / c.time.as_secs_f64()),
                mib(o.rss_kib),
                format!("{:.2}", c.rss_kib as f64 / o.rss_kib as f64),
            ),
            None => ("—".into(), "—".into(), "—".into(), "—".into()),
        };
        println!(
            "| {name} | {:.1} MiB | {} | {ot} | {speed} | {} | {orss} | {ratio} |",
            size as f64 / (1024.0 * 1024.0),
            ms(c.time),
            mib(c.rss_kib)
        );
    }
    println!("\nTargets: speedup >= 5x, memory ratio (capstan / opm) < 0.33.");
}
