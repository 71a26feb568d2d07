//! Kubernetes name rules and Velero's label-value shortening.

use sha2::{Digest, Sha256};

/// Longest object name Kubernetes accepts for most kinds (DNS-1123 subdomain).
pub const MAX_OBJECT_NAME: usize = 253;
/// Longest label value (DNS-1035 label length).
pub const MAX_LABEL_VALUE: usize = 63;

/// Velero's `label.GetValidName`: a value over 63 characters becomes its first 57 characters plus the first
/// six hex digits of its SHA-256 (`pkg/label/label.go`).
pub fn velero_label_value(value: &str) -> String {
    if value.len() <= MAX_LABEL_VALUE {
        return value.to_string();
    }
    let digest = Sha256::digest(value.as_bytes());
    let hex: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    // Velero cuts bytes; names are ASCII (DNS-1123), so byte and char cuts agree.
    let cut = value.char_indices().nth(57).map_or(value.len(), |(i, _)| i);
    format!("{}{}", &value[..cut], hex)
}

/// The first `n` bytes of `s`, as Go's `s[:n]` cuts names (they are ASCII; this never splits a character).
pub fn cut(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Why a string is not a valid DNS-1123 subdomain (object name), or `None` when it is one.
pub fn invalid_object_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("name is empty".into());
    }
    if name.len() > MAX_OBJECT_NAME {
        return Some(format!(
            "name is {} characters long, more than Kubernetes' limit of {MAX_OBJECT_NAME}",
            name.len()
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if let Some(c) = name.chars().find(|c| !ok_char(*c)) {
        return Some(format!("name contains {c:?}; only lowercase letters, digits, '-' and '.' are allowed"));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Some("name must start and end with a lowercase letter or digit".into());
    }
    // A subdomain is dot-separated DNS-1123 labels: each starts and ends with a letter or digit (`a..b`,
    // `a.-b` and `a-.b` are not names the API server takes).
    if let Some(part) = name.split('.').find(|part| !alnum(part.chars().next()) || !alnum(part.chars().last())) {
        return Some(format!(
            "name has the part {part:?} between dots; each must start and end with a lowercase letter or digit"
        ));
    }
    None
}

/// Why a string is not a valid namespace name (DNS-1123 label), or `None` when it is one.
pub fn invalid_namespace_name(name: &str) -> Option<String> {
    if name.len() > MAX_LABEL_VALUE {
        return Some(format!("namespace name is {} characters long, more than 63", name.len()));
    }
    if name.contains('.') {
        return Some("namespace name must not contain '.'".into());
    }
    invalid_object_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_label_values_are_kept() {
        assert_eq!(velero_label_value("daily-1"), "daily-1");
        let exact = "a".repeat(63);
        assert_eq!(velero_label_value(&exact), exact);
    }

    #[test]
    fn long_label_values_are_cut_and_hashed_like_velero() {
        let long = "a".repeat(70);
        let v = velero_label_value(&long);
        assert_eq!(v.len(), 63);
        assert!(v.starts_with(&"a".repeat(57)));
        let digest = Sha256::digest(long.as_bytes());
        assert_eq!(&v[57..], format!("{:02x}{:02x}{:02x}", digest[0], digest[1], digest[2]));
    }

    #[test]
    fn object_names() {
        assert!(invalid_object_name("backup-1.a").is_none());
        assert!(invalid_object_name("").is_some());
        assert!(invalid_object_name("Backup").is_some());
        assert!(invalid_object_name("-a").is_some());
        assert!(invalid_object_name(&"a".repeat(254)).unwrap().contains("254"));
        // DNS-1123 subdomains: every part between dots is a label of its own (Kubernetes' IsDNS1123Subdomain).
        for bad in ["a..b", "a.-b", "a-.b", "a.b-", "a.-"] {
            assert!(invalid_object_name(bad).is_some(), "{bad}");
        }
        for good in ["a.b", "a-b.c-d", "1.2.3", "x--y.z"] {
            assert!(invalid_object_name(good).is_none(), "{good}");
        }
        assert!(invalid_object_name("a..b").unwrap().contains("\"\""), "the empty part is named");
        assert!(invalid_namespace_name("a.b").is_some());
        assert!(invalid_namespace_name(&"a".repeat(64)).is_some());
    }
}
