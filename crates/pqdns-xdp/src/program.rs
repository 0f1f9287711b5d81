//! The XDP program: which frames go to the AF_XDP sockets.
//!
//! The program is `bpf/dns_redirect.ll` (LLVM IR), compiled with `llc` into
//! `bpf/dns_redirect.o`, which is committed so that building this crate needs no BPF
//! toolchain (`tests/bpf_object.rs` checks the object against its source where `llc-14` is
//! installed). It redirects IPv4 and IPv6 UDP datagrams (not fragments, no IPv4 options, no
//! IPv6 extension headers, no VLAN tag) to a port listed in its `ports` map to the AF_XDP socket
//! of the receive queue (`xsks`), and passes every other frame, and DNS frames of a queue
//! without a socket, to the kernel. It counts frames redirected and passed per CPU
//! (`counters`).
//!
//! [`Program::attach`] loads it (aya) and attaches it to an interface in the mode the kernel
//! chooses (native where the driver supports it, generic otherwise); dropping the [`Program`]
//! detaches it.

use aya::maps::{Array, MapData, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;

use crate::XdpError;

/// The compiled program (see the module documentation).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/dns_redirect.o");

/// The program's name in the object (its function).
const NAME: &str = "pqdns_xdp";

/// Most receive queues of an interface with a socket (`xsks`' size in the program).
pub const MAX_QUEUES: u32 = 64;

/// The XDP program loaded and attached to one interface.
pub struct Program {
    /// Keeps the program attached (aya detaches when it is dropped).
    _ebpf: Ebpf,
    sockets: XskMap<MapData>,
    counters: PerCpuArray<MapData, u64>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").finish_non_exhaustive()
    }
}

/// Frames the program handled, summed over CPUs since it was attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramCounters {
    /// Redirected to an AF_XDP socket.
    pub redirected: u64,
    /// Passed to the kernel's network stack.
    pub passed: u64,
}

impl Program {
    /// Loads the program, lists `ports` as served, and attaches it to `interface`.
    ///
    /// # Errors
    /// [`XdpError::Program`] if the kernel refuses the program or a map, or the interface
    /// does not exist.
    pub fn attach(interface: &str, ports: &[u16]) -> Result<Program, XdpError> {
        let err = |what: &'static str| {
            move |e: &dyn std::fmt::Display| XdpError::Program {
                what,
                detail: e.to_string(),
            }
        };
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| err("loading the object")(&e))?;
        let mut port_map: Array<_, u8> = Array::try_from(
            ebpf.map_mut("ports")
                .ok_or_else(|| err("the ports map")(&"missing"))?,
        )
        .map_err(|e| err("the ports map")(&e))?;
        for &port in ports {
            port_map
                .set(u32::from(port), 1, 0)
                .map_err(|e| err("listing a port")(&e))?;
        }
        let sockets = XskMap::try_from(
            ebpf.take_map("xsks")
                .ok_or_else(|| err("the socket map")(&"missing"))?,
        )
        .map_err(|e| err("the socket map")(&e))?;
        let counters = PerCpuArray::try_from(
            ebpf.take_map("counters")
                .ok_or_else(|| err("the counters")(&"missing"))?,
        )
        .map_err(|e| err("the counters")(&e))?;
        let program: &mut Xdp = ebpf
            .program_mut(NAME)
            .ok_or_else(|| err("the program")(&"missing"))?
            .try_into()
            .map_err(|e| err("the program")(&e))?;
        program.load().map_err(|e| err("loading the program")(&e))?;
        program
            .attach(interface, XdpMode::Default)
            .map_err(|e| err("attaching the program")(&e))?;
        Ok(Program {
            _ebpf: ebpf,
            sockets,
            counters,
        })
    }

    /// Directs the frames of receive queue `queue` to the AF_XDP socket `socket`.
    ///
    /// # Errors
    /// [`XdpError::Program`] if the queue is past [`MAX_QUEUES`] or the kernel refuses.
    pub fn set_socket(&mut self, queue: u32, socket: std::os::fd::RawFd) -> Result<(), XdpError> {
        self.sockets
            .set(queue, socket, 0)
            .map_err(|e| XdpError::Program {
                what: "registering a socket",
                detail: e.to_string(),
            })
    }

    /// The frames redirected and passed so far.
    pub fn counters(&self) -> ProgramCounters {
        let sum = |index: u32| -> u64 {
            self.counters
                .get(&index, 0)
                .map(|per_cpu| per_cpu.iter().copied().fold(0u64, u64::wrapping_add))
                .unwrap_or(0)
        };
        ProgramCounters {
            redirected: sum(0),
            passed: sum(1),
        }
    }
}
