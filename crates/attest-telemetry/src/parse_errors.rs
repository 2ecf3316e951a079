//! The answers hyper writes itself, before any route sees the request, get the one JSON error body too. A
//! request hyper cannot parse (headers over its buffer or over 100 of them: 431; a bad method, header or
//! version: 400; a URI too long: 414) is answered by hyper with a status line and `content-length: 0`, and no
//! hook to change it. [`JsonParseErrors`] wraps a connection and rewrites exactly that response as it is
//! written: the same status, `{"error": {"code", "message"}}`, and `connection: close` (hyper closes it).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use attest_proto::ErrorCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose automatic parse-error responses carry the JSON error body.
pub struct JsonParseErrors<IO> {
    inner: IO,
    /// A rewritten response being written: its bytes, how many are written, and the length of hyper's original
    /// (reported as written once the whole replacement is).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<IO> JsonParseErrors<IO> {
    pub fn new(inner: IO) -> Self {
        JsonParseErrors {
            inner,
            pending: None,
        }
    }

    pub fn get_ref(&self) -> &IO {
        &self.inner
    }
}

/// The JSON response replacing `head` when it is hyper's body-less answer to a request it could not parse.
fn rewritten(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let status: u16 = text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    let message = match status {
        431 => "request headers too large (too many, or too long)",
        414 => "request URI too long",
        400 => "malformed HTTP request",
        _ => return None,
    };
    let lower = text.to_ascii_lowercase();
    if !lower.ends_with("\r\n\r\n") || !lower.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let code = ErrorCode::from_http_fallback(status);
    let body =
        serde_json::json!({"error": {"code": code.as_str(), "message": message}}).to_string();
    let reason = text.lines().next()?.get(13..).unwrap_or("").trim();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<IO: AsyncWrite + Unpin> JsonParseErrors<IO> {
    /// Writes what is pending; `Ready(n)` with the original's length once all of it is written.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, written, original)) = self.pending.as_mut() {
            if *written == bytes.len() {
                let n = *original;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for JsonParseErrors<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            match rewritten(buf) {
                Some(bytes) => this.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        this.drive(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            let mut filled = bufs.iter().filter(|b| !b.is_empty());
            match (filled.next(), filled.next()) {
                (Some(only), None) if rewritten(only).is_some() => {}
                _ => return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            }
        }
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        Pin::new(this).poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_some() {
            if let Err(e) = std::task::ready!(this.drive(cx)) {
                return Poll::Ready(Err(e));
            }
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_body_less_parse_error_answers_are_rewritten() {
        let canned = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 01:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewritten(canned).unwrap()).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{out}"
        );
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("headers too large"));
        // A route's own answer (a body follows, or another status) is left alone.
        assert!(rewritten(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 57\r\n\r\n").is_none());
        assert!(rewritten(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(rewritten(b"{\"error\": 1}").is_none());
    }
}
