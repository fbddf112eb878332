// The error a query builder bound to the key row's transaction throws when asked for a transaction of its
// own: its BEGIN/COMMIT would run on the same connection and commit the key row before the answer is stored.

/** Thrown by `transaction()` on a builder bound to the key row's transaction (the handler is in one already). */
export class NestedTransactionError extends Error {
  /** `NestedTransactionError`. */
  override name = "NestedTransactionError";
  /** `builder`: the adapter that refused (`drizzleTx`, `kyselyTx`). */
  constructor(builder: string) {
    super(`${builder}: the handler already runs in the key row's transaction; write through the builder it got, without transaction()`);
  }
}
