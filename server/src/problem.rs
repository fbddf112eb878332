//! `application/problem+json` error responses (RFC 9457): the library's [`Problem`], which every error the
//! server answers with is.

pub use idempotent_endpoint::problem::{truncate, Problem, MAX_DETAIL_BYTES, PROBLEM_JSON};
