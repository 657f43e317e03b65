//! Defence in depth for a worker process: the engine is not the only boundary, and this is
//! what a script that escaped the isolate would find. In order, before the worker serves:
//!
//! 1. every descriptor it inherited but its three standard ones is closed ([`close_inherited`],
//!    first thing in the process);
//! 2. (Linux) it leaves for a user namespace and an empty network namespace of its own, where
//!    the kernel allows unprivileged ones (not in Docker's default profile, say): it then holds
//!    no capability over the host and has no network device at all; where it cannot, it goes
//!    on without, and the probe says so;
//! 3. (Linux) every capability is dropped (bounding, effective, permitted, inheritable,
//!    ambient), and no new privileges can be gained;
//! 4. resource limits: address space, CPU time, open files, no core dumps;
//! 5. (Linux) a seccomp **allow-list** of the system calls the engine and its event loop use;
//!    every other call fails with EPERM. Not allowed: opening any file (read or write),
//!    sockets, running programs, processes (`clone` only with `CLONE_THREAD`; `clone3` answers
//!    ENOSYS so the C library falls back to `clone`), `ptrace`, `process_vm_*`, `io_uring_*`,
//!    `unlink`, `rename`, `mkdir`, `symlink`, `truncate`, `kill` of other processes.
//!
//! The supervisor, for its part, is not dumpable on Linux (see `protect_supervisor`), so a
//! process of the same user can neither `ptrace` it nor read its `/proc/<pid>/environ`, where
//! the secret came from (removing the variable would not help: that file shows the process's
//! original environment block, whatever `unsetenv` does later).
//!
//! Steps 2, 3 and 5 and the undumpable supervisor use Linux interfaces (`linux.rs`); on other
//! Unix systems (`elsewhere.rs`) a worker is a separate process with steps 1 and 4 only, and
//! the probe says so.

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(not(target_os = "linux"))]
#[path = "elsewhere.rs"]
mod os;

use rustix::process::{Resource, Rlimit, setrlimit};
use serde::Serialize;
use thiserror::Error;

/// Resource limits of a worker process.
#[derive(Debug, Clone, Copy)]
pub struct ProcessLimits {
    /// Address space (RLIMIT_AS), in bytes.
    pub address_space_bytes: u64,
    /// CPU time over the worker's life (RLIMIT_CPU), in seconds.
    pub cpu_seconds: u64,
    /// Open files (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Threads of the worker's user, all its processes together (RLIMIT_NPROC; the kernel
    /// does not apply it to root, so the supervisor also counts a running worker's threads).
    pub threads: u64,
}

/// A hardening step that failed; the worker refuses to run without it.
#[derive(Debug, Error)]
pub enum HardenError {
    /// A system call refused.
    #[error("cannot {step}: {source}")]
    Syscall {
        /// What was being set up.
        step: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The seccomp filter could not be built or installed.
    #[error("cannot install the seccomp filter: {0}")]
    Seccomp(String),
}

/// What hardening achieved beyond what it requires.
#[derive(Debug, Clone, Serialize)]
pub struct Isolation {
    /// `user+network` when the worker left for namespaces of its own, otherwise why not.
    pub namespaces: String,
}

/// Closes every descriptor above the standard three. Call it first thing in the worker,
/// before anything of its own is open: what a supervisor's parent leaked to it (descriptors
/// without close-on-exec) must not reach a sandbox.
pub fn close_inherited() -> Result<(), HardenError> {
    os::close_from(3).map_err(|source| HardenError::Syscall {
        step: "close inherited descriptors",
        source,
    })
}

/// Applies every hardening step to this process, which must still be single-threaded (a
/// user namespace cannot be entered otherwise).
pub fn harden(limits: &ProcessLimits) -> Result<Isolation, HardenError> {
    let step = |step: &'static str| {
        move |e: rustix::io::Errno| HardenError::Syscall {
            step,
            source: e.into(),
        }
    };
    let root = os::make_empty_root();
    let namespaces = os::enter_namespaces();
    let root = os::enter_empty_root(root);
    os::drop_privileges()?;
    let limit = |n: u64| Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    // OpenBSD has no RLIMIT_AS (and macOS does not enforce it).
    #[cfg(not(target_os = "openbsd"))]
    setrlimit(Resource::As, limit(limits.address_space_bytes))
        .map_err(step("limit address space"))?;
    setrlimit(Resource::Cpu, limit(limits.cpu_seconds)).map_err(step("limit CPU time"))?;
    setrlimit(Resource::Nofile, limit(limits.open_files)).map_err(step("limit open files"))?;
    setrlimit(Resource::Core, limit(0)).map_err(step("disable core dumps"))?;
    setrlimit(Resource::Nproc, limit(limits.threads)).map_err(step("limit threads"))?;
    os::install_filters()?;
    Ok(Isolation {
        namespaces: format!("{namespaces}; root: {root}"),
    })
}

/// Makes the supervisor undumpable where the OS has the means (Linux): no process of its user
/// can `ptrace` it or read its memory or `/proc/<pid>/environ`, where the provider secret
/// came from.
pub fn protect_supervisor() -> Result<(), HardenError> {
    os::protect_supervisor()
}

/// What a hardened process can still do, for `sdkbox worker --probe` and the tests.
#[derive(Debug, Serialize)]
pub struct Probe {
    /// The namespaces it is in.
    pub namespaces: String,
    /// Opening a TCP socket.
    pub socket: String,
    /// Creating a file for writing.
    pub write_file: String,
    /// Opening a file for reading (`/proc/self/status`, or `/etc/passwd` without `/proc`).
    pub read_file: String,
    /// Reading the parent's environment, where a supervisor's secret would be.
    pub parent_environ: String,
    /// Running a program.
    pub exec: String,
    /// Creating a directory, renaming and removing a file made before hardening.
    pub mkdir: String,
    /// Renaming that file.
    pub rename: String,
    /// Removing it.
    pub unlink: String,
    /// Starting a thread (allowed: the engine needs threads; shows the probe works).
    pub thread: String,
    /// Capabilities left in the effective set.
    pub capabilities: String,
    /// Signalling the parent (the supervisor, in a pool) with signal 0.
    pub signal_parent: String,
    /// Asking for executable memory.
    pub exec_memory: String,
    /// Reading the metadata of a path (`/etc/passwd`).
    pub stat_path: String,
    /// The same with `AT_EMPTY_PATH` among the flags, which the allow-list lets through for
    /// descriptors: the path must still lead nowhere (the root is an empty directory).
    pub stat_path_flagged: String,
}

/// Maps one executable page (which the allow-list refuses).
fn exec_memory() -> std::io::Result<()> {
    use rustix::mm::{MapFlags, ProtFlags};
    #[allow(
        unsafe_code,
        reason = "mmap of a fresh anonymous page, unmapped at once; only the probe does this"
    )]
    // SAFETY: a new anonymous mapping at an address the kernel picks aliases nothing; it is
    // unmapped before this function returns and never read or written.
    unsafe {
        let page = rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            4096,
            ProtFlags::READ | ProtFlags::EXEC,
            MapFlags::PRIVATE,
        )?;
        rustix::mm::munmap(page, 4096)?;
    }
    Ok(())
}

/// A file every process may read before hardening.
fn readable_file() -> &'static str {
    if std::path::Path::new("/proc/self/status").exists() {
        "/proc/self/status"
    } else {
        "/etc/passwd"
    }
}

/// Hardens this process, then tries what a hardened worker must not be able to do.
pub fn probe(limits: &ProcessLimits) -> Result<Probe, HardenError> {
    let scratch = std::env::temp_dir().join(format!("sdkbox-probe-{}", std::process::id()));
    let existing = scratch.with_extension("existing");
    let _ = std::fs::write(&existing, b"made before hardening");
    let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    let isolation = harden(limits)?;
    let outcome = |r: std::io::Result<()>| match r {
        Ok(()) => "allowed".to_owned(),
        Err(e) => format!("refused: {e}"),
    };
    let probe = Probe {
        namespaces: isolation.namespaces,
        socket: outcome(std::net::TcpListener::bind("127.0.0.1:0").map(drop)),
        write_file: outcome(std::fs::File::create(&scratch).map(drop)),
        read_file: outcome(std::fs::read(readable_file()).map(drop)),
        parent_environ: outcome(std::fs::read(format!("/proc/{parent}/environ")).map(drop)),
        exec: outcome(std::process::Command::new("/bin/true").status().map(drop)),
        mkdir: outcome(std::fs::create_dir(scratch.with_extension("dir"))),
        rename: outcome(std::fs::rename(&existing, scratch.with_extension("moved"))),
        unlink: outcome(std::fs::remove_file(&existing)),
        thread: outcome(
            std::thread::spawn(|| ())
                .join()
                .map_err(|_| std::io::Error::other("the thread panicked")),
        ),
        signal_parent: outcome(
            rustix::process::Pid::from_raw(parent as i32)
                .ok_or_else(|| std::io::Error::other("no parent"))
                .and_then(|p| Ok(rustix::process::test_kill_process(p)?)),
        ),
        exec_memory: outcome(exec_memory()),
        stat_path: outcome(std::fs::metadata("/etc/passwd").map(drop)),
        stat_path_flagged: outcome(os::stat_with_empty_path_flag("/etc/passwd")),
        capabilities: os::capabilities_left(),
    };
    Ok(probe)
}
