//! DNS over UDP (RFC 1035 §4.2.1, RFC 6891 for sizes). A fixed number of tasks share each
//! socket; each owns one receive buffer (65535 bytes) and one response buffer, reused for every
//! datagram, so the steady state allocates only inside the answer engine.
//!
//! Zone transfers are not defined over UDP (RFC 5936 §4.2): AXFR and IXFR get REFUSED here from
//! the answer engine, whoever asks (see [`crate::axfr`]).

use std::sync::Arc;

use tokio::net::UdpSocket;
use tokio::sync::watch;
use tracing::debug;

use super::Shared;
use crate::answer::{respond, Transport};
use crate::fragment;
use crate::metrics::Proto;

/// Largest datagram read, in bytes.
pub const MAX_DATAGRAM: usize = 65535;

/// Serves queries on `socket` until `shutdown` changes.
pub async fn serve(
    socket: Arc<UdpSocket>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut request = vec![0u8; MAX_DATAGRAM];
    let mut response = Vec::with_capacity(usize::from(shared.udp_payload));
    loop {
        let (len, peer) = tokio::select! {
            _ = shutdown.changed() => return,
            r = socket.recv_from(&mut request) => match r {
                Ok(v) => v,
                Err(e) => {
                    debug!(error = %e, "UDP receive error");
                    continue;
                }
            },
        };
        let catalog = shared.catalog();
        let packet = &request[..len];
        let frag = shared.fragmenter.as_ref();
        let outcome = match fragment::answer_request(
            frag,
            &catalog,
            packet,
            shared.udp_payload,
            &mut response,
        ) {
            Some(o) => o,
            None => {
                let payload = shared.udp_payload;
                let mut o = respond(&catalog, packet, Transport::Udp, payload, &mut response, 0);
                if o.truncated {
                    fragment::replace_truncated(
                        frag,
                        &catalog,
                        packet,
                        payload,
                        &mut response,
                        &mut o,
                    );
                }
                o
            }
        };
        if let Some(error) = outcome.error {
            debug!(%peer, %error, "malformed UDP query");
        }
        if outcome.len == 0 {
            continue;
        }
        if let Some(m) = &shared.metrics {
            m.response(
                Proto::Udp,
                outcome.qtype,
                outcome.rcode,
                outcome.truncated,
                outcome.len,
            );
        }
        if let Err(e) = socket.send_to(&response, peer).await {
            debug!(%peer, error = %e, "UDP send error");
        }
    }
}
