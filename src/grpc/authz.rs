//! Who may call what. Pure: the caller's role (from its certificate) and the rpc in, a decision out.
//!
//! - An agent may open a `Session`, and only for the cluster its certificate names; the stream is bound to
//!   that cluster, so it can publish only that cluster's inventory and receives only that cluster's set.
//! - An operator may call `GetStatus`, `Plan` and `DescribeBackup`.
//! - Everything else is PERMISSION_DENIED.

use tonic::Status;

use super::identity::Role;

/// The rpcs of the `Federation` service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    Session,
    GetStatus,
    Plan,
    DescribeBackup,
}

impl Rpc {
    fn name(self) -> &'static str {
        match self {
            Rpc::Session => "Session",
            Rpc::GetStatus => "GetStatus",
            Rpc::Plan => "Plan",
            Rpc::DescribeBackup => "DescribeBackup",
        }
    }
}

/// Why a call was denied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("{caller} may not call {rpc}: {why}")]
    Role { caller: String, rpc: &'static str, why: &'static str },
}

impl From<Denied> for Status {
    fn from(denied: Denied) -> Status {
        Status::permission_denied(denied.to_string())
    }
}

/// Allows or denies `rpc` for `role`. For a `Session`, returns the cluster the stream is bound to.
pub fn authorize(role: &Role, rpc: Rpc) -> Result<Option<&str>, Denied> {
    let deny = |why| Err(Denied::Role { caller: role.to_string(), rpc: rpc.name(), why });
    match (role, rpc) {
        (Role::Agent { cluster }, Rpc::Session) => Ok(Some(cluster)),
        (Role::Agent { .. }, _) => deny("agent certificates may only open a Session"),
        (Role::Operator { .. }, Rpc::GetStatus | Rpc::Plan | Rpc::DescribeBackup) => Ok(None),
        (Role::Operator { .. }, Rpc::Session) => deny("only agent certificates may open a Session"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix() {
        let agent = Role::Agent { cluster: "a".into() };
        let operator = Role::Operator { name: "ops".into() };
        assert_eq!(authorize(&agent, Rpc::Session), Ok(Some("a")));
        assert_eq!(authorize(&operator, Rpc::GetStatus), Ok(None));
        assert_eq!(authorize(&operator, Rpc::Plan), Ok(None));
        assert_eq!(authorize(&operator, Rpc::DescribeBackup), Ok(None));
        for rpc in [Rpc::GetStatus, Rpc::Plan, Rpc::DescribeBackup] {
            let err = authorize(&agent, rpc).unwrap_err().to_string();
            assert!(err.starts_with("cluster/a may not call"), "{err}");
        }
        let err = authorize(&operator, Rpc::Session).unwrap_err();
        assert_eq!(Status::from(err).code(), tonic::Code::PermissionDenied);
    }
}
