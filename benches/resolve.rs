//! Resolver benchmark (`cargo bench --bench resolve`): prints a markdown table.
//!
//! Catalogs:
//! - generated: `catalog::generate::generate(500, 20, 5, 42)` — 10,000 bundles in 500 packages,
//!   replaces chains with skips and skipRanges, a second channel, 1–3 APIs per package, dependency
//!   chains up to depth 5 (alternating `olm.package.required` and `olm.gvk.required`);
//! - corpus: `../shared/corpus/community-operators-prod/catalogs/v4.20` (37 packages, real FBC).
//!
//! Measured: p50/p99 time to resolve one Subscription with its transitive dependencies; time to
//! resolve 1,000 Subscriptions across 100 namespaces; heap held by the loaded index vs the
//! catalog's JSON size (counting allocator). Targets of the resolver benchmark: p50 ≤ 5 ms, 1,000
//! Subscriptions ≤ 1 s, index ≤ 3× JSON. OLM v0's resolver cannot be run outside a cluster, so no
//! peer is measured here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use capstan::catalog::model::DeclarativeConfig;
use capstan::resolve::{CatalogIndex, CatalogInput, CatalogSourceKey, ResolveInput, SubscriptionRequest, resolve};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tiny deterministic PRNG (xorshift) so runs are comparable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const PACKAGES: usize = 500;
const BUNDLES_PER_PACKAGE: usize = 20;
const DEPTH: usize = 5;

/// The generated catalog: `catalog::generate` (500 packages × 20 bundles, chains up to depth 5).
fn generated() -> DeclarativeConfig {
    capstan::catalog::generate::generate(PACKAGES, BUNDLES_PER_PACKAGE, DEPTH, 42)
}

fn shared() -> PathBuf {
    if let Ok(p) = std::env::var("CAPSTAN_SHARED") {
        return PathBuf::from(p);
    }
    let sibling = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if sibling.exists() { sibling } else { PathBuf::from("/work/shared") }
}

/// Loads the corpus FBC (multi-document YAML files) with serde.
fn corpus() -> DeclarativeConfig {
    let dir = shared().join("corpus/community-operators-prod/catalogs/v4.20");
    let mut cfg = DeclarativeConfig::default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path().join("catalog.yaml")))
        .filter(|p| p.exists())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read catalog");
        for doc in serde_norway::Deserializer::from_str(&text) {
            let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            match v["schema"].as_str() {
                Some("olm.package") => cfg.packages.push(serde_json::from_value(v).expect("package")),
                Some("olm.channel") => cfg.channels.push(serde_json::from_value(v).expect("channel")),
                Some("olm.bundle") => cfg.bundles.push(serde_json::from_value(v).expect("bundle")),
                Some("olm.deprecations") => cfg.deprecations.push(serde_json::from_value(v).expect("deprecations")),
                _ => cfg.others.push(v),
            }
        }
    }
    cfg
}

/// JSON size of the catalog: every blob as one JSON document, as `opm render` writes it.
fn json_size(cfg: &DeclarativeConfig) -> usize {
    let mut n = 0;
    for p in &cfg.packages {
        n += serde_json::to_vec(p).map(|v| v.len() + 1).unwrap_or(0);
    }
    for c in &cfg.channels {
        n += serde_json::to_vec(c).map(|v| v.len() + 1).unwrap_or(0);
    }
    for b in &cfg.bundles {
        n += serde_json::to_vec(b).map(|v| v.len() + 1).unwrap_or(0);
    }
    for d in &cfg.deprecations {
        n += serde_json::to_vec(d).map(|v| v.len() + 1).unwrap_or(0);
    }
    for o in &cfg.others {
        n += serde_json::to_vec(o).map(|v| v.len() + 1).unwrap_or(0);
    }
    n
}

fn sub(ns: &str, name: &str, package: &str) -> SubscriptionRequest {
    SubscriptionRequest {
        name: name.into(),
        namespace: ns.into(),
        package: package.into(),
        channel: None,
        source: "cat".into(),
        source_namespace: "olm".into(),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

struct Row {
    catalog: &'static str,
    bundles: usize,
    roots: usize,
    p50: Duration,
    p99: Duration,
    deps: f64,
    thousand: Duration,
    index_bytes: isize,
    json_bytes: usize,
}

fn measure(name: &'static str, cfg: DeclarativeConfig, roots: &[String]) -> Row {
    let json_bytes = json_size(&cfg);
    let bundles = cfg.bundles.len();
    let before = LIVE.load(Ordering::Relaxed);
    let index = Arc::new(CatalogIndex::from_config(&cfg));
    let index_bytes = LIVE.load(Ordering::Relaxed) - before;
    drop(cfg);
    let catalogs = vec![CatalogInput { key: CatalogSourceKey::new("olm", "cat"), priority: 0, index }];
    // Packages whose Subscription resolves (some corpus packages need packages outside the snapshot).
    let roots: Vec<String> = roots
        .iter()
        .filter(|r| {
            let input =
                ResolveInput { catalogs: catalogs.clone(), installed: vec![], subscriptions: vec![sub("ns", "s", r)] };
            resolve(&input).errors.is_empty()
        })
        .cloned()
        .collect();
    let root_count = roots.len();

    // One Subscription with its transitive dependencies.
    let mut rng = Rng(0x5eed);
    let mut times = Vec::new();
    let mut dep_count = 0usize;
    let runs = 1000;
    for _ in 0..runs {
        let root = &roots[rng.below(roots.len())];
        let input =
            ResolveInput { catalogs: catalogs.clone(), installed: vec![], subscriptions: vec![sub("ns", "s", root)] };
        let t = Instant::now();
        let out = resolve(&input);
        times.push(t.elapsed());
        assert!(out.errors.is_empty(), "{name}: {root} failed: {:?}", out.errors);
        dep_count += out.resolved.len() - 1;
    }
    times.sort();

    // 1,000 Subscriptions across 100 namespaces (10 distinct packages per namespace).
    let mut subs = Vec::new();
    for n in 0..100 {
        let mut picked: Vec<&String> = Vec::new();
        while picked.len() < 10.min(roots.len()) {
            let r = &roots[rng.below(roots.len())];
            if !picked.contains(&r) {
                picked.push(r);
            }
        }
        for (i, r) in picked.iter().enumerate() {
            subs.push(sub(&format!("ns-{n:03}"), &format!("s{i}"), r));
        }
    }
    let input = ResolveInput { catalogs: catalogs.clone(), installed: vec![], subscriptions: subs };
    let mut batch = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let out = resolve(&input);
        batch.push(t.elapsed());
        assert_eq!(out.errors.len(), 0, "{name}: {:?}", out.errors.first());
    }
    batch.sort();
    Row {
        catalog: name,
        bundles,
        roots: root_count,
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        deps: dep_count as f64 / runs as f64,
        thousand: batch[batch.len() / 2],
        index_bytes,
        json_bytes,
    }
}

fn main() {
    let generated_cfg = generated();
    let generated_roots: Vec<String> = generated_cfg.packages.iter().map(|p| p.name.clone()).collect();
    let gen_row = measure("generated (500 packages)", generated_cfg, &generated_roots);

    let corpus_cfg = corpus();
    let corpus_roots: Vec<String> = corpus_cfg.packages.iter().map(|p| p.name.clone()).collect();
    let corpus_row = measure("corpus v4.20 (37 packages)", corpus_cfg, &corpus_roots);

    println!(
        "| catalog | bundles | packages subscribed | resolve 1 Subscription p50 | p99 | deps per Subscription | 1,000 Subscriptions / 100 namespaces (median of 5) | index heap | catalog JSON | index / JSON |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in [gen_row, corpus_row] {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} | {} | {:.1} MiB | {:.1} MiB | {:.2}× |",
            r.catalog,
            r.bundles,
            r.roots,
            ms(r.p50),
            ms(r.p99),
            r.deps,
            ms(r.thousand),
            r.index_bytes as f64 / 1048576.0,
            r.json_bytes as f64 / 1048576.0,
            r.index_bytes as f64 / r.json_bytes as f64
        );
    }
    println!();
    println!(
        "Targets: p50 ≤ 5 ms; 1,000 Subscriptions ≤ 1 s; index ≤ 3× JSON. No peer measured (OLM v0's resolver runs only inside its controller)."
    );
}
