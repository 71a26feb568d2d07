//! Which namespace mappings the member cluster itself allows (`ferry agent --allow-namespace-mapping`): a tenant
//! backup of namespace `from` may become a NonAdminBackup in namespace `to` on this cluster only if the pair is
//! listed here, whatever the coordinator's config says. By default only the identity (`from == to`) is allowed,
//! so a coordinator cannot hand one tenant's backup to another tenant's namespace.

use std::fmt;
use std::str::FromStr;

use crate::model::names::invalid_namespace_name;

/// One allowed mapping: `from=to` (exact) or `from-prefix*=to-prefix*` (the rest of the name kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedMapping {
    Exact { from: String, to: String },
    Prefix { from: String, to: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--allow-namespace-mapping {given:?}: {reason} (expected FROM=TO or FROM-PREFIX*=TO-PREFIX*)")]
pub struct AllowedMappingError {
    given: String,
    reason: String,
}

impl FromStr for AllowedMapping {
    type Err = AllowedMappingError;

    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| AllowedMappingError { given: given.to_string(), reason: reason.to_string() };
        let (from, to) = given.split_once('=').ok_or_else(|| fail("no '='"))?;
        let (from, to) = (from.trim(), to.trim());
        match (from.strip_suffix('*'), to.strip_suffix('*')) {
            (Some(from), Some(to)) => {
                let valid = |p: &str| p.is_empty() || invalid_namespace_name(&format!("{p}x")).is_none();
                if !valid(from) || !valid(to) || from.contains('*') || to.contains('*') {
                    return Err(fail("a prefix must be the start of a namespace name, with one trailing '*'"));
                }
                Ok(Self::Prefix { from: from.to_string(), to: to.to_string() })
            }
            (None, None) => {
                if let Some(reason) = invalid_namespace_name(from).or_else(|| invalid_namespace_name(to)) {
                    return Err(fail(&reason));
                }
                Ok(Self::Exact { from: from.to_string(), to: to.to_string() })
            }
            _ => Err(fail("either both sides end in '*' or neither does")),
        }
    }
}

impl fmt::Display for AllowedMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact { from, to } => write!(f, "{from}={to}"),
            Self::Prefix { from, to } => write!(f, "{from}*={to}*"),
        }
    }
}

/// The allowed mappings; the identity is always allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappingAllowlist(pub Vec<AllowedMapping>);

impl MappingAllowlist {
    pub fn allows(&self, from: &str, to: &str) -> bool {
        from == to
            || self.0.iter().any(|m| match m {
                AllowedMapping::Exact { from: f, to: t } => f == from && t == to,
                AllowedMapping::Prefix { from: f, to: t } => {
                    from.strip_prefix(f.as_str()).is_some_and(|rest| to.strip_prefix(t.as_str()) == Some(rest))
                }
            })
    }

    /// How the refusal names what is allowed.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "only the identity (no --allow-namespace-mapping)".into();
        }
        let listed: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        format!("the identity and --allow-namespace-mapping {}", listed.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowlist(entries: &[&str]) -> MappingAllowlist {
        MappingAllowlist(entries.iter().map(|e| e.parse().expect("valid")).collect())
    }

    #[test]
    fn identity_always_and_only_listed_pairs_besides() {
        let none = allowlist(&[]);
        assert!(none.allows("team-a", "team-a"));
        assert!(!none.allows("team-a", "team-b"));
        let some = allowlist(&["team-a=team-a-dr", "shop-*=dr-shop-*"]);
        assert!(some.allows("team-a", "team-a-dr"));
        assert!(!some.allows("team-a-dr", "team-a"), "one way only");
        assert!(!some.allows("team-b", "team-a-dr"));
        assert!(some.allows("shop-eu", "dr-shop-eu"));
        assert!(!some.allows("shop-eu", "dr-shop-us"), "the rest of the name is kept");
        assert!(!some.allows("myshop-eu", "dr-shop-eu"));
    }

    #[test]
    fn malformed_entries_are_refused_with_the_entry() {
        for bad in ["team-a", "team-a*=b", "a=Team", "a**=b*", "=b", "a=kube/system"] {
            let e = bad.parse::<AllowedMapping>().expect_err(bad);
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert_eq!("*=dr-*".parse::<AllowedMapping>().unwrap().to_string(), "*=dr-*");
    }
}
