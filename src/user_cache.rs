//! Where sdkbox keeps what it can rebuild but should not have to at every start: fetched specs,
//! operation embeddings, downloaded models. One root for all of them, so a container mounts
//! one volume and a user clears one directory.

use std::path::PathBuf;

/// `kind`'s directory under the root: `$SDKBOX_CACHE_DIR`, else the user's cache directory
/// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS) plus `sdkbox`.
/// `None` when there is no home to put it in.
pub fn dir(kind: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SDKBOX_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join(kind));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let base = if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Caches"))
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".cache")))
    };
    base.map(|b| b.join("sdkbox").join(kind))
}
