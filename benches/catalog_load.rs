//! Benchmark: load + validate File-Based Catalogs, capstan against `opm validate`, in one run.
//!
//! Workloads: (a) every catalog of `../shared/corpus/community-operators-prod/catalogs/v4.20`
//! (one directory, YAML), (b) `catalog::generate::generate(500, 20, 5, 42)` — 10,000 bundles in
//! 500 packages — written as JSON in opm's layout to a temporary directory.
//!
//! Each tool runs as a child process (`capstan catalog validate DIR`, `opm validate DIR`) so that
//! both pay process start-up and both are measured the same way: wall time from spawn to exit,
//! CPU time (user + system) and peak resident memory from the kernel's rusage of that child
//! (`wait4`). Runs alternate between the two tools so that both see the same machine load. The
//! table gives medians over `CAPSTAN_BENCH_RUNS` runs (default 7) and the ratios; targets:
//! capstan at least 5x faster, under a third of opm's peak memory.
//!
//! opm is found at `$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`, else on `PATH`; when
//! absent, the opm columns are skipped with a note. Run: `cargo bench --bench catalog_load`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan::catalog::{generate, parse};

/// Set (to a directory) when this binary runs as the generator child.
const GENERATE_ENV: &str = "CAPSTAN_BENCH_GENERATE_INTO";

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
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("opm")).find(|p| p.is_file()))
}

/// One run of a child process.
struct Run {
    wall: Duration,
    cpu: Duration,
    rss_kib: u64,
    ok: bool,
}

fn run_child(program: &Path, args: &[&str]) -> Run {
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
    let wall = start.elapsed();
    assert_eq!(r, pid, "wait4 failed for {}", program.display());
    std::mem::forget(child); // already reaped
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        rss_kib: usage.ru_maxrss as u64,
        ok: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    }
}

fn median<T: Copy + Ord>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

/// Medians of one tool on one workload.
struct Measured {
    wall: Duration,
    cpu: Duration,
    rss_kib: u64,
}

fn summarize(runs: &[Run]) -> Measured {
    Measured {
        wall: median(runs.iter().map(|r| r.wall).collect()),
        cpu: median(runs.iter().map(|r| r.cpu).collect()),
        rss_kib: median(runs.iter().map(|r| r.rss_kib).collect()),
    }
}

/// Runs capstan and (if present) opm alternately, so that both see the same machine load.
fn measure_pair(
    capstan: (&Path, &[&str]),
    opm: Option<(&Path, &[&str])>,
    runs: usize,
) -> (Option<Measured>, Option<Measured>) {
    let mut c_runs = Vec::with_capacity(runs);
    let mut o_runs = Vec::with_capacity(runs);
    let mut o_ok = opm.is_some();
    for _ in 0..runs {
        let r = run_child(capstan.0, capstan.1);
        if !r.ok {
            eprintln!("note: {} {} failed", capstan.0.display(), capstan.1.join(" "));
            return (None, None);
        }
        c_runs.push(r);
        if let (Some((p, a)), true) = (opm, o_ok) {
            let r = run_child(p, a);
            if r.ok {
                o_runs.push(r);
            } else {
                eprintln!("note: {} {} failed; opm column skipped", p.display(), a.join(" "));
                o_ok = false;
            }
        }
    }
    (Some(summarize(&c_runs)), (o_ok && !o_runs.is_empty()).then(|| summarize(&o_runs)))
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

    // The generated catalog is written by a child process (this binary again): a process that
    // spawns a child passes its own peak RSS on to the child's `ru_maxrss` (the kernel accounts
    // the pre-exec memory image at exec), so the measuring process must stay small.
    if let Some(dir) = std::env::var_os(GENERATE_ENV) {
        let cfg = generate::generate(500, 20, 5, 42);
        parse::write_dir(&cfg, Path::new(&dir)).expect("write generated catalog");
        return;
    }
    let corpus = shared().join("corpus/community-operators-prod/catalogs/v4.20");
    let tmp = tempfile::tempdir().expect("temp dir");
    let generated = tmp.path().join("generated");
    let status = Command::new(std::env::current_exe().expect("bench executable"))
        .env(GENERATE_ENV, &generated)
        .status()
        .expect("run the generator");
    assert!(status.success(), "generating the catalog failed");
    let bundles = parse::catalog_files(&generated).map_or(0, |files| {
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_default().matches("\"schema\": \"olm.bundle\"").count())
            .sum()
    });

    let workloads: Vec<(String, PathBuf)> = vec![
        ("community-operators v4.20 (37 packages, YAML)".to_string(), corpus),
        (format!("generated: {bundles} bundles in 500 packages (JSON)"), generated),
    ];

    println!("## Catalog load and validate\n");
    println!(
        "Median of {runs} runs per cell; each run is a child process (`capstan catalog validate DIR` / `opm validate DIR`) started from the same small process; peak memory is the child's `ru_maxrss` (`wait4`).\n"
    );
    match &opm {
        Some(p) => {
            let version = Command::new(p)
                .arg("version")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            println!("opm: `{}` ({})\n", p.display(), version.unwrap_or_default());
        }
        None => {
            println!("note: opm not found ($CAPSTAN_OPM, ~/.cache/capstan/peers/bin/opm, PATH); opm columns skipped.\n")
        }
    }
    println!(
        "| workload | size on disk | capstan wall | opm wall | speedup (wall) | capstan CPU | opm CPU | speedup (CPU) | capstan peak RSS | opm peak RSS | memory ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, dir) in &workloads {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let d = dir.to_str().expect("utf-8 path");
        let size = dir_size(dir);
        let c_args = ["catalog", "validate", d];
        let o_args = ["validate", d];
        let (Some(c), o) = measure_pair((&capstan, &c_args), opm.as_deref().map(|p| (p, &o_args[..])), runs) else {
            continue;
        };
        let dash = || "—".to_string();
        let (ow, sw, oc, sc, orss, ratio) = match &o {
            Some(o) => (
                ms(o.wall),
                format!("{:.1}x", o.wall.as_secs_f64() / c.wall.as_secs_f64()),
                ms(o.cpu),
                format!("{:.1}x", o.cpu.as_secs_f64() / c.cpu.as_secs_f64()),
                mib(o.rss_kib),
                format!("{:.2}", c.rss_kib as f64 / o.rss_kib as f64),
            ),
            None => (dash(), dash(), dash(), dash(), dash(), dash()),
        };
        println!(
            "| {name} | {:.1} MiB | {} | {ow} | {sw} | {} | {oc} | {sc} | {} | {orss} | {ratio} |",
            size as f64 / (1024.0 * 1024.0),
            ms(c.wall),
            ms(c.cpu),
            mib(c.rss_kib)
        );
    }
    println!("\nTargets: speedup >= 5x, memory ratio (capstan / opm) < 0.33.");
}
