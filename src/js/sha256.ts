// SHA-256 (FIPS 180-4) in plain JavaScript: the fingerprint's fallback where `crypto.subtle` is
// missing (it exists only in secure contexts, so a page on plain http has none). Small on purpose
// (a few hundred bytes gzip); checked against crypto.subtle and the FIPS vectors in
// tests/js/fingerprint.test.mjs.

// The round constants (cube roots) and the initial hash (square roots) of the first primes: the
// first 32 bits of their fractional parts (FIPS 180-4, 4.2.2 and 5.3.3), computed rather than listed.
const K = new Uint32Array(64);
const H0 = new Uint32Array(8);
for (let n = 2, found = 0; found < 64; n++) {
  let prime = true;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) prime = false;
  if (!prime) continue;
  if (found < 8) H0[found] = (n ** (1 / 2) % 1) * 2 ** 32;
  K[found++] = (n ** (1 / 3) % 1) * 2 ** 32;
}

/** Lowercase hex of `bytes` (64 characters for a digest). */
export const hex = (bytes: Uint8Array): string => Array.from(bytes, (byte) => (byte < 16 ? "0" : "") + byte.toString(16)).join("");

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/** The SHA-256 digest of `data` (32 bytes). */
export function sha256(data: Uint8Array): Uint8Array {
  const length = data.length;
  // The message as big-endian words + a 1 bit + zero padding + the 64-bit bit length, in 16-word
  // blocks (a Uint32Array store truncates: the high word is floor(length / 2^29), the low one
  // length * 8 mod 2^32).
  const words = new Uint32Array(((length + 72) >> 6) << 4);
  for (let i = 0; i < length; i++) words[i >> 2] |= data[i] << (24 - (i & 3) * 8);
  words[length >> 2] |= 0x80 << (24 - (length & 3) * 8);
  words[words.length - 2] = length / 0x20000000;
  words[words.length - 1] = length << 3;
  const h = H0.slice();
  const w = new Uint32Array(64);
  for (let offset = 0; offset < words.length; offset += 16) {
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      if (i < 16) w[i] = words[offset + i];
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
