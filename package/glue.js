// The glue every bundle gets in place of wasm-bindgen's (src/js/generated/idempotent_fetch.js): the
// same calls into the same exports, written for what the driver reaches. package/build.mjs
// (`checkedGlue`) puts it in, renamed to the minified wasm's names and with the wasm's source per
// platform, only while wasm-bindgen's glue is still the one this was written against:
// wasm-bindgen glue sha256 (comments removed): c6f518739e1d38cc0cbbc1f5e59fcde682070bf1ea6db9a5ecf13d4dcb9f6ba6
// Any change there (an export added or changed in src/wasm.rs, another wasm-bindgen) fails the
// build until this file calls the new glue's exports the way it does and the hash above is its own.
//
// What is left out of wasm-bindgen's glue, and why that changes nothing the driver can see:
// - strings go in through `TextEncoder.encode` and one `malloc`, not the ASCII loop with `realloc`
//   (the same bytes in the same allocation; every engine the package supports has both);
// - a string comes out through a TextDecoder made for the call (wasm-bindgen's shared one is
//   recreated every 2 GB for a Safari limit that a fresh one never reaches), without `ignoreBOM`: the
//   machine's strings (keys and header values of unreserved ASCII, wasm-bindgen's messages) never
//   start with a byte-order mark;
// - a view of the memory made for each use instead of one cached and checked for detachment;
// - no cleanup of the strings already copied when a later argument throws: the encoder takes any
//   value without throwing, so only a `malloc` that cannot grow memory can, and then the instance is
//   lost anyway;
// - no check that a Machine argument is a Machine (the driver passes only its own): another value
//   would be taken as no candidate (`begin`) or meet wasm-bindgen's null-pointer check (`sweep`)
//   instead of throwing "expected instance of Machine";
// - `init()` as the driver calls it: with no argument, once at a time (src/js/wasm.ts keeps the
//   promise and asks again after a failure), on a Response (a failed fetch keeps its error, streaming
//   compile, the bytes with one warning when the server does not send `application/wasm`; no check
//   that `instantiateStreaming` exists: every engine that can run the module has it); `initSync` as
//   node.cjs calls it, with `{ module }`;
// - the module holds no JavaScript value (numbers and strings only), so its externref table is never
//   read and its slots need no values;
// - no `Symbol.dispose` on the classes: nothing the driver hands out is one, and the driver frees
//   them itself (`free()`, or the FinalizationRegistry when it drops one);
// - no stand-in for a missing FinalizationRegistry: every engine that can run the module (reference
//   types, bulk memory) has one;
// - the numbers the machine returns as u32 (actions, verdicts, `code * 256 + detail`) are below 2^31,
//   where the i32 the call returns is the same number, so only `budget()` is read unsigned.
import { fillRandom } from './snippets/idempotent-fetch-640a4bcb0b785c0a/inline0.js';

let wasm, length = 0;
const encoder = new TextEncoder();

/** The wasm's memory as bytes (a view made for each use, so one after the memory grew is current). */
const memory = () => new Uint8Array(wasm.memory.buffer);

/** A string copied into wasm memory: its pointer, its byte length in `length` (0, 0 for none). */
function passString(text) {
    if (text == null) return (length = 0);
    const encoded = encoder.encode(text), ptr = wasm.__wbindgen_malloc(encoded.length, 1) >>> 0;
    memory().set(encoded, ptr);
    length = encoded.length;
    return ptr;
}

/** Numbers copied into wasm memory as f64: the pointer, the count in `length`. */
function passNumbers(numbers) {
    const ptr = wasm.__wbindgen_malloc(numbers.length * 8, 8) >>> 0;
    new Float64Array(wasm.memory.buffer, ptr, numbers.length).set(numbers);
    length = numbers.length;
    return ptr;
}

const readString = (ptr, len) => new TextDecoder().decode(memory().subarray(ptr >>>= 0, ptr + len));

// An object the page drops is freed when it is collected; `free()` does it at once.
const registry = new FinalizationRegistry(([free, ptr]) => free(ptr, 1));

/** A new `Class` object over the wasm pointer `ptr`, freed by the export `free` once collected;
 *  undefined for 0 (the call was refused). */
function wrap(Class, free, ptr) {
    if (!ptr) return undefined;
    const obj = Object.create(Class.prototype);
    obj.__wbg_ptr = ptr;
    registry.register(obj, [free, ptr], obj);
    return obj;
}

/** The pointer of `obj`, which no longer owns it (0 for none, or an object already taken). */
function take(obj) {
    if (obj == null) return 0;
    const ptr = obj.__wbg_ptr;
    obj.__wbg_ptr = 0;
    registry.unregister(obj);
    return ptr;
}

export class Engine {
    free() { wasm.__wbg_engine_free(take(this), 0); }
    static create(options) { return wrap(Engine, wasm.__wbg_engine_free, wasm.engine_create(passNumbers(options), length)); }
    budget() { return wasm.engine_budget(this.__wbg_ptr) >>> 0; }
    begin(intentId, fingerprint, storedFingerprint, nowMs, replace, key, stored, claimed) {
        return wrap(Machine, wasm.__wbg_machine_free, wasm.engine_begin(this.__wbg_ptr, passString(intentId), length, passString(fingerprint), length,
            passString(storedFingerprint), length, nowMs, replace, passString(key), length, take(stored), take(claimed)));
    }
    load(intentId, id, key, fingerprint, numbers) {
        return wrap(Machine, wasm.__wbg_machine_free, wasm.engine_load(this.__wbg_ptr, passString(intentId), length, passString(id), length,
            passString(key), length, passString(fingerprint), length, passNumbers(numbers), length));
    }
    sweep(record, nowMs) { return wasm.engine_sweep(this.__wbg_ptr, record.__wbg_ptr, nowMs); }
}

export class Machine {
    free() { wasm.__wbg_machine_free(take(this), 0); }
    get(field) { return wasm.machine_get(this.__wbg_ptr, field); }
    key(header) {
        const ret = wasm.machine_key(this.__wbg_ptr, header);
        try {
            return readString(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(ret[0], ret[1], 1);
        }
    }
    markSaved() { wasm.machine_markSaved(this.__wbg_ptr); }
    onKeyStatus(nowMs, kind, status, retryAfter) {
        return wasm.machine_onKeyStatus(this.__wbg_ptr, nowMs, kind, status, passString(retryAfter), length);
    }
    onResponse(nowMs, status, retryAfter, stripeShouldRetry, replayed, override) {
        return wasm.machine_onResponse(this.__wbg_ptr, nowMs, status, passString(retryAfter), length,
            passString(stripeShouldRetry), length, passString(replayed), length, override);
    }
    on(event, nowMs, online) { return wasm.machine_on(this.__wbg_ptr, event, nowMs, online); }
}

export function lastError() {
    return wasm.lastError();
}

function __wbg_get_imports() {
    const import0 = {
        __wbg___wbindgen_throw_4c88d8bf264fd984(arg0, arg1) {
            throw new Error(readString(arg0, arg1));
        },
        __wbg_fillRandom_05a9b043ef779267(arg0, arg1) {
            return fillRandom(memory().subarray(arg0 >>>= 0, arg0 + arg1));
        },
        __wbindgen_init_externref_table() {
        },
    };
    return {
        "./idempotent_fetch_bg.js": import0,
    };
}

function finalize(instance) {
    wasm = instance.exports;
    wasm.__wbindgen_start();
    return wasm;
}

function initSync({ module }) {
    if (wasm !== undefined) return wasm;
    if (!(module instanceof WebAssembly.Module)) module = new WebAssembly.Module(module);
    return finalize(new WebAssembly.Instance(module, __wbg_get_imports()));
}

async function __wbg_init() {
    if (wasm !== undefined) return wasm;
    const response = await fetch(new URL('idempotent_fetch_bg.wasm', import.meta.url));
    if (!response.ok) throw new Error(`failed to fetch Wasm: ${response.status} ${response.statusText} fetching '${response.url}'`);
    const imports = __wbg_get_imports();
    let result;
    try {
        result = await WebAssembly.instantiateStreaming(response, imports);
    } catch (e) {
        if (response.headers.get('Content-Type') === 'application/wasm') throw e;
        console.warn("idempotent-fetch: the .wasm is not served as application/wasm (slower start)", e);
    }
    return finalize((result ?? await WebAssembly.instantiate(await response.arrayBuffer(), imports)).instance);
}

export { initSync, __wbg_init as default };
