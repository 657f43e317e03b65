//! Where the type check's compiler comes from: the one the operator names (`--tsc`), else a
//! TypeScript 7 `tsc` on `PATH`, else the pinned npm package for this platform in sdkbox's
//! cache, downloaded there once from the npm registry and checked against the digest its
//! lock file pins, so what runs is exactly what was measured, whatever the registry serves.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha512};

use super::Unchecked;

/// The TypeScript release downloaded (the one `tests/tools/typescript` pins).
pub const VERSION: &str = "7.0.2";

/// The largest package accepted: the largest platform's is about 10 MB.
const MAX_PACKAGE_BYTES: usize = 64 * 1024 * 1024;

/// The most a package may unpack to: the compiler is 24 MB, its library files 4 MB.
const MAX_UNPACKED_BYTES: u64 = 256 * 1024 * 1024;

/// One platform's compiler package on the npm registry, as the lock file pins it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    /// The platform part of `@typescript/typescript-<platform>`.
    pub platform: &'static str,
    /// Its `sha512-<base64>` integrity, from `tests/tools/typescript/package-lock.json`.
    pub integrity: &'static str,
}

/// The packages sdkbox knows the digest of, by Rust's (OS, architecture).
pub const PACKAGES: [(&str, &str, Package); 4] = [
    (
        "linux",
        "x86_64",
        Package {
            platform: "linux-x64",
            integrity: "sha512-EYdf2cNg7rgCWJnxCdJ+F3V39O8ihb37eHAu1LK8oAFizgTQbPOK7zHHXbPt8rX24COqODXeI3sIf0fCXG7H/A==",
        },
    ),
    (
        "linux",
        "aarch64",
        Package {
            platform: "linux-arm64",
            integrity: "sha512-Qh4eU4/y3yDjnfjjyPYihMj5/ODIlmt+Bzu17OI+fiSRDW57QmU5SiN63exPRNJPKUzcc1INa1NXdrJ+MqHjUQ==",
        },
    ),
    (
        "macos",
        "x86_64",
        Package {
            platform: "darwin-x64",
            integrity: "sha512-SZ9xZInqApNlNGc9s0W1VSsktYSOe9cFqNOIqmN1Gs8SmkjKZYFt017G4VwPxASInODuAdbTW7sXiFUf893RgA==",
        },
    ),
    (
        "macos",
        "aarch64",
        Package {
            platform: "darwin-arm64",
            integrity: "sha512-gowzar9MwS/aRWp6f3a4KUqzRjAZjOsmGNCM6LcTgXum+dBfgsBVMN+AgvOCCbguXyick6LJhpBszxMebJ8syA==",
        },
    ),
];

/// Where the compiler is, or what getting it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// This executable runs now.
    Ready(PathBuf),
    /// The pinned package, downloaded into this directory first.
    Download(Package, PathBuf),
    /// None can be had: this says why.
    Missing(String),
}

/// This platform's package, if sdkbox pins one.
pub fn this_platform() -> Option<Package> {
    PACKAGES
        .iter()
        .find(|(os, arch, _)| *os == std::env::consts::OS && *arch == std::env::consts::ARCH)
        .map(|(_, _, package)| *package)
}

/// The directory the pinned package unpacks into, under sdkbox's cache.
pub fn cached_dir(package: &Package) -> Option<PathBuf> {
    crate::user_cache::dir("typescript").map(|d| d.join(format!("{VERSION}-{}", package.platform)))
}

/// The compiler to use: the one given, else `tsc` on `PATH` if it is TypeScript 7, else the
/// cached pinned package, else the pinned package to download.
pub fn locate(given: Option<&Path>) -> Located {
    if let Some(path) = given {
        return Located::Ready(path.to_owned());
    }
    if let Some(path) = on_path() {
        return Located::Ready(path);
    }
    let Some(package) = this_platform() else {
        return Located::Missing(format!(
            "no TypeScript 7 compiler is pinned for {}-{}: install one and pass --tsc PATH",
            std::env::consts::OS,
            std::env::consts::ARCH
        ));
    };
    let Some(dir) = cached_dir(&package) else {
        return Located::Missing(
            "no cache directory to download the compiler into (set SDKBOX_CACHE_DIR), and no --tsc PATH"
                .into(),
        );
    };
    let tsc = dir.join("tsc");
    if tsc.is_file() {
        Located::Ready(tsc)
    } else {
        Located::Download(package, dir)
    }
}

/// `tsc` on `PATH`, as an absolute path, if it says it is TypeScript 7.
fn on_path() -> Option<PathBuf> {
    let path = std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("tsc"))
        .find(|candidate| candidate.is_file())?;
    let output = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .starts_with("Version 7.")
        .then_some(path)
}

/// The registry's address: npm's own setting (`$npm_config_registry`), else the npm registry.
pub fn registry() -> String {
    ["npm_config_registry", "NPM_CONFIG_REGISTRY"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "https://registry.npmjs.org".to_owned())
}

/// The package's tarball address on `registry`.
fn tarball_url(package: &Package, registry: &str) -> String {
    let name = format!("typescript-{}", package.platform);
    format!(
        "{}/@typescript/{name}/-/{name}-{VERSION}.tgz",
        registry.trim_end_matches('/')
    )
}

/// Downloads `package` from `registry`, checks its digest, and unpacks its `lib/` into `dir`
/// (all of it or nothing, so a half-written compiler never runs); returns the compiler's path.
pub async fn download(package: &Package, dir: &Path, registry: &str) -> Result<PathBuf, Unchecked> {
    let url = tarball_url(package, registry);
    let failed = |why: String| Unchecked(format!("cannot download the compiler from {url}: {why}"));
    let expected = package
        .integrity
        .strip_prefix("sha512-")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .ok_or_else(|| failed("its pinned digest is not sha512".into()))?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(30))
        .user_agent(concat!("sdkbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let response = client
        .get(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| failed(crate::capped::fetch_error(&e)))?;
    let tarball = crate::capped::capped_body(response, MAX_PACKAGE_BYTES)
        .await
        .map_err(|e| failed(format!("{e}: not used")))?;
    if Sha512::digest(&tarball).as_slice() != expected.as_slice() {
        return Err(failed(format!(
            "its digest is not the pinned {}: not used",
            package.integrity
        )));
    }
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || unpack(&tarball, &dir))
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(format!("cannot unpack it: {e}")))
}

/// Unpacks the files directly under the package's `lib/` into a fresh directory beside `dir`,
/// then moves it into place; another process that got there first wins.
fn unpack(tarball: &[u8], dir: &Path) -> std::io::Result<PathBuf> {
    let parent = dir
        .parent()
        .ok_or_else(|| std::io::Error::other("the cache directory has no parent"))?;
    std::fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new().prefix(".tmp").tempdir_in(parent)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    let mut unpacked = 0u64;
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.into_owned();
        let Some(name) = lib_file(&path) else {
            continue;
        };
        let mut file = std::fs::File::create(staging.path().join(&name))?;
        let limit = MAX_UNPACKED_BYTES - unpacked;
        let copied = std::io::copy(&mut (&mut entry).take(limit + 1), &mut file)?;
        unpacked += copied;
        if unpacked > MAX_UNPACKED_BYTES {
            return Err(std::io::Error::other("it unpacks to more than 256 MB"));
        }
        file.flush()?;
    }
    let tsc = staging.path().join("tsc");
    if !tsc.is_file() {
        return Err(std::io::Error::other("it has no lib/tsc"));
    }
    set_executable(&tsc)?;
    let staged = staging.keep();
    if let Err(error) = std::fs::rename(&staged, dir) {
        let _ = std::fs::remove_dir_all(&staged);
        if !dir.join("tsc").is_file() {
            return Err(error);
        }
    }
    Ok(dir.join("tsc"))
}

/// The file name of `path` if it is a plain file directly under `package/lib/`.
fn lib_file(path: &Path) -> Option<String> {
    let mut parts = path.components().map(|c| match c {
        std::path::Component::Normal(part) => part.to_str(),
        _ => None,
    });
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Some("package")), Some(Some("lib")), Some(Some(name)), None) => Some(name.to_owned()),
        _ => None,
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned digests are the lock file's, so tests and downloads run one compiler.
    #[test]
    fn pinned_digests_are_the_lock_files() {
        let lock = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/typescript/package-lock.json"),
        )
        .unwrap();
        let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
        for (_, _, package) in PACKAGES {
            let entry = &lock["packages"]
                [format!("node_modules/@typescript/typescript-{}", package.platform)];
            assert_eq!(entry["version"], VERSION, "{}", package.platform);
            assert_eq!(
                entry["integrity"], package.integrity,
                "{}",
                package.platform
            );
        }
    }

    /// Only plain files directly under `package/lib/` are unpacked: no traversal, no nesting.
    #[test]
    fn only_lib_files_unpack() {
        assert_eq!(lib_file(Path::new("package/lib/tsc")), Some("tsc".into()));
        assert_eq!(
            lib_file(Path::new("package/lib/lib.es5.d.ts")),
            Some("lib.es5.d.ts".into())
        );
        for path in [
            "package/README.md",
            "package/lib/../../x",
            "package/lib/a/b",
            "/package/lib/tsc",
            "other/lib/tsc",
        ] {
            assert_eq!(lib_file(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn tarball_address_follows_npm() {
        let package = PACKAGES[0].2;
        assert_eq!(
            tarball_url(&package, "https://registry.npmjs.org/"),
            "https://registry.npmjs.org/@typescript/typescript-linux-x64/-/typescript-linux-x64-7.0.2.tgz"
        );
    }
}
