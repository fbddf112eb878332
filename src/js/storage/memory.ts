// In memory: Node's default, the fallback when storage is blocked or full, and the twin of every
// other backend in tests (same interface, same record texts). Lost on reload.

import type { Backend } from "./backend.js";

export class MemoryBackend implements Backend {
  private readonly records = new Map<string, string>();

  constructor(carried: Iterable<[string, string]> = []) {
    for (const [id, text] of carried) this.records.set(id, text);
  }

  async get(intentId: string): Promise<string | undefined> {
    return this.records.get(intentId);
  }

  async put(intentId: string, text: string): Promise<void> {
    this.records.set(intentId, text);
  }

  async delete(intentId: string): Promise<void> {
    this.records.delete(intentId);
  }

  async deleteIf(intentId: string, test: (text: string) => boolean): Promise<boolean> {
    const text = this.records.get(intentId);
    return text !== undefined && test(text) && this.records.delete(intentId);
  }

  async all(): Promise<[string, string][]> {
    return [...this.records];
  }
}
