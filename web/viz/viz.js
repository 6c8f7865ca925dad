// nanoinfer viz: shows one recorded generation run (a "trace") in three views: the candidates
// of each step under adjustable sampling settings, the attention of each step's query over
// the context, and cached decoding raced against full recomputation. Plain JS, no network.
//
// The trace is JSON in the script element with id "trace", written there by
// src/cli/viz_page.cpp (which also inlines this file and viz.css). Format (docs/VIZ.md):
//
//   {
//     "format": "nanoinfer-viz-trace", "version": 1,
//     "settings": { "model": str, "prompt": str, "n": int, "temperature": num, "top_k": int,
//                   "top_p": num, "min_p": num, "repetition_penalty": num, "seed": str },
//     "model":    { "n_layers": int, "n_heads": int, "n_kv_heads": int, "vocab_size": int },
//     "prompt":   [ { "id": int, "piece": str }, ... ],               // P prompt tokens
//     "steps": [                                                     // one per generated token
//       { "chosen": { "id": int, "piece": str },
//         "top": [ { "id": int, "piece": str, "logit": num }, ... ], // <= 40, raw logits
//                                                  // (before penalty and temperature), descending
//         "rest_mass": num,          // softmax mass (T = 1) of the tokens not in "top"
//         "attention": [[[num]]] }   // [n_layers][n_heads][P + i]: step i's query (the
//     ],                             // position whose logits chose token i) over positions
//                                    // 0 .. P+i-1; each row sums to 1 (4 significant digits)
//     "race": { "cached":   { "tokens": [int], "steps": [ { "positions": int, "seconds": num } ] },
//               "uncached": { "tokens": [int], "steps": [ ... ] } }  // one entry per step
//   }
'use strict';

const FORMAT = 'nanoinfer-viz-trace';
const VERSION = 1;

// ---- small DOM helpers -------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') node.className = v;
    else if (k === 'style') node.style.cssText = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k in node) node[k] = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

const byId = (id) => document.getElementById(id);

// Whitespace made visible: a token's leading space or newline is often the whole point.
function visible(piece) {
  return piece.replace(/ /g, '\u00b7').replace(/\n/g, '\u21b5').replace(/\t/g, '\u21e5') || '\u2205';
}

const sig = (x, digits = 4) => Number(x).toPrecision(digits);
const percent = (p) => (100 * p).toFixed(2) + '%';
const ms = (seconds) => (1000 * seconds).toFixed(2) + ' ms';

// ---- the trace ---------------------------------------------------------------------------

// A trace that is missing or not one this page reads: shown to the reader, not a page bug.
class TraceError extends Error {}

function loadTrace() {
  const text = byId('trace').textContent.trim();
  if (!text.startsWith('{')) {
    throw new TraceError('No trace in this page. Pages with data are written by `nanoinfer viz --out FILE.html`.');
  }
  const trace = JSON.parse(text);
  if (trace.format !== FORMAT || trace.version !== VERSION) {
    throw new TraceError(`Unsupported trace: format "${trace.format}" version ${trace.version}, ` +
                    `this page reads "${FORMAT}" version ${VERSION}.`);
  }
  if (!trace.steps.length) throw new TraceError('The trace has no generated steps.');
  return trace;
}

// ---- sampling chain over the recorded candidates -----------------------------------------
// The engine's order (src/generate/sampler.cpp): repetition penalty -> temperature -> top-k ->
// top-p -> min-p, then renormalise. Here the universe is the recorded candidates only: the rest
// of the vocabulary (trace "rest_mass") is left out, as top-k <= 40 would leave it out anyway.

function softmax(scores, alive) {
  let max = -Infinity;
  for (const i of alive) max = Math.max(max, scores[i]);
  const probs = new Map();
  let sum = 0;
  for (const i of alive) {
    const e = Math.exp(scores[i] - max);
    probs.set(i, e);
    sum += e;
  }
  for (const i of alive) probs.set(i, probs.get(i) / sum);
  return probs;
}

// Returns { prob[i], before[i], cut[i], penalised[i] }: the final probability of candidate i,
// its probability after penalty and temperature but before any cut, the name of the step that
// cut it (or null), and whether the repetition penalty changed its logit.
function sampleChain(top, history, s) {
  const n = top.length;
  const seen = new Set(history);
  const penalised = top.map((c) => s.penalty !== 1 && seen.has(c.id));
  const logits = top.map((c, i) => {
    if (!penalised[i]) return c.logit;
    return c.logit < 0 ? c.logit * s.penalty : c.logit / s.penalty;
  });
  const all = [...Array(n).keys()];
  const cut = new Array(n).fill(null);
  const prob = new Array(n).fill(0);

  if (s.temperature === 0) {  // greedy: the first maximum (lowest id on ties), nothing else
    let best = 0;
    for (const i of all) {
      const better = logits[i] > logits[best] || (logits[i] === logits[best] && top[i].id < top[best].id);
      if (better) best = i;
    }
    for (const i of all) if (i !== best) cut[i] = 'greedy';
    prob[best] = 1;
    const before = all.map((i) => (i === best ? 1 : 0));
    return { prob, before, cut, penalised };
  }

  const scores = logits.map((x) => x / s.temperature);
  const beforeMap = softmax(scores, all);
  let alive = all;
  if (s.top_k > 0 && s.top_k < n) {  // keep every score >= the k-th largest (ties kept)
    const kth = [...scores].sort((a, b) => b - a)[s.top_k - 1];
    for (const i of alive) if (scores[i] < kth) cut[i] = 'top-k';
    alive = alive.filter((i) => !cut[i]);
  }
  if (s.top_p < 1) {  // drop the ascending prefix whose cumulative mass stays <= 1 - p
    const asc = [...alive].sort((a, b) => scores[a] - scores[b] || top[a].id - top[b].id);
    const p = softmax(scores, asc);
    let cumulative = 0;
    for (let j = 0; j + 1 < asc.length; ++j) {
      cumulative += p.get(asc[j]);
      if (!(cumulative <= 1 - s.top_p)) break;
      cut[asc[j]] = 'top-p';
    }
    alive = alive.filter((i) => !cut[i]);
  }
  if (s.min_p > 0) {  // drop what is less likely than min_p x the most likely survivor
    const p = softmax(scores, alive);
    const threshold = s.min_p * Math.max(...p.values());
    for (const i of alive) if (p.get(i) < threshold) cut[i] = 'min-p';
    alive = alive.filter((i) => !cut[i]);
  }
  for (const [i, p] of softmax(scores, alive)) prob[i] = p;
  return { prob, before: all.map((i) => beforeMap.get(i)), cut, penalised };
}

// ---- the page ----------------------------------------------------------------------------

const SLIDERS = [
  // key, label, min, max, step, settings field
  ['temperature', 'temperature', 0, 2, 0.05, 'temperature'],
  ['top_k', 'top-k', 0, null, 1, 'top_k'],  // max = the number of recorded candidates
  ['top_p', 'top-p', 0.01, 1, 0.01, 'top_p'],
  ['min_p', 'min-p', 0, 1, 0.01, 'min_p'],
  ['penalty', 'repetition penalty', 1, 2, 0.01, 'repetition_penalty'],
];

class Viz {
  constructor(trace) {
    this.trace = trace;
    this.step = 0;
    this.layer = 0;
    this.head = 0;
    this.maxCandidates = Math.max(...trace.steps.map((s) => s.top.length));
    this.sampling = this.runSettings();
  }

  // The run's own settings, clamped into the sliders' ranges (a top-k above the number of
  // recorded candidates cuts none of them, exactly like top-k = that number).
  runSettings() {
    const out = {};
    for (const [key, , min, max, , field] of SLIDERS) {
      const hi = max ?? this.maxCandidates;
      out[key] = Math.min(hi, Math.max(min, Number(this.trace.settings[field])));
    }
    return out;
  }

  // Context position j's token: prompt first, then the generated tokens.
  contextToken(j) {
    const P = this.trace.prompt.length;
    return j < P ? this.trace.prompt[j] : this.trace.steps[j - P].chosen;
  }

  render() {
    this.renderRun();
    this.renderSteps();
    this.renderSliders();
    this.renderCandidates();
    this.renderAttentionControls();
    this.renderAttention();
    this.renderRace();
  }

  renderRun() {
    const { settings, model, prompt, steps } = this.trace;
    byId('subtitle').textContent = `${settings.model}: ${steps.length} tokens generated from a ${prompt.length}-token prompt`;
    const rows = [
      ['model', settings.model],
      ['layers x heads', `${model.n_layers} x ${model.n_heads} (${model.n_kv_heads} KV heads)`],
      ['vocabulary', model.vocab_size],
      ['prompt', JSON.stringify(settings.prompt)],
      ['n', settings.n], ['temperature', settings.temperature], ['top-k', settings.top_k],
      ['top-p', settings.top_p], ['min-p', settings.min_p],
      ['repetition penalty', settings.repetition_penalty], ['seed', settings.seed],
    ];
    byId('settings').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
    byId('prompt-tokens').replaceChildren(...prompt.map((t, j) => tokenChip(t, `position ${j}`)));
    byId('generated').textContent = steps.map((s) => s.chosen.piece).join('');
  }

  // The generated tokens as buttons; the selected one drives the candidates view.
  renderSteps() {
    byId('steps').replaceChildren(...this.trace.steps.map((s, i) => {
      const chip = tokenChip(s.chosen, `step ${i}`);
      chip.classList.toggle('selected', i === this.step);
      return el('button', { class: 'step', title: `step ${i}`, onclick: () => this.select(i) }, chip);
    }));
  }

  select(step) {
    this.step = step;
    this.renderSteps();
    this.renderCandidates();
    this.renderAttention();
  }

  renderSliders() {
    const rows = SLIDERS.map(([key, label, min, max, step]) => {
      const output = el('output', { id: `${key}-value` });
      const input = el('input', {
        type: 'range', id: key, min, max: max ?? this.maxCandidates, step, value: this.sampling[key],
        oninput: () => { this.sampling[key] = Number(input.value); show(); this.renderCandidates(); },
      });
      const show = () => {
        const v = this.sampling[key];
        output.textContent = key === 'top_k' && v === 0 ? 'off' : String(v);
      };
      show();
      return el('label', { class: 'slider' }, el('span', {}, label), input, output);
    });
    const reset = el('button', {
      id: 'reset', onclick: () => { this.sampling = this.runSettings(); this.renderSliders(); this.renderCandidates(); },
    }, "run's settings");
    byId('sliders').replaceChildren(...rows, reset);
  }

  renderCandidates() {
    const step = this.trace.steps[this.step];
    const history = [...this.trace.prompt, ...this.trace.steps.slice(0, this.step).map((s) => s.chosen)].map((t) => t.id);
    const { prob, before, cut, penalised } = sampleChain(step.top, history, this.sampling);
    const chosenRank = step.top.findIndex((c) => c.id === step.chosen.id);
    byId('candidates-caption').textContent =
      `Step ${this.step}: chose ${JSON.stringify(step.chosen.piece)} (id ${step.chosen.id}` +
      (chosenRank < 0 ? ', not among the recorded candidates)' : `, rank ${chosenRank + 1})`) +
      `. ${step.top.length} candidates by raw logit; the rest of the vocabulary held ` +
      `${percent(step.rest_mass)} of the mass at T = 1 and is left out.`;
    const rows = step.top.map((c, i) => {
      const chosen = c.id === step.chosen.id;
      const bar = el('div', { class: 'bar' },
        el('div', { class: 'before', style: `width:${100 * before[i]}%` }),
        el('div', { class: 'after', style: `width:${100 * prob[i]}%` }));
      return el('tr', { class: `cand${cut[i] ? ' cut' : ''}${chosen ? ' chosen' : ''}`, 'data-id': c.id },
        el('td', { class: 'rank' }, String(i + 1)),
        el('td', { class: 'piece' }, visible(c.piece), chosen ? el('span', { class: 'mark', title: 'the token the run chose' }, ' \u2605') : ''),
        el('td', { class: 'num' }, String(c.id)),
        el('td', { class: 'num' }, sig(c.logit)),
        el('td', { class: 'num prob' }, percent(prob[i])),
        el('td', { class: 'barcell' }, bar),
        el('td', { class: 'reason' }, penalised[i] ? el('span', { class: 'penalised' }, 'penalised ') : '',
          cut[i] ? `cut by ${cut[i]}` : ''));
    });
    byId('candidate-rows').replaceChildren(...rows);
  }

  renderAttentionControls() {
    const { n_layers, n_heads } = this.trace.model;
    const options = (n, name) => [...Array(n).keys()].map((i) => el('option', { value: i }, `${name} ${i}`));
    const layer = byId('layer'), head = byId('head');
    layer.replaceChildren(...options(n_layers, 'layer'));
    head.replaceChildren(...options(n_heads, 'head'));
    layer.onchange = () => { this.layer = Number(layer.value); this.renderAttention(); };
    head.onchange = () => { this.head = Number(head.value); this.renderAttention(); };
  }

  // Rows = generated steps, columns = context positions (prompt, then generated tokens). Step
  // i's query sees positions 0 .. P+i-1; later cells are empty. Colour is sqrt(weight), so
  // small weights stay visible beside the first-position sink.
  renderAttention() {
    const { prompt, steps } = this.trace;
    const cols = prompt.length + steps.length - 1;
    const grid = byId('heat');
    grid.style.gridTemplateColumns = `max-content repeat(${cols}, minmax(14px, 1fr))`;
    const cells = [el('div', { class: 'corner' }, 'step \\ position')];
    for (let j = 0; j < cols; ++j) {
      const t = this.contextToken(j);
      cells.push(el('div', { class: `colhead${j < prompt.length ? ' prompt' : ''}`, title: `position ${j}: id ${t.id}` }, visible(t.piece)));
    }
    steps.forEach((s, i) => {
      const row = s.attention[this.layer][this.head];
      cells.push(el('div', { class: `rowhead${i === this.step ? ' selected' : ''}`, title: `step ${i}`, onclick: () => this.select(i) },
        `${i} ${visible(s.chosen.piece)}`));
      for (let j = 0; j < cols; ++j) {
        if (j >= row.length) {
          cells.push(el('div', { class: 'cell future' }));
          continue;
        }
        const w = row[j];
        const shade = Math.sqrt(Math.max(0, Math.min(1, w)));
        cells.push(el('div', {
          class: 'cell', 'data-w': w, style: `background:rgba(28,78,160,${shade.toFixed(3)})`,
          title: `step ${i} ${JSON.stringify(s.chosen.piece)} -> position ${j} ${JSON.stringify(this.contextToken(j).piece)}: ${w}`,
        }));
      }
    });
    grid.replaceChildren(...cells);
    const sink = steps.map((s) => s.attention[this.layer][this.head][0]);
    byId('attention-caption').textContent =
      `Layer ${this.layer}, head ${this.head}: position 0 takes ${percent(Math.min(...sink))} to ` +
      `${percent(Math.max(...sink))} of each step's attention.`;
  }

  renderRace() {
    const { cached, uncached } = this.trace.race;
    const maxPos = Math.max(...uncached.steps.map((s) => s.positions), ...cached.steps.map((s) => s.positions));
    const maxSec = Math.max(...uncached.steps.map((s) => s.seconds), ...cached.steps.map((s) => s.seconds));
    const bar = (v, max, kind) => el('div', { class: `racebar ${kind}`, style: `width:${(100 * v) / max}%` });
    const rows = cached.steps.map((c, i) => {
      const u = uncached.steps[i];
      const piece = this.trace.steps[i] ? visible(this.trace.steps[i].chosen.piece) : '';
      return el('tr', {},
        el('td', { class: 'num' }, String(i)), el('td', { class: 'piece' }, piece),
        el('td', { class: 'num' }, String(c.positions)), el('td', { class: 'num' }, String(u.positions)),
        el('td', { class: 'barcell' }, bar(c.positions, maxPos, 'cached'), bar(u.positions, maxPos, 'uncached')),
        el('td', { class: 'num' }, ms(c.seconds)), el('td', { class: 'num' }, ms(u.seconds)),
        el('td', { class: 'barcell' }, bar(c.seconds, maxSec, 'cached'), bar(u.seconds, maxSec, 'uncached')));
    });
    const total = (run, f) => run.steps.reduce((a, s) => a + s[f], 0);
    rows.push(el('tr', { class: 'total' },
      el('td', {}, 'total'), el('td'),
      el('td', { class: 'num' }, String(total(cached, 'positions'))), el('td', { class: 'num' }, String(total(uncached, 'positions'))),
      el('td'),
      el('td', { class: 'num' }, ms(total(cached, 'seconds'))), el('td', { class: 'num' }, ms(total(uncached, 'seconds'))),
      el('td')));
    byId('race-rows').replaceChildren(...rows);

    const same = cached.tokens.length === uncached.tokens.length && cached.tokens.every((t, i) => t === uncached.tokens[i]);
    const verdict = byId('race-verdict');
    verdict.className = same ? 'good' : 'bad';
    const speedup = total(uncached, 'seconds') / total(cached, 'seconds');
    verdict.textContent = same
      ? `Both runs end with the same ${cached.tokens.length} tokens. Recomputation pushed ` +
        `${total(uncached, 'positions')} positions to the cache's ${total(cached, 'positions')} ` +
        `and took ${speedup.toFixed(2)}x the time.`
      : `The runs differ: cached [${cached.tokens}] vs uncached [${uncached.tokens}].`;
  }
}

function tokenChip(token, title) {
  return el('span', { class: 'token', title: `${title}: id ${token.id}` },
    el('span', { class: 'piece' }, visible(token.piece)), el('span', { class: 'id' }, String(token.id)));
}

// One view at a time on the right: the tab's panel is shown, the others hidden.
function setupTabs() {
  const tabs = [...document.querySelectorAll('#tabs [role="tab"]')];
  const show = (chosen) => {
    for (const tab of tabs) {
      const on = tab === chosen;
      tab.setAttribute('aria-selected', String(on));
      byId(tab.dataset.view).hidden = !on;
    }
  };
  for (const tab of tabs) tab.addEventListener('click', () => show(tab));
}

function main() {
  setupTabs();
  try {
    new Viz(loadTrace()).render();
  } catch (e) {
    const box = byId('error');
    box.textContent = e.message;
    box.hidden = false;
    byId('views').hidden = true;
    if (!(e instanceof TraceError) && !(e instanceof SyntaxError)) throw e;  // a bug: let it reach the console
  }
}

main();
