//! The hardening steps on Unix systems other than Linux (macOS, the BSDs): they have no
//! namespaces, capability sets or seccomp, so a worker is a separate process with its
//! descriptors closed and its resource limits set, and says so in the probe. Not compiled or
//! tested on these project machines, which have only Linux targets.

use super::HardenError;

/// Why the Linux-only steps do not apply, as the probe reports it.
const NOT_LINUX: &str = "none: not Linux (no namespaces, capabilities or seccomp here); the worker is a separate process with resource limits";

/// Closes every descriptor from `first` up to the open-files hard limit (a descriptor at or
/// above a lowered soft limit may still be open), at most 2^20 (no `close_range` on every
/// one of these systems).
pub(super) fn close_from(first: u32) -> std::io::Result<()> {
    let limits = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    // No maximum means unlimited; the hard limit is never below the soft one.
    let limit = limits.maximum.unwrap_or(1 << 20).min(1 << 20);
    for descriptor in u64::from(first)..limit {
        #[allow(
            unsafe_code,
            reason = "closing raw descriptors no Rust object owns: the worker has opened nothing yet"
        )]
        // SAFETY: called at the start of the worker, before it opens or owns any descriptor
        // above 2; a descriptor that is not open answers EBADF, which is ignored.
        unsafe {
            libc::close(descriptor as libc::c_int);
        }
    }
    Ok(())
}

/// Nothing to drop: no capability sets here, and the worker runs as its own user anyway.
pub(super) fn drop_privileges() -> Result<(), HardenError> {
    Ok(())
}

/// No seccomp here.
pub(super) fn install_filters() -> Result<(), HardenError> {
    Ok(())
}

/// No namespaces here.
pub(super) fn enter_namespaces() -> String {
    NOT_LINUX.to_owned()
}

/// Without a user namespace the worker may not chroot: no root is made.
pub(super) fn make_empty_root() -> std::io::Result<std::path::PathBuf> {
    Err(std::io::Error::other("not Linux"))
}

/// Without a user namespace the worker may not chroot: its root stays.
pub(super) fn enter_empty_root(_root: std::io::Result<std::path::PathBuf>) -> String {
    "unchanged (not Linux)".to_owned()
}

/// Metadata of a path, for the probe.
pub(super) fn stat_with_empty_path_flag(path: &str) -> std::io::Result<()> {
    std::fs::metadata(path).map(drop)
}

/// No portable undumpable flag: says so once, at start.
pub(super) fn protect_supervisor() -> Result<(), HardenError> {
    tracing::warn!(
        "this OS has no undumpable flag sdkbox sets: processes of the same user can inspect the server and its environment"
    );
    Ok(())
}

/// No capability sets here.
pub(super) fn capabilities_left() -> String {
    "not applicable (not Linux)".to_owned()
}
