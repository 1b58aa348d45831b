// tstat's report page and live dashboard: draws the data block
// (tools/report/report_data.h) with uPlot; with "live" in the data (tstat
// serve) it fetches data.json every interval and redraws on new data. Every name from the run is set as text (textContent), never
// parsed as HTML. What was drawn is summarised in #tstat-check (charts,
// their series and points, heat maps, errors) for the browser tests.
(function () {
  "use strict";
  const check = { charts: [], heatmaps: [], tables: 0, errors: [] };
  window.addEventListener("error", (e) => {
    check.errors.push(String(e.message));
    document.getElementById("tstat-check").textContent = JSON.stringify(check);
  });
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
  // Normal ranges of the low-precision formats: [smallest normal, largest finite] as log2.
  const FORMATS = [
    { name: "fp16", lo: -14, hi: Math.log2(65504), color: "#d62728" },
    { name: "bf16", lo: -126, hi: Math.log2(3.3895e38), color: "#2ca02c" },
    { name: "fp8 e4m3", lo: -6, hi: Math.log2(448), color: "#9467bd" },
    { name: "fp8 e5m2", lo: -14, hi: Math.log2(57344), color: "#ff7f0e" },
  ];

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "string") return v;
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(+v.toPrecision(4));
  }
  function table(parent, head, rows, numeric) {
    const t = el("table");
    const tr = el("tr");
    head.forEach((h) => tr.appendChild(el("th", h)));
    t.appendChild(tr);
    rows.forEach((r) => {
      const row = el("tr");
      r.forEach((c, i) => {
        const td = c instanceof Node ? el("td") : el("td", fmt(c), numeric && numeric[i] ? "num" : "");
        if (c instanceof Node) td.appendChild(c);
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    parent.appendChild(t);
    check.tables++;
    return t;
  }
  function anchor(name) {
    return "t-" + Array.from(new TextEncoder().encode(name)).map((b) => b.toString(16)).join("");
  }

  // One chart of several series with their own steps, on the union of steps.
  function chart(parent, title, lines, opts) {
    opts = opts || {};
    const xs = Array.from(new Set(lines.flatMap((l) => l.x))).sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const data = [xs];
    lines.forEach((l) => {
      const ys = new Array(xs.length).fill(null);
      l.x.forEach((x, i) => {
        let y = l.y[i];
        if (y === null || !isFinite(y) || (opts.log && y <= 0)) y = null;
        ys[index.get(x)] = y;
      });
      data.push(ys);
    });
    const box = el("div", null, "chart");
    parent.appendChild(box);
    const markers = opts.markers || [];
    const u = new uPlot({
      title: title, width: opts.width || 560, height: opts.height || 240,
      scales: { x: { time: false }, y: opts.log ? { distr: 3 } : {} },
      series: [{ label: "step" }].concat(lines.map((l, i) => ({
        label: l.label, stroke: l.color || COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
        fill: l.fill, points: { show: l.x.length < 60 },
      }))),
      bands: opts.bands,
      hooks: { draw: [(u) => {
        const ctx = u.ctx;
        markers.forEach((m) => {
          const px = u.valToPos(m.step, "x", true);
          if (!isFinite(px) || px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
          ctx.save();
          ctx.strokeStyle = m.color || "#b00020";
          ctx.setLineDash([4, 3]);
          ctx.beginPath();
          ctx.moveTo(px, u.bbox.top);
          ctx.lineTo(px, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.restore();
        });
      }] },
    }, data, box);
    check.charts.push({ title: title, series: lines.map((l) => ({ label: l.label, points: l.x.length })),
                        markers: markers.length });
    return u;
  }

  function heatmap(parent, h) {
    const cols = h.counts.length, rows = h.counts[0].length;
    const cw = Math.max(2, Math.min(6, Math.floor(560 / cols))), rh = Math.max(2, Math.min(8, Math.floor(240 / rows)));
    const left = 44, bottom = 18;
    const canvas = el("canvas", null, "heatmap");
    canvas.width = left + cols * cw + 80;
    canvas.height = rows * rh + bottom + 4;
    const box = el("div", null, "chart");
    box.appendChild(el("div", h.name + ": exponent histogram (log2 |x|) over steps", "legend-line"));
    box.appendChild(canvas);
    parent.appendChild(box);
    const ctx = canvas.getContext("2d");
    const y0 = rows * rh;
    h.counts.forEach((col, c) => {
      const total = col.reduce((a, b) => a + b, 0) || 1;
      col.forEach((n, r) => {
        if (n === 0) return;
        const f = Math.log1p(999 * n / total) / Math.log(1000);  // 0..1
        ctx.fillStyle = "rgb(" + Math.round(255 - 225 * f) + "," + Math.round(255 - 160 * f) + "," + Math.round(255 - 60 * f) + ")";
        ctx.fillRect(left + c * cw, y0 - (r + 1) * rh, cw, rh);
      });
    });
    ctx.fillStyle = "#1d2330";
    ctx.font = "10px sans-serif";
    for (let r = 0; r < rows; r += Math.max(1, Math.ceil(12 / rh))) {
      ctx.fillText(String(h.first_exp + r), 4, y0 - r * rh - 1);
    }
    ctx.fillText("step " + h.steps[0], left, y0 + 13);
    ctx.fillText(String(h.steps[h.steps.length - 1]), left + cols * cw - 30, y0 + 13);
    let drawn = 0;
    FORMATS.forEach((f, i) => {
      [f.lo, f.hi].forEach((e, k) => {
        const y = y0 - (e - h.first_exp) * rh;
        if (y < 0 || y > y0) return;
        ctx.strokeStyle = f.color;
        ctx.setLineDash(k ? [] : [3, 2]);
        ctx.beginPath();
        ctx.moveTo(left, y);
        ctx.lineTo(left + cols * cw, y);
        ctx.stroke();
        ctx.fillStyle = f.color;
        ctx.fillText(f.name + (k ? " max" : " min"), left + cols * cw + 4, y + 3 + 10 * (i % 2));
        drawn++;
      });
    });
    check.heatmaps.push({ name: h.name, steps: cols, bins: rows, format_lines: drawn });
  }

  function episodeMarkers(run, names) {
    return run.episodes.filter((e) => !names || names.includes(e.tensor) || e.tensor === "")
      .map((e) => ({ step: e.first_global_step, color: e.severity === "critical" ? "#b00020" : "#b9770e" }));
  }

  function renderRun(run, root) {
    const sec = el("section", null, "run");
    root.appendChild(sec);
    sec.appendChild(el("h2", "Run " + run.name));
    sec.appendChild(el("p", run.path + (run.complete ? " (complete)" : " (still being written, or its writer died)"), "note"));
    if (run.problem) sec.appendChild(el("p", run.problem, "bad"));

    sec.appendChild(el("h3", "Health"));
    table(sec, ["worker", "host", "closed", "segments", "bytes", "steps", "records", "lost", "raw dropped", "write errors", "queue waits", "capture overhead"],
      run.workers.map((w) => [w.rank, w.host, w.closed ? "yes" : "no", w.segments, w.bytes, w.steps_captured, w.records_written,
        w.records_lost, w.raw_dropped, w.write_errors, w.stats_waits,
        w.step_seconds > 0 ? (100 * w.capture_seconds / w.step_seconds).toFixed(2) + "%" : ""]),
      [true, false, false, true, true, true, true, true, true, true, true, true]);
    table(sec, ["mode", "steps saved", "first", "last"], run.modes.map((m) => [m.mode, m.count, m.first, m.last]), [false, true, true, true]);
    if (run.could_not_judge.length) {
      sec.appendChild(el("p", "Rules that could not judge:", "note"));
      const ul = el("ul");
      run.could_not_judge.forEach((w) => ul.appendChild(el("li", w, "note")));
      sec.appendChild(ul);
    }
    if (run.notes && run.notes.length) {
      sec.appendChild(el("p", "Recognised and not reported:", "note"));
      const ul = el("ul");
      run.notes.forEach((n) => ul.appendChild(el("li", n, "note")));
      sec.appendChild(ul);
    }

    sec.appendChild(el("h3", "Findings (" + run.episodes.length + ")"));
    if (run.episodes.length) {
      table(sec, ["rule", "severity", "tensor", "mode", "first step", "last step", "steps", "message"],
        run.episodes.map((e) => {
          const link = el("a", e.tensor);
          link.href = "#" + anchor(e.tensor);
          const sev = el("span", e.severity, "sev-" + e.severity);
          return [e.rule, sev, link, e.mode, e.first_global_step, e.last_global_step, e.steps, e.message];
        }));
    } else {
      sec.appendChild(el("p", "No rule recorded a finding.", "note"));
    }

    const byName = new Map();
    run.series.forEach((s) => byName.set(s.id, s));
    const scalarNames = Array.from(new Set(run.series.filter((s) => s.kind === "scalar" || s.kind === "loss").map((s) => s.name)));
    sec.appendChild(el("h3", "Losses and scalars"));
    const sc = el("div", null, "charts");
    sec.appendChild(sc);
    scalarNames.forEach((name) => {
      const lines = run.series.filter((s) => s.name === name && (s.kind === "scalar" || s.kind === "loss"))
        .map((s) => ({ label: s.mode, x: s.x, y: s.y }));
      chart(sc, name, lines, { markers: episodeMarkers(run) });
    });
    if (!scalarNames.length) sec.appendChild(el("p", "No losses or scalars were saved.", "note"));

    sec.appendChild(el("h3", "Layers, most unusual gradient norm first"));
    const lc = el("div", null, "charts");
    sec.appendChild(lc);
    run.layers.forEach((l) => {
      if (!l.weight) return;
      const lines = [];
      const w = byName.get(l.weight), g = byName.get(l.gradient);
      const up = byName.get(l.update), ratio = byName.get(l.ratio);
      if (g) lines.push({ label: "gradient l2", x: g.x, y: g.y });
      if (w) lines.push({ label: "weight l2", x: w.x, y: w.y });
      if (up) lines.push({ label: "update l2", x: up.x, y: up.y });
      if (ratio) lines.push({ label: "update / weight", x: ratio.x, y: ratio.y });
      const u = chart(lc, l.name, lines, { log: true, markers: episodeMarkers(run, [l.name, "gradient/" + l.name]) });
      u.root.id = anchor(l.name);
    });
    table(sec, ["layer", "unusual (log10 of max / median)", "non-finite from step", "weight l2 (last)", "gradient l2 (last)", "steps"],
      run.layers.map((l) => [l.name, l.score, l.first_nonfinite_step >= 0 ? l.first_nonfinite_step : "",
        l.weight_l2, l.gradient_l2, l.steps]), [false, true, true, true, true, true]);

    if (run.activations.length) {
      sec.appendChild(el("h3", "Activations: shares of zero and saturated values, and of dead and saturated units (where per-unit stats were captured), most first"));
      const ac = el("div", null, "charts");
      sec.appendChild(ac);
      run.activations.forEach((a) => {
        const z = byName.get(a.zero), b = byName.get(a.band);
        const d = byName.get(a.dead_units), s = byName.get(a.saturated_units);
        if (!z) return;
        const lines = [{ label: "zero values", x: z.x, y: z.y }, { label: "saturated values", x: b.x, y: b.y }];
        if (d) lines.push({ label: "dead units", x: d.x, y: d.y }, { label: "saturated units", x: s.x, y: s.y });
        const u = chart(ac, a.name, lines, { markers: episodeMarkers(run, [a.name]) });
        if (!u.root.id) u.root.id = anchor(a.name);
      });
      table(sec, ["activation", "zero share (last)", "saturated share (last)"],
        run.activations.map((a) => [a.name, a.zero_last, a.band_last]), [false, true, true]);
    }
    if (run.heatmaps.length) {
      sec.appendChild(el("h3", "Dynamic range (exponent histograms) against fp16, bf16 and fp8"));
      const hc = el("div", null, "charts");
      sec.appendChild(hc);
      run.heatmaps.forEach((h) => heatmap(hc, h));
    }
    if (run.bands.length) {
      // TensorBoard's distributions view draws the 0, 6.7, 15.9, 30.9, 50, 69.1, 84.1, 93.3 and
      // 100th percentiles; for normally distributed values those are the min, mean + k std for
      // k = -1.5 ... 1.5 and the max, which is what the stats give (clamped to [min, max]).
      sec.appendChild(el("h3", "Distributions over steps (min, mean ± 0.5, 1, 1.5 std, max: TensorBoard's percentiles for normal values)"));
      const bc = el("div", null, "charts");
      sec.appendChild(bc);
      run.bands.forEach((b) => {
        const at = (k) => b.mean.map((m, i) => (m === null || b.std[i] === null ? null
          : Math.min(b.max[i], Math.max(b.min[i], m + k * b.std[i]))));
        const light = "#9db4d3", mid = "#6f95c8", dark = "#4f7cba";
        const u = chart(bc, b.name, [
          { label: "max", x: b.x, y: b.max, color: light },
          { label: "+1.5 std", x: b.x, y: at(1.5), color: mid },
          { label: "+1 std", x: b.x, y: at(1), color: dark },
          { label: "+0.5 std", x: b.x, y: at(0.5), color: dark },
          { label: "mean", x: b.x, y: b.mean, color: "#1d2330" },
          { label: "-0.5 std", x: b.x, y: at(-0.5), color: dark },
          { label: "-1 std", x: b.x, y: at(-1), color: dark },
          { label: "-1.5 std", x: b.x, y: at(-1.5), color: mid },
          { label: "min", x: b.x, y: b.min, color: light },
        ], { bands: [
          { series: [1, 9], fill: "rgba(79,124,186,0.08)" },
          { series: [2, 8], fill: "rgba(79,124,186,0.12)" },
          { series: [3, 7], fill: "rgba(79,124,186,0.16)" },
          { series: [4, 6], fill: "rgba(79,124,186,0.22)" },
        ] });
        if (!u.root.id) u.root.id = anchor(b.name);
      });
    }
    if (run.labels.length) {
      sec.appendChild(el("h3", "Labels"));
      run.labels.forEach((l) => {
        sec.appendChild(el("p", l.name + " at step " + l.step, "note"));
        table(sec, ["class"].concat(l.counts.map((_, i) => String(i))), [["count"].concat(l.counts)]);
        if (l.confusion) {
          const k = l.confusion.classes, rows = [];
          for (let r = 0; r < k; r++) rows.push(["label " + r].concat(l.confusion.counts.slice(r * k, r * k + k)));
          table(sec, ["confusion"].concat(Array.from({ length: k }, (_, i) => "pred " + i)), rows);
          if (l.confusion.invalid) sec.appendChild(el("p", l.confusion.invalid + " sample(s) without a valid prediction (NaN logits, or a label out of range)", "bad"));
        }
      });
    }
  }

  function renderComparison(data, root) {
    const sec = el("section", null, "run");
    root.appendChild(sec);
    sec.appendChild(el("h2", "Comparison of " + data.runs.length + " runs, by step"));
    const cc = el("div", null, "charts");
    sec.appendChild(cc);
    const keys = new Set();
    data.runs.forEach((r) => r.series.forEach((s) => { if (s.kind === "scalar" || s.kind === "loss") keys.add(s.name + "\u0000" + s.mode); }));
    keys.forEach((key) => {
      const [name, mode] = key.split("\u0000");
      const lines = [];
      data.runs.forEach((r) => r.series.forEach((s) => {
        if (s.name === name && s.mode === mode && (s.kind === "scalar" || s.kind === "loss")) lines.push({ label: r.name, x: s.x, y: s.y });
      }));
      if (lines.length > 1) chart(cc, name + " (" + mode + ")", lines);
    });
  }

  // The last step of any series of the data (what a live page has shown).
  function lastStep(data) {
    let last = -1;
    data.runs.forEach((r) => r.series.forEach((s) => { if (s.x.length) last = Math.max(last, s.x[s.x.length - 1]); }));
    return last;
  }

  function render(data) {
    const root = document.getElementById("report");
    root.textContent = "";
    check.charts = [];
    check.heatmaps = [];
    check.tables = 0;
    const live = data.live ? " (live: updated every " + data.live.interval_ms / 1000 + " s)" : "";
    document.getElementById("generated").textContent = "Generated " + data.generated + " by tstat" + live;
    if (data.runs.length > 1) renderComparison(data, root);
    data.runs.forEach((r) => renderRun(r, root));
    check.renders = (check.renders || 0) + 1;
    check.last_steps = (check.last_steps || []).concat([lastStep(data)]);
    if (check.first_render_ms === undefined) check.first_render_ms = performance.now();
    // How old the data was when drawn (the page and the server share a clock).
    check.staleness_s = (check.staleness_s || []).concat([Date.now() / 1000 - data.generated_unix]);
    document.getElementById("tstat-check").textContent = JSON.stringify(check);
  }

  // The dashboard (tstat serve): asks for data.json every interval and
  // redraws when the server built new data.
  function poll(data) {
    let revision = data.live.revision;
    const status = el("p", "", "note");
    document.querySelector("header").appendChild(status);
    const tick = () => {
      fetch("data.json", { cache: "no-store" }).then((r) => {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      }).then((next) => {
        status.textContent = "";
        if (next.live && next.live.revision !== revision) {
          revision = next.live.revision;
          render(next);
        }
      }).catch((e) => {
        status.textContent = "tstat serve is not answering (" + e.message + "); retrying";
      }).finally(() => setTimeout(tick, data.live.interval_ms / 2));
    };
    setTimeout(tick, data.live.interval_ms / 2);
  }

  try {
    const data = JSON.parse(document.getElementById("tstat-data").textContent);
    render(data);
    if (data.live) poll(data);
  } catch (e) {
    check.errors.push(String(e && e.stack || e));
    document.getElementById("tstat-check").textContent = JSON.stringify(check);
  }
})();
