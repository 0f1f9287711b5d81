//! One AF_XDP socket (Linux `Documentation/networking/af_xdp.rst`) bound to one receive queue,
//! with a UMEM of its own: [`FRAMES`] frames of [`FRAME_SIZE`] bytes in an anonymous mapping,
//! and its four rings (fill, completion, RX, TX; xdpilone).
//!
//! A frame is always in exactly one place: free (owned by this socket, in [`XskSocket`]'s free
//! list), on the fill ring (the kernel's, to receive into), on the RX ring (received, ours
//! until we answer it), or on the TX ring until the completion ring hands it back. An answer
//! is written into the frame its query came in, so the steady state moves frames in a circle
//! without copying them anywhere else.

use std::num::NonZeroU32;
use std::ptr::NonNull;

use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::XdpError;

/// Bytes per UMEM frame (a page: the largest answer with its headers must fit).
pub const FRAME_SIZE: u32 = 4096;
/// Frames per socket (8 MiB of UMEM).
pub const FRAMES: u32 = 2048;
/// Entries of the fill and RX rings (frames the kernel can hold for reception).
const RX_RING: u32 = 1024;
/// Entries of the TX and completion rings.
const TX_RING: u32 = 1024;
/// Frames kept out of the fill ring for answers sent later (deferred, several datagrams).
pub const RESERVE: usize = 64;
/// Most wake-ups of the kernel per [`XskSocket::transmit`]: in copy mode one wake-up
/// (`sendto`) sends at most 32 frames (the kernel's `TX_BATCH_SIZE`, net/xdp/xsk.c), so this
/// many empty a full TX ring.
const MAX_KICKS: u32 = TX_RING / 32;

/// The UMEM's memory: an anonymous private mapping, unmapped on drop.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> Result<Area, XdpError> {
        // SAFETY: an anonymous private mapping at an address the kernel chooses; no existing
        // memory is affected. The result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(XdpError::Socket {
                what: "mapping the UMEM",
                errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            });
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(XdpError::Socket {
            what: "mapping the UMEM",
            errno: 0,
        })?;
        Ok(Area { ptr, len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are the mapping made in `Area::new`, unmapped once here after
        // the socket that used it was closed (field order in `XskSocket`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: an `XskSocket` owns its UMEM, the memory behind it, its rings and its file
// descriptors; nothing outside it points into them (the kernel only through the descriptor),
// and every access goes through `&mut self`. Moving the whole to the thread that serves it is
// sound; it is not `Sync`.
unsafe impl Send for XskSocket {}

/// An AF_XDP socket on one queue of an interface.
pub struct XskSocket {
    // Field order is drop order: rings and sockets before the UMEM, the UMEM before its memory.
    rx: RingRx,
    tx: RingTx,
    device: DeviceQueue,
    user: User,
    _umem: Umem,
    area: Area,
    /// Frames owned by us and not in use (UMEM offsets).
    free: Vec<u64>,
}

fn errno(what: &'static str) -> impl Fn(xdpilone::Errno) -> XdpError {
    move |e| XdpError::Socket {
        what,
        errno: e.get_raw(),
    }
}

impl XskSocket {
    /// Creates the socket, registers its UMEM, maps its rings and binds it to `queue` of
    /// `interface` (copy or zero-copy, as the driver offers), with the fill ring full.
    ///
    /// # Errors
    /// [`XdpError::Socket`] with the failing step and the OS error number.
    pub fn bind(interface: &str, queue: u32) -> Result<XskSocket, XdpError> {
        let area = Area::new((FRAMES * FRAME_SIZE) as usize)?;
        let config = UmemConfig {
            fill_size: RX_RING,
            complete_size: TX_RING,
            frame_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
        };
        let slice = NonNull::slice_from_raw_parts(area.ptr, area.len);
        // SAFETY: `area` is page-aligned (mmap), FRAMES × FRAME_SIZE bytes long, and outlives
        // the UMEM (it is dropped after it, see the field order of `XskSocket`).
        let umem = unsafe { Umem::new(config, slice) }.map_err(errno("registering the UMEM"))?;
        let name = std::ffi::CString::new(interface).map_err(|_| XdpError::Socket {
            what: "the interface name",
            errno: libc::EINVAL,
        })?;
        let mut info = IfInfo::invalid();
        info.from_name(&name)
            .map_err(errno("finding the interface"))?;
        info.set_queue(queue);
        let socket = Socket::with_shared(&info, &umem).map_err(errno("creating the socket"))?;
        let device = umem
            .fq_cq(&socket)
            .map_err(errno("the fill and completion rings"))?;
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RX_RING),
                    tx_size: NonZeroU32::new(TX_RING),
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(errno("the RX and TX rings"))?;
        let rx = user.map_rx().map_err(errno("mapping the RX ring"))?;
        let tx = user.map_tx().map_err(errno("mapping the TX ring"))?;
        umem.bind(&user).map_err(errno("binding to the queue"))?;
        let mut socket = XskSocket {
            rx,
            tx,
            device,
            user,
            _umem: umem,
            area,
            free: (0..FRAMES).map(|i| u64::from(i * FRAME_SIZE)).collect(),
        };
        socket.refill();
        Ok(socket)
    }

    /// The socket's file descriptor, for the program's socket map and `poll(2)`.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.user.as_raw_fd()
    }

    /// Moves completed transmissions to the free list and tops the fill ring up from it,
    /// keeping [`RESERVE`] frames back.
    pub fn refill(&mut self) {
        {
            let mut done = self.device.complete(TX_RING);
            while let Some(addr) = done.read() {
                self.free.push(addr);
            }
            done.release();
        }
        let spare = self.free.len().saturating_sub(RESERVE);
        if spare > 0 {
            let mut fill = self.device.fill(u32::try_from(spare).unwrap_or(u32::MAX));
            let take = fill.capacity() as usize;
            let at = self.free.len() - take;
            let n = fill.insert(self.free[at..].iter().copied()) as usize;
            fill.commit();
            drop(fill);
            // Exactly the frames the ring took leave the free list.
            self.free.drain(at..at + n);
        }
        if self.device.needs_wakeup() {
            self.device.wake();
        }
    }

    /// Takes up to `max` received descriptors into `out` (cleared first).
    pub fn receive(&mut self, max: u32, out: &mut Vec<XdpDesc>) {
        out.clear();
        let mut rx = self.rx.receive(max);
        while let Some(desc) = rx.read() {
            out.push(desc);
        }
        rx.release();
    }

    /// The frame holding `desc`: from its address to the end of its chunk.
    pub fn frame(&mut self, addr: u64) -> &mut [u8] {
        let base = addr - addr % u64::from(FRAME_SIZE);
        let (start, end) = (addr as usize, (base + u64::from(FRAME_SIZE)) as usize);
        debug_assert!(end <= self.area.len);
        // SAFETY: [start, end) lies in the mapping (the kernel only hands back offsets of
        // frames we gave it, all below FRAMES × FRAME_SIZE, and `end` is the end of that
        // frame, checked against the mapping's length below). The frame is ours while we hold
        // its descriptor (not on the fill or TX ring), and `&mut self` makes this the only
        // reference into the area.
        unsafe {
            let len = end.min(self.area.len).saturating_sub(start);
            std::slice::from_raw_parts_mut(self.area.ptr.as_ptr().add(start), len)
        }
    }

    /// A free frame's address, if one is left.
    pub fn take_free(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Returns a frame we hold to the free list.
    pub fn release(&mut self, addr: u64) {
        self.free.push(addr - addr % u64::from(FRAME_SIZE));
    }

    /// Queues frames for transmission (none: only sends what is still queued) and wakes the
    /// kernel while it asks to be and frames wait on the TX ring, at most `MAX_KICKS` times
    /// and while each wake-up sends some; returns how many frames the TX ring took (the
    /// others stay with the caller).
    pub fn transmit(&mut self, descs: &[XdpDesc]) -> usize {
        let n = if descs.is_empty() {
            0
        } else {
            let mut tx = self
                .tx
                .transmit(u32::try_from(descs.len()).unwrap_or(u32::MAX));
            let n = tx.insert(descs.iter().copied()) as usize;
            tx.commit();
            n
        };
        // One wake-up per batch is not enough in copy mode: a batch larger than what one
        // wake-up sends would leave frames on the ring, the ring would fill under load and
        // answers be dropped (and frames left there when the load stops would never go out).
        let mut waiting = self.tx.pending();
        for _ in 0..MAX_KICKS {
            if waiting == 0 || !self.tx.needs_wakeup() {
                break;
            }
            self.tx.wake();
            let now = self.tx.pending();
            if now >= waiting {
                break;
            }
            waiting = now;
        }
        n
    }

    /// Frames received while the RX ring was full, and frames the kernel could not receive
    /// for want of a frame on the fill ring (the kernel's XDP statistics).
    pub fn kernel_drops(&self) -> (u64, u64) {
        match self.device.statistics_v2() {
            Ok(s) => (s.rx_ring_full, s.rx_fill_ring_empty_descs),
            Err(_) => (0, 0),
        }
    }
}
