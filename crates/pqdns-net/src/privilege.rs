//! Dropping root once the sockets are bound, as NSD, Knot and unbound do (`username:`): a
//! daemon started as root binds its listeners (port 53, 853, 443), hands the files it made
//! while root (the generated TLS certificate and its directory) to the service user, then
//! takes that user's groups, group and user ID (initgroups(3), setgid(2), setuid(2) through
//! `nix`). After setuid(2) from root the process has no capabilities left (capabilities(7):
//! without `PR_SET_KEEPCAPS` the permitted and effective sets are cleared), and it checks that
//! root cannot be regained.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Group, Uid, User};
use thiserror::Error;

/// The account to run as: `USER` (its primary group) or `USER:GROUP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// User name.
    pub user: String,
    /// Group name; `None` for the user's primary group.
    pub group: Option<String>,
}

impl std::str::FromStr for Account {
    type Err = PrivilegeError;

    /// `USER` or `USER:GROUP`; neither may be empty.
    fn from_str(s: &str) -> Result<Account, PrivilegeError> {
        let (user, group) = match s.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (s, None),
        };
        if user.is_empty() || group.is_some_and(str::is_empty) {
            return Err(PrivilegeError::Syntax(s.to_owned()));
        }
        Ok(Account {
            user: user.to_owned(),
            group: group.map(str::to_owned),
        })
    }
}

/// Why the process could not become the service user.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PrivilegeError {
    /// Not `USER` or `USER:GROUP`.
    #[error("user {0:?} is not USER or USER:GROUP")]
    Syntax(String),
    /// No such user in the password database.
    #[error("no user {0:?} on this system")]
    NoUser(String),
    /// No such group in the group database.
    #[error("no group {0:?} on this system")]
    NoGroup(String),
    /// Running as another non-root user: it cannot switch users.
    #[error("running as uid {current}, not root: cannot become {user:?} (uid {wanted})")]
    NotRoot {
        /// Our user ID.
        current: u32,
        /// The user asked for.
        user: String,
        /// Its user ID.
        wanted: u32,
    },
    /// A system call failed.
    #[error("{call}: {error}")]
    System {
        /// What was being done.
        call: String,
        /// The error number.
        error: nix::Error,
    },
    /// Running as root with a port below 1024 bound and no user to become: the process would
    /// serve as root only because nobody said otherwise.
    #[error(
        "running as root with port {port} bound and no user to run as: set `user` (e.g. \"pqdns\") \
         or --user, or --user root to keep root deliberately"
    )]
    RootWithoutUser {
        /// The lowest privileged port bound.
        port: u16,
    },
    /// After the switch, root could be regained: refuse to go on.
    #[error("setuid({0}) left a way back to root; refusing to serve")]
    Regainable(u32),
}

/// The IDs the process runs with after [`drop_to`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// User ID.
    pub uid: u32,
    /// Group ID.
    pub gid: u32,
}

/// Becomes `account`: when root, hands each of `owned` that exists to it (chown(2), not
/// recursive), then takes its supplementary groups, its group and its user ID. Already running
/// as that user is fine (nothing to do).
///
/// # Errors
/// [`PrivilegeError`]: unknown user or group, not root (and not that user), a failed system
/// call, or root still reachable afterwards.
pub fn drop_to(account: &Account, owned: &[PathBuf]) -> Result<Dropped, PrivilegeError> {
    let (user, gid) = look_up(account)?;
    let dropped = Dropped {
        uid: user.uid.as_raw(),
        gid: gid.as_raw(),
    };
    let current = Uid::current();
    if current == user.uid {
        return Ok(dropped);
    }
    if !current.is_root() {
        return Err(PrivilegeError::NotRoot {
            current: current.as_raw(),
            user: account.user.clone(),
            wanted: user.uid.as_raw(),
        });
    }
    let system = |call: String| move |error| PrivilegeError::System { call, error };
    for path in owned.iter().filter(|p| p.exists()) {
        nix::unistd::chown(path, Some(user.uid), Some(gid))
            .map_err(system(format!("chown {}", path.display())))?;
    }
    let name = CString::new(account.user.as_str())
        .map_err(|_| PrivilegeError::Syntax(account.user.clone()))?;
    nix::unistd::initgroups(&name, gid).map_err(system(format!("initgroups({})", account.user)))?;
    nix::unistd::setgid(gid).map_err(system(format!("setgid({gid})")))?;
    nix::unistd::setuid(user.uid).map_err(system(format!("setuid({})", user.uid)))?;
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() || Gid::effective() != gid {
        return Err(PrivilegeError::Regainable(user.uid.as_raw()));
    }
    Ok(dropped)
}

/// What a daemon does once its listeners are bound: becomes `account` (see [`drop_to`]),
/// handing it the generated TLS certificate's directory and files in `generated_cert_dir`
/// (made as root while binding) so later reloads can read them.
///
/// Without an account, a daemon running as root refuses to go on when any of `bound` is a
/// privileged port (below 1024: it was started as root to bind them, as a service is, and
/// must say whom to become; `--user root` keeps root deliberately), and otherwise warns that
/// it keeps running as root (a developer's run on unprivileged ports).
///
/// # Errors
/// As [`drop_to`]; [`PrivilegeError::RootWithoutUser`] as above.
pub fn drop_after_bind(
    account: Option<&Account>,
    generated_cert_dir: &Path,
    bound: &[std::net::SocketAddr],
) -> Result<Option<Dropped>, PrivilegeError> {
    use crate::tls::{GENERATED_CERT_FILE, GENERATED_KEY_FILE};
    let Some(account) = account else {
        if Uid::effective().is_root() {
            let privileged = bound
                .iter()
                .map(|a| a.port())
                .filter(|p| (1..1024).contains(p));
            if let Some(port) = privileged.min() {
                return Err(PrivilegeError::RootWithoutUser { port });
            }
            tracing::warn!("running as root: set a user (--user) to drop privileges after binding");
        }
        return Ok(None);
    };
    let owned = [
        generated_cert_dir.to_path_buf(),
        generated_cert_dir.join(GENERATED_CERT_FILE),
        generated_cert_dir.join(GENERATED_KEY_FILE),
    ];
    let ids = drop_to(account, &owned)?;
    tracing::info!(user = %account.user, uid = ids.uid, gid = ids.gid, "running as");
    Ok(Some(ids))
}

/// The user and group of `account` in the system's databases (a `--check` of it).
///
/// # Errors
/// [`PrivilegeError::NoUser`], [`PrivilegeError::NoGroup`], or a failed lookup.
pub fn look_up(account: &Account) -> Result<(User, Gid), PrivilegeError> {
    let user = User::from_name(&account.user)
        .map_err(|error| PrivilegeError::System {
            call: format!("getpwnam({})", account.user),
            error,
        })?
        .ok_or_else(|| PrivilegeError::NoUser(account.user.clone()))?;
    let gid = match &account.group {
        Some(name) => {
            Group::from_name(name)
                .map_err(|error| PrivilegeError::System {
                    call: format!("getgrnam({name})"),
                    error,
                })?
                .ok_or_else(|| PrivilegeError::NoGroup(name.clone()))?
                .gid
        }
        None => user.gid,
    };
    Ok((user, gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_parse() {
        assert_eq!(
            "pqdns".parse::<Account>().unwrap(),
            Account {
                user: "pqdns".into(),
                group: None
            }
        );
        assert_eq!(
            "pqdns:nogroup".parse::<Account>().unwrap().group.as_deref(),
            Some("nogroup")
        );
        for bad in ["", ":g", "u:", ":"] {
            assert!(bad.parse::<Account>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_users_and_groups_are_named() {
        let e = drop_to(&"no-such-user-pqdns".parse().unwrap(), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no user \"no-such-user-pqdns\" on this system"
        );
        let e = drop_to(&"root:no-such-group-pqdns".parse().unwrap(), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no group \"no-such-group-pqdns\" on this system"
        );
    }
}
