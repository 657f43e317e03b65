//! Who is behind each HTTP request (its [`Principal`], put in the request's extensions for
//! the tools), and its fair share of the server: requests in flight and standalone event
//! streams bounded per principal, with part of each total kept for principals holding none.
//! A standalone stream that carries no message for a while is closed (clients open another),
//! so that idle streams cannot hold lanes for good. Past a share, 429 with `Retry-After`,
//! and the connection is closed, so that a refused client holds no lane either.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::client_address::ClientAddress;
use crate::fair::{Fairness, Principal, Refused, Share, ShareLimits, Shares};
use crate::signin::SignedIn;

/// The HTTP shares of a server.
pub struct HttpShares {
    requests: Arc<Shares>,
    streams: Arc<Shares>,
    stream_idle: Duration,
}

impl HttpShares {
    /// Shares of `max_connections` lanes within `fairness`.
    pub fn new(fairness: &Fairness, max_connections: usize) -> Self {
        // An eighth of the lanes is kept for callers with nothing in flight (new sessions).
        let reserve = max_connections / 8;
        Self {
            requests: Shares::new(
                "requests",
                ShareLimits {
                    total: max_connections,
                    per_principal: fairness.requests_per_caller,
                    reserve,
                },
            ),
            streams: Shares::new(
                "event streams",
                ShareLimits {
                    total: (max_connections / 2).max(1),
                    per_principal: fairness.streams_per_caller,
                    reserve,
                },
            ),
            stream_idle: fairness.stream_idle,
        }
    }

    /// The principal behind `request` (see [`Principal`]): who signed in, else the peer.
    fn principal(&self, request: &Request) -> Principal {
        // The user, not the client too: with dynamic client registration, one person could
        // otherwise be as many callers as clients they register.
        if let Some(who) = request.extensions().get::<Arc<SignedIn>>() {
            return Principal::user(&who.user());
        }
        match request.extensions().get::<ClientAddress>() {
            Some(ClientAddress(address)) => Principal::peer(*address),
            None => Principal::peer(std::net::Ipv4Addr::LOCALHOST.into()),
        }
    }
}

/// Names the request's principal and holds its shares until the response's body ends.
pub async fn fair_share(
    State(shares): State<Arc<HttpShares>>,
    mut request: Request,
    next: Next,
) -> Response {
    let who = shares.principal(&request);
    request.extensions_mut().insert(who.clone());
    let request_share = match shares.requests.try_take(&who) {
        Ok(share) => share,
        Err(refused) => return too_many(&refused, 1),
    };
    let stream = request.method() == Method::GET;
    let stream_share = match stream.then(|| shares.streams.try_take(&who)) {
        None => None,
        Some(Ok(share)) => Some(share),
        // A stream's share frees when one of the caller's streams closes: within its idle
        // time, not in a second.
        Some(Err(refused)) => return too_many(&refused, shares.stream_idle.as_secs().max(1)),
    };
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let idle = stream.then_some(shares.stream_idle);
    Response::from_parts(parts, held(body, (request_share, stream_share), idle))
}

/// 429 (the caller's share) or 503 (the server's total) saying which is used up, with
/// `Retry-After` in `retry_after` seconds, closing the connection.
fn too_many(refused: &Refused, retry_after: u64) -> Response {
    let (status, why) = match refused {
        Refused::Yours { .. } => (StatusCode::TOO_MANY_REQUESTS, "caller_share"),
        Refused::Total { .. } => (StatusCode::SERVICE_UNAVAILABLE, "requests"),
    };
    metrics::counter!("sdkbox_refused_total", "why" => why).increment(1);
    tracing::debug!(why, "refused a request past its share");
    let mut response = (status, format!("{refused}\n")).into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A response body holding its request's shares until it ends; an event stream's ends once
/// it has carried no message for `idle` (keep-alive comments and empty priming events are
/// not messages).
fn held(body: Body, shares: (Share, Option<Share>), idle: Option<Duration>) -> Body {
    use futures_util::StreamExt;
    let data = body.into_data_stream();
    let quiet_until = idle.map(|idle| tokio::time::Instant::now() + idle);
    let stream = futures_util::stream::unfold(
        (data, shares, quiet_until),
        move |(mut data, shares, quiet_until)| async move {
            let next = match quiet_until {
                Some(until) => tokio::select! {
                    next = data.next() => next,
                    _ = tokio::time::sleep_until(until) => {
                        tracing::debug!("closed an event stream that carried nothing");
                        None
                    }
                },
                None => data.next().await,
            }?;
            let quiet_until = match (&next, idle) {
                (Ok(bytes), Some(idle)) if carries_message(bytes) => {
                    Some(tokio::time::Instant::now() + idle)
                }
                _ => quiet_until,
            };
            Some((next, (data, shares, quiet_until)))
        },
    );
    Body::from_stream(stream)
}

/// Whether an event-stream frame carries a message: a `data:` line with something in it.
fn carries_message(frame: &[u8]) -> bool {
    frame.split(|b| *b == b'\n').any(|line| {
        line.strip_prefix(b"data:")
            .is_some_and(|data| data.iter().any(|b| !b.is_ascii_whitespace()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_data_lines_with_something_in_them_are_messages() {
        assert!(carries_message(b"id: 1\ndata: {\"jsonrpc\":\"2.0\"}\n\n"));
        assert!(!carries_message(b":\n\n"));
        assert!(!carries_message(b"id: 0\nretry: 3000\ndata:\n\n"));
        assert!(!carries_message(b"data: \n\n"));
    }
}
