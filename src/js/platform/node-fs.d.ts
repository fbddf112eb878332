// The one Node API the Node entry uses (so the driver needs no @types/node).
declare module "node:fs/promises" {
  export function readFile(path: URL): Promise<Uint8Array<ArrayBuffer>>;
}
