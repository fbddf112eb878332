//! Sessions over HTTP: `POST /api/session` issues one, every account endpoint requires one.

use axum::body::Bytes;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::clock::unix_now;
use crate::keys::AccountId;
use crate::problem::Problem;
use crate::session::{fresh_account, set_cookie, token_from_headers};
use crate::state::AppState;

/// The account of a request with a valid session; any other request is refused with 401.
#[derive(Debug, Clone)]
pub struct Authenticated(pub AccountId);

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Problem> {
        token_from_headers(&parts.headers)
            .and_then(|token| app.sessions.verify(token, unix_now()))
            .map(Authenticated)
            .ok_or_else(unauthenticated)
    }
}

/// The body of `POST /api/session` (all optional).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SessionRequest {
    /// A named account: only with `--enable-faults` (tests and the demo's `?account=`).
    account: Option<String>,
}

/// What `POST /api/session` and `GET /api/session` answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionBody<'a> {
    account_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

/// `POST /api/session`: a session (cookie and bearer token) for the account the request already has a
/// session for, else for a fresh account; with `--enable-faults`, for the named one.
///
/// The body must be JSON (`{}` at least): a cross-site HTML form cannot send that without a CORS
/// preflight, so another site cannot make a browser swap its session.
pub async fn create_session(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, Problem> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
    if !is_json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported media type",
            "POST /api/session takes an application/json body ({} or {\"account\": ID}).",
        ));
    }
    let request: SessionRequest = if body.is_empty() {
        SessionRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| Problem::bad_request("invalid-session-request", format!("Invalid session request: {e}.")))?
    };
    let now = unix_now();
    let account = match request.account {
        Some(_) if app.faults.is_none() => {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "named-sessions-disabled",
                "Forbidden",
                "Sessions for a named account exist only on a server started with --enable-faults.",
            ))
        }
        Some(name) => AccountId::parse(&name)?,
        None => match token_from_headers(&headers).and_then(|t| app.sessions.verify(t, now)) {
            Some(current) => current,
            None => fresh_account().map_err(|error| {
                tracing::error!(%error, "no random account id");
                Problem::internal()
            })?,
        },
    };
    let session = app.sessions.issue(account, now);
    let cookie = set_cookie(&session, now, app.secure_cookie);
    let body = SessionBody {
        account_id: session.account.as_str(),
        token: Some(&session.token),
        expires_at: Some(session.expires_at),
    };
    let mut response = Json(body).into_response();
    if let Ok(cookie) = HeaderValue::try_from(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /api/session`: the session's account, or 401.
pub async fn current_session(Authenticated(account): Authenticated) -> Response {
    Json(SessionBody { account_id: account.as_str(), token: None, expires_at: None }).into_response()
}

/// The 401 for a request without a valid session.
pub fn unauthenticated() -> Problem {
    Problem::new(
        axum::http::StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "Unauthenticated",
        "This endpoint needs a session: POST /api/session, then send its cookie or `Authorization: Bearer TOKEN`.",
    )
}
