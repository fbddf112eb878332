//! Phased work through the Rust library's `phases::postgres`, on the same table as the Node half:
//! `rust_phases <postgres-url> <scope> <key> <body> <lease-ms> <until>` begins the key (a `POST /pay` with
//! that body) and, holding it, advances from where it stands to `charge_started` and `charged`, then
//! finishes with 201 `{"by":"rust"}`; with `<until>` = `charge_started` it stops there and exits without
//! releasing, as a crashed holder does. Prints `{"outcome": "held" | "replay" | ..., "took": the point it
//! took the key at, "downstream": the derived key of step "charge", "status", "body"}`. The Node half's test
//! (server/node/test/phases-rust.test.mjs) takes over its rows and has it take over Node's.

use std::time::Duration;

use idempotent_endpoint::phases::{postgres as phases, Begun, STARTED};
use idempotent_endpoint::postgres::{self, tokio_postgres};
use idempotent_endpoint::{fingerprint, IdempotencyKey, KeyedRequest, Outcome, StoredResponse};
use serde_json::json;

type Failure = Box<dyn std::error::Error>;

/// A step that writes no rows of its own (the row moves to the next point only).
fn nothing<'t>(_tx: &'t tokio_postgres::Transaction<'t>) -> phases::StepFuture<'t, std::convert::Infallible> {
    Box::pin(async { Ok(()) })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, scope, key, body, lease_ms, until] = args.as_slice() else {
        return Err("usage: rust_phases <postgres-url> <scope> <key> <body> <lease-ms> <until>".into());
    };
    let lease = Duration::from_millis(lease_ms.parse()?);
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    postgres::install(&client).await?;
    let request = KeyedRequest {
        scope: scope.clone(),
        key: IdempotencyKey::parse(key)?,
        fingerprint: fingerprint("POST", "/pay", body.as_bytes()),
    };
    let mut held = match phases::begin(&mut client, &request, Duration::from_secs(86_400), lease).await? {
        Begun::Held(held) => held,
        Begun::Answered(outcome) => {
            let name = match &outcome {
                Outcome::Fresh(_) | Outcome::Replay(_) => "replay",
                Outcome::Mismatch => "mismatch",
                Outcome::InFlight => "in_flight",
                Outcome::Fenced => "fenced",
            };
            let answer = outcome.answer();
            println!("{}", json!({ "outcome": name, "status": answer.status, "body": answer.body }));
            return Ok(());
        }
    };
    let (took, downstream) = (held.point.clone(), held.downstream_key("charge"));
    if held.point == STARTED {
        phases::advance(&mut client, &mut held, "charge_started", lease, nothing).await?;
    }
    if until == "charge_started" {
        println!("{}", json!({ "outcome": "held", "took": took, "downstream": downstream }));
        return Ok(());
    }
    if held.point == "charge_started" {
        phases::advance(&mut client, &mut held, "charged", lease, nothing).await?;
    }
    let answer = phases::finish(&mut client, held, |_tx| {
        Box::pin(async {
            let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
            Ok::<_, std::convert::Infallible>(StoredResponse {
                status: 201,
                headers,
                body: r#"{"by":"rust"}"#.to_owned(),
            })
        })
    })
    .await?
    .answer();
    let done = json!({ "outcome": "held", "took": took, "downstream": downstream, "status": answer.status, "body": answer.body });
    println!("{done}");
    Ok(())
}
