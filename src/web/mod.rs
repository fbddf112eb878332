//! The browser side: adapters from the core's traits to fetch, Web Storage, timers and
//! `navigator.onLine`, and the `#[wasm_bindgen]` JavaScript API over them.

mod body;
mod client;
mod clock;
mod errors;
mod events;
mod fields;
mod indexeddb;
mod inflight;
mod js;
mod lock;
mod operation;
mod options;
mod record_codec;
mod request;
mod storage;
mod transport;
mod types;
mod waiter;

pub use client::IdempotentClient;
pub use operation::IdempotentOperation;
