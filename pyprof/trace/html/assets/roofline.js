// pyprof report: the roofline of each trace that carries FLOPs, drawn with the vendored uPlot on
// log-log axes. The values are Python's (pyprof/trace/html/roofview.py: the points of
// pyprof.attribution.roofline); here they are only placed: one point per (operator, input shape)
// group, and each roof min(peak, FLOP/byte * copy GB/s) as a line (DRAM's copy under each compute
// peak, then each measured cache's under the best peak, dotted), with a table of the values. A
// group above its roof (Python's point.above, over view.above_factor) is drawn again in red, marked
// in the table with its note, and listed under it (view.above, Python's text).
"use strict";
var PyprofRoofline = (function () {
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var ABOVE = "#d62728", MARK = "\u25b2 above";

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v, f) { return v === null || v === undefined ? "-" : PyprofTimeline.fixed(v, f); }
  function dims(d) { return d === null || d === undefined ? "-" : JSON.stringify(d); }

  function caches(view) { return view.cache_roofs || []; }
  function best(view) { return Math.max.apply(null, view.roofs.map(function (r) { return r.gflops; })); }

  // uPlot's data: one x per point (sorted; equal x kept), then the roofs' corners and ends; the
  // series: x, the groups, the compute roofs, the cache roofs, the groups above their roof.
  function chartData(view) {
    var pts = view.points.map(function (p, i) { return { x: p.intensity, y: p.gflops_per_s, i: i }; });
    pts.sort(function (a, b) { return a.x - b.x || a.i - b.i; });
    var bw = view.peaks ? view.peaks.copy_gbs : null, xs = pts.map(function (p) { return p.x; });
    var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs), extra = [];
    if (bw !== null) view.roofs.forEach(function (r) { extra.push(r.gflops / bw); });
    if (view.peaks) caches(view).forEach(function (c) { extra.push(best(view) / c.gbs); });
    lo = Math.min.apply(null, [lo].concat(extra)) / 4; hi = Math.max.apply(null, [hi].concat(extra)) * 4;
    extra.push(lo, hi);
    var rows = pts.map(function (p) { return { x: p.x, point: p }; })
      .concat(extra.map(function (x) { return { x: x, point: null }; }));
    rows.sort(function (a, b) { return a.x - b.x; });
    var data = [rows.map(function (r) { return r.x; }),
                rows.map(function (r) { return r.point ? r.point.y : null; })];
    var order = rows.map(function (r) { return r.point ? r.point.i : -1; });
    view.roofs.forEach(function (roof) {
      data.push(rows.map(function (r) { return Math.min(roof.gflops, r.x * bw); }));
    });
    if (view.peaks) caches(view).forEach(function (c) {
      data.push(rows.map(function (r) { return Math.min(best(view), r.x * c.gbs); }));
    });
    if (view.peaks) data.push(rows.map(function (r) {  // without roofs, nothing is above
      return r.point && view.points[r.point.i].above ? r.point.y : null;
    }));
    return { data: data, order: order };
  }

  function table(view) {
    var t = el("table", { "class": "roofline" }), hr = el("tr");
    ["operator", "device", "input dims", "calls", "FLOP/byte", "GFLOP/s", "GB/s", "roof (GFLOP/s)",
     "roof (%)", "bound", "mark"].forEach(function (h) { hr.appendChild(el("th", null, h)); });
    var head = el("thead"); head.appendChild(hr); t.appendChild(head);
    var body = el("tbody");
    view.points.forEach(function (p) {
      var tr = el("tr", { "data-name": p.name, "data-dims": JSON.stringify(p.input_dims),
        "data-intensity": p.intensity, "data-gflops": p.gflops_per_s });
      if (p.above) tr.className = "above";
      [[p.name, "s"], [p.device || "host", "s"], [dims(p.input_dims), "s"], [p.count, "n"],
       [num(p.intensity, 3), "n"], [num(p.gflops_per_s, 3), "n"], [num(p.gb_per_s, 3), "n"],
       [num(p.roof_gflops, 3), "n"], [num(p.roof_pct, 1), "n"],
       [p.bound === null ? "-" : p.bound + " (" + (p.bound === "compute" ? p.peak : p.memory_roof) + ")", "s"]]
        .forEach(function (c) { tr.appendChild(el("td", { "class": c[1] }, c[0])); });
      var mark = el("td", { "class": "s mark" }, p.above ? MARK : "");
      if (p.above) mark.title = p.above_note;
      tr.appendChild(mark);
      body.appendChild(tr);
    });
    t.appendChild(body);
    return t;
  }

  // Draw one trace's roofline into host; returns {chart, order, view}.
  function draw(view, label, host) {
    if (label) host.appendChild(el("h3", null, label));
    var box = el("div", { "class": "roofline-chart" });
    host.appendChild(box);
    var cd = chartData(view);
    var log = { distr: 3, log: 10 };
    var series = [{ label: "FLOP/byte" }, { label: "groups", stroke: PALETTE[0], fill: PALETTE[0],
      paths: function () { return null; }, points: { show: true, size: 8, fill: PALETTE[0] } }];
    view.roofs.forEach(function (r, i) {
      series.push({ label: r.name + " roof " + PyprofTimeline.fixed(r.gflops, 1) + " GFLOP/s, copy " +
        PyprofTimeline.fixed(view.peaks.copy_gbs, 1) + " GB/s", stroke: "#222", width: 1.2, dash: i ? [6, 4] : undefined,
        spanGaps: true, points: { show: false } });
    });
    if (view.peaks) caches(view).forEach(function (c) {
      series.push({ label: c.name + " copy " + PyprofTimeline.fixed(c.gbs, 1) + " GB/s", stroke: "#777",
        width: 1.2, dash: [2, 3], spanGaps: true, points: { show: false } });
    });
    if (view.peaks) series.push({ label: "above the roof (over " + view.above_factor + "x)", stroke: ABOVE, fill: ABOVE,
      paths: function () { return null; }, points: { show: true, size: 12, fill: ABOVE, stroke: ABOVE } });
    var opts = { width: host.clientWidth || 800, height: 320, scales: { x: Object.assign({ time: false }, log), y: log },
      axes: [{ label: "arithmetic intensity (FLOP/byte)" }, { label: "achieved GFLOP/s" }], series: series };
    var chart = new uPlot(opts, cd.data, box);
    if (view.note) host.appendChild(el("p", { "class": "note roofline-note" }, view.note));
    if (view.left_out) host.appendChild(el("p", { "class": "help" }, view.left_out +
      " operator group(s) without FLOPs or bytes left out (copies, operators flops.json has no formula for)"));
    host.appendChild(table(view));
    if (view.above && view.above.length) {  // the groups above their roof, each with its note
      host.appendChild(el("p", { "class": "roofline-above-title" }, MARK + " the roof: " + view.above.length +
        " group" + (view.above.length === 1 ? "" : "s") + " over " + view.above_factor + "x"));
      var ul = el("ul", { "class": "roofline-above" });
      view.above.forEach(function (t) { ul.appendChild(el("li", null, t)); });
      host.appendChild(ul);
    }
    if (view.bookkeeping && view.bookkeeping.length) {  // the engine's own work: never a point
      host.appendChild(el("p", { "class": "help roofline-bookkeeping" }, view.bookkeeping_title + ": " +
        view.bookkeeping.map(function (b) {
          return b.name + (b.device ? " (" + b.device + ")" : "") + " " + num(b.total_us / 1e3, 3) + " ms, " +
            b.count + " call" + (b.count === 1 ? "" : "s");
        }).join("; ")));
    }
    return { chart: chart, order: cd.order, view: view };
  }

  return { draw: draw, chartData: chartData };
})();
