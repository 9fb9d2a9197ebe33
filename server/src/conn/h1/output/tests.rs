//! The output queue's writer on real sockets (a batch the socket takes in part is
//! finished byte-exact) and its segment arithmetic.

use super::*;
use std::time::Duration;
use tokio::io::AsyncReadExt;

fn policy() -> FileSendPolicy {
    FileSendPolicy {
        sendfile_min_bytes: 1 << 20,
        sendfile_max_bytes: 0,
        sendfile_chunk_bytes: 1 << 20,
        read_chunk_bytes: 64 << 10,
        cork: false,
        send_timeout: Duration::from_secs(10),
    }
}

use super::super::socket::tcp_pair as pair;

/// A batch of memory segments larger than the socket takes at once: the first writev
/// is partial, and the boxed writer goes on from exactly where it stopped.
#[tokio::test]
async fn a_memory_batch_the_socket_takes_in_part_is_finished_byte_exact() {
    let (server, mut client) = pair().await;
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&server, 4096);
    let mut out = Output::default();
    let mut expected = Vec::new();
    for k in 0..3u8 {
        let from = out.head.len();
        out.head
            .extend_from_slice(format!("head {k}\r\n").as_bytes());
        out.push_head_from(from);
        expected.extend_from_slice(format!("head {k}\r\n").as_bytes());
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8 ^ k).collect();
        expected.extend_from_slice(&body);
        out.push(Seg::Mem(Bytes::from(body)), 300_000);
        // An empty body between, as a 304 or HEAD leaves.
        out.push(Seg::Mem(Bytes::new()), 0);
    }
    let reader = tokio::spawn(async move {
        // Let the writer fill the socket first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        got
    });
    let mut chunk = Vec::new();
    let mut server = Transport::Plain(server);
    let sent = out.write_and_clear(&mut server, policy(), &mut chunk).await;
    sent.result.unwrap();
    assert_eq!(sent.written, expected.len() as u64);
    assert!(
        out.segs.is_empty() && out.head.is_empty(),
        "the batch is cleared"
    );
    drop(server);
    let got = reader.await.unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "bytes differ");
}

#[test]
fn advance_steps_over_whole_and_partial_segments_and_empty_ones() {
    let segs = vec![
        Seg::Head(0, 10),
        Seg::Mem(Bytes::from_static(b"abcde")),
        Seg::Mem(Bytes::new()),
        Seg::Mem(Bytes::from_static(b"xyz")),
    ];
    assert_eq!(advance(&segs, 0, 0, 4), (0, 4));
    assert_eq!(advance(&segs, 0, 4, 6), (1, 0));
    // Past the second segment, the empty third is skipped too.
    assert_eq!(advance(&segs, 1, 0, 5), (3, 0));
    assert_eq!(advance(&segs, 0, 0, 18), (4, 0));
}

fn ok_with(body: Vec<u8>) -> Reply {
    let mut r = Reply::new(StatusCode::OK);
    r.body = Body::Bytes(Bytes::from(body));
    r
}

/// Small bodies are copied behind their heads (one buffer, one send), larger ones stay
/// shared; either way the bytes on the wire and each body's span in them are exact.
#[tokio::test]
async fn small_bodies_go_into_the_head_buffer_and_spans_stay_exact() {
    let (server, mut client) = pair().await;
    let mut out = Output::default();
    let bodies: Vec<Vec<u8>> = [1024usize, INLINE_BODY_MAX + 1, 10, 0]
        .iter()
        .enumerate()
        .map(|(k, &n)| (0..n).map(|i| (i % 251) as u8 ^ k as u8).collect())
        .collect();
    let spans: Vec<BodySpan> = bodies
        .iter()
        .map(|b| out.queue_reply(ok_with(b.clone()), 1, false, false, u64::MAX))
        .collect();
    // The 1 KiB and 10-byte bodies merged into head ranges; only the large one is shared.
    let shared: Vec<usize> = out
        .segs
        .iter()
        .filter_map(|s| match s {
            Seg::Mem(b) => Some(b.len()),
            _ => None,
        })
        .collect();
    assert_eq!(shared, vec![INLINE_BODY_MAX + 1]);
    assert_eq!(
        out.segs.len(),
        3,
        "head+body, the shared body, then heads+bodies"
    );
    let mut server = Transport::Plain(server);
    let sent = out
        .write_and_clear(&mut server, policy(), &mut Vec::new())
        .await;
    sent.result.unwrap();
    drop(server);
    let mut got = Vec::new();
    client.read_to_end(&mut got).await.unwrap();
    assert_eq!(sent.written, got.len() as u64);
    for (body, span) in bodies.iter().zip(&spans) {
        assert_eq!(span.len, body.len() as u64);
        let at = span.at as usize;
        assert_eq!(&got[at..at + body.len()], &body[..], "body at its span");
        assert!(
            got[..at].ends_with(b"\r\n\r\n"),
            "a head ends right before it"
        );
        assert_eq!(span.sent(sent.written), span.len);
    }
}

/// A pipelined batch stops copying bodies in while there is still room for more heads,
/// so the head buffer keeps the size the worker's pool keeps (it is not dropped and grown
/// again on every batch); the first small body is still copied.
#[test]
fn copied_bodies_keep_the_head_buffer_within_the_pooled_size() {
    for size in [10, 1024, 1795, INLINE_BODY_MAX] {
        for depth in 1..=8 {
            // As the worker's pool hands a fresh head buffer out.
            let mut out = Output {
                head: Vec::with_capacity(512),
                ..Default::default()
            };
            for _ in 0..depth {
                out.queue_reply(ok_with(vec![b'x'; size]), 1, false, false, u64::MAX);
            }
            let shared = out.segs.iter().filter(|s| matches!(s, Seg::Mem(_))).count();
            assert!(
                shared < depth,
                "{size} B x {depth}: the first body was not copied"
            );
            assert!(
                out.head.capacity() <= super::super::idle::HEAD_KEPT_CAPACITY,
                "{size} B x {depth}: head buffer grew to {}",
                out.head.capacity()
            );
        }
    }
}

/// A kTLS file body's record bound counts the calls the writer really makes: sendfile
/// chunks from `sendfile_min_bytes` on, pread chunks below it or from `sendfile_max_bytes`.
#[test]
fn file_record_bounds_follow_the_writers_choice_of_sendfile_or_pread() {
    let p = policy(); // sendfile from 1 MiB in 1 MiB calls, pread in 64 KiB writes
    assert_eq!(file_records(2 << 20, p), RecordBudget::bound(2 << 20, 2));
    assert_eq!(
        file_records(512 << 10, p),
        RecordBudget::bound(512 << 10, 8)
    );
    let capped = FileSendPolicy {
        sendfile_max_bytes: 2 << 20,
        ..p
    };
    assert_eq!(
        file_records(2 << 20, capped),
        RecordBudget::bound(2 << 20, 32)
    );
}
