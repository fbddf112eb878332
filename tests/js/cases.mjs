// Behaviour cases of the JavaScript API, shared by the Node runner (node.test.mjs, memory storage)
// and the browser runner (browser.test.mjs: Chromium, Firefox, WebKit; localStorage/sessionStorage in a real page).
//
// The cases live in cases/, one file per feature, each exporting its list; `cases` below is their
// concatenation, in this order. Each case is `{ name, browserOnly?, freshPage?, run: async (ctx) => {} }`;
// ctx comes from `makeContext` (cases/support.mjs, which says what ctx holds). These modules import
// only each other (no Node modules), so they load unchanged in Node and in a page.
import { cases as keysAndAnswers } from "./cases/keys-and-answers.mjs";
import { cases as crossOrigin } from "./cases/cross-origin.mjs";
import { cases as reconcile } from "./cases/reconcile.mjs";
import { cases as retriesAndAborts } from "./cases/retries-and-aborts.mjs";
import { cases as bodies } from "./cases/bodies.mjs";
import { cases as optionsAndEvents } from "./cases/options-and-events.mjs";
import { cases as lateAnswers } from "./cases/late-answers.mjs";
import { cases as clientFetchAndIntents } from "./cases/client-fetch-and-intents.mjs";
import { cases as atRest } from "./cases/at-rest.mjs";
import { cases as webStorage } from "./cases/web-storage.mjs";
import { cases as claimsAndRetired } from "./cases/claims-and-retired.mjs";
import { cases as offlineAndDoubleSend } from "./cases/offline-and-double-send.mjs";

export { assert, makeContext, override, runCase } from "./cases/support.mjs";

export const cases = [
  ...keysAndAnswers,
  ...crossOrigin,
  ...reconcile,
  ...retriesAndAborts,
  ...bodies,
  ...optionsAndEvents,
  ...lateAnswers,
  ...clientFetchAndIntents,
  ...atRest,
  ...webStorage,
  ...claimsAndRetired,
  ...offlineAndDoubleSend,
];
