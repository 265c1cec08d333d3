//! Full-catalog resolution benchmark (`cargo bench --bench resolve_full`): one catalog
//! built with `capstan catalog add` from every bundle of community-operators-prod
//! (`benches/full_catalog.sh`), and one Subscription per package — 331 — in one namespace,
//! resolved together. Prints a markdown table: median, min and max of the runs
//! (`CAPSTAN_BENCH_RUNS`, default 5), the heap the resolver's index holds, the heap's peak above
//! the index during one resolution (counting allocator), and the process's peak resident memory.
//! Also the resident memory: the peak while resolving (`VmHWM`, reset after the catalog load with
//! `/proc/self/clear_refs`, after `malloc_trim` and one copy of the index into fresh memory), the
//! resident set before resolving and the live heap then, and the load average before and after the runs
//! (the machine may be shared), and the median CPU time of the resolving thread. Targets: ≤ 1 s (median) and ≤ 100 MiB (peak resident while resolving);
//! a second table says whether each is met. `CAPSTAN_BENCH_VERBOSE=1` prints the failures and passed-over heads.
//!
//! The catalog: `$CAPSTAN_FULL_CATALOG`, else the newest finished `$CAPSTAN_CACHE/full-catalog/*/catalog`
//! (default `~/.cache/capstan`). Without one the benchmark prints why and how to build it, and exits 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::parse;
use capstan::resolve::{CatalogIndex, CatalogInput, CatalogSourceKey, ResolveInput, SubscriptionRequest, resolve};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: delegates to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn catalog_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAPSTAN_FULL_CATALOG") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("CAPSTAN_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/capstan")))?;
    let mut done: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(cache.join("full-catalog"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.path().join("done").metadata().ok()?.modified().ok()?, e.path().join("catalog"))))
        .collect();
    done.sort();
    done.pop().map(|(_, p)| p)
}

/// Loads the catalog file by file, dropping the properties the resolver's index never reads
/// (`olm.bundle.object`, `olm.csv.metadata`: most of the 1.5 GB) as each file is parsed.
fn load(dir: &std::path::Path) -> DeclarativeConfig {
    let parts = parse::load_path_map(dir, |_, mut cfg| {
        for b in &mut cfg.bundles {
            b.properties.retain(|p| p.type_ != "olm.bundle.object" && p.type_ != "olm.csv.metadata");
        }
        cfg
    })
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut cfg = DeclarativeConfig::default();
    for p in parts {
        parse::merge(&mut cfg, p);
    }
    cfg
}

/// A `/proc/self/status` field in KiB (`VmHWM`: peak resident set, `VmRSS`: resident now).
fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// Resets the process's peak resident set (`VmHWM`) to its current size (Linux `clear_refs` 5).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`): the resolution's own work, which
/// other processes on a shared machine do not inflate as they do the wall time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    // As the `capstan` binary does first in `main`: without it, glibc keeps what the catalog
    // parse freed in its worker threads' arenas resident (`capstan::memory`).
    capstan::memory::keep_freed_memory_returned();
    let Some(dir) = catalog_dir().filter(|d| d.is_dir()) else {
        println!(
            "resolve_full: skipped — no full community-operators-prod catalog. Build it with \
             `bash benches/full_catalog.sh PATH` (PATH: a checkout of github.com/redhat-openshift-ecosystem/community-operators-prod \
             or its git directory), or set CAPSTAN_FULL_CATALOG to a catalog directory."
        );
        return;
    };
    let runs: usize = std::env::var("CAPSTAN_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let t = Instant::now();
    let cfg = load(&dir);
    let load_time = t.elapsed();
    let bundles = cfg.bundles.len();
    let before = LIVE.load(Ordering::Relaxed);
    let index = Arc::new(CatalogIndex::from_config(&cfg));
    let index_bytes = LIVE.load(Ordering::Relaxed) - before;
    let packages: Vec<String> = cfg.packages.iter().map(|p| p.name.clone()).collect();
    drop(cfg);
    let catalogs = vec![CatalogInput { key: CatalogSourceKey::new("olm", "community"), priority: 0, index }];
    let subscriptions: Vec<SubscriptionRequest> = packages
        .iter()
        .map(|p| SubscriptionRequest {
            name: p.clone(),
            namespace: "bench".into(),
            package: p.clone(),
            source: "community".into(),
            source_namespace: "olm".into(),
            ..Default::default()
        })
        .collect();
    let input = ResolveInput { catalogs, installed: vec![], subscriptions };
    // The catalog load's peak (1.5 GB of FBC parsed) is not the resolver's: give the freed parse
    // buffers back to the system and measure the resident set from here on.
    let load_peak_kib = status_kib("VmHWM:");
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe { libc::malloc_trim(0) };
    let rss_loaded_kib = status_kib("VmRSS:");
    // The index was built between the parse's allocations, whose freed remnants keep pages
    // resident: copy it once into fresh memory (as a process that receives a built index would
    // hold it), free the original and trim again; then measure from here.
    let ResolveInput { catalogs, installed, subscriptions } = input;
    let catalogs: Vec<CatalogInput> = catalogs
        .into_iter()
        .map(|c| CatalogInput { key: c.key, priority: c.priority, index: Arc::new((*c.index).clone()) })
        .collect();
    let input = ResolveInput { catalogs, installed, subscriptions };
    // SAFETY: as above.
    unsafe { libc::malloc_trim(0) };
    let live_before = LIVE.load(Ordering::Relaxed);
    let rss_before_kib = status_kib("VmRSS:");
    let peak_reset = reset_peak_rss();
    let load_before = load_average();
    let mut times: Vec<Duration> = Vec::new();
    let mut cpu_times: Vec<Duration> = Vec::new();
    let mut peak_above = 0isize;
    let mut outcome = (0, 0, 0);
    for _ in 0..runs {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let cpu = thread_cpu();
        let out = resolve(&input);
        times.push(t.elapsed());
        cpu_times.push(thread_cpu() - cpu);
        peak_above = peak_above.max(PEAK.load(Ordering::Relaxed) - base);
        let passed = out.resolved.iter().filter(|r| r.passed_over.is_some()).count();
        outcome = (out.resolved.len(), out.errors.len(), passed);
        if std::env::var_os("CAPSTAN_BENCH_VERBOSE").is_some() && times.len() == 1 {
            for e in &out.errors {
                eprintln!("failed {}: {}\n", e.subscription, e.message());
            }
            for r in out.resolved.iter().filter(|r| r.passed_over.is_some()) {
                eprintln!(
                    "{} got {}: {}\n",
                    r.subscription,
                    r.bundle,
                    r.passed_over.as_ref().map(|p| p.to_string()).unwrap_or_default()
                );
            }
        }
        drop(out);
    }
    times.sort();
    cpu_times.sort();
    let resolve_peak_kib = if peak_reset { status_kib("VmHWM:") } else { None };
    let load_after = load_average();
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let kib = |k: Option<u64>| k.map(|k| mib(k as f64 * 1024.0)).unwrap_or_else(|| "?".into());
    let median = times[times.len() / 2];
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "Full catalog {} ({} bundles, {} packages; loaded in {:.1} s)",
        dir.display(),
        bundles,
        packages.len(),
        load_time.as_secs_f64()
    );
    println!();
    println!(
        "| workload | runs | median | min | max | CPU time median | peak RSS while resolving | RSS before resolving (after the load → index compacted) | live heap before resolving | index heap | resolve heap peak (above index) | process peak RSS (catalog load) | bundles in plan | failed Subscriptions | older bundle picked |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} Subscriptions, one namespace | {runs} | {} | {} | {} | {} | {} | {} → {} | {} | {} | {} | {} | {} | {} | {} |",
        input.subscriptions.len(),
        ms(median),
        ms(times[0]),
        ms(times[times.len() - 1]),
        ms(cpu_times[cpu_times.len() / 2]),
        kib(resolve_peak_kib),
        kib(rss_loaded_kib),
        kib(rss_before_kib),
        mib(live_before as f64),
        mib(index_bytes as f64),
        mib(peak_above as f64),
        kib(load_peak_kib),
        outcome.0,
        outcome.1,
        outcome.2
    );
    println!();
    println!("| target | measured | |");
    println!("|---|---:|---|");
    println!("| time, median ≤ 1 s | {} | {} |", ms(median), met(median <= Duration::from_secs(1)));
    let rss_ok = resolve_peak_kib.is_some_and(|k| k <= 100 * 1024);
    println!("| memory, peak RSS while resolving ≤ 100 MiB | {} | {} |", kib(resolve_peak_kib), met(rss_ok));
    println!();
    println!(
        "Load average (1, 5, 15 min; {} cores): {load_before} before the runs, {load_after} after.",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
}
