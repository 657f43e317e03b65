//! Defence in depth for a worker process, applied once it has started: no new privileges,
//! resource limits, and a seccomp filter that refuses creating sockets, running programs and
//! opening files for writing. The engine is not the only boundary: if a script escaped the
//! isolate, this is what it would find.

use std::collections::BTreeMap;

use rustix::process::{Resource, Rlimit, setrlimit};
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

/// Applies every hardening step to this process.
pub fn harden(limits: &ProcessLimits) -> Result<(), HardenError> {
    let step = |step: &'static str| {
        move |e: rustix::io::Errno| HardenError::Syscall {
            step,
            source: e.into(),
        }
    };
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
    let program = seccomp_program()?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| HardenError::Seccomp(e.to_string()))
}

/// The filter: everything is allowed except the listed calls, which fail with EPERM.
fn seccomp_program() -> Result<BpfProgram, HardenError> {
    let err = |e: seccompiler::BackendError| HardenError::Seccomp(e.to_string());
    let write_flags = |arg: u8| -> Result<Vec<SeccompRule>, HardenError> {
        [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_CREAT,
            libc::O_TRUNC,
            libc::O_APPEND,
        ]
        .into_iter()
        .map(|flag| {
            let flag = flag as u64;
            let condition = SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .map_err(err)?;
            SeccompRule::new(vec![condition]).map_err(err)
        })
        .collect()
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_openat2,
    ] {
        rules.insert(call, Vec::new());
    }
    rules.insert(libc::SYS_openat, write_flags(2)?);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_open, write_flags(1)?);
        rules.insert(libc::SYS_creat, Vec::new());
    }
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::x86_64
    };
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    filter.try_into().map_err(err)
}

/// What a hardened process can still do, for `sdkbox worker --probe` and the tests.
#[derive(Debug, Serialize)]
pub struct Probe {
    /// Opening a TCP socket.
    pub socket: String,
    /// Creating a file for writing.
    pub write_file: String,
    /// Running a program.
    pub exec: String,
    /// Reading a file (allowed; shows the probe itself works).
    pub read_file: String,
}

/// Hardens this process, then tries what a hardened worker must not be able to do.
pub fn probe(limits: &ProcessLimits) -> Result<Probe, HardenError> {
    harden(limits)?;
    let outcome = |r: std::io::Result<()>| match r {
        Ok(()) => "allowed".to_owned(),
        Err(e) => format!("refused: {e}"),
    };
    let target = std::env::temp_dir().join(format!("sdkbox-probe-{}", std::process::id()));
    Ok(Probe {
        socket: outcome(std::net::TcpListener::bind("127.0.0.1:0").map(drop)),
        write_file: outcome(std::fs::File::create(&target).map(drop)),
        exec: outcome(std::process::Command::new("/bin/true").status().map(drop)),
        read_file: outcome(std::fs::read("/proc/self/status").map(drop)),
    })
}
