// scratchformer's live page, part 1 of 2: the forward pass in plain JavaScript (run.js, part 2, reads text
// and decodes). Every step Python's trace records is computed here in the same order, under the same name and
// shape (batch axis of 1 included), from the same weights: Float32Array between steps, as torch's float32 tensors,
// and every sum in float64 numbers, so the values match Python's to about 1e-6 of their size (float32's rounding).
// Layouts: a (T, d) matrix is row-major, row t at t·d; heads are (h, T, d_head), as torch's (B, h, T, d_head).
"use strict";
(() => {
  const f32 = Math.fround;

  // ---- kernels: each returns a fresh array (a step keeps what it records), loops run over typed arrays --------
  // y = x Wᵀ + b: x (rows, nIn), W (nOut, nIn) as torch's nn.Linear stores it → y (rows, nOut)
  function linear(x, rows, nIn, W, b, nOut) {
    const y = new Float32Array(rows * nOut);
    for (let t = 0; t < rows; t++) {
      const xo = t * nIn, yo = t * nOut;
      for (let o = 0; o < nOut; o++) {
        const wo = o * nIn;
        let acc = 0;
        for (let i = 0; i < nIn; i++) acc += x[xo + i] * W[wo + i];
        y[yo + o] = b ? f32(acc) + b[o] : acc; // torch adds the bias to the rounded product
      }
    }
    return y;
  }
  // LayerNorm(x) = γ·(x − μ)/√(σ² + ε) + β over each row (σ² the biased variance); RMSNorm(x) = γ·x/√(mean(x²) + ε)
  function norm(kind, x, rows, d, g, b, eps) {
    const y = new Float32Array(rows * d);
    for (let t = 0; t < rows; t++) {
      const o = t * d;
      let mean = 0, sq = 0;
      if (kind === "layernorm") {
        for (let i = 0; i < d; i++) mean += x[o + i];
        mean /= d;
      }
      for (let i = 0; i < d; i++) sq += (x[o + i] - mean) ** 2;
      const r = 1 / Math.sqrt(sq / d + eps);
      if (kind === "layernorm") for (let i = 0; i < d; i++) y[o + i] = (x[o + i] - mean) * r * g[i] + b[i];
      else for (let i = 0; i < d; i++) y[o + i] = g[i] * f32(x[o + i] * r); // x̂ rounded first, as torch's RMSNorm
    }
    return y;
  }
  const ACT = {relu: (v) => (v > 0 ? v : 0), silu: (v) => v / (1 + Math.exp(-v))}; // max(0, x); x·σ(x)
  function add(a, b) { // the residual x + Sublayer(x)
    const y = new Float32Array(a.length);
    for (let i = 0; i < a.length; i++) y[i] = a[i] + b[i];
    return y;
  }
  // (T, width) columns [from, from + n·dh) → (n, T, dh): the heads of Q, K or V
  function split(x, T, width, from, n, dh) {
    const y = new Float32Array(n * T * dh);
    for (let h = 0; h < n; h++) for (let t = 0; t < T; t++) {
      const src = t * width + from + h * dh, dst = (h * T + t) * dh;
      for (let j = 0; j < dh; j++) y[dst + j] = x[src + j];
    }
    return y;
  }
  // RoPE: rot(x, pos)[i] = x[i] cos(pos ω_i) − x[i + dh/2] sin(pos ω_i), and its partner + x[i] sin(pos ω_i),
  // ω_i = θ^(−2i/dh), every factor in float32 as torch's RotaryEmbedding makes it; positions t0 … t0 + T − 1
  function rotate(x, n, T, dh, t0, omega) {
    const y = new Float32Array(x.length), half = dh / 2;
    for (let t = 0; t < T; t++) for (let i = 0; i < half; i++) {
      const angle = f32(f32(t0 + t) * omega[i]), c = f32(Math.cos(angle)), s = f32(Math.sin(angle));
      for (let h = 0; h < n; h++) {
        const o = (h * T + t) * dh, a = x[o + i], b = x[o + i + half];
        y[o + i] = f32(a * c) - f32(b * s);
        y[o + i + half] = f32(b * c) + f32(a * s);
      }
    }
    return y;
  }
  function frequencies(theta, dh) { // ω_i = 1 / θ^(2i/dh), (dh/2,)
    const omega = new Float32Array(dh / 2);
    for (let i = 0; i < dh / 2; i++) omega[i] = 1 / f32(Math.pow(theta, f32((2 * i) / dh)));
    return omega;
  }
  // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (paper §3.5), in float64
  function sinusoids(T, d, t0) {
    const pe = new Float32Array(T * d);
    for (let t = 0; t < T; t++) for (let i = 0; i < d; i += 2) {
      const angle = (t0 + t) / Math.pow(10000, i / d);
      pe[t * d + i] = Math.sin(angle);
      if (i + 1 < d) pe[t * d + i + 1] = Math.cos(angle);
    }
    return pe;
  }

  // Attention(Q, K, V) = softmax(QKᵀ/√d_k + M) V (paper §3.2.1) for every head. q (h, Tq, dh); k and v (hkv, cap,
  // dh) with Tk rows filled (a cache holds room for more); query head hh reads key/value head ⌊hh / (h/hkv)⌋
  // (grouped-query attention). M (Tq, Tk): 0 where a key may be seen, −∞ where not; a row with no key left gets
  // weights 0 and a zero context, as Python's. `keep`: return the four maps too.
  function attention(q, h, Tq, k, v, hkv, cap, Tk, dh, M, keep) {
    const group = h / hkv, root = Math.sqrt(dh), n = Tq * Tk;
    const maps = keep ? {scores: new Float32Array(h * n), scaled: new Float32Array(h * n),
      masked: new Float32Array(h * n), weights: new Float32Array(h * n)} : null;
    const w = keep ? null : new Float32Array(Tk), acc = new Float64Array(dh);
    const context = new Float32Array(h * Tq * dh);
    for (let hh = 0; hh < h; hh++) {
      const kv = Math.floor(hh / group) * cap * dh;
      for (let i = 0; i < Tq; i++) {
        const qo = (hh * Tq + i) * dh, row = hh * n + i * Tk;
        const s = keep ? maps.weights.subarray(row, row + Tk) : w;
        let top = -Infinity;
        for (let j = 0; j < Tk; j++) {
          const ko = kv + j * dh;
          let dot = 0;
          for (let e = 0; e < dh; e++) dot += q[qo + e] * k[ko + e];
          const scaled = f32(f32(dot) / root), masked = scaled + M[i * Tk + j]; // S/√d_k + M
          if (keep) { maps.scores[row + j] = dot; maps.scaled[row + j] = scaled; maps.masked[row + j] = masked; }
          s[j] = masked;
          if (masked > top) top = masked;
        }
        acc.fill(0);
        if (top === -Infinity) { s.fill(0); continue; } // every key masked: weights 0, context 0
        let sum = 0;
        for (let j = 0; j < Tk; j++) sum += (s[j] = Math.exp(s[j] - top)); // softmax, shifted by the row's largest
        for (let j = 0; j < Tk; j++) {
          const a = (s[j] = s[j] / sum), vo = kv + j * dh;
          if (a !== 0) for (let e = 0; e < dh; e++) acc[e] += a * v[vo + e];
        }
        context.set(acc, qo);
      }
    }
    return {context, maps};
  }
  function concat(context, h, T, dh) { // (h, T, dh) → (T, h·dh): Concat(head_1, …, head_h)
    const y = new Float32Array(T * h * dh);
    for (let hh = 0; hh < h; hh++) for (let t = 0; t < T; t++) {
      y.set(context.subarray((hh * T + t) * dh, (hh * T + t + 1) * dh), t * h * dh + hh * dh);
    }
    return y;
  }
  function softmaxRows(x, rows, n) {
    const y = new Float32Array(rows * n);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let top = -Infinity, sum = 0;
      for (let j = 0; j < n; j++) if (x[o + j] > top) top = x[o + j];
      for (let j = 0; j < n; j++) sum += Math.exp(x[o + j] - top);
      for (let j = 0; j < n; j++) y[o + j] = Math.exp(x[o + j] - top) / sum;
    }
    return y;
  }

  // ---- the model: the forward pass of scratchformer/transformer (model.py, layers.py, attention.py, …) ----------
  // c: model.py's config; W(name): a weight as Float32Array (null when the model has none of that name: a bias).
  // `rec(name, kind, dims, shape, data)`, when given, records each step as Python's tracer does.
  function model(c, W) {
    const d = c.d_model, h = c.n_heads, hkv = c.n_kv_heads, dh = c.d_head, dA = h * dh, dKV = hkv * dh;
    const omega = c.positional === "rotary" ? frequencies(c.rope_theta, dh) : null;
    const scale = c.scale_embedding ? f32(Math.sqrt(d)) : 1;
    const vocab = W("generator.proj.weight").length / d;
    const act = ACT[c.activation];
    const need = (name) => {
      const w = W(name);
      if (!w) throw new Error(`the weight ${name} is missing`);
      return w;
    };
    const B = (name) => W(name) || null; // a bias, if the model has one (Llama's layers have none)

    // ids → E[ids]·√d_model + PE (paper §3.4, §3.5); rotary models add nothing (PE = 0) and turn q, k instead
    function embed(side, ids, t0, rec) {
      const name = side === "src" ? "src_embed" : "tgt_embed", pos = side === "src" ? "src_pos" : "tgt_pos";
      const E = need(`${name}.tokens.weight`), T = ids.length, dims = ["batch", pos, "d_model"];
      const looked = new Float32Array(T * d); // (T, d_model)
      for (let t = 0; t < T; t++) looked.set(E.subarray(ids[t] * d, (ids[t] + 1) * d), t * d);
      let x = looked;
      if (scale !== 1) {
        x = new Float32Array(T * d);
        for (let i = 0; i < x.length; i++) x[i] = looked[i] * scale;
      }
      const pe = c.positional === "sinusoidal" ? sinusoids(T, d, t0) : new Float32Array(T * d); // (T, d_model)
      const sum = add(x, pe);
      if (rec) {
        rec(`${name}.tokens`, "tokens", ["batch", pos], [1, T], Float32Array.from(ids));
        rec(`${name}.lookup`, "embedding", dims, [1, T, d], looked);
        if (scale !== 1) rec(`${name}.scaled`, "embedding", dims, [1, T, d], x);
        rec(`${name}.positional_encoding`, "positional_encoding", [pos, "d_model"], [T, d], pe);
        rec(`${name}.sum`, "input", dims, [1, T, d], sum);
      }
      return sum;
    }
    // M (Tq, Tk): −∞ where query i (at position t0 + i) may not see key j: a padding key, or (causal) a later one
    function mask(Tq, Tk, t0, pad, causal) {
      const M = new Float32Array(Tq * Tk);
      for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
        if ((causal && j > t0 + i) || (pad && pad[j])) M[i * Tk + j] = -Infinity;
      }
      return M;
    }
    function recordMaps(rec, n, maps, M, shape, qd, kd) {
      const att = ["batch", "head", qd, kd];
      rec(`${n}.scores`, "scores", att, shape, maps.scores);
      rec(`${n}.scaled_scores`, "scaled_scores", att, shape, maps.scaled);
      rec(`${n}.mask`, "mask", ["batch", qd, kd], [1, shape[2], shape[3]], M);
      rec(`${n}.masked_scores`, "masked_scores", att, shape, maps.masked);
      rec(`${n}.weights`, "attention_weights", att, shape, maps.weights);
    }
    // Self-attention of T new positions t0 … t0 + T − 1; `cache` ({k, v, cap}: (hkv, cap, dh) each) holds the
    // keys and values of the positions before t0 and gains these. [Q K V] = X [W^Q W^K W^V] + b, one matrix.
    function selfAttention(n, x, T, t0, cache, pad, causal, rec, pos) {
      const width = dA + 2 * dKV;
      const qkv = linear(x, T, d, need(`${n}.qkv.weight`), B(`${n}.qkv.bias`), width); // (T, (h + 2h_kv)·d_k)
      const q = split(qkv, T, width, 0, h, dh), k = split(qkv, T, width, dA, hkv, dh); // (h, T, dh), (hkv, T, dh)
      const v = split(qkv, T, width, dA + dKV, hkv, dh);
      const qr = omega ? rotate(q, h, T, dh, t0, omega) : q, kr = omega ? rotate(k, hkv, T, dh, t0, omega) : k;
      for (let g = 0; g < hkv; g++) { // the new keys and values join the earlier ones
        cache.k.set(kr.subarray(g * T * dh, (g + 1) * T * dh), (g * cache.cap + t0) * dh);
        cache.v.set(v.subarray(g * T * dh, (g + 1) * T * dh), (g * cache.cap + t0) * dh);
      }
      const Tk = t0 + T, M = mask(T, Tk, t0, pad, causal);
      const {context, maps} = attention(qr, h, T, cache.k, cache.v, hkv, cache.cap, Tk, dh, M, Boolean(rec));
      const cat = concat(context, h, T, dh); // (T, h·d_k)
      const out = linear(cat, T, dA, need(`${n}.out_proj.weight`), B(`${n}.out_proj.bias`), d); // (T, d_model)
      if (rec) { // a traced pass starts at 0 with a cache of exactly T rows: cache.k is (hkv, T, dh)
        const heads = ["batch", "head", pos, "d_head"];
        const kHeads = ["batch", hkv !== h ? "kv_head" : "head", pos, "d_head"]; // grouped: fewer key/value heads
        rec(`${n}.qkv`, "qkv", ["batch", pos, "d_qkv"], [1, T, width], qkv);
        rec(`${n}.q`, "heads", heads, [1, h, T, dh], q);
        if (omega) rec(`${n}.q_rotated`, "rotary", heads, [1, h, T, dh], qr);
        rec(`${n}.k`, "heads", kHeads, [1, hkv, T, dh], k);
        if (omega) rec(`${n}.k_rotated`, "rotary", kHeads, [1, hkv, Tk, dh], cache.k);
        rec(`${n}.v`, "heads", kHeads, [1, hkv, Tk, dh], cache.v);
        recordMaps(rec, n, maps, M, [1, h, T, Tk], pos, pos);
        rec(`${n}.context`, "context", heads, [1, h, T, dh], context);
        rec(`${n}.concat`, "concat", ["batch", pos, "d_model"], [1, T, dA], cat);
        rec(`${n}.out`, "projection", ["batch", pos, "d_model"], [1, T, d], out);
      }
      return out;
    }
    // Cross-attention: Q = X_dec W^Q, [K V] = X_enc [W^K W^V] (made once per source: crossKeys)
    function crossKeys(n, memory, S) {
      const kv = linear(memory, S, d, need(`${n}.kv_proj.weight`), B(`${n}.kv_proj.bias`), 2 * dA); // (S, 2d)
      return {kv, k: split(kv, S, 2 * dA, 0, h, dh), v: split(kv, S, 2 * dA, dA, h, dh), S};
    }
    function crossAttention(n, x, T, mem, pad, rec) {
      const S = mem.S, qp = linear(x, T, d, need(`${n}.q_proj.weight`), B(`${n}.q_proj.bias`), dA); // (T, d)
      const q = split(qp, T, dA, 0, h, dh), M = mask(T, S, 0, pad, false);
      const {context, maps} = attention(q, h, T, mem.k, mem.v, h, S, S, dh, M, Boolean(rec));
      const cat = concat(context, h, T, dh);
      const out = linear(cat, T, dA, need(`${n}.out_proj.weight`), B(`${n}.out_proj.bias`), d);
      if (rec) {
        const qh = ["batch", "head", "tgt_pos", "d_head"], kh = ["batch", "head", "src_pos", "d_head"];
        rec(`${n}.q_proj`, "qkv", ["batch", "tgt_pos", "d_model"], [1, T, dA], qp);
        rec(`${n}.kv_proj`, "qkv", ["batch", "src_pos", "d_kv"], [1, S, 2 * dA], mem.kv);
        rec(`${n}.q`, "heads", qh, [1, h, T, dh], q);
        rec(`${n}.k`, "heads", kh, [1, h, S, dh], mem.k);
        rec(`${n}.v`, "heads", kh, [1, h, S, dh], mem.v);
        recordMaps(rec, n, maps, M, [1, h, T, S], "tgt_pos", "src_pos");
        rec(`${n}.context`, "context", qh, [1, h, T, dh], context);
        rec(`${n}.concat`, "concat", ["batch", "tgt_pos", "d_model"], [1, T, dA], cat);
        rec(`${n}.out`, "projection", ["batch", "tgt_pos", "d_model"], [1, T, d], out);
      }
      return out;
    }
    // FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (paper §3.3); gated: (act(x W_1) ⊙ x V) W_2 (SwiGLU with SiLU)
    function ffn(n, x, T, rec, pos) {
      const dff = c.d_ff, dims = ["batch", pos, "d_ff"];
      const gate = linear(x, T, d, need(`${n}.w_1.weight`), B(`${n}.w_1.bias`), dff); // (T, d_ff)
      for (let i = 0; i < gate.length; i++) gate[i] = act(gate[i]);
      let hidden = gate, lin = null;
      if (c.ffn_gated) {
        lin = linear(x, T, d, need(`${n}.w_v.weight`), B(`${n}.w_v.bias`), dff);
        hidden = new Float32Array(gate.length);
        for (let i = 0; i < gate.length; i++) hidden[i] = gate[i] * lin[i];
      }
      const out = linear(hidden, T, dff, need(`${n}.w_2.weight`), B(`${n}.w_2.bias`), d); // (T, d_model)
      if (rec) {
        if (lin) {
          rec(`${n}.gate`, "ffn_gate", dims, [1, T, dff], gate);
          rec(`${n}.linear`, "ffn_gate", dims, [1, T, dff], lin);
        }
        rec(`${n}.hidden`, "ffn_hidden", dims, [1, T, dff], hidden);
        rec(`${n}.out`, "ffn_out", ["batch", pos, "d_model"], [1, T, d], out);
      }
      return out;
    }
    // Add & Norm: post-LN LayerNorm(x + Sublayer(x)) (paper §3.1), or pre-norm x + Sublayer(Norm(x)) (Llama)
    function addNorm(n, x, T, sublayer, rec, pos) {
      const dims = ["batch", pos, "d_model"], shape = [1, T, d];
      const normed = (y) => norm(c.norm, y, T, d, need(`${n}.norm.weight`), B(`${n}.norm.bias`), c.eps);
      if (c.norm_first) {
        const before = normed(x);
        if (rec) rec(`${n}.norm`, "layer_norm", dims, shape, before);
        const out = add(x, sublayer(before));
        if (rec) rec(`${n}.residual`, "residual", dims, shape, out);
        return out;
      }
      const residual = add(x, sublayer(x));
      const out = normed(residual);
      if (rec) {
        rec(`${n}.residual`, "residual", dims, shape, residual);
        rec(`${n}.out`, "layer_norm", dims, shape, out);
      }
      return out;
    }
    function finalNorm(stack, weights, x, T, rec, pos) {
      if (!c.final_layer_norm) return x;
      const out = norm(c.norm, x, T, d, need(`${weights}.weight`), B(`${weights}.bias`), c.eps);
      if (rec) rec(`${stack}.final_norm.out`, "layer_norm", ["batch", pos, "d_model"], [1, T, d], out);
      return out;
    }
    const padOf = (ids, start) => { // True at the pad token (the decoder's start position never is)
      if (c.pad_id === null || c.pad_id === undefined) return null;
      return Uint8Array.from(ids, (id, j) => (id === c.pad_id && !(start && j === 0) ? 1 : 0));
    };
    const newCache = (cap) => Array.from({length: c.n_decoder_layers},
      () => ({k: new Float32Array(hkv * cap * dh), v: new Float32Array(hkv * cap * dh), cap}));

    // source ids (S,) → the encoder's output (S, d_model) and each decoder layer's cross-attention keys and values
    function encode(ids, rec) {
      const S = ids.length, pad = padOf(ids, false);
      let x = embed("src", ids, 0, rec);
      for (let i = 0; i < c.n_encoder_layers; i++) {
        const n = `encoder.${i}`;
        x = addNorm(`${n}.add_norm1`, x, S, (y) => selfAttention(`${n}.self_attn`, y, S, 0,
          {k: new Float32Array(hkv * S * dh), v: new Float32Array(hkv * S * dh), cap: S}, pad, false, rec, "src_pos"),
        rec, "src_pos");
        x = addNorm(`${n}.add_norm2`, x, S, (y) => ffn(`${n}.ffn`, y, S, rec, "src_pos"), rec, "src_pos");
      }
      x = finalNorm("encoder", "encoder_norm", x, S, rec, "src_pos");
      const layers = [];
      for (let i = 0; i < c.n_decoder_layers; i++) layers.push(crossKeys(`decoder.${i}.cross_attn`, x, S));
      return {S, pad, memory: x, layers};
    }
    // decoder input ids of positions t0 … (T,) → the decoder's output (T, d_model); `pad`: the keys never seen
    function decode(ids, t0, enc, cache, pad, rec) {
      const T = ids.length;
      let x = embed("tgt", ids, t0, rec);
      for (let i = 0; i < c.n_decoder_layers; i++) {
        const n = `decoder.${i}`;
        x = addNorm(`${n}.add_norm1`, x, T, (y) => selfAttention(`${n}.self_attn`, y, T, t0, cache[i], pad, true,
          rec, "tgt_pos"), rec, "tgt_pos");
        if (enc) x = addNorm(`${n}.add_norm2`, x, T, (y) => crossAttention(`${n}.cross_attn`, y, T, enc.layers[i],
          enc.pad, rec), rec, "tgt_pos");
        x = addNorm(`${n}.add_norm3`, x, T, (y) => ffn(`${n}.ffn`, y, T, rec, "tgt_pos"), rec, "tgt_pos");
      }
      return finalNorm("decoder", "decoder_norm", x, T, rec, "tgt_pos");
    }
    // logits = x W_vocab (the output layer, tied to the target embedding), P(next token) = softmax(logits)
    function generate(x, rows, rec) {
      const logits = linear(x, rows, d, need("generator.proj.weight"), null, vocab); // (rows, vocab)
      if (rec) {
        const dims = ["batch", "tgt_pos", "vocab"];
        rec("generator.logits", "logits", dims, [1, rows, vocab], logits);
        rec("generator.probs", "probabilities", dims, [1, rows, vocab], softmaxRows(logits, rows, vocab));
      }
      return logits;
    }
    return {encode, decode, generate, newCache, padOf, vocab};
  }

  window.sfLiveCore = {linear, norm, ACT, add, split, rotate, frequencies, sinusoids, attention, concat, softmaxRows,
    model};
})();
