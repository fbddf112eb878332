// In memory: Node's default, the fallback when storage is blocked or full, and the twin of every
// other backend in tests (same interface, same record texts, same shelves). Lost on reload.

import { type Backend, onShelf, type Shelf } from "./backend.js";

export class MemoryBackend implements Backend {
  readonly shelves = true;
  private readonly records = new Map<string, string>();

  constructor(carried: Iterable<[string, string]> = []) {
    for (const [id, text] of carried) this.records.set(id, text);
  }

  async get(id: string): Promise<string | undefined> {
    return this.records.get(id);
  }

  async put(id: string, text: string, ...drop: string[]): Promise<void> {
    this.records.set(id, text);
    for (const slot of drop) this.records.delete(slot);
  }

  async delete(...ids: string[]): Promise<void> {
    for (const id of ids) this.records.delete(id);
  }

  async deleteIf(id: string, test: (text: string) => boolean, moveTo?: string): Promise<boolean> {
    const text = this.records.get(id);
    if (text === undefined || !test(text)) return false;
    if (moveTo !== undefined) this.records.set(moveTo, text);
    return this.records.delete(id);
  }

  async all(shelf?: Shelf): Promise<[string, string][]> {
    return [...this.records].filter(([id]) => onShelf(id, shelf));
  }
}
