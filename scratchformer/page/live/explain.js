// scratchformer's live page, explanations: every step of a run the browser made (run.js's engine.trace)
// explained in the very words and numbers scratchformer.explain gives in Python (explain_step), character for
// character. The sentences are not written here: ctx, made by scratchformer/page/live/explain.py
// (explain_context), carries texts.py's templates, what does not change with the sentence (each step's TEXTS key,
// links, notes and config-made values) and the vocabulary; this file computes what numbers.py and Ctx.common read
// from tensors, and fills the templates as str.format does, numbers printed as explain/format.py prints them.
//
//   sfLiveExplain.explain(run, stepIndex, item, ctx)   // → {what, why, numbers, links: [[index, text]]}
//   sfLiveExplain.format                                // sig3, fixed, expo, general, group, pct: for the tests
// A step the context does not describe answers {error: "one sentence"}; nothing throws.
"use strict";
(() => {
  // ---- numbers as Python prints them (format.js) -------------------------------------------------
  const {fixed, expo, general, repr, group, sig3, pct, term} = window.sfPyFormat;

  // ---- values and templates -----------------------------------------------------------------------------------
  // A value is a string, or [tag, number]: "N" explain.format.Num, "C" Count, "i" a plain int, "f" a plain float
  // (explain.py sends the same; a number that is not finite comes as "inf", "-inf" or "nan").
  const N = (x) => ["N", x], C = (n) => ["C", n], I = (n) => ["i", n];
  const NONFINITE = {inf: Infinity, "-inf": -Infinity, nan: NaN};
  function show(value, spec) { // format(value, spec)
    if (typeof value === "string") {
      if (spec) throw new Error(`a text formatted as ${spec}`);
      return value;
    }
    const [tag, raw] = value, x = typeof raw === "string" ? NONFINITE[raw] : raw;
    if (!spec) return tag === "N" ? sig3(x) : tag === "C" ? group(x) : tag === "i" ? String(x) : repr(x);
    const m = /^\.(\d+)([efg])$/.exec(spec);
    if (spec === "g") return general(x);
    if (!m) throw new Error(`the format ${spec}`);
    return {e: expo, f: fixed, g: general}[m[2]](x, Number(m[1]));
  }
  // str.format with named fields: "{name}", "{name:spec}", "{{" and "}}"; a missing name throws (KeyError)
  function fill(template, values) {
    return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (all, field) => {
      if (all === "{{" || all === "}}") return all[0];
      const colon = field.indexOf(":"), name = colon < 0 ? field : field.slice(0, colon);
      if (!Object.hasOwn(values, name)) throw new Error(`no value ${name}`);
      return show(values[name], colon < 0 ? "" : field.slice(colon + 1));
    });
  }
  // explanation._render: the first template of this field whose placeholders all fill
  function render(texts, key, kind, field, values, textOnly) {
    const candidates = [...(textOnly ? [`${key}@text`] : []), key, `${key}.plain`];
    if (!(texts[key] && field in texts[key])) candidates.push(kind);
    candidates.push(`${kind}.plain`, "step");
    for (const name of new Set(candidates)) {
      const template = texts[name] && texts[name][field];
      if (template === undefined) continue;
      try { return fill(template, values); } catch (e) { /* a value is missing: the next template */ }
    }
    return null;
  }

  // ---- tensors: one batch item of a step, read as numbers.py reads it -----------------------------------------
  function item(step, b) { // {data, shape, dims} without the batch axis
    if (step.dims[0] !== "batch") return {data: step.data, shape: step.shape, dims: step.dims};
    const shape = step.shape.slice(1), n = shape.reduce((a, k) => a * k, 1);
    const i = Math.min(Math.max(b, 0), step.shape[0] - 1); // as Step.item: a batch item past the last is the last
    return {data: step.data.subarray(i * n, (i + 1) * n), shape, dims: step.dims.slice(1)};
  }
  const rows = (t) => t.shape[t.shape.length - 1]; // the last axis' length: a row of a (…, n) tensor
  const row = (t, r) => t.data.subarray(r * rows(t), (r + 1) * rows(t));
  function stats(values) { // context.stats: min, max, mean, population std of the finite values, in float32
    let lo = Infinity, hi = -Infinity, sum = 0, n = 0;
    for (const v of values) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); sum += v; n++; }
    if (!n) return {};
    const mean = sum / n;
    let sq = 0;
    for (const v of values) if (Number.isFinite(v)) sq += (v - mean) ** 2;
    return {min: N(lo), max: N(hi), mean: N(Math.fround(mean)), std: N(Math.fround(Math.sqrt(sq / n)))};
  }
  const finiteStd = (values) => stats(values).std;
  const mean = (v) => v.reduce((a, x) => a + x, 0) / v.length;
  const std = (v) => { const m = mean(v); return Math.sqrt(v.reduce((a, x) => a + (x - m) ** 2, 0) / v.length); };
  const rms = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0) / v.length);
  const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  const least = (v) => v.reduce((a, x) => Math.min(a, x), Infinity);
  const most = (v) => v.reduce((a, x) => Math.max(a, x), -Infinity);
  const perRow = (t, f) => Array.from({length: t.data.length / rows(t)}, (_, r) => f(row(t, r)));
  function argmax(v) { // torch's argmax: the first of equal largest values
    let j = 0;
    for (let i = 1; i < v.length; i++) if (v[i] > v[j]) j = i;
    return j;
  }
  const count = (v, test) => { let n = 0; for (const x of v) if (test(x)) n++; return n; };

  // ---- the context of one step: numbers.py's Ctx -------------------------------------------------------------
  function context(run, index, b, ctx) {
    const step = run.steps[index], S = ctx.steps[index], P = ctx.phrases;
    const posDims = (s) => s.dims.filter((d) => d === "src_pos" || d === "tgt_pos");
    const noun = (dim) => (ctx.text_only && dim === "tgt_pos" ? "text" : dim);
    const phrase = (key, values) => fill(P[key], values);
    const counted = (what, n) => phrase(`count.${what}${n === 1 ? "" : "s"}`, {n: C(n)});
    const oneOrMany = (key, n) => phrase(n === 1 ? `${key}.one` : `${key}.many`, {n: C(n)});
    const label = (dim, i) => {
      const labels = {src_pos: run.source_tokens, tgt_pos: run.target_tokens}[dim];
      return labels && labels.length && i >= 0 && i < labels.length ? phrase("token", {text: labels[i]})
        : phrase("token_unknown", {n: C(i + 1)});
    };
    const idLabel = (id) => { // Ctx.id_label: a token this run shows, a special token, the vocabulary's, the id
      const sides = [["tgt_embed.tokens", run.target_tokens]];
      if (ctx.share_embeddings) sides.push(["src_embed.tokens", run.source_tokens]);
      for (const [name, labels] of sides) {
        const found = run.steps.find((s) => s.name === name);
        const ids = found ? item(found, b).data : [];
        for (let i = 0; i < Math.min(ids.length, (labels || []).length); i++) {
          if (ids[i] === id) return phrase("token", {text: labels[i]});
        }
      }
      const hit = ctx.special.find(([, sid]) => sid === id);
      if (hit) return phrase(`special.${hit[0]}`, {id: I(id)});
      return ctx.vocab ? phrase("token", {text: ctx.vocab[id]}) : phrase("token_id", {id: I(id)});
    };
    const ref = (role) => (role in S.refs ? run.steps[S.refs[role]] : null);
    const att = (s) => { // Step.attention_type: 'encoder.self_attn', 'decoder.cross_attn' …, or null
      const p = s.name.split(".");
      return p.length > 2 && (p[2] === "self_attn" || p[2] === "cross_attn") ? `${p[0]}.${p[2]}` : null;
    };
    return {step, S, P, b, run, ctx, posDims, noun, phrase, counted, oneOrMany, label, idLabel, ref, att,
      suffix: step.name.split(".").pop(), it: (s) => item(s || step, b)};
  }

  function common(c) { // Ctx.common's values that change with the sentence
    const {step} = c, pos = c.posDims(step), nPos = pos.length ? step.shape[step.dims.indexOf(pos[0])] : 0;
    return {shape: step.shape.map((n, i) => `${n} ${step.dims[i]}`).join(" × "), n_pos: C(nPos),
      n_tokens: c.counted("token", nPos), positions: c.counted("position", nPos),
      side_positions: c.counted(c.S.noun, nPos), each_position: c.oneOrMany("each", nPos),
      all_positions: c.oneOrMany("all", nPos), ...stats(c.it().data)};
  }

  function attentionValues(c, step) { // numbers._attention_values
    const type = c.att(step) || "other", pos = c.posDims(step), P = c.P;
    const [qd, kd] = pos.length ? [...pos, ...pos].slice(0, 2) : ["tgt_pos", "tgt_pos"];
    const nq = step.shape[step.shape.length - 2], nk = step.shape[step.shape.length - 1];
    const v = {n_q: C(nq), n_k: C(nk), n_cells: C(nq * nk), q_positions: c.counted(c.noun(qd), nq),
      k_positions: c.counted(c.noun(kd), nk), q_first: c.label(qd, 0), q_last: c.label(qd, nq - 1),
      k_first: c.label(kd, 0), attention: P[`attention.${type}`] ?? type,
      no_mask_reason: P[`no_mask.${type}`] ?? P["no_mask.other"]};
    const from = c.ctx.text_only && `from.${type}@text` in P ? `from.${type}@text` : `from.${type}`;
    if (from in P) v.qk_from = c.phrase(from, v);
    return v;
  }
  const head = (t, h = 0) => { // head h of an (h, …) tensor
    const n = t.data.length / t.shape[0];
    return {data: t.data.subarray(h * n, (h + 1) * n), shape: t.shape.slice(1)};
  };
  const lastLength = (t) => norm(row(head(t), head(t).shape[0] - 1)); // ‖head 1's last vector‖
  function ffnValues(c) { // numbers._ffn_values (act_name and act_short come with the context)
    const x = c.it().data;
    return {zero_pct: pct(count(x, (v) => v === 0) / x.length), neg_pct: pct(count(x, (v) => v < 0) / x.length),
      n_hidden: C(x.length)};
  }
  function normValues(c) { // numbers.layer_norm
    const out = c.it(), before = c.ref("residual") || c.ref("before") || c.ref("before_rms") || c.ref("sum");
    const rmsKey = c.S.key.startsWith("layer_norm.rms");
    const muOf = (v) => { const m = mean(v); return N(Math.abs(m) < 1e-6 * Math.max(std(v), 1) ? 0 : m); };
    const v = {tok: c.label(c.posDims(c.step)[0], 0), mu_out: muOf(row(out, 0)), sd_out: N(std(row(out, 0))),
      avg_sd_out: N(mean(perRow(out, std)))};
    if (before && before.shape.join() === c.step.shape.join()) {
      const x = c.it(before);
      Object.assign(v, {mu_in: muOf(row(x, 0)), sd_in: N(std(row(x, 0))), avg_sd_in: N(mean(perRow(x, std)))});
      if (rmsKey) Object.assign(v, {rms_in: N(rms(row(x, 0))), avg_rms_in: N(mean(perRow(x, rms)))});
    }
    if (rmsKey) Object.assign(v, {rms_out: N(rms(row(out, 0))), avg_rms_out: N(mean(perRow(out, rms)))});
    return v;
  }

  // numbers.py's functions, by step kind: the values that change with the sentence, and the key where the data
  // choose it ({key, values}); the rest came with the context
  const KINDS = {
    tokens(c) {
      const ids = Array.from(c.it().data), dim = c.posDims(c.step)[0];
      const shown = ids.slice(0, 4).map((id, i) => `${c.label(dim, i)} → ${id}`);
      const more = ids.length > 4 ? c.phrase("ids_more", {n: I(ids.length)}) : "";
      return {values: {ids: shown.join(", ") + more, start: c.label(dim, 0)}};
    },
    embedding(c) {
      if (c.suffix === "scaled") {
        const before = c.ref("lookup");
        return {values: before ? {std_before: finiteStd(c.it(before).data), std_after: finiteStd(c.it().data)} : {}};
      }
      const dim = c.posDims(c.step)[0], ids = c.ref("tokens");
      const v = {tok: c.label(dim, 0), row_head: Array.from(row(c.it(), 0).subarray(0, 3), sig3).join(", ")};
      if (ids) v.tok_id = I(c.it(ids).data[0]);
      return {values: v};
    },
    positional_encoding(c) {
      const pe = c.it(), n = pe.shape[0], d = pe.shape[1], v = {pos: C(n - 1)}, key = c.S.key;
      if ((key === "positional_encoding" || key === "positional_encoding.halves") && n > 0 && d >= 2) {
        const last = row(pe, n - 1), slowDim = c.S.values.slow_dim[1];
        Object.assign(v, {slow: N(last[slowDim]), sin0: N(last[0]),
          cos0: N(last[key.endsWith(".halves") ? c.S.values.n_sin[1] : 1])});
      }
      return {values: v};
    },
    input(c) {
      const emb = c.ref("embedded"), pe = c.ref("positions");
      if (!emb || !pe) return {values: {}};
      const x = c.it(), p = Math.min(1, x.shape[0] - 1);
      const e = row(c.it(emb), p)[0], q = row(c.it(pe), p)[0], total = row(x, p)[0];
      return {values: {tok: c.label(c.posDims(c.step)[0], p), pos_no: C(p + 1), emb: N(e), pe: term(q),
        total: N(total), typ: term(total - e - q)}};
    },
    rotary(c) {
      const after = c.it(), before = c.ref("unrotated");
      const v = {len_after: N(lastLength(after)), tok: c.label(c.posDims(c.step)[0], after.shape[1] - 1)};
      if (before) v.len_before = N(lastLength(c.it(before)));
      return {values: v};
    },
    scores(c) {
      const h = head(c.it()), s = stats(h.data);
      return {values: {...attentionValues(c, c.step), s00: N(h.data[0]), head_min: s.min, head_max: s.max,
        head_mean: s.mean, head_std: s.std}};
    },
    scaled_scores(c) {
      const v = attentionValues(c, c.step), before = c.ref("scores");
      if (before) Object.assign(v, {std_before: finiteStd(c.it(before).data), std_after: finiteStd(c.it().data)});
      return {values: v};
    },
    mask(c) {
      const v = attentionValues(c, c.step), m = c.it(), [nq, nk] = m.shape, data = m.data;
      const blocked = count(data, (x) => x === -Infinity);
      Object.assign(v, {n_blocked: C(blocked), n_allowed: C(data.length - blocked)});
      if (blocked === 0) return {key: "mask.none", values: v};
      if (c.att(c.step) === "decoder.self_attn") {
        let causal = 0;
        for (let i = 0; i < nq; i++) causal += Math.max(0, nk - 1 - (i + nk - nq)); // keys after query i
        const pad = blocked - causal, seen = (i) => count(row(m, i), (x) => x !== -Infinity);
        v.pad_clause = pad ? c.phrase("pad_clause", {n_causal: C(causal), n_pad_cells: C(pad)}) : "";
        Object.assign(v, {first_seen: C(seen(0)), last_seen: C(seen(nq - 1))});
        return {key: "mask.causal", values: v};
      }
      let padKeys = 0;
      for (let j = 0; j < nk; j++) { // a key no query may see: padding
        let all = true;
        for (let i = 0; i < nq && all; i++) all = data[i * nk + j] === -Infinity;
        padKeys += all;
      }
      return {key: "mask.padding", values: {...v, n_pad_keys: C(padKeys)}};
    },
    masked_scores(c) {
      const v = attentionValues(c, c.step), blocked = count(head(c.it()).data, (x) => x === -Infinity);
      v.n_blocked = C(blocked);
      const bias = c.S.key.startsWith("masked_scores.bias");
      return {key: bias ? (blocked ? "masked_scores.bias" : "masked_scores.bias_none")
        : blocked ? "masked_scores" : "masked_scores.none", values: v};
    },
    attention_weights(c) {
      const v = attentionValues(c, c.step), h = head(c.it()), last = row(h, h.shape[0] - 1), j = argmax(last);
      const pos = c.posDims(c.step), kd = pos.length ? pos[pos.length - 1] : "tgt_pos", masked = c.ref("masked");
      Object.assign(v, {w_max: N(last[j]), w_min: N(least(last)), k_top: c.label(kd, j), k_pos: C(j + 1)});
      if (masked) v.n_zero = C(count(head(c.it(masked)).data, (x) => x === -Infinity));
      return {values: v};
    },
    context(c) {
      const weights = c.ref("weights"), vstep = c.ref("v"), v = {};
      if (weights) {
        Object.assign(v, attentionValues(c, weights));
        const w = head(c.it(weights)), last = row(w, w.shape[0] - 1), j = argmax(last), out = head(c.it());
        const kd = c.posDims(weights).pop();
        Object.assign(v, {w_top: N(last[j]), k_top: c.label(kd, j), ctx: N(row(out, out.shape[0] - 1)[0])});
        if (vstep) v.v_top = N(row(head(c.it(vstep)), j)[0]);
      }
      return {values: v};
    },
    residual(c) {
      const sub = c.ref("sublayer"), xs = c.ref("x");
      if (!sub || !xs || xs.shape.join() !== c.step.shape.join()) return {values: {}};
      const r = c.it().data, x = c.it(xs).data, s = r.map((v, i) => v - x[i]); // Float32Array: float32 as stats()
      const s0 = r[0] - x[0];
      return {values: {tok: c.label(c.posDims(c.step)[0], 0), x0: N(x[0]), s0: N(s0), r0: N(r[0]), sd_x: finiteStd(x),
        sd_s: finiteStd(s), sd_r: finiteStd(r)}};
    },
    layer_norm: (c) => ({values: normValues(c)}),
    ffn_hidden(c) {
      const v = ffnValues(c);
      const x = c.it().data;
      if (c.S.key === "ffn_hidden.gated") v.small_pct = pct(count(x, (h) => Math.abs(h) < 0.01) / x.length);
      return {values: v};
    },
    ffn_gate: (c) => ({values: ffnValues(c)}),
    logits(c) {
      const x = c.it(), T = x.shape[0], last = row(x, T - 1), top = argmax(last);
      return {values: {tok: c.label("tgt_pos", T - 1), top_logit: N(last[top]), top_tok: c.idLabel(top),
        row_min: N(least(last)), row_max: N(most(last))}};
    },
    probabilities(c) {
      const p = c.it(), n = p.shape[0], last = row(p, n - 1), top = argmax(last);
      const v = {tok: c.label("tgt_pos", n - 1), top_tok: c.idLabel(top), top_p: N(last[top]), first_clause: ""};
      if (n > 1) {
        const first = row(p, 0), j = argmax(first);
        v.first_clause = c.phrase("first_clause", {first: c.label("tgt_pos", 0), first_top: c.idLabel(j),
          first_p: N(first[j])});
      }
      return {values: v};
    },
  };
  // kinds whose values all depend on the config alone: they came with the context
  for (const kind of ["qkv", "heads", "concat", "projection", "ffn_out"]) KINDS[kind] = () => ({values: {}});

  // explanation.explain_step for step `index` of a live run (batch item `item`: 0, a live run has one)
  function explain(run, index, item, ctx) {
    const step = run && run.steps && run.steps[index], S = ctx && ctx.steps && ctx.steps[index];
    if (!step || !S || S.name !== step.name) {
      return {error: `This page cannot explain step ${index + 1} of the run: its model's context does not ` +
        "describe it."};
    }
    const c = context(run, index, item || 0, ctx);
    let found, values = {};
    try {
      const got = (KINDS[step.kind] || (() => ({values: {}})))(c);
      found = {key: got.key || S.key, values: {...S.values, ...got.values}, links: S.links, notes: S.notes};
    } catch (e) { // numbers.py raised: a plainer explanation, as Python gives it
      found = {key: step.kind, values: {}, links: [], notes: ""};
    }
    try {
      values = {...ctx.common, ...S.common, ...common(c)};
    } catch (e) { /* Ctx.common raised: no values at all, as in Python */ }
    for (const [k, v] of Object.entries(found.values)) if (v !== undefined && v !== null) values[k] = v;
    const out = {};
    for (const field of ["what", "why", "numbers"]) {
      const text = render(ctx.texts, found.key, step.kind, field, values, ctx.text_only);
      const plain = field === "what" ? "title" : "formula"; // no template fills: the step's title or formula
      out[field] = text !== null ? text : S.common[plain] ?? ctx.common[plain];
    }
    if (found.notes) out.what = `${out.what} ${found.notes}`;
    out.links = found.links.map(([i, text]) => [i, text]);
    return out;
  }

  window.sfLiveExplain = {explain, format: {sig3, fixed, expo, general, group, pct, term, repr}};
})();
