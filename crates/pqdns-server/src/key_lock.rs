//! One server per key directory. Two servers signing from the same keys would each generate,
//! roll and retire keys behind the other's back (two ZSKs at one serial; a restart of one
//! retiring the other's live key). The first server to use a key directory takes an exclusive
//! lock on `<state_dir>/.pqdns-server.lock` (the state directory is the key directory unless
//! `[signing] state_directory` puts the state elsewhere, e.g. beside read-only keys) (`flock`, released by the kernel when the process
//! ends, even by SIGKILL) and holds it for its lifetime; a second one refuses the zone, naming
//! the process that holds it. A server takes each directory once, so reloads do not conflict
//! with themselves. Offline tools (`pqdns-zone`) take no lock: the operator's
//! `pqdns-zone rollover --ds-published` is meant to run beside the server.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Name of the lock file inside a key directory.
pub const LOCK_FILE: &str = ".pqdns-server.lock";

/// Lock files this process holds, by key directory.
static HELD: Mutex<BTreeMap<PathBuf, File>> = Mutex::new(BTreeMap::new());

/// Why a key directory could not be locked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyLockError {
    /// Another process holds the lock.
    #[error(
        "{}: key directory in use by another pqdns-server ({holder}); one key directory \
         serves one server",
        dir.display()
    )]
    Held {
        /// The key directory.
        dir: PathBuf,
        /// What the lock file says of its holder (its process ID), as written.
        holder: String,
    },
    /// The directory or its lock file could not be created or locked.
    #[error("{}: cannot lock the key directory: {error}", dir.display())]
    Io {
        /// The key directory.
        dir: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// Makes sure this process holds the lock of key directory `dir` (created if missing).
///
/// # Errors
/// [`KeyLockError::Held`] when another process holds it; [`KeyLockError::Io`] when it cannot
/// be created or locked.
pub fn hold(dir: &Path) -> Result<(), KeyLockError> {
    let io = |error| KeyLockError::Io {
        dir: dir.to_path_buf(),
        error,
    };
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if held.contains_key(dir) {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.take(256).read_to_string(&mut holder);
            return Err(KeyLockError::Held {
                dir: dir.to_path_buf(),
                holder: holder.trim().to_string(),
            });
        }
        Err(TryLockError::Error(error)) => return Err(io(error)),
    }
    // Who holds it, for the next one to name (informational: the lock is the flock).
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "pid {}", std::process::id()))
        .map_err(io)?;
    held.insert(dir.to_path_buf(), file);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_locked_by_another_process_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        // Another process (here: another open file description, as flock sees it).
        std::fs::create_dir_all(&keys).unwrap();
        let other = File::create(keys.join(LOCK_FILE)).unwrap();
        other.try_lock().unwrap();
        std::fs::write(keys.join(LOCK_FILE), "pid 4242\n").unwrap();
        let err = hold(&keys).unwrap_err();
        assert!(err.to_string().contains("pid 4242"), "{err}");
        assert!(err.to_string().contains("keys"), "{err}");
        // Once it is gone, this process takes it, and taking it again is a no-op.
        drop(other);
        hold(&keys).unwrap();
        hold(&keys).unwrap();
        let text = std::fs::read_to_string(keys.join(LOCK_FILE)).unwrap();
        assert_eq!(text, format!("pid {}\n", std::process::id()));
        let third = File::open(keys.join(LOCK_FILE)).unwrap();
        assert!(matches!(third.try_lock(), Err(TryLockError::WouldBlock)));
    }
}
