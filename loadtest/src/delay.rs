//! A delaying TCP proxy: a wide-area link between a planner and a participant, on one machine
//! whose kernel has no `netem`. It listens on 127.0.0.1 and forwards every connection to its
//! upstream; each chunk it reads, in either direction, is written to the other side
//! [`DelayProxy::delay`] after it was read, in order. Bandwidth is not limited (a chunk read
//! while earlier ones wait is queued, not held back), so a request and its answer cost one
//! round trip of `2 × delay` plus what the processes take. The TCP handshake itself is not
//! delayed (the proxy accepts at once and connects upstream undelayed); keep-alive connections
//! make that one-off.
//!
//! Timing: tokio's timers fire on whole milliseconds (a chunk would leave about 1 ms late on
//! average, a quarter of a 5 ms delay), so the chunks wait on one thread of the proxies' own
//! that sleeps to each chunk's instant with the operating system's precision (tens of
//! microseconds); [`DelayProxy::measured_ms`] reports the one-way delay the chunks actually saw.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A chunk's wake-up: its instant, a sequence number (the heap's tie-break), and who waits.
struct Wake(std::time::Instant, u64, oneshot::Sender<()>);

impl PartialEq for Wake {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Wake {}
impl PartialOrd for Wake {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Wake {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

/// The wake-ups every proxy of the process waits for (earliest first), and the thread that
/// sends each at its instant.
struct Timer {
    heap: Mutex<(BinaryHeap<Reverse<Wake>>, u64)>,
    changed: Condvar,
}

impl Timer {
    /// The process's timer, its thread started on first use.
    fn get() -> &'static Timer {
        static TIMER: OnceLock<&'static Timer> = OnceLock::new();
        TIMER.get_or_init(|| {
            let t: &'static Timer =
                Box::leak(Box::new(Timer { heap: Mutex::new((BinaryHeap::new(), 0)), changed: Condvar::new() }));
            std::thread::Builder::new().name("delay-timer".into()).spawn(move || t.run()).expect("a timer thread");
            t
        })
    }

    fn run(&self) {
        let mut g = self.heap.lock().unwrap();
        loop {
            let now = std::time::Instant::now();
            match g.0.peek() {
                None => g = self.changed.wait(g).unwrap(),
                Some(Reverse(w)) if w.0 <= now => {
                    let Reverse(w) = g.0.pop().expect("peeked");
                    let _ = w.2.send(());
                }
                Some(Reverse(w)) => {
                    let wait = w.0 - now;
                    g = self.changed.wait_timeout(g, wait).unwrap().0;
                }
            }
        }
    }

    /// Waits until `at` (returns at once if it has passed).
    async fn sleep_until(at: std::time::Instant) {
        if at <= std::time::Instant::now() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        {
            let t = Timer::get();
            let mut g = t.heap.lock().unwrap();
            g.1 += 1;
            let seq = g.1;
            g.0.push(Reverse(Wake(at, seq, tx)));
            t.changed.notify_one();
        }
        let _ = rx.await;
    }
}

/// Chunks forwarded and the time they spent in the proxy, for [`DelayProxy::measured_ms`].
#[derive(Default)]
struct Seen {
    chunks: AtomicU64,
    /// Sum over the chunks of (written - read), in microseconds.
    held_us: AtomicU64,
}

/// A TCP proxy on 127.0.0.1 in front of one upstream that delays every chunk by
/// [`DelayProxy::delay`] in each direction. Its connections close when it is dropped.
pub struct DelayProxy {
    /// `http://127.0.0.1:PORT`: where to send what is meant for the upstream.
    url: String,
    delay: Duration,
    seen: Arc<Seen>,
    /// The accept loop, which owns every connection's task (aborted with it).
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl DelayProxy {
    /// Starts a proxy in front of `upstream` (`http://HOST:PORT` or `HOST:PORT`) that delays
    /// every chunk by `delay` one way. Must be called inside a tokio runtime (its tasks run
    /// there).
    ///
    /// # Errors
    /// No port of 127.0.0.1 can be bound.
    pub fn start(upstream: &str, delay: Duration) -> std::io::Result<DelayProxy> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let url = format!("http://{}", std_listener.local_addr()?);
        let listener = TcpListener::from_std(std_listener)?;
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let seen = Arc::new(Seen::default());
        let s = seen.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        conns.spawn(connection(client, upstream.clone(), delay, s.clone()));
                    }
                    // Reap finished connections so the set does not grow.
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(DelayProxy { url, delay, seen, task })
    }

    /// `http://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The one-way delay it adds to every chunk (as asked; see [`DelayProxy::measured_ms`]).
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Chunks forwarded so far (both directions) and their mean time in the proxy, from read
    /// to write, in milliseconds (NaN before the first chunk).
    pub fn measured_ms(&self) -> (u64, f64) {
        let n = self.seen.chunks.load(Ordering::Relaxed);
        let us = self.seen.held_us.load(Ordering::Relaxed);
        (n, if n == 0 { f64::NAN } else { us as f64 / n as f64 / 1e3 })
    }
}

/// One proxied connection: both directions delayed, until both have closed.
async fn connection(client: TcpStream, upstream: String, delay: Duration, seen: Arc<Seen>) {
    let Ok(server) = TcpStream::connect(&upstream).await else { return };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(pipe(cr, sw, delay, &seen), pipe(sr, cw, delay, &seen));
}

/// Forwards `from` to `to`, each chunk `delay` after it was read, in order; the reader never
/// waits for the writer (the queue is unbounded: no bandwidth limit). An end of stream is
/// passed on (a write shutdown) after the chunks before it.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration, seen: &Seen) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                break;
            }
        }
        // Dropping `tx` ends the writer once it has written the queue.
    };
    let writer = async move {
        while let Some((read_at, bytes)) = rx.recv().await {
            if !delay.is_zero() {
                Timer::sleep_until((read_at + delay).into_std()).await;
            }
            seen.chunks.fetch_add(1, Ordering::Relaxed);
            seen.held_us.fetch_add(read_at.elapsed().as_micros() as u64, Ordering::Relaxed);
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line-echo server: answers each line it reads with the same line.
    async fn echo() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1024];
                    while let Ok(n @ 1..) = s.read(&mut buf).await {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    /// Sends `request` through `url` and reads the whole answer; the round trip's time.
    async fn round_trip(stream: &mut TcpStream, request: &[u8]) -> Duration {
        let start = std::time::Instant::now();
        stream.write_all(request).await.unwrap();
        let mut got = vec![0u8; request.len()];
        stream.read_exact(&mut got).await.unwrap();
        assert_eq!(got, request);
        start.elapsed()
    }

    #[tokio::test]
    async fn a_round_trip_through_it_takes_at_least_twice_the_delay() {
        let upstream = echo().await;
        let delay = Duration::from_millis(20);
        let proxy = DelayProxy::start(&upstream, delay).unwrap();
        let mut s = TcpStream::connect(proxy.url().trim_start_matches("http://")).await.unwrap();
        for request in [&b"hello\n"[..], &[7u8; 100_000][..], b"again\n"] {
            let rtt = round_trip(&mut s, request).await;
            assert!(rtt >= 2 * delay, "round trip {rtt:?} < 2 x {delay:?}");
            assert!(rtt < 2 * delay + Duration::from_secs(2), "round trip {rtt:?}");
        }
        let (chunks, ms) = proxy.measured_ms();
        assert!(chunks >= 6 && ms >= 20.0, "{chunks} chunks, {ms} ms");
    }

    #[tokio::test]
    async fn order_is_kept_and_an_end_of_stream_passed_on() {
        let upstream = echo().await;
        let proxy = DelayProxy::start(&upstream, Duration::from_millis(5)).unwrap();
        let mut s = TcpStream::connect(proxy.url().trim_start_matches("http://")).await.unwrap();
        let sent: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (mut r, mut w) = s.split();
        let write = async {
            for chunk in sent.chunks(1000) {
                w.write_all(chunk).await.unwrap();
            }
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let read = r.read_to_end(&mut got);
        let ((), n) = tokio::join!(write, read);
        assert_eq!(n.unwrap(), sent.len());
        assert_eq!(got, sent);
    }
}
