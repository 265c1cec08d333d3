//! Benchmark of discovery: the catalog content endpoint's throughput and the memory of
//! a capstan process holding catalogs.
//!
//! Workloads: every catalog of `../shared/corpus/community-operators-prod/catalogs/v4.20`, each as
//! its own CatalogSource (37), plus `catalog::generate::generate(500, 20, 5, 42)` (10,000 bundles)
//! as one more. They are served by a child `capstan catalog serve --listen 127.0.0.1:0` (the
//! content endpoint the controller serves, without the controller: the controller does not load
//! catalogs into it yet); its resident memory (`VmRSS`, `/proc/PID/status`) is read once loaded
//! and again after the load. Throughput: `CLIENTS` concurrent HTTP/1.1 clients on loopback for
//! `CAPSTAN_BENCH_SECS` seconds (default 5) per row, each request read to the end.
//! In-process: time to build the content buffer and the PackageManifests of the corpus.
//! Run: `cargo bench --bench discovery`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use capstan::catalog::validated::{IndexOptions, ValidatedCatalog};
use capstan::catalog::{generate, parse};
use capstan::discovery::content::CatalogContent;
use capstan::discovery::packagemanifest::packages_of;

const CLIENTS: usize = 4;

fn shared() -> PathBuf {
    if let Some(p) = std::env::var_os("CAPSTAN_SHARED") {
        return PathBuf::from(p);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if sibling.exists() { sibling } else { PathBuf::from("/work/shared") }
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let secs: u64 = std::env::var("CAPSTAN_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let corpus = shared().join("corpus/community-operators-prod/catalogs/v4.20");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(&corpus).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();

    // In-process build cost over the corpus.
    let started = Instant::now();
    let (mut bytes, mut pkgs) = (0usize, 0usize);
    for d in &dirs {
        let cfg = parse::load_path(d).unwrap();
        let content = CatalogContent::new(&cfg, "sha256:x", SystemTime::now());
        bytes += content.size_bytes();
        let idx = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .unwrap();
        pkgs += packages_of(&idx).0.len();
    }
    let build = started.elapsed();

    let gen_dir = tempfile::tempdir().unwrap();
    parse::write_dir(&generate::generate(500, 20, 5, 42), gen_dir.path()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capstan"));
    cmd.args(["catalog", "serve", "--listen", "127.0.0.1:0"]);
    for (i, d) in dirs.iter().enumerate() {
        cmd.arg("--catalog").arg(format!("olm/c{i}={}", d.display()));
    }
    cmd.arg("--catalog").arg(format!("olm/generated={}", gen_dir.path().display()));
    let t0 = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let load = t0.elapsed();
    let base = line.trim().rsplit(' ').next().unwrap().to_string();
    let rss_loaded = rss_kib(child.id());

    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let size = |d: &PathBuf| {
        walkdir::WalkDir::new(d)
            .into_iter()
            .filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum::<u64>()
    };
    let largest = (0..dirs.len()).max_by_key(|i| size(&dirs[*i])).unwrap();
    let largest_name = dirs[largest].file_name().unwrap().to_string_lossy().into_owned();
    let rows = [
        ("generated (10,000 bundles) /api/v1/all", format!("{base}/catalogs/olm/generated/api/v1/all"), false),
        ("generated /api/v1/all, gzip", format!("{base}/catalogs/olm/generated/api/v1/all"), true),
        (
            "generated metas?package=pkg-0007",
            format!("{base}/catalogs/olm/generated/api/v1/metas?package=pkg-0007"),
            false,
        ),
        (
            "generated metas?schema=olm.package, gzip",
            format!("{base}/catalogs/olm/generated/api/v1/metas?schema=olm.package"),
            true,
        ),
        (
            &*format!("corpus, largest ({largest_name}) /api/v1/all"),
            format!("{base}/catalogs/olm/c{largest}/api/v1/all"),
            false,
        ),
    ];
    println!("## Discovery benchmark\n");
    println!(
        "In process: content buffers and PackageManifests of the {} corpus catalogs ({pkgs} packages, {:.1} MiB of JSON lines) built in {:.0} ms.\n",
        dirs.len(),
        bytes as f64 / 1048576.0,
        build.as_secs_f64() * 1000.0
    );
    println!(
        "`capstan catalog serve` with {} catalogs (corpus + generated): loaded in {:.2} s, resident memory {:.1} MiB.\n",
        dirs.len() + 1,
        load.as_secs_f64(),
        rss_loaded as f64 / 1024.0
    );
    println!("| request ({CLIENTS} clients, {secs} s) | requests/s | body MiB/s (as sent) | bytes per answer |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, url, gzip) in rows {
        let (n, b) = rt.block_on(async {
            let client = reqwest::Client::new();
            let reqs = Arc::new(AtomicU64::new(0));
            let total = Arc::new(AtomicU64::new(0));
            let end = Instant::now() + Duration::from_secs(secs);
            let mut tasks = Vec::new();
            for _ in 0..CLIENTS {
                let (client, url, reqs, total) = (client.clone(), url.clone(), reqs.clone(), total.clone());
                tasks.push(tokio::spawn(async move {
                    while Instant::now() < end {
                        let mut r = client.get(&url);
                        if gzip {
                            r = r.header("accept-encoding", "gzip");
                        }
                        let body = r.send().await.unwrap().bytes().await.unwrap();
                        reqs.fetch_add(1, Ordering::Relaxed);
                        total.fetch_add(body.len() as u64, Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            (reqs.load(Ordering::Relaxed), total.load(Ordering::Relaxed))
        });
        println!(
            "| {name} | {:.0} | {:.0} | {} |",
            n as f64 / secs as f64,
            b as f64 / 1048576.0 / secs as f64,
            b / n.max(1)
        );
    }
    println!("\nResident memory of the server after the runs: {:.1} MiB.", rss_kib(child.id()) as f64 / 1024.0);
    let _ = child.kill();
    let _ = child.wait();
}
