//! Brooker's backoff simulation over idempotent-fetch's backoff code.
//!
//! `cargo run --release --manifest-path benches/backoff-sim/Cargo.toml [-- --quick | --runs N | --seed S]`
//!
//! Prints two Markdown tables (mean calls and mean completion time per number of clients, per
//! strategy) and a comparison of our default against full jitter. It measures; it never fails on
//! the numbers.
//!
//! The model (BENCHMARKS.md, section 1, has the tables and how to read them): Marc Brooker's
//! "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), in Rust, with the delays drawn
//! from the library's own `idempotent_fetch::machine::Backoff` iterator (the code a browser runs)
//! through a seeded `machine::RandomSource`:
//!
//! - one row under optimistic concurrency; N clients all start at t = 0, each must succeed once;
//! - an attempt reads the row's version, then writes conditionally: the write succeeds only if the version is
//!   unchanged since that read;
//! - each of the four messages of an attempt (read request, read response, write request, write response)
//!   takes `abs(Normal(10 ms, 2 ms))` (rand_distr, seeded);
//! - after a failed write the client waits the next backoff delay, then reads again; attempts are unlimited
//!   (`max_attempts = u32::MAX`);
//! - base 5 ms, cap 2 s; N = 10, 20, …, 190; 100 runs per point; a discrete-event simulation over a priority
//!   queue in virtual time;
//! - **calls** = writes the server receives (the total work); **time** = when the last client succeeds.
//!
//! Strategies: no backoff (retry at once), exponential (`Jitter::None`), full, equal and decorrelated jitter,
//! and **our default**: `RetryPolicy::default()` with only the paper's base (5 ms) and cap (2 s) put in, so the
//! jitter is whatever the default ships. Our real defaults are base 250 ms and cap 20 s; the last column runs
//! them unchanged (attempts unlimited) for reference.
//!
//! Two deliberate differences from the paper's simulator: our `Backoff` waits `min(cap, base·2ⁿ)` with n = 0 on
//! the first retry (the paper's code starts at n = 1, i.e. 2·base), and it schedules whole milliseconds (`u64`),
//! as the library does. Every strategy sees the same seed for a given (N, run) (common random numbers), and
//! a run is deterministic: the same seed (`--seed`, default 2015) prints the same tables.

mod sim;

use std::process::ExitCode;
use std::time::Instant;

use idempotent_fetch::machine::{Jitter, Policy as RetryPolicy};
use sim::{mix, run, Schedule};

/// The paper's parameters.
const BASE_MS: u64 = 5;
const CAP_MS: u64 = 2_000;
const CLIENTS: std::ops::RangeInclusive<usize> = 10..=190;
const CLIENT_STEP: usize = 10;
const RUNS: u32 = 100;
const QUICK_RUNS: u32 = 10;
/// "Unlimited" attempts: far more than any run needs (the iterator yields `max_attempts - 1` delays).
const UNLIMITED: u32 = u32::MAX;

struct Strategy {
    name: &'static str,
    schedule: Schedule,
}

/// A policy with the paper's base and cap, unlimited attempts, and `jitter`.
fn paper(jitter: Jitter) -> Schedule {
    Schedule::Policy(RetryPolicy {
        base_delay_ms: BASE_MS,
        max_delay_ms: CAP_MS,
        max_attempts: UNLIMITED,
        jitter,
        ..RetryPolicy::default()
    })
}

fn strategies() -> Vec<Strategy> {
    // Our default policy as shipped, with only the numbers the paper fixes changed (base, cap) and
    // attempts unlimited: whatever jitter `RetryPolicy::default()` picks is what runs here.
    let ours =
        RetryPolicy { base_delay_ms: BASE_MS, max_delay_ms: CAP_MS, max_attempts: UNLIMITED, ..RetryPolicy::default() };
    // Our real defaults (base 250 ms, cap 20 s), attempts unlimited, for reference.
    let ours_real = RetryPolicy { max_attempts: UNLIMITED, ..RetryPolicy::default() };
    vec![
        Strategy { name: "no backoff", schedule: Schedule::Immediate },
        Strategy { name: "exponential", schedule: paper(Jitter::None) },
        Strategy { name: "full jitter", schedule: paper(Jitter::Full) },
        Strategy { name: "equal jitter", schedule: paper(Jitter::Equal) },
        Strategy { name: "decorrelated", schedule: paper(Jitter::Decorrelated) },
        Strategy { name: "our default", schedule: Schedule::Policy(ours) },
        Strategy { name: "ours 250ms/20s", schedule: Schedule::Policy(ours_real) },
    ]
}

struct Args {
    runs: u32,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { runs: RUNS, seed: 2015 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.runs = QUICK_RUNS,
            "--runs" => {
                args.runs = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--runs needs a positive integer")?
            }
            "--seed" => args.seed = it.next().and_then(|v| v.parse().ok()).ok_or("--seed needs an integer")?,
            "-h" | "--help" => {
                println!("backoff-sim [--quick] [--runs N] [--seed S]\n  --quick   {QUICK_RUNS} runs per point instead of {RUNS}\n  --runs N  runs per point\n  --seed S  base seed (default 2015)");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("backoff-sim: {message}");
            return ExitCode::from(2);
        }
    };
    let strategies = strategies();
    let sizes: Vec<usize> = CLIENTS.step_by(CLIENT_STEP).collect();
    let started = Instant::now();

    // means[size][strategy] = (mean calls, mean completion ms)
    let mut means = vec![vec![(0.0, 0.0); strategies.len()]; sizes.len()];
    for (i, &clients) in sizes.iter().enumerate() {
        for (j, strategy) in strategies.iter().enumerate() {
            let (mut calls, mut time) = (0.0, 0.0);
            for r in 0..args.runs {
                // Same seed for every strategy at a given (clients, run): common random numbers.
                let seed = mix(args.seed, ((clients as u64) << 32) | u64::from(r));
                let outcome = run(clients, &strategy.schedule, seed);
                debug_assert_eq!(outcome.successes, clients as u64);
                calls += outcome.calls as f64;
                time += outcome.completion_ms;
            }
            means[i][j] = (calls / f64::from(args.runs), time / f64::from(args.runs));
        }
        eprint!(".");
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());

    println!("# Backoff simulation (Brooker 2015 model) over idempotent_fetch::machine::Backoff");
    println!();
    println!(
        "{} runs per point; base {BASE_MS} ms, cap {CAP_MS} ms (except \"ours 250ms/20s\"); message delay abs(Normal(10 ms, 2 ms)); seed {}.",
        args.runs, args.seed
    );
    println!();
    println!("## Mean calls (writes received by the server)");
    println!();
    print_table(&strategies, &sizes, &means, |m| format!("{:.0}", m.0));
    println!();
    println!("## Mean completion time (ms until the last client succeeds)");
    println!();
    print_table(&strategies, &sizes, &means, |m| format!("{:.0}", m.1));
    println!();
    print_comparison(&strategies, &sizes, &means);
    ExitCode::SUCCESS
}

fn print_table(
    strategies: &[Strategy],
    sizes: &[usize],
    means: &[Vec<(f64, f64)>],
    cell: impl Fn(&(f64, f64)) -> String,
) {
    print!("| clients |");
    for s in strategies {
        print!(" {} |", s.name);
    }
    println!();
    print!("|---:|");
    for _ in strategies {
        print!("---:|");
    }
    println!();
    for (i, clients) in sizes.iter().enumerate() {
        print!("| {clients} |");
        for m in &means[i] {
            print!(" {} |", cell(m));
        }
        println!();
    }
}

/// Our default against each paper strategy, summed over every N (the total work and the total
/// time across the sweep), plus the per-N worst case against full jitter.
fn print_comparison(strategies: &[Strategy], sizes: &[usize], means: &[Vec<(f64, f64)>]) {
    let index = |name: &str| strategies.iter().position(|s| s.name == name).expect("a known strategy");
    let ours = index("our default");
    let full = index("full jitter");
    let total = |j: usize, pick: fn(&(f64, f64)) -> f64| means.iter().map(|row| pick(&row[j])).sum::<f64>();
    println!("## Our default against the others (summed over N = {}..{})", sizes[0], sizes[sizes.len() - 1]);
    println!();
    println!("| strategy | calls, ours / theirs | time, ours / theirs |");
    println!("|---|---:|---:|");
    for (j, s) in strategies.iter().enumerate() {
        if j == ours {
            continue;
        }
        println!(
            "| {} | {:.3} | {:.3} |",
            s.name,
            total(ours, |m| m.0) / total(j, |m| m.0),
            total(ours, |m| m.1) / total(j, |m| m.1)
        );
    }
    let worst = means.iter().map(|row| row[ours].0 / row[full].0).fold(f64::MIN, f64::max);
    println!();
    println!("Worst single N, our default's calls / full jitter's calls: {worst:.3}.");
    let identical = means.iter().all(|row| row[ours] == row[full]);
    if identical {
        println!("Our default is full jitter (RetryPolicy::default().jitter == Jitter::Full), so with the same seeds it matches full jitter row by row.");
    }
    let time = |j: usize| total(j, |m| m.1);
    let mut order: Vec<usize> = (0..strategies.len())
        .filter(|&j| strategies[j].name != "ours 250ms/20s" && !(identical && j == ours))
        .collect();
    order.sort_by(|&a, &b| time(a).total_cmp(&time(b)));
    let names: Vec<String> = order
        .iter()
        .map(|&j| {
            if identical && j == full {
                "full jitter (= our default)".to_string()
            } else {
                strategies[j].name.to_string()
            }
        })
        .collect();
    println!("Completion time, fastest to slowest (base 5 ms strategies, summed over N): {}.", names.join(" < "));
}
