//! One run of the optimistic-concurrency simulation: N clients, one row, virtual time.
//!
//! The model is the one in Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog,
//! 2015): every client starts at t = 0 and must update the row once. An attempt is a read of the
//! row's version followed by a conditional write that succeeds only if the version has not changed
//! since that read. Each of the four messages of an attempt (read request, read response, write
//! request, write response) spends `abs(Normal(10 ms, 2 ms))` on the network. After a failed write
//! the client waits the next backoff delay, then starts a new attempt.
//!
//! The delays come from `idempotent_fetch::machine::Backoff`, the iterator the library itself uses,
//! fed by a seeded [`RandomSource`] so every run can be reproduced.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use std::cell::RefCell;

use idempotent_fetch::machine::{Backoff, Policy as RetryPolicy, RandomFailed, RandomSource};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rand_distr::{Distribution, Normal};

/// How a client waits between a failed write and its next read.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// Retry at once (the paper's "no backoff").
    Immediate,
    /// The library's backoff iterator over this policy.
    Policy(RetryPolicy),
}

/// What one run measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// Writes the server received, successful or not: the total work.
    pub calls: u64,
    /// Virtual milliseconds until the last client's write succeeded.
    pub completion_ms: f64,
    /// Successful writes (equals the number of clients when the run is sound).
    pub successes: u64,
}

/// The network: every message takes `abs(Normal(mean, sd))` milliseconds.
struct Network {
    normal: Normal<f64>,
    rng: StdRng,
}

impl Network {
    fn delay(&mut self) -> f64 {
        self.normal.sample(&mut self.rng).abs()
    }
}

/// A seeded, reproducible [`RandomSource`] for jitter. (The library's own is a CSPRNG, which a
/// simulation that must be replayable cannot use; `Backoff` only ever calls `next_u64`.)
pub struct SeededRandom(RefCell<StdRng>);

impl SeededRandom {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(RefCell::new(StdRng::seed_from_u64(seed)))
    }
}

impl RandomSource for SeededRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        self.0.borrow_mut().fill_bytes(bytes);
        Ok(())
    }

    fn next_u64(&self) -> Result<u64, RandomFailed> {
        Ok(self.0.borrow_mut().next_u64())
    }
}

/// What happens when an event fires.
#[derive(Clone, Copy, Debug)]
enum Message {
    /// A client's read request reaches the server.
    Read,
    /// The server's answer (the row's version) reaches the client.
    ReadResponse { version: u64 },
    /// A client's conditional write reaches the server.
    Write { read_version: u64 },
    /// The server's verdict reaches the client.
    WriteResponse { success: bool },
}

/// An event in the priority queue: `message` for `client` at virtual time `at`.
#[derive(Clone, Copy, Debug)]
struct Event {
    at: f64,
    /// Breaks ties in time by insertion order, so a run is deterministic.
    seq: u64,
    client: usize,
    message: Message,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The queue of pending events over virtual time.
struct Queue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: f64, client: usize, message: Message) {
        self.seq += 1;
        self.heap.push(Event { at, seq: self.seq, client, message });
    }
}

/// Mixes a seed with a stream number (SplitMix64), so each client gets its own jitter stream.
pub fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Simulates `clients` clients under `schedule` until every one has written once.
///
/// `seed` decides the network delays (stream 0) and each client's jitter (stream 1 + client), so
/// strategies run with the same seed see the same network draws for as long as they take the same
/// steps (common random numbers: differences between strategies are less blurred by noise).
pub fn run(clients: usize, schedule: &Schedule, seed: u64) -> Outcome {
    let mut network = Network {
        normal: Normal::new(10.0, 2.0).expect("a finite mean and a positive standard deviation"),
        rng: StdRng::seed_from_u64(mix(seed, 0)),
    };
    let randoms: Vec<SeededRandom> = (0..clients).map(|c| SeededRandom::new(mix(seed, 1 + c as u64))).collect();
    let mut backoffs: Vec<Option<Backoff>> = match schedule {
        Schedule::Immediate => (0..clients).map(|_| None).collect(),
        Schedule::Policy(policy) => (0..clients).map(|_| Some(Backoff::new(policy))).collect(),
    };

    let mut queue = Queue { heap: BinaryHeap::with_capacity(clients * 2), seq: 0 };
    for client in 0..clients {
        let at = network.delay();
        queue.push(at, client, Message::Read);
    }

    let mut version = 0u64;
    let mut outcome = Outcome::default();
    while let Some(event) = queue.heap.pop() {
        let now = event.at;
        let client = event.client;
        match event.message {
            Message::Read => queue.push(now + network.delay(), client, Message::ReadResponse { version }),
            Message::ReadResponse { version: read_version } => {
                queue.push(now + network.delay(), client, Message::Write { read_version })
            }
            Message::Write { read_version } => {
                outcome.calls += 1;
                let success = read_version == version;
                if success {
                    version += 1;
                }
                queue.push(now + network.delay(), client, Message::WriteResponse { success });
            }
            Message::WriteResponse { success: true } => {
                outcome.successes += 1;
                outcome.completion_ms = now;
            }
            Message::WriteResponse { success: false } => {
                let wait = match &mut backoffs[client] {
                    None => 0,
                    // max_attempts is set so high that the schedule never runs out in practice;
                    // if it did, retrying at the cap keeps the client going, as "unlimited" means.
                    Some(backoff) => backoff.next_delay(&randoms[client]).unwrap_or(match schedule {
                        Schedule::Policy(policy) => policy.max_delay_ms,
                        Schedule::Immediate => 0,
                    }),
                };
                queue.push(now + network.delay() + wait as f64, client, Message::Read);
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use idempotent_fetch::machine::Jitter;

    fn policy(jitter: Jitter) -> Schedule {
        Schedule::Policy(RetryPolicy {
            base_delay_ms: 5,
            max_delay_ms: 2_000,
            max_attempts: u32::MAX,
            jitter,
            ..RetryPolicy::default()
        })
    }

    #[test]
    fn one_client_writes_once() {
        let outcome = run(1, &Schedule::Immediate, 7);
        assert_eq!(outcome.calls, 1);
        // Four messages of about 10 ms each.
        assert!(outcome.completion_ms > 20.0 && outcome.completion_ms < 60.0, "{}", outcome.completion_ms);
    }

    #[test]
    fn every_client_succeeds_exactly_once() {
        for schedule in [Schedule::Immediate, policy(Jitter::None), policy(Jitter::Full), policy(Jitter::Decorrelated)]
        {
            let outcome = run(30, &schedule, 11);
            assert_eq!(outcome.successes, 30, "{schedule:?}");
            assert!(outcome.calls >= 30, "{schedule:?}: {}", outcome.calls);
        }
    }

    #[test]
    fn a_seed_replays_the_same_run() {
        let a = run(40, &policy(Jitter::Full), 3);
        let b = run(40, &policy(Jitter::Full), 3);
        assert_eq!(a.calls, b.calls);
        assert_eq!(a.completion_ms, b.completion_ms);
    }
}
