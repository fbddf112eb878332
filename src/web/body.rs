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

use crate::core::ErrorCode;

use super::errors::{describe_js, js_error};
use super::js::is_instance_of;

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
    if is_instance_of(body, "ReadableStream") {
        return Err(js_error(
            ErrorCode::BodyNotReplayable,
            "a ReadableStream body can be read only once, so it cannot be retried; pass a string, \
             ArrayBuffer, typed array, Blob, URLSearchParams or FormData instead",
        ));
    }
    let accepted = body.is_string()
        || body.is_instance_of::<ArrayBuffer>()
        || ArrayBuffer::is_view(body)
        || is_instance_of(body, "Blob")
        || is_instance_of(body, "URLSearchParams")
        || is_instance_of(body, "FormData");
    if !accepted {
        return Err(js_error(
            ErrorCode::InvalidRequest,
            "body must be a string, ArrayBuffer, typed array, Blob, URLSearchParams or FormData \
             (for an object, pass JSON.stringify(object))",
        ));
    }
    let response = response_from_body(body)
        .map_err(|e| js_error(ErrorCode::InvalidRequest, format!("body cannot be read: {}", describe_js(&e))))?;
    let content_type = response.headers().get("content-type").ok().flatten();
    let buffer = response
        .array_buffer()
        .map_err(|e| js_error(ErrorCode::InvalidRequest, format!("body cannot be read: {}", describe_js(&e))))?;
    let buffer = JsFuture::from(buffer)
        .await
        .map_err(|e| js_error(ErrorCode::InvalidRequest, format!("body cannot be read: {}", describe_js(&e))))?;
    let bytes = Uint8Array::new(&buffer).to_vec();
    Ok(Some(BufferedBody { bytes, content_type }))
}

/// `new Response(body)` for any accepted body type.
fn response_from_body(body: &JsValue) -> Result<web_sys::Response, JsValue> {
    if let Some(text) = body.as_string() {
        return web_sys::Response::new_with_opt_str(Some(&text));
    }
    if let Some(blob) = body.dyn_ref::<web_sys::Blob>().filter(|_| is_instance_of(body, "Blob")) {
        return web_sys::Response::new_with_opt_blob(Some(blob));
    }
    if is_instance_of(body, "FormData") {
        return web_sys::Response::new_with_opt_form_data(Some(body.unchecked_ref()));
    }
    if is_instance_of(body, "URLSearchParams") {
        return web_sys::Response::new_with_opt_url_search_params(Some(body.unchecked_ref()));
    }
    if let Some(buffer) = body.dyn_ref::<ArrayBuffer>() {
        return web_sys::Response::new_with_opt_buffer_source(Some(buffer.unchecked_ref()));
    }
    // A typed array or DataView: copy exactly the viewed bytes.
    let view = Uint8Array::new_with_byte_offset_and_length(
        &js_sys::Reflect::get(body, &"buffer".into())?,
        js_sys::Reflect::get(body, &"byteOffset".into())?.as_f64().unwrap_or(0.0) as u32,
        js_sys::Reflect::get(body, &"byteLength".into())?.as_f64().unwrap_or(0.0) as u32,
    );
    let copy = Uint8Array::new(&view);
    web_sys::Response::new_with_opt_buffer_source(Some(copy.unchecked_ref()))
}
