// A 95 % interval for the ratio of two medians measured in the same rounds (a bench that runs every
// variant once per round, so round i of one variant and round i of another shared the machine's
// load): a percentile bootstrap over the rounds. Each resample draws n rounds with replacement and
// keeps both variants' samples of a drawn round together, so the pairing (the load they shared) is
// in every resample; the interval is the 2.5th and 97.5th percentiles of the resampled ratios. The
// random draws come from a fixed seed: the same samples give the same interval.
//
//   medianRatioInterval(xs, ys)  -> { ratio, low, high } for median(xs) / median(ys), xs[i] and ys[i]
//                                   from round i
//   BOOTSTRAP_METHOD              the method in one line, for the bench's output

/** How many resamples: the percentiles of 2,000 move by well under 0.01× between seeds here. */
export const RESAMPLES = 2000;
export const BOOTSTRAP_METHOD =
  `95 % intervals: percentile bootstrap over paired rounds (${RESAMPLES.toLocaleString("en")} resamples of the rounds ` +
  "with replacement, each round's two samples kept together; fixed seed)";

/** The lower median (the benches' `quantile(xs, 0.5)`), reordering `xs` in place (Hoare's selection:
 *  linear, where a sort per resample would make the bootstrap a second per ratio). */
function lowerMedian(xs) {
  const k = Math.ceil(xs.length / 2) - 1;
  let [lo, hi] = [0, xs.length - 1];
  while (lo < hi) {
    const pivot = xs[(lo + hi) >> 1];
    let [i, j] = [lo, hi];
    while (i <= j) {
      while (xs[i] < pivot) i++;
      while (xs[j] > pivot) j--;
      if (i <= j) {
        [xs[i], xs[j]] = [xs[j], xs[i]];
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  return xs[k];
}

/** mulberry32: a small seeded generator, uniform in [0, 1). */
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** median(xs) / median(ys) and its 95 % paired bootstrap interval; xs[i] and ys[i] are round i's. */
export function medianRatioInterval(xs, ys, { resamples = RESAMPLES, seed = 1 } = {}) {
  const n = Math.min(xs.length, ys.length);
  if (n === 0) throw new Error("medianRatioInterval: no rounds");
  const ratio = lowerMedian(Float64Array.from(xs.slice(0, n))) / lowerMedian(Float64Array.from(ys.slice(0, n)));
  const random = seeded(seed);
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  const ratios = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) {
      const round = Math.floor(random() * n);
      x[i] = xs[round];
      y[i] = ys[round];
    }
    ratios[r] = lowerMedian(x) / lowerMedian(y);
  }
  ratios.sort();
  const at = (q) => ratios[Math.min(resamples - 1, Math.max(0, Math.ceil(q * resamples) - 1))];
  return { ratio, low: at(0.025), high: at(0.975) };
}
