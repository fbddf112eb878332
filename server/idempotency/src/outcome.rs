//! What the protocol decides for a keyed request, and how each decision is answered.

#[cfg(feature = "runtime")]
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::problem::Problem;
use crate::response::{StoredResponse, REPLAYED_HEADER};

/// `Retry-After` seconds sent while a key's first request is still being processed.
pub const IN_FLIGHT_RETRY_AFTER_SECS: u64 = 1;

/// The fingerprint stored on the row of a fenced key (settled before any request with it arrived). A real
/// fingerprint is 64 lowercase hex characters, so no request ever matches it.
pub const FENCED_FINGERPRINT: &str = "fenced";

/// What one keyed request got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The key was new: the work was done and its answer committed with it.
    Fresh(StoredResponse),
    /// The key was used before for the same request: its stored answer, replayed with the marker.
    Replay(StoredResponse),
    /// The key was used before for a different request: 422.
    Mismatch,
    /// The key's first request is still being processed: 409 with `Retry-After`.
    InFlight,
    /// The key was settled as never seen (the fence), so no request with it may do the work: 410.
    Fenced,
}

impl Outcome {
    /// The decision for a key row that already exists: fenced when it is a fence, in flight while it has no
    /// answer, a mismatch when the fingerprints differ, else the replay of its answer.
    pub fn for_existing(fingerprint: &str, stored_fingerprint: &str, stored: Option<StoredResponse>) -> Outcome {
        if stored_fingerprint == FENCED_FINGERPRINT {
            return Outcome::Fenced;
        }
        match stored {
            None => Outcome::InFlight,
            Some(_) if stored_fingerprint != fingerprint => Outcome::Mismatch,
            Some(response) => Outcome::Replay(response),
        }
    }

    /// The whole answer to the request: the fresh answer as stored, the replay with `Idempotent-Replayed:
    /// true`, or the problem of a 422, 409 (with `Retry-After`) or 410.
    pub fn answer(self) -> StoredResponse {
        match self {
            Outcome::Fresh(response) => response,
            Outcome::Replay(response) => response.with_header(REPLAYED_HEADER, "true"),
            Outcome::Mismatch => StoredResponse::from_problem(&Outcome::mismatch_problem()),
            Outcome::InFlight => StoredResponse::from_problem(&Outcome::in_flight_problem()),
            Outcome::Fenced => StoredResponse::from_problem(&Outcome::fenced_problem()),
        }
    }

    /// The 422 for a key reused for another request.
    pub fn mismatch_problem() -> Problem {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
            "Idempotency-Key reused",
            "This Idempotency-Key was already used for a different request (method, path or body). \
             Use a new key for a new intent.",
        )
    }

    /// The 409 for a key whose first request is still being processed.
    pub fn in_flight_problem() -> Problem {
        Problem::new(
            StatusCode::CONFLICT,
            "request-in-flight",
            "Request in flight",
            "A request with this Idempotency-Key is still being processed; retry with the same key.",
        )
        .with_retry_after(IN_FLIGHT_RETRY_AFTER_SECS)
    }

    /// The 410 for a request whose key was fenced: definite (a client never retries it), and nothing was done.
    pub fn fenced_problem() -> Problem {
        Problem::new(
            StatusCode::GONE,
            "key-fenced",
            "Idempotency-Key fenced",
            "This Idempotency-Key was settled as never used before this request arrived, so nothing was done. \
             Its client replaced the request with another key.",
        )
    }
}

#[cfg(feature = "runtime")]
impl IntoResponse for Outcome {
    /// [`Outcome::answer`] as a response.
    fn into_response(self) -> Response {
        self.answer().into_http(false)
    }
}

#[cfg(all(test, feature = "runtime"))]
mod tests {
    use super::*;

    fn stored() -> StoredResponse {
        StoredResponse { status: 201, headers: vec![], body: "{}".to_owned() }
    }

    #[test]
    fn decisions_for_an_existing_row() {
        assert_eq!(Outcome::for_existing("a", "a", None), Outcome::InFlight);
        assert_eq!(Outcome::for_existing("a", "b", Some(stored())), Outcome::Mismatch);
        assert_eq!(Outcome::for_existing("a", "a", Some(stored())), Outcome::Replay(stored()));
        assert_eq!(Outcome::for_existing("a", FENCED_FINGERPRINT, None), Outcome::Fenced);
        assert_eq!(Outcome::for_existing("a", FENCED_FINGERPRINT, Some(stored())), Outcome::Fenced);
    }

    #[test]
    fn answers_carry_the_marker_and_retry_after() {
        let replay = Outcome::Replay(stored()).into_response();
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
        assert_eq!(replay.status(), 201);
        assert!(Outcome::Fresh(stored()).into_response().headers().get("idempotent-replayed").is_none());
        let busy = Outcome::InFlight.into_response();
        assert_eq!(busy.status(), 409);
        assert_eq!(busy.headers()["retry-after"], "1");
        assert_eq!(Outcome::Mismatch.into_response().status(), 422);
        let fenced = Outcome::Fenced.into_response();
        assert_eq!(fenced.status(), 410);
        assert!(fenced.headers().get("idempotent-replayed").is_none());
        assert!(fenced.headers().get("retry-after").is_none());
    }
}
