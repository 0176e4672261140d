//! The WASI 0.2 and 0.3 imports, configured so that an agent inherits nothing from
//! the host but what the policy grants it: the environment variables named in
//! its grant, the folders granted to it (preopened through cap-std, which
//! refuses `..`, absolute paths and symlinks that lead out of them), and
//! outgoing HTTP to allowed origins only. No arguments, sockets or name
//! lookup ever. Clocks and randomness work, and record their use in the
//! call's [`Sources`] (so do HTTP, and granted folders and variables):
//! a call that used none of them gives the same result on every node.
//! Stdout and stderr go to the call's [`GuestLog`].

pub mod exposure;
pub mod grant;
pub mod http_allow;

use super::guest_log::{GuestLog, Stream};
use super::limits::MAX_FIELDS_BYTES;
use super::{CallContext, CallPart, CallState};
use crate::audit::Denials;
use crate::capabilities::grant::Grants;
use crate::capabilities::sources::{self, Sources, Used, Watched};
use bytes::Bytes;
use grant::Access;
use http_allow::HttpPattern;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasmtime::component::Linker;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

/// Why a call could not be given what its grant names.
#[derive(Debug, thiserror::Error)]
#[error("cannot open granted folder {host} for {guest}: {reason}")]
pub struct FsUnavailable {
    host: String,
    guest: String,
    reason: String,
}

/// The WASI context of one call, made when the guest first reaches WASI.
///
/// Making one seeds two random generators and boxes the call's streams and
/// clocks (and wasmtime-wasi's builder does it twice), which is a tenth of
/// a warm call; a call that only computes (most tool calls) never needs it.
/// A grant of environment variables or folders makes it at once instead,
/// so that a folder that cannot be opened fails the call before it runs.
pub(crate) struct WasiState {
    ctx: Option<WasiCtx>,
    log: GuestLog,
    sources: Sources,
    /// The `insecure-seed` every call of the agent gets.
    seed: u128,
}

impl WasiState {
    /// The WASI state of one call of `agent` under `grants`, its output
    /// going to `log`, the sources it reads recorded in `sources`.
    pub(crate) fn new(
        agent: &crate::AgentId,
        log: &GuestLog,
        grants: &Grants,
        sources: &Sources,
    ) -> Result<WasiState, FsUnavailable> {
        let mut state = WasiState {
            ctx: None,
            log: log.clone(),
            sources: sources.clone(),
            seed: sources::insecure_seed(agent),
        };
        if !(grants.env.is_empty() && grants.fs.is_empty()) {
            // What the granted folders and variables hold is this node's:
            // the call counts as having read them.
            if !grants.fs.is_empty() {
                sources.record(Used::FILES);
            }
            if !grants.env.is_empty() {
                sources.record(Used::ENVIRONMENT);
            }
            state.ctx = Some(context(state.builder(), grants)?);
        }
        Ok(state)
    }

    /// The context, made now if the call has not used WASI before.
    fn ctx(&mut self) -> &mut WasiCtx {
        if self.ctx.is_none() {
            self.ctx = Some(self.builder().build());
        }
        self.ctx.as_mut().expect("made above")
    }

    /// A WASI context builder with nothing granted: stdout and stderr go to
    /// the call's log; no sockets or name lookup; clocks and random
    /// generators that record their use.
    fn builder(&self) -> WasiCtxBuilder {
        let sources = &self.sources;
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(GuestStdio::new(self.log.clone(), Stream::Stdout))
            .stderr(GuestStdio::new(self.log.clone(), Stream::Stderr))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(Watched::new(
                wasmtime_wasi::clocks::WallClock::new(),
                sources,
                Used::CLOCK,
            ))
            .monotonic_clock(Watched::new(
                wasmtime_wasi::clocks::MonotonicClock::default(),
                sources,
                Used::CLOCK,
            ))
            .secure_random(Watched::new(
                wasmtime_wasi::thread_rng(),
                sources,
                Used::RANDOM,
            ))
            .insecure_random(Watched::new(
                wasmtime_wasi::thread_rng(),
                sources,
                Used::RANDOM,
            ))
            .insecure_random_seed(self.seed);
        builder
    }

    /// Whether the call has used WASI (or was granted what makes it at once).
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.ctx.is_some()
    }
}

/// Builds the WASI context of one call under `grants` from `builder`.
fn context(mut builder: WasiCtxBuilder, grants: &Grants) -> Result<WasiCtx, FsUnavailable> {
    for name in &grants.env {
        // Read at each call, so the agent sees the node's current value.
        if let Ok(value) = std::env::var(name) {
            builder.env(name, value);
        }
    }
    for fs in &grants.fs {
        let perms = match fs.access {
            Access::ReadOnly => wasmtime_wasi::FsPerms::ReadOnly,
            Access::ReadWrite => wasmtime_wasi::FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&fs.host, &fs.guest, perms)
            .map_err(|e| FsUnavailable {
                host: fs.host.display().to_string(),
                guest: fs.guest.clone(),
                reason: format!("{e:#}"),
            })?;
    }
    Ok(builder.build())
}

/// Outgoing HTTP policy of one call: requests go out only to the origins
/// its grant allows, and never past the call's deadline. A redirect is a
/// response the guest must follow with a new request, so it is checked
/// like any other.
pub struct HttpPolicy {
    allowed: Vec<HttpPattern>,
    deadline: std::time::Instant,
    denials: Denials,
    sources: Sources,
}

impl HttpPolicy {
    pub(crate) fn new(
        allowed: Vec<HttpPattern>,
        deadline: std::time::Instant,
        denials: Denials,
        sources: Sources,
    ) -> Self {
        HttpPolicy {
            allowed,
            deadline,
            denials,
            sources,
        }
    }
}

type SendResult = Result<
    (
        http::Response<wasmtime_wasi_http::WasiBody>,
        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ),
    wasmtime_wasi_http::Error,
>;

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        // Refused here or not, the answer depends on this node's grant.
        self.sources.record(Used::HTTP);
        if !self.allowed.iter().any(|p| p.allows_uri(request.uri())) {
            self.denials
                .record("http", &format!("origin of {} not granted", request.uri()));
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let deadline = self.deadline;
        Box::new(async move {
            use http_body_util::BodyExt;
            // The guest is blocked in this host call, where epoch
            // interruption cannot reach it: the deadline is enforced here.
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let cap = |t: Option<std::time::Duration>| Some(t.map_or(left, |t| t.min(left)));
            let options = options.unwrap_or_default();
            let options = wasmtime_wasi_http::RequestOptions {
                connect_timeout: cap(options.connect_timeout),
                first_byte_timeout: cap(options.first_byte_timeout),
                between_bytes_timeout: cap(options.between_bytes_timeout),
            };
            let sent = tokio::time::timeout(
                left,
                wasmtime_wasi_http::default_send_request(request, Some(options)),
            )
            .await
            .map_err(|_| wasmtime_wasi_http::Error::ConnectionTimeout)?;
            let (response, io) = sent?;
            let result: SendResult = Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ));
            result
        })
    }
}

/// WASI's part of one call: the filesystem, environment, clocks and
/// output ([`WasiState`]), and outgoing HTTP under the call's grant.
pub(crate) struct Wasi {
    state: WasiState,
    http: WasiHttpCtx,
    hooks: HttpPolicy,
}

impl CallPart for Wasi {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<Wasi> {
        Ok(Wasi {
            state: WasiState::new(&call.agent, call.log, call.grants, call.sources)?,
            http: new_http_context(MAX_FIELDS_BYTES),
            hooks: HttpPolicy::new(
                call.grants.http.clone(),
                call.deadline,
                call.denials.clone(),
                call.sources.clone(),
            ),
        })
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)?;
        refuse_links_out_of_folders(linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.wasi.state.ctx(),
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.wasi.http,
            table: &mut self.table,
            hooks: &mut self.wasi.hooks,
        }
    }
}

/// The wasi-http state of one call: each set of header fields it builds
/// may hold at most `fields_limit` bytes (any agent can build them, granted
/// HTTP or not, so they count toward what a call makes the host hold).
fn new_http_context(fields_limit: usize) -> WasiHttpCtx {
    let mut http = WasiHttpCtx::new();
    http.set_field_size_limit(fields_limit);
    http
}

/// Links WASI 0.3 (wasmtime-wasi's and wasmtime-wasi-http's `p3`) for the
/// concurrent engine. It reaches the same [`WasiCtx`] and HTTP hooks as
/// WASI 0.2, so one grant governs both: the same folders, variables and
/// origins, no sockets, the same output log.
pub(crate) fn add_wasi_0_3_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p3::add_to_linker(linker)?;
    refuse_links_out_of_folders_0_3(linker)?;
    wasmtime_wasi_http::p3::add_to_linker(linker)
}

/// The `wasi:filesystem` interface of WASI 0.3 as wasmtime-wasi defines it.
const FILESYSTEM_TYPES_0_3: &str = "wasi:filesystem/types@0.3.0";

/// WASI 0.3's `descriptor.symlink-at`, refusing what
/// [`refuse_links_out_of_folders`] refuses for WASI 0.2.
fn refuse_links_out_of_folders_0_3(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime::component::{Accessor, Resource};
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystem, WasiFilesystemView as _};
    use wasmtime_wasi::p3::bindings::filesystem::types::{ErrorCode, HostDescriptorWithStore};
    linker.allow_shadowing(true);
    let defined = linker.instance(FILESYSTEM_TYPES_0_3)?.func_wrap_concurrent(
        "[method]descriptor.symlink-at",
        |accessor: &Accessor<CallState>,
         (folder, target, link): (Resource<Descriptor>, String, String)| {
            Box::pin(async move {
                if link_leaves_folder(&target, &link) {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let files: Accessor<CallState, WasiFilesystem> =
                    accessor.with_getter(|state: &mut CallState| state.filesystem());
                match WasiFilesystem::symlink_at(&files, folder, target, link).await {
                    Ok(()) => Ok((Ok(()),)),
                    Err(error) => Ok((Err(error.downcast()?),)),
                }
            })
        },
    );
    linker.allow_shadowing(false);
    defined
}

/// The `wasi:filesystem` interface as wasmtime-wasi defines it; components
/// built against any 0.2 version link to it.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Replaces `descriptor.symlink-at` with one that refuses a link whose
/// target leads out of the folder it is made in. cap-std never follows
/// such a link for the agent, but it would stay in the granted folder as a
/// trap for other programs of the host (`link -> ../../etc/passwd`).
fn refuse_links_out_of_folders(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::filesystem::WasiFilesystemView as _;
    use wasmtime_wasi::p2::bindings::filesystem::types::{Descriptor, ErrorCode, HostDescriptor};
    linker.allow_shadowing(true);
    let defined = linker.instance(FILESYSTEM_TYPES)?.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store, (folder, target, link): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                if link_leaves_folder(&target, &link) {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let mut view = store.data_mut().filesystem();
                match HostDescriptor::symlink_at(&mut view, folder, target, link).await {
                    Ok(()) => Ok((Ok(()),)),
                    Err(error) => Ok((Err(error.downcast()?),)),
                }
            })
        },
    );
    linker.allow_shadowing(false);
    defined
}

/// Whether a symlink at `link` (relative to an open folder) pointing at
/// `target` leads out of that folder: an absolute target, or one whose
/// `..` steps climb above the folder from the link's own place in it.
/// Links with `..` that stay inside (`sub/link -> ../file`) are fine.
fn link_leaves_folder(target: &str, link: &str) -> bool {
    use std::path::{Component, Path};
    // How deep the link's own folder is below the open folder.
    let mut depth: i64 = 0;
    let mut link_parts = Path::new(link).components().peekable();
    while let Some(part) = link_parts.next() {
        let last = link_parts.peek().is_none();
        match part {
            Component::Normal(_) if !last => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::Normal(_) | Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    for part in Path::new(target).components() {
        match part {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// A guest's stdout or stderr, written into its call's log.
#[derive(Clone)]
struct GuestStdio {
    log: GuestLog,
    stream: Stream,
}

impl GuestStdio {
    fn new(log: GuestLog, stream: Stream) -> Self {
        GuestStdio { log, stream }
    }
}

impl IsTerminal for GuestStdio {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStdio {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestStdio {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.log.write(self.stream, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for GuestStdio {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestStdio {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.log.write(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::grant::{Access, FsGrant};
    use super::{WasiState, link_leaves_folder};
    use crate::capabilities::grant::Grants;
    use crate::capabilities::guest_log::GuestLog;
    use crate::capabilities::sources::Sources;
    use crate::config::Limits;

    static AGENT: std::sync::LazyLock<crate::AgentId> =
        std::sync::LazyLock::new(|| crate::AgentId::of(b"test-agent"));

    fn log() -> GuestLog {
        GuestLog::new("test-agent".into(), 1024)
    }

    #[test]
    fn a_call_granted_nothing_makes_its_wasi_context_at_first_use() {
        let mut wasi = WasiState::new(
            &AGENT,
            &log(),
            &Grants::pure(Limits::default()),
            &Sources::default(),
        )
        .unwrap();
        assert!(!wasi.is_made());
        wasi.ctx();
        assert!(wasi.is_made());
    }

    #[test]
    fn granted_environment_or_folders_make_the_context_at_once() {
        let mut grants = Grants::pure(Limits::default());
        grants.env.push("PATH".into());
        assert!(
            WasiState::new(&AGENT, &log(), &grants, &Sources::default())
                .unwrap()
                .is_made()
        );

        let folder = tempfile::tempdir().unwrap();
        let mut grants = Grants::pure(Limits::default());
        grants.fs.push(FsGrant {
            host: folder.path().to_owned(),
            guest: "/data".into(),
            access: Access::ReadOnly,
        });
        assert!(
            WasiState::new(&AGENT, &log(), &grants, &Sources::default())
                .unwrap()
                .is_made()
        );
    }

    #[test]
    fn a_granted_folder_that_cannot_be_opened_fails_the_call_before_it_runs() {
        let folder = tempfile::tempdir().unwrap();
        let mut grants = Grants::pure(Limits::default());
        grants.fs.push(FsGrant {
            host: folder.path().join("gone"),
            guest: "/data".into(),
            access: Access::ReadOnly,
        });
        let error = WasiState::new(&AGENT, &log(), &grants, &Sources::default())
            .err()
            .unwrap();
        assert!(
            error.to_string().contains("cannot open granted folder"),
            "{error}"
        );
    }

    #[test]
    fn links_that_climb_out_are_told_from_those_that_stay_in() {
        assert!(link_leaves_folder("../../etc/passwd", "link"));
        assert!(link_leaves_folder("/etc/passwd", "link"));
        assert!(link_leaves_folder("../x", "link"));
        assert!(link_leaves_folder("sub/../../x", "link"));
        assert!(link_leaves_folder("../../x", "sub/link"));
        assert!(!link_leaves_folder("../x", "sub/link"));
        assert!(!link_leaves_folder("notes.txt", "link"));
        assert!(!link_leaves_folder("sub/./notes.txt", "link"));
    }
}
