//! The HTTP listener: closer's own accept loop around hyper, because the edge
//! must hold under slow, half-open and idle connections, which `axum::serve`
//! does not bound (no header-read timeout, no request deadline, no cap on
//! connections, and a shutdown that waits for every connection however long).
//!
//! - At most `max_connections` connections are served at once; one over the
//!   cap is accepted and closed at once (shed, counted), so a flood can never
//!   use up the process's file descriptors.
//! - A request's head must arrive within `header_read_timeout`; the same
//!   timer closes a keep-alive connection left idle that long. Heads are
//!   capped at [`MAX_HEAD_BYTES`].
//! - Every request is answered within `request_timeout` (its body read
//!   included), with a 503 when the handler has not finished.
//! - On shutdown: stop accepting, ask every connection to finish its request
//!   and close, and drop whatever is still open at the `shutdown_grace`
//!   deadline. Nothing a client does can hold the process past it.
//!
//! It must never read a request body itself: the handlers decide whether a
//! body is worth reading (the webhook refuses unsigned requests first).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::server::HttpLimits;

/// The largest request head (request line and headers) read; GitHub's are
/// a few kilobytes. hyper's floor is 8 KiB.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `app` on `listener` until `shutdown` completes, then drains the
/// open connections for at most `limits.shutdown_grace`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing_tx, closing) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                };
                match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let connection = Connection { app: app.clone(), limits, closing: closing.clone(), _slot: slot };
                        connections.spawn(connection.serve(stream));
                    }
                    Err(_) => shed(stream),
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = closing_tx.send(true);
    drain(connections, limits).await;
}

/// Waits for the connections to finish, at most the grace period; then
/// drops what is left.
async fn drain(mut connections: JoinSet<()>, limits: HttpLimits) {
    let open = connections.len();
    tracing::info!(open, "HTTP: finishing open connections");
    let finished = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, finished)
        .await
        .is_err()
    {
        tracing::warn!(
            left = connections.len(),
            grace_secs = limits.shutdown_grace.as_secs(),
            "HTTP: connections still open at the shutdown deadline are dropped"
        );
        connections.shutdown().await;
    }
}

/// A failed `accept` (most often: out of file descriptors). Pausing keeps
/// the loop from spinning while the condition lasts.
async fn accept_failed(e: std::io::Error) {
    metrics::counter!("closer_http_accept_errors_total").increment(1);
    tracing::warn!(error = %e, "HTTP: accept failed");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// A connection over the cap: closed without reading a byte.
fn shed(stream: TcpStream) {
    metrics::counter!("closer_http_connections_shed_total").increment(1);
    tracing::debug!("HTTP: connection cap reached; connection closed");
    drop(stream);
}

/// One accepted connection and what it needs.
struct Connection {
    app: Router,
    limits: HttpLimits,
    closing: watch::Receiver<bool>,
    /// Held while the connection lives: its place under the cap.
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(mut self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let inner = TowerToHyperService::new(self.app.clone());
        let timeout = self.limits.request_timeout;
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let answer = inner.call(req);
            async move {
                match tokio::time::timeout(timeout, answer).await {
                    Ok(answer) => answer,
                    Err(_) => Ok(timed_out()),
                }
            }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .max_header_size(MAX_HEAD_BYTES)
            .max_buf_size(MAX_HEAD_BYTES)
            .serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => ended(result),
            _ = closing(&mut self.closing) => {
                // Finishes the request in flight (if any), then closes;
                // an idle connection closes at once.
                connection.as_mut().graceful_shutdown();
                ended(connection.await);
            }
        }
    }
}

/// Completes when the server starts shutting down.
async fn closing(signal: &mut watch::Receiver<bool>) {
    let _ = signal.wait_for(|closing| *closing).await;
}

fn ended(result: Result<(), hyper::Error>) {
    if let Err(e) = result {
        if e.is_timeout() {
            metrics::counter!("closer_http_header_timeouts_total").increment(1);
        }
        tracing::debug!(error = %e, "HTTP: connection ended");
    }
}

/// The answer to a request its handler did not finish in time.
fn timed_out() -> Response<Body> {
    metrics::counter!("closer_http_request_timeouts_total").increment(1);
    tracing::warn!("HTTP: request timed out");
    let mut response = Response::new(Body::from("request timed out\n"));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    response
}

/// Raises the soft limit on open files to the hard limit (as Go's runtime
/// does) and warns when even that cannot hold `max_connections` plus the
/// files closer needs besides (database, git, agents).
pub fn raise_file_limit(max_connections: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct passed.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if got != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let needed = max_connections as u64 + FILES_BESIDES_CONNECTIONS;
    if limit.rlim_cur < needed {
        tracing::warn!(
            open_files = limit.rlim_cur,
            needed,
            "the open-file limit is below [http] max_connections plus closer's own files: \
             lower max_connections or raise the limit (ulimit -n)"
        );
    }
}

/// Files closer keeps open besides HTTP connections, at most, roughly:
/// database connections, git and agent processes' pipes, logs.
const FILES_BESIDES_CONNECTIONS: u64 = 256;
