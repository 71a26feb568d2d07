//! A plain HTTP/1.0 GET for the tests of ferry's side ports (`/healthz`, `/readyz`, `/metrics`), so that no HTTP
//! client crate is needed.

use std::io::{Read, Write};

/// `GET path` on `addr`: (status code, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let (code, _, body) = http_response(addr, path);
    (code, body)
}

/// `GET path` on `addr`: (status code, response head (status line and headers), body).
pub fn http_response(addr: &str, path: &str) -> (u16, String, String) {
    http_response_as(addr, path, addr)
}

/// `GET path` on `addr` with `host` as the Host header (what a browser sends for the name it resolved):
/// (status code, response head, body).
pub fn http_response_as(addr: &str, path: &str, host: &str) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response.as_str(), ""));
    (code, head.to_string(), body.to_string())
}
