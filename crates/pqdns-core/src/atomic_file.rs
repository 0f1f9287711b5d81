//! Files written whole or not at all: the content goes to a temporary file in the target's
//! directory, is flushed to disk, and is renamed over the target (rename is atomic within one
//! file system, POSIX `rename(2)`). A crash, SIGINT, full disk or file-size limit in the middle
//! leaves the previous file untouched; readers never see a half-written key, zone, DS file,
//! certificate or report.
//!
//! The temporary file is named `.<target name>.<random>.tmp`, so globs such as `K*.key` or
//! `*.ds` never pick it up. It is removed when writing fails; only a process killed outright
//! (SIGKILL, or SIGINT in a tool that does not catch it) can leave one behind.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// Who may read the file (the process umask still applies to [`FileMode::Public`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileMode {
    /// 0644: keys' public halves, signed zones, DS files, certificates, reports.
    Public,
    /// 0600: private keys and anything else secret.
    Private,
}

impl FileMode {
    #[cfg(unix)]
    fn bits(self) -> u32 {
        match self {
            FileMode::Public => 0o644,
            FileMode::Private => 0o600,
        }
    }
}

/// A file being written; nothing is visible at the target path until [`AtomicFile::commit`].
/// Dropping it without committing removes the temporary file.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: BufWriter<NamedTempFile>,
}

/// The directory `path` lies in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// An empty temporary file beside `path`: `.<name>.<random><suffix>`, with `mode`.
fn temp_beside(path: &Path, suffix: &str, mode: FileMode) -> io::Result<NamedTempFile> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(suffix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode.bits()));
    }
    #[cfg(not(unix))]
    let _ = mode;
    builder.tempfile_in(parent_dir(path))
}

/// Syncs `temp` to disk, renames it to `target` and syncs the directory, so the rename itself
/// survives a crash.
fn persist(temp: NamedTempFile, target: &Path) -> io::Result<()> {
    temp.as_file().sync_all()?;
    temp.persist(target).map_err(|e| e.error)?;
    #[cfg(unix)]
    {
        // Best effort: some file systems refuse fsync on directories.
        let _ = File::open(parent_dir(target)).and_then(|d| d.sync_all());
    }
    Ok(())
}

impl AtomicFile {
    /// Starts writing `path` (its directory must exist).
    ///
    /// # Errors
    /// The I/O error of creating the temporary file next to `path`.
    pub fn create(path: &Path, mode: FileMode) -> io::Result<AtomicFile> {
        let temp = temp_beside(path, ".tmp", mode)?;
        Ok(AtomicFile {
            target: path.to_path_buf(),
            temp: BufWriter::with_capacity(1 << 16, temp),
        })
    }

    /// Flushes the content to disk and renames it over the target.
    ///
    /// # Errors
    /// The I/O error of flushing, syncing or renaming; the target is then unchanged.
    pub fn commit(self) -> io::Result<()> {
        let temp = self
            .temp
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        persist(temp, &self.target)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// Writes `data` to `path` atomically (see the module documentation).
///
/// # Errors
/// The I/O error; the previous content of `path`, if any, is then unchanged.
pub fn write_atomic(path: &Path, data: &[u8], mode: FileMode) -> io::Result<()> {
    let mut file = AtomicFile::create(path, mode)?;
    file.write_all(data)?;
    file.commit()
}

/// Writes `path` (mode [`FileMode::Public`]) through `write`, for libraries that create the
/// file themselves from a path (chart renderers): `write` gets a temporary path beside `path`
/// with the same extension, which replaces `path` once `write` succeeds.
///
/// # Errors
/// The error of `write`, or the I/O error of creating, syncing or renaming the file; the
/// previous content of `path` is then unchanged.
pub fn write_atomic_via<E: From<io::Error>>(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    let suffix = path
        .extension()
        .map(|e| format!(".tmp.{}", e.to_string_lossy()))
        .unwrap_or_else(|| ".tmp".into());
    let temp = temp_beside(path, &suffix, FileMode::Public)?;
    write(temp.path())?;
    // The writer may have replaced the file rather than written into it: reopen by path.
    let reopened = NamedTempFile::from_parts(File::open(temp.path())?, temp.into_temp_path());
    persist(reopened, path)?;
    Ok(())
}

/// Logs a warning (file and mode, never content) if a private key file is readable or writable
/// by every user on the machine: for secrets this program reads but did not write with
/// [`FileMode::Private`] (DNSSEC `.private` files, TLS keys copied in by hand). No-op off Unix
/// and when the file's metadata cannot be read (the read itself reports that).
pub fn warn_if_world_readable(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o007 != 0 {
                tracing::warn!(
                    file = %path.display(),
                    mode = %format!("{mode:04o}"),
                    "private key file is accessible to every user; run chmod 600"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zone.signed");
        std::fs::write(&path, "old content\n").unwrap();
        let mut f = AtomicFile::create(&path, FileMode::Public).unwrap();
        f.write_all(b"new ").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "old content\n",
            "nothing visible before commit"
        );
        f.write_all(b"content\n").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new content\n");
        assert_eq!(entries(dir.path()), ["zone.signed"]);
    }

    #[test]
    fn dropping_without_commit_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("root.ds");
        std::fs::write(&path, "old\n").unwrap();
        let mut f = AtomicFile::create(&path, FileMode::Public).unwrap();
        f.write_all(&[b'x'; 100_000]).unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(entries(dir.path()), ["root.ds"]);
    }

    #[cfg(unix)]
    #[test]
    fn private_files_are_0600_even_when_replacing_a_readable_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("K.private");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&path, b"secret", FileMode::Private).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
    }

    #[test]
    fn a_file_written_by_path_replaces_the_target_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        std::fs::write(&path, "old").unwrap();
        let seen = std::cell::RefCell::new(PathBuf::new());
        let failed: io::Result<()> = write_atomic_via(&path, |tmp| {
            *seen.borrow_mut() = tmp.to_path_buf();
            std::fs::write(tmp, "half")?;
            Err(io::Error::other("renderer failed"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert!(seen.borrow().extension().is_some_and(|e| e == "svg"));
        write_atomic_via(&path, |tmp| std::fs::write(tmp, "<svg/>")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<svg/>");
        assert_eq!(entries(dir.path()), ["chart.svg"]);
    }

    #[test]
    fn a_path_without_file_name_is_an_error() {
        assert!(AtomicFile::create(Path::new(""), FileMode::Public).is_err());
        assert!(AtomicFile::create(Path::new("/"), FileMode::Public).is_err());
    }
}
