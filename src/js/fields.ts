// Strict readers for fields of objects the caller passes: the type is checked, unknown fields are
// refused, and a wrong one is reported with the field's path ("retry.maxAttempts must be a number,
// got string"). One reader for options, requests and stored records.

/** `typeof value`, with `null` and arrays named as such. */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** A view of one plain object; `fail` turns a problem into the caller's error type. */
export class Fields {
  private constructor(
    private readonly object: Record<string, unknown>,
    private readonly path: string,
    private readonly fail: (message: string) => Error,
  ) {}

  /** Reads `value`, which must be an object (not null, not an array). */
  static of(value: unknown, path: string, what: string, fail: (message: string) => Error): Fields {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw fail(`${what} must be an object, got ${typeName(value)}`);
    }
    return new Fields(value as Record<string, unknown>, path, fail);
  }

  /** Refuses any field not in `allowed` (a typo such as `maxAttemps` must not pass silently). */
  only(allowed: readonly string[]): this {
    let names: string[];
    try {
      names = Object.keys(this.object);
    } catch (thrown) {
      throw this.fail(`${this.path || "the object"}'s fields cannot be listed`);
    }
    for (const name of names) {
      if (!allowed.includes(name)) {
        throw this.fail(`unknown field ${this.path}${name} (expected one of: ${allowed.join(", ")})`);
      }
    }
    return this;
  }

  /** The full path of a field, for messages. */
  pathOf(name: string): string {
    return this.path + name;
  }

  /** The raw value; `undefined` when absent. A throwing getter is an error. */
  value(name: string): unknown {
    try {
      return this.object[name];
    } catch {
      throw this.fail(`${this.pathOf(name)} cannot be read`);
    }
  }

  /** A number (any, NaN included: range checks are the caller's). */
  number(name: string): number | undefined {
    return this.typed(name, "number") as number | undefined;
  }

  string(name: string): string | undefined {
    return this.typed(name, "string") as string | undefined;
  }

  boolean(name: string): boolean | undefined {
    return this.typed(name, "boolean") as boolean | undefined;
  }

  function<F>(name: string): F | undefined {
    return this.typed(name, "function") as F | undefined;
  }

  /** A finite whole number in `[min, max]`, or `fallback` when absent. */
  integer(name: string, fallback: number, min: number, max: number): number {
    const value = this.number(name);
    if (value === undefined) return fallback;
    const field = this.pathOf(name);
    if (!Number.isFinite(value)) throw this.fail(`${field} must be a finite number, got ${value}`);
    if (!Number.isInteger(value)) throw this.fail(`${field} must be a whole number, got ${value}`);
    if (value < min || value > max) throw this.fail(`${field} must be between ${min} and ${max}, got ${value}`);
    return value;
  }

  /** One of `names`, or `fallback` when absent. */
  oneOf<T extends string>(name: string, names: readonly T[], fallback: T): T {
    const value = this.string(name);
    if (value === undefined) return fallback;
    if (!(names as readonly string[]).includes(value)) {
      const list = names.map((n) => `"${n}"`);
      const spelled = `${list.slice(0, -1).join(", ")} or ${list[list.length - 1]}`;
      throw this.fail(`${this.pathOf(name)} must be ${spelled}, got "${value}"`);
    }
    return value as T;
  }

  /** The value when it is a `type` ("must be a number, got string" otherwise). */
  private typed(name: string, type: string): unknown {
    const value = this.value(name);
    if (value !== undefined && typeof value !== type) {
      throw this.fail(`${this.pathOf(name)} must be a ${type}, got ${typeName(value)}`);
    }
    return value;
  }
}
