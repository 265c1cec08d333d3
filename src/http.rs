//! The one plain HTTP/1.1 listener capstan serves endpoints with (`/metrics` and the health
//! probes, [`crate::metrics::serve`]; catalog content, [`crate::discovery::content::serve`]):
//! accept in a spawned task, one task per connection, a synchronous handler per request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};

/// Binds `addr` and serves `handler` on it from a spawned task (HTTP/1.1, no TLS). Returns the
/// bound address (useful with port 0). Must be called inside a Tokio runtime. `what` names the
/// listener in the bind error (e.g. `--metrics-addr`) and `logs` in log lines (e.g. `metrics`).
///
/// # Errors
/// When the address cannot be bound (in use, no permission); the message names the address and
/// `what`.
pub async fn serve<B, F>(addr: SocketAddr, what: &str, logs: &'static str, handler: F) -> std::io::Result<SocketAddr>
where
    F: Fn(Request<Incoming>) -> Response<B> + Clone + Send + Sync + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr} ({what}): {e}")))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "{logs} listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let resp = handler(req);
                    async move { Ok::<_, Infallible>(resp) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "{logs} connection ended with an error");
                }
            });
        }
    });
    Ok(bound)
}
