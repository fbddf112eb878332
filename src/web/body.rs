//! Buffers a request body once, so that every retry sends exactly the same bytes.
//!
//! Strings, `ArrayBuffer`, typed arrays / `DataView`, `Blob`, `URLSearchParams` and `FormData` are
//! read through `new Response(body)`, which also yields the `Content-Type` that `fetch` would have
//! sent (including a multipart boundary). A `ReadableStream` is refused before anything is sent: it
//! can be read only once, so a retry would send half a request.

use js_sys::{ArrayBuffer, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::legacy::ErrorCode;

use super::errors::{describe_js, js_error};

/// A body ready to be sent any number of times.
pub struct BufferedBody {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The content type `fetch` would have derived from the original body, if any.
    pub content_type: Option<String>,
}

/// Buffers `body`; `None` for `undefined`/`null`.
pub async fn buffer_body(body: &JsValue) -> Result<Option<BufferedBody>, JsValue> {
    if body.is_undefined() || body.is_null() {
        return Ok(None);
    }
    if body.is_instance_of::<web_sys::ReadableStream>() {
        return Err(js_error(
            ErrorCode::BodyNotReplayable,
            "a ReadableStream body can be read only once, so it cannot be retried; pass a string, \
             ArrayBuffer, typed array, Blob, URLSearchParams or FormData instead",
        ));
    }
    let unreadable =
        |e: JsValue| js_error(ErrorCode::InvalidRequest, format!("body cannot be read: {}", describe_js(&e)));
    let Some(response) = response_from_body(body).map_err(unreadable)? else {
        return Err(js_error(
            ErrorCode::InvalidRequest,
            "body must be a string, ArrayBuffer, typed array, Blob, URLSearchParams or FormData \
             (for an object, pass JSON.stringify(object))",
        ));
    };
    let content_type = response.headers().get("content-type").ok().flatten();
    let buffer = JsFuture::from(response.array_buffer().map_err(unreadable)?).await.map_err(unreadable)?;
    let bytes = Uint8Array::new(&buffer).to_vec();
    Ok(Some(BufferedBody { bytes, content_type }))
}

/// `new Response(body)` for each accepted body type; `None` for any other type. For an
/// `ArrayBufferView` (typed array, DataView) fetch reads exactly the viewed bytes.
fn response_from_body(body: &JsValue) -> Result<Option<web_sys::Response>, JsValue> {
    let response = if let Some(text) = body.as_string() {
        web_sys::Response::new_with_opt_str(Some(&text))
    } else if let Some(blob) = body.dyn_ref::<web_sys::Blob>() {
        web_sys::Response::new_with_opt_blob(Some(blob))
    } else if let Some(form) = body.dyn_ref::<web_sys::FormData>() {
        web_sys::Response::new_with_opt_form_data(Some(form))
    } else if let Some(params) = body.dyn_ref::<web_sys::UrlSearchParams>() {
        web_sys::Response::new_with_opt_url_search_params(Some(params))
    } else if body.is_instance_of::<ArrayBuffer>() || ArrayBuffer::is_view(body) {
        web_sys::Response::new_with_opt_buffer_source(Some(body.unchecked_ref()))
    } else {
        return Ok(None);
    };
    response.map(Some)
}
