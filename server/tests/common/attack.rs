//! What the hostile-client tests share: a health watch that must keep answering during an attack, and raw
//! TCP helpers for clients that misbehave (from any loopback address, so one "address" can attack while
//! another is served).
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// How long one health check may take before the server counts as starved.
pub const HEALTH_PATIENCE: Duration = Duration::from_secs(5);
/// The loopback address attacks come from; the tests' other clients use 127.0.0.1.
pub const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Polls a health URL every 50 ms until stopped, each time on a NEW connection (as a load balancer does, so
/// an attack that keeps new connections out is seen). Each check must be answered 200 within
/// [`HEALTH_PATIENCE`] (a starved server fails the test); no latency is asserted beyond that, since these
/// tests also run on loaded machines.
pub struct HealthWatch {
    stop: Arc<AtomicBool>,
    task: JoinHandle<(usize, Duration)>,
}

impl HealthWatch {
    pub fn start(url: String) -> HealthWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let client =
                reqwest::Client::builder().timeout(HEALTH_PATIENCE).pool_max_idle_per_host(0).build().expect("client");
            let (mut checks, mut slowest) = (0, Duration::ZERO);
            while !flag.load(Ordering::Relaxed) {
                let started = Instant::now();
                let response = client.get(&url).send().await.expect("health check answered");
                assert_eq!(response.status(), 200, "health check during the attack");
                slowest = slowest.max(started.elapsed());
                checks += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (checks, slowest)
        });
        HealthWatch { stop, task }
    }

    pub async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let (checks, slowest) = self.task.await.expect("health task");
        assert!(checks >= 3, "only {checks} health checks ran");
        println!("{checks} health checks during the attack, the slowest {slowest:?}");
    }
}

/// A TCP connection to `addr` from `from` (any port).
pub async fn connect_from(from: IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(addr).await
}

/// The status of the response on `stream`, if one comes within `within`; `None` if the server closed the
/// connection or said nothing.
pub async fn read_status(stream: &mut TcpStream, within: Duration) -> Option<u16> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 1024];
    let deadline = Instant::now() + within;
    while !buffer.windows(2).any(|w| w == b"\r\n") {
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    let line = String::from_utf8_lossy(&buffer);
    line.split(' ').nth(1).and_then(|code| code.parse().ok())
}

/// Whether the server closes `stream` within `within` (reads until end of stream).
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut chunk = [0_u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
        match tokio::time::timeout(left, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}
