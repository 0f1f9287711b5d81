//! A delay shim standing in for netem (the kernel here has no `sch_netem`): a UDP and TCP relay
//! on loopback that holds every datagram and every TCP read for half the round-trip time in
//! each direction, and the first client→server bytes of a TCP connection for one more RTT (the
//! SYN / SYN-ACK exchange the local accept skips). Order is kept per direction, and each hold
//! ends within about 0.1 ms of its time (tokio's timer, then a blocking sleep).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Most datagrams or chunks queued per direction before the relay waits.
const QUEUE: usize = 4096;

/// Starts relays for UDP `udp_target` and TCP `tcp_target` (each may be `None`) on one
/// loopback port with `rtt` round-trip time; returns the port's address. The relays run until
/// the runtime stops. UDP assumes one client at a time (the latest sender gets the replies).
///
/// # Errors
/// Socket errors while binding.
pub async fn start(
    udp_target: Option<SocketAddr>,
    tcp_target: Option<SocketAddr>,
    rtt: Duration,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let half = rtt / 2;
    if let Some(target) = udp_target {
        let front = Arc::new(UdpSocket::bind(addr).await?);
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
        back.connect(target).await?;
        let client = Arc::new(std::sync::Mutex::new(None::<SocketAddr>));
        let (to_server, mut rx_s) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
        let (to_client, mut rx_c) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
        let (f, c) = (front.clone(), client.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_535];
            while let Ok((n, peer)) = f.recv_from(&mut buf).await {
                *c.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
                if to_server
                    .send((Instant::now() + half, buf[..n].to_vec()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        let b = back.clone();
        tokio::spawn(async move {
            while let Some((at, d)) = rx_s.recv().await {
                wait_until(at).await;
                let _ = b.send(&d).await;
            }
        });
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_535];
            while let Ok(n) = back.recv(&mut buf).await {
                if to_client
                    .send((Instant::now() + half, buf[..n].to_vec()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some((at, d)) = rx_c.recv().await {
                wait_until(at).await;
                let peer = *client.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(peer) = peer {
                    let _ = front.send_to(&d, peer).await;
                }
            }
        });
    }
    if let Some(target) = tcp_target {
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = outbound.set_nodelay(true);
                    let _ = inbound.set_nodelay(true);
                    let (ri, wi) = inbound.into_split();
                    let (ro, wo) = outbound.into_split();
                    // The handshake's extra round trip delays the client's first bytes.
                    tokio::spawn(relay(ri, wo, half, rtt));
                    relay(ro, wi, half, Duration::ZERO).await;
                });
            }
        });
    }
    Ok(addr)
}

/// Copies `r` to `w`, delivering each read `delay` after it arrived (the first one `extra`
/// later still).
async fn relay(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    extra: Duration,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    tokio::spawn(async move {
        while let Some((at, d)) = rx.recv().await {
            wait_until(at).await;
            if w.write_all(&d).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 65_536];
    let mut first = true;
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let at = Instant::now() + delay + if first { extra } else { Duration::ZERO };
        first = false;
        if tx.send((at, buf[..n].to_vec())).await.is_err() {
            return;
        }
    }
}

/// What [`wait_until`] leaves to a precise sleep: tokio's timer wakes up to one 1 ms tick late.
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// Sleeps until `at` to within about 0.1 ms: tokio's timer (1 ms ticks, rounded up, so each
/// hold would be up to 1 ms long and a handshake of several flights several ms slow) for all
/// but [`TIMER_SLACK`], then a thread of the blocking pool sleeping the rest with the
/// operating system's timer.
async fn wait_until(at: Instant) {
    if let Some(coarse) = at.checked_sub(TIMER_SLACK).filter(|c| *c > Instant::now()) {
        tokio::time::sleep_until(coarse).await;
    }
    let rest = at.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
    }
}
