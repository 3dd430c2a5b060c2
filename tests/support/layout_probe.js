window.addEventListener("load", function () {
  var out = {broken: [], clipped: [], tops: {}, page: {}};
  var SKIP = {SCRIPT: 1, STYLE: 1, TITLE: 1, OPTION: 1, SELECT: 1};
  var UNIT = "(?:us|µs|ms|s|KiB|MiB|GiB|B|Gbit/s|Mbit/s|kbit/s|%)";
  var NUMBER = new RegExp("\\d[\\d,.]*(?:[ \\u00a0]" + UNIT + "(?![\\w/]))?|->|→", "g");
  var WORD = /[A-Za-z0-9_]{2,}/g;
  function lines(node, start, end) {
    var r = document.createRange(); r.setStart(node, start); r.setEnd(node, end);
    var tops = {};
    Array.prototype.forEach.call(r.getClientRects(), function (q) {
      if (q.width > 0.5) tops[Math.round(q.bottom)] = 1;
    });
    return Object.keys(tops).length;
  }
  function scan(node, rx, label) {
    rx.lastIndex = 0;
    var m;
    while ((m = rx.exec(node.data))) {
      if (lines(node, m.index, m.index + m[0].length) > 1) out.broken.push(label + ": " + m[0]);
    }
  }
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: function (n) {
      for (var e = n.parentElement; e; e = e.parentElement) {
        if (SKIP[e.tagName] || e instanceof SVGElement) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }
  });
  for (var n = walker.nextNode(); n; n = walker.nextNode()) {
    var el = n.parentElement, cell = el.closest("td, th");
    scan(n, NUMBER, el.tagName.toLowerCase());
    if (cell) scan(n, WORD, cell.tagName.toLowerCase() + " word");
  }
  document.querySelectorAll("td, th").forEach(function (c) {
    if (c.scrollWidth > c.clientWidth + 1) out.clipped.push("cell: " + c.textContent.trim().slice(0, 40));
  });
  document.querySelectorAll("svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (!r.width || getComputedStyle(t).display === "none") return;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        out.clipped.push((svg.id || svg.getAttribute("class") || "svg") + " label: " + t.textContent.trim().slice(0, 40));
      }
    });
  });
  function top(sel) { var e = document.querySelector(sel); return e ? Math.round(e.getBoundingClientRect().top + window.scrollY) : null; }
  function bottom(sel) { var e = document.querySelector(sel); return e ? Math.round(e.getBoundingClientRect().bottom + window.scrollY) : null; }
  // the answer: the decision's line when the page has one, else the headline; the first fix:
  // the decision's first, else the first recommendation's title
  out.tops = {answer: bottom("#decision .answer") || bottom("#verdict"),
              todo: top("#recommendations"),
              first_fix: bottom("#fixes li") || bottom("#recommendations .rec > b")};
  var d = document.documentElement;
  // the page's own script ran to its end; the node view's canvas box (a large run's) right
  // edge: the view scrolls inside it, never the page
  var box = document.querySelector("#nodeview .canvas-box");
  out.page = {scroll: d.scrollWidth, client: d.clientWidth, ready: document.body.dataset.ready || null,
              box: box ? Math.round(box.getBoundingClientRect().right) : null};
  document.body.setAttribute("data-layout", JSON.stringify(out));
});
