//! Automated trust-anchor updates (RFC 5011; issue 29): a KSK roll of `example.` (ECDSA
//! P-256) on a scripted authority, followed by a resolver whose configured anchor is the old
//! KSK's DS and whose RFC 5011 clock the test steps (the signatures stay valid on the real
//! clock):
//!
//! 1. the first refresh seeds the state: the old KSK Valid; the state file is written;
//! 2. the new KSK is published, signed by both: AddPend, not an anchor, one second short of
//!    the 30-day hold-down still pending, at 30 days Valid;
//! 3. a restart (a new resolver reading the state file) holds both KSKs as anchors;
//! 4. the old KSK is published with the REVOKE bit, signing the RRset: Revoked, the new KSK
//!    the only anchor;
//! 5. the old KSK is withdrawn: a resolver restarted from the state file validates the zone
//!    through the new KSK (Secure) while one with the configured anchor alone finds it Bogus.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::message::Message;
use pqdns_core::wire::{Edns, Rcode};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Record, RrType, Zone};
use pqdns_resolver::anchor_update::{KeyState, StateFile, ADD_HOLD_DOWN};
use pqdns_resolver::{Config, Mode, Resolver, TrustAnchors};

use common::{name, record, runtime, sep_ds_records, spawn_udp, udp_client};

const DAY: u64 = 86_400;
const ZONE: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n";

/// `example.` signed with `keys` (the DNSKEY RRset is theirs): the apex DNSKEY records and
/// the RRSIGs over them.
fn dnskey_answer(keys: &[ZoneKey]) -> (Zone, Vec<Record>) {
    let origin = name("example.");
    let records = ZoneFileReader::new(Some(origin.clone()), Some(300))
        .read_str(ZONE, "example.zone")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let now = pqdns_core::time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * DAY,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, keys, &policy, &|_, _| {}).unwrap();
    let dnskeys = &zone.nodes[&origin][&RrType::DNSKEY];
    let mut answer: Vec<Record> = dnskeys
        .rdatas
        .iter()
        .map(|k| record("example.", RrType::DNSKEY, 300, k.clone()))
        .collect();
    answer.extend(
        dnskeys
            .rrsigs
            .iter()
            .map(|s| record("example.", RrType::RRSIG, 300, s.clone())),
    );
    (zone, answer)
}

/// A scripted authority answering `example. DNSKEY` with what `answer` holds now, and
/// REFUSED to anything else.
fn authority(rt: &tokio::runtime::Runtime, answer: Arc<Mutex<Vec<Record>>>) -> SocketAddr {
    let socket = rt
        .block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let _guard = rt.enter();
    spawn_udp(socket, move |wire, _| {
        let q = Message::parse(wire).ok()?;
        let question = &q.questions[0];
        let mut m = common::scripted::reply(&q, true, Rcode::NOERROR);
        m.edns = Some(Edns::dnssec_ok(1232));
        if question.qname == name("example.") && question.qtype == RrType::DNSKEY {
            m.answers = answer.lock().unwrap().clone();
        } else {
            m = common::scripted::reply(&q, true, Rcode::REFUSED);
        }
        Some(m.to_wire())
    });
    addr
}

/// The keys of a KSK roll for `example.` (ECDSA P-256), in order: the published set (the old
/// KSK, then a ZSK), the new KSK still to publish, and the old and the new KSK's DNSKEY RDATA
/// (wire format).
struct Roll(Vec<ZoneKey>, ZoneKey, Vec<u8>, Vec<u8>);

impl Roll {
    fn generate(origin: &Name) -> Roll {
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        let key = |role| {
            ZoneKey::generate(
                origin,
                Algorithm::EcdsaP256Sha256,
                role,
                &profile,
                &provider,
                300,
            )
            .unwrap()
        };
        let (old, new) = (key(KeyRole::Ksk), key(KeyRole::Ksk));
        let (old_key, new_key) = (old.dnskey_rdata(), new.dnskey_rdata());
        Roll(vec![old, key(KeyRole::Zsk)], new, old_key, new_key)
    }
}

/// A resolver forwarding to `server` with `anchors`, and RFC 5011 state in `state` if given.
fn resolver(server: SocketAddr, anchors: &TrustAnchors, state: Option<&Path>) -> Resolver {
    let mut config = Config::new(Mode::Forward(server), anchors.clone());
    config.anchor_state = state.map(|p| StateFile::open(p).unwrap());
    Resolver::new(config, udp_client(Duration::from_secs(3)))
}

#[test]
fn a_ksk_roll_is_followed_through_hold_down_and_revocation_across_restarts() {
    let origin = name("example.");
    let Roll(mut keys, new, old_key, new_key) = Roll::generate(&origin);
    let (zone, first) = dnskey_answer(&keys);
    // The configured anchor: the old KSK's DS, as an operator's file holds it.
    let mut anchors = TrustAnchors::default();
    for ds in sep_ds_records(&zone) {
        anchors.add_ds(ds.owner, ds.rdata);
    }
    let answer = Arc::new(Mutex::new(first));
    let rt = runtime();
    let server = authority(&rt, Arc::clone(&answer));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("anchors.state");
    let r = resolver(server, &anchors, Some(&state));
    assert_eq!(r.managed_zones(), vec![origin.clone()]);
    let t0 = 1_800_000_000;
    let refresh = |r: &Resolver, t: u64| rt.block_on(r.refresh_trust_anchor(&origin, t)).unwrap();
    let state_of = |k: &[u8]| StateFile::open(&state).unwrap().anchors.state(&origin, k);

    // 1. Seeded from the configured anchor; written to the file.
    let seeded = refresh(&r, t0);
    assert_eq!(seeded.changes.len(), 1, "{seeded:?}");
    assert_eq!(state_of(&old_key), Some(KeyState::Valid));
    assert!(seeded.next >= 3600, "{seeded:?}");

    // 2. The new KSK published, the RRset signed by both KSKs.
    keys.insert(1, new);
    *answer.lock().unwrap() = dnskey_answer(&keys).1;
    let t1 = t0 + DAY;
    refresh(&r, t1);
    assert_eq!(state_of(&new_key), Some(KeyState::AddPend { since: t1 }));
    refresh(&r, t1 + ADD_HOLD_DOWN - 1);
    assert_eq!(state_of(&new_key), Some(KeyState::AddPend { since: t1 }));
    let added = refresh(&r, t1 + ADD_HOLD_DOWN);
    assert_eq!(added.changes.len(), 1, "{added:?}");
    assert_eq!(state_of(&new_key), Some(KeyState::Valid));

    // 3. A restart keeps the state: both KSKs are anchors.
    let restarted = StateFile::open(&state).unwrap();
    assert_eq!(restarted.anchors.ds_for(&origin).unwrap().len(), 2);

    // 4. The old KSK revoked: its flags with the REVOKE bit, and it signs the RRset.
    keys[0].flags |= 0x0080;
    *answer.lock().unwrap() = dnskey_answer(&keys).1;
    let t4 = t0 + 40 * DAY;
    let r = resolver(server, &anchors, Some(&state));
    let revoked = refresh(&r, t4);
    assert_eq!(revoked.changes.len(), 1, "{revoked:?}");
    assert_eq!(state_of(&old_key), Some(KeyState::Revoked { since: t4 }));
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(
        text.contains(" REVOKED ") && text.contains(" VALID "),
        "{text}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );

    // 5. The old KSK withdrawn: the RRset holds and is signed by the new KSK only.
    keys.remove(0);
    *answer.lock().unwrap() = dnskey_answer(&keys).1;
    let status = |r: &Resolver| {
        rt.block_on(r.resolve(&origin, RrType::DNSKEY))
            .unwrap()
            .status()
            .clone()
    };
    let restarted = resolver(server, &anchors, Some(&state));
    assert!(status(&restarted).is_secure(), "{}", status(&restarted));
    let fixed = resolver(server, &anchors, None);
    assert!(status(&fixed).is_bogus(), "{}", status(&fixed));
    assert_eq!(
        fixed.managed_zones(),
        Vec::<Name>::new(),
        "no automated updates without a state file"
    );
}

/// Waits (at most 60 s) until `service`'s log has `n` lines of RFC 5011 key-state changes.
fn key_state_changes(service: &common::service::Service, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while service
        .log()
        .matches("trust anchor key state (RFC 5011)")
        .count()
        < n
    {
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than {n} key-state changes:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The RFC 5011 loop of the `pqdns-resolver` binary (`--trust-anchor-state`), end to end: its
/// first active refresh, at start-up (RFC 5011 §2.3), finds `example.` publishing a new KSK
/// beside the anchored one, signed by both, and writes the state file (atomically: nothing
/// else is left in its directory) with the anchored key Valid and the new one AddPend since
/// then. Stopped, its state aged by the 30-day hold-down (as if it had been down that long)
/// and started again, the binary reads the state back and its first refresh makes the new key
/// Valid — a binary that had ignored the file would have seeded it AddPend again.
#[test]
fn the_binary_follows_a_new_ksk_and_reads_its_state_back_after_a_restart() {
    use common::service::Service;
    let origin = name("example.");
    let Roll(mut keys, new, old_key, new_key) = Roll::generate(&origin);
    // The anchor file: the old KSK's DS only.
    let (before, _) = dnskey_answer(&keys);
    let dir = tempfile::tempdir().unwrap();
    let anchor = dir.path().join("example.ds");
    let ds: String = sep_ds_records(&before)
        .iter()
        .map(|r| format!("{r}\n"))
        .collect();
    std::fs::write(&anchor, ds).unwrap();
    keys.insert(1, new);
    let rt = runtime();
    let server = authority(&rt, Arc::new(Mutex::new(dnskey_answer(&keys).1)));
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    let state = state_dir.join("anchors.state");
    let forward = server.to_string();
    let args = [
        "--forward",
        forward.as_str(),
        "--trust-anchor",
        anchor.to_str().unwrap(),
        "--trust-anchor-state",
        state.to_str().unwrap(),
    ];

    let started = pqdns_core::time::now();
    let mut first = Service::start(dir.path(), "first", &args);
    key_state_changes(&first, 2);
    let read = StateFile::open(&state).unwrap().anchors;
    assert_eq!(read.state(&origin, &old_key), Some(KeyState::Valid));
    let Some(KeyState::AddPend { since }) = read.state(&origin, &new_key) else {
        panic!("{}", std::fs::read_to_string(&state).unwrap());
    };
    assert!(
        (started..=pqdns_core::time::now()).contains(&since),
        "{since}"
    );
    let names: Vec<_> = std::fs::read_dir(&state_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["anchors.state"], "no temporary file left");
    first.terminate();

    // Thirty days and a second later, as far as the state is concerned.
    let text = std::fs::read_to_string(&state).unwrap();
    let aged = text.replace(
        &format!(" ADDPEND {since} "),
        &format!(" ADDPEND {} ", since - ADD_HOLD_DOWN - 1),
    );
    assert_ne!(aged, text);
    std::fs::write(&state, aged).unwrap();
    let second = Service::start(dir.path(), "second", &args);
    key_state_changes(&second, 1);
    let read = StateFile::open(&state).unwrap().anchors;
    assert_eq!(read.state(&origin, &old_key), Some(KeyState::Valid));
    assert_eq!(
        read.state(&origin, &new_key),
        Some(KeyState::Valid),
        "{}",
        second.log()
    );
    assert_eq!(read.ds_for(&origin).unwrap().len(), 2);
}
