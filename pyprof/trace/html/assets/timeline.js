// pyprof report: the timeline, drawn by hand on one canvas (no small library draws 200,000
// slices with zoom and pan). Rows: per file, per track (pid, tid), one lane per nesting depth.
// Only visible slices are drawn; slices narrower than a pixel are merged into one run per lane.
"use strict";
var PyprofTimeline = (function () {
  var LANE = 14, GUTTER = 190, AXIS = 22, FILE_HEAD = 18, HIGHLIGHT = "#d62728", HEAD_COLOR = "#1f4e79";
  var STEP_COLOR = "#2ca02c", WINDOW_FILL = "rgba(44,160,44,0.10)";

  function hue(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return (h >>> 0) % 360;
  }

  // Columns of one file's timeline (see pyprof/trace/html/columns.py) to lanes of typed arrays.
  function prepare(file, fileIndex, stepCat) {
    var tl = file.timeline, c = tl.slices, n = c.track.length;
    var start = new Float64Array(n), s = 0;
    for (var i = 0; i < n; i++) { s += c.start[i]; start[i] = s; }
    var lanesByKey = {}, lanes = [], tracks = tl.tracks.map(function (t, ti) {
      return { file: fileIndex, index: ti, pid: t.pid, tid: t.tid, process: t.process,
               thread: t.thread, depth: 0, lanes: [] };
    });
    var counts = {};
    for (i = 0; i < n; i++) {
      var key = c.track[i] * 4096 + c.depth[i];
      counts[key] = (counts[key] || 0) + 1;
    }
    for (i = 0; i < n; i++) {
      key = c.track[i] * 4096 + c.depth[i];
      var lane = lanesByKey[key];
      if (!lane) {
        var size = counts[key];
        lane = lanesByKey[key] = { track: c.track[i], depth: c.depth[i], n: 0, maxDur: 0,
          start: new Float64Array(size), end: new Float64Array(size), slice: new Int32Array(size) };
        lanes.push(lane);
        var tr = tracks[c.track[i]];
        tr.depth = Math.max(tr.depth, c.depth[i] + 1);
      }
      lane.start[lane.n] = start[i];
      lane.end[lane.n] = start[i] + c.dur[i];
      lane.slice[lane.n++] = i;
      if (c.dur[i] > lane.maxDur) lane.maxDur = c.dur[i];
    }
    lanes.forEach(function (l) { tracks[l.track].lanes[l.depth] = l; });
    var device = tracks.map(function (t) { return t.process; });
    // A session's step marks (schedule.json step_marks: category, args step/window/step_us) and
    // the span of each window they cover; the other instants stay plain marks.
    var steps = [], others = [], windows = {};
    tl.marks.forEach(function (m) {
      var a = m.args;
      if (stepCat !== null && m.cat === stepCat && a && typeof a.step === "number" && typeof a.step_us === "number") {
        steps.push(m);
        var w = windows[a.window] || (windows[a.window] = { window: a.window, start: m.ts, end: m.ts + a.step_us });
        w.start = Math.min(w.start, m.ts); w.end = Math.max(w.end, m.ts + a.step_us);
      } else others.push(m);
    });
    var spans = Object.keys(windows).map(function (k) { return windows[k]; });
    spans.forEach(function (w) { if (w.end > tl.span) tl.span = w.end; });
    var colors = tl.names.map(function (nm) { return "hsl(" + hue(nm) + ",55%,62%)"; });
    return { file: file, tl: tl, start: start, tracks: tracks, colors: colors, device: device,
             steps: steps, marks: others, windows: spans };
  }

  function lowerBound(arr, n, v) {
    var lo = 0, hi = n;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function Timeline(canvas, files, onSelect, stepCat) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.files = files.map(function (f, i) { return prepare(f, i, stepCat === undefined ? null : stepCat); });
    this.onSelect = onSelect;
    this.span = Math.max.apply(null, this.files.map(function (f) { return f.tl.span; }).concat([1]));
    this.v0 = 0; this.v1 = this.span;
    this.highlight = null;  // {name, cat, device}
    this.selected = null;   // {file, slice}
    this.rows = [];
    var y = AXIS, self = this;
    this.files.forEach(function (f, fi) {
      self.rows.push({ head: true, file: fi, y: y, h: FILE_HEAD }); y += FILE_HEAD;
      f.tracks.forEach(function (t) {
        var h = Math.max(1, t.depth) * LANE + 4;
        self.rows.push({ head: false, file: fi, track: t, y: y, h: h }); y += h;
      });
    });
    this.height = y + 4;
    this.drawCount = 0;
    this.bind();
    this.resize();
  }

  Timeline.prototype.resize = function () {
    var dpr = window.devicePixelRatio || 1, w = this.canvas.parentNode.clientWidth || 800;
    this.width = w;
    this.canvas.style.width = w + "px"; this.canvas.style.height = this.height + "px";
    this.canvas.width = Math.round(w * dpr); this.canvas.height = Math.round(this.height * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.draw();
  };

  Timeline.prototype.xOf = function (t) { return GUTTER + (t - this.v0) * (this.width - GUTTER) / (this.v1 - this.v0); };
  Timeline.prototype.tOf = function (x) { return this.v0 + (x - GUTTER) * (this.v1 - this.v0) / (this.width - GUTTER); };

  Timeline.prototype.setView = function (v0, v1) {
    var min = 1e-3;
    if (v1 - v0 < min) { var m = (v0 + v1) / 2; v0 = m - min / 2; v1 = m + min / 2; }
    var pad = this.span * 0.05;
    if (v0 < -pad) { v1 += -pad - v0; v0 = -pad; }
    if (v1 > this.span + pad) { v0 -= v1 - this.span - pad; v1 = this.span + pad; }
    this.v0 = Math.max(v0, -pad); this.v1 = v1;
    this.draw();
    if (this.onView) this.onView(this.v0, this.v1);
  };

  Timeline.prototype.matches = function (f, i) {
    var h = this.highlight, c = f.tl.slices;
    if (!h || f.tl.names[c.name[i]] !== h.name || f.tl.cats[c.cat[i]] !== h.cat) return false;
    var dev = f.device[c.track[i]];
    return h.device === (dev === h.cat ? "" : dev);
  };

  Timeline.prototype.setHighlight = function (h) {
    this.highlight = h;
    var count = 0, self = this;
    if (h) this.files.forEach(function (f) {
      for (var i = 0; i < f.start.length; i++) if (self.matches(f, i)) count++;
    });
    this.highlightCount = count;
    this.canvas.dataset.highlight = h ? JSON.stringify([h.cat, h.name, h.device]) : "";
    this.canvas.dataset.highlightCount = String(count);
    this.draw();
    return count;
  };

  Timeline.prototype.drawLane = function (f, lane, y, k) {
    var ctx = this.ctx, v0 = this.v0, v1 = this.v1, c = f.tl.slices, hl = this.highlight;
    var i = lowerBound(lane.start, lane.n, v0 - lane.maxDur), n = lane.n;
    var runX0 = -1, runX1 = -1, runHl = false, runColor = null, drawn = 0;
    var self = this, h = LANE - 2;
    function flush() {
      if (runX0 < 0) return;
      ctx.fillStyle = runHl ? HIGHLIGHT : (hl ? "#ccc" : runColor);
      ctx.fillRect(runX0, y, Math.max(1, runX1 - runX0), h);
      runX0 = -1; drawn++;
    }
    for (; i < n; i++) {
      var s = lane.start[i];
      if (s > v1) break;
      var e = lane.end[i];
      if (e < v0) continue;
      var x0 = GUTTER + (s - v0) * k, x1 = GUTTER + (e - v0) * k;
      if (x0 < GUTTER) x0 = GUTTER;
      var si = lane.slice[i], isHl = hl !== null && self.matches(f, si);
      if (x1 - x0 < 1) {  // sub-pixel: extend the current run or start one
        if (runX0 >= 0 && x0 <= runX1 + 1) { runX1 = Math.max(runX1, x1); runHl = runHl || isHl; continue; }
        flush();
        runX0 = x0; runX1 = x1; runHl = isHl; runColor = f.colors[c.name[si]];
        continue;
      }
      flush();
      ctx.fillStyle = isHl ? HIGHLIGHT : (hl ? "#ddd" : f.colors[c.name[si]]);
      ctx.fillRect(x0, y, x1 - x0, h);
      drawn++;
      if (x1 - x0 > 40) {
        ctx.fillStyle = "#111";
        ctx.save(); ctx.beginPath(); ctx.rect(x0, y, x1 - x0, h); ctx.clip();
        ctx.fillText(f.tl.names[c.name[si]], x0 + 2, y + h - 3);
        ctx.restore();
      }
      var sel = this.selected;
      if (sel && sel.file === f && sel.slice === si) {
        ctx.strokeStyle = "#000"; ctx.lineWidth = 2; ctx.strokeRect(x0, y, x1 - x0, h);
      }
    }
    flush();
    return drawn;
  };

  Timeline.prototype.drawAxis = function () {
    var ctx = this.ctx, span = this.v1 - this.v0, w = this.width - GUTTER;
    var step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
    ctx.fillStyle = "#555"; ctx.strokeStyle = "#e4e4e4"; ctx.lineWidth = 1;
    ctx.font = "11px sans-serif";
    for (var t = Math.ceil(this.v0 / step) * step; t <= this.v1; t += step) {
      var x = Math.round(this.xOf(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, AXIS - 4); ctx.lineTo(x, this.height); ctx.stroke();
      ctx.fillText(fmtTime(t), x + 2, 12);
    }
    ctx.fillText("time from start", 4, 12);
  };

  // x with f decimals exactly as Python's format(x, ".<f>f") writes it: toFixed rounds an exact
  // tie (0.5625 to 3 places) up, Python to the even digit; toFixed(100) shows the exact value.
  function fixed(x, f) {
    var s = x.toFixed(f);
    if (!isFinite(x) || Math.abs(x) >= 1e21) return s;
    var full = Math.abs(x).toFixed(100), dot = full.indexOf(".");
    if (!/^50*$/.test(full.slice(dot + 1 + f))) return s;
    var cut = full.slice(0, f ? dot + 1 + f : dot);
    return +cut[cut.length - 1] % 2 === 0 ? (x < 0 ? "-" : "") + cut : s;
  }
  function fmtTime(us) {
    var a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3).replace(/\.?0+$/, "") + " s";
    if (a >= 1e3) return (us / 1e3).toFixed(3).replace(/\.?0+$/, "") + " ms";
    return (+us.toFixed(3)) + " \u00b5s";
  }

  Timeline.prototype.draw = function () {
    var ctx = this.ctx, self = this, k = (this.width - GUTTER) / (this.v1 - this.v0), drawn = 0;
    ctx.clearRect(0, 0, this.width, this.height);
    this.drawnSteps = [];
    this.drawAxis();
    ctx.font = "10px sans-serif";
    this.rows.forEach(function (r) {
      var f = self.files[r.file];
      if (r.head) {  // the file's window: [0, span] of its own trace
        ctx.fillStyle = "rgba(31,119,180,0.12)";
        var x0 = Math.max(GUTTER, self.xOf(0)), x1 = Math.min(self.width, self.xOf(f.tl.span));
        if (x1 > x0) ctx.fillRect(x0, r.y + 2, x1 - x0, r.h - 4);
        ctx.fillStyle = HEAD_COLOR; ctx.font = "bold 11px sans-serif";
        ctx.save(); ctx.beginPath(); ctx.rect(0, r.y, GUTTER - 4, r.h); ctx.clip();  // a long label stays off the marks
        ctx.fillText("window: " + f.file.label, 4, r.y + 13); ctx.restore(); ctx.font = "10px sans-serif";
        f.marks.forEach(function (m) {
          var x = self.xOf(m.ts);
          if (x < GUTTER || x > self.width) return;
          ctx.fillStyle = "#9467bd"; ctx.fillRect(x - 0.5, r.y, 1.5, self.height - r.y);
          ctx.fillText(m.name, x + 2, r.y + 13);
        });
        self.drawWindows(f, r);
        return;
      }
      var t = r.track;
      ctx.fillStyle = "#222";
      ctx.save(); ctx.beginPath(); ctx.rect(0, r.y, GUTTER - 4, r.h); ctx.clip();
      var label = (t.process || "pid " + t.pid) + " \u00b7 ";
      ctx.fillText(label, 4, r.y + 13);
      ctx.fillStyle = "#777"; ctx.fillText(t.thread, 4 + ctx.measureText(label).width, r.y + 13);
      ctx.restore();
      ctx.strokeStyle = "#eee"; ctx.beginPath(); ctx.moveTo(0, r.y + 0.5); ctx.lineTo(self.width, r.y + 0.5); ctx.stroke();
      t.lanes.forEach(function (lane, d) {
        if (lane) drawn += self.drawLane(f, lane, r.y + 2 + d * LANE, k);
      });
    });
    this.rows.forEach(function (r) { if (r.head) self.drawSteps(self.files[r.file], r); });
    this.drawCount++;
    this.lastDrawn = drawn;
    this.canvas.dataset.view = this.v0 + "," + this.v1;
  };

  // A session window's span shaded over its file's rows (drawn first, under the slices) ...
  Timeline.prototype.drawWindows = function (f, r) {
    var ctx = this.ctx, self = this, y1 = this.fileEnd(r.file);
    f.windows.forEach(function (w) {
      var x0 = Math.max(GUTTER, self.xOf(w.start)), x1 = Math.min(self.width, self.xOf(w.end));
      if (x1 > x0) { ctx.fillStyle = WINDOW_FILL; ctx.fillRect(x0, r.y, x1 - x0, y1 - r.y); }
    });
  };

  // ... and a line and a label at each step's start (drawn last, over them).
  Timeline.prototype.drawSteps = function (f, r) {
    var ctx = this.ctx, self = this, y1 = this.fileEnd(r.file);
    ctx.font = "10px sans-serif";
    f.steps.forEach(function (m) {
      var x = self.xOf(m.ts);
      if (x < GUTTER || x > self.width) return;
      var xi = Math.round(x);
      ctx.fillStyle = STEP_COLOR; ctx.fillRect(xi, r.y, 1, y1 - r.y);
      ctx.fillText(m.name, xi + 3, r.y + 13);
      self.drawnSteps.push({ file: r.file, name: m.name, ts: m.ts, step: m.args.step, x: xi, y: r.y });
    });
  };

  Timeline.prototype.fileEnd = function (fi) {  // the y where file fi's rows end
    var end = this.height;
    for (var i = 0; i < this.rows.length; i++) if (this.rows[i].head && this.rows[i].file > fi) return this.rows[i].y;
    return end;
  };

  Timeline.prototype.hit = function (x, y) {
    for (var ri = 0; ri < this.rows.length; ri++) {
      var r = this.rows[ri];
      if (r.head || y < r.y || y >= r.y + r.h) continue;
      var lane = r.track.lanes[Math.floor((y - r.y - 2) / LANE)];
      if (!lane) return null;
      var t = this.tOf(x), tol = 2 * (this.v1 - this.v0) / (this.width - GUTTER);
      var i = lowerBound(lane.start, lane.n, t - lane.maxDur - tol), best = null;
      for (; i < lane.n && lane.start[i] <= t + tol; i++)
        if (lane.end[i] >= t - tol) best = lane.slice[i];
      return best === null ? null : { file: this.files[r.file], slice: best };
    }
    return null;
  };

  Timeline.prototype.bind = function () {
    var self = this, c = this.canvas, drag = null;
    c.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var x = ev.offsetX; if (x < GUTTER) x = GUTTER;
      var t = self.tOf(x), f = Math.exp(ev.deltaY * 0.002);
      self.setView(t - (t - self.v0) * f, t + (self.v1 - t) * f);
    }, { passive: false });
    c.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, v0: self.v0, v1: self.v1, moved: false }; });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      var dt = dx * (drag.v1 - drag.v0) / (self.width - GUTTER);
      self.setView(drag.v0 - dt, drag.v1 - dt);
    });
    window.addEventListener("mouseup", function (ev) {
      if (drag && !drag.moved && ev.target === c) {
        var hit = self.hit(ev.offsetX, ev.offsetY);
        self.selected = hit; self.draw();
        if (self.onSelect) self.onSelect(hit);
      }
      drag = null;
    });
    c.addEventListener("dblclick", function () { self.setView(0, self.span); });
    window.addEventListener("resize", function () { self.resize(); });
  };

  return { Timeline: Timeline, fmtTime: fmtTime, fixed: fixed, HIGHLIGHT: HIGHLIGHT, GUTTER: GUTTER, STEP_COLOR: STEP_COLOR };
})();
