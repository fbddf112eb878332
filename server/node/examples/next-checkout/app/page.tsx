export default function Home() {
  return (
    <main>
      <h1>Checkout</h1>
      <p>
        <code>POST /api/orders</code> with an <code>Idempotency-Key</code> places an order once per key;{" "}
        <code>/api/idempotency-keys/[key]</code> answers its status.
      </p>
    </main>
  );
}
