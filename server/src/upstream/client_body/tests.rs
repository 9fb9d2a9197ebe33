//! The client body's deadline, gathering, file buffering and memory budget, without sockets.

use super::*;

fn stream(idle: u64, min_rate: u64) -> ClientStream {
    let now = Instant::now();
    ClientStream {
        early: Bytes::new(),
        early_trailers: None,
        incoming: None,
        spilled: None,
        tail: Bytes::new(),
        memory: &body_spill::MEMORY,
        memory_held: 0,
        deadline: BodyDeadline {
            idle: Duration::from_secs(idle),
            min_rate,
        },
        window_start: now,
        window_bytes: 0,
        last_progress: now,
        received: 0,
        limit: u64::MAX,
        timer: Box::pin(tokio::time::sleep_until(now)),
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Bytes arriving at an instant after the start.
fn arrive(s: &mut ClientStream, at: u64, bytes: u64) {
    s.received += bytes;
    s.last_progress = s.window_start.min(s.last_progress) + secs(at);
}

/// A body arriving in `frames`, as a connection's stream would.
struct Frames(std::collections::VecDeque<Bytes>);

impl Body for Frames {
    type Data = Bytes;
    type Error = ClientBodyError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

fn upload(len: usize) -> (Vec<u8>, ClientBody) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let frames = data.chunks(10_000).map(Bytes::copy_from_slice).collect();
    let deadline = BodyDeadline {
        idle: secs(10),
        min_rate: 0,
    };
    (data, ClientBody::stream(Frames(frames), deadline))
}

fn budget(cap: u64) -> &'static BufferBudget {
    Box::leak(Box::new(BufferBudget::new(cap)))
}

async fn collect(body: ClientBody) -> Bytes {
    http_body_util::BodyExt::collect(body)
        .await
        .unwrap()
        .to_bytes()
}

#[tokio::test]
async fn the_rest_of_a_body_is_buffered_in_a_file_and_handed_on_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (data, mut body) = upload(300_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    assert_eq!(body.collected_len(), None, "still arriving");
    assert!(body
        .spill_rest(dir.path(), budget(1 << 20), false)
        .await
        .unwrap());
    assert_eq!(
        body.collected_len(),
        Some(300_000),
        "all here: its length is known"
    );
    assert_eq!(collect(body).await, data);
    // Past the pool's limit, the body is refused as it arrives.
    let (_, mut body) = upload(300_000);
    body.limit(100_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    let refused = body.spill_rest(dir.path(), budget(1 << 20), false).await;
    assert!(matches!(refused, Err(ClientBodyError::TooLarge(100_000))));
    // Without a file, gathering on in memory keeps what was gathered first.
    let (data, mut body) = upload(300_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    assert!(!body
        .spill_rest(Path::new("/proc/self"), budget(1 << 20), true)
        .await
        .unwrap());
    assert!(body.gather(usize::MAX).await.unwrap());
    assert_eq!(body.collected_len(), Some(300_000));
    assert_eq!(collect(body).await, data);
}

#[tokio::test]
async fn a_body_that_meets_the_budget_streams_the_rest_after_its_file_or_gathers_it() {
    let dir = tempfile::tempdir().unwrap();
    // 95,000 bytes of room, met inside a frame (70,000 were gathered first, frames are
    // 10,000): the file holds what fits, the rest of that frame waits in memory, and
    // the body streams on from the connection.
    let shared = budget(95_000);
    let (data, mut body) = upload(300_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    assert!(!body.spill_rest(dir.path(), shared, false).await.unwrap());
    assert_eq!(body.collected_len(), None, "the rest is still to come");
    assert_eq!(shared.held(), 95_000);
    let mut back = Vec::new();
    while back.len() < 70_000 + 95_000 {
        let frame = http_body_util::BodyExt::frame(&mut body).await.unwrap();
        back.extend_from_slice(&frame.unwrap().into_data().unwrap());
    }
    assert_eq!(
        shared.held(),
        0,
        "the file is given back once handed on, before the rest arrives"
    );
    back.extend_from_slice(&collect(body).await);
    assert_eq!(back, data);
    // A body refused mid-file gives its share back too.
    let (_, mut body) = upload(300_000);
    body.limit(150_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    let refused = body.spill_rest(dir.path(), shared, false).await;
    assert!(matches!(refused, Err(ClientBodyError::TooLarge(150_000))));
    drop(body);
    assert_eq!(shared.held(), 0);
    // A body that must be whole (no length) gathers the rest in memory instead.
    let (data, mut body) = upload(300_000);
    assert!(!body.gather(64 * 1024).await.unwrap());
    assert!(body.spill_rest(dir.path(), shared, true).await.unwrap());
    assert_eq!(body.collected_len(), Some(300_000));
    assert_eq!(collect(body).await, data);
}

/// What is gathered in memory past the first 64 KiB counts against a budget: a body
/// that finds no room is refused (503), and the room is given back once handed on.
#[tokio::test]
async fn bodies_gathered_in_memory_share_a_budget() {
    let memory = budget(250_000);
    let (data, mut body) = upload(300_000);
    body.memory_budget(memory);
    assert!(body.gather(usize::MAX).await.unwrap());
    assert_eq!(memory.held(), 300_000 - GATHER_BEFORE_ADMISSION as u64);
    let (_, mut second) = upload(300_000);
    second.memory_budget(memory);
    assert!(matches!(
        second.gather(usize::MAX).await,
        Err(ClientBodyError::BufferFull)
    ));
    drop(second);
    assert_eq!(collect(body).await, data);
    assert_eq!(memory.held(), 0, "given back once handed on");
    // The tail of a body whose file met its budget counts too.
    let dir = tempfile::tempdir().unwrap();
    let (_, mut body) = upload(300_000);
    body.memory_budget(budget(50_000));
    assert!(!body.gather(64 * 1024).await.unwrap());
    let refused = body.spill_rest(dir.path(), budget(10_000), true).await;
    assert!(matches!(refused, Err(ClientBodyError::BufferFull)));
    // With no room at all, the first 64 KiB of any body, and the frame left over when a
    // body with a length meets its file's budget, are still taken: such a body streams.
    let (data, mut body) = upload(300_000);
    body.memory_budget(budget(0));
    assert!(!body.gather(64 * 1024).await.unwrap());
    assert!(!body
        .spill_rest(dir.path(), budget(95_000), false)
        .await
        .unwrap());
    assert_eq!(collect(body).await, data);
}

#[tokio::test]
async fn a_trickle_is_late_at_the_end_of_its_first_window() {
    // 10 bytes, then one every 5 s: never silent for 20 s, far below 500 B/s.
    let mut s = stream(20, 500);
    let t0 = s.window_start;
    arrive(&mut s, 15, 10);
    assert_eq!(s.due() - t0, secs(20));
    assert!(!s.late(t0 + secs(19)));
    assert!(s.late(t0 + secs(20)));
}

#[tokio::test]
async fn a_fast_start_buys_no_credit_for_a_trickle_after_it() {
    let mut s = stream(20, 500);
    let t0 = s.window_start;
    arrive(&mut s, 1, 16 << 20);
    // The first window brought its bytes: the next one starts.
    s.last_progress = t0 + secs(19);
    assert!(!s.late(t0 + secs(20)));
    assert_eq!(s.window_start, t0 + secs(20));
    // Then a byte every 19 s: the second window is late.
    s.received += 1;
    s.last_progress = t0 + secs(38);
    assert!(s.late(t0 + secs(40)));
}

#[tokio::test]
async fn without_a_minimum_rate_only_silence_counts() {
    let mut s = stream(20, 0);
    let t0 = s.window_start;
    s.received = 10;
    s.last_progress = t0 + secs(100);
    assert_eq!(s.due() - t0, secs(120));
    assert!(!s.late(t0 + secs(119)));
    assert!(s.late(t0 + secs(120)));
}
