//! The documented exit codes (README, docs/operations.md): 0 ok, 1 any other failure, 2 usage or configuration
//! error (clap's own code for a bad command line), 3 the coordinator or a cluster cannot be reached, 4 refused
//! (permission denied, or the coordinator said no). Commands mark an error with its kind where they know it;
//! `main` looks for the mark anywhere in the error's chain, so `.context(..)` on top keeps it.

use std::fmt;

/// What went wrong, as far as a script calling `ferry` needs to tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    Failure,
    Usage,
    Unreachable,
    Refused,
}

impl ExitKind {
    pub fn code(self) -> u8 {
        match self {
            ExitKind::Failure => 1,
            ExitKind::Usage => 2,
            ExitKind::Unreachable => 3,
            ExitKind::Refused => 4,
        }
    }
}

/// An error marked with its kind. Displays as the error it wraps (with its causes), so the message a user
/// sees does not change.
#[derive(Debug)]
pub struct Classified {
    pub kind: ExitKind,
    error: anyhow::Error,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

// No `source()`: the wrapped chain is already in the message, and would otherwise be printed twice.
impl std::error::Error for Classified {}

/// Marks `error` with `kind`.
pub fn classify(kind: ExitKind, error: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(Classified { kind, error: error.into() })
}

/// `Result::map_err` shorthand: `.map_err(usage)`.
pub fn usage(error: impl Into<anyhow::Error>) -> anyhow::Error {
    classify(ExitKind::Usage, error)
}

/// The kind of a failed command: the first mark in its chain, else a config file that would not load or a
/// location that cannot be opened as configured (a configuration error), else what a Kubernetes API error says, else a generic failure.
pub fn kind_of(error: &anyhow::Error) -> ExitKind {
    for cause in error.chain() {
        if let Some(classified) = cause.downcast_ref::<Classified>() {
            return classified.kind;
        }
        if cause.downcast_ref::<ferry::config::ConfigError>().is_some()
            || cause.downcast_ref::<ferry::bucket::OpenError>().is_some()
        {
            return ExitKind::Usage;
        }
        if let Some(error) = cause.downcast_ref::<kube::Error>() {
            return kube_kind(error);
        }
    }
    ExitKind::Failure
}

/// A Kubernetes API error: no connection is unreachable, 401/403 is refused.
fn kube_kind(error: &kube::Error) -> ExitKind {
    match error {
        kube::Error::Api(status) if status.code == 401 || status.code == 403 => ExitKind::Refused,
        kube::Error::HyperError(_) | kube::Error::Service(_) => ExitKind::Unreachable,
        _ => ExitKind::Failure,
    }
}

/// A failed rpc, marked by its code: the coordinator unavailable (or too slow) is unreachable; a refused
/// identity or permission is refused.
pub fn rpc_error(status: tonic::Status) -> anyhow::Error {
    let kind = match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => ExitKind::Unreachable,
        tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => ExitKind::Refused,
        _ => ExitKind::Failure,
    };
    classify(kind, anyhow::anyhow!("{:?}: {}", status.code(), status.message()))
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn the_mark_survives_context_and_keeps_the_message() {
        let error = Err::<(), _>(usage(anyhow::anyhow!("bad file"))).context("loading the client config").unwrap_err();
        assert_eq!(kind_of(&error), ExitKind::Usage);
        assert_eq!(format!("{error:#}"), "loading the client config: bad file");
        assert_eq!(kind_of(&anyhow::anyhow!("plain")), ExitKind::Failure);
        assert_eq!(kind_of(&rpc_error(tonic::Status::permission_denied("no"))), ExitKind::Refused);
        assert_eq!(kind_of(&rpc_error(tonic::Status::unavailable("down"))), ExitKind::Unreachable);
        assert_eq!(kind_of(&rpc_error(tonic::Status::internal("bug"))), ExitKind::Failure);
        assert_eq!(ExitKind::Refused.code(), 4);
    }
}
