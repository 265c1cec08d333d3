//! Size limits on what capstan reads from a registry and writes while unpacking an image.
//!
//! Images come from registries capstan's users do not control, so
//! every pull is bounded: the manifest, the config, each layer (compressed) and the whole image
//! (compressed, config + layers) are refused before they are downloaded when their declared size
//! is over the limit, and a download stops as soon as more bytes arrive than the descriptor
//! declared; unpacking bounds each file, the uncompressed size of all layers together and the
//! number of tar entries.
//!
//! Each limit is read once per process from an environment variable that takes a byte count with
//! an optional binary (`Ki`, `Mi`, `Gi`, `Ti`) or decimal (`k`/`K`, `M`, `G`, `T`) suffix, e.g.
//! `CAPSTAN_MAX_LAYER_BYTES=512Mi`. The defaults fit the shipped Deployment's 1 GiB memory limit
//! (a pull holds the compressed image in memory; unpacked files stream to disk) and accept every
//! bundle and catalog of `corpus/` with a wide margin (the largest bundle there is 1.6 MB of
//! manifests, the largest catalog file 2.3 MB).

use std::sync::OnceLock;

/// Limits on one image pull and unpack. All sizes are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// An image manifest or index (`CAPSTAN_MAX_MANIFEST_BYTES`, default 4 MiB, the limit of the
    /// CNCF distribution registry itself).
    pub manifest_bytes: u64,
    /// The image config blob (`CAPSTAN_MAX_CONFIG_BYTES`, default 8 MiB).
    pub config_bytes: u64,
    /// One layer blob, compressed, as the manifest declares it (`CAPSTAN_MAX_LAYER_BYTES`,
    /// default 256 MiB).
    pub layer_bytes: u64,
    /// Config plus all layers, compressed, as declared (`CAPSTAN_MAX_IMAGE_BYTES`, default
    /// 384 MiB); this is what a pull holds in memory.
    pub image_bytes: u64,
    /// One unpacked regular file (`CAPSTAN_MAX_FILE_BYTES`, default 128 MiB).
    pub file_bytes: u64,
    /// The uncompressed tar streams of all layers together, entries that are skipped included
    /// (`CAPSTAN_MAX_UNPACKED_BYTES`, default 1 GiB); bounds disk use and decompression work.
    pub unpacked_bytes: u64,
    /// Tar entries of all layers together (`CAPSTAN_MAX_ENTRIES`, default 200,000).
    pub entries: u64,
}

/// One limit: its environment variable, what it bounds (for messages) and its default.
#[derive(Debug, Clone, Copy)]
pub struct LimitSpec {
    /// The environment variable, e.g. `CAPSTAN_MAX_LAYER_BYTES`.
    pub env: &'static str,
    /// What it bounds, e.g. `layer (compressed)`.
    pub what: &'static str,
    /// The default value.
    pub default: u64,
}

const MI: u64 = 1 << 20;

/// Every limit with its variable and default, in the order of the fields of [`Limits`].
pub const SPECS: [LimitSpec; 7] = [
    LimitSpec { env: "CAPSTAN_MAX_MANIFEST_BYTES", what: "manifest", default: 4 * MI },
    LimitSpec { env: "CAPSTAN_MAX_CONFIG_BYTES", what: "image config", default: 8 * MI },
    LimitSpec { env: "CAPSTAN_MAX_LAYER_BYTES", what: "layer (compressed)", default: 256 * MI },
    LimitSpec { env: "CAPSTAN_MAX_IMAGE_BYTES", what: "image (config and layers, compressed)", default: 384 * MI },
    LimitSpec { env: "CAPSTAN_MAX_FILE_BYTES", what: "unpacked file", default: 128 * MI },
    LimitSpec { env: "CAPSTAN_MAX_UNPACKED_BYTES", what: "unpacked layers (uncompressed tar)", default: 1024 * MI },
    LimitSpec { env: "CAPSTAN_MAX_ENTRIES", what: "tar entries", default: 200_000 },
];

/// Which limit, to name its variable in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`Limits::manifest_bytes`].
    Manifest,
    /// [`Limits::config_bytes`].
    Config,
    /// [`Limits::layer_bytes`].
    Layer,
    /// [`Limits::image_bytes`].
    Image,
    /// [`Limits::file_bytes`].
    File,
    /// [`Limits::unpacked_bytes`].
    Unpacked,
    /// [`Limits::entries`].
    Entries,
}

impl Limit {
    /// The variable and default of this limit.
    pub fn spec(self) -> &'static LimitSpec {
        &SPECS[self as usize]
    }
}

impl Default for Limits {
    /// The limits from the environment, read once per process; a variable that does not parse is
    /// ignored here (its default is used) — [`Limits::from_env`], which every command calls before
    /// it pulls, reports it as an error instead.
    fn default() -> Self {
        static FROM_ENV: OnceLock<Limits> = OnceLock::new();
        *FROM_ENV.get_or_init(|| Limits::from_env().unwrap_or_else(|_| Limits::builtin()))
    }
}

impl Limits {
    /// The built-in defaults (see [`SPECS`]), ignoring the environment.
    pub fn builtin() -> Self {
        Self::from_values(SPECS.map(|s| s.default))
    }

    fn from_values(v: [u64; 7]) -> Self {
        Limits {
            manifest_bytes: v[0],
            config_bytes: v[1],
            layer_bytes: v[2],
            image_bytes: v[3],
            file_bytes: v[4],
            unpacked_bytes: v[5],
            entries: v[6],
        }
    }

    /// The value of `limit`.
    pub fn get(&self, limit: Limit) -> u64 {
        match limit {
            Limit::Manifest => self.manifest_bytes,
            Limit::Config => self.config_bytes,
            Limit::Layer => self.layer_bytes,
            Limit::Image => self.image_bytes,
            Limit::File => self.file_bytes,
            Limit::Unpacked => self.unpacked_bytes,
            Limit::Entries => self.entries,
        }
    }

    /// The limits from the `CAPSTAN_MAX_*` environment variables, each unset or empty one at its
    /// default.
    ///
    /// Errors: [`InvalidLimit`], a variable that is not a positive byte count.
    pub fn from_env() -> Result<Self, InvalidLimit> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Self::from_env`] with variables looked up through `get` (for tests).
    ///
    /// Errors: as [`Self::from_env`].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, InvalidLimit> {
        let mut values = [0u64; 7];
        for (slot, spec) in values.iter_mut().zip(SPECS.iter()) {
            *slot = match get(spec.env).filter(|v| !v.trim().is_empty()) {
                None => spec.default,
                Some(text) => parse_size(&text).filter(|n| *n > 0).ok_or_else(|| InvalidLimit {
                    env: spec.env,
                    value: text.clone(),
                    default: spec.default,
                })?,
            };
        }
        Ok(Self::from_values(values))
    }
}

/// A `CAPSTAN_MAX_*` variable that is not a positive count ([`Limits::from_env`]); the message
/// names the variable and the value, and shows the accepted forms with the default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{env}={value:?} is not a positive number; write a count (of bytes, for the sizes) with an optional suffix Ki, Mi, Gi, Ti (powers of 1024) or k, M, G, T (powers of 1000), e.g. {env}={}",
    human(*default)
)]
pub struct InvalidLimit {
    /// The variable, e.g. `CAPSTAN_MAX_LAYER_BYTES`.
    pub env: &'static str,
    /// Its value as set.
    pub value: String,
    /// The limit's default.
    pub default: u64,
}

/// Parses `123`, `64Mi`, `1.5Gi`, `10M`, `512Ki` (optional `B` after the suffix) into bytes.
/// `None` for anything else, negative numbers and overflow.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult: u64 = match suffix.trim() {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    if num.is_empty() {
        return None;
    }
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult);
    }
    let f: f64 = num.parse().ok()?;
    let v = f * mult as f64;
    (v.is_finite() && v >= 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

/// The value `n` of the limit set by `env` as that variable takes it: a plain count for
/// `CAPSTAN_MAX_ENTRIES`, else [`human`].
pub fn show(n: u64, env: &str) -> String {
    if env == Limit::Entries.spec().env { n.to_string() } else { human(n) }
}

/// `n` bytes in the largest binary unit that divides it (`64Mi`, `1536Ki`, `100`), as
/// [`parse_size`] reads it back.
pub fn human(n: u64) -> String {
    for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("64Mi"), Some(64 << 20));
        assert_eq!(parse_size(" 1Gi "), Some(1 << 30));
        assert_eq!(parse_size("1.5Ki"), Some(1536));
        assert_eq!(parse_size("10M"), Some(10_000_000));
        assert_eq!(parse_size("2k"), Some(2000));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        for bad in ["", "Mi", "-1", "1Xi", "1e3", "99999999999999999999", "20000000Ti"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(human(4 << 20), "4Mi");
        assert_eq!(human(200_000), "200000");
        assert_eq!(parse_size(&human(1536 << 10)), Some(1536 << 10));
    }

    #[test]
    fn environment_overrides_defaults_and_bad_values_are_named() {
        let l = Limits::from_lookup(|k| (k == "CAPSTAN_MAX_LAYER_BYTES").then(|| "1Mi".to_string())).unwrap();
        assert_eq!(l.layer_bytes, 1 << 20);
        assert_eq!(l.manifest_bytes, Limits::builtin().manifest_bytes);
        assert_eq!(l.get(Limit::Layer), 1 << 20);
        assert_eq!(Limit::Entries.spec().env, "CAPSTAN_MAX_ENTRIES");
        let err =
            Limits::from_lookup(|k| (k == "CAPSTAN_MAX_ENTRIES").then(|| "lots".to_string())).unwrap_err().to_string();
        assert!(err.contains("CAPSTAN_MAX_ENTRIES=\"lots\"") && err.contains("Mi"), "{err}");
        assert!(Limits::from_lookup(|k| (k == "CAPSTAN_MAX_FILE_BYTES").then(|| "0".to_string())).is_err());
    }
}
