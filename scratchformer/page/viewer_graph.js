// The page's attribution graph (scratchformer/page/graph.py): an SVG of the nodes and edges the window's Graph
// view draws (plotdata.graph_layout), the threshold slider choosing among the prunings written into the page, and
// a node's numbers on hover or tap. viewer.js calls window.sfGraph(index.graph) once the index is read.
(function () {
  "use strict";
  const NS = (() => { // SVG's namespace, as the HTML parser gives an <svg> element (the page writes no address)
    const probe = document.createElement("div");
    probe.innerHTML = "<svg></svg>";
    return probe.firstChild.namespaceURI;
  })();
  const $ = (id) => document.getElementById(id);

  function svg(tag, attrs) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }
  function rgba(rgb, alpha) { return `rgba(${rgb[0]},${rgb[1]},${rgb[2]},${(alpha / 255).toFixed(3)})`; }

  function marker(kind, x, y, r) { // the Graph view's symbols: circle, diamond, square, pentagon, hexagon
    if (kind === "feature") return svg("circle", { cx: x, cy: y, r });
    const sides = { error: 4, embedding: 4, logit: 5, group: 6 }[kind] || 4;
    const turn = kind === "embedding" ? Math.PI / 4 : -Math.PI / 2;
    const pts = [];
    for (let k = 0; k < sides; k++) {
      const a = turn + (2 * Math.PI * k) / sides;
      pts.push(`${(x + r * 1.15 * Math.cos(a)).toFixed(1)},${(y + r * 1.15 * Math.sin(a)).toFixed(1)}`);
    }
    return svg("polygon", { points: pts.join(" ") });
  }

  window.sfGraph = function (G) {
    const box = $("sf-graph-box"), host = $("sf-graph"), readout = $("sf-graph-readout"), slider = $("sf-graph-threshold");
    box.hidden = false;
    $("sf-graph-head").textContent = `${G.title} · replacement score ${G.scores.replacement.toFixed(3)}, completeness ${G.scores.completeness.toFixed(3)}` + (G.notes.length ? ` · ${G.notes.join(" ")}` : "");
    slider.max = String(G.levels.length - 1);
    slider.value = String(G.default);
    let chosen = -1;

    function draw() {
      const level = G.levels[+slider.value];
      $("sf-graph-share").textContent = `${Math.round(level.threshold * 100)} %`;
      const xs = G.nodes.map((n) => n.x), ys = G.nodes.map((n) => n.y);
      for (const p of G.panels) { xs.push(p.x0, p.x1); ys.push(p.y0, p.y1); }
      const x0 = Math.min(...xs) - 0.3, x1 = Math.max(...xs) + 0.3, y0 = Math.min(...ys) - 0.2, y1 = Math.max(...ys) + 0.4;
      const W = Math.max(360, Math.min(host.clientWidth || 800, 1100)), H = Math.max(260, Math.min(560, 90 * (y1 - y0)));
      const left = 70, bottom = 46, top = 10, right = 10;
      const px = (x) => left + ((x - x0) / (x1 - x0)) * (W - left - right);
      const py = (y) => top + ((y1 - y) / (y1 - y0)) * (H - top - bottom);
      const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": G.title });
      for (const p of G.panels) {
        root.append(svg("rect", { x: px(p.x0), y: py(p.y1), width: px(p.x1) - px(p.x0), height: py(p.y0) - py(p.y1), class: "sf-graph-panel" }));
        const t = svg("text", { x: px(p.x0) + 4, y: H - 6, class: "sf-graph-axis" });
        t.textContent = p.title;
        root.append(t);
      }
      for (const [y, name] of G.rows) {
        const t = svg("text", { x: left - 6, y: py(y) + 4, "text-anchor": "end", class: "sf-graph-axis" });
        t.textContent = name;
        root.append(t);
      }
      for (const [x, token] of G.columns) {
        const t = svg("text", { x: px(x), y: H - bottom + 16, "text-anchor": "middle", class: "sf-graph-axis" });
        t.textContent = token;
        root.append(t);
      }
      const shown = new Set(level.nodes), lines = svg("g", { class: "sf-graph-edges" });
      for (const k of level.edges) {
        const [s, d, w, b] = G.edges[k];
        if (!shown.has(s) || !shown.has(d)) continue;
        const line = svg("line", { x1: px(G.nodes[s].x), y1: py(G.nodes[s].y), x2: px(G.nodes[d].x), y2: py(G.nodes[d].y),
          stroke: rgba(w >= 0 ? G.style.positive : G.style.negative, G.style.alphas[b]), "stroke-width": G.style.widths[b] });
        line.dataset.s = s; line.dataset.d = d;
        lines.append(line);
      }
      root.append(lines);
      const marks = svg("g", { class: "sf-graph-nodes" });
      for (const i of level.nodes) {
        const n = G.nodes[i];
        const m = marker(n.kind, px(n.x), py(n.y), n.size / 2);
        m.setAttribute("fill", rgba(G.style.nodes[n.kind] || [100, 100, 100], 235));
        m.setAttribute("stroke", i === chosen ? "#000" : "#fff");
        m.dataset.node = i;
        const title = svg("title");
        title.textContent = n.text.split("\n")[0];
        m.append(title);
        marks.append(m);
        if (n.label && (n.kind !== "feature" || n.influence >= 0.05)) {
          const t = svg("text", { x: px(n.x), y: py(n.y) - n.size / 2 - 3, "text-anchor": "middle", class: "sf-graph-label" });
          t.textContent = n.label;
          marks.append(t);
        }
      }
      root.append(marks);
      host.replaceChildren(root);
      host.dataset.nodes = String(marks.querySelectorAll("[data-node]").length);
      host.dataset.edges = String(lines.childElementCount);
      host.dataset.threshold = String(level.threshold);
      $("sf-graph-kept").textContent = `: ${host.dataset.nodes} of ${G.total} nodes and ${host.dataset.edges} edges kept, carrying ${(level.kept_influence * 100).toFixed(1)} % of the influence (of the edges among them, those carrying ${Math.round((G.edge_threshold ?? 0.98) * 100)} % of it)`;
    }

    function say(i) {
      chosen = i;
      readout.textContent = G.nodes[i].text;
      host.querySelectorAll("[data-node]").forEach((m) => m.setAttribute("stroke", +m.dataset.node === i ? "#000" : "#fff"));
      host.querySelectorAll(".sf-graph-edges line").forEach((l) => l.classList.toggle("faint", +l.dataset.s !== i && +l.dataset.d !== i));
    }
    host.addEventListener("mouseover", (e) => { const m = e.target.closest("[data-node]"); if (m) say(+m.dataset.node); });
    host.addEventListener("click", (e) => { const m = e.target.closest("[data-node]"); if (m) say(+m.dataset.node); });
    host.addEventListener("mouseleave", () => host.querySelectorAll(".sf-graph-edges line.faint").forEach((l) => l.classList.remove("faint")));
    slider.addEventListener("input", () => { draw(); if (chosen >= 0 && G.levels[+slider.value].nodes.includes(chosen)) say(chosen); });
    box.addEventListener("toggle", () => { if (box.open) draw(); });
    draw();
  };
})();
