// pyprof report: reads the data the Python side embedded (summaries and diff as JSON, each file's
// timeline gzip-compressed and base64-encoded), inflates it with DecompressionStream, and builds
// the page: notes, timeline, memory chart (uPlot), operator tables, diff table, slice details.
"use strict";
(function () {
  var state = window.pyprofReport = { ready: false, errors: [] };
  var t = PyprofTimeline;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var fixed = t.fixed;  // x with f decimals as Python formats it
  function ms(us) { return us === null || us === undefined ? "-" : fixed(us / 1e3, 3); }
  function jsonOf(id) { return JSON.parse(document.getElementById(id).textContent); }

  async function inflate(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  // Text in code-point order, as Python (summarize --sort name) sorts it; < on strings compares
  // UTF-16 units, which puts characters beyond U+FFFF before U+E000..U+FFFF.
  function cmpText(a, b) {
    var i = 0, j = 0;
    while (i < a.length && j < b.length) {
      var x = a.codePointAt(i), y = b.codePointAt(j);
      if (x !== y) return x < y ? -1 : 1;
      i += x > 0xffff ? 2 : 1; j += y > 0xffff ? 2 : 1;
    }
    return i < a.length ? 1 : j < b.length ? -1 : 0;
  }

  var COLS = [
    ["device", "device", "s"], ["category", "category", "s"], ["name", "operator", "s"],
    ["count", "calls", "n"], ["total_us", "total (ms)", "t"], ["share_pct", "share (%)", "p"],
    ["mean_us", "mean (ms)", "t"], ["p50_us", "p50 (ms)", "t"], ["p90_us", "p90 (ms)", "t"],
    ["p99_us", "p99 (ms)", "t"], ["min_us", "min (ms)", "t"], ["max_us", "max (ms)", "t"]];

  function cell(op, col) {
    var v = op[col[0]], td = el("td", { "class": col[2] === "s" ? "s" : "n" });
    if (col[2] === "t") td.textContent = ms(v);
    else if (col[2] === "p") {
      var bar = el("span", { "class": "bar" }); bar.style.width = (0.6 * Math.max(0, Math.min(100, v))).toFixed(1) + "px";
      td.appendChild(bar); td.appendChild(el("span", { "class": "pct" }, fixed(v, 2)));
    } else td.textContent = col[0] === "device" && v === "" ? "host" : v;
    return td;
  }

  // The engine's bookkeeping (WaitForVar, DeleteVariable, ...: summarize marks each record) is
  // listed after compute, in a body of its own under a title row, whatever the column sorted.
  function opTable(file, fi, timeline, bookkeeping) {
    var ops = file.summary.operators.filter(function (o) { return !o.bookkeeping; });
    var apart = file.summary.operators.filter(function (o) { return o.bookkeeping; });
    var bkBody = el("tbody", { "class": "bookkeeping" });
    var table = el("table", { "class": "ops", "data-file": fi }), thead = el("thead"), tbody = el("tbody");
    var hr = el("tr"), sortCol = "total_us", desc = true;
    COLS.forEach(function (col) {
      var th = el("th", { "data-col": col[0], "class": col[2] === "s" ? "s" : "n" }, col[1]);
      th.addEventListener("click", function () {
        desc = sortCol === col[0] ? !desc : col[2] !== "s";
        sortCol = col[0]; render();
      });
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    function order(a, b) {
      var x = a[sortCol], y = b[sortCol];
      var r = typeof x === "string" ? cmpText(x, y) : x < y ? -1 : x > y ? 1 : 0;
      return (desc ? -r : r) || b.total_us - a.total_us || cmpText(a.name, b.name);
    }
    function render() {
      ops.sort(order);
      apart.sort(order);
      tbody.textContent = "";
      bkBody.textContent = "";
      if (apart.length) {
        var bkUs = 0, bkCalls = 0;
        apart.forEach(function (o) { bkUs += o.total_us; bkCalls += o.count; });
        var head = el("tr", { "class": "section" });
        head.appendChild(el("td", { colspan: COLS.length }, bookkeeping.label + ": " + ms(bkUs) + " ms in " +
          bkCalls + " call" + (bkCalls === 1 ? "" : "s") + ", " + bookkeeping.note));
        bkBody.appendChild(head);
      }
      ops.concat(apart).forEach(function (op) {
        var tr = el("tr", { "data-key": JSON.stringify([op.category, op.name, op.device]),
                            "data-count": op.count, "data-total-us": op.total_us });
        if (op.bookkeeping) { tr.className = "bookkeeping"; tr.dataset.bookkeeping = "1"; }
        COLS.forEach(function (col) { tr.appendChild(cell(op, col)); });
        tr.addEventListener("click", function () {
          var on = tr.classList.contains("sel");
          document.querySelectorAll("table.ops tr.sel").forEach(function (r) { r.classList.remove("sel"); });
          if (!on) tr.classList.add("sel");
          var n = timeline.setHighlight(on ? null : { name: op.name, cat: op.category, device: op.device });
          state.highlight = on ? null : [op.category, op.name, op.device];
          state.highlightCount = n;
        });
        (op.bookkeeping ? bkBody : tbody).appendChild(tr);
      });
      thead.querySelectorAll("th").forEach(function (th) {
        th.className = th.className.replace(/ ?(asc|desc)/g, "");
        if (th.dataset.col === sortCol) th.className += desc ? " desc" : " asc";
      });
      table.dataset.sort = sortCol + (desc ? " desc" : " asc");
    }
    render();
    var calls = 0, total = 0;
    file.summary.operators.forEach(function (o) { calls += o.count; total += o.total_us; });
    var tfoot = el("tfoot"), fr = el("tr", { "class": "total", "data-count": calls, "data-total-us": total });
    fr.appendChild(el("td", { colspan: 3 }, "all operators"));
    fr.appendChild(el("td", { "class": "n" }, calls));
    fr.appendChild(el("td", { "class": "n" }, ms(total)));
    fr.appendChild(el("td", { colspan: 7 }));
    tfoot.appendChild(fr);
    table.appendChild(thead); table.appendChild(tbody);
    if (apart.length) table.appendChild(bkBody);
    table.appendChild(tfoot);
    return table;
  }

  var DIFF_COLS = [["name", "operator"], ["verdict", "verdict"], ["base_count", "calls base"],
    ["new_count", "calls new"], ["base_median", "median base (\u00b5s)"],
    ["new_median", "median new (\u00b5s)"], ["median_change_pct", "change (%)"],
    ["ci_low", "CI low (\u00b5s)"], ["ci_high", "CI high (\u00b5s)"], ["impact", "impact (\u00b5s)"]];

  function diffTable(d) {
    var table = el("table", { "class": "diff" }), hr = el("tr");
    DIFF_COLS.forEach(function (c) { hr.appendChild(el("th", null, c[1])); });
    var thead = el("thead"); thead.appendChild(hr); table.appendChild(thead);
    var tbody = el("tbody");
    d.rows.forEach(function (r) {
      var tr = el("tr", { "data-key": JSON.stringify(r.key), "data-verdict": r.verdict,
                          "data-impact": r.impact, "class": "v-" + r.verdict });
      DIFF_COLS.forEach(function (c) {
        var v = c[0] === "name" ? r.key.filter(function (k) { return k !== ""; }).join(" / ") : r[c[0]];
        tr.appendChild(el("td", { "class": typeof v === "number" || v === null ? "n" : "s" },
          v === null ? "-" : typeof v === "number" && !Number.isInteger(v) ? fixed(v, 1) : v));
      });
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
    return table;
  }

  function memoryChart(files, host) {
    var series = [];
    files.forEach(function (f) {
      f.timeline.counters.forEach(function (c) {
        if (c.name.indexOf("Memory: ") === 0) series.push({ label: (files.length > 1 ? f.label + " " : "") + c.name, c: c });
      });
    });
    if (!series.length) { host.appendChild(el("p", { "class": "none" }, "no memory counters in this trace")); return null; }
    var xs = {}, all = [];
    series.forEach(function (s) { s.c.ts.forEach(function (v) { if (!xs[v]) { xs[v] = 1; all.push(v); } }); });
    all.sort(function (a, b) { return a - b; });
    var index = new Map(all.map(function (v, i) { return [v, i]; }));
    var data = [all.map(function (v) { return v / 1e3; })];
    series.forEach(function (s) {
      var col = new Array(all.length).fill(null);
      s.c.ts.forEach(function (v, i) { col[index.get(v)] = s.c.value[i] / 1048576; });
      data.push(col);
    });
    var palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"];
    var opts = { width: host.clientWidth || 800, height: 200, scales: { x: { time: false } },
      axes: [{ label: "time from start (ms)" }, { label: "MiB" }],
      series: [{ label: "ms" }].concat(series.map(function (s, i) {
        return { label: s.label, stroke: palette[i % palette.length], spanGaps: true, paths: uPlot.paths.stepped({ align: 1 }) };
      })) };
    return new uPlot(opts, data, host);
  }

  function details(hit, host) {
    host.textContent = "";
    if (!hit) { host.appendChild(el("p", { "class": "none" }, "click a slice on the timeline to see its arguments")); return; }
    var tl = hit.file.tl, c = tl.slices, i = hit.slice, tr = tl.tracks[c.track[i]];
    var dl = el("dl");
    [["name", tl.names[c.name[i]]], ["category", tl.cats[c.cat[i]]],
     ["track", (tr.process || "pid " + tr.pid) + " / " + tr.thread],
     ["start", t.fmtTime(hit.file.start[i])], ["duration", t.fmtTime(c.dur[i])]].forEach(function (kv) {
      dl.appendChild(el("dt", null, kv[0])); dl.appendChild(el("dd", null, kv[1]));
    });
    var args = c.args[i] >= 0 ? tl.args[c.args[i]] : null;
    if (args) Object.keys(args).forEach(function (k) {
      var v = args[k];
      dl.appendChild(el("dt", null, k));
      dl.appendChild(el("dd", null, typeof v === "string" ? v : JSON.stringify(v)));
    });
    host.appendChild(dl);
    state.selected = { name: tl.names[c.name[i]], args: args };
  }

  async function boot() {
    var meta = jsonOf("pyprof-meta"), files = [];
    if (typeof DecompressionStream === "undefined")
      throw new Error("this browser has no DecompressionStream; open the report in a current Chromium, Firefox or Safari");
    for (var i = 0; i < meta.files.length; i++) {
      var f = meta.files[i];
      f.summary = jsonOf("pyprof-summary-" + i);
      f.timeline = await inflate(document.getElementById("pyprof-timeline-" + i).textContent.trim());
      files.push(f);
    }
    state.files = files;
    var notes = document.getElementById("notes");
    files.forEach(function (f) {
      var list = f.summary.notes.concat(f.notes || []);
      if (!list.length) return;
      var box = el("div", { "class": "note-file" }); box.appendChild(el("h3", null, f.label));
      var ul = el("ul"); list.forEach(function (n) { ul.appendChild(el("li", null, n)); });
      box.appendChild(ul); notes.appendChild(box);
    });
    if (!notes.children.length) notes.appendChild(el("p", { "class": "none" }, "no repairs or notes"));

    var detailHost = document.getElementById("details");
    var tl = new t.Timeline(document.getElementById("timeline"), files, function (hit) { details(hit, detailHost); },
                            meta.steps.cat);
    state.timeline = tl;
    details(null, detailHost);
    var chart = memoryChart(files, document.getElementById("memory"));
    if (chart) {  // the chart follows the timeline's zoom and pan
      tl.onView = function (v0, v1) { chart.setScale("x", { min: v0 / 1e3, max: v1 / 1e3 }); };
      tl.onView(tl.v0, tl.v1);
    }
    var roofHost = document.getElementById("roofline");
    state.rooflines = files.map(function (f, fi) {
      var node = document.getElementById("pyprof-roofline-" + fi);
      return node ? PyprofRoofline.draw(JSON.parse(node.textContent), files.length > 1 ? f.label : null, roofHost) : null;
    });
    if (!state.rooflines.some(function (r) { return r; }))
      roofHost.appendChild(el("p", { "class": "none" }, "no FLOPs in this trace: record it with " +
        "pyprof.profile(record_shapes=True, with_flops=True) for the roofline (on the JVM: " +
        "the session option record_shapes, for executors bound through pyprof)"));
    var tables = document.getElementById("tables");
    files.forEach(function (f, fi) {
      if (files.length > 1) tables.appendChild(el("h3", null, f.label));
      tables.appendChild(opTable(f, fi, tl, meta.bookkeeping));
    });
    if (meta.diff) {
      var d = jsonOf("pyprof-diff");
      state.diff = d;
      document.getElementById("diff").appendChild(diffTable(d));
      if (d.notes.length) document.getElementById("diff").appendChild(el("p", { "class": "note" }, d.notes.join(" ")));
    } else document.getElementById("diff-section").hidden = true;
    state.firstDrawMs = performance.now();
    state.slices = tl.files.reduce(function (n, f) { return n + f.start.length; }, 0);
    state.ready = true;
    document.body.dataset.ready = "1";
  }

  boot().catch(function (e) {
    state.errors.push(String(e && e.message || e));
    var box = document.getElementById("fatal"); box.hidden = false; box.textContent = "report failed: " + (e && e.message || e);
    document.body.dataset.ready = "error";
    throw e;
  });
})();
