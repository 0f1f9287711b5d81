//! DNS over dedicated QUIC connections, client side (RFC 9250): one QUIC connection per
//! server (quinn, with the same rustls configuration as DoT but ALPN "doq"), kept open and
//! shared by every task, one bidirectional stream per query carrying the 2-byte length and the
//! message (whose ID must be 0, §4.2.1), the stream finished after the query; the answer is
//! what the server writes before finishing its side. 0-RTT is not used.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;

use quinn::{Connection, Endpoint};
use rustls::pki_types::ServerName;

use crate::transport::{BadAnswer, ExchangeInfo, TransportError};

/// Most QUIC connections kept open at once (one per server); beyond it closed connections are
/// forgotten first, then the longest-held is closed.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// QUIC connections per server, and the local endpoints they use (one per address family).
#[derive(Default)]
pub(crate) struct DoqConnections {
    endpoints: Mutex<[Option<Endpoint>; 2]>,
    /// Each server's connection, and how many connections were opened so far.
    connections: Mutex<(OpenConnections, u64)>,
}

/// Each server's connection, with its number in the order of opening.
type OpenConnections = HashMap<SocketAddr, (Connection, u64)>;

impl DoqConnections {
    /// The open connection to `server`, or a new one made with `tls` for `name`.
    async fn connection(
        &self,
        server: SocketAddr,
        name: ServerName<'static>,
        config: quinn::ClientConfig,
        info: &mut ExchangeInfo,
    ) -> Result<Connection, TransportError> {
        let open = {
            let conns = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            conns
                .0
                .get(&server)
                .map(|(c, _)| c)
                .filter(|c| c.close_reason().is_none())
                .cloned()
        };
        if let Some(c) = open {
            return Ok(c);
        }
        let endpoint = self.endpoint(server)?;
        let name = match &name {
            ServerName::DnsName(n) => n.as_ref().to_string(),
            ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
            other => format!("{other:?}"),
        };
        let connecting = endpoint
            .connect_with(config, server, &name)
            .map_err(|e| TransportError::Io(std::io::Error::other(e)))?;
        let conn = connecting
            .await
            .map_err(|e| TransportError::Io(std::io::Error::other(e)))?;
        info.new_connection = true;
        let mut guard = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let (conns, opened) = &mut *guard;
        if conns.len() >= MAX_CONNECTIONS && !conns.contains_key(&server) {
            conns.retain(|_, (c, _)| c.close_reason().is_none());
        }
        if conns.len() >= MAX_CONNECTIONS && !conns.contains_key(&server) {
            let oldest = conns
                .iter()
                .min_by_key(|(_, (_, n))| *n)
                .map(|(addr, _)| *addr);
            if let Some((c, _)) = oldest.and_then(|a| conns.remove(&a)) {
                c.close(0u32.into(), b"connection limit");
            }
        }
        *opened += 1;
        conns.insert(server, (conn.clone(), *opened));
        Ok(conn)
    }

    /// The client endpoint for `server`'s address family, bound on first use.
    fn endpoint(&self, server: SocketAddr) -> Result<Endpoint, TransportError> {
        let mut endpoints = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut endpoints[usize::from(server.is_ipv6())];
        if let Some(e) = slot {
            return Ok(e.clone());
        }
        let local: SocketAddr = if server.is_ipv6() {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let endpoint = Endpoint::client(local)?;
        *slot = Some(endpoint.clone());
        Ok(endpoint)
    }

    /// Sends the DNS message `wire` (ID 0) to `server` on a new stream (a new connection made
    /// with `config` if none is open) and returns the answer.
    pub(crate) async fn exchange(
        &self,
        server: SocketAddr,
        name: ServerName<'static>,
        config: quinn::ClientConfig,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<(Vec<u8>, Connection), TransportError> {
        let conn = self.connection(server, name, config, info).await?;
        match pqdns_net::doq_query(&conn, wire).await {
            Ok(answer) => Ok((answer, conn)),
            Err(e @ pqdns_net::QueryError::Quic(_)) => {
                Err(TransportError::Io(std::io::Error::other(e.to_string())))
            }
            Err(e) => Err(BadAnswer::Doq(e).into()),
        }
    }
}
