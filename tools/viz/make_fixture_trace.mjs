// Writes tests/data/viz/trace.json: a small hand-shaped trace in the format of docs/VIZ.md,
// for the page's tests while no `nanoinfer viz` produces real ones. Deterministic (a seeded
// PRNG, no clock), so rerunning it reproduces the committed file byte for byte:
//
//   node tools/viz/make_fixture_trace.mjs > tests/data/viz/trace.json
//
// Shape: 6 prompt tokens, 6 generated steps, 2 layers x 2 heads, 12 candidates per step with
// distinct logits (so a top-k cut keeps exactly k). Attention rows are softmaxes with a strong
// first-position "sink" in layer 1, rounded to 4 significant digits like a real trace.

// mulberry32: a tiny seeded PRNG, enough for shaping test data.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(20240611);
const sig4 = (x) => Number(x.toPrecision(4));

const vocab = [
  'RO', 'MEO', ':', '\n', 'What', ' light', ' through', ' yonder', ' window', ' breaks', '?',
  ' soft', ' is', ' the', ' sun', ',', ' and', ' Juliet', ' east', ' it', ' my', ' love',
  ' O', ' fair', ' that', '!', '.', ' thou', ' art', ' moon', ' she', ' doth',
];
const idOf = (piece) => 40 + 7 * vocab.indexOf(piece);  // spread-out ids, all < vocab_size
const token = (piece) => ({ id: idOf(piece), piece });

const promptPieces = ['RO', 'MEO', ':', '\n', 'What', ' light'];
// The generated tokens and, for each, the rank (0 = highest logit) it had among the candidates:
// steps 2 and 5 were drawn from below the top, as sampling at temperature 0.8 may do.
const generated = [[' through', 0], [' yonder', 0], [' window', 1], [' breaks', 0], ['?', 0], [' O', 2]];

const nLayers = 2, nHeads = 2, nCandidates = 12;

function candidates(chosen, rank) {
  const others = vocab.filter((p) => p !== chosen);
  for (let i = others.length - 1; i > 0; --i) {  // Fisher-Yates with the seeded PRNG
    const j = Math.floor(random() * (i + 1));
    [others[i], others[j]] = [others[j], others[i]];
  }
  const pieces = others.slice(0, nCandidates - 1);
  pieces.splice(rank, 0, chosen);
  // Strictly decreasing logits: a leader, then gaps of 0.3 to 1.3; down to a chosen token
  // below the top, gaps of 0.1 to 0.3, so that it survives the run's own cuts as it must have.
  let logit = 14 + 4 * random();
  return pieces.map((piece, r) => {
    const c = { ...token(piece), logit: sig4(logit) };
    logit -= r < rank ? 0.1 + 0.2 * random() : 0.3 + random();
    return c;
  });
}

// One attention row over `len` positions: softmax of scores favouring recent positions; in
// layer 1 position 0 is a "sink" that takes most of the weight at any distance.
function attentionRow(layer, head, len) {
  const scores = [];
  for (let j = 0; j < len; ++j) {
    const recency = (head === 0 ? 0.6 : 0.25) * (j - (len - 1));
    scores.push(j === 0 && layer === 1 ? 2.2 : recency + 0.8 * random());
  }
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => sig4(e / sum));
}

const P = promptPieces.length;
const steps = generated.map(([piece, rank], i) => {
  const top = candidates(piece, rank);
  const attention = [];
  for (let l = 0; l < nLayers; ++l) {
    const heads = [];
    for (let h = 0; h < nHeads; ++h) heads.push(attentionRow(l, h, P + i));
    attention.push(heads);
  }
  return { chosen: token(piece), rest_mass: sig4(0.002 + 0.01 * random()), top, attention };
});

// Cached decoding pushes the prompt once, then one position per step; recomputation pushes the
// whole context every step. Times grow with positions pushed, plus noise.
const cached = [], uncached = [];
for (let i = 0; i < generated.length; ++i) {
  const ctx = P + i;
  cached.push({ positions: i === 0 ? P : 1, seconds: sig4((i === 0 ? 0.0031 : 0.0012) + 0.0002 * random()) });
  uncached.push({ positions: ctx, seconds: sig4(0.0009 + 0.00042 * ctx + 0.0002 * random()) });
}
const tokens = generated.map(([piece]) => idOf(piece));

const trace = {
  format: 'nanoinfer-viz-trace',
  version: 1,
  settings: {
    model: 'fixture (hand-made: 2 layers, 2 heads)',
    prompt: promptPieces.join(''),
    n: generated.length,
    temperature: 0.8,
    top_k: 8,
    top_p: 0.9,
    min_p: 0.05,
    repetition_penalty: 1.1,
    seed: 7,
  },
  model: { n_layers: nLayers, n_heads: nHeads, n_kv_heads: 1, vocab_size: 512 },
  prompt: promptPieces.map(token),
  steps,
  race: { cached: { tokens, steps: cached }, uncached: { tokens, steps: uncached } },
};
process.stdout.write(JSON.stringify(trace) + '\n');
