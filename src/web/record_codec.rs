//! Intent records to and from the JSON kept in Web Storage, read strictly: every field's type is
//! checked, unknown fields are rejected, and then [`IntentRecord::validate`] checks the values.
//!
//! Hand-written rather than serde on the wasm side: the browser has `JSON`, and serde-wasm-bindgen
//! would cost more wasm than this file.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::legacy::intent::{IntentRecord, IntentState, PersistedRequest, RecordError};

use super::fields::Fields;
use super::js::{object, set};

const RECORD_FIELDS: &[&str] =
    &["v", "id", "key", "fingerprint", "createdAt", "updatedAt", "attempts", "state", "lastStatus", "request"];
const REQUEST_FIELDS: &[&str] = &["method", "url", "headers", "body"];

/// Largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Record -> JSON text.
pub fn encode(record: &IntentRecord) -> Result<String, String> {
    let o = object();
    set(&o, "v", record.v);
    set(&o, "id", record.id.as_str());
    set(&o, "key", record.key.as_str());
    set(&o, "fingerprint", record.fingerprint.as_str());
    set(&o, "createdAt", record.created_at as f64);
    set(&o, "updatedAt", record.updated_at as f64);
    set(&o, "attempts", record.attempts);
    set(&o, "state", record.state.as_str());
    set(&o, "lastStatus", record.last_status.map_or(JsValue::NULL, JsValue::from));
    if let Some(request) = &record.request {
        let r = object();
        set(&r, "method", request.method.as_str());
        set(&r, "url", request.url.as_str());
        let headers = Array::new();
        for (name, value) in &request.headers {
            headers.push(&Array::of2(&JsValue::from_str(name), &JsValue::from_str(value)));
        }
        set(&r, "headers", headers);
        let body = request
            .body
            .as_ref()
            .map_or(JsValue::NULL, |bytes| Array::from(&Uint8Array::from(bytes.as_slice())).into());
        set(&r, "body", body);
        set(&o, "request", r);
    }
    js_sys::JSON::stringify(&o).map(String::from).map_err(|_| "the record could not be encoded".to_owned())
}

/// JSON text -> record, type-checked (values are validated by the caller).
pub fn decode(text: &str) -> Result<IntentRecord, RecordError> {
    let value = js_sys::JSON::parse(text).map_err(|_| RecordError::Malformed("not JSON".into()))?;
    let fields = Fields::of(&value, "", "a record").map_err(RecordError::Malformed)?;
    fields.only(RECORD_FIELDS).map_err(RecordError::Malformed)?;
    let state = match required(fields.string("state"), "state")?.as_str() {
        "pending" => IntentState::Pending,
        "succeeded" => IntentState::Succeeded,
        "failed" => IntentState::Failed,
        "expired" => IntentState::Expired,
        other => return Err(RecordError::Malformed(format!("unknown state \"{other}\""))),
    };
    let last_status = match fields.value("lastStatus").map_err(RecordError::Malformed)? {
        None => None,
        Some(v) if v.is_null() => None,
        Some(_) => Some(whole(&fields, "lastStatus", u16::MAX.into())? as u16),
    };
    let request = match fields.value("request").map_err(RecordError::Malformed)? {
        None => None,
        Some(v) => Some(decode_request(&v)?),
    };
    Ok(IntentRecord {
        v: whole(&fields, "v", u32::MAX.into())? as u32,
        id: required(fields.string("id"), "id")?,
        key: required(fields.string("key"), "key")?,
        fingerprint: required(fields.string("fingerprint"), "fingerprint")?,
        created_at: whole(&fields, "createdAt", MAX_SAFE_INTEGER)? as u64,
        updated_at: whole(&fields, "updatedAt", MAX_SAFE_INTEGER)? as u64,
        attempts: whole(&fields, "attempts", u32::MAX.into())? as u32,
        state,
        last_status,
        request,
    })
}

fn decode_request(value: &JsValue) -> Result<PersistedRequest, RecordError> {
    let fields = Fields::of(value, "request.", "request").map_err(RecordError::Malformed)?;
    fields.only(REQUEST_FIELDS).map_err(RecordError::Malformed)?;
    let headers_value = fields.value("headers").map_err(RecordError::Malformed)?.unwrap_or_else(|| Array::new().into());
    if !Array::is_array(&headers_value) {
        return Err(RecordError::Malformed("request.headers must be an array".into()));
    }
    let mut headers = Vec::new();
    for pair in Array::from(&headers_value).iter() {
        let pair = Array::from(&pair);
        match (pair.length(), pair.get(0).as_string(), pair.get(1).as_string()) {
            (2, Some(name), Some(value)) => headers.push((name, value)),
            _ => return Err(RecordError::Malformed("request.headers must be [name, value] string pairs".into())),
        }
    }
    let body = match fields.value("body").map_err(RecordError::Malformed)? {
        None => None,
        Some(v) if v.is_null() => None,
        Some(v) if Array::is_array(&v) => {
            let mut bytes = Vec::new();
            for item in Array::from(&v).iter() {
                match item.as_f64() {
                    Some(n) if n.fract() == 0.0 && (0.0..=255.0).contains(&n) => bytes.push(n as u8),
                    _ => return Err(RecordError::Malformed("request.body must be an array of bytes".into())),
                }
            }
            Some(bytes)
        }
        Some(_) => return Err(RecordError::Malformed("request.body must be an array of bytes".into())),
    };
    Ok(PersistedRequest {
        method: required(fields.string("method"), "request.method")?,
        url: required(fields.string("url"), "request.url")?,
        headers,
        body,
    })
}

fn required<T>(value: Result<Option<T>, String>, name: &str) -> Result<T, RecordError> {
    value.map_err(RecordError::Malformed)?.ok_or_else(|| RecordError::Malformed(format!("missing field {name}")))
}

/// A whole number in `[0, max]`.
fn whole(fields: &Fields<'_>, name: &str, max: f64) -> Result<f64, RecordError> {
    let n = required(fields.number(name), name)?;
    if n.is_finite() && n.fract() == 0.0 && (0.0..=max).contains(&n) {
        Ok(n)
    } else {
        Err(RecordError::Malformed(format!("{name} must be a whole number in range")))
    }
}
