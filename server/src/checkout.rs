//! The order flow in atomic phases, when the server charges through a payment provider (`--provider-url`)
//! and confirms through a mail receiver (`--mail-url`).
//!
//! Every arrow `started -> charge_started -> charged -> finished` is one of the library's phase steps on
//! the key row (`idempotent_endpoint::phases`, named in [`crate::store::phases`]); the provider call sits between `charge_started` and `charged`, carrying an
//! Idempotency-Key derived from the key row ([`provider_key`]), so repeating it after a crash charges once.
//! The `finished` transaction stores the answer and writes the confirmation into the outbox
//! ([`crate::outbox`] delivers it). A retry of the key resumes at its recovery point; a key whose request
//! died mid-phase is resumed by the next retry or by the background [`run_completer`], whichever takes its
//! lease first: never both at once.

use std::time::Duration;

use idempotent_endpoint::outbox;
use serde::Deserialize;
use tokio::sync::watch;
use tracing::Instrument;

use crate::config::CheckoutConfig;
use crate::faults::{crash, FaultPlan};
use crate::orders::{confirmation_id, Order, CONFIRMATION_TOPIC};
use crate::protocol::{KeyedRequest, Outcome, StoredResponse};
use crate::services::mailbox::{Message, MESSAGES_PATH};
use crate::services::provider::{ChargeRequest, CHARGES_PATH};
use crate::store::phases::{BeginDecision, HeldKey, RecoveryPoint};
use crate::store::{Store, StoreError, WorkFn};

/// The order flow's downstream side, shared by the handlers, the completer and the outbox worker.
#[derive(Debug, Clone)]
pub struct Checkout {
    config: CheckoutConfig,
    http: reqwest::Client,
}

/// Why the flow stopped before `finished` (the key is released, or left to its lease, and a retry resumes).
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// The database failed, or the lease was taken over ([`StoreError::LeaseLost`]).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The provider could not be reached or answered 5xx: a retry repeats the call with the same key.
    #[error("payment provider unavailable: {0}")]
    ProviderUnavailable(String),
    /// The provider is still making this key's charge (its 409).
    #[error("payment provider busy with this charge")]
    ProviderBusy,
    /// The provider refused the charge request (4xx): a bug on this side.
    #[error("payment provider refused the charge: {0}")]
    ProviderRefused(u16),
    /// The `crash-before-commit` fault: the order phase was rolled back and the key deleted.
    #[error("injected crash before commit")]
    InjectedCrash,
}

impl Checkout {
    /// A client for `config`'s provider and receiver.
    pub fn new(config: CheckoutConfig) -> Result<Self, crate::ServeError> {
        let http = reqwest::Client::builder()
            .timeout(config.key_lease / 3)
            .connect_timeout(config.key_lease / 3)
            .build()
            .map_err(|e| crate::ServeError::Config(format!("http client: {e}")))?;
        Ok(Checkout { config, http })
    }

    /// The configuration.
    pub fn config(&self) -> &CheckoutConfig {
        &self.config
    }

    /// Charges the held key's order at the provider; the charge id. The call is an HTTP client span
    /// (OpenTelemetry's conventions) with the derived key's hash, and carries the trace to the provider.
    async fn charge(&self, held: &HeldKey, order: &Order) -> Result<String, FlowError> {
        let derived_key = provider_key(held);
        let span = tracing::info_span!(
            "http.client",
            otel.name = "POST",
            otel.kind = "client",
            http.request.method = "POST",
            url.full = %format_args!("{}{CHARGES_PATH}", self.config.provider_url),
            http.response.status_code = tracing::field::Empty,
            idempotency.derived_key_hash = %idempotent_endpoint::key_hash(&derived_key),
        );
        tracing::Instrument::instrument(self.charge_with(&derived_key, order), span).await
    }

    async fn charge_with(&self, derived_key: &str, order: &Order) -> Result<String, FlowError> {
        let body = ChargeRequest {
            amount_cents: order.total_cents,
            currency: order.currency.clone(),
            reference: order.id.clone(),
        };
        let mut request = self
            .http
            .post(format!("{}{CHARGES_PATH}", self.config.provider_url))
            .header(crate::keys::IDEMPOTENCY_KEY_HEADER, derived_key);
        for (name, value) in crate::telemetry::trace_headers() {
            request = request.header(name, value);
        }
        let response = request.json(&body).send().await.map_err(|e| FlowError::ProviderUnavailable(e.to_string()))?;
        let status = response.status();
        tracing::Span::current().record("http.response.status_code", status.as_u16());
        if status.is_success() {
            #[derive(Deserialize)]
            struct Charged {
                id: String,
            }
            let charged: Charged =
                response.json().await.map_err(|e| FlowError::ProviderUnavailable(format!("answer: {e}")))?;
            return Ok(charged.id);
        }
        if status.as_u16() == 409 {
            return Err(FlowError::ProviderBusy);
        }
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(FlowError::ProviderUnavailable(format!("status {status}")));
        }
        Err(FlowError::ProviderRefused(status.as_u16()))
    }

    /// The confirmation of a charged order, if the server sends them.
    fn confirmation(&self, order: &Order) -> Option<outbox::Message> {
        self.config.mail_url.as_ref()?;
        let message = Message {
            id: confirmation_id(&order.id),
            to: format!("{}@customers.invalid", order.account_id),
            subject: format!("Order {} confirmed", order.id),
            text: format!(
                "Your order {} of {} {} cents was charged ({}).",
                order.id,
                order.currency,
                order.total_cents,
                order.charge_id.as_deref().unwrap_or("no charge")
            ),
        };
        let payload = serde_json::to_string(&message).ok()?;
        // No traceparent of its own: the enqueue records the request's.
        Some(outbox::Message { id: message.id, topic: CONFIRMATION_TOPIC.to_owned(), payload, traceparent: None })
    }

    /// `POST` of one outbox message to the mail receiver; `Ok` once it was stored (or refused as a duplicate,
    /// which means an earlier delivery was stored). The `traceparent` header carries the order's trace to the
    /// receiver ([`outbox::delivery_traceparent`]).
    pub(crate) async fn deliver(&self, message: &outbox::Message) -> Result<(), String> {
        let Some(mail_url) = &self.config.mail_url else {
            return Err("no mail receiver".to_owned());
        };
        let mut request = self
            .http
            .post(format!("{mail_url}{MESSAGES_PATH}"))
            .header("content-type", "application/json")
            .body(message.payload.clone());
        if let Some(traceparent) = outbox::delivery_traceparent(message) {
            request = request.header(idempotent_endpoint::trace_context::TRACEPARENT_HEADER, traceparent);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("status {}", response.status()))
        }
    }
}

/// The Idempotency-Key of a key row's provider call: derived from the row's own random id (in the format
/// this server has always sent, so a key in flight across an upgrade calls the provider with the same key
/// it used before, rather than the library's `Held::downstream_key`), never the
/// client's key. Client keys are unique only within an account (two accounts may send the same one and
/// must not share a charge), a client chooses its key (it must not be able to aim at another order's
/// charge at the provider), and a key reused after its retention is a new intent that needs a new charge:
/// a new row, a new id. The row id is the same in every instance and across restarts, so a retry
/// anywhere repeats the same provider call.
pub fn provider_key(held: &HeldKey) -> String {
    format!("order-charge-{}", held.held.row_id)
}

/// A request for a key: takes it (or finds it finished or held) and drives it to `finished` from wherever
/// it stands. `work` builds the order (or the refusal) when the key starts.
pub async fn place(
    store: &Store,
    checkout: &Checkout,
    request: KeyedRequest,
    plan: FaultPlan,
    work: WorkFn,
) -> Result<Outcome, FlowError> {
    let held = match store.begin(&request, checkout.config.key_lease).await? {
        BeginDecision::Held(held) => held,
        BeginDecision::Done(outcome) => return Ok(outcome),
    };
    if let Some(latency) = plan.latency {
        tokio::time::sleep(latency).await;
    }
    match drive(store, checkout, held, Some((&request, work)), plan).await? {
        Some(response) => Ok(Outcome::Fresh(response)),
        None => Err(FlowError::Store(StoreError::Corrupt("a request's key was abandoned".to_owned()))),
    }
}

/// Moves a held key from its recovery point to `finished`; the stored answer, or `None` if the key was at
/// `started` and there is no request to go on with (the completer): it is abandoned, nothing having been
/// done. On a failure the lease is released so that the next retry resumes at once.
async fn drive(
    store: &Store,
    checkout: &Checkout,
    mut held: HeldKey,
    mut request: Option<(&KeyedRequest, WorkFn)>,
    plan: FaultPlan,
) -> Result<Option<StoredResponse>, FlowError> {
    loop {
        let step = step(store, checkout, held.clone(), &mut request, plan).await;
        match step {
            Ok(Step::Next(next)) => held = next,
            Ok(Step::Done(answer)) => return Ok(answer),
            Err(error) => {
                if !matches!(error, FlowError::Store(StoreError::LeaseLost) | FlowError::InjectedCrash) {
                    if let Err(release) = store.release(held).await {
                        tracing::warn!(%release, "releasing a key after a failed phase failed");
                    }
                }
                return Err(error);
            }
        }
    }
}

enum Step {
    Next(HeldKey),
    Done(Option<StoredResponse>),
}

async fn step(
    store: &Store,
    checkout: &Checkout,
    held: HeldKey,
    request: &mut Option<(&KeyedRequest, WorkFn)>,
    plan: FaultPlan,
) -> Result<Step, FlowError> {
    let lease = checkout.config.key_lease;
    match held.point {
        RecoveryPoint::Started => {
            let Some((request, work)) = request.take() else {
                store.abandon(held).await?;
                return Ok(Step::Done(None));
            };
            let work = work(request);
            let Some(order) = work.order else {
                return Ok(Step::Done(Some(store.finish(held, work.response, None).await?)));
            };
            if plan.crash_before_commit {
                // As if the order's transaction had been rolled back: nothing is left, not even the key.
                store.abandon(held).await?;
                return Err(FlowError::InjectedCrash);
            }
            Ok(Step::Next(store.store_order(held, order, lease).await?))
        }
        RecoveryPoint::ChargeStarted => {
            let Some(order) = held.order.clone() else {
                return Err(FlowError::Store(StoreError::Corrupt("charge_started without an order".to_owned())));
            };
            let charge_id = checkout.charge(&held, &order).await?;
            if plan.crash_after_charge {
                crash("after the provider charged, before `charged` commits");
            }
            Ok(Step::Next(store.record_charge(held, charge_id, lease).await?))
        }
        RecoveryPoint::Charged => {
            let Some(order) = held.order.clone() else {
                return Err(FlowError::Store(StoreError::Corrupt("charged without an order".to_owned())));
            };
            let response = crate::protocol::created_response(&order);
            let message = checkout.confirmation(&order);
            let answer = store.finish(held, response, message).await?;
            if plan.crash_after_finish {
                crash("after `finished` committed, before the answer is written");
            }
            Ok(Step::Done(Some(answer)))
        }
        RecoveryPoint::Finished => {
            Err(FlowError::Store(StoreError::Corrupt("a finished key was driven again".to_owned())))
        }
    }
}

/// Takes over unfinished keys whose lease ran out (their request died, or its process did) and drives them
/// to `finished`, every `interval` until `shutdown` turns true. Each key is taken by one transaction that
/// gives it a new lease, so a retry arriving meanwhile gets 409 and then the replay.
pub async fn run_completer(store: Store, checkout: Checkout, interval: Duration, shutdown: watch::Receiver<bool>) {
    idempotent_endpoint::periodic::every(interval, shutdown, || async {
        complete_once(&store, &checkout).await;
    })
    .await;
}

/// One pass of the completer over the library's `unfinished` keys; how many it finished or abandoned.
pub async fn complete_once(store: &Store, checkout: &Checkout) -> usize {
    let taken = match store.unfinished(COMPLETER_BATCH, checkout.config.key_lease).await {
        Ok(taken) => taken,
        Err(error) => {
            tracing::warn!(%error, "completer: taking unfinished keys failed");
            return 0;
        }
    };
    let mut done = 0;
    for held in taken {
        // The key's hash, not the key: these events are exported with the spans (see `telemetry`).
        let (point, key_hash) = (held.point, idempotent_endpoint::key_hash(held.held.key.as_str()));
        // In the trace of the request that claimed the key (the row keeps its traceparent).
        let span = idempotent_endpoint::phases::completion_span(&held.held);
        match drive(store, checkout, held, None, FaultPlan::default()).instrument(span).await {
            Ok(answer) => {
                done += 1;
                tracing::info!(key_hash, from = point.as_str(), finished = answer.is_some(), "completer resumed a key");
            }
            Err(error) => tracing::warn!(key_hash, from = point.as_str(), %error, "completer could not finish a key"),
        }
    }
    done
}

/// Keys the completer takes over in one pass.
const COMPLETER_BATCH: i64 = 16;
