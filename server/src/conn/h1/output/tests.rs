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

use super::super::tcp_pair as pair;

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
