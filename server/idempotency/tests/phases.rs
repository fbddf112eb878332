//! Atomic phases on a real SQLite file: the lease, take-over after a "crash" (a holder that never comes
//! back), the derived downstream key, the completer, and the answer replayed once finished.

use std::time::Duration;

use axum::http::StatusCode;
use idempotent_endpoint::phases::{Begun, STARTED};
use idempotent_endpoint::sqlite::SqliteKeys;
use idempotent_endpoint::{fingerprint, IdempotencyKey, KeyedRequest, Outcome, RunError, StoreError, StoredResponse};

fn request(key: &str, body: &str) -> KeyedRequest {
    KeyedRequest {
        scope: "shop".to_owned(),
        key: IdempotencyKey::parse(key).expect("key"),
        fingerprint: fingerprint("POST", "/pay", body.as_bytes()),
    }
}

async fn keys() -> (SqliteKeys, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let keys = SqliteKeys::open(dir.path().join("p.sqlite"), Duration::from_secs(3600)).expect("open");
    keys.with_conn(|c| Ok(c.execute_batch("CREATE TABLE charges (key TEXT NOT NULL)")?)).await.expect("schema");
    (keys, dir)
}

const LEASE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_crashed_holder_is_taken_over_at_its_point_with_the_same_downstream_key() {
    let (keys, _dir) = keys().await;
    let req = request("phase-key-0000000001", "{\"amount\":5}");
    let Ok(Begun::Held(mut first)) = keys.begin(req.clone(), LEASE).await else { panic!("a new key is held") };
    assert_eq!(first.point, STARTED);
    let charge_key = first.downstream_key("charge");
    assert_eq!(charge_key.len(), 64);
    assert_ne!(charge_key, first.downstream_key("email"));

    // While the lease lives, another request is told the key is in flight.
    assert_eq!(keys.begin(req.clone(), LEASE).await.expect("begin"), Begun::Answered(Outcome::InFlight));
    keys.advance(&mut first, "charge_started", LEASE, |tx| {
        tx.execute("INSERT INTO charges (key) VALUES ('pending')", []).map(|_| ())
    })
    .await
    .expect("advance");
    assert_eq!(first.point, "charge_started");

    // The holder "crashes" (never comes back); once its lease ran out the next request takes over where it
    // stood, with the same row and so the same downstream key.
    tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
    let Ok(Begun::Held(second)) = keys.begin(req.clone(), LEASE).await else { panic!("taken over") };
    assert_eq!(second.point, "charge_started");
    assert_eq!(second.downstream_key("charge"), charge_key);

    // The old holder can no longer write anything.
    let stale = keys.advance(&mut first, "charged", LEASE, |_| Ok::<_, String>(())).await;
    assert!(matches!(stale, Err(RunError::Store(StoreError::LeaseLost))), "{stale:?}");

    let other = request("phase-key-0000000001", "{\"amount\":6}");
    assert_eq!(keys.begin(other, LEASE).await.expect("begin"), Begun::Answered(Outcome::Mismatch));

    let finished = keys
        .finish(second, |_| Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"paid")))
        .await
        .expect("finish");
    let Outcome::Fresh(answer) = finished else { panic!("fresh") };
    assert_eq!(keys.begin(req, LEASE).await.expect("begin"), Begun::Answered(Outcome::Replay(answer)));
    let charges: i64 =
        keys.with_conn(|c| Ok(c.query_row("SELECT COUNT(*) FROM charges", [], |r| r.get(0))?)).await.expect("count");
    assert_eq!(charges, 1, "the stale holder's step wrote nothing");
}

#[tokio::test]
async fn the_completer_finds_released_and_abandoned_keys() {
    let (keys, _dir) = keys().await;
    let Ok(Begun::Held(released)) = keys.begin(request("phase-key-0000000002", "{}"), LEASE).await else { panic!() };
    let Ok(Begun::Held(_abandoned)) = keys.begin(request("phase-key-0000000003", "{}"), LEASE).await else { panic!() };
    let Ok(Begun::Held(live)) = keys.begin(request("phase-key-0000000004", "{}"), Duration::from_secs(60)).await else {
        panic!()
    };
    keys.release(released.clone()).await.expect("release");
    let now: Vec<String> =
        keys.unfinished(10, LEASE).await.expect("unfinished").into_iter().map(|h| h.key.as_str().to_owned()).collect();
    assert_eq!(now, vec![released.key.as_str().to_owned()], "only the released one, at once");
    tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
    let later: Vec<String> =
        keys.unfinished(10, LEASE).await.expect("unfinished").into_iter().map(|h| h.key.as_str().to_owned()).collect();
    assert!(later.contains(&"phase-key-0000000003".to_owned()), "{later:?}");
    assert!(!later.contains(&live.key.as_str().to_owned()), "a live lease is left alone: {later:?}");
    let finished = keys.finish(live, |_| Ok::<_, String>(StoredResponse::json(StatusCode::OK, &1))).await;
    assert!(matches!(finished, Ok(Outcome::Fresh(_))));
}

#[tokio::test]
async fn a_fenced_key_begins_no_phases() {
    let (keys, _dir) = keys().await;
    let req = request("phase-key-0000000009", "{}");
    let settled = keys.settle(req.scope.clone(), req.key.clone()).await.expect("settle");
    assert_eq!(settled, idempotent_endpoint::KeyStatus::Fenced);
    assert_eq!(keys.begin(req.clone(), LEASE).await.expect("begin"), Begun::Answered(Outcome::Fenced));
    assert_eq!(keys.unfinished(10, LEASE).await.expect("unfinished"), vec![], "a fence is not unfinished work");
}

#[tokio::test]
async fn abandon_deletes_only_a_row_still_held_at_started() {
    let (keys, _dir) = keys().await;
    let req = request("phase-key-0000000010", "{}");
    let Ok(Begun::Held(first)) = keys.begin(req.clone(), LEASE).await else { panic!("held") };
    keys.abandon(first.clone()).await.expect("abandon");
    // Gone: the key is new again, a new row with a new id.
    let Ok(Begun::Held(mut second)) = keys.begin(req.clone(), LEASE).await else { panic!("new again") };
    assert_ne!(second.row_id, first.row_id);
    // A holder whose lease is gone abandons nothing.
    let stale = keys.abandon(first).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost)), "{stale:?}");
    // Past `started` the external call may have happened: the row is kept.
    keys.advance(&mut second, "charge_started", LEASE, |_| Ok::<_, String>(())).await.expect("advance");
    let moved = keys.abandon(second.clone()).await;
    assert!(matches!(moved, Err(StoreError::LeaseLost)), "{moved:?}");
    assert_eq!(keys.begin(req, LEASE).await.expect("begin"), Begun::Answered(Outcome::InFlight));
}
