//! pqdns-xdp: an AF_XDP fast path for DNS over UDP (Linux), around the kernel's socket layer.
//!
//! An XDP program ([`program`]) attached to a network interface redirects the UDP datagrams
//! for the DNS ports to an AF_XDP socket per receive queue ([`socket`]); everything else (other
//! ports and protocols, IP fragments, TCP — including the retry after a TC answer —, ICMP,
//! ARP and neighbour discovery) goes to the kernel as before. One thread per queue
//! ([`listener`]) reads the frames, checks their Ethernet, IP and UDP headers ([`frame`]),
//! hands the DNS message to the same [`pqdns_net::Service`] as the socket path (client
//! address, [`pqdns_net::Transport::Udp`]: prepared answers, cookies, RRL and ACLs all apply),
//! writes the answer's headers itself and transmits it from the query's own frame.
//!
//! The program ships compiled (`bpf/dns_redirect.o`, from `bpf/dns_redirect.ll`), so building
//! this crate needs no BPF toolchain; running it needs root (or `CAP_NET_ADMIN`,
//! `CAP_BPF`/`CAP_SYS_ADMIN`, `CAP_NET_RAW`) and a kernel with `CONFIG_XDP_SOCKETS`.
//!
//! # Bounds
//! Per queue: [`socket::FRAMES`] frames of [`socket::FRAME_SIZE`] bytes of UMEM, batches of
//! [`listener::BATCH`] frames, [`XdpConfig::max_deferred`] answers sent later in flight; at
//! most [`program::MAX_QUEUES`] queues per interface.

pub mod frame;
pub mod listener;
pub mod program;
pub mod socket;

pub use listener::{XdpConfig, XdpListener, XdpStats};

/// Why the fast path could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum XdpError {
    /// No such network interface (or its sysfs entry is unreadable).
    #[error("network interface {0:?} not found")]
    Interface(String),
    /// The largest UDP answer with its IP and UDP headers does not fit the interface's MTU
    /// (or one UMEM frame): lower the EDNS UDP payload size.
    #[error("{interface}: MTU {mtu} is below the {needed} bytes of the largest UDP answer with IPv6 and UDP headers")]
    Mtu {
        /// The interface.
        interface: String,
        /// Its MTU, bytes.
        mtu: usize,
        /// What the largest answer needs, bytes.
        needed: usize,
    },
    /// More receive queues than the program's socket map holds.
    #[error(
        "{interface} has {queues} receive queues; at most {} are supported",
        program::MAX_QUEUES
    )]
    Queues {
        /// The interface.
        interface: String,
        /// Its receive queues.
        queues: u32,
    },
    /// The kernel refused the XDP program or one of its maps.
    #[error("XDP program: {what}: {detail}")]
    Program {
        /// The step that failed.
        what: &'static str,
        /// The loader's message.
        detail: String,
    },
    /// An AF_XDP socket could not be set up.
    #[error("AF_XDP socket: {what}: {}", std::io::Error::from_raw_os_error(*errno))]
    Socket {
        /// The step that failed.
        what: &'static str,
        /// The OS error number.
        errno: i32,
    },
}
