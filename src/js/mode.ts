// The two builds of the package (package/README.md, "Development and production"): the development
// build says everything in its messages, warnings and diagnoses; the production build, which apps get
// by default, gives each error its code and a short text naming the page that documents it.
//
// Every esbuild build of these sources defines both globals (package/build.mjs `DEFINES`): a constant
// the bundler knows in every module, so the production build drops each text written
// `__DEV__ && "..."` together with what only that text uses.

declare global {
  /** `true` in the development build: messages in full; `false` in the production build. */
  const __DEV__: boolean;
  /** The production build's docs page for its messages (empty in the development build). */
  const __DOCS__: string;
}

/** The production build's text for `code`: the code and where it is documented. */
export function brief(code: string): string {
  return `${code} (${__DOCS__}; the development build of idempotent-fetch-client says more)`;
}

/** A console warning: `text` in the development build; in production the event it goes with (`code`)
 *  and its docs page. */
export function warn(text: string | false, code: string): void {
  console.warn(`idempotent-fetch: ${text || brief(code)}`);
}
