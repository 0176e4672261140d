//! Compiling a component under a deadline.
//!
//! Cranelift cannot be interrupted, and its time grows faster than linearly
//! with some shapes of code, so the static limits of `complexity` can only
//! be a coarse first check: the interpreters inside Python and JavaScript
//! agents have functions of 3,000 to 4,300 blocks that compile in seconds,
//! while generated code of the same size can take minutes. The `agentsite`
//! binary therefore compiles in a child process of its own (the same
//! executable, run as [`WORKER_ARG`]) that it kills when the deadline
//! passes: the artifact comes back over a pipe and is loaded like the cached
//! ones. The child shares the node's engine settings, so its code is the
//! node's; it dies with the thread that waits for it.
//!
//! A library embedding the node without calling [`use_worker`] compiles on
//! the calling thread, bounded by the static limits only.

use super::ComponentError;
use super::engine::{Capacity, engine_config};
use super::mode::Mode;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;
use wasmtime::Engine;

/// The first argument that makes the `agentsite` executable a compiler.
pub const WORKER_ARG: &str = "__compile-worker";

/// Exit code of a worker that was handed something it cannot compile.
const INVALID: i32 = 2;

/// Most bytes of compiled code taken back from a worker. Compiled code is a
/// few times the size of the component, which is at most 64 MiB.
const MAX_ARTIFACT: u64 = 1 << 30;

/// Most bytes of a worker's error message kept.
const MAX_REASON: u64 = 4096;

static WORKER: OnceLock<PathBuf> = OnceLock::new();

/// Makes every later compile of this process run in `executable` (an
/// `agentsite` binary of this build) under the node's compile deadline.
pub fn use_worker(executable: PathBuf) {
    let _ = WORKER.set(executable);
}

/// Compiles `bytes` into serialized code for `engine` (the engine of
/// `mode`): in the worker when one is set, else on this thread. Either way
/// it waits seconds, so on a multi-threaded async runtime the thread's
/// other tasks move elsewhere meanwhile.
pub(super) fn precompile(
    engine: &Engine,
    mode: Mode,
    bytes: &[u8],
    deadline: Duration,
) -> Result<Vec<u8>, ComponentError> {
    let compile = || match WORKER.get() {
        Some(executable) => in_worker(executable, mode, bytes, deadline),
        None => engine
            .precompile_component(bytes)
            .map_err(|e| ComponentError::Invalid(super::one_line(&e))),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(compile)
        }
        _ => compile(),
    }
}

fn in_worker(
    executable: &Path,
    mode: Mode,
    bytes: &[u8],
    deadline: Duration,
) -> Result<Vec<u8>, ComponentError> {
    let mut command = Command::new(executable);
    command
        .arg(WORKER_ARG)
        .arg(mode.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        command.pre_exec(|| {
            // A node that dies (or a thread that stops waiting) leaves no
            // compiler burning its cores.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        ComponentError::Compiler(format!("cannot start {}: {e}", executable.display()))
    })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ComponentError::Compiler(
            "the compiler's pipes are missing".into(),
        ));
    };
    let (done, finished) = mpsc::channel();
    let output = std::thread::scope(|scope| {
        // The pipes are drained while the component is written, so that a
        // worker that answers early (an invalid component) never blocks.
        scope.spawn(move || {
            // A worker that stops reading has failed; its exit says why.
            let _ = stdin.write_all(bytes);
        });
        let reason = scope.spawn(move || {
            let mut reason = String::new();
            let _ = stderr.take(MAX_REASON).read_to_string(&mut reason);
            reason
        });
        scope.spawn(move || {
            let mut artifact = Vec::new();
            let read = stdout
                .take(MAX_ARTIFACT)
                .read_to_end(&mut artifact)
                .map(|_| artifact);
            let _ = done.send(read);
        });
        let output = match finished.recv_timeout(deadline) {
            Ok(read) => Ok(read),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                Err(ComponentError::CompileDeadline(deadline))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                Err(ComponentError::Compiler("its output was lost".into()))
            }
        };
        // Killing closes the pipes, so every thread above ends.
        let status = child.wait();
        let reason = reason.join().unwrap_or_default();
        (output, status, reason)
    });
    let (output, status, reason) = output;
    let artifact =
        output?.map_err(|e| ComponentError::Compiler(format!("reading its output: {e}")))?;
    let status = status.map_err(|e| ComponentError::Compiler(format!("waiting for it: {e}")))?;
    let reason = reason.trim().replace('\n', " ");
    match status.code() {
        Some(0) => Ok(artifact),
        Some(INVALID) => Err(ComponentError::Invalid(reason)),
        _ if reason.is_empty() => Err(ComponentError::Compiler(format!("the compiler {status}"))),
        _ => Err(ComponentError::Compiler(format!(
            "the compiler {status}: {reason}"
        ))),
    }
}

/// The worker's side: compiles the component on stdin with the node's
/// engine settings for the mode named after [`WORKER_ARG`], and writes the
/// serialized code to stdout. Exits 2 with a one-line reason on stderr for a
/// component that does not compile.
pub fn worker_main() -> std::process::ExitCode {
    let named = std::env::args().nth(2);
    let Some(mode) = named.as_deref().and_then(Mode::named) else {
        eprintln!("the compiler needs a mode (synchronous or concurrent), not {named:?}");
        return std::process::ExitCode::FAILURE;
    };
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut bytes) {
        eprintln!("cannot read the component: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let engine = match Engine::new(&engine_config(Capacity::OneShot, mode)) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("cannot create the WebAssembly engine: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match engine.precompile_component(&bytes) {
        Ok(artifact) => match std::io::stdout().lock().write_all(&artifact) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cannot write the compiled code: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("{}", super::one_line(&e));
            std::process::ExitCode::from(INVALID as u8)
        }
    }
}
