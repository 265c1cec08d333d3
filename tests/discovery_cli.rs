//! Discovery through the CLI (issue 16): `capstan search`, `capstan show` over `--catalog`, and
//! the catalog content endpoint of `capstan catalog serve` checked against `opm render` for the
//! example catalog and every corpus catalog.
//!
//! opm is found (or built) by `support::opm`; without it the comparison fails.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

fn capstan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_capstan"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus() -> PathBuf {
    support::shared_dir().join("corpus/community-operators-prod/catalogs/v4.20")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = capstan().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_stream(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text).into_iter::<Value>().map(Result::unwrap).collect()
}

#[test]
fn search_and_show_over_catalogs() {
    let examples = format!("olm/examples={}", repo().join("catalog").display());
    let (code, out, _) = run(&["search", "NGINX", "--catalog", &examples]);
    assert_eq!(code, 0);
    assert!(out.lines().next().unwrap().starts_with("PACKAGE"), "{out}");
    assert!(out.contains("nginx-operator") && out.contains("olm/examples") && out.contains("0.2.0"), "{out}");
    assert!(out.contains("kaiwudb-operator"), "kaiwudb's description mentions nginx-operator: {out}");
    let (code, out, _) = run(&["search", "kaiwu", "--catalog", &examples, "-o", "json"]);
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{out}");
    assert_eq!(rows[0]["package"], "kaiwudb-operator");
    assert_eq!(rows[0]["catalog"], "olm/examples");

    let (code, out, err) = run(&["search", "no-such-word-anywhere", "--catalog", &examples]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(err.contains("no package matches"), "{err}");

    let (code, out, _) = run(&["show", "nginx-operator", "--catalog", &examples, "-o", "json"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let pm = &doc[0]["packageManifest"];
    assert_eq!(pm["kind"], "PackageManifest");
    assert_eq!(pm["status"]["catalogSource"], "examples");
    assert_eq!(pm["status"]["catalogSourceNamespace"], "olm");
    assert_eq!(pm["status"]["defaultChannel"], "alpha");
    let ch = &pm["status"]["channels"][0];
    assert_eq!(ch["currentCSV"], "nginx-operator.v0.2.0");
    let versions: Vec<&str> =
        ch["entries"].as_array().unwrap().iter().map(|e| e["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["0.2.0", "0.1.0"]);
    assert_eq!(ch["currentCSVDesc"]["displayName"], "Nginx Operator");
    assert!(ch["currentCSVDesc"]["installModes"].as_array().unwrap().iter().any(|m| m["type"] == "AllNamespaces"));

    // Dependencies of a corpus package (olm.gvk.required and olm.package.required), text and YAML.
    let community = format!("olm/community={}", corpus().display());
    let (code, out, _) = run(&["show", "rabbitmq-messaging-topology-operator", "--catalog", &community]);
    assert_eq!(code, 0);
    assert!(out.contains("package rabbitmq-cluster-operator"), "{out}");
    assert!(out.contains("API rabbitmq.com/v1beta1 RabbitmqCluster"), "{out}");
    let (code, out, _) = run(&["show", "rabbitmq-messaging-topology-operator", "--catalog", &community, "-o", "yaml"]);
    assert_eq!(code, 0);
    let y: Value = serde_norway::from_str(&out).unwrap();
    let deps = y[0]["dependencies"]["stable"].as_array().unwrap();
    assert!(
        deps.iter()
            .any(|d| d["type"] == "olm.package.required" && d["value"]["packageName"] == "rabbitmq-cluster-operator"),
        "{deps:?}"
    );

    let (code, _, err) = run(&["show", "nginx", "--catalog", &examples]);
    assert_eq!(code, 1);
    assert!(err.contains("no catalog has package \"nginx\"") && err.contains("nginx-operator"), "{err}");
    let (code, _, err) = run(&["show", "x", "--catalog", "olm/missing=/nonexistent/dir"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/dir"), "{err}");
}

/// A running `capstan catalog serve`, stopped on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(catalogs: &[String]) -> Server {
    let mut cmd = capstan();
    cmd.args(["catalog", "serve", "--listen", "127.0.0.1:0"]);
    for c in catalogs {
        cmd.args(["--catalog", c]);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{line:?}");
    Server { child, base }
}

fn http(url: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut req = reqwest::Client::new().get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let h = resp.headers().clone();
        (status, h, resp.bytes().await.unwrap().to_vec())
    })
}

fn opm_render(opm: &Path, dir: &Path) -> Vec<Value> {
    let out = Command::new(opm).arg("render").arg(dir).args(["-o", "json"]).output().unwrap();
    assert!(out.status.success(), "opm render {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    json_stream(&String::from_utf8(out.stdout).unwrap())
}

#[test]
fn content_endpoint_returns_exactly_what_opm_renders() {
    let opm = support::opm();
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(corpus()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.push(repo().join("catalog"));
    let specs: Vec<String> = dirs.iter().enumerate().map(|(i, d)| format!("olm/c{i}={}", d.display())).collect();
    let server = serve(&specs);
    for (i, dir) in dirs.iter().enumerate() {
        let want = opm_render(&opm, dir);
        let (status, h, body) = http(&format!("{}/catalogs/olm/c{i}/api/v1/all", server.base), &[]);
        assert_eq!(status, 200);
        assert_eq!(h["content-type"], "application/jsonl");
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.ends_with('\n') && text.lines().all(|l| l.starts_with('{') && l.ends_with('}')),
            "one compact blob per line"
        );
        let got: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(got.len(), want.len(), "{}: blob count", dir.display());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{}: blob differs from opm render", dir.display());
        }
        // metas by package and by schema are exactly opm's blobs with that field.
        let package = want[0]["name"].as_str().unwrap();
        for (q, field, value) in [
            (format!("package={package}"), "package", package),
            ("schema=olm.bundle".to_string(), "schema", "olm.bundle"),
        ] {
            let (status, _, body) = http(&format!("{}/catalogs/olm/c{i}/api/v1/metas?{q}", server.base), &[]);
            assert_eq!(status, 200);
            let got: Vec<Value> =
                String::from_utf8(body).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let expect: Vec<&Value> = want
                .iter()
                .filter(|b| {
                    b[field] == value || (field == "package" && b["schema"] == "olm.package" && b["name"] == value)
                })
                .collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), expect, "{}: metas?{q}", dir.display());
        }
        // Conditional and compressed answers.
        let etag = h["etag"].to_str().unwrap().to_string();
        assert!(etag.starts_with("\"sha256:"), "{etag}");
        assert_eq!(http(&format!("{}/catalogs/olm/c{i}/api/v1/all", server.base), &[("if-none-match", &etag)]).0, 304);
        let lm = h["last-modified"].to_str().unwrap().to_string();
        assert_eq!(
            http(&format!("{}/catalogs/olm/c{i}/api/v1/all", server.base), &[("if-modified-since", &lm)]).0,
            304
        );
        let (status, zh, z) =
            http(&format!("{}/catalogs/olm/c{i}/api/v1/all", server.base), &[("accept-encoding", "gzip")]);
        assert_eq!((status, zh["content-encoding"].to_str().unwrap()), (200, "gzip"));
        let mut unz = String::new();
        flate2::read::GzDecoder::new(&z[..]).read_to_string(&mut unz).unwrap();
        assert_eq!(unz, text);
    }
    let (status, _, body) = http(&format!("{}/catalogs/olm/none/api/v1/all", server.base), &[]);
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("olm/none"));
}
