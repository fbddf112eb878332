// The driver's own multipart/form-data encoding (src/js/body-objects.ts `multipart`: the fallback where a
// FormData holding a Blob cannot be read through a Response, as in WebKit) against the runtime's
// encoding of the same FormData (Node's fetch, spec'd by HTML's algorithm), boundary aside.
// The TypeScript is bundled on the fly with esbuild (tools/node_modules: cd tools && npm ci).
// Run: node --test tests/js/body.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

import { root } from "../support/paths.mjs";
import { DEFINES } from "../../package/build.mjs";

const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
/** The exports of the driver's `source`, bundled on the fly (its lazy parts inline). */
async function load(source) {
  const { outputFiles } = await esbuild.build({
    define: DEFINES.development, // src/js/mode.ts
    entryPoints: [path.join(root, "src/js", source)], bundle: true, format: "esm", write: false, logLevel: "warning",
  });
  return import(`data:text/javascript;base64,${Buffer.from(outputFiles[0].text).toString("base64")}`);
}
const { bufferBody } = await load("body.ts");
const { multipart } = await load("body-objects.ts");

/** The runtime's own encoding of `form`: its bytes and its boundary. */
async function native(form) {
  const response = new Response(form);
  const type = response.headers.get("content-type");
  return { bytes: new Uint8Array(await response.arrayBuffer()), boundary: /boundary=(.+)$/.exec(type)[1], type };
}

const text = (bytes) => Buffer.from(bytes).toString("latin1");

test("multipart equals the runtime's encoding (strings, line breaks, quotes, files, typeless blobs)", async () => {
  const form = new FormData();
  form.append("amount", "10.00");
  form.append('we"ird\r\nname', "line1\nline2\rline3\r\nline4");
  form.append("file", new Blob([new Uint8Array([0, 1, 2, 255, 13, 10])], { type: "application/x-test" }), 'a "b".bin');
  form.append("blob", new Blob(["plain"]));
  form.append("empty", "");
  const ours = await multipart(form);
  const theirs = await native(form);
  const boundary = /boundary=(.+)$/.exec(ours.contentType)[1];
  assert.equal(ours.contentType, `multipart/form-data; boundary=${boundary}`);
  assert.equal(text(ours.bytes).replaceAll(boundary, "B"), text(theirs.bytes).replaceAll(theirs.boundary, "B"));
});

test("bufferBody: a FormData keeps its own content type and boundary; a stream is read to its end, a locked one refused", async () => {
  const form = new FormData();
  form.append("a", "1");
  const buffered = await bufferBody(form);
  const boundary = /boundary=(.+)$/.exec(buffered.contentType)[1];
  assert.ok(text(buffered.bytes).includes(`--${boundary}`));
  const chunks = [new Uint8Array([1, 2]), new Uint8Array([3])];
  const stream = new ReadableStream({ pull(c) { if (chunks.length) c.enqueue(chunks.shift()); else c.close(); } });
  assert.deepEqual([...(await bufferBody(stream, 3)).bytes], [1, 2, 3]);
  const over = new ReadableStream({ pull(c) { c.enqueue(new Uint8Array([1, 2])); } });
  await assert.rejects(bufferBody(over, 3), (e) => e.code === "BODY_TOO_LARGE");
  const locked = new ReadableStream();
  locked.getReader();
  await assert.rejects(bufferBody(locked, 3), (e) => e.code === "BODY_NOT_REPLAYABLE");
});
