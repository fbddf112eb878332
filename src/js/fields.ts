// Strict readers for fields of objects the caller passes: the type is checked, unknown fields are
// refused, and a wrong one is reported with the field's path ("retry.maxAttempts must be a number,
// got string"). One reader for options, requests and stored records.


/** `typeof value`, with `null` and arrays named as such. */
export function typeName(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

/** A view of one plain object; `fail` turns a problem into the caller's error type. */
export class Fields {
  private constructor(
    private readonly object: Record<string, unknown>,
    private readonly path: string,
    private readonly fail: (message: string | false) => Error,
  ) {}

  /** Reads `value`, which must be an object (not null, not an array). */
  static of(value: unknown, path: string, what: string, fail: (message: string | false) => Error): Fields {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw fail(__DEV__ && `${what} must be an object, got ${typeName(value)}`);
    }
    return new Fields(value as Record<string, unknown>, path, fail);
  }

  /** Refuses any field not in `allowed` (a typo such as `maxAttemps` must not pass silently). */
  only(allowed: readonly string[]): this {
    let names: string[];
    try {
      names = Object.keys(this.object);
    } catch {
      throw this.fail(__DEV__ && `${this.path || "the object"}'s fields cannot be listed`);
    }
    for (const name of names) {
      if (!allowed.includes(name)) {
        throw this.fail(__DEV__ && `unknown field ${this.path}${name} (expected one of: ${allowed.join(", ")})`);
      }
    }
    return this;
  }

  /** The raw value; `undefined` when absent. A throwing getter is an error. */
  value(name: string): unknown {
    try {
      return this.object[name];
    } catch {
      throw this.fail(__DEV__ && `${this.path}${name} cannot be read`);
    }
  }

  /** The value when it is a `type` ("must be a number, got string" otherwise). */
  typed<T>(name: string, type: "string" | "boolean" | "function" | "number"): T | undefined {
    const value = this.value(name);
    if (value !== undefined && typeof value !== type) {
      throw this.fail(__DEV__ && `${this.path}${name} must be a ${type}, got ${typeName(value)}`);
    }
    return value as T | undefined;
  }

  string(name: string): string | undefined {
    return this.typed(name, "string");
  }

  boolean(name: string): boolean | undefined {
    return this.typed(name, "boolean");
  }

  /** A whole number in `[min, max]` (NaN, Infinity and fractions refused), or `fallback` when absent. */
  integer(name: string, fallback: number, min: number, max: number): number {
    const value = this.typed<number>(name, "number") ?? fallback;
    if (!Number.isInteger(value) || value < min || value > max) {
      throw this.fail(__DEV__ && `${this.path}${name} must be a whole number from ${min} to ${max}, got ${value}`);
    }
    return value;
  }

  /** One of `names`, or `fallback` when absent. */
  oneOf<T extends string>(name: string, names: readonly T[], fallback: T): T {
    const value = this.string(name) ?? fallback;
    if (!names.includes(value as T)) {
      throw this.fail(__DEV__ && `${this.path}${name} must be one of "${names.join('", "')}", got "${value}"`);
    }
    return value as T;
  }
}
