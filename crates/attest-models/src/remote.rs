//! Calls to remote model services (an OpenAI-compatible chat or embeddings endpoint, a rerank service, a TEI
//! server): every one goes out with the same headers — the service's bearer token when one is configured, the
//! request id, and the trace context — so a call can be followed from the request that caused it into the
//! service's own logs, whichever model it asks.

/// The endpoint of a configured `url`: a URL that already ends in `names_it` (the API's own path, or its last
/// part) is kept as given; a base URL (`http://vllm:8000`, with or without a trailing `/`) gets `path`.
pub fn endpoint(url: &str, names_it: &str, path: &str) -> String {
    let base = url.trim().trim_end_matches('/');
    if base.ends_with(names_it) {
        base.to_string()
    } else {
        format!("{base}{path}")
    }
}

/// A POST to `endpoint` on `agent` with the headers every model call carries. An empty `api_key` sends none (an
/// empty `ATTEST__…__API_KEY` is how a deployment turns a key off).
pub fn post(agent: &ureq::Agent, endpoint: &str, api_key: Option<&str>) -> ureq::Request {
    let mut request = agent.post(endpoint);
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        request = request.set("Authorization", &format!("Bearer {key}"));
    }
    if let Some(id) = attest_telemetry::request_id::current() {
        request = request.set(attest_telemetry::request_id::HEADER, &id);
    }
    for (name, value) in attest_telemetry::traces::http_headers() {
        request = request.set(&name, &value);
    }
    request
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    use super::*;

    /// The header lines of one request sent by `send` to a one-shot server on loopback.
    fn headers_of(key: Option<&str>) -> Vec<String> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1/x", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut lines = Vec::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                lines.push(line.trim().to_ascii_lowercase());
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .unwrap();
            lines
        });
        let agent = ureq::AgentBuilder::new().build();
        attest_telemetry::request_id::with_current("req-7", || {
            post(&agent, &endpoint, key).send_string("{}").unwrap();
        });
        server.join().unwrap()
    }

    #[test]
    fn a_call_carries_the_key_and_the_request_id_and_an_empty_key_is_not_sent() {
        let with_key = headers_of(Some("s3cret"));
        assert!(
            with_key.contains(&"authorization: bearer s3cret".to_string()),
            "{with_key:?}"
        );
        let id = format!(
            "{}: req-7",
            attest_telemetry::request_id::HEADER.to_ascii_lowercase()
        );
        assert!(with_key.contains(&id), "{with_key:?}");
        for key in [None, Some("")] {
            let without = headers_of(key);
            assert!(
                !without.iter().any(|h| h.starts_with("authorization:")),
                "{without:?}"
            );
        }
    }
}
