// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) in plain JavaScript: the fingerprint's fallback
// where `crypto.subtle` is missing (it exists only in secure contexts, so a page on plain http has
// none), a part the driver loads on demand (lazy.ts); the agent and otel entries bundle it for the
// key's hash. Small on purpose (a few hundred bytes gzip); checked against crypto.subtle, Node's
// hashes, the FIPS vectors and RFC 4231 in tests/js/fingerprint.test.mjs.

// The round constants (cube roots) and the initial hash (square roots) of the first primes: the
// first 32 bits of their fractional parts (FIPS 180-4, 4.2.2 and 5.3.3), computed rather than listed,
// on the first digest (sha256 below), not at import: the package's start-up does not pay for them.
const K = new Uint32Array(64);
const H0 = new Uint32Array(8);

export { hex } from "./hex.js";

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/** The SHA-256 digest of `data` (32 bytes). */
export function sha256(data: Uint8Array): Uint8Array {
  if (!K[0]) {
    for (let n = 2, found = 0; found < 64; n++) {
      let d = 2;
      while (n % d) d++; // n's smallest divisor: n is prime when that is n itself
      if (d < n) continue;
      H0[found] = (n ** 0.5 % 1) * 2 ** 32; // kept for the first 8 primes: a typed array ignores writes past its end
      K[found++] = (n ** (1 / 3) % 1) * 2 ** 32;
    }
  }
  const length = data.length;
  // Message + 0x80 + zero padding + 64-bit big-endian bit length, to a multiple of 64 bytes
  // (setUint32 takes its value mod 2^32: the high word is floor(length / 2^29), the low one length * 8).
  const bytes = new Uint8Array(((length + 72) >> 6) << 6);
  bytes.set(data);
  bytes[length] = 0x80;
  const view = new DataView(bytes.buffer);
  view.setUint32(bytes.length - 8, length / 0x20000000);
  view.setUint32(bytes.length - 4, length << 3);
  const h = H0.slice();
  const w = new Uint32Array(64);
  for (let offset = 0; offset < bytes.length; offset += 64) {
    let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (let i = 0; i < 64; i++) {
      if (i < 16) w[i] = view.getUint32(offset + i * 4);
      else {
        const x = w[i - 15];
        const y = w[i - 2];
        w[i] = (rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3)) + (rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10)) + w[i - 7] + w[i - 16];
      }
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    [a, b, c, d, e, f, g, hh].forEach((x, i) => (h[i] += x));
  }
  return Uint8Array.from({ length: 32 }, (_, i) => h[i >> 2] >>> (24 - (i & 3) * 8));
}

/** RFC 2104 HMAC with the plain-JS SHA-256 (64-byte blocks). */
export function hmacSha256(secret: Uint8Array, data: Uint8Array): Uint8Array {
  const block = new Uint8Array(64);
  block.set(secret.length > 64 ? sha256(secret) : secret);
  const inner = new Uint8Array(64 + data.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    inner[i] = block[i] ^ 0x36;
    outer[i] = block[i] ^ 0x5c;
  }
  inner.set(data, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}
