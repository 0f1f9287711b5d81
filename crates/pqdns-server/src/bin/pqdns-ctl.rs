//! `pqdns-ctl`: control a running pqdns-server over its control socket
//! (`pqdns_server::control`).

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pqdns_core::stdout;
use pqdns_net::manual::{self, Generate};
use pqdns_server::control::protocol::{Command, Request, Response, MAX_RESPONSE_BYTES};
use pqdns_server::control::socket::OPERATION_TIMEOUT;

/// Control a running pqdns-server: zone status, reloading and re-signing zones, zone
/// transfers, NOTIFY, freezing dynamic updates, rollovers, counters.
///
/// It talks to the server's control socket (`control_socket` in the `[server]` table, or
/// --control-socket of pqdns-server; the package's configuration uses
/// /run/pqdns/control.sock). The socket is mode 0660, owned by the server's user and group:
/// run pqdns-ctl as root, as that user, or as a member of its group.
///
/// Output is for people unless --json is given: then the server's response, one JSON object
/// (`{"version":1,"ok":true,"result":{…}}` or `{"version":1,"ok":false,"error":"…"}`).
/// Times are UTC. Exit status: 0 when the command succeeded, 1 when it failed (the reason on
/// standard error), 2 for a bad command line.
#[derive(Debug, Parser)]
#[command(name = "pqdns-ctl", version, verbatim_doc_comment)]
struct Cli {
    /// The server's control socket.
    #[arg(
        short,
        long,
        value_name = "PATH",
        default_value = "/run/pqdns/control.sock"
    )]
    socket: PathBuf,

    /// Print the server's response as JSON (one object on one line).
    #[arg(long)]
    json: bool,

    /// Give up waiting for the response after SECONDS (the operation goes on in the server).
    /// [default: the server's own bound, 600]
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,

    /// Print the man page (roff) or a shell completion script and exit.
    #[arg(long, value_name = "KIND", value_enum, exclusive = true)]
    generate: Option<Generate>,

    #[command(subcommand)]
    command: Option<Command>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(kind) = cli.generate {
        let command = <Cli as clap::CommandFactory>::command();
        return match manual::generate(kind, command, &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pqdns-ctl: --generate: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(cmd) = cli.command else {
        eprintln!("pqdns-ctl: a command is needed (pqdns-ctl --help lists them)");
        return ExitCode::from(2);
    };
    let timeout = cli.timeout.map_or(
        OPERATION_TIMEOUT + Duration::from_secs(5),
        Duration::from_secs,
    );
    let request = Request::new(cmd);
    let (line, response) = match exchange(&cli.socket, &request, timeout) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("pqdns-ctl: {message}");
            return ExitCode::FAILURE;
        }
    };
    let printed = if cli.json {
        stdout::line(format_args!("{}", line.trim_end()))
    } else {
        match &response.result {
            Some(reply) => stdout::line(format_args!("{}", reply.to_string().trim_end())),
            None => Ok(()),
        }
    };
    if let Err(e) = printed {
        eprintln!("pqdns-ctl: {e}");
        return ExitCode::FAILURE;
    }
    if response.ok {
        ExitCode::SUCCESS
    } else {
        let why = response
            .error
            .as_deref()
            .unwrap_or("failed without a reason");
        eprintln!("pqdns-ctl: error: {why}");
        ExitCode::FAILURE
    }
}

/// Sends `request` over the socket at `path` and reads the response line, waiting at most
/// `timeout` for each.
fn exchange(
    path: &std::path::Path,
    request: &Request,
    timeout: Duration,
) -> Result<(String, Response), String> {
    let socket = path.display();
    let mut stream = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                " (is pqdns-server running with control_socket set to it? --socket names another)"
            }
            std::io::ErrorKind::PermissionDenied => {
                " (run as root, as the server's user, or as a member of its group)"
            }
            _ => "",
        };
        format!("cannot connect to {socket}: {e}{hint}")
    })?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("{socket}: {e}"))?;
    let mut text = serde_json::to_string(request).map_err(|e| e.to_string())?;
    text.push('\n');
    // A server that refuses the peer answers without reading the request: its response is
    // read even when sending failed.
    let sent = stream.write_all(text.as_bytes());
    let limit = u64::try_from(MAX_RESPONSE_BYTES).unwrap_or(u64::MAX);
    let mut line = String::new();
    BufReader::new((&stream).take(limit))
        .read_line(&mut line)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
                "no response from {socket} within {} s (the operation may go on in the server)",
                timeout.as_secs()
            ),
            _ => format!("reading from {socket}: {e}"),
        })?;
    if line.is_empty() {
        return Err(match sent {
            Err(e) => format!("sending to {socket}: {e}"),
            Ok(()) => format!("{socket}: the server closed the connection without a response"),
        });
    }
    let response: Response = serde_json::from_str(&line)
        .map_err(|e| format!("{socket}: not a response of this protocol version: {e}"))?;
    Ok((line, response))
}
