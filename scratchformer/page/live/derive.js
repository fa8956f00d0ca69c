// scratchformer's live derivations, part 3 of 3: what the page calls once the live engine (engine.js,
// run.js) has traced a sentence the reader typed. Parts 1 (derive_kit.js) and 2
// (derive_rules.js) come first.
//
//   const arrays = await sfLiveDerive.unpackWeights(liveModel);   // {name: Float32Array}, as sfLive.fromArrays takes
//   const ctx = sfLiveDerive.context(liveModel, deriveContext, arrays); // deriveContext: derive.derive_context
//   const run = engine.trace("the girl eats an apple", null);
//   sfLiveDerive.derive(run, stepIndex, head, row, col, ctx, vocabIds) // the clicked cell, as derivations.compact
//   sfLiveDerive.lens(run, 0, ctx)                                 // the logit lens, as data._lens writes an item
// Bad input never throws: every call answers {error: "one sentence"} instead.
"use strict";
(() => {
  const K = window.sfDeriveKit, RULES = window.sfDeriveRules;
  if (!K || !RULES) return; // parts 1 and 2 missing: no sfLiveDerive, and the page offers the command instead
  const fail = (error) => ({error});
  const message = (e) => (e && e.message ? e.message : String(e));

  // ---- the context: the model's weights and tokenizers, and Python's plan of every step -------------------------
  async function unpackWeights(liveModel) { // live_model's weights, unpacked as the engine unpacks them
    const model = typeof liveModel === "string" ? JSON.parse(liveModel) : liveModel, arrays = {};
    await Promise.all(Object.entries(model.weights).map(async ([name, w]) => {
      arrays[name] = await window.sfLive.unpack(w.data, w.dtype);
    }));
    return arrays;
  }
  // a tokenizer as the rules read it: vocabulary pieces by id (convert_ids_to_tokens: GPT-2's "Ġworld"), their
  // labels (token_strings: " world"), and a piece's id as the tokenizer's token_to_id finds it (an added token
  // before a word of the same text)
  function tokenizer(spec) {
    const {tokens, labels} = window.sfLive.vocabulary(spec), byPiece = new Map();
    tokens.forEach((t, i) => { if (!byPiece.has(t)) byPiece.set(t, i); });
    for (const [text, id] of spec.added) byPiece.set(text, id);
    return {tokens, labels, byPiece};
  }
  // liveModel: page/live/model.py's live_model(bundle); deriveContext: page/live/derive.py's derive_context(bundle);
  // arrays: {parameter name: Float32Array} (unpackWeights, or the very arrays given to sfLive.fromArrays)
  function context(liveModel, deriveContext, arrays) {
    try {
      const model = typeof liveModel === "string" ? JSON.parse(liveModel) : liveModel;
      const plan = typeof deriveContext === "string" ? JSON.parse(deriveContext) : deriveContext;
      const tied = model.tied || {}, specs = window.sfLive.tokenizers(model), src = tokenizer(specs.src);
      const toks = {src, tgt: specs.tgt === specs.src ? src : tokenizer(specs.tgt)};
      const param = (name) => { // {shape, data} of a parameter under any of its names (a tied one too)
        const own = tied[name] || name, w = model.weights[own];
        return w && arrays[own] ? {shape: w.shape, data: arrays[own]} : null;
      };
      return {config: model.config, plans: plan.steps, lensPlan: plan.lens, omega: plan.omega || [], param,
        tokenizer: (side) => toks[side]};
    } catch (e) {
      return fail(`The page could not read what derives its cells: ${message(e)}.`);
    }
  }
  // what a rule reads of this run beyond its steps: its tokens and where it was padding
  function forRun(ctx, run) {
    const pad = ctx.config.pad_id, has = pad !== null && pad !== undefined;
    const pads = {src: has ? run.source_ids.map((id) => id === pad) : null, // masks.pad_from_ids
      tgt: has ? run.target_ids.map((id, j) => id === pad && j > 0) : null}; // the start position never is
    return Object.assign(Object.create(ctx), {run, pads: (side) => pads[side]});
  }

  // ---- a clicked cell ---------------------------------------------------------------------------------------
  // result.Derivation.agrees: the recomputed value equals the run's, relative to the size of the terms
  function agrees(value, recomputed, terms, rtol = 1e-5) {
    if (Math.abs(value) === Infinity || Math.abs(recomputed) === Infinity) return value === recomputed;
    const sizes = terms.map((t) => t[1]).filter(Number.isFinite).map(Math.abs);
    const scale = Math.max(Math.abs(value), ...sizes, 1e-30);
    return Math.abs(value - recomputed) <= rtol * scale + 1e-7;
  }
  // reader.check_index, in the same sentences
  function badIndex(step, index) {
    const i = index.findIndex((k, a) => !(Number.isInteger(k) && k >= 0 && k < step.shape[a]));
    if (i < 0) return null;
    return `Index ${index[i]} is out of range for axis ${i + 1} of ${step.name} (${step.dims[i]}), which runs from 0 `
      + `to ${step.shape[i] - 1}.`;
  }
  // derivations.compact of analyses.derive.compute for the cell (row, col) of the map of head `head` of step
  // `stepIndex` (batch item 0, a live run's only one); vocabIds: the map's vocabulary columns (maps' vocab_ids)
  function derive(run, stepIndex, head, row, col, ctx, vocabIds) {
    try {
      if (!run || run.error || !Array.isArray(run.steps)) return fail("There is no live run to derive a cell of.");
      if (!ctx || ctx.error) return fail(ctx && ctx.error ? ctx.error : "The page has nothing to derive cells with.");
      const step = run.steps[stepIndex], plan = ctx.plans[stepIndex];
      if (!step || !plan) return fail(`This run has no step ${JSON.stringify(stepIndex)}.`);
      if (plan.name !== step.name) return fail(`Step ${stepIndex} of this run is ${step.name}, not ${plan.name}.`);
      if (!plan.rule) return fail(`The page cannot derive a cell of ${step.name}.`);
      const index = K.cellIndex(step.dims, 0, head, row, col, vocabIds), bad = badIndex(step, index);
      if (bad) return fail(bad);
      const r = K.reader(run, ctx.param), value = r.value(stepIndex, index);
      const made = RULES[plan.rule](r, plan, index, value, forRun(ctx, run));
      const terms = plan.labels ? plan.labels.map((label, k) => [label, made.terms[k]]) : made.terms;
      const read = r.inputs(), text = K.finiteOrText;
      return {v: text(value), r: text(made.recomputed), ok: agrees(value, made.recomputed, terms),
        f: made.formula ?? plan.formula, e: made.expression, n: made.note ?? plan.note ?? "",
        t: terms.map(([label, v]) => [label, text(v)]), in: read.steps, p: read.params, u: read.unlisted};
    } catch (e) {
      return fail(`The page could not derive this cell: ${message(e)}.`);
    }
  }

  // ---- the logit lens (analyses.lens): each point of the residual stream read through the output layer ----------
  // log_softmax of each row, in float32 as torch's: x − max − log Σ exp(x − max)
  function logSoftmax(x, rows, n) {
    const out = new Float32Array(rows * n);
    for (let t = 0; t < rows; t++) {
      const row = x.subarray(t * n, (t + 1) * n), top = K.max(row);
      let s = 0;
      for (let j = 0; j < n; j++) s += Math.exp(row[j] - top);
      const shift = top + Math.log(s);
      for (let j = 0; j < n; j++) out[t * n + j] = row[j] - shift;
    }
    return out;
  }
  // P_point = softmax(W_vocab · norm(x_point)): the model's final norm (if any) and output layer
  function readOut(ctx, plan, x, T) {
    const core = window.sfLiveCore, d = ctx.config.d_model, W = ctx.param(plan.head).data, vocab = W.length / d;
    const n = plan.norm, p = (name) => (name ? ctx.param(name).data : null);
    const h = n ? core.norm(n.kind, x, T, d, p(n.weight), p(n.bias), n.eps) : x;
    return {logp: logSoftmax(core.linear(h, T, d, W, null, vocab), T, vocab), vocab};
  }
  // the k best ids of a row, most likely first (equal ones in id order), in one pass (torch.topk)
  function best(row, k) {
    const top = [];
    for (let j = 0; j < row.length; j++) {
      if (top.length === k && !(row[j] > row[top[k - 1]])) continue;
      let at = top.length;
      while (at > 0 && row[j] > row[top[at - 1]]) at--;
      top.splice(at, 0, j);
      if (top.length > k) top.pop();
    }
    return top;
  }
  // data._lens's item: {stack, labels, steps, positions, emitted, notes, top, final}
  function lens(run, item, ctx) {
    try {
      if (!run || run.error || !Array.isArray(run.steps)) return fail("There is no live run to read the lens of.");
      if (!ctx || ctx.error) return fail(ctx && ctx.error ? ctx.error : "The page has nothing to read the lens with.");
      const plan = ctx.lensPlan;
      if (plan.note) return {note: plan.note};
      if (item !== 0) return fail(`A live run has one batch item, not item ${JSON.stringify(item)}.`);
      const tokens = plan.stack === "decoder" ? run.target_tokens : run.source_tokens;
      const strings = (ids) => ids.map((i) => ctx.tokenizer(plan.stack === "decoder" ? "tgt" : "src").labels[i]);
      const T = tokens.length, read = (i) => readOut(ctx, plan, run.steps[i].data, T);
      const last = read(plan.steps[plan.steps.length - 1]), V = last.vocab, k = Math.min(plan.k, V);
      const emitted = Array.from({length: T}, (_, t) => K.argmax(last.logp.subarray(t * V, (t + 1) * V)));
      const top = [], final = [];
      plan.steps.forEach((i, n) => {
        const {logp} = n === plan.steps.length - 1 ? last : read(i);
        const rows = Array.from({length: T}, (_, t) => logp.subarray(t * V, (t + 1) * V));
        top.push(rows.map((row) => best(row, k).map((j) => [strings([j])[0], K.finiteOrText(Math.exp(row[j]))])));
        final.push(rows.map((row, t) => [K.finiteOrText(Math.exp(row[emitted[t]])),
          K.count(row, (x) => x > row[emitted[t]]) + 1]));
      });
      return {stack: plan.stack, labels: plan.labels.slice(), steps: plan.steps.slice(), positions: tokens.slice(),
        emitted: strings(emitted), notes: [], top, final};
    } catch (e) {
      return fail(`The page could not read the lens: ${message(e)}.`);
    }
  }

  window.sfLiveDerive = {unpackWeights, context, derive, lens};
})();
