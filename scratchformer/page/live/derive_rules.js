// scratchformer's live derivations, part 2 of 3: one rule per kind of step, as analyses.derive's embedding_rules,
// attention_rules and stream_rules write them. Each rule gets (r, plan, index, value, ctx): r reads the run and
// counts what it read (part 1's reader), plan is the step's plan from page/live/derive.py (which steps and
// parameters it reads, and Python's own texts where they are the same for every cell), index the cell (batch
// first), value the run's value there. It returns {recomputed, formula, expression, terms: [[label, value]], note};
// a text the plan holds is left out and filled in from the plan. Sums and products run in float64, as Python's.
"use strict";
(() => {
  if (!window.sfDeriveKit) return; // part 1 missing: no rules (and part 3 defines nothing)
  const K = window.sfDeriveKit, {num, paren, summed} = K;
  const join = (values) => values.map(paren).join(" + ");

  // ---- the input side (embedding_rules) ----------------------------------------------------------------------
  // x = tokenizer(text): the piece at this position and its id in the vocabulary
  function tokens(r, plan, [b, p], value, ctx) {
    const shown = ((plan.side === "src" ? ctx.run.source_tokens : ctx.run.target_tokens) || [])[p] ?? "";
    const tok = ctx.tokenizer(plan.side), piece = tok.tokens[value], found = tok.byPiece.get(piece);
    const recomputed = found === undefined ? NaN : found;
    const note = plan.start_note && p === 0
      ? "The decoder input starts with the start token, then reads the target shifted right by one."
      : `The tokenizer (${plan.tokenizer}) cut the text into pieces; this is piece ${p + 1}.`;
    return {recomputed, expression: `“${shown}” → vocabulary piece “${piece}” → id ${num(recomputed)}`,
      terms: [[`piece “${piece}”`, recomputed]], note};
  }
  // E[x]: row x of the embedding table
  function lookup(r, plan, [b, p, d]) {
    const id = Math.trunc(r.cell(plan.tokens, [b, p])), entry = r.paramCell(plan.param, [id, d]);
    return {recomputed: entry, expression: `E[${id}, ${d}] = ${num(entry)}`, terms: [],
      note: `Row ${id} of the embedding table (one learned row per vocabulary entry), dimension ${d}.`};
  }
  // E[x]·√d_model (paper §3.4)
  function scaled(r, plan, index) {
    const e = r.cell(plan.lookup, index), root = Math.sqrt(plan.d_model), out = e * root;
    return {recomputed: out, terms: [e, root],
      expression: `${paren(e)} · √${plan.d_model} = ${paren(e)} · ${num(root)} = ${num(out)}`};
  }
  // PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(…) (paper §3.5), from its closed form
  function peSinusoid(r, plan, [p, d]) {
    const pos = p + plan.offset, dm = plan.d_model;
    let i, fn;
    if (plan.layout === "halves") { // Marian: every sine first, then every cosine
      const nSin = dm - Math.floor(dm / 2);
      [i, fn] = d < nSin ? [d, "sin"] : [d - nSin, "cos"];
    } else [i, fn] = [Math.floor(d / 2), d % 2 === 0 ? "sin" : "cos"];
    const base = Math.pow(10000, (2 * i) / dm), angle = pos / base;
    const out = fn === "sin" ? Math.sin(angle) : Math.cos(angle);
    return {recomputed: out, terms: [],
      expression: `PE(${pos}, ${d}) = ${fn}(${pos} / 10000^(${2 * i}/${dm})) = ${fn}(${num(angle)}) = ${num(out)}`,
      note: `Nothing learned: dimension ${d} is a wave of wavelength about ${num(2 * Math.PI * base)} positions.`};
  }
  const peZero = () => ({recomputed: 0, expression: "0", terms: []}); // rotary models add no positions here
  // E[x]·√d_model + PE
  function summedInput(r, plan, [b, p, d]) {
    const values = [r.cell(plan.first, [b, p, d]), r.cell(plan.pe, [p, d])], out = 0 + values[0] + values[1];
    return {recomputed: out, terms: values, expression: `${join(values)} = ${num(out)}`};
  }

  // ---- inside multi-head attention (attention_rules, paper §3.2) ------------------------------------------------
  // one output unit of a linear map, Σ_d x[d]·W[u, d] + b[u], reading the row of step `x` at `prefix`
  function linearUnit(r, x, prefix, plan, u, name = "x") {
    const row = r.row(x, prefix), w = r.paramRow(plan.weight, [u]);
    const extra = r.has(plan.bias) ? [[`b[${u}]`, r.paramCell(plan.bias, [u])]] : [];
    return summed(row, w, (d) => `${name}[${d}]·W[${u}, ${d}]`, extra);
  }
  // which of Q, K, V, which head and which of its dimensions unit u of a (fused) projection is
  function part(plan, u) {
    const parts = plan.parts.split(""), widths = parts.map((q) => (q === "Q" ? plan.d_attn : plan.d_kv_attn));
    let rest = u, which = 0;
    for (; which < widths.length; which++) {
      if (rest < widths[which]) break;
      rest -= widths[which];
    }
    which = Math.min(which, parts.length - 1);
    return `${parts[which]} of head ${Math.floor(rest / plan.d_head) + 1}, dimension ${rest % plan.d_head}`;
  }
  // [Q K V] = X [W^Q W^K W^V] + b; cross-attention: Q = X_dec W^Q, [K V] = X_enc [W^K W^V]
  function projectionIn(r, plan, [b, p, u]) {
    const {total, expression, terms} = linearUnit(r, plan.x, [b, p], plan, u);
    return {recomputed: total, expression, terms, note: `Unit ${u} is the ${part(plan, u)}: the dot product of the `
      + `input row at this position (${plan.x_name}) with row ${u} of the weight matrix.`};
  }
  // q/k/v[h, pos, e] = the projection's column offset + h·d_k + e: an index mapping, no arithmetic
  function headSplit(r, plan, [b, h, p, e]) {
    const dh = plan.d_head, col = plan.offset + h * dh + e, out = r.cell(plan.source, [b, p, col]);
    return {recomputed: out, terms: [],
      expression: `${plan.part}[${h}, ${p}, ${e}] = ${plan.source_last}[${p}, ${plan.offset} + ${h}·${dh} + ${e} = `
        + `${col}] = ${num(out)}`,
      note: `No arithmetic: head ${h + 1} owns columns ${plan.offset + h * dh}–${plan.offset + (h + 1) * dh - 1} of `
        + `the projection; this is its dimension ${e}.`};
  }
  // S[i, j] = q_i · k_j = Σ_e q_i[e]·k_j[e]; query head h reads key head ⌊h / group⌋ (grouped-query attention)
  function score(r, plan, [b, h, i, j]) {
    const g = Math.floor(h / plan.group), q = r.row(plan.q, [b, h, i]), k = r.row(plan.k, [b, g, j]);
    const {total, expression, terms} = summed(q, k, (e) => `q[${e}]·k[${e}]`);
    const shared = plan.shared ? ` Query head ${h + 1} reads key head ${g + 1}, which it shares with ${plan.group - 1} `
      + "other query heads (grouped-query attention)." : "";
    const turned = plan.rotary ? " Both were turned by their positions first (RoPE), so the product depends on "
      + "j − i, not on i and j." : "";
    return {recomputed: total, expression: `q_${i}·k_${j} = ${expression}`, terms,
      note: `The query of position ${i} against the key of position ${j}, over d_k = ${q.length} dimensions: large `
        + `when the two vectors point the same way.${turned}${shared}`};
  }
  // S[i, j] / √d_k (paper §3.2.1)
  function scaledScore(r, plan, index) {
    const s = r.cell(plan.scores, index), root = Math.sqrt(plan.d_head), out = s / root;
    return {recomputed: out, terms: [s, root],
      expression: `${paren(s)} / √${plan.d_head} = ${paren(s)} / ${num(root)} = ${num(out)}`};
  }
  // why key j is blocked for query i ("" when it is not): the causal rule, or padding
  function maskReason(plan, ctx, b, i, j) {
    if (plan.causal && j > i) {
      return `key position ${j} comes after query position ${i}: the decoder's causal mask hides the future, so −∞ `
        + "there makes its softmax weight exactly 0";
    }
    const pads = ctx.pads(plan.pads);
    if (pads && pads[j]) return `key position ${j} is padding, which no query may read, so −∞ makes its softmax `
      + "weight exactly 0";
    return "";
  }
  // M[i, j] = 0 if query i may see key j, else −∞
  function mask(r, plan, [b, i, j], value, ctx) {
    const why = maskReason(plan, ctx, b, i, j), out = why ? -Infinity : 0;
    return {recomputed: out, expression: `M[${i}, ${j}] = ${num(out)}`, terms: [],
      note: why ? `−∞: ${why}.` : `0: query position ${i} may read key position ${j}.`};
  }
  // S/√d_k + M
  function maskedScore(r, plan, [b, h, i, j], value, ctx) {
    const values = [r.cell(plan.scaled, [b, h, i, j]), r.cell(plan.mask, [b, i, j])], out = 0 + values[0] + values[1];
    const why = maskReason(plan, ctx, b, i, j);
    return {recomputed: out, terms: values, expression: `${join(values)} = ${num(out)}`, note: why ? `−∞: ${why}.` : ""};
  }
  // A[i, j] = exp(s_ij) / Σ_k exp(s_ik), computed as exp(s_ij − max) / Σ_k exp(s_ik − max)
  function weight(r, plan, [b, h, i, j], value, ctx) {
    const row = r.row(plan.masked, [b, h, i]);
    if (row.every((s) => s === -Infinity)) {
      return {recomputed: 0, formula: "A[i, j] = 0 for a query that may see no key", terms: [],
        expression: "every score of this row is −∞ → 0", note: "Every key of this row is masked (a padding query): "
          + "its weights are set to 0 instead of the NaN a softmax of only −∞ would give."};
    }
    const top = K.max(row), exps = row.map((s) => Math.exp(s - top)), denom = K.sum(exps), out = exps[j] / denom;
    const finite = [...row.keys()].filter((k) => row[k] !== -Infinity);
    const shown = finite.map((k, n) => [k, n]).sort((x, y) => exps[y[0]] - exps[x[0]] || x[1] - y[1]).slice(0, 4);
    const parts = shown.map(([k]) => `exp(${paren(row[k])} − ${paren(top)})`);
    if (finite.length > shown.length) parts.push(`${finite.length - shown.length} more`);
    const why = maskReason(plan, ctx, b, i, j);
    const note = why ? `Weight 0: ${why}.` : `Key ${j} gets ${num(out * 100)}% of query ${i}'s attention; the row's `
      + `weights add up to 1. It ranks ${K.count(exps, (x) => x > exps[j]) + 1} of ${finite.length} in its row.`;
    return {recomputed: out, note, terms: [[`exp(s_${i}${j} − max)`, exps[j]], ["Σ_k exp(s_ik − max)", denom]],
      expression: `exp(${paren(row[j])} − ${paren(top)}) / (${parts.join(" + ")}) = ${num(exps[j])} / ${num(denom)} `
        + `= ${num(out)}`};
  }
  // head[i, e] = Σ_j A[i, j]·v_j[e]: the weighted average of the values
  function context(r, plan, [b, h, i, e]) {
    const a = r.row(plan.weights, [b, h, i]), v = r.column(plan.v, [b, Math.floor(h / plan.group)], [e]);
    const {total, expression, terms} = summed(a, v, (j) => `A[${i}, ${j}]·v_${j}[${e}]`);
    const top = K.argmax(a);
    return {recomputed: total, expression, terms, note: `A weighted average of every key's value (dimension ${e}); `
      + `key ${top} weighs most (${num(a[top])}).`};
  }
  // Concat(head_1, …, head_h)[i, u] = head_(u div d_k)[i, u mod d_k]
  function concat(r, plan, [b, i, u]) {
    const h = Math.floor(u / plan.d_head), e = u % plan.d_head, out = r.cell(plan.context, [b, h, i, e]);
    return {recomputed: out, expression: `Concat[${i}, ${u}] = head ${h + 1}[${i}, ${e}] = ${num(out)}`, terms: [],
      note: `No arithmetic: the ${plan.n_heads} heads' outputs are laid side by side; column ${u} is head ${h + 1}'s `
        + `dimension ${e}.`};
  }
  // MultiHead[i, u] = Σ_d Concat[i, d]·W^O[u, d] + b^O[u]
  function outputProjection(r, plan, [b, i, u]) {
    const {total, expression, terms} = linearUnit(r, plan.concat, [b, i], plan, u, "concat");
    return {recomputed: total, expression, terms};
  }
  // RoPE: x'[e] = x[e]·cos(pos·ω_i) ∓ x[e ± d/2]·sin(pos·ω_i), pairs (e, e + d/2) turned by pos·ω_i
  function rotary(r, plan, [b, h, p, e], value, ctx) {
    const half = Math.floor(plan.d_rot / 2), i = e % half, first = e < half, partner = first ? e + half : e - half;
    const x = r.cell(plan.before, [b, h, p, e]), y = r.cell(plan.before, [b, h, p, partner]);
    const omega = ctx.omega[i], angle = Math.fround(p * omega); // pos·ω in float32, as the model computes it
    const c = Math.cos(angle), s = Math.sin(angle), sign = first ? -1 : 1, op = first ? "−" : "+";
    const out = x * c + sign * y * s, w = plan.which;
    return {recomputed: out, formula: plan.formulas[first ? 0 : 1],
      expression: `${paren(x)}·cos(${p}·${num(omega)}) ${op} ${paren(y)}·sin(${p}·${num(omega)}) = ${paren(x)}·`
        + `${paren(c)} ${op} ${paren(y)}·${paren(s)} = ${num(out)}`,
      terms: [[`${w}[${e}]`, x], [`${w}[${partner}] (its partner)`, y], ["pos·ω_i (radians)", angle]],
      note: `Dimensions ${Math.min(e, partner)} and ${Math.max(e, partner)} form pair ${i}, turned together by `
        + `position ${p} times ω_${i} = ${num(omega)}: a rotation in their plane, which keeps the pair's length.`};
  }

  // ---- along the residual stream (stream_rules) --------------------------------------------------------------
  // x + Sublayer(x)
  function residual(r, plan, index) {
    const x = r.cell(plan.x, index), sub = r.cell(plan.sub, index), out = x + sub;
    return {recomputed: out, terms: [x, sub], expression: `${paren(x)} + ${paren(sub)} = ${num(out)}`};
  }
  // LayerNorm(z)[d] = γ[d]·(z[d] − μ)/√(σ² + ε) + β[d]; RMSNorm(z)[d] = γ[d]·z[d]/√(mean(z²) + ε)
  function norm(r, plan, index) {
    const d = index[index.length - 1], z = r.row(plan.z, index.slice(0, -1)), gamma = r.paramCell(plan.gamma, [d]);
    const eps = plan.eps;
    if (plan.rms) {
      const ms = K.mean(z.map((v) => v * v)), scale = plan.plus_one ? 1 + gamma : gamma;
      const out = (scale * z[d]) / Math.sqrt(ms + eps);
      return {recomputed: out, terms: [z[d], ms, gamma],
        expression: `${paren(scale)}·${paren(z[d])}/√(${num(ms)} + ${num(eps)}) = ${num(out)}`};
    }
    const beta = r.paramCell(plan.beta, [d]), mu = K.mean(z), v = K.variance(z);
    const out = (gamma * (z[d] - mu)) / Math.sqrt(v + eps) + beta;
    return {recomputed: out, terms: [z[d], mu, v, gamma, beta],
      expression: `${paren(gamma)}·(${paren(z[d])} − ${paren(mu)})/√(${num(v)} + ${num(eps)}) + ${paren(beta)} = `
        + `${num(out)}`};
  }
  // the activations written out in float64: ReLU max(0, z), SiLU z·σ(z) = z/(1 + e^−z)
  const ACT = {relu: (z) => Math.max(0, z), silu: (z) => (z > -700 ? z / (1 + Math.exp(-z)) : 0)};
  // hidden[f] = act(Σ_d x[d]·W_1[f, d] + b_1[f]) (paper §3.3), or a gated FFN's gate branch
  function activated(r, plan, [b, p, f]) {
    const {total: z, expression, terms} = linearUnit(r, plan.x, [b, p], plan, f), out = ACT[plan.act](z);
    const note = plan.act === "relu" && z < 0
      ? `ReLU cut the negative pre-activation ${num(z)} to 0: this unit is silent for this position.`
      : `Unit ${f} of d_ff = ${plan.d_ff}: the dot product of the position's vector with row ${f} of W_1, then `
        + `${plan.act_name}.`;
    return {recomputed: out, expression: `z = ${expression};  act(${num(z)}) = ${num(out)}`, note,
      terms: [...terms, ["z (pre-activation)", z]]};
  }
  // hidden[f] = act(x W_1)[f] · (x V)[f]: the gate lets part of the linear branch through
  function hiddenGated(r, plan, index) {
    const gate = r.cell(plan.gate, index), lin = r.cell(plan.linear, index), out = gate * lin;
    return {recomputed: out, terms: [gate, lin], expression: `${paren(gate)} · ${paren(lin)} = ${num(out)}`};
  }
  // linear[f] = Σ_d x[d]·V[f, d], the gated unit's branch without an activation
  function linearBranch(r, plan, [b, p, f]) {
    const {total, expression, terms} = linearUnit(r, plan.x, [b, p], plan, f);
    return {recomputed: total, expression, terms};
  }
  // FFN(x)[u] = Σ_f hidden[f]·W_2[u, f] + b_2[u]
  function ffnOut(r, plan, [b, p, u]) {
    const {total, expression, terms} = linearUnit(r, plan.hidden, [b, p], plan, u, "hidden");
    return {recomputed: total, expression, terms};
  }

  // ---- the output layer --------------------------------------------------------------------------------------
  const token = (ctx, v) => `“${ctx.tokenizer("tgt").labels[v]}”`; // token_strings, as stream_rules writes it
  // logit[v] = Σ_d x[d]·W_vocab[v, d]
  function logits(r, plan, [b, t, v], value, ctx) {
    const x = r.row(plan.x, [b, t]), w = r.paramRow(plan.weight, [v]);
    const extra = r.has(plan.bias) ? [[`bias[${v}]`, r.paramCell(plan.bias, [v])]] : [];
    const {total, expression, terms} = summed(x, w, (d) => `x[${d}]·W[${v}, ${d}]`, extra);
    return {recomputed: total, expression, terms,
      note: `How well the decoder's vector at position ${t} matches vocabulary entry ${v} (${token(ctx, v)}).`};
  }
  // P(v) = exp(logit_v) / Σ_w exp(logit_w), over the whole vocabulary
  function probabilities(r, plan, [b, t, v], value, ctx) {
    const row = r.row(plan.logits, [b, t]), top = K.max(row), exps = row.map((x) => Math.exp(x - top));
    const denom = K.sum(exps), out = exps[v] / denom;
    const best = K.order(row.length, (k) => row[k]).slice(0, 3);
    const shown = best.map((k) => `exp(${paren(row[k])} − ${paren(top)})`).join(" + ");
    return {recomputed: out, terms: [[`exp(logit_${v} − max)`, exps[v]], ["Σ exp(logit − max)", denom]],
      expression: `exp(${paren(row[v])} − ${paren(top)}) / (${shown} + ${row.length - best.length} more) = `
        + `${num(exps[v])} / ${num(denom)} = ${num(out)}`,
      note: `${token(ctx, v)} ranks ${K.count(row, (x) => x > row[v]) + 1} of ${row.length} at position ${t}.`};
  }

  // the plan's rule names (page/live/derive.py rule_of) → rules
  window.sfDeriveRules = {tokens, lookup, scaled, pe_sinusoid: peSinusoid, pe_zero: peZero,
    summed_input: summedInput, projection_in: projectionIn, head_split: headSplit, score, scaled_score: scaledScore,
    mask, masked_score: maskedScore, weight, context, concat, output_projection: outputProjection, rotary, residual,
    norm, hidden_gated: hiddenGated, hidden: activated, gate: activated, linear_branch: linearBranch,
    ffn_out: ffnOut, logits, probabilities};
})();
