//! Client side of DNS cookies (RFC 7873 §5.3): every query over UDP or TCP carries an 8-byte
//! client cookie of our own for that server and, once learnt, the server's cookie. A response
//! whose COOKIE option does not echo our client cookie did not come from the server we asked
//! (an off-path forgery that guessed ID and port) and is rejected; the server cookie proves our
//! address to the server, which exempts us from its response-rate limiting.
//!
//! Client cookies are random per server address (drawn from the OS CSPRNG: RFC 9018 §3's aim,
//! that servers cannot link our queries to each other, without a secret to keep), held for the
//! resolver's life in a table bounded by [`MAX_SERVERS`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Most servers whose cookies are kept; the table is emptied when it is full.
pub const MAX_SERVERS: usize = 4096;
/// Client cookie length, bytes.
pub(crate) const CLIENT_LEN: usize = 8;

#[derive(Clone, Debug)]
struct Entry {
    client: [u8; CLIENT_LEN],
    /// The server cookie last received (8 to 32 bytes).
    server: Vec<u8>,
}

/// Cookies per server.
#[derive(Debug, Default)]
pub struct ClientCookies {
    entries: Mutex<HashMap<IpAddr, Entry>>,
}

/// Why a response's COOKIE option is not acceptable (RFC 7873 §5.3): the response is not from
/// the server asked.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CookieMismatch {
    /// The option's length, bytes, is neither a client cookie alone (8) nor a client and a
    /// server cookie (16 to 40; RFC 7873 §4).
    #[error(
        "COOKIE option of an invalid length ({0} bytes) (RFC 7873 §5.3): the response is not \
         from the server asked"
    )]
    Length(usize),
    /// A COOKIE option came from a server we never sent one to.
    #[error(
        "COOKIE option from a server we sent none (RFC 7873 §5.3): the response is not from \
         the server asked"
    )]
    NoneSent,
    /// The client cookie echoed is not the one we sent that server.
    #[error(
        "COOKIE option with another client cookie than ours (RFC 7873 §5.3): the response is \
         not from the server asked"
    )]
    NotOurs,
}

impl ClientCookies {
    /// The COOKIE option data to send to `server`: our client cookie, then its server cookie
    /// if we have one. `None` if the OS random number generator fails (no cookie is sent).
    pub fn option_for(&self, server: IpAddr) -> Option<Vec<u8>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if !entries.contains_key(&server) {
            let mut client = [0u8; CLIENT_LEN];
            getrandom::fill(&mut client).ok()?;
            if entries.len() >= MAX_SERVERS {
                entries.clear();
            }
            entries.insert(
                server,
                Entry {
                    client,
                    server: Vec::new(),
                },
            );
        }
        let e = &entries[&server];
        Some([&e.client[..], &e.server].concat())
    }

    /// Takes the COOKIE option data of a response from `server` (`None`: the response had
    /// none, which servers without cookies send): the client cookie must be ours; the server
    /// cookie is kept for the next queries.
    ///
    /// # Errors
    /// [`CookieMismatch`] if the client cookie is not ours or the option's length is invalid.
    pub fn learn(&self, server: IpAddr, option: Option<&[u8]>) -> Result<(), CookieMismatch> {
        let Some(data) = option else { return Ok(()) };
        if !(data.len() == CLIENT_LEN || (16..=40).contains(&data.len())) {
            return Err(CookieMismatch::Length(data.len()));
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get_mut(&server).ok_or(CookieMismatch::NoneSent)?;
        if data[..CLIENT_LEN] != entry.client {
            return Err(CookieMismatch::NotOurs);
        }
        if data.len() > CLIENT_LEN {
            entry.server = data[CLIENT_LEN..].to_vec();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_cookie_is_learnt_and_a_foreign_client_cookie_refused() {
        let c = ClientCookies::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = c.option_for(a).unwrap();
        assert_eq!(first.len(), 8);
        assert_ne!(
            c.option_for(b).unwrap(),
            first,
            "another server, another client cookie"
        );
        assert_eq!(c.learn(a, None), Ok(()), "servers without cookies");
        let server = [1u8; 16];
        let reply = [&first[..], &server].concat();
        assert_eq!(c.learn(a, Some(&reply)), Ok(()));
        assert_eq!(c.option_for(a).unwrap(), reply, "sent back from now on");
        let mut forged = reply.clone();
        forged[0] ^= 1;
        assert_eq!(c.learn(a, Some(&forged)), Err(CookieMismatch::NotOurs));
        assert_eq!(
            c.learn(a, Some(&reply[..12])),
            Err(CookieMismatch::Length(12)),
            "12 bytes is no cookie"
        );
        assert_eq!(
            c.learn("192.0.2.9".parse().unwrap(), Some(&reply)),
            Err(CookieMismatch::NoneSent)
        );
    }
}
