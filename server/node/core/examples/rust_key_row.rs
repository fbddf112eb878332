//! One keyed request through the Rust library's `postgres::run`, on the same table as the Node half:
//! `rust_key_row <postgres-url> <scope> <key> <body>` (a `POST /api/orders` with that body), whose work
//! answers 201 `{"by":"rust"}`; prints `{"outcome": ..., "status": ..., "body": ...}`. The Node half's
//! test (server/node/test/rust-row.test.mjs) replays its rows from Node and has it replay Node's.

use std::time::Duration;

use idempotent_endpoint::postgres::{self, tokio_postgres};
use idempotent_endpoint::{fingerprint, IdempotencyKey, KeyedRequest, Outcome, StoredResponse};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, scope, key, body] = args.as_slice() else {
        return Err("usage: rust_key_row <postgres-url> <scope> <key> <body>".into());
    };
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    postgres::install(&client).await?;
    let request = KeyedRequest {
        scope: scope.clone(),
        key: IdempotencyKey::parse(key)?,
        fingerprint: fingerprint("POST", "/api/orders", body.as_bytes()),
    };
    let outcome = postgres::run(&mut client, &request, Duration::from_secs(86_400), |_tx| {
        Box::pin(async {
            let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
            Ok::<_, std::convert::Infallible>(StoredResponse {
                status: 201,
                headers,
                body: r#"{"by":"rust"}"#.to_owned(),
            })
        })
    })
    .await?;
    let name = match &outcome {
        Outcome::Fresh(_) => "fresh",
        Outcome::Replay(_) => "replay",
        Outcome::Mismatch => "mismatch",
        Outcome::InFlight => "in_flight",
        Outcome::Fenced => "fenced",
    };
    let answer = outcome.answer();
    println!("{}", serde_json::json!({ "outcome": name, "status": answer.status, "body": answer.body }));
    Ok(())
}
