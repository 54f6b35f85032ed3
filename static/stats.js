// Per-answer latency numbers from the arrival times the page recorded (ms since Send).

const SLOW_GAP_MIN_MS = 400; // a gap shorter than this is never marked, however even the rest
const SLOW_GAP_FACTOR = 5; // ...and one this many times the median gap is
const BUCKETS_PER_OCTAVE = 4; // the median's resolution: buckets about 19% wide

function bucketOf(ms) {
  return ms < 1 ? 0 : 1 + Math.floor(Math.log2(ms) * BUCKETS_PER_OCTAVE);
}

function bucketMiddle(bucket) {
  return bucket === 0 ? 0 : 2 ** ((bucket - 0.5) / BUCKETS_PER_OCTAVE);
}

/** Arrival times fed one at a time, each in O(1): the longest gap, and the slow ones. The median
 * gap that says what "slow" is comes from a histogram of gaps, not from sorting them all. */
export class ArrivalStats {
  constructor({ minimumMs = SLOW_GAP_MIN_MS, factor = SLOW_GAP_FACTOR } = {}) {
    this.minimumMs = minimumMs;
    this.factor = factor;
    this.count = 0;
    this.lastMs = null;
    this.longestGapMs = null; // null until there are two arrivals
    this.gapsByBucket = []; // how many gaps fell in each bucket
    this.slowByBucket = []; // the gaps of at least minimumMs, as [from, to], by bucket
  }

  /** Times (ms since Send) fed in order of arrival. */
  static of(times) {
    const stats = new ArrivalStats();
    for (const ms of times) stats.add(ms);
    return stats;
  }

  add(ms) {
    this.count += 1;
    if (this.lastMs !== null) {
      const gap = ms - this.lastMs;
      this.longestGapMs = Math.max(this.longestGapMs ?? 0, gap);
      const bucket = bucketOf(gap);
      this.gapsByBucket[bucket] = (this.gapsByBucket[bucket] ?? 0) + 1;
      if (gap >= this.minimumMs) (this.slowByBucket[bucket] ??= []).push([this.lastMs, ms]);
    }
    this.lastMs = ms;
  }

  /** The gaps much longer than the usual one, where buffering or a stall shows, in order. */
  slowGaps() {
    if (this.count < 3) return [];
    const threshold = Math.max(this.minimumMs, this.#medianGapMs() * this.factor);
    const slow = [];
    for (let bucket = bucketOf(threshold); bucket < this.slowByBucket.length; bucket += 1) {
      for (const gap of this.slowByBucket[bucket] ?? []) {
        if (gap[1] - gap[0] >= threshold) slow.push(gap);
      }
    }
    return slow.sort((a, b) => a[0] - b[0]);
  }

  #medianGapMs() {
    const middle = Math.floor((this.count - 1) / 2); // as sorted(gaps)[floor(length / 2)]
    let seen = 0;
    for (let bucket = 0; bucket < this.gapsByBucket.length; bucket += 1) {
      seen += this.gapsByBucket[bucket] ?? 0;
      if (seen > middle) return bucketMiddle(bucket);
    }
    return 0;
  }
}

/** TTFT, decode speed (vLLM's TPOT inverted) and the longest gap between two arrivals. */
export function answerStats(meta, arrivals = ArrivalStats.of(meta.times ?? [])) {
  const stats = {
    ttftMs: meta.ttftMs ?? null, tokens: meta.tokens ?? 0, tokensPerS: null, longestGapMs: arrivals.longestGapMs,
  };
  if (stats.tokens >= 2 && meta.lastMs > meta.ttftMs) {
    stats.tokensPerS = (stats.tokens - 1) / ((meta.lastMs - meta.ttftMs) / 1000);
  }
  return stats;
}

/** Gaps much longer than the usual one in `times` (all at once: ArrivalStats does it as they come). */
export function slowGaps(times, options = {}) {
  const stats = new ArrivalStats(options);
  for (const ms of times) stats.add(ms);
  return stats.slowGaps();
}
