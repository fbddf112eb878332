//! The retry engine: begins (or resumes) an intent and drives it to a definite answer.
//!
//! Rules it keeps (docs/ARCHITECTURE.md, "The protocol, client side"):
//! - the key is made once per intent and never changes across attempts or page loads;
//! - the record is saved before the first attempt and after every attempt;
//! - a definite answer retires the key (state `succeeded` / `failed`);
//! - exhausted, deadline, budget and abort leave the intent `pending` with its key;
//! - an intent older than the key TTL is never re-sent silently (`EXPIRED`).

use std::cell::RefCell;

use super::backoff::Backoff;
use super::budget::RetryBudget;
use super::classify::{classify, Classification, FailureReason, RetryReason, ShouldRetryOverride};
use super::error::{ErrorCode, ExhaustedReason, SendError};
use super::fingerprint::Fingerprint;
use super::intent::{is_valid_intent_id, IntentRecord, IntentState, PersistedRequest};
use super::key::IdempotencyKey;
use super::policy::RetryPolicy;
use super::ports::{
    AttemptEvent, AttemptRequest, Clock, HttpResponse, IntentStore, Observer, RandomSource, RetryEvent, StoreError,
    Transport, TransportError, Waiter,
};

/// How `begin` treats an existing record.
#[derive(Clone, Debug, Default)]
pub struct BeginOptions {
    /// Replace an existing intent of the same id even if its request differs (a new key is made).
    pub replace: bool,
    /// Keys older than this are reported as expired instead of being re-sent.
    pub key_ttl_ms: u64,
    /// The request to persist with the record (only when the caller opted in).
    pub persisted_request: Option<PersistedRequest>,
}

/// Creates the intent, or resumes the stored one with the same id.
///
/// - no record, or `replace`: a new key, saved before returning;
/// - a pending record with the same fingerprint: resumed with its key (after a reload);
/// - a pending or succeeded record with another fingerprint: `INTENT_MISMATCH` naming the old key;
/// - a failed record with another fingerprint: the user changed the request after a definite
///   failure, so the old key is retired and a new one made;
/// - a pending record older than the TTL: marked `expired` and returned (sending it fails `EXPIRED`).
pub async fn begin<S: IntentStore, C: Clock>(
    store: &S,
    clock: &C,
    random: &RefCell<dyn RandomSource>,
    intent_id: &str,
    fingerprint: &Fingerprint,
    options: &BeginOptions,
) -> Result<IntentRecord, SendError> {
    if !is_valid_intent_id(intent_id) {
        return Err(SendError::new(
            ErrorCode::InvalidRequest,
            "intent id must be 1 to 256 characters without control characters",
        ));
    }
    let now = clock.now_ms();
    let existing = store.load(intent_id).await.map_err(|e| storage_error(intent_id, &e))?;
    if let Some(mut record) = existing.filter(|_| !options.replace) {
        let same_request = record.fingerprint == fingerprint.as_str();
        match record.state {
            IntentState::Failed if !same_request => {}
            _ if !same_request => {
                return Err(SendError::new(
                    ErrorCode::IntentMismatch,
                    format!(
                        "intent \"{intent_id}\" was begun with a different request (key {}); \
                         discard it or begin with {{ replace: true }} to start a new intent",
                        record.key
                    ),
                )
                .with_key(&record.key));
            }
            IntentState::Pending if record.is_older_than(options.key_ttl_ms, now) => {
                record.state = IntentState::Expired;
                record.updated_at = now.max(record.created_at);
                store.save(&record).await.map_err(|e| storage_error(intent_id, &e))?;
                return Ok(record);
            }
            _ => return Ok(record),
        }
    }
    let key = IdempotencyKey::generate(&mut *random.borrow_mut())
        .map_err(|e| SendError::new(ErrorCode::Storage, format!("the CSPRNG failed: {e}")))?;
    let mut record = IntentRecord::new(intent_id, &key, fingerprint, now);
    record.request = options.persisted_request.clone();
    store.save(&record).await.map_err(|e| storage_error(intent_id, &e))?;
    Ok(record)
}

/// How the key goes into the header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyHeaderForm {
    /// `Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324` (Stripe).
    #[default]
    Raw,
    /// `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"` (IETF draft, sf-string).
    SfString,
}

/// Everything `send` works with. Borrowed, so one client's adapters serve many sends.
pub struct SendContext<'a, T, S, W, C> {
    /// Sends an attempt.
    pub transport: &'a T,
    /// Keeps the record.
    pub store: &'a S,
    /// Sleeps and waits for the network.
    pub waiter: &'a W,
    /// Tells the time.
    pub clock: &'a C,
    /// Jitter randomness (a CSPRNG in production).
    pub random: &'a RefCell<dyn RandomSource>,
    /// The client's shared retry budget.
    pub budget: &'a RefCell<RetryBudget>,
    /// Progress reports.
    pub observer: &'a dyn Observer,
    /// The retry policy.
    pub policy: &'a RetryPolicy,
    /// Keys older than this are not sent.
    pub key_ttl_ms: u64,
    /// Header form of the key.
    pub header_form: KeyHeaderForm,
    /// The caller's classification override.
    pub should_retry: Option<ShouldRetryOverride<'a>>,
}

/// A definite answer.
#[derive(Debug)]
pub struct Definite<R> {
    /// The response.
    pub response: R,
    /// Its status.
    pub status: u16,
    /// Whether the status is 2xx.
    pub ok: bool,
    /// Whether the server says it replayed a stored answer (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// Attempts made by this `send`.
    pub attempts: u32,
    /// The key (now retired).
    pub key: String,
}

/// Drives the stored intent `intent_id` to a definite answer. See the module docs for the rules.
pub async fn send<T, S, W, C>(
    ctx: &SendContext<'_, T, S, W, C>,
    intent_id: &str,
) -> Result<Definite<T::Response>, SendError>
where
    T: Transport,
    S: IntentStore,
    W: Waiter,
    C: Clock,
{
    let mut record = match ctx.store.load(intent_id).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            return Err(SendError::new(
                ErrorCode::NotFound,
                format!("intent \"{intent_id}\" is not stored (discarded?); begin it again"),
            ))
        }
        Err(e) => return Err(storage_error(intent_id, &e)),
    };
    let key = record.validate(Some(intent_id)).map_err(|e| storage_error(intent_id, &e.into()))?;
    let header_value = match ctx.header_form {
        KeyHeaderForm::Raw => key.as_str().to_owned(),
        KeyHeaderForm::SfString => key.as_sf_string(),
    };
    let started = ctx.clock.now_ms();
    // Any state: re-sending a succeeded or failed intent past the TTL could also do the work twice.
    if record.state == IntentState::Expired || record.is_older_than(ctx.key_ttl_ms, started) {
        // Terminal records stay terminal (the sweep removes them); pending ones are marked expired.
        if record.state == IntentState::Pending {
            record.state = IntentState::Expired;
            record.updated_at = started.max(record.created_at);
            // Best effort: the error below matters more than recording it.
            let _ = ctx.store.save(&record).await;
        }
        return Err(fail(
            ErrorCode::Expired,
            "the idempotency key is older than keyTtlMs; the server may have \
            forgotten it, so it is not re-sent: check the outcome with your server, then discard the intent",
            &key,
            0,
            record.last_status,
            None,
        ));
    }
    let deadline = started.saturating_add(ctx.policy.total_timeout_ms);
    let mut policy_random = RandomBorrow(ctx.random);
    let mut backoff = Backoff::new(ctx.policy, &mut policy_random);
    let mut last_retry_cost = None;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if !ctx.waiter.is_online() {
            ctx.observer.on_offline(key.as_str());
            let remaining = deadline.saturating_sub(ctx.clock.now_ms());
            match ctx.waiter.wait_online(remaining).await {
                Ok(true) => {}
                Ok(false) => return Err(exhausted(ExhaustedReason::Deadline, &key, attempt - 1, record.last_status)),
                Err(_) => return Err(aborted(&key, attempt - 1, record.last_status)),
            }
        }
        let now = ctx.clock.now_ms();
        if now >= deadline {
            return Err(exhausted(ExhaustedReason::Deadline, &key, attempt - 1, record.last_status));
        }
        record.attempts = record.attempts.saturating_add(1);
        record.state = IntentState::Pending;
        record.updated_at = now.max(record.created_at);
        // Persist before sending: a reload during this attempt must find the key.
        if let Err(e) = ctx.store.save(&record).await {
            return Err(storage_error(intent_id, &e).with_progress(&key, attempt - 1, record.last_status));
        }
        ctx.observer.on_attempt(&AttemptEvent { key: key.as_str(), attempt, total_attempts: record.attempts });
        let timeout_ms = ctx.policy.attempt_timeout_ms.min(deadline - now).max(1);
        let outcome = ctx.transport.send(AttemptRequest { key_header_value: &header_value, attempt, timeout_ms }).await;
        let now = ctx.clock.now_ms();
        record.updated_at = now.max(record.created_at);
        let (reason, after_ms, status) =
            match outcome {
                Ok(response) => {
                    let status = response.status();
                    // Only what `IntentRecord::validate` accepts (an opaque response has status 0):
                    // anything else would make the stored record unreadable, and its key lost.
                    record.last_status = (100..=599).contains(&status).then_some(status);
                    let replayed =
                        response.header("idempotent-replayed").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                    match classify(&response, now, ctx.policy.max_retry_after_ms, ctx.should_retry) {
                        Classification::Success => {
                            ctx.budget.borrow_mut().on_success(last_retry_cost);
                            record.state = IntentState::Succeeded;
                            // The answer is what matters now; if this save fails the record stays
                            // pending and a later send replays the same key (the server answers the same).
                            let _ = ctx.store.save(&record).await;
                            return Ok(Definite {
                                response,
                                status,
                                ok: true,
                                replayed,
                                attempts: attempt,
                                key: key.to_string(),
                            });
                        }
                        Classification::Failure(FailureReason::KeyMismatch) => {
                            record.state = IntentState::Failed;
                            let _ = ctx.store.save(&record).await;
                            return Err(fail(
                            ErrorCode::KeyMismatch,
                            "the server answered 422: this idempotency key was already used with a different request",
                            &key, attempt, Some(status), None,
                        ));
                        }
                        Classification::Failure(FailureReason::Status(status)) => {
                            record.state = IntentState::Failed;
                            let _ = ctx.store.save(&record).await;
                            return Ok(Definite {
                                response,
                                status,
                                ok: false,
                                replayed,
                                attempts: attempt,
                                key: key.to_string(),
                            });
                        }
                        Classification::Retry { reason, after_ms } => {
                            response.release();
                            (reason, after_ms, Some(status))
                        }
                    }
                }
                Err(TransportError::Aborted) => {
                    let _ = ctx.store.save(&record).await;
                    return Err(aborted(&key, attempt, record.last_status));
                }
                Err(TransportError::Timeout) => (RetryReason::Timeout, None, None),
                Err(TransportError::Network(_)) => (RetryReason::Network, None, None),
            };
        if let Err(e) = ctx.store.save(&record).await {
            return Err(storage_error(intent_id, &e).with_progress(&key, attempt, record.last_status));
        }
        let Some(backoff_ms) = backoff.next() else {
            return Err(exhausted(ExhaustedReason::MaxAttempts, &key, attempt, record.last_status));
        };
        let delay_ms = after_ms.map_or(backoff_ms, |after| after.max(backoff_ms));
        if now.saturating_add(delay_ms) >= deadline {
            return Err(exhausted(ExhaustedReason::Deadline, &key, attempt, record.last_status));
        }
        match ctx.budget.borrow_mut().try_acquire(reason) {
            Some(cost) => last_retry_cost = Some(cost),
            None => return Err(exhausted(ExhaustedReason::Budget, &key, attempt, record.last_status)),
        }
        let reason_text = reason.describe();
        ctx.observer.on_retry(&RetryEvent { key: key.as_str(), attempt, delay_ms, reason: &reason_text, status });
        if ctx.waiter.sleep(delay_ms).await.is_err() {
            return Err(aborted(&key, attempt, record.last_status));
        }
    }
}

/// Deletes terminal records older than the TTL and marks stale pending ones `expired` (kept, so the
/// app can reconcile them with its server). Returns `(removed, newly_expired)`.
pub async fn sweep<S: IntentStore, C: Clock>(store: &S, clock: &C, key_ttl_ms: u64) -> Result<(u32, u32), StoreError> {
    sweep_reporting(store, clock, key_ttl_ms, |_| {}).await
}

/// [`sweep`], calling `on_expired` with each record it newly marks `expired` (for the UI's event).
pub async fn sweep_reporting<S: IntentStore, C: Clock>(
    store: &S,
    clock: &C,
    key_ttl_ms: u64,
    mut on_expired: impl FnMut(&IntentRecord),
) -> Result<(u32, u32), StoreError> {
    let now = clock.now_ms();
    let (mut removed, mut expired) = (0, 0);
    for mut record in store.list().await? {
        if !record.is_older_than(key_ttl_ms, now) {
            continue;
        }
        match record.state {
            IntentState::Succeeded | IntentState::Failed => {
                store.remove(&record.id).await?;
                removed += 1;
            }
            IntentState::Pending => {
                record.state = IntentState::Expired;
                record.updated_at = now.max(record.created_at);
                store.save(&record).await?;
                on_expired(&record);
                expired += 1;
            }
            IntentState::Expired => {}
        }
    }
    Ok((removed, expired))
}

/// Lends the shared RNG to the backoff iterator one draw at a time (never held across an await).
struct RandomBorrow<'a>(&'a RefCell<dyn RandomSource>);

impl RandomSource for RandomBorrow<'_> {
    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), getrandom::Error> {
        self.0.borrow_mut().fill(bytes)
    }
}

impl SendError {
    fn with_progress(mut self, key: &IdempotencyKey, attempts: u32, last_status: Option<u16>) -> Self {
        self.key = Some(key.to_string());
        self.attempts = attempts;
        self.last_status = last_status;
        self
    }
}

fn fail(
    code: ErrorCode,
    message: &str,
    key: &IdempotencyKey,
    attempts: u32,
    last_status: Option<u16>,
    exhausted: Option<ExhaustedReason>,
) -> SendError {
    SendError { code, message: message.to_owned(), key: Some(key.to_string()), attempts, last_status, exhausted }
}

fn exhausted(reason: ExhaustedReason, key: &IdempotencyKey, attempts: u32, last_status: Option<u16>) -> SendError {
    let message = match reason {
        ExhaustedReason::MaxAttempts => {
            "no definite answer after maxAttempts attempts; the key is kept, send again to resume"
        }
        ExhaustedReason::Deadline => "no definite answer before totalTimeoutMs; the key is kept, send again to resume",
        ExhaustedReason::Budget => {
            "the client's retry budget is spent (many failures at once); the key is kept, send again later"
        }
    };
    fail(ErrorCode::RetriesExhausted, message, key, attempts, last_status, Some(reason))
}

fn aborted(key: &IdempotencyKey, attempts: u32, last_status: Option<u16>) -> SendError {
    fail(
        ErrorCode::Aborted,
        "aborted by the caller; the key is kept, send again to resume",
        key,
        attempts,
        last_status,
        None,
    )
}

fn storage_error(intent_id: &str, error: &StoreError) -> SendError {
    SendError::new(ErrorCode::Storage, format!("intent \"{intent_id}\": {error}"))
}
