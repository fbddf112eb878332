//! Backoff delays and the engine's limits, as properties over policies and RNG seeds: delays stay
//! in `[0, max_delay_ms]`, jitter keeps its floor, attempts never exceed `max_attempts`, and a
//! `send` never runs past its total deadline.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::machine::backoff::NoDelay;
use idempotent_fetch::machine::error::{code, exhausted};
use idempotent_fetch::machine::policy::{Opt, MAX_ATTEMPTS_LIMIT, MAX_DURATION_MS, MAX_RETRY_BUDGET};
use idempotent_fetch::machine::{Backoff, Jitter, Policy as RetryPolicy, RandomSource};
use proptest::prelude::*;
use support::*;

const ID: &str = "checkout:cart-42";
const JITTERS: [Jitter; 4] = [Jitter::Full, Jitter::Equal, Jitter::Decorrelated, Jitter::None];

fn exp(policy: &RetryPolicy, n: usize) -> u64 {
    let factor = 1u64.checked_shl(n.min(63) as u32).unwrap_or(u64::MAX);
    policy.base_delay_ms.saturating_mul(factor).min(policy.max_delay_ms)
}

/// Every delay of one send's schedule.
fn delays(policy: &RetryPolicy, random: &mut dyn RandomSource) -> Vec<u64> {
    let mut backoff = Backoff::new(policy);
    let mut all = Vec::new();
    loop {
        match backoff.next_delay(random) {
            Ok(delay) => all.push(delay),
            Err(NoDelay::Exhausted) => return all,
            Err(NoDelay::RandomFailed) => panic!("the test's random source does not fail"),
        }
    }
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop::sample::select(JITTERS.to_vec())
}

/// Valid policies (as `RetryPolicy::validate` accepts them), including extreme ones.
fn policy() -> impl Strategy<Value = RetryPolicy> {
    (1u32..=60, prop_oneof![0u64..=2_000, 0u64..=MAX_DURATION_MS], 0u64..=MAX_DURATION_MS, jitter())
        .prop_map(|(max_attempts, base, extra, jitter)| RetryPolicy {
            max_attempts,
            base_delay_ms: base,
            max_delay_ms: base.saturating_add(extra % (base.max(1) * 200)).min(MAX_DURATION_MS),
            jitter,
            ..RetryPolicy::default()
        })
        .prop_filter("valid", |p| p.validate().is_ok())
}

// ---------------------------------------------------------------------------------------------
// Backoff, unit

#[test]
fn no_jitter_is_capped_exponential() {
    let policy = RetryPolicy {
        base_delay_ms: 250,
        max_delay_ms: 3_000,
        max_attempts: 8,
        jitter: Jitter::None,
        ..RetryPolicy::default()
    };
    assert_eq!(delays(&policy, &mut SeededRandom::new(1)), vec![250, 500, 1_000, 2_000, 3_000, 3_000, 3_000]);
}

#[test]
fn backoff_yields_max_attempts_minus_one_delays() {
    for max_attempts in [1, 2, 8, MAX_ATTEMPTS_LIMIT] {
        let policy = RetryPolicy { max_attempts, ..RetryPolicy::default() };
        assert_eq!(delays(&policy, &mut SeededRandom::new(2)).len(), max_attempts as usize - 1);
    }
}

#[test]
fn full_jitter_reaches_both_ends_of_its_range() {
    let policy = RetryPolicy {
        base_delay_ms: 1_000,
        max_delay_ms: 1_000,
        max_attempts: 3,
        jitter: Jitter::Full,
        ..RetryPolicy::default()
    };
    // next_u64 % (exp + 1): 0 gives 0, exp gives exp.
    assert_eq!(delays(&policy, &mut FixedRandom(0)), vec![0, 0]);
    assert_eq!(delays(&policy, &mut FixedRandom(1_000)), vec![1_000, 1_000]);
}

#[test]
fn different_seeds_give_different_schedules() {
    // A fixed schedule would make every browser retry at the same moment (the thundering herd).
    let policy = RetryPolicy { max_attempts: 8, ..RetryPolicy::default() };
    for jitter in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
        let policy = RetryPolicy { jitter, ..policy.clone() };
        let schedules: std::collections::BTreeSet<Vec<u64>> =
            (0..20).map(|seed| delays(&policy, &mut SeededRandom::new(seed))).collect();
        assert!(schedules.len() >= 15, "{jitter:?}: only {} distinct schedules of 20", schedules.len());
    }
}

#[test]
fn full_jitter_is_spread_over_its_range() {
    let policy = RetryPolicy {
        base_delay_ms: 10_000,
        max_delay_ms: 10_000,
        max_attempts: 1_000,
        jitter: Jitter::Full,
        ..RetryPolicy::default()
    };
    let all = delays(&policy, &mut SeededRandom::new(3));
    let mean = all.iter().sum::<u64>() / all.len() as u64;
    assert!((4_000..=6_000).contains(&mean), "mean {mean}");
    assert!(all.iter().any(|&d| d < 1_000) && all.iter().any(|&d| d > 9_000));
}

#[test]
fn extreme_policies_do_not_overflow() {
    for jitter in JITTERS {
        for random in [0, u64::MAX] {
            let policy = RetryPolicy {
                max_attempts: MAX_ATTEMPTS_LIMIT,
                base_delay_ms: MAX_DURATION_MS,
                max_delay_ms: MAX_DURATION_MS,
                jitter,
                ..RetryPolicy::default()
            };
            assert!(delays(&policy, &mut FixedRandom(random)).iter().all(|&d| d <= MAX_DURATION_MS));
            // And beyond what validate accepts: the iterator still never panics.
            let policy = RetryPolicy { base_delay_ms: u64::MAX / 2, max_delay_ms: u64::MAX, ..policy };
            assert_eq!(delays(&policy, &mut FixedRandom(random)).len(), MAX_ATTEMPTS_LIMIT as usize - 1);
        }
    }
}

#[test]
fn zero_base_delay_retries_immediately() {
    for jitter in JITTERS {
        let policy =
            RetryPolicy { base_delay_ms: 0, max_delay_ms: 0, max_attempts: 5, jitter, ..RetryPolicy::default() };
        assert_eq!(delays(&policy, &mut SeededRandom::new(4)), vec![0; 4], "{jitter:?}");
    }
}

#[test]
fn jitter_has_its_boundary_numbers() {
    assert_eq!(Jitter::from_index(0), Some(Jitter::Full));
    assert_eq!(Jitter::from_index(1), Some(Jitter::Equal));
    assert_eq!(Jitter::from_index(2), Some(Jitter::Decorrelated));
    assert_eq!(Jitter::from_index(3), Some(Jitter::None));
    assert_eq!(Jitter::from_index(4), None);
    assert_eq!(Jitter::default(), Jitter::Full);
}

#[test]
fn policy_validation_names_the_option_by_its_index() {
    assert!(RetryPolicy::default().validate().is_ok());
    let bad = [
        (RetryPolicy { max_attempts: 0, ..RetryPolicy::default() }, Opt::MaxAttempts as u8),
        (RetryPolicy { max_attempts: MAX_ATTEMPTS_LIMIT + 1, ..RetryPolicy::default() }, Opt::MaxAttempts as u8),
        (RetryPolicy { attempt_timeout_ms: 0, ..RetryPolicy::default() }, Opt::AttemptTimeoutMs as u8),
        (RetryPolicy { total_timeout_ms: MAX_DURATION_MS + 1, ..RetryPolicy::default() }, Opt::TotalTimeoutMs as u8),
        (RetryPolicy { base_delay_ms: 500, max_delay_ms: 100, ..RetryPolicy::default() }, Opt::MaxDelayMs as u8),
        (RetryPolicy { base_delay_ms: MAX_DURATION_MS + 1, ..RetryPolicy::default() }, Opt::BaseDelayMs as u8),
        (RetryPolicy { max_retry_after_ms: MAX_DURATION_MS + 1, ..RetryPolicy::default() }, Opt::MaxRetryAfterMs as u8),
        (RetryPolicy { key_ttl_ms: 0, ..RetryPolicy::default() }, Opt::KeyTtlMs as u8),
        (RetryPolicy { key_ttl_ms: MAX_DURATION_MS + 1, ..RetryPolicy::default() }, Opt::KeyTtlMs as u8),
        (RetryPolicy { retry_budget: MAX_RETRY_BUDGET + 1, ..RetryPolicy::default() }, Opt::RetryBudget as u8),
    ];
    for (policy, index) in bad {
        assert_eq!(policy.validate(), Err(index), "{policy:?}");
    }
    let edges = [
        RetryPolicy { max_attempts: MAX_ATTEMPTS_LIMIT, ..RetryPolicy::default() },
        RetryPolicy { retry_budget: 0, ..RetryPolicy::default() },
        RetryPolicy { retry_budget: MAX_RETRY_BUDGET, ..RetryPolicy::default() },
        RetryPolicy { total_timeout_ms: 0, base_delay_ms: 0, max_delay_ms: 0, ..RetryPolicy::default() },
        RetryPolicy { key_ttl_ms: MAX_DURATION_MS, max_delay_ms: MAX_DURATION_MS, ..RetryPolicy::default() },
    ];
    for policy in edges {
        assert_eq!(policy.validate(), Ok(()), "{policy:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Backoff, properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn delays_stay_within_zero_and_max_delay(policy in policy(), seed in any::<u64>()) {
        let all = delays(&policy, &mut SeededRandom::new(seed));
        prop_assert_eq!(all.len(), policy.max_attempts as usize - 1);
        for d in all {
            prop_assert!(d <= policy.max_delay_ms, "{} > {}", d, policy.max_delay_ms);
        }
    }

    #[test]
    fn delays_stay_within_bounds_for_extreme_random_values(policy in policy(), value in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]) {
        for d in delays(&policy, &mut FixedRandom(value)) {
            prop_assert!(d <= policy.max_delay_ms);
        }
    }

    #[test]
    fn full_jitter_stays_below_the_exponential(policy in policy(), seed in any::<u64>()) {
        let policy = RetryPolicy { jitter: Jitter::Full, ..policy };
        for (n, d) in delays(&policy, &mut SeededRandom::new(seed)).into_iter().enumerate() {
            prop_assert!(d <= exp(&policy, n));
        }
    }

    #[test]
    fn equal_jitter_is_at_least_half_the_exponential(policy in policy(), seed in any::<u64>()) {
        let policy = RetryPolicy { jitter: Jitter::Equal, ..policy };
        for (n, d) in delays(&policy, &mut SeededRandom::new(seed)).into_iter().enumerate() {
            let e = exp(&policy, n);
            prop_assert!(d >= e / 2 && d <= e, "retry {}: {} not in [{}, {}]", n, d, e / 2, e);
        }
    }

    #[test]
    fn decorrelated_jitter_is_at_least_the_base(policy in policy(), seed in any::<u64>()) {
        let policy = RetryPolicy { jitter: Jitter::Decorrelated, ..policy };
        let mut previous = policy.base_delay_ms;
        for d in delays(&policy, &mut SeededRandom::new(seed)) {
            prop_assert!(d >= policy.base_delay_ms && d <= policy.max_delay_ms);
            prop_assert!(d <= previous.saturating_mul(3).max(policy.base_delay_ms));
            previous = d;
        }
    }

    #[test]
    fn no_jitter_is_exactly_the_exponential(policy in policy(), seed in any::<u64>()) {
        let policy = RetryPolicy { jitter: Jitter::None, ..policy };
        for (n, d) in delays(&policy, &mut SeededRandom::new(seed)).into_iter().enumerate() {
            prop_assert_eq!(d, exp(&policy, n));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engine limits, properties

#[derive(Clone, Debug)]
enum Outcome {
    Status(u16, Option<u64>),
    Network,
    Timeout,
}

fn retryable_outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (prop::sample::select(vec![408u16, 409, 423, 425, 429, 500, 502, 503, 504]), prop::option::of(0u64..=120))
            .prop_map(|(s, after)| Outcome::Status(s, after)),
        Just(Outcome::Network),
        Just(Outcome::Timeout),
    ]
}

fn step(outcome: &Outcome) -> Step {
    match outcome {
        Outcome::Status(code, None) => status(*code),
        Outcome::Status(code, Some(seconds)) => status_with(*code, &[("Retry-After", &seconds.to_string())]),
        Outcome::Network => Step::Network,
        Outcome::Timeout => Step::Timeout,
    }
}

/// Engine policies: small enough that a case runs in microseconds of real time.
fn engine_policy() -> impl Strategy<Value = RetryPolicy> {
    (1u32..=30, 0u64..=2_000, 0u64..=30_000, 0u64..=300_000, 1u64..=30_000, 0u64..=120_000, jitter()).prop_map(
        |(max_attempts, base, extra, total, attempt_timeout, max_retry_after, jitter)| RetryPolicy {
            max_attempts,
            base_delay_ms: base,
            max_delay_ms: base + extra,
            total_timeout_ms: total,
            attempt_timeout_ms: attempt_timeout,
            max_retry_after_ms: max_retry_after,
            jitter,
            retry_budget: MAX_RETRY_BUDGET,
            ..RetryPolicy::default()
        },
    )
}

/// One `send` against a server that never gives a definite answer.
fn run_forever_failing(
    policy: RetryPolicy,
    seed: u64,
    outcomes: &[Outcome],
    latency: u64,
) -> (Rig, Result<(), Failure>, u64) {
    let mut rig = Rig::new(seed);
    rig.policy = policy;
    rig.begin_checkout(ID);
    rig.transport.script(outcomes.iter().map(step));
    rig.transport.always(Step::Network);
    rig.transport.latency_ms.set(latency);
    let start = rig.clock.now();
    let result = rig.send(ID).map(|_| ());
    (rig, result, start)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn attempts_never_exceed_max_attempts(
        policy in engine_policy(),
        seed in any::<u64>(),
        outcomes in prop::collection::vec(retryable_outcome(), 0..40),
        latency in 0u64..5_000,
    ) {
        let max_attempts = policy.max_attempts;
        let (rig, result, _) = run_forever_failing(policy, seed, &outcomes, latency);
        let err = result.unwrap_err();
        prop_assert_eq!(err.code, code::RETRIES_EXHAUSTED);
        prop_assert!(rig.transport.calls() <= max_attempts as usize);
        prop_assert_eq!(err.attempts as usize, rig.transport.calls());
        prop_assert_eq!(rig.record(ID).attempts as usize, rig.transport.calls());
        if err.detail == exhausted::MAX_ATTEMPTS {
            prop_assert_eq!(err.attempts, max_attempts);
        }
        let key = rig.record(ID).key;
        prop_assert!(rig.transport.keys().iter().all(|k| k == key.as_str()));
    }

    #[test]
    fn never_waits_past_the_total_deadline(
        policy in engine_policy(),
        seed in any::<u64>(),
        outcomes in prop::collection::vec(retryable_outcome(), 0..40),
        latency in 0u64..20_000,
    ) {
        let total = policy.total_timeout_ms;
        let (max_delay, max_retry_after) = (policy.max_delay_ms, policy.max_retry_after_ms);
        let (rig, result, start) = run_forever_failing(policy, seed, &outcomes, latency);
        prop_assert!(result.is_err());
        let deadline = start + total;
        for seen in rig.transport.seen() {
            prop_assert!(seen.at_ms < deadline, "attempt at +{} past the deadline +{}", seen.at_ms - start, total);
            prop_assert!(seen.at_ms + seen.timeout_ms <= deadline, "attempt may run past the deadline");
        }
        prop_assert!(rig.clock.now() <= deadline, "ended at +{} > +{}", rig.clock.now() - start, total);
        for d in rig.waiter.sleeps() {
            // A Retry-After wait is spread above itself by at most one backoff step.
            prop_assert!(d <= max_delay.max(max_retry_after + max_retry_after.min(max_delay)));
        }
    }

    #[test]
    fn retry_after_is_a_floor_for_the_next_delay(
        policy in engine_policy(),
        seed in any::<u64>(),
        outcomes in prop::collection::vec(retryable_outcome(), 1..20),
    ) {
        let cap = policy.max_retry_after_ms;
        let (rig, _, _) = run_forever_failing(policy, seed, &outcomes, 0);
        for (outcome, slept) in outcomes.iter().zip(rig.waiter.sleeps()) {
            if let Outcome::Status(_, Some(seconds)) = outcome {
                prop_assert!(slept >= (seconds * 1000).min(cap), "slept {} for Retry-After {}", slept, seconds);
            }
        }
    }
}
