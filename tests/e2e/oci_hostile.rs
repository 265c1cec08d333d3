//! Hostile images through the CLI: each image is built by the
//! test, pushed to the local registry (or served by a fake registry on loopback that lies about
//! sizes and digests), and pulled by `capstan bundle pull`, `capstan catalog validate IMAGE` and
//! `capstan catalog render IMAGE`. Every one must be refused with exit 2 and a message naming the
//! image, the layer (or blob) digest and the entry; canary files beside the destination and in
//! `$TMPDIR` must be unchanged; the CLI's peak memory (`VmHWM` of the child) must stay under
//! [`MEMORY_CAP_MIB`].

use std::collections::{BTreeMap, HashMap};
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use capstan::oci::cache::sha256_digest;
use capstan::oci::layer::{MEDIA_TYPE_CONFIG, MEDIA_TYPE_LAYER_GZIP, image_config};
use capstan::oci::{Blob, ClientConfig, ImageToPush, Registry, parse_reference};
use flate2::Compression;
use flate2::write::GzEncoder;

/// Peak resident memory a refused pull may use, in MiB. docs/deploy.md: a pull holds the
/// compressed image in memory and streams files to disk; these images are a few MiB compressed.
const MEMORY_CAP_MIB: u64 = 200;

const LABEL_CONFIGS: &str = "operators.operatorframework.io.index.configs.v1";
const LABEL_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";

// ---------------------------------------------------------------- building hostile layers

/// A tar stream built entry by entry with raw names (the tar crate's `set_path` refuses `..`).
struct Tar(tar::Builder<GzEncoder<Vec<u8>>>);

impl Tar {
    fn new() -> Self {
        Tar(tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast())))
    }

    fn raw(mut self, kind: tar::EntryType, path: &str, link: &str, size: u64, data: impl std::io::Read) -> Self {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        self.0.append(&h, data).unwrap();
        self
    }

    fn file(self, path: &str, data: &[u8]) -> Self {
        self.raw(tar::EntryType::Regular, path, "", data.len() as u64, data)
    }

    fn dir(self, path: &str) -> Self {
        self.raw(tar::EntryType::Directory, path, "", 0, std::io::empty())
    }

    fn symlink(self, path: &str, target: &str) -> Self {
        self.raw(tar::EntryType::Symlink, path, target, 0, std::io::empty())
    }

    fn hardlink(self, path: &str, target: &str) -> Self {
        self.raw(tar::EntryType::Link, path, target, 0, std::io::empty())
    }

    fn special(self, kind: tar::EntryType, path: &str) -> Self {
        self.raw(kind, path, "", 0, std::io::empty())
    }

    /// A file of `size` zero bytes, streamed into the gzip encoder (a bomb costs no memory here).
    fn zeros(self, path: &str, size: u64) -> Self {
        self.raw(tar::EntryType::Regular, path, "", size, std::io::repeat(0).take(size))
    }

    fn layer(self) -> Blob {
        let gz = self.0.into_inner().unwrap().finish().unwrap();
        Blob::new(MEDIA_TYPE_LAYER_GZIP, gz)
    }
}

/// The valid bundle layer every hostile bundle image starts with (so that whiteouts have a
/// lower layer to act on).
fn bundle_base() -> Blob {
    Tar::new()
        .dir("manifests/")
        .file("manifests/csv.yaml", b"kind: ClusterServiceVersion\n")
        .dir("metadata/")
        .file("metadata/annotations.yaml", b"annotations:\n  operators.operatorframework.io.bundle.package.v1: x\n")
        .layer()
}

const CATALOG: &str = r#"{"schema":"olm.package","name":"x","defaultChannel":"alpha"}
{"schema":"olm.channel","package":"x","name":"alpha","entries":[{"name":"x.v1.0.0"}]}
{"schema":"olm.bundle","package":"x","name":"x.v1.0.0","image":"quay.io/x/x-bundle:v1.0.0","properties":[{"type":"olm.package","value":{"packageName":"x","version":"1.0.0"}}]}
"#;

fn catalog_base() -> Blob {
    Tar::new().dir("configs/").dir("configs/x/").file("configs/x/catalog.json", CATALOG.as_bytes()).layer()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Bundle,
    Catalog,
}

/// Pushes `layers` (after the kind's base layer) as `hostile/<name>:v1` to the local registry;
/// returns the reference and the digest of the last (hostile) layer.
fn push(kind: Kind, name: &str, layers: Vec<Blob>) -> (String, String) {
    let addr = crate::support::registry();
    let reference = format!("{addr}/hostile/{}-{name}:v1", if kind == Kind::Bundle { "bundle" } else { "catalog" });
    let base = if kind == Kind::Bundle { bundle_base() } else { catalog_base() };
    let mut all = vec![base];
    all.extend(layers);
    let label = match kind {
        Kind::Bundle => (LABEL_MEDIATYPE.to_string(), "registry+v1".to_string()),
        Kind::Catalog => (LABEL_CONFIGS.to_string(), "/configs".to_string()),
    };
    let labels: BTreeMap<String, String> = [label].into_iter().collect();
    let diff_ids: Vec<String> = all.iter().map(|l| l.descriptor.digest.clone()).collect();
    let image =
        ImageToPush { config: image_config(&labels, &diff_ids), layers: all.clone(), annotations: BTreeMap::new() };
    let registry = Registry::new(ClientConfig { quiet: true, ..Default::default() });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(registry.push(&parse_reference(&reference).unwrap(), &image)).unwrap();
    (reference, all.last().unwrap().descriptor.digest.clone())
}

// ---------------------------------------------------------------- running the CLI

/// A sandbox: `$TMPDIR`, the cache, and a parent directory for the destination, each with a
/// canary file; [`Sandbox::check`] asserts every canary is unchanged.
struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for d in ["tmp", "cache", "out"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
            std::fs::write(root.path().join(d).join("canary"), "canary").unwrap();
        }
        Sandbox { root }
    }

    fn dest(&self) -> PathBuf {
        self.root.path().join("out/dest")
    }

    fn check(&self, what: &str) {
        for d in ["tmp", "cache", "out"] {
            let canary = self.root.path().join(d).join("canary");
            assert_eq!(
                std::fs::read_to_string(&canary).ok().as_deref(),
                Some("canary"),
                "{what}: {} changed",
                canary.display()
            );
        }
        assert!(!self.root.path().join("out/evil").exists() && !self.root.path().join("evil").exists(), "{what}");
        // Nothing of the failed pull is left in $TMPDIR beside the canary.
        let left: Vec<_> =
            std::fs::read_dir(self.root.path().join("tmp")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 1, "{what}: $TMPDIR holds {left:?}");
    }

    /// Runs capstan with `args`; returns (exit code, stderr, peak memory in MiB).
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, u64) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_capstan"));
        cmd.args(args)
            .env("TMPDIR", self.root.path().join("tmp"))
            .env("CAPSTAN_CACHE", self.root.path().join("cache"))
            .env("HOME", self.root.path())
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for key in ["MANIFEST", "CONFIG", "LAYER", "IMAGE", "FILE", "UNPACKED"] {
            cmd.env_remove(format!("CAPSTAN_MAX_{key}_BYTES"));
        }
        cmd.env_remove("CAPSTAN_MAX_ENTRIES");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run capstan");
        let mut stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let peak = PeakMemory::watch(child.id());
        let status = child.wait().expect("wait for capstan");
        (status.code(), reader.join().unwrap(), peak.stop() / 1024)
    }
}

/// The peak resident memory (`VmHWM` of `/proc/<pid>/status`, KiB) of one child, read every
/// 2 ms while it runs. (`ru_maxrss` from `wait4` would not do: Linux carries the parent's —
/// this test process's — resident size into the child's record at `exec`.)
struct PeakMemory {
    stop: Arc<std::sync::atomic::AtomicBool>,
    poller: std::thread::JoinHandle<u64>,
}

impl PeakMemory {
    fn watch(pid: u32) -> PeakMemory {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let poller = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    && let Some(kib) = status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmHWM:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                {
                    peak = peak.max(kib);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            peak
        });
        PeakMemory { stop, poller }
    }

    /// Stops watching; the highest `VmHWM` seen, in KiB.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.poller.join().unwrap_or(0)
    }
}

/// The image name of a reference without its tag or digest, as errors may name either form.
fn repository(reference: &str) -> &str {
    match reference.split_once('@') {
        Some((name, _)) => name,
        None => reference.rsplit_once(':').map_or(reference, |(name, _)| name),
    }
}

/// Pulls `reference` with each CLI command for `kind` and asserts the refusal: exit 2, a message
/// containing every string of `expect`, canaries unchanged, memory under the cap.
fn assert_refused(kind: Kind, reference: &str, expect: &[&str], env: &[(&str, &str)]) {
    let commands: Vec<Vec<&str>> = match kind {
        Kind::Bundle => vec![vec!["bundle", "pull", reference], vec!["catalog", "render", reference]],
        Kind::Catalog => vec![vec!["catalog", "validate", reference], vec!["catalog", "pull", reference]],
    };
    for args in commands {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        let mut args = args.clone();
        let dest_s = dest.to_str().unwrap().to_string();
        if args[1] == "pull" {
            args.push(&dest_s);
        }
        let (code, err, mib) = sandbox.run(&args, env);
        let what = format!("{args:?}");
        assert_eq!(code, Some(2), "{what}: {err}");
        for e in expect {
            assert!(err.contains(e), "{what}: expected {e:?} in: {err}");
        }
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert!(mib < MEMORY_CAP_MIB, "{what}: peak memory {mib} MiB");
        sandbox.check(&what);
        assert!(!dest.exists(), "{what}: a failed pull leaves no destination");
        eprintln!("{what}: refused, peak {mib} MiB: {}", err.lines().last().unwrap_or(""));
    }
}

/// Pushes a hostile image of `kind` with one hostile layer and asserts every command refuses it
/// naming the image, the layer and each of `expect`.
fn refused(kind: Kind, name: &str, layer: Blob, expect: &[&str]) {
    let (reference, digest) = push(kind, name, vec![layer]);
    let mut all = vec![repository(&reference), digest.as_str()];
    all.extend(expect);
    assert_refused(kind, &reference, &all, &[]);
}

// ---------------------------------------------------------------- images from the real registry

#[test]
fn malformed_whiteouts_are_refused() {
    let _group = crate::support::group("oci_hostile");
    for (i, name) in [".wh..", ".wh.", ".wh...", ".wh..wh.x", ".wh..wh..wh..opq"].iter().enumerate() {
        for (kind, path) in [
            (Kind::Bundle, name.to_string()),
            (Kind::Bundle, format!("manifests/{name}")),
            (Kind::Catalog, format!("configs/{name}")),
            (Kind::Catalog, format!("configs/x/{name}")),
        ] {
            let layer = Tar::new().file(&path, b"").layer();
            refused(kind, &format!("wh{i}-{}", path.len()), layer, &[&path, "does not name a file"]);
        }
    }
}

#[test]
fn symlinks_direct_and_chained_are_refused() {
    let _group = crate::support::group("oci_hostile");
    let rule = "capstan follows no symlink";
    let cases: Vec<(Kind, &str, Blob, &str)> = vec![
        (
            Kind::Bundle,
            "direct",
            Tar::new().symlink("manifests/passwd.yaml", "/etc/passwd").layer(),
            "manifests/passwd.yaml is a symlink",
        ),
        (
            Kind::Bundle,
            "chained",
            Tar::new()
                .symlink("manifests/up", "..")
                .symlink("manifests/up/up/evil", "x")
                .file("manifests/up/up/evil2", b"x")
                .layer(),
            "manifests/up is a symlink",
        ),
        (
            Kind::Bundle,
            "inside",
            Tar::new().symlink("manifests/l.yaml", "csv.yaml").layer(),
            "manifests/l.yaml is a symlink",
        ),
        (
            Kind::Catalog,
            "chained",
            Tar::new().symlink("configs/up", "..").file("configs/up/up/evil", b"x").layer(),
            "configs/up is a symlink",
        ),
    ];
    for (kind, name, layer, expect) in cases {
        refused(kind, &format!("symlink-{name}"), layer, &[expect, rule]);
    }
}

#[test]
fn hard_links_absolute_and_dotdot_paths_and_devices_are_refused() {
    let _group = crate::support::group("oci_hostile");
    let cases: Vec<(Kind, &str, Blob, Vec<&str>)> = vec![
        (
            Kind::Bundle,
            "hl-dotdot",
            Tar::new().hardlink("manifests/h.yaml", "../../canary").layer(),
            vec!["hard link manifests/h.yaml", ".."],
        ),
        (
            Kind::Bundle,
            "hl-abs",
            Tar::new().hardlink("manifests/h.yaml", "/etc/passwd").layer(),
            vec!["hard link manifests/h.yaml", "absolute"],
        ),
        (
            Kind::Bundle,
            "hl-missing",
            Tar::new().hardlink("manifests/h.yaml", "manifests/none").layer(),
            vec!["hard link manifests/h.yaml", "no such file"],
        ),
        (
            Kind::Catalog,
            "hl-outside",
            Tar::new().file("bin/opm", b"elf").hardlink("configs/h.json", "bin/opm").layer(),
            vec!["hard link configs/h.json", "outside the unpacked part"],
        ),
        (Kind::Bundle, "abs", Tar::new().file("/tmp/evil", b"x").layer(), vec!["/tmp/evil", "absolute path"]),
        (Kind::Bundle, "dotdot", Tar::new().file("../evil", b"x").layer(), vec!["../evil", "path traversal"]),
        (
            Kind::Catalog,
            "dotdot",
            Tar::new().file("configs/../../evil", b"x").layer(),
            vec!["configs/../../evil", "path traversal"],
        ),
        (
            Kind::Bundle,
            "chardev",
            Tar::new().special(tar::EntryType::Char, "manifests/null").layer(),
            vec!["manifests/null is a device file"],
        ),
        (
            Kind::Bundle,
            "blockdev",
            Tar::new().special(tar::EntryType::Block, "manifests/sda").layer(),
            vec!["manifests/sda is a device file"],
        ),
        (
            Kind::Catalog,
            "fifo",
            Tar::new().special(tar::EntryType::Fifo, "configs/x/pipe").layer(),
            vec!["configs/x/pipe is a FIFO"],
        ),
    ];
    for (kind, name, layer, expect) in cases {
        refused(kind, name, layer, &expect);
    }
    // A valid hard link (to a file of a lower layer) is unpacked as a copy.
    let (reference, _) =
        push(Kind::Bundle, "hl-ok", vec![Tar::new().hardlink("manifests/copy.yaml", "manifests/csv.yaml").layer()]);
    let sandbox = Sandbox::new();
    let dest = sandbox.dest();
    let (code, err, _) = sandbox.run(&["bundle", "pull", &reference, dest.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(dest.join("manifests/copy.yaml")).unwrap(), b"kind: ClusterServiceVersion\n");
}

#[test]
fn gzip_bombs_stop_at_the_limits() {
    let _group = crate::support::group("oci_hostile");
    // One 1 GiB file (about 1 MiB of gzip): over the file limit by its header, refused before a
    // byte of it is written.
    let one = Tar::new().zeros("manifests/bomb.yaml", 1 << 30).layer();
    assert!(one.data.len() < 16 << 20, "{}", one.data.len());
    let (reference, digest) = push(Kind::Bundle, "bomb-one", vec![one]);
    assert_refused(
        Kind::Bundle,
        &reference,
        &[repository(&reference), &digest, "file manifests/bomb.yaml", "CAPSTAN_MAX_FILE_BYTES"],
        &[],
    );

    // Many files each under the file limit: the uncompressed total stops them (limit lowered so
    // that the test writes little).
    let mut many = Tar::new();
    for i in 0..8 {
        many = many.zeros(&format!("configs/x/bomb{i}.json"), 32 << 20);
    }
    let (reference, digest) = push(Kind::Catalog, "bomb-many", vec![many.layer()]);
    assert_refused(
        Kind::Catalog,
        &reference,
        &[repository(&reference), &digest, "CAPSTAN_MAX_UNPACKED_BYTES", "64Mi"],
        &[("CAPSTAN_MAX_UNPACKED_BYTES", "64Mi")],
    );
}

#[test]
fn a_config_over_the_limit_is_refused() {
    let _group = crate::support::group("oci_hostile");
    let (reference, _) = push(Kind::Bundle, "big-config", vec![]);
    // Lowered limit: the image's own config (a few hundred bytes) is over 100 bytes.
    assert_refused(
        Kind::Bundle,
        &reference,
        &[repository(&reference), "config sha256:", "CAPSTAN_MAX_CONFIG_BYTES"],
        &[("CAPSTAN_MAX_CONFIG_BYTES", "100")],
    );
    let sandbox = Sandbox::new();
    let (code, err, _) = sandbox.run(
        &["bundle", "pull", &reference, sandbox.dest().to_str().unwrap()],
        &[("CAPSTAN_MAX_CONFIG_BYTES", "lots")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("CAPSTAN_MAX_CONFIG_BYTES=\"lots\""), "{err}");
}

// ---------------------------------------------------------------- a registry that lies

/// What the fake registry answers for one path.
#[derive(Clone)]
enum Answer {
    /// 200 with these bytes (and `Docker-Content-Digest` of them).
    Bytes(Vec<u8>),
    /// 200 and zeros without end (no `Content-Length`), until the client hangs up.
    Endless,
    /// 200 with a `Content-Length` header of this many bytes, then zeros until the client hangs up.
    DeclaredLength(u64),
}

/// A registry on loopback serving fixed answers by path (`/v2/` answers `{}`); counts the body
/// bytes it managed to send, so that a test can show the client stopped reading.
struct FakeRegistry {
    addr: String,
    sent: Arc<AtomicU64>,
}

impl FakeRegistry {
    fn start(answers: HashMap<String, Answer>) -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicU64::new(0));
        let answers = Arc::new(Mutex::new(answers));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let answers = answers.clone();
                let counter = counter.clone();
                std::thread::spawn(move || serve(stream, &answers, &counter));
            }
        });
        FakeRegistry { addr, sent }
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

fn serve(mut stream: std::net::TcpStream, answers: &Mutex<HashMap<String, Answer>>, sent: &AtomicU64) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut parts = head.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let answer =
        if path == "/v2/" { Some(Answer::Bytes(b"{}".to_vec())) } else { answers.lock().unwrap().get(&path).cloned() };
    let zeros = vec![0u8; 64 << 10];
    let send_zeros = |stream: &mut std::net::TcpStream| {
        while stream.write_all(&zeros).is_ok() {
            sent.fetch_add(zeros.len() as u64, Ordering::Relaxed);
        }
    };
    match answer {
        None => {
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
        Some(Answer::Bytes(body)) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nDocker-Content-Digest: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                sha256_digest(&body),
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            if method != "HEAD" {
                let _ = stream.write_all(&body);
            }
        }
        Some(Answer::Endless) => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n");
            send_zeros(&mut stream);
        }
        Some(Answer::DeclaredLength(n)) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes());
            send_zeros(&mut stream);
        }
    }
}

fn descriptor(media_type: &str, digest: &str, size: i64) -> serde_json::Value {
    serde_json::json!({"mediaType": media_type, "digest": digest, "size": size})
}

fn manifest(config: serde_json::Value, layers: Vec<serde_json::Value>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config,
        "layers": layers,
    }))
    .unwrap()
}

/// A fake registry serving `manifest` for `lie/<name>` by digest, plus `blobs`; returns it and the
/// digest reference.
fn lying(name: &str, manifest: Vec<u8>, blobs: Vec<(String, Answer)>) -> (FakeRegistry, String) {
    let digest = sha256_digest(&manifest);
    let mut answers: HashMap<String, Answer> =
        blobs.into_iter().map(|(d, a)| (format!("/v2/lie/{name}/blobs/{d}"), a)).collect();
    answers.insert(format!("/v2/lie/{name}/manifests/{digest}"), Answer::Bytes(manifest));
    let reg = FakeRegistry::start(answers);
    let reference = format!("{}/lie/{name}@{digest}", reg.addr);
    (reg, reference)
}

fn real_config() -> Blob {
    let labels: BTreeMap<String, String> =
        [(LABEL_MEDIATYPE.to_string(), "registry+v1".to_string())].into_iter().collect();
    image_config(&labels, &[])
}

#[test]
fn a_blob_longer_than_declared_is_cut_off() {
    let _group = crate::support::group("oci_hostile");
    let config = real_config();
    // The manifest declares the layer as 100 bytes; the registry sends zeros without end.
    let layer_digest = sha256_digest(b"a layer of 100 bytes");
    let m = manifest(
        descriptor(MEDIA_TYPE_CONFIG, &config.descriptor.digest, config.data.len() as i64),
        vec![descriptor(MEDIA_TYPE_LAYER_GZIP, &layer_digest, 100)],
    );
    let (reg, reference) = lying(
        "longer",
        m,
        vec![
            (config.descriptor.digest.clone(), Answer::Bytes(config.data.clone())),
            (layer_digest.clone(), Answer::Endless),
        ],
    );
    let started = std::time::Instant::now();
    assert_refused(Kind::Bundle, &reference, &[&reference, &layer_digest, "more than the 100 bytes"], &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    // Bytes in flight (socket buffers) aside, the client stopped at once: far less than the 1.66 GB
    // an unbounded pull once received.
    assert!(reg.sent() < 64 << 20, "the fake registry sent {} bytes", reg.sent());
}

#[test]
fn declared_sizes_over_the_limits_are_refused_before_any_download() {
    let _group = crate::support::group("oci_hostile");
    let config = real_config();
    let big = sha256_digest(b"big");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("huge-config", manifest(descriptor(MEDIA_TYPE_CONFIG, &big, 2 << 30), vec![]), "CAPSTAN_MAX_CONFIG_BYTES"),
        (
            "huge-layer",
            manifest(
                descriptor(MEDIA_TYPE_CONFIG, &config.descriptor.digest, config.data.len() as i64),
                vec![descriptor(MEDIA_TYPE_LAYER_GZIP, &big, 1 << 40)],
            ),
            "CAPSTAN_MAX_LAYER_BYTES",
        ),
        (
            "huge-image",
            manifest(
                descriptor(MEDIA_TYPE_CONFIG, &config.descriptor.digest, config.data.len() as i64),
                (0..4).map(|_| descriptor(MEDIA_TYPE_LAYER_GZIP, &big, 200 << 20)).collect(),
            ),
            "CAPSTAN_MAX_IMAGE_BYTES",
        ),
    ];
    for (name, m, env) in cases {
        let (reg, reference) = lying(
            name,
            m,
            vec![
                (config.descriptor.digest.clone(), Answer::Bytes(config.data.clone())),
                (big.clone(), Answer::Endless),
            ],
        );
        assert_refused(Kind::Bundle, &reference, &[&reference, "declared as", env], &[]);
        assert_eq!(reg.sent(), 0, "{name}: nothing was downloaded");
    }
}

#[test]
fn huge_manifests_are_cut_off() {
    let _group = crate::support::group("oci_hostile");
    for (name, answer, expect) in [
        ("endless", Answer::Endless, "more than 4194304 bytes"),
        ("declared", Answer::DeclaredLength(1 << 40), "declared as 1099511627776 bytes (Content-Length)"),
    ] {
        let digest = sha256_digest(name.as_bytes());
        let reg = FakeRegistry::start([(format!("/v2/lie/{name}/manifests/{digest}"), answer)].into_iter().collect());
        let reference = format!("{}/lie/{name}@{digest}", reg.addr);
        assert_refused(
            Kind::Catalog,
            &reference,
            &[&reference, &format!("manifest {digest}"), expect, "CAPSTAN_MAX_MANIFEST_BYTES"],
            &[],
        );
        assert!(reg.sent() < 64 << 20, "{name}: the fake registry sent {} bytes", reg.sent());
    }
    // A tag whose HEAD carries no digest header: resolved by a GET, bounded the same way.
    let reg = FakeRegistry::start([("/v2/lie/tag/manifests/v1".to_string(), Answer::Endless)].into_iter().collect());
    let reference = format!("{}/lie/tag:v1", reg.addr);
    assert_refused(
        Kind::Bundle,
        &reference,
        &[&reference, "manifest tag v1", "more than 4194304 bytes", "CAPSTAN_MAX_MANIFEST_BYTES"],
        &[],
    );
    assert!(reg.sent() < 64 << 20, "tag: the fake registry sent {} bytes", reg.sent());
}

#[test]
fn digest_mismatches_are_refused() {
    let _group = crate::support::group("oci_hostile");
    let config = real_config();
    let layer = bundle_base();
    // The registry serves other bytes of the same length for the layer.
    let mut forged = layer.data.clone();
    forged[10] ^= 0xff;
    let m = manifest(
        descriptor(MEDIA_TYPE_CONFIG, &config.descriptor.digest, config.data.len() as i64),
        vec![descriptor(MEDIA_TYPE_LAYER_GZIP, &layer.descriptor.digest, layer.data.len() as i64)],
    );
    let (_reg, reference) = lying(
        "forged-layer",
        m,
        vec![
            (config.descriptor.digest.clone(), Answer::Bytes(config.data.clone())),
            (layer.descriptor.digest.clone(), Answer::Bytes(forged)),
        ],
    );
    assert_refused(Kind::Bundle, &reference, &[&reference, "digest mismatch", &layer.descriptor.digest], &[]);

    // A manifest that does not hash to the digest it is asked for.
    let m = manifest(descriptor(MEDIA_TYPE_CONFIG, &config.descriptor.digest, config.data.len() as i64), vec![]);
    let wanted = sha256_digest(b"another manifest");
    let reg = FakeRegistry::start(
        [(format!("/v2/lie/forged-manifest/manifests/{wanted}"), Answer::Bytes(m))].into_iter().collect(),
    );
    let reference = format!("{}/lie/forged-manifest@{wanted}", reg.addr);
    assert_refused(Kind::Catalog, &reference, &[&reference, "digest mismatch for manifest", &wanted], &[]);
}

#[test]
fn an_edited_catalog_cache_entry_is_not_trusted() {
    let _group = crate::support::group("oci_hostile");
    let (reference, _) = push(Kind::Catalog, "cache-edit", vec![]);
    let sandbox = Sandbox::new();
    let cache: &Path = &sandbox.root.path().join("cache");
    let render = |sandbox: &Sandbox| {
        let (code, err, _) = sandbox.run(&["catalog", "validate", &reference], &[]);
        assert_eq!(code, Some(0), "{err}");
    };
    render(&sandbox);
    let dir = cache.join("catalogs");
    let stream = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".json") && !p.to_string_lossy().ends_with(".meta.json"))
        .expect("a cached stream");
    let text = std::fs::read_to_string(&stream).unwrap();
    assert!(text.contains("quay.io/x/x-bundle:v1.0.0"), "{text}");
    std::fs::write(&stream, text.replace("quay.io/x/x-bundle:v1.0.0", "evil.example/x:1")).unwrap();
    render(&sandbox);
    // The edited entry was discarded and derived again from the image.
    assert_eq!(std::fs::read_to_string(&stream).unwrap(), text);
}
