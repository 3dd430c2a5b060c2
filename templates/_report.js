(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("nq-data").textContent);
  var N = D.nodes.length, CLS = ["none", "safe", "marginal", "unsafe"], NAMES = ["not measured", "offload-safe", "marginal", "unsafe"];
  var css = getComputedStyle(document.documentElement);
  var COLOR = CLS.map(function (c) { return css.getPropertyValue("--" + c).trim() || "#ccc"; });
  var byPair = new Map();
  for (var i = 0; i < D.src.length; i++) {
    byPair.set(D.src[i] * N + D.dst[i], i);
    if (!byPair.has(D.dst[i] * N + D.src[i])) byPair.set(D.dst[i] * N + D.src[i], i);
  }
  // A summarised page (D.summary) has values for some paths only, and the class of every
  // node pair in D.grid: two bits a cell, three cells a base64 letter, row-major.
  var GRID = null;
  if (D.grid) {
    var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", LETTER = new Uint8Array(128);
    for (var k = 0; k < 64; k++) LETTER[B64.charCodeAt(k)] = k;
    GRID = new Uint8Array(D.grid.length * 3);
    for (var j = 0; j < D.grid.length; j++) {
      var bits = LETTER[D.grid.charCodeAt(j)];
      GRID[3 * j] = bits >> 4; GRID[3 * j + 1] = (bits >> 2) & 3; GRID[3 * j + 2] = bits & 3;
    }
  }
  function classAt(a, b, i) { return i !== undefined ? D.cls[i] : GRID ? GRID[a * N + b] : 0; }
  function unlisted(a, b) {
    var c = classAt(a, b, undefined);
    return D.nodes[a] + " -> " + D.nodes[b] + ": " + (c ? NAMES[c] + " (this summarised page has the values of " + D.summary.embedded.toLocaleString("en-US") + " of " + D.summary.paths.toLocaleString("en-US") + " paths; results.json has all)" : "not measured");
  }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; }); }
  // Python's format(v, ".{d}f"): toFixed, but an exact tie (v's exact decimal expansion, from
  // toFixed(100), is "5" then zeros past the kept digits) goes to the even digit, not up
  function fixed(v, d) { var x = v.toFixed(100), p = x.indexOf("."), kept = x.slice(0, d ? p + 1 + d : p); return /^50*$/.test(x.slice(p + 1 + d)) && "02468".indexOf(kept.charAt(kept.length - 1)) >= 0 ? kept : v.toFixed(d); }
  // units.format_us: the same digits as the terminal and the verdict reasons (pinned together
  // by tests/env/test_number_format.py)
  function us(v) { if (v == null || v < 0) return "-"; return (v >= 1000 ? Number(fixed(v, 0)).toLocaleString("en-US") : v >= 10 ? fixed(v, 1) : fixed(v, 2)) + " us"; }
  // units.format_duration_us: a duration in the unit its magnitude suits (850 us, 2.9 ms, 1.28 s)
  function duration(v) { if (v == null || v < 0) return "-"; return v >= 1e6 ? fixed(v / 1e6, 2) + " s" : v >= 1e3 ? fixed(v / 1e3, 1) + " ms" : fixed(v, 0) + " us"; }
  function x10(a, i) { return a[i] < 0 ? null : a[i] / 10; }
  // units.format_size: the unit by magnitude, exact in two decimals where it can be (7.75MiB, not 7936KiB)
  function size(b) { var u = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]], k, v; for (k = 0; k < u.length; k++) if (b >= u[k][1] && (b * 100) % u[k][1] === 0) return fixed(b / u[k][1], 2).replace(/\.?0+$/, "") + u[k][0]; for (k = 0; k < u.length; k++) if (b >= u[k][1]) { v = b / u[k][1]; return fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0) + u[k][0]; } return b + "B"; }
  var readout = document.getElementById("readout");
  function say(t) { if (readout) readout.textContent = t; }
  function pathText(i) {
    var t = D.nodes[D.src[i]] + " -> " + D.nodes[D.dst[i]] + ", " + D.metric + " " + us(x10(D.metricx10, i)) + ": " + NAMES[D.cls[i]];
    if (D.waived[i]) t += " (waived " + D.waived[i] + ")";
    return t;
  }
  // hover readout for every SVG cell with a <title>
  document.querySelectorAll("svg").forEach(function (svg) {
    svg.addEventListener("mouseover", function (e) {
      var t = e.target.querySelector && e.target.querySelector("title");
      if (t && svg.id === "heat-svg") say(t.textContent);
    });
  });
  // node view drawn on a canvas from the compact data
  var canvas = document.getElementById("node-canvas"), view = null;
  function drawBlock(rows, cols, title) {
    if (!canvas) return;
    var px = Math.max(1, Math.min(14, Math.floor(520 / Math.max(rows.length, cols.length))));
    canvas.width = cols.length * px; canvas.height = rows.length * px;
    canvas.style.width = canvas.width + "px"; canvas.style.height = canvas.height + "px";
    var ctx = canvas.getContext("2d"), bad = [];
    for (var y = 0; y < rows.length; y++) for (var x = 0; x < cols.length; x++) {
      var a = rows[y], b = cols[x], i = byPair.get(a * N + b), c = a === b ? -1 : classAt(a, b, i);
      ctx.fillStyle = c < 0 ? "#f7f7f7" : COLOR[c];
      ctx.fillRect(x * px, y * px, px > 3 ? px - 1 : px, px > 3 ? px - 1 : px);
      if (c >= 2 && px < 3) bad.push([x, y, c]);
    }
    // at one or two pixels a cell, a lone bad path would vanish: draw bad cells 3 px wide on top
    bad.sort(function (p, q) { return p[2] - q[2]; }).forEach(function (t) {
      ctx.fillStyle = COLOR[t[2]];
      ctx.fillRect(t[0] * px - 1, t[1] * px - 1, 3, 3);
    });
    view = {rows: rows, cols: cols, px: px};
    document.getElementById("nodeview-title").textContent = title + " (" + rows.length + " x " + cols.length + " nodes; hover for values, click for the drill-down)";
  }
  function range(a, b) { var r = []; for (var k = a; k < b; k++) r.push(k); return r; }
  function cellAt(e) {
    if (!view) return undefined;
    var r = canvas.getBoundingClientRect(), x = Math.floor((e.clientX - r.left) / view.px), y = Math.floor((e.clientY - r.top) / view.px);
    if (x < 0 || y < 0 || x >= view.cols.length || y >= view.rows.length) return undefined;
    return {a: view.rows[y], b: view.cols[x], i: byPair.get(view.rows[y] * N + view.cols[x])};
  }
  if (canvas) {
    canvas.addEventListener("mousemove", function (e) {
      var c = cellAt(e); if (!c) return;
      say(c.a === c.b ? D.nodes[c.a] + " (same node)" : c.i === undefined ? unlisted(c.a, c.b) : pathText(c.i));
    });
    canvas.addEventListener("click", function (e) { var c = cellAt(e); if (c && c.i !== undefined) drill(c.i); });
    document.getElementById("draw-all").addEventListener("click", function () { drawBlock(range(0, N), range(0, N), "All nodes"); });
    document.querySelectorAll("#cells rect[data-ra]").forEach(function (el) {
      el.addEventListener("click", function () {
        var ra = D.racks[+el.dataset.ra], rb = D.racks[+el.dataset.rb];
        drawBlock(range(ra[1], ra[2]), range(rb[1], rb[2]), "Rack " + ra[0] + " -> " + rb[0]);
      });
    });
    drawBlock(range(0, N), range(0, N), "All nodes");
  }
  // drill-down
  function logScale(lo, hi, w) { var a = Math.log10(lo), b = Math.log10(hi); return function (v) { return (Math.log10(Math.max(v, lo)) - a) / (b - a) * w; }; }
  function histSvg(h) {
    var W = 460, H = 140, e = h.edges, c = h.counts, peak = Math.max.apply(null, c.concat([1]));
    var sx = logScale(e[0], e[e.length - 1], W), s = '<svg width="' + (W + 50) + '" height="' + (H + 40) + '"><g transform="translate(40,6)">';
    for (var k = 0; k < c.length; k++) {
      var x0 = sx(e[k]), x1 = sx(e[k + 1]), hh = c[k] / peak * H;
      s += '<rect class="bar" x="' + x0.toFixed(1) + '" y="' + (H - hh).toFixed(1) + '" width="' + Math.max(1, x1 - x0 - 1).toFixed(1) + '" height="' + hh.toFixed(1) + '"><title>' + us(e[k]) + " to " + us(e[k + 1]) + ": " + c[k] + ' samples</title></rect>';
    }
    [[D.safe_max_us, "th-safe"], [D.unsafe_above_us, "th-unsafe"]].forEach(function (t) {
      if (t[0] >= e[0] && t[0] <= e[e.length - 1]) s += '<line class="' + t[1] + '" x1="' + sx(t[0]) + '" x2="' + sx(t[0]) + '" y1="0" y2="' + H + '"/>';
    });
    s += '<line class="tick" x1="0" x2="' + W + '" y1="' + H + '" y2="' + H + '"/>';
    s += '<text x="0" y="' + (H + 14) + '">' + us(e[0]) + '</text><text x="' + W + '" y="' + (H + 14) + '" text-anchor="end">' + us(e[e.length - 1]) + '</text>';
    s += '<text x="' + W / 2 + '" y="' + (H + 28) + '" text-anchor="middle">RTT (log scale), samples per bin</text></g></svg>';
    return s;
  }
  function barSvg(rows, key, label, fmtv) {
    // rows: [chunk, depth, gbps, c50, c99]; groups by chunk, one bar per depth
    var chunks = [], depths = [];
    rows.forEach(function (r) { if (chunks.indexOf(r[0]) < 0) chunks.push(r[0]); if (depths.indexOf(r[1]) < 0) depths.push(r[1]); });
    var W = 300, H = 110, peak = Math.max.apply(null, rows.map(function (r) { return r[key]; }).concat([1e-9]));
    var gw = W / chunks.length, bw = (gw - 10) / depths.length, s = '<svg width="' + (W + 20) + '" height="' + (H + 48) + '"><g transform="translate(10,16)">';
    s += '<text x="0" y="-4">' + label + '</text>';
    rows.forEach(function (r) {
      var x = chunks.indexOf(r[0]) * gw + depths.indexOf(r[1]) * bw, h = r[key] / peak * H;
      s += '<rect class="depth' + (depths.indexOf(r[1]) % 4) + '" x="' + x.toFixed(1) + '" y="' + (H - h).toFixed(1) + '" width="' + (bw - 2).toFixed(1) + '" height="' + h.toFixed(1) + '"><title>' + size(r[0]) + " depth " + r[1] + ": " + fmtv(r[key]) + '</title></rect>';
    });
    chunks.forEach(function (ch, k) { s += '<text x="' + (k * gw + (gw - 10) / 2) + '" y="' + (H + 14) + '" text-anchor="middle">' + size(ch) + '</text>'; });
    s += '<text x="0" y="' + (H + 30) + '">' + depths.map(function (d, k) { return ["dark", "light", "grey", "black"][k % 4] + ": depth " + d; }).join(", ") + '</text></g></svg>';
    return s;
  }
  function pick(id, v) {
    var sel = document.getElementById(id);
    sel.value = String(v);
    // The attribute too, so the page as saved or printed shows the same path.
    Array.prototype.forEach.call(sel.options, function (o) { if (+o.value === v) o.setAttribute("selected", ""); else o.removeAttribute("selected"); });
  }
  function drill(i) {
    var box = document.getElementById("drill"), d = D.detail[i], cls = CLS[D.cls[i]];
    pick("pick-src", D.src[i]); pick("pick-dst", D.dst[i]);
    var s = '<h3 style="margin:0 0 6px">' + esc(D.nodes[D.src[i]]) + " &rarr; " + esc(D.nodes[D.dst[i]]) + ' <span class="tag ' + cls + '">' + NAMES[D.cls[i]] + "</span></h3>";
    if (D.waived[i]) s += "<div><i>waived " + esc(D.waived[i]) + "</i></div>";
    if (!d) {
      s += "<div>p50 " + us(x10(D.p50x10, i)) + ", " + D.metric + " " + us(x10(D.metricx10, i)) + ", p99.9 " + us(x10(D.p999x10, i)) + "</div>";
      s += '<div class="muted">The RTT histogram, bulk results and reasons are embedded for the worst ' + Object.keys(D.detail).length + " paths only; the results file has them for every path.</div>";
      box.innerHTML = s; return;
    }
    if (d.reasons.length) s += "<div>Reasons: " + d.reasons.map(esc).join("; ") + "</div>";
    if (d.error) s += '<div style="color:#d73027">Error: ' + esc(d.error) + "</div>";
    s += '<div class="muted">tier ' + esc(d.tier) + ", hops " + (d.hops == null ? "unknown" : d.hops) + "</div>";
    s += '<div class="grid">';
    if (d.rtt) {
      var names = ["samples", "min", "p50", "p90", "p99", "p99.9", "max", "mean", "stdev"];
      s += "<div><b>Small-message RTT</b><table>";
      names.forEach(function (n, k) {
        var val = k === 0 ? d.rtt[0].toLocaleString("en-US") : us(d.rtt[k]);
        var flag = (n === "p99.9" && d.untrusted.indexOf("p999") >= 0) ? ' <span class="muted">(too few samples to trust)</span>' : "";
        s += "<tr><th>" + n + '</th><td class="num">' + val + flag + "</td></tr>";
      });
      s += "</table></div>";
      if (d.hist) s += "<div><b>RTT distribution</b><br>" + histSvg(d.hist) + "</div>";
    }
    if (d.bulk.length) {
      s += "<div><b>Bulk read by chunk size</b><table><tr><th>chunk</th><th>depth</th><th>goodput</th><th>completion p50</th><th>completion p99</th></tr>";
      d.bulk.forEach(function (r) { s += "<tr><td>" + size(r[0]) + '</td><td class="num">' + r[1] + '</td><td class="num">' + r[2].toFixed(2) + ' Gbit/s</td><td class="num">' + duration(r[3]) + '</td><td class="num">' + duration(r[4]) + "</td></tr>"; });
      s += "</table>" + barSvg(d.bulk, 2, "goodput, Gbit/s", function (v) { return v.toFixed(2) + " Gbit/s"; }) + barSvg(d.bulk, 4, "chunk completion p99", duration) + "</div>";
    }
    s += "</div>";
    box.innerHTML = s;
  }
  document.querySelectorAll("#worst-table tr[data-i]").forEach(function (tr) {
    tr.addEventListener("click", function () { drill(+tr.dataset.i); document.getElementById("drilldown").scrollIntoView(); });
  });
  document.getElementById("pick-go").addEventListener("click", function () {
    var a = +document.getElementById("pick-src").value, b = +document.getElementById("pick-dst").value, i = byPair.get(a * N + b);
    if (i === undefined) document.getElementById("drill").textContent = unlisted(a, b); else drill(i);
  });
  var first = document.querySelector("#worst-table tr[data-i]");
  if (first) drill(+first.dataset.i);
  // rail selector (docs/rails.md): the matrix shows the endpoints of one rail only
  var railPick = document.getElementById("rail-pick");
  if (railPick && D.rails) {
    railPick.addEventListener("change", function () {
      var r = railPick.value === "" ? null : +railPick.value;
      function on(k) { return r === null || D.rails[k] === r; }
      document.querySelectorAll("#cells rect[data-x]").forEach(function (el) {
        var show = on(+el.dataset.x) && on(+el.dataset.y);
        el.style.display = show ? "" : "none";
        var t = el.nextElementSibling;
        if (t && t.classList.contains("cellval")) t.style.display = show ? "" : "none";
      });
      document.querySelectorAll("#heat-svg text.lbl").forEach(function (el) {
        el.style.opacity = on(+el.dataset.i) ? "" : "0.25";
      });
      say(r === null ? "All rails." : "Rail " + r + ": only its NICs' paths are shown.");
    });
    // report.html#rail=1 opens on that rail (a link to one rail's view)
    var want = /rail=(\d+)/.exec(location.hash);
    if (want && D.rails.indexOf(+want[1]) >= 0) {
      railPick.value = want[1];
      railPick.dispatchEvent(new Event("change"));
    }
  }
  document.body.dataset.ready = "1";
})();
