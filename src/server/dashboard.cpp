// The dashboard at GET / : one self-contained page (no external scripts, styles or fonts). It
// polls GET /stats every second and draws throughput, queue, slots, latency and a per-layer
// expert-load heatmap (one cell per (layer, expert), shade = share of the layer's tokens).
#include "server/server.h"

namespace moe::server {

const char* dashboard_html() {
    return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>moe serve</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:18px;margin:0 0 8px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:20px}
#heat{border-collapse:collapse}
#heat td{width:10px;height:10px;padding:0;border:1px solid #fff}
#heat th{font-weight:normal;font-size:11px;text-align:right;padding-right:4px}
#err{color:#b00}
</style></head>
<body>
<h1>moe serve &mdash; <span id="model">?</span></h1>
<div class="cards">
 <div class="card">throughput<b id="tps">0</b>tokens/s generated</div>
 <div class="card">queue<b id="queue">0</b>waiting</div>
 <div class="card">slots<b id="slots">0/0</b>busy</div>
 <div class="card">KV<b id="kv">0%</b>in use</div>
 <div class="card">TTFT p50/p99<b id="ttft">-</b>seconds</div>
 <div class="card">ITL p50/p99<b id="itl">-</b>seconds</div>
 <div class="card">experts/token<b id="k">-</b>current k</div>
 <div class="card">tokens<b id="gen">0</b>generated</div>
 <div class="card">expert cache<b id="cache">off</b>hit rate (--mem)</div>
</div>
<div>expert load per layer (rows: layers, columns: experts; darker = larger share; right: max/mean)</div>
<table id="heat"></table>
<div id="err"></div>
<script>
"use strict";
let last = null;
function cell(share, mean) {
  const x = mean > 0 ? Math.min(1, share / (2 * mean)) : 0;
  const l = Math.round(95 - 60 * x);
  return "hsl(210,80%," + l + "%)";
}
function draw(s) {
  document.getElementById("model").textContent = s.model;
  const now = s.uptime_s;
  if (last && now > last.uptime_s)
    document.getElementById("tps").textContent = ((s.generated_tokens - last.generated_tokens) / (now - last.uptime_s)).toFixed(1);
  last = s;
  document.getElementById("queue").textContent = s.queue_depth;
  document.getElementById("slots").textContent = s.busy_slots + "/" + s.slots;
  document.getElementById("kv").textContent = (s.kv_capacity ? 100 * s.kv_used / s.kv_capacity : 0).toFixed(1) + "%";
  document.getElementById("ttft").textContent = s.ttft_p50 + "/" + s.ttft_p99;
  document.getElementById("itl").textContent = s.itl_p50 + "/" + s.itl_p99;
  document.getElementById("k").textContent = s.current_k + " of " + s.full_k;
  document.getElementById("gen").textContent = s.generated_tokens;
  const c = s.expert_cache;
  document.getElementById("cache").textContent = c ? (100 * c.hit_rate).toFixed(1) + "%" : "off";
  const t = document.getElementById("heat");
  const rows = [];
  s.expert_load.forEach((counts, layer) => {
    if (!counts.length) return;
    const sum = counts.reduce((a, b) => a + b, 0), mean = sum / counts.length;
    let r = "<tr><th>" + layer + "</th>";
    counts.forEach((c, e) => { r += '<td class="hc" title="layer ' + layer + " expert " + e + ": " + c + '" style="background:' + cell(c, mean) + '"></td>'; });
    r += "<th>" + (s.imbalance[layer] || 0).toFixed(2) + "</th></tr>";
    rows.push(r);
  });
  t.innerHTML = rows.join("");
  document.body.setAttribute("data-layers", rows.length);
}
function poll() {
  fetch("stats").then(r => r.json()).then(s => { document.getElementById("err").textContent = ""; draw(s); })
    .catch(e => { document.getElementById("err").textContent = "cannot reach the server: " + e; });
}
poll();
setInterval(poll, 1000);
</script>
</body></html>
)HTML";
}

}  // namespace moe::server
