; pqdns-xdp: the XDP program of the AF_XDP fast path, in LLVM IR (LLVM 14, typed pointers).
;
; A frame goes to the AF_XDP socket of its receive queue (map `xsks`, an XSKMAP keyed by queue
; index) when it is Ethernet II without VLAN tag carrying
;   - IPv4 with a 20-byte header (no options), protocol UDP, not a fragment
;     (RFC 791: MF flag and fragment offset both zero), or
;   - IPv6 whose next header is UDP (no extension headers, so no Fragment header, RFC 8200 §4.5),
; and its UDP destination port has a non-zero byte in `ports` (an ARRAY indexed by port).
; Everything else, and a DNS frame on a queue without a socket, is passed to the kernel
; (XDP_PASS: bpf_redirect_map's fallback action). Per-CPU counters (`counters`): index 0 frames
; redirected, index 1 frames passed.
;
; Built (the object is committed beside this file; tests/bpf_object.rs checks it):
;   llc-14 -march=bpfel -mcpu=v2 -O2 -filetype=obj dns_redirect.ll -o dns_redirect.o

target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpfel"

; struct bpf_map_def { type, key_size, value_size, max_entries, map_flags }
%map_def = type { i32, i32, i32, i32, i32 }

; BPF_MAP_TYPE_XSKMAP (17): queue index -> AF_XDP socket.
@xsks = global %map_def { i32 17, i32 4, i32 4, i32 64, i32 0 }, section "maps", align 4
; BPF_MAP_TYPE_ARRAY (2): UDP port -> 1 if DNS is served there through AF_XDP.
@ports = global %map_def { i32 2, i32 4, i32 1, i32 65536, i32 0 }, section "maps", align 4
; BPF_MAP_TYPE_PERCPU_ARRAY (6): [redirected, passed] frames.
@counters = global %map_def { i32 6, i32 4, i32 8, i32 2, i32 0 }, section "maps", align 4

@_license = global [4 x i8] c"GPL\00", section "license", align 1

define i32 @pqdns_xdp(i8* %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %ctx32 = bitcast i8* %ctx to i32*
  ; struct xdp_md { u32 data, data_end, data_meta, ingress_ifindex, rx_queue_index, ... }
  %data32 = load i32, i32* %ctx32, align 4
  %end_p = getelementptr i32, i32* %ctx32, i64 1
  %end32 = load i32, i32* %end_p, align 4
  %queue_p = getelementptr i32, i32* %ctx32, i64 4
  %queue = load i32, i32* %queue_p, align 4
  %data64 = zext i32 %data32 to i64
  %data = inttoptr i64 %data64 to i8*
  %end64 = zext i32 %end32 to i64
  %end = inttoptr i64 %end64 to i8*
  %eth_end = getelementptr i8, i8* %data, i64 14
  %short = icmp ugt i8* %eth_end, %end
  br i1 %short, label %pass, label %ethernet

ethernet:
  %type_p = getelementptr i8, i8* %data, i64 12
  %type_p16 = bitcast i8* %type_p to i16*
  %type = load i16, i16* %type_p16, align 1
  ; loaded little-endian: 0x0800 reads as 0x0008, 0x86DD as 0xDD86 (56710)
  switch i16 %type, label %pass [
    i16 8, label %ipv4
    i16 56710, label %ipv6
  ]

ipv4:
  %v4_end = getelementptr i8, i8* %data, i64 42
  %v4_short = icmp ugt i8* %v4_end, %end
  br i1 %v4_short, label %pass, label %ipv4_header

ipv4_header:
  %vihl_p = getelementptr i8, i8* %data, i64 14
  %vihl = load i8, i8* %vihl_p, align 1
  %proto_p = getelementptr i8, i8* %data, i64 23
  %proto = load i8, i8* %proto_p, align 1
  %frag_p = getelementptr i8, i8* %data, i64 20
  %frag_p16 = bitcast i8* %frag_p to i16*
  %frag = load i16, i16* %frag_p16, align 1
  ; MF and the fragment offset: 0x3fff big-endian is 0xff3f loaded little-endian
  %frag_bits = and i16 %frag, -193
  %plain = icmp eq i8 %vihl, 69
  %udp4 = icmp eq i8 %proto, 17
  %whole = icmp eq i16 %frag_bits, 0
  %ok4a = and i1 %plain, %udp4
  %ok4 = and i1 %ok4a, %whole
  br i1 %ok4, label %udp_v4, label %pass

udp_v4:
  %port4_p = getelementptr i8, i8* %data, i64 36
  %port4_p16 = bitcast i8* %port4_p to i16*
  %port4 = load i16, i16* %port4_p16, align 1
  br label %udp

ipv6:
  %v6_end = getelementptr i8, i8* %data, i64 62
  %v6_short = icmp ugt i8* %v6_end, %end
  br i1 %v6_short, label %pass, label %ipv6_header

ipv6_header:
  %ver_p = getelementptr i8, i8* %data, i64 14
  %ver = load i8, i8* %ver_p, align 1
  %next_p = getelementptr i8, i8* %data, i64 20
  %next = load i8, i8* %next_p, align 1
  %ver_hi = and i8 %ver, -16
  %is6 = icmp eq i8 %ver_hi, 96
  %udp6 = icmp eq i8 %next, 17
  %ok6 = and i1 %is6, %udp6
  br i1 %ok6, label %udp_v6, label %pass

udp_v6:
  %port6_p = getelementptr i8, i8* %data, i64 56
  %port6_p16 = bitcast i8* %port6_p to i16*
  %port6 = load i16, i16* %port6_p16, align 1
  br label %udp

udp:
  %port_be = phi i16 [ %port4, %udp_v4 ], [ %port6, %udp_v6 ]
  %port = call i16 @llvm.bswap.i16(i16 %port_be)
  %port32 = zext i16 %port to i32
  store i32 %port32, i32* %key, align 4
  %key8 = bitcast i32* %key to i8*
  %served_p = call i8* inttoptr (i64 1 to i8* (i8*, i8*)*)(i8* bitcast (%map_def* @ports to i8*), i8* %key8)
  %no_entry = icmp eq i8* %served_p, null
  br i1 %no_entry, label %pass, label %port_entry

port_entry:
  %served = load i8, i8* %served_p, align 1
  %not_dns = icmp eq i8 %served, 0
  br i1 %not_dns, label %pass, label %redirect

redirect:
  ; bpf_redirect_map(map, key, flags): the low bits of flags are the action when the key has
  ; no socket (XDP_PASS = 2).
  %action64 = call i64 inttoptr (i64 51 to i64 (i8*, i32, i64)*)(i8* bitcast (%map_def* @xsks to i8*), i32 %queue, i64 2)
  %action = trunc i64 %action64 to i32
  %redirected = icmp eq i32 %action, 4
  %counter = select i1 %redirected, i32 0, i32 1
  br label %count

pass:
  br label %count

count:
  %result = phi i32 [ %action, %redirect ], [ 2, %pass ]
  %index = phi i32 [ %counter, %redirect ], [ 1, %pass ]
  store i32 %index, i32* %key, align 4
  %key8c = bitcast i32* %key to i8*
  %slot = call i8* inttoptr (i64 1 to i8* (i8*, i8*)*)(i8* bitcast (%map_def* @counters to i8*), i8* %key8c)
  %no_slot = icmp eq i8* %slot, null
  br i1 %no_slot, label %done, label %increment

increment:
  %slot64 = bitcast i8* %slot to i64*
  %n = load i64, i64* %slot64, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, i64* %slot64, align 8
  br label %done

done:
  ret i32 %result
}

declare i16 @llvm.bswap.i16(i16)
