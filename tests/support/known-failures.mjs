// Known product failures per engine, by test name, each with the reason. Only for code that is being
// replaced (the client's src/web is being rewritten as the TypeScript driver in src/js/): the
// failure is recorded in the findings for the driver author, and the test still RUNS here as
// a node:test `todo`: its failure is reported (not hidden) but does not fail the run, and a todo that
// starts passing shows up as such. Remove an entry as soon as the product handles the engine.
import { engine } from "./browsers.mjs";

const KNOWN = {
  firefox: {
    "a ReadableStream body is refused BODY_NOT_REPLAYABLE and nothing is sent":
      "Firefox has no Request.prototype.body, so src/web/client.rs cannot see a Request's body: fetch(Request) is sent without it",
  },
  webkit: {
    "body FormData arrives identical (same boundary) on every attempt as multipart":
      "WebKit cannot read a FormData holding a Blob/File through new Response(form) (InvalidStateError: Unable to read form data blob); src/web/body.rs buffers bodies that way",
  },
};

/** The reason `name` is a known failure in this engine, else false (node:test's `todo` option). */
export function knownFailure(name) {
  return KNOWN[engine]?.[name] ?? false;
}
