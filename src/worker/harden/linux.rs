//! The Linux steps of a worker's hardening: namespaces, capabilities, no new privileges, the
//! seccomp allow-list; and the undumpable supervisor.

use std::collections::BTreeMap;

use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::HardenError;

/// Closes every descriptor from `first` up, in one system call.
pub(super) fn close_from(first: u32) -> std::io::Result<()> {
    #[allow(
        unsafe_code,
        reason = "close_range has no safe binding; it runs before the process has opened anything"
    )]
    // SAFETY: called at the start of the worker, before it opens or owns any descriptor above
    // 2, so no Rust object refers to the descriptors this closes.
    // The system call itself: the C library's wrapper exists only in glibc 2.34 and later.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
    if closed == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Drops every capability and forbids gaining new privileges (which seccomp needs, too).
pub(super) fn drop_privileges() -> Result<(), HardenError> {
    let step = |step: &'static str| {
        move |e: rustix::io::Errno| HardenError::Syscall {
            step,
            source: e.into(),
        }
    };
    drop_capabilities().map_err(step("drop capabilities"))?;
    rustix::thread::set_no_new_privs(true).map_err(step("set no_new_privs"))
}

/// Installs the allow-list, then the filter that makes `clone3` unsupported.
pub(super) fn install_filters() -> Result<(), HardenError> {
    let install = |program: BpfProgram| {
        seccompiler::apply_filter_all_threads(&program)
            .map_err(|e| HardenError::Seccomp(e.to_string()))
    };
    install(allow_list()?)?;
    install(clone3_unsupported()?)
}

/// See [`super::protect_supervisor`].
pub(super) fn protect_supervisor() -> Result<(), HardenError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| HardenError::Syscall {
            step: "make the supervisor undumpable",
            source: e.into(),
        },
    )
}

/// The capabilities left in the effective set, for the probe.
pub(super) fn capabilities_left() -> String {
    match rustix::thread::capabilities(None) {
        Ok(sets) if sets.effective.is_empty() => "none".to_owned(),
        Ok(sets) => format!("{:?}", sets.effective),
        Err(e) => format!("unknown: {e}"),
    }
}

/// Leaves for a new user namespace and an empty network namespace; says what happened.
pub(super) fn enter_namespaces() -> String {
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

/// Makes an empty directory to become the process's root, in the working directory (a
/// worker's own temporary one): before the user namespace is entered, whose unmapped user
/// may create nothing. Searchable by anyone, readable and writable by nobody.
pub(super) fn make_empty_root() -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::current_dir()?.join(format!("root-{}", std::process::id()));
    std::fs::create_dir(&root)?;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o111))?;
    Ok(root)
}

/// Makes `root` (empty) the process's root, in the user namespace it has just entered (where
/// it may chroot): a path then leads nowhere, so even a call the allow-list lets through with
/// a path (`statx` with `AT_EMPTY_PATH` set, which the kernel still resolves for a non-empty
/// path) learns nothing of the files. Says what happened.
pub(super) fn enter_empty_root(root: std::io::Result<std::path::PathBuf>) -> String {
    let entered = root.and_then(|root| {
        rustix::process::chroot(&root)?;
        rustix::process::chdir("/")?;
        Ok(())
    });
    match entered {
        Ok(()) => "an empty directory".to_owned(),
        Err(e) => format!("unchanged ({e})"),
    }
}

/// `statx` of `path` with `AT_EMPTY_PATH` among its flags, for the probe: the raw system
/// call, so that no library's fallback hides what the kernel answered.
pub(super) fn stat_with_empty_path_flag(path: &str) -> std::io::Result<()> {
    let path = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
    let mut buffer = [0u8; 256];
    #[allow(
        unsafe_code,
        reason = "a raw statx into a local buffer larger than struct statx, for the probe only"
    )]
    // SAFETY: `path` is a valid C string and `buffer` outlives the call and is larger than
    // `struct statx` (256 bytes); the kernel writes nothing else.
    let answer = unsafe {
        libc::syscall(
            libc::SYS_statx,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_BASIC_STATS,
            buffer.as_mut_ptr(),
        )
    };
    match answer {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
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
    // The calling thread's own priority (`who` 0), and only to the lowest one, at which a
    // runtime is freed: never another process's, never higher (whatever RLIMIT_NICE allows).
    rules.insert(
        libc::SYS_setpriority,
        vec![rule(vec![
            eq(0, libc::PRIO_PROCESS as u64)?,
            eq(1, 0)?,
            eq(2, crate::sandbox::LOWEST_PRIORITY as u64)?,
        ])?],
    );
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
