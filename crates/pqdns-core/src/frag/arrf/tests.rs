use super::*;
use crate::dnssec::Algorithm;
use crate::frag::edns::DEFAULT_CODE;
use crate::frag::fixtures::{case, cases, n, query, signatures_verify, BUDGET};
use crate::wire::FLAG_AA;

const T: RrType = DEFAULT_RRFRAG_TYPE;

fn key(q: &Message) -> Key {
    Key {
        server: "127.0.0.1:5353".parse().unwrap(),
        id: q.id,
        question: q.questions[0].clone(),
    }
}

fn edns() -> Edns {
    query("example.", RrType::A).edns.unwrap()
}

/// Plays client and server over wire bytes: every fragment request and response is encoded
/// and parsed again. Responses are fed in reverse order. Checks sizes and amplification.
fn fetch(full: &Message, r: &mut Reassembler, k: &Key) -> Result<Message, ArrfError> {
    let original = query(&k.question.qname.to_string(), k.question.qtype)
        .to_wire()
        .len();
    let first = first_response(full, BUDGET, T)?;
    let wire = first.to_wire_with(Some(T));
    assert!(
        wire.len() <= BUDGET,
        "first response of {} bytes",
        wire.len()
    );
    assert!(!first.has_flag(FLAG_TC));
    let now = Instant::now();
    let mut progress = r.start(k.clone(), Message::parse_with(&wire, Some(T)).unwrap(), now)?;
    for _round in 0..3 {
        let Progress::Missing(wanted) = progress else {
            break;
        };
        let mut responses = Vec::new();
        for group in plan_requests(&wanted, BUDGET) {
            let req = fragment_request(k.id, &k.question, &group, edns(), T, DEFAULT_CODE);
            let req_wire = req.to_wire_with(Some(T));
            let parsed = Message::parse_with(&req_wire, Some(T)).unwrap();
            assert_eq!(parsed, req);
            let resp = answer_request(full, &parsed, BUDGET, T)?.to_wire_with(Some(T));
            assert!(
                resp.len() <= BUDGET,
                "fragment response of {} bytes",
                resp.len()
            );
            // Amplification: bytes out minus bytes in never exceed a full-size UDP answer's.
            assert!(resp.len().saturating_sub(req_wire.len()) <= BUDGET - original);
            responses.push(Message::parse_with(&resp, Some(T)).unwrap());
        }
        progress = Progress::Missing(vec![]);
        for resp in responses.iter().rev() {
            progress = r.add(k, resp, now)?;
        }
    }
    match progress {
        Progress::Complete(m) => Ok(m),
        Progress::Missing(w) => panic!("still missing {w:?}"),
    }
}

#[test]
fn every_algorithm_round_trips_byte_identical_and_validates() {
    for c in cases() {
        for full in &c.answers {
            let wire = full.to_wire();
            let mut r = Reassembler::new(Limits::default(), T);
            let k = key(full);
            if wire.len() <= BUDGET {
                // Small classical answers are not touched.
                assert_eq!(first_response(full, BUDGET, T).unwrap(), *full);
                continue;
            }
            match fetch(full, &mut r, &k) {
                Ok(back) => {
                    assert_eq!(back.to_wire(), wire, "{} {:?}", c.alg, full.questions[0]);
                    assert!(signatures_verify(&back, &c.zone), "{}", c.alg);
                }
                // Four 17 KB SPHINCS+-f signatures exceed any DNS message: refused up front.
                Err(ArrfError::MessageTooLarge) if wire.len() > MAX_MESSAGE => {}
                Err(e) => panic!("{} {:?}: {e}", c.alg, full.questions[0]),
            }
            assert_eq!(r.memory_used(), 0);
            assert!(r.peak_memory() <= 2 * MAX_MESSAGE, "{}", r.peak_memory());
        }
    }
}

/// Pushed fragments (a proven client, `frag::edns::PUSH`): the first response and the
/// responses [`pushed_responses`] makes without requests complete every answer, byte for
/// byte, in one round; each fits the budget and carries the query's ID.
#[test]
fn pushed_responses_complete_every_answer_in_one_round() {
    let mut pushed_any = false;
    for c in cases() {
        for full in c.answers.iter().filter(|a| a.to_wire().len() > BUDGET) {
            if full.to_wire().len() > MAX_MESSAGE {
                continue;
            }
            let first = first_response(full, BUDGET, T).unwrap();
            let pushed = pushed_responses(full, &first, BUDGET, T).unwrap();
            assert!(!pushed.is_empty(), "{}: nothing pushed", c.alg);
            pushed_any = true;
            let mut r = Reassembler::new(Limits::default(), T);
            let k = key(full);
            let now = Instant::now();
            let mut progress = r.start(k.clone(), first, now).unwrap();
            for p in &pushed {
                let wire = p.to_wire_with(Some(T));
                assert!(wire.len() <= BUDGET, "{}: {} bytes", c.alg, wire.len());
                assert_eq!(p.id, full.id);
                progress = r
                    .add(&k, &Message::parse_with(&wire, Some(T)).unwrap(), now)
                    .unwrap();
            }
            match progress {
                Progress::Complete(m) => assert_eq!(m.to_wire(), full.to_wire(), "{}", c.alg),
                Progress::Missing(w) => panic!("{}: still missing {w:?}", c.alg),
            }
            // Each response adds exactly the ranges that were not sent.
            let unsent_bytes: u32 = unsent(&first_response(full, BUDGET, T).unwrap(), T)
                .unwrap()
                .iter()
                .map(|w| w.len)
                .sum();
            let pushed_bytes: usize = pushed
                .iter()
                .flat_map(|p| &p.answers)
                .map(|r| RrFrag::from_record(r, T, true).unwrap().unwrap().data.len())
                .sum();
            assert_eq!(pushed_bytes, unsent_bytes as usize, "{}", c.alg);
        }
    }
    assert!(pushed_any);
}

/// Field-by-field samples of the published RRFRAG layout (Goertzen & Stebila; WIRE §3).
#[test]
fn rrfrag_wire_samples_match_the_published_layout() {
    // The experiments' RRFRAG type 108 (0x6c), still selectable.
    const T: RrType = RrType(108);
    // A response: header (ID beef, QR AA, 1 question, 1 answer), question example. DNSKEY IN,
    // then NAME=0 | TYPE=108 | FRAGSIZE=4 | CURIDX=32 | RRSIZE=2560 | RRID=3 | 4 data bytes.
    let mut resp = vec![0xbe, 0xef, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0];
    resp.extend(b"\x07example\x00\x00\x30\x00\x01");
    resp.extend([
        0x00, 0x00, 0x6c, 0x00, 0x04, 0, 0, 0, 0x20, 0, 0, 0x0a, 0, 0, 3,
    ]);
    resp.extend([0xde, 0xad, 0xbe, 0xef]);
    let m = Message::parse_with(&resp, Some(T)).unwrap();
    let f = RrFrag::from_record(&m.answers[0], T, true)
        .unwrap()
        .unwrap();
    assert_eq!(
        f,
        RrFrag {
            frag_size: 4,
            cur_idx: 32,
            rr_size: 2560,
            rr_id: 3,
            data: vec![0xde, 0xad, 0xbe, 0xef],
        }
    );
    assert_eq!(f.wire_len(), 19);
    assert_eq!(m.to_wire_with(Some(T)), resp);
    // A standard parser sees garbage there: the compact form is not a normal RR.
    assert!(Message::parse(&resp).is_err());

    // A fragment request for 1024 bytes from offset 32 of RRID 3: same ID, question `. 108 IN`,
    // data-less RRFRAG in the additional section, OPT with DO and option 65108 carrying ARRF
    // (0x01), QTYPE DNSKEY and the QNAME example.
    let mut req = vec![0xbe, 0xef, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 2];
    req.extend([0x00, 0x00, 0x6c, 0x00, 0x01]);
    req.extend([
        0x00, 0x00, 0x6c, 0x04, 0x00, 0, 0, 0, 0x20, 0, 0, 0x0a, 0, 0, 3,
    ]);
    req.extend([0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0, 0x80, 0x00, 0, 16]);
    req.extend([0xfe, 0x54, 0, 12, 0x01, 0x00, 0x30]);
    req.extend(b"\x07example\x00");
    let original = Question {
        qname: n("example."),
        qtype: RrType::DNSKEY,
        qclass: Class::IN,
    };
    let wanted = Wanted {
        rr_id: 3,
        rr_size: 2560,
        start: 32,
        len: 1024,
    };
    let built = fragment_request(0xbeef, &original, &[wanted], edns(), T, DEFAULT_CODE);
    assert_eq!(built.to_wire_with(Some(T)), req);
    let parsed = Message::parse_with(&req, Some(T)).unwrap();
    let w = RrFrag::from_record(&parsed.additional[0], T, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (w.frag_size, w.cur_idx, w.rr_size, w.rr_id),
        (1024, 32, 2560, 3)
    );
    assert!(w.data.is_empty());
    // The type is configurable: with 65280 the same bytes are ordinary records.
    assert!(Message::parse_with(&req, Some(RrType(65280))).is_err());
}

#[test]
fn server_replaces_the_largest_records_and_fills_32_byte_blocks() {
    let full = &case(Algorithm::MlDsa44).answers[1]; // www A + RRSIG (2420-byte signature)
    let first = first_response(full, BUDGET, T).unwrap();
    assert_eq!(
        first.answers[0], full.answers[0],
        "the small A record stays"
    );
    let f = RrFrag::from_record(&first.answers[1], T, true)
        .unwrap()
        .unwrap();
    let rrsig = rr_wire(&full.answers[1]);
    assert_eq!(f.rr_id, 1);
    assert_eq!(f.rr_size as usize, rrsig.len());
    assert_eq!(f.cur_idx, 0);
    assert_eq!(f.data.len() % DATA_BLOCK, 0);
    assert_eq!(f.data, rrsig[..f.data.len()]);
    let len = first.to_wire_with(Some(T)).len();
    assert!(len <= BUDGET && BUDGET - len < DATA_BLOCK, "{len}");
    // A budget that cannot even hold the announcements: TC + TCP instead.
    assert_eq!(first_response(full, 60, T), Err(ArrfError::DoesNotFit(60)));
}

/// A first response announcing the given RRFRAGs (data included).
fn announcing(frags: &[RrFrag]) -> Message {
    let mut m = query("example.", RrType::DNSKEY);
    m.flags = FLAG_QR | FLAG_AA;
    m.answers = frags.iter().map(|f| f.to_record(T)).collect();
    m
}

fn frag(rr_id: u16, rr_size: u32, cur_idx: u32, data: &[u8]) -> RrFrag {
    RrFrag {
        frag_size: data.len() as u16,
        cur_idx,
        rr_size,
        rr_id,
        data: data.to_vec(),
    }
}

fn fragment_response(id: u16, frags: &[RrFrag]) -> Message {
    let mut m = announcing(frags);
    m.id = id;
    m.questions[0] = Question {
        qname: Name::root(),
        qtype: T,
        qclass: Class::IN,
    };
    m
}

#[test]
fn unauthenticated_sizes_are_capped_before_anything_is_stored() {
    let mut r = Reassembler::new(Limits::default(), T);
    let first = query("example.", RrType::DNSKEY);
    let k = key(&first);
    // RRSIZE = 4 GiB - 1.
    let huge = announcing(&[frag(0, u32::MAX, 0, &[])]);
    assert_eq!(
        r.start(k.clone(), huge, Instant::now()),
        Err(ArrfError::RrSize(u32::MAX))
    );
    // Just above the largest possible record, and below the smallest.
    let over = announcing(&[frag(0, MAX_RR_SIZE + 1, 0, &[])]);
    assert!(matches!(
        r.start(k.clone(), over, Instant::now()),
        Err(ArrfError::RrSize(_))
    ));
    let under = announcing(&[frag(0, 10, 0, &[])]);
    assert!(matches!(
        r.start(k.clone(), under, Instant::now()),
        Err(ArrfError::RrSize(_))
    ));
    // 70 plausible records of 60000 bytes each: the message would exceed 64 KiB.
    let many: Vec<RrFrag> = (0..70).map(|i| frag(i, 60_000, 0, &[])).collect();
    assert_eq!(
        r.start(k.clone(), announcing(&many), Instant::now()),
        Err(ArrfError::MessageTooLarge)
    );
    // The same RRID announced twice.
    let twice = announcing(&[frag(5, 100, 0, &[]), frag(5, 100, 0, &[])]);
    assert_eq!(
        r.start(k, twice, Instant::now()),
        Err(ArrfError::Inconsistent(5))
    );
    assert_eq!(r.peak_memory(), 0);
}

#[test]
fn bad_fragments_are_rejected_and_change_nothing() {
    let full = &case(Algorithm::MlDsa44).answers[1];
    let first = first_response(full, BUDGET, T).unwrap();
    let announced = RrFrag::from_record(&first.answers[1], T, true)
        .unwrap()
        .unwrap();
    let (size, have) = (announced.rr_size, announced.data.len() as u32);
    let mut r = Reassembler::new(Limits::default(), T);
    let k = key(full);
    let now = Instant::now();
    assert!(matches!(
        r.start(k.clone(), first, now),
        Ok(Progress::Missing(_))
    ));
    let used = r.memory_used();
    let ok = frag(1, size, have, &[7; 100]);
    let cases = [
        (
            frag(1, size + 1, have, &[7; 100]),
            ArrfError::Inconsistent(1),
        ),
        (frag(9, size, have, &[7; 100]), ArrfError::UnknownRr(9)),
        (
            frag(1, size, size - 50, &[7; 100]),
            ArrfError::OutOfRange(1),
        ),
        (frag(1, size, have, &[]), ArrfError::OutOfRange(1)),
        (frag(1, size, 0, &[7; 32]), ArrfError::Overlap(1)),
        (frag(1, size, have - 1, &[7; 10]), ArrfError::Overlap(1)),
    ];
    for (bad, err) in cases {
        assert_eq!(r.add(&k, &fragment_response(k.id, &[bad]), now), Err(err));
        // Bad together with a good one: the response is refused whole.
        assert_eq!(
            r.add(
                &k,
                &fragment_response(k.id, &[ok.clone(), frag(9, 1, 0, &[1])]),
                now
            ),
            Err(ArrfError::UnknownRr(9))
        );
        assert_eq!(r.memory_used(), used);
    }
    // Two overlapping ranges in one response.
    let pair = [
        frag(1, size, have, &[7; 100]),
        frag(1, size, have + 50, &[7; 100]),
    ];
    assert_eq!(
        r.add(&k, &fragment_response(k.id, &pair), now),
        Err(ArrfError::Overlap(1))
    );
    // Wrong ID, or the original question instead of `. RRFRAG IN`.
    assert_eq!(
        r.add(
            &k,
            &fragment_response(k.id ^ 1, std::slice::from_ref(&ok)),
            now
        ),
        Err(ArrfError::NotForUs)
    );
    assert_eq!(
        r.add(&k, &announcing(std::slice::from_ref(&ok)), now),
        Err(ArrfError::NotForUs)
    );
    // A good range, then the same datagram again.
    assert!(matches!(
        r.add(&k, &fragment_response(k.id, std::slice::from_ref(&ok)), now),
        Ok(Progress::Missing(_))
    ));
    assert_eq!(
        r.add(&k, &fragment_response(k.id, &[ok]), now),
        Err(ArrfError::Duplicate(1))
    );
    // Another server, port or question is another reassembly.
    let mut other = k.clone();
    other.server.set_port(53);
    assert_eq!(
        r.add(&other, &fragment_response(k.id, &[]), now),
        Err(ArrfError::NotPending)
    );
    // After the timeout the state is gone and its memory freed.
    let later = now + Limits::default().timeout;
    assert_eq!(
        r.add(&k, &fragment_response(k.id, &[]), later),
        Err(ArrfError::NotPending)
    );
    assert_eq!(r.memory_used(), 0);
}

#[test]
fn total_memory_and_pending_count_are_bounded() {
    let full = &case(Algorithm::MlDsa44).answers[0];
    let first = first_response(full, BUDGET, T).unwrap();
    let limits = Limits {
        max_pending: 2,
        max_bytes: 5 * BUDGET,
        timeout: Duration::from_secs(5),
    };
    let mut r = Reassembler::new(limits, T);
    let now = Instant::now();
    let mut k = key(full);
    for id in 0..2 {
        k.id = id;
        assert!(matches!(
            r.start(k.clone(), first.clone(), now),
            Ok(Progress::Missing(_))
        ));
    }
    k.id = 2;
    assert_eq!(
        r.start(k.clone(), first.clone(), now),
        Err(ArrfError::TooManyPending)
    );
    // Room for a first response but not for more fragments.
    let mut probe = Reassembler::new(Limits::default(), T);
    probe.start(k.clone(), first.clone(), now).unwrap();
    let cost = probe.memory_used();
    let mut r = Reassembler::new(
        Limits {
            max_bytes: cost + 100,
            ..limits
        },
        T,
    );
    let Progress::Missing(w) = r.start(k.clone(), first, now).unwrap() else {
        unreachable!()
    };
    let data = vec![0; (w[0].len as usize).min(500)];
    assert!(data.len() > 100);
    let f = frag(w[0].rr_id, w[0].rr_size, w[0].start, &data);
    assert_eq!(
        r.add(&k, &fragment_response(k.id, &[f]), now),
        Err(ArrfError::MemoryLimit)
    );
    assert_eq!(r.peak_memory(), cost);
}

#[test]
fn reassembled_bytes_must_form_exactly_one_record() {
    let mut r = Reassembler::new(Limits::default(), T);
    let first = announcing(&[frag(0, 20, 0, &[3, b'w', b'w', b'w', 0, 0, 1, 0, 1, 0])]);
    let k = key(&first);
    let now = Instant::now();
    assert!(matches!(
        r.start(k.clone(), first, now),
        Ok(Progress::Missing(_))
    ));
    // TTL, then RDLENGTH 5 although only 4 bytes follow.
    let rest = frag(0, 20, 10, &[0, 0, 0, 60, 0, 5, 1, 2, 3, 4]);
    assert_eq!(
        r.add(&k, &fragment_response(k.id, &[rest]), now),
        Err(ArrfError::BadRecord(0))
    );
}

#[test]
fn server_rejects_requests_it_cannot_answer() {
    let full = &case(Algorithm::MlDsa44).answers[1];
    let q = full.questions[0].clone();
    let req = |w: Wanted| fragment_request(1, &q, &[w], edns(), T, DEFAULT_CODE);
    let size = rr_wire(&full.answers[1]).len() as u32;
    let good = Wanted {
        rr_id: 1,
        rr_size: size,
        start: 0,
        len: 100,
    };
    assert!(answer_request(full, &req(good), BUDGET, T).is_ok());
    for (w, e) in [
        (Wanted { rr_id: 7, ..good }, ArrfError::UnknownRr(7)),
        (
            Wanted {
                rr_size: size + 1,
                ..good
            },
            ArrfError::Inconsistent(1),
        ),
        (
            Wanted {
                start: size - 10,
                ..good
            },
            ArrfError::OutOfRange(1),
        ),
        (Wanted { len: 0, ..good }, ArrfError::OutOfRange(1)),
    ] {
        assert_eq!(answer_request(full, &req(w), BUDGET, T), Err(e));
    }
    // Asking for the whole 2.4 KB record in one range: the reply is cut to the budget.
    let all = answer_request(full, &req(Wanted { len: size, ..good }), BUDGET, T).unwrap();
    assert_eq!(all.to_wire_with(Some(T)).len(), BUDGET);
}
