//! `pqdns-resolve … | head -1`: a reader that went away before the answer is printed is not a
//! crash (EPIPE used to panic in `println!`). The server is an in-process pqdns-server on
//! 127.0.0.1 port 0 serving an unsigned zone.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use pqdns_server::catalog::Catalog;
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig};

#[test]
fn a_closed_stdout_is_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    std::fs::write(
        &zone,
        "origin = \"example.\"\nrecords = '''\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.80\n'''\n",
    )
    .unwrap();
    let sources = vec![ZoneSource::File(zone)];
    let (catalog, _): (Catalog, _) = load_all(&sources, pqdns_core::time::now()).unwrap();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut settings = Settings::new(dir.path().join("keys"));
    settings.udp = vec![any];
    settings.tcp = vec![any];
    settings.dot = vec![];
    settings.doh = vec![];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = rt
        .block_on(Server::bind(ServerConfig::new(sources, settings), catalog))
        .unwrap();
    let server = format!("@{}", handle.addrs.udp[0]);
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(env!("CARGO_BIN_EXE_pqdns-resolve"))
        .args([server.as_str(), "www.example.", "A"])
        .current_dir(dir.path())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    rt.block_on(handle.shutdown());
}
