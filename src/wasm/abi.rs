//! The module's exports as plain wasm functions, called by the driver's own glue (src/js/abi.ts,
//! the one other side of each signature; docs/WASM-BOUNDARY.md, "The ABI").
//!
//! Only numbers cross: an `Engine` or `Machine` is the address of its box (0 for none), a boolean
//! is 0 or 1. Strings and number arrays go through one scratch buffer: the glue asks for room with
//! [`if_buf`], writes a call's numbers (f64) first and then its strings' UTF-8 one after another,
//! and passes each string's byte length (`u32::MAX` for an absent optional one); a string the
//! machine returns is written there too, its length returned. The glue only passes addresses the
//! module gave it and forgets each one when it frees or hands it back (a freed handle is 0): an
//! address is trusted as wasm-bindgen's glue trusts its pointers. Everything else JavaScript passes
//! is checked here: a length past the buffer or bytes that are not UTF-8 read as absent, a 0 handle
//! as a refusal, never a trap.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr::null_mut;

use super::{last_error, refuse, Engine, Machine};
use crate::machine as m;

/// The scratch buffer, in 8-byte words so that the numbers at its start are aligned for `f64`.
struct Scratch(UnsafeCell<Vec<u64>>);

// SAFETY: wasm32 without threads: one caller at a time, and no export re-enters another.
unsafe impl Sync for Scratch {}

static SCRATCH: Scratch = Scratch(UnsafeCell::new(Vec::new()));

// The names of the exports' parameter types say what a number means to the glue: the glue's
// `Exports` interface (src/js/generated/abi.ts) is generated from these signatures
// (tests/abi_exports.rs), so a type here is the one statement of the glue's type there.

/// A boolean as the glue passes it: 0 or 1.
type Flag = u32;

/// A string's UTF-8 byte length in the scratch buffer; `u32::MAX` (the glue's -1) when absent.
type Length = u32;

/// A machine's handle that may be 0 (none); the call consumes it.
type MaybeMachine = *mut Machine;

/// The scratch buffer, grown to at least `len` bytes.
fn scratch(len: usize) -> &'static mut Vec<u64> {
    // SAFETY: single-threaded, and each export takes this borrow once and drops it before returning.
    let words = unsafe { &mut *SCRATCH.0.get() };
    let need = len.div_ceil(8);
    if words.len() < need {
        words.resize(need, 0);
    }
    words
}

/// Room for `len` bytes of arguments: the address of the scratch buffer (valid until the next call
/// that grows the memory).
#[no_mangle]
pub extern "C" fn if_buf(len: usize) -> *mut u8 {
    scratch(len).as_mut_ptr().cast()
}

/// A call's arguments as the glue wrote them into the scratch buffer.
struct Args<'a> {
    numbers: &'a [f64],
    bytes: &'a [u8],
}

/// The scratch buffer as `count` numbers and the strings after them.
fn args(count: u32) -> Args<'static> {
    let words: &'static [u64] = scratch(0);
    let count = (count as usize).min(words.len());
    // SAFETY: u64 and f64 have one size and alignment, every bit pattern is an f64, and the words are
    // initialised (the buffer only grows, zero-filled); bytes have alignment 1.
    let (numbers, all) = unsafe {
        (
            core::slice::from_raw_parts(words.as_ptr().cast::<f64>(), count),
            core::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8),
        )
    };
    Args { numbers, bytes: all.get(count * 8..).unwrap_or_default() }
}

impl<'a> Args<'a> {
    /// The next string, `len` bytes long; `None` when absent (`u32::MAX`), past the buffer or not UTF-8.
    fn next(&mut self, len: u32) -> Option<&'a str> {
        let (text, rest) = self.bytes.split_at_checked(usize::try_from(len).ok()?)?;
        self.bytes = rest;
        core::str::from_utf8(text).ok()
    }

    /// The next string that is never absent (the empty string when it is not there: refused by the
    /// machine's validation like any other empty id or fingerprint).
    fn text(&mut self, len: u32) -> &'a str {
        self.next(len).unwrap_or_default()
    }
}

/// A handle for JavaScript: the box's address, 0 for none.
fn handle<T>(value: Option<T>) -> *mut T {
    value.map_or(null_mut(), |v| Box::into_raw(Box::new(v)))
}

/// The value behind a handle; `None` for 0.
fn get<'a, T>(handle: *mut T) -> Option<&'a mut T> {
    // SAFETY: a non-zero handle is an address `handle` returned and not yet freed (the module doc).
    unsafe { handle.as_mut() }
}

/// The value behind a handle, taken back (the handle is dead after this).
fn take<T>(handle: *mut T) -> Option<Box<T>> {
    // SAFETY: as `get`; the glue forgets the handle when it passes it here.
    (!handle.is_null()).then(|| unsafe { Box::from_raw(handle) })
}

/// A call on a freed handle: refused as the driver's bug.
fn freed<T>() -> Option<T> {
    refuse(m::Error::new(m::code::INTERNAL, 0))
}

/// `lastError()`: the error of the last refused call (`code * 256 + detail`).
#[no_mangle]
pub extern "C" fn if_last_error() -> u32 {
    last_error()
}

/// `Engine.create(options)`: the options are the buffer's `count` numbers.
#[no_mangle]
pub extern "C" fn engine_create(count: u32) -> *mut Engine {
    handle(Engine::create(args(count).numbers))
}

/// Frees an engine (0: nothing).
#[no_mangle]
pub extern "C" fn engine_free(engine: *mut Engine) {
    drop(take(engine));
}

/// `engine.budget()`; 0 for a freed engine.
#[no_mangle]
pub extern "C" fn engine_budget(engine: *mut Engine) -> u32 {
    get(engine).map_or(0, |e| e.budget())
}

/// `engine.begin(...)`: the strings are intent id, fingerprint, stored fingerprint and the brought
/// key (optional); `stored` and `claimed` are consumed (freed here) whatever the outcome.
#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub extern "C" fn engine_begin(
    engine: *mut Engine,
    now_ms: f64,
    replace: Flag,
    stored: MaybeMachine,
    claimed: MaybeMachine,
    intent_id: Length,
    fingerprint: Length,
    stored_fingerprint: Length,
    key: Length,
) -> *mut Machine {
    let (stored, claimed) = (take(stored), take(claimed));
    let mut a = args(0);
    let (intent_id, fingerprint, stored_fingerprint) =
        (a.text(intent_id), a.text(fingerprint), a.text(stored_fingerprint));
    let key = a.next(key);
    handle(get(engine).map_or_else(freed, |e| {
        e.begin(
            intent_id,
            fingerprint,
            stored_fingerprint,
            now_ms,
            replace != 0,
            key,
            stored.as_deref(),
            claimed.as_deref(),
        )
    }))
}

/// `engine.load(...)`: the record's numbers are the buffer's `count` numbers, then the strings intent
/// id, id, key and fingerprint.
#[no_mangle]
pub extern "C" fn engine_load(
    engine: *mut Engine,
    count: u32,
    intent_id: Length,
    id: Length,
    key: Length,
    fingerprint: Length,
) -> *mut Machine {
    let mut a = args(count);
    let (intent_id, id, key, fingerprint) = (a.text(intent_id), a.text(id), a.text(key), a.text(fingerprint));
    handle(get(engine).map_or_else(freed, |e| e.load(intent_id, id, key, fingerprint, a.numbers)))
}

/// `engine.sweep(record, nowMs)`; `SWEEP_KEEP` for a freed engine or record.
#[no_mangle]
pub extern "C" fn engine_sweep(engine: *mut Engine, record: *mut Machine, now_ms: f64) -> u32 {
    match (get(engine), get(record)) {
        (Some(e), Some(r)) => e.sweep(r, now_ms),
        _ => 0,
    }
}

/// Frees a machine (0: nothing).
#[no_mangle]
pub extern "C" fn machine_free(machine: *mut Machine) {
    drop(take(machine));
}

/// `machine.key(header)`: the string's byte length; the UTF-8 is at the start of the scratch buffer.
#[no_mangle]
pub extern "C" fn machine_key(machine: *mut Machine, header: Flag) -> u32 {
    let Some(machine) = get(machine) else { return 0 };
    let text = machine.key_or_header(header != 0);
    let words = scratch(text.len());
    // SAFETY: the buffer holds at least `text.len()` bytes (just grown), and the two do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(text.as_ptr(), words.as_mut_ptr().cast::<u8>(), text.len()) };
    text.len() as u32
}

/// `machine.markSaved()`.
#[no_mangle]
pub extern "C" fn machine_mark_saved(machine: *mut Machine) {
    if let Some(machine) = get(machine) {
        machine.mark_saved();
    }
}

/// `machine.get(field)`; NaN for a freed machine.
#[no_mangle]
pub extern "C" fn machine_get(machine: *mut Machine, field: u32) -> f64 {
    get(machine).map_or(f64::NAN, |m| m.get(field))
}

/// `machine.onResponse(...)`: the strings are Retry-After, Stripe-Should-Retry and the replay
/// header's value, each optional. A freed machine returns 0, an action no driver knows.
#[no_mangle]
pub extern "C" fn machine_on_response(
    machine: *mut Machine,
    now_ms: f64,
    status: u32,
    override_: u32,
    retry_after: Length,
    stripe_should_retry: Length,
    replayed: Length,
) -> u32 {
    let mut a = args(0);
    let (retry_after, stripe, replayed) = (a.next(retry_after), a.next(stripe_should_retry), a.next(replayed));
    get(machine).map_or(0, |m| m.on_response(now_ms, status as u16, retry_after, stripe, replayed, override_))
}

/// `machine.onKeyStatus(...)`: the string is Retry-After (optional).
#[no_mangle]
pub extern "C" fn machine_on_key_status(
    machine: *mut Machine,
    now_ms: f64,
    kind: u32,
    status: u32,
    retry_after: Length,
) -> u32 {
    let retry_after = args(0).next(retry_after);
    get(machine).map_or(0, |m| m.on_key_status(now_ms, kind, status as u16, retry_after))
}

/// `machine.on(event, nowMs, online)`.
#[no_mangle]
pub extern "C" fn machine_on(machine: *mut Machine, event: u32, now_ms: f64, online: Flag) -> u32 {
    get(machine).map_or(0, |m| m.on(event, now_ms, online != 0))
}
