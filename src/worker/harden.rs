//! Defence in depth for a worker process: the engine is not the only boundary, and this is
//! what a script that escaped the isolate would find. In order, before the worker serves:
//!
//! 1. every descriptor it inherited but its three standard ones is closed ([`close_inherited`],
//!    first thing in the process);
//! 2. it leaves for a user namespace and an empty network namespace of its own, where the
//!    kernel allows unprivileged ones (not in Docker's default profile, say): it then holds no
//!    capability over the host and has no network device at all; where it cannot, it goes on
//!    without, and the probe says so;
//! 3. every capability is dropped (bounding, effective, permitted, inheritable, ambient), and
//!    no new privileges can be gained;
//! 4. resource limits: address space, CPU time, open files, no core dumps;
//! 5. a seccomp **allow-list** of the system calls the engine and its event loop use; every
//!    other call fails with EPERM. Not allowed: opening any file (read or write), sockets,
//!    running programs, processes (`clone` only with `CLONE_THREAD`; `clone3` answers ENOSYS
//!    so the C library falls back to `clone`), `ptrace`, `process_vm_*`, `io_uring_*`,
//!    `unlink`, `rename`, `mkdir`, `symlink`, `truncate`, `kill` of other processes.
//!
//! The supervisor, for its part, is not dumpable (see `protect_supervisor`), so a process of the
//! same user can neither `ptrace` it nor read its `/proc/<pid>/environ`, where the secret came
//! from (removing the variable would not help: that file shows the process's original
//! environment block, whatever `unsetenv` does later).

use std::collections::BTreeMap;

use rustix::process::{Resource, Rlimit, setrlimit};
use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
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
    #[allow(
        unsafe_code,
        reason = "close_range has no safe binding; it runs before the process has opened anything"
    )]
    // SAFETY: called at the start of the worker, before it opens or owns any descriptor above
    // 2, so no Rust object refers to the descriptors this closes.
    let closed = unsafe { libc::close_range(3, u32::MAX, 0) };
    if closed == 0 {
        Ok(())
    } else {
        Err(HardenError::Syscall {
            step: "close inherited descriptors",
            source: std::io::Error::last_os_error(),
        })
    }
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
    let namespaces = enter_namespaces();
    drop_capabilities().map_err(step("drop capabilities"))?;
    rustix::thread::set_no_new_privs(true).map_err(step("set no_new_privs"))?;
    let limit = |n: u64| Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    setrlimit(Resource::As, limit(limits.address_space_bytes))
        .map_err(step("limit address space"))?;
    setrlimit(Resource::Cpu, limit(limits.cpu_seconds)).map_err(step("limit CPU time"))?;
    setrlimit(Resource::Nofile, limit(limits.open_files)).map_err(step("limit open files"))?;
    setrlimit(Resource::Core, limit(0)).map_err(step("disable core dumps"))?;
    let install = |program: BpfProgram| {
        seccompiler::apply_filter_all_threads(&program)
            .map_err(|e| HardenError::Seccomp(e.to_string()))
    };
    install(allow_list()?)?;
    install(clone3_unsupported()?)?;
    Ok(Isolation { namespaces })
}

/// Makes the supervisor undumpable: no process of its user can `ptrace` it or read its
/// memory or `/proc/<pid>/environ`, where the provider secret came from.
pub fn protect_supervisor() -> Result<(), HardenError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| HardenError::Syscall {
            step: "make the supervisor undumpable",
            source: e.into(),
        },
    )
}

/// Leaves for a new user namespace and an empty network namespace; says what happened.
fn enter_namespaces() -> String {
    #[allow(
        unsafe_code,
        reason = "unshare has no safe binding in rustix; the flags used here are sound"
    )]
    // SAFETY: the unsafety of unshare is CLONE_FILES (descriptor tables diverging between
    // threads), which is not used; the worker is single-threaded here.
    let entered =
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) };
    match entered {
        Ok(()) => "user+network".to_owned(),
        Err(e) => format!("none: the kernel refused them ({e}); the other steps still apply"),
    }
}

fn drop_capabilities() -> rustix::io::Result<()> {
    for capability in CapabilitySet::all().iter() {
        // Needs CAP_SETPCAP, which an unprivileged worker lacks; it has nothing to drop then.
        let _ = rustix::thread::remove_capability_from_bounding_set(capability);
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none)
}

fn seccomp_error(e: seccompiler::BackendError) -> HardenError {
    HardenError::Seccomp(e.to_string())
}

fn arch() -> TargetArch {
    if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::x86_64
    }
}

fn eq(arg: u8, value: u64) -> Result<SeccompCondition, HardenError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, value)
        .map_err(seccomp_error)
}

/// `arg & mask == value`.
fn masked(arg: u8, mask: u64, value: u64) -> Result<SeccompCondition, HardenError> {
    SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(mask),
        value,
    )
    .map_err(seccomp_error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, HardenError> {
    SeccompRule::new(conditions).map_err(seccomp_error)
}

/// A rule that matches when argument `arg` equals one of `values`.
fn arg_is(arg: u8, values: &[u64]) -> Result<Vec<SeccompRule>, HardenError> {
    values
        .iter()
        .map(|&value| rule(vec![eq(arg, value)?]))
        .collect()
}

/// The system calls a worker may make, measured with strace over the engine's whole life
/// (runtime creation and restore, scripts, timers, requests, errors, memory and stack
/// limits, termination); anything else fails with EPERM.
fn allow_list() -> Result<BpfProgram, HardenError> {
    let anything = || Vec::new();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [
        // memory
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_madvise,
        libc::SYS_brk,
        // threads and their synchronisation
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_rseq,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_capget,
        libc::SYS_sched_getaffinity,
        libc::SYS_sched_yield,
        libc::SYS_exit,
        libc::SYS_exit_group,
        // signals (stack overflow guard pages, abort)
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        // time and randomness
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
        // the socket to the supervisor, the event loop, and descriptors already open
        libc::SYS_read,
        libc::SYS_readv,
        libc::SYS_write,
        libc::SYS_writev,
        libc::SYS_recvfrom,
        libc::SYS_recvmsg,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_close,
        libc::SYS_lseek,
        libc::SYS_fstat,
        libc::SYS_epoll_create1,
        libc::SYS_epoll_ctl,
        libc::SYS_epoll_pwait,
        libc::SYS_eventfd2,
        libc::SYS_ppoll,
        // more filters, which can only refuse more (the second one below needs it)
        libc::SYS_seccomp,
    ]
    .into_iter()
    .map(|call| (call, anything()))
    .collect();
    #[cfg(target_arch = "x86_64")]
    for call in [libc::SYS_epoll_wait, libc::SYS_poll, libc::SYS_getrlimit] {
        rules.insert(call, anything());
    }
    // Threads only: a `clone` without CLONE_THREAD would be a new process.
    let thread = libc::CLONE_THREAD as u64;
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![masked(0, thread, thread)?])?],
    );
    // Thread names, the C library's names for its mappings, and no_new_privs (set again
    // when a filter is installed); nothing else of prctl.
    const PR_SET_VMA: u64 = 0x53564d41;
    let prctl = [
        libc::PR_SET_NAME as u64,
        libc::PR_GET_NAME as u64,
        libc::PR_SET_NO_NEW_PRIVS as u64,
        PR_SET_VMA,
    ];
    rules.insert(libc::SYS_prctl, arg_is(0, &prctl)?);
    // Reading a limit of this process (the stack's, at thread start), never setting one.
    rules.insert(libc::SYS_prlimit64, vec![rule(vec![eq(0, 0)?, eq(2, 0)?])?]);
    // Signals only to this process's own threads (abort): not to the supervisor or others.
    let me = u64::from(std::process::id());
    rules.insert(libc::SYS_tgkill, vec![rule(vec![eq(0, me)?])?]);
    // Memory that is never executable: the engine interprets, nothing is compiled at run time.
    let no_exec = |arg| masked(arg, libc::PROT_EXEC as u64, 0);
    rules.insert(libc::SYS_mmap, vec![rule(vec![no_exec(2)?])?]);
    rules.insert(libc::SYS_mprotect, vec![rule(vec![no_exec(2)?])?]);
    // Metadata of descriptors already open only, never of a path.
    let empty_path = libc::AT_EMPTY_PATH as u64;
    rules.insert(
        libc::SYS_statx,
        vec![rule(vec![masked(2, empty_path, empty_path)?])?],
    );
    rules.insert(
        libc::SYS_newfstatat,
        vec![rule(vec![masked(3, empty_path, empty_path)?])?],
    );
    // fcntl for descriptor flags and duplicates only: no F_SETOWN / F_SETSIG (signals to
    // another process) and no O_ASYNC.
    let mut fcntl: Vec<SeccompRule> = [
        libc::F_GETFD,
        libc::F_SETFD,
        libc::F_GETFL,
        libc::F_DUPFD_CLOEXEC,
    ]
    .into_iter()
    .map(|cmd| rule(vec![eq(1, cmd as u64)?]))
    .collect::<Result<_, _>>()?;
    fcntl.push(rule(vec![
        eq(1, libc::F_SETFL as u64)?,
        masked(2, libc::O_ASYNC as u64, 0)?,
    ])?);
    rules.insert(libc::SYS_fcntl, fcntl);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch(),
    )
    .map_err(seccomp_error)?;
    filter.try_into().map_err(seccomp_error)
}

/// A second filter: `clone3` answers ENOSYS, so that the C library creates threads with
/// `clone`, whose flags the allow-list can check (`clone3` passes them in memory).
fn clone3_unsupported() -> Result<BpfProgram, HardenError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [(libc::SYS_clone3, Vec::new())].into();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch(),
    )
    .map_err(seccomp_error)?;
    filter.try_into().map_err(seccomp_error)
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
    /// Opening a file for reading (`/proc/self/status`).
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
        read_file: outcome(std::fs::read("/proc/self/status").map(drop)),
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
        capabilities: match rustix::thread::capabilities(None) {
            Ok(sets) if sets.effective.is_empty() => "none".to_owned(),
            Ok(sets) => format!("{:?}", sets.effective),
            Err(e) => format!("unknown: {e}"),
        },
    };
    Ok(probe)
}
