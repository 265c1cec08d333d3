//! Helpers of the OCI tests: an extra `docker-registry` (CNCF distribution) on a loopback port,
//! optionally with htpasswd auth, stopped when dropped; a throw-away cache directory; a capstan
//! registry client over such a cache; the files of a directory.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `docker-registry serve` child process; killed and reaped on drop.
pub struct ExtraRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Holds the config, the htpasswd file, the storage and the log.
    pub dir: tempfile::TempDir,
}

impl ExtraRegistry {
    /// Starts a registry; with `Some((user, password))` it requires HTTP basic auth (htpasswd,
    /// bcrypt) for every request.
    pub fn start(credentials: Option<(&str, &str)>) -> ExtraRegistry {
        let bin = std::env::var("CAPSTAN_DOCKER_REGISTRY").unwrap_or_else(|_| "/usr/bin/docker-registry".to_string());
        let dir = tempfile::tempdir().expect("tempdir");
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            l.local_addr().expect("addr").port()
        };
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            dir.path().join("storage").display()
        );
        if let Some((user, password)) = credentials {
            let hash = bcrypt::hash(password, 5).expect("bcrypt");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).expect("write htpasswd");
            config
                .push_str(&format!("auth:\n  htpasswd:\n    realm: capstan-test\n    path: {}\n", htpasswd.display()));
        }
        let cfg_path = dir.path().join("config.yml");
        std::fs::write(&cfg_path, config).expect("write config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new(&bin)
            .arg("serve")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e} (apt-get install docker-registry)"));
        let mut reg = ExtraRegistry { child, addr, dir };
        reg.wait_ready();
        reg
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited with {status}: {}", self.log());
            }
            if let Ok(mut s) = TcpStream::connect(&self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let req = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
                if s.write_all(req.as_bytes()).is_ok() {
                    let mut buf = String::new();
                    let _ = s.read_to_string(&mut buf);
                    if buf.starts_with("HTTP/1") {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry at {} did not come up: {}", self.addr, self.log());
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for ExtraRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address where nothing listens: a port bound and released.
pub fn dead_registry() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    addr.to_string()
}

/// A fresh cache directory for one test.
pub fn cache_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// A capstan registry client with its blob cache in `cache`, quiet.
pub fn registry(cache: &tempfile::TempDir) -> capstan::oci::Registry {
    capstan::oci::Registry::new(capstan::oci::ClientConfig {
        cache: Some(capstan::oci::BlobCache::new(cache.path())),
        quiet: true,
        ..Default::default()
    })
}

/// Every regular file under `dir`, relative path → bytes.
pub fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}
