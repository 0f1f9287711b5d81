//! The control socket: a Unix stream socket (`[server] control_socket`) on which
//! `pqdns-ctl` sends one request and reads one response ([`super::protocol`]).
//!
//! Who may connect:
//! - the file is made mode 0660 (owner and group read and write) and, when the server drops
//!   privileges, handed to the service user and group before it does, so the server's user
//!   and members of its group can connect, others cannot;
//! - besides, every peer's credentials (`SO_PEERCRED`, unix(7)) are checked: root, the
//!   server's user, a process whose group is the server's group, or a user that group
//!   lists as a member; anyone else is told "permission denied" and nothing runs.
//!
//! Bounds: a request is at most [`MAX_REQUEST_BYTES`] and must arrive within
//! [`REQUEST_TIMEOUT`]; at most [`MAX_CONNECTIONS`] connections are served at once (others
//! are answered "busy" and closed); an operation's response is given up after
//! [`OPERATION_TIMEOUT`] (the operation itself, a zone signing, goes on and finishes).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use nix::unistd::{Gid, Group, Uid, User};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::protocol::{Request, Response, MAX_REQUEST_BYTES, PROTOCOL_VERSION};
use crate::server::ServerHandle;

/// Connections served at once; more are answered "busy".
pub const MAX_CONNECTIONS: usize = 8;
/// How long a client has to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an operation may take before the client is told it timed out (signing a large
/// zone takes minutes; it goes on).
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(600);
/// The socket file's mode: owner and group read and write.
pub const SOCKET_MODE: u32 = 0o660;

/// A bound control socket; the file is removed when it is dropped.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds the socket at `path` (mode [`SOCKET_MODE`]), replacing a stale socket file that
    /// no server listens on, and hands it to `owner` (user and group) when given, as a server
    /// that is about to drop privileges does. A missing directory is made (`/run/pqdns`
    /// outside systemd, whose `RuntimeDirectory` makes it otherwise). Must be called inside
    /// a tokio runtime.
    ///
    /// # Errors
    /// The I/O error, with the path: a server already listening there, a file that is no
    /// socket, a missing directory, or no permission.
    pub fn bind(path: &Path, owner: Option<(Uid, Gid)>) -> io::Result<ControlSocket> {
        let error = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(error(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is no socket",
                )));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(error(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another server listens on it",
                )));
            }
            std::fs::remove_file(path).map_err(error)?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(error)?;
        }
        let listener = UnixListener::bind(path).map_err(error)?;
        let socket = ControlSocket {
            listener,
            path: path.to_path_buf(),
        };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
            .map_err(error)?;
        if let Some((uid, gid)) = owner {
            nix::unistd::chown(path, Some(uid), Some(gid)).map_err(|e| error(e.into()))?;
        }
        Ok(socket)
    }

    /// The socket file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests for `handle` until the future is dropped (at shutdown).
    pub async fn serve(&self, handle: &ServerHandle) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut running = FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            warn!(socket = %self.path.display(), "control socket: accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        // Never waited for: the socket's buffer takes the short line, or the
                        // client sees the connection closed.
                        let busy = Response::error(format!(
                            "busy: {MAX_CONNECTIONS} control connections are being served; try again"
                        ));
                        let _ = stream.try_write(line(&busy).as_bytes());
                        continue;
                    };
                    running.push(async move {
                        connection(stream, handle).await;
                        drop(slot);
                    });
                }
                Some(()) = running.next(), if !running.is_empty() => {}
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        // Best effort: after dropping privileges the directory may not be ours to change;
        // the next start replaces the stale file.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection: the peer's credentials, one request, one response.
async fn connection(mut stream: UnixStream, handle: &ServerHandle) {
    let response = match authorised(&stream).await {
        Err(why) => {
            warn!("control socket: {why}");
            Response::error(format!("permission denied: {why}"))
        }
        Ok(()) => match tokio::time::timeout(REQUEST_TIMEOUT, read_request(&mut stream)).await {
            Err(_) => Response::error(format!("no request within {} s", REQUEST_TIMEOUT.as_secs())),
            Ok(Err(message)) => Response::error(message),
            Ok(Ok(request)) => {
                info!(command = ?request.command, "control request");
                match tokio::time::timeout(
                    OPERATION_TIMEOUT,
                    super::execute(handle, &request.command),
                )
                .await
                {
                    Ok(Ok(reply)) => Response::ok(reply),
                    Ok(Err(e)) => Response::error(e.to_string()),
                    Err(_) => Response::error(format!(
                        "no result within {} s; the operation goes on in the server",
                        OPERATION_TIMEOUT.as_secs()
                    )),
                }
            }
        },
    };
    if let Err(e) = write_response(&mut stream, &response).await {
        warn!("control socket: response not sent: {e}");
    }
}

/// Whether the peer may use the socket: root, our user, our group, or a member of it.
async fn authorised(stream: &UnixStream) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("peer credentials unknown: {e}"))?;
    let (uid, gid) = (cred.uid(), cred.gid());
    let (our_uid, our_gid) = (Uid::effective(), Gid::effective());
    if uid == 0 || uid == our_uid.as_raw() || gid == our_gid.as_raw() {
        return Ok(());
    }
    // The group database may be remote (NSS): looked up off the runtime's threads.
    let member = tokio::task::spawn_blocking(move || {
        let user = User::from_uid(Uid::from_raw(uid)).ok().flatten()?;
        let group = Group::from_gid(our_gid).ok().flatten()?;
        Some(user.gid == our_gid || group.mem.contains(&user.name))
    })
    .await
    .ok()
    .flatten()
    .unwrap_or(false);
    if member {
        return Ok(());
    }
    Err(format!(
        "uid {uid} (gid {gid}) is neither root, the server's user (uid {our_uid}) nor in its group (gid {our_gid})"
    ))
}

/// Reads one request line of at most [`MAX_REQUEST_BYTES`].
async fn read_request(stream: &mut UnixStream) -> Result<Request, String> {
    let limit = u64::try_from(MAX_REQUEST_BYTES).unwrap_or(u64::MAX);
    let mut reader = BufReader::new((&mut *stream).take(limit));
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .await
        .map_err(|e| format!("reading the request: {e}"))?;
    if !line.ends_with('\n') {
        return Err(format!(
            "the request must be one line of at most {MAX_REQUEST_BYTES} bytes ended by a newline"
        ));
    }
    let version = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v.get("version")?.as_u64());
    if version.is_some_and(|v| v != u64::from(PROTOCOL_VERSION)) {
        return Err(format!(
            "protocol version {} is not spoken here (this server speaks {PROTOCOL_VERSION})",
            version.unwrap_or_default()
        ));
    }
    serde_json::from_str(&line).map_err(|e| format!("bad request: {e}"))
}

/// `response` as its line.
fn line(response: &Response) -> String {
    let mut text = serde_json::to_string(response).unwrap_or_else(|_| {
        format!(
            r#"{{"version":{PROTOCOL_VERSION},"ok":false,"error":"response not serialisable"}}"#
        )
    });
    text.push('\n');
    text
}

/// Writes `response`, giving up after [`REQUEST_TIMEOUT`] (a client that does not read).
async fn write_response(stream: &mut UnixStream, response: &Response) -> io::Result<()> {
    let write = async {
        stream.write_all(line(response).as_bytes()).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(REQUEST_TIMEOUT, write)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the client does not read"))?
}
