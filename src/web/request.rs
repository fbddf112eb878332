//! The request of an intent, read from JavaScript and checked before anything is stored or sent.

use js_sys::{Array, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::legacy::{ErrorCode, Fingerprint};

use super::body::{buffer_body, BufferedBody};
use super::errors::{describe_js, js_error};
use super::fields::Fields;
use super::js::{global_property, property};
use super::options::is_token_byte;

/// A validated, buffered request: what every attempt sends.
pub struct PreparedRequest {
    /// Upper-case method.
    pub method: String,
    /// Absolute URL where a base is known (the page), else as given.
    pub url: String,
    /// Header pairs as `Headers` normalised them (lower-case names), without the key header.
    pub headers: Vec<(String, String)>,
    /// The buffered body.
    pub body: Option<BufferedBody>,
}

impl PreparedRequest {
    /// SHA-256 of method, URL and body.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.method, &self.url, self.body.as_ref().map_or(&[][..], |b| &b.bytes))
    }
}

/// Reads `{ url, method, headers, body }` (method defaults to `POST`).
pub async fn prepare_request(request: &JsValue, key_header: &str) -> Result<PreparedRequest, JsValue> {
    let invalid = |message: String| bad(message);
    let fields = Fields::of(request, "request.", "the request { url, method, headers, body }").map_err(invalid)?;
    fields.only(&["url", "method", "headers", "body"]).map_err(invalid)?;
    let url = read_url(property(request, "url").as_ref())?;
    let method = fields.string("method").map_err(invalid)?.unwrap_or_else(|| "POST".to_owned());
    prepare_parts(
        url,
        &method,
        property(request, "headers").as_ref(),
        &property(request, "body").unwrap_or(JsValue::UNDEFINED),
        key_header,
    )
    .await
}

/// Builds a prepared request from its parts (also used by the fetch-shaped API).
pub async fn prepare_parts(
    url: String,
    method: &str,
    headers: Option<&JsValue>,
    body: &JsValue,
    key_header: &str,
) -> Result<PreparedRequest, JsValue> {
    if method.is_empty() || method.len() > 32 || !method.bytes().all(is_token_byte) {
        return Err(bad(format!("request.method \"{method}\" is not an HTTP method")));
    }
    let method = method.to_ascii_uppercase();
    if matches!(method.as_str(), "CONNECT" | "TRACE" | "TRACK") {
        return Err(bad(format!("request.method {method} cannot be sent by fetch")));
    }
    let headers = read_headers(headers, key_header)?;
    let mut body = buffer_body(body).await?;
    if body.is_some() && matches!(method.as_str(), "GET" | "HEAD") {
        return Err(bad(format!("a {method} request cannot have a body")));
    }
    // The content type fetch would have derived from the body object, unless the caller set one.
    if let Some(buffered) = body.as_mut().filter(|_| headers.iter().any(|(name, _)| name == "content-type")) {
        buffered.content_type = None;
    }
    Ok(PreparedRequest { method, url, headers, body })
}

/// A string or `URL`, resolved against the page's location when there is one.
pub fn read_url(value: Option<&JsValue>) -> Result<String, JsValue> {
    let Some(value) = value else { return Err(bad("request.url is required")) };
    let text = if let Some(text) = value.as_string() {
        text
    } else if value.is_object() {
        let href = Reflect::get(value, &"href".into()).ok().and_then(|h| h.as_string());
        href.ok_or_else(|| bad("request.url must be a string or a URL"))?
    } else {
        return Err(bad("request.url must be a string or a URL"));
    };
    if text.is_empty() || text.len() > 8192 || text.chars().any(char::is_control) {
        return Err(bad("request.url must be a non-empty URL without control characters"));
    }
    let base =
        global_property("location").and_then(|l| Reflect::get(&l, &"href".into()).ok()).and_then(|h| h.as_string());
    let resolved = match &base {
        Some(base) => web_sys::Url::new_with_base(&text, base),
        None => web_sys::Url::new(&text),
    };
    match resolved {
        Ok(url) => Ok(url.href()),
        Err(_) if base.is_none() => {
            Err(bad(format!("request.url \"{text}\" is not an absolute URL (there is no page to resolve it against)")))
        }
        Err(e) => Err(bad(format!("request.url \"{text}\" is not a URL: {}", describe_js(&e)))),
    }
}

/// Reads headers through `new Headers(init)`, which rejects CR/LF and invalid names exactly as
/// fetch would. A caller-supplied key header is refused: the library owns it.
fn read_headers(init: Option<&JsValue>, key_header: &str) -> Result<Vec<(String, String)>, JsValue> {
    let Some(init) = init else { return Ok(Vec::new()) };
    // `new Headers(init)` accepts a Headers object, an array of pairs or a record alike.
    let headers = web_sys::Headers::new_with_str_sequence_sequence(init)
        .map_err(|e| bad(format!("request.headers are invalid: {}", describe_js(&e))))?;
    let iterator = js_sys::try_iter(&headers)
        .map_err(|e| bad(format!("request.headers are invalid: {}", describe_js(&e))))?
        .ok_or_else(|| bad("request.headers are not iterable"))?;
    let mut pairs = Vec::new();
    for entry in iterator {
        let entry = entry.map_err(|e| bad(format!("request.headers are invalid: {}", describe_js(&e))))?;
        let entry: Array = entry.unchecked_into();
        let name = entry.get(0).as_string().unwrap_or_default();
        let value = entry.get(1).as_string().unwrap_or_default();
        if name.eq_ignore_ascii_case(key_header) {
            return Err(bad(format!("request.headers must not set {key_header}: the library sets it from the intent")));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

fn bad(message: impl Into<String>) -> JsValue {
    js_error(ErrorCode::InvalidRequest, message)
}
