// scratchformer's page: reading the data packed inline (scratchformer/page/packing.py), written once for every page
// and every part of it. A value chunk is base64 of gzip of its bytes laid out in planes (every value's first byte,
// then every second byte, …), float16 ("f16") or float32; the index and a live page's model are base64 of gzipped
// JSON. The browser's own DecompressionStream inflates them; nothing is fetched.
"use strict";
(() => {
  function base64Bytes(text) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
    const bin = atob(text), out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  let halfTable = null; // every float16 bit pattern → its value (IEEE 754 binary16)
  function half() {
    if (halfTable) return halfTable;
    halfTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 31, frac = h & 1023;
      halfTable[h] = exp === 0 ? sign * frac * 2 ** -24
        : exp === 31 ? (frac ? NaN : sign * Infinity)
        : sign * (1 + frac / 1024) * 2 ** (exp - 15);
    }
    return halfTable;
  }
  // The bytes come in planes: put each value back together.
  function unshuffle(bytes, dtype) {
    if (dtype === "f16") {
      const n = bytes.length / 2, table = half(), out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = table[bytes[i] | (bytes[n + i] << 8)];
      return out;
    }
    const n = bytes.length / 4, raw = new Uint8Array(bytes.length);
    for (let i = 0; i < n; i++) for (let b = 0; b < 4; b++) raw[4 * i + b] = bytes[b * n + i];
    return new Float32Array(raw.buffer);
  }
  window.sfUnpack = {
    base64Bytes, gunzip, unshuffle,
    values: async (text, dtype) => unshuffle(await gunzip(base64Bytes(text)), dtype), // a chunk → Float32Array
    json: async (text) => JSON.parse(new TextDecoder().decode(await gunzip(base64Bytes(text)))), // → its object
  };
})();
