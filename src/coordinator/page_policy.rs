//! The status page's two side doors, closed: its Content-Security-Policy and the Host it answers to.
//!
//! **CSP.** The page's inline `<style>` and `<script>` are allowed by their SHA-256 hashes, never by
//! `'unsafe-inline'`: were a backup name or reason ever to slip past the page's escaping as markup, its script
//! would not run. The hashes are of the *template's* blocks (computed once, when the
//! server starts), not of the rendered page's: a block that user data made would not be in the policy.
//!
//! **Host.** The page is served on loopback only and reached with `kubectl port-forward`, but a browser on the
//! operator's machine also lets any web site it visits send requests there: through DNS rebinding
//! (`evil.example` resolving to 127.0.0.1) such a request is same-origin for the attacker's page, which could
//! then read the JSON. Its `Host` is the attacker's name, so anything but a loopback name or address is
//! answered with 421 Misdirected Request. Pure: the status page's axum middleware calls [`is_loopback_host`].

use std::net::{Ipv4Addr, Ipv6Addr};

use sha2::{Digest, Sha256};

/// The policy for a page rendered from `template`: nothing from anywhere but its own inline style and script
/// (by hash) and fetches to its own origin.
pub fn content_security_policy(template: &str) -> String {
    let sources = |tag: &str| {
        let hashes: Vec<String> =
            inline_blocks(template, tag).map(|block| format!("'{}'", hash_source(block))).collect();
        if hashes.is_empty() { "'none'".to_string() } else { hashes.join(" ") }
    };
    format!(
        "default-src 'none'; style-src {}; script-src {}; connect-src 'self'; img-src 'self' data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        sources("style"),
        sources("script")
    )
}

/// `sha256-<base64>` of `content`, the CSP source expression a browser compares an inline block against
/// (the exact text between the tags).
pub fn hash_source(content: &str) -> String {
    format!("sha256-{}", base64(&Sha256::digest(content.as_bytes())))
}

/// The text of each `<tag>…</tag>` (no attributes on the opening tag: the template has none) in `html`.
pub fn inline_blocks<'a>(html: &'a str, tag: &str) -> impl Iterator<Item = &'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut rest = html;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let len = rest[start..].find(&close)?;
        let block = &rest[start..start + len];
        rest = &rest[start + len + close.len()..];
        Some(block)
    })
}

/// Standard base64 with padding (RFC 4648 §4), as CSP hash sources are written. Small enough not to be worth a
/// dependency.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Whether a request's `Host` (or absolute-form authority) names this machine's loopback: `localhost`, an
/// IPv4 loopback address or `[::1]`, with or without a port. No name is resolved: a name other than
/// `localhost` is exactly what a DNS-rebinding page sends.
pub fn is_loopback_host(host: &str) -> bool {
    let (loopback, port) = match host.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((ip, port)) => (ip.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()), port),
            None => return false,
        },
        None => {
            let (name, port) = host.find(':').map_or((host, ""), |at| host.split_at(at));
            let loopback =
                name.eq_ignore_ascii_case("localhost") || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
            (loopback, port)
        }
    };
    let port_ok = port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok());
    loopback && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_rfc_4648_vectors_and_a_known_hash() {
        for (input, encoded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(base64(input.as_bytes()), encoded, "{input:?}");
        }
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        // `echo -n '' | openssl dgst -sha256 -binary | base64`
        assert_eq!(hash_source(""), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }

    #[test]
    fn the_policy_lists_each_inline_block_by_hash_and_nothing_inline_else() {
        let html = "<style>a{}</style><p>x</p><script>one()</script><script>two()</script>";
        let policy = content_security_policy(html);
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        let style = format!("style-src '{}';", hash_source("a{}"));
        let script = format!("script-src '{}' '{}';", hash_source("one()"), hash_source("two()"));
        assert!(policy.contains(&style) && policy.contains(&script), "{policy}");
        let none = content_security_policy("<p>no code</p>");
        assert!(none.contains("style-src 'none';") && none.contains("script-src 'none';"), "{none}");
    }

    #[test]
    fn only_loopback_hosts_are_accepted() {
        for ok in ["localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:38211", "127.1.2.3:1", "[::1]", "[::1]:8080"]
        {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            ":8080",
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "0.0.0.0",
            "[::]:8080",
            "[::ffff:127.0.0.1]",
            "[::1",
            "::1",
            "localhost:",
            "localhost:http",
            "localhost:99999",
            "127.0.0.1:80:80",
            "localhost@evil.example",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}
