//! The WASI 0.2 imports, configured so that an agent inherits nothing from
//! the host: no environment variables, no arguments, no preopened
//! directories (so the filesystem is empty), no sockets, no name lookup, and
//! outgoing HTTP refused. Clocks and randomness work. Stdout and stderr go to
//! the call's [`GuestLog`].

use super::guest_log::{GuestLog, Stream};
use crate::runtime::CallState;
use bytes::Bytes;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasmtime::component::Linker;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

/// Builds the WASI context of one call.
pub(crate) fn context(log: &GuestLog) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(GuestStdio::new(log.clone(), Stream::Stdout))
        .stderr(GuestStdio::new(log.clone(), Stream::Stderr))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}

/// Outgoing HTTP policy: every request is refused until grants exist.
#[derive(Default)]
pub struct DenyAllHttp;

impl WasiHttpHooks for DenyAllHttp {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
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
        tracing::warn!(uri = %request.uri(), "outgoing HTTP denied: not granted");
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

pub(crate) fn new_http_context() -> WasiHttpCtx {
    WasiHttpCtx::new()
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
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
