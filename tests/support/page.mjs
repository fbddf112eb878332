// Browser side of the test pages that load the package (pkg/index.js) from a static server rooted at the repository
// (tests/browser/cases.html, tests/workers/page.html, tests/fault/bad-input.html). The Node side is
// tests/support/browsers.mjs (waitForLibPage, throwPageFailure).
//
//   initLibrary(lib)        awaits the package's `ready` (the wasm fetched, compiled, instantiated: the
//                           package starts that itself on import), exposes the module as window.__lib and
//                           sets window.__ready, or window.__initError (the stack) if loading failed
//   outcomeOf(run)          awaits run() and returns a structured-cloneable outcome for
//                           page.evaluate: { ok: true } or { ok: false, message, code, stack }

export async function initLibrary(lib) {
  try {
    await lib.ready;
    window.__lib = lib;
    window.__ready = true;
  } catch (error) {
    window.__initError = String(error?.stack ?? error);
  }
}

export async function outcomeOf(run) {
  try {
    await run();
    return { ok: true };
  } catch (error) {
    return { ok: false, message: `${error?.name}: ${error?.message}`, code: error?.code, stack: String(error?.stack ?? "") };
  }
}
