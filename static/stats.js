// Per-answer latency numbers from the arrival times the page recorded (ms since Send).

/** TTFT, decode speed (vLLM's TPOT inverted) and the longest gap between two arrivals. */
export function answerStats(meta) {
  const times = meta.times ?? [];
  const stats = { ttftMs: meta.ttftMs ?? null, tokens: meta.tokens ?? 0, tokensPerS: null, longestGapMs: null };
  if (stats.tokens >= 2 && meta.lastMs > meta.ttftMs) {
    stats.tokensPerS = (stats.tokens - 1) / ((meta.lastMs - meta.ttftMs) / 1000);
  }
  let longest = 0;
  for (let i = 1; i < times.length; i += 1) longest = Math.max(longest, times[i] - times[i - 1]);
  if (times.length >= 2) stats.longestGapMs = longest;
  return stats;
}

/** Gaps much longer than the usual one: where buffering or a stall shows. */
export function slowGaps(times, { minimumMs = 400, factor = 5 } = {}) {
  if (times.length < 3) return [];
  const gaps = [];
  for (let i = 1; i < times.length; i += 1) gaps.push(times[i] - times[i - 1]);
  const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)];
  const threshold = Math.max(minimumMs, median * factor);
  const slow = [];
  gaps.forEach((gap, i) => {
    if (gap >= threshold) slow.push([times[i], times[i + 1]]);
  });
  return slow;
}
