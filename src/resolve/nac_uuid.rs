//! NAC's object names: `GenerateNacObjectUUID(namespace, name)` builds `<namespace>-<name>-<uuid>` (a v4 UUID)
//! in at most 63 characters (docs/upstream.md §O2.1), and ferry checks a backup's NACUUID against it exactly — a NACUUID
//! that was not generated for its origin namespace and name means the ownership marks were edited.

use crate::model::names::cut;

/// Longest name NAC generates.
pub const MAX_NAC_NAME: usize = 63;
const UUID_LEN: usize = 36;

/// `GenerateNacObjectUUID` with the UUID given. When too long, a namespace over 25 characters is cut to 25 and
/// the name dropped; otherwise the name is cut to `27 - len(ns) - 2` characters (and dropped when that leaves
/// nothing).
pub fn generate(namespace: &str, name: &str, uuid: &str) -> String {
    let join = |ns: &str, name: &str| {
        let mut out = uuid.to_string();
        if !name.is_empty() {
            out = format!("{name}-{out}");
        }
        if !ns.is_empty() {
            out = format!("{ns}-{out}");
        }
        out
    };
    let full = join(namespace, name);
    if full.len() <= MAX_NAC_NAME {
        return full;
    }
    let remaining = MAX_NAC_NAME.saturating_sub(uuid.len());
    if namespace.len() > remaining.saturating_sub(2) {
        let ns = cut(namespace, remaining.saturating_sub(2));
        format!("{ns}-{uuid}")
    } else {
        join(namespace, cut(name, remaining - namespace.len() - 2))
    }
}

/// Whether `nacuuid` is exactly what NAC generates for `namespace` and `name` with some UUID.
pub fn matches(nacuuid: &str, namespace: &str, name: &str) -> bool {
    let Some(split) = nacuuid.len().checked_sub(UUID_LEN) else { return false };
    let Some(uuid) = nacuuid.get(split..) else { return false };
    is_uuid(uuid) && generate(namespace, name, uuid) == nacuuid
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase hex (Go's `uuid.New().String()`).
fn is_uuid(text: &str) -> bool {
    text.len() == UUID_LEN
        && text.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::names::invalid_object_name;

    const UUID: &str = "b9a51801-1db9-4e31-af75-201bf29a1b45";

    #[test]
    fn generates_as_nac_does() {
        // oadp-operator PR #1957.
        assert_eq!(
            generate("nacuser1", "nacuser1-backup-enforcement-dm-1", UUID),
            "nacuser1-nacuser1-backup-e-b9a51801-1db9-4e31-af75-201bf29a1b45"
        );
        assert_eq!(generate("team-a", "nightly", UUID), format!("team-a-nightly-{UUID}"));
        let long_ns = "a-very-long-tenant-namespace-name";
        assert_eq!(generate(long_ns, "nightly", UUID), format!("{}-{UUID}", &long_ns[..25]));
        let ns25 = "n".repeat(25);
        assert_eq!(generate(&ns25, "nightly-backup", UUID), format!("{ns25}-{UUID}"));
        for (ns, name) in [("team-a", "x".repeat(100)), (long_ns, "y".repeat(40))] {
            let id = generate(ns, &name, UUID);
            assert!(id.len() <= 63 && invalid_object_name(&id).is_none(), "{id}");
        }
    }

    #[test]
    fn the_check_is_an_exact_parse_not_a_prefix_test() {
        let id = generate("team-a", "nightly", UUID);
        assert!(matches(&id, "team-a", "nightly"));
        assert!(!matches(&id, "team", "nightly"), "origin `team` must not accept a `team-a-…` NACUUID");
        assert!(!matches(&id, "team-a", "weekly"));
        assert!(!matches(&format!("team-a-nightly-{}", UUID.to_uppercase()), "team-a", "nightly"));
        assert!(!matches("team-a-nightly-not-a-uuid", "team-a", "nightly"));
        assert!(!matches("", "team-a", "nightly"));
        let long = generate("nacuser1", "nacuser1-backup-enforcement-dm-1", UUID);
        assert!(matches(&long, "nacuser1", "nacuser1-backup-enforcement-dm-1"));
    }
}
