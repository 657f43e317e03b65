//! The temporary directories a server makes (the runtime snapshot's, each worker's home, the
//! type checker's) are named after the supervisor that owns them, so that one left behind by a supervisor that
//! died without cleaning up (SIGKILL, a crash) is found and removed by the next one.

use std::path::{Path, PathBuf};

/// The prefix of the snapshot's directory.
pub const SNAPSHOT: &str = "sdkbox-snapshot";
/// The prefix of a worker's home directory.
pub const WORKER: &str = "sdkbox-worker";
/// The prefix of the type checker's directory (its declarations, read-only).
pub const CHECKER: &str = "sdkbox-tsc";

/// A new temporary directory `{kind}-{pid of this process}-XXXX`.
pub fn create(kind: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("{kind}-{}-", std::process::id()))
        .tempdir()
}

/// Removes the directories of supervisors that are no longer running, in the temporary
/// directory; returns the ones removed.
pub fn remove_stale() -> Vec<PathBuf> {
    remove_stale_in(&std::env::temp_dir())
}

fn remove_stale_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = owner(&name.to_string_lossy()) else {
            continue;
        };
        if owner != std::process::id() && !alive(owner) {
            let path = entry.path();
            // The checker's directory is read-only: its files go only once it is writable.
            let _ = std::fs::set_permissions(
                &path,
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            );
            if std::fs::remove_dir_all(&path).is_ok() {
                tracing::info!(path = %path.display(), "removed a directory left by a supervisor that is gone");
                removed.push(path);
            }
        }
    }
    removed
}

/// Whether process `pid` exists: signal 0 checks without sending anything (EPERM means it
/// exists as another user's). Portable, unlike looking in `/proc`.
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// The pid in a name made by [`create`].
fn owner(name: &str) -> Option<u32> {
    let rest = [SNAPSHOT, WORKER, CHECKER]
        .iter()
        .find_map(|kind| name.strip_prefix(kind)?.strip_prefix('-'))?;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_what_dead_supervisors_left() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dead = dir.path().join("sdkbox-snapshot-4000000000-abc");
        let dead_worker = dir.path().join("sdkbox-worker-4000000001-x");
        let alive = dir
            .path()
            .join(format!("sdkbox-worker-{}-y", std::process::id()));
        let other = dir.path().join("sdkbox-notes");
        for path in [&dead, &dead_worker, &alive, &other] {
            std::fs::create_dir(path).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut removed = remove_stale_in(dir.path());
        removed.sort();
        assert_eq!(removed, vec![dead, dead_worker]);
        assert!(alive.exists() && other.exists());
    }
}
