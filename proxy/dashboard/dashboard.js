// FreeToken dashboard: polls /v1/stats once a second and shows it. Rates (tok/s now) come from the
// difference between two polls. When the server wants an API key (401), the page asks for it and
// keeps it in this tab's sessionStorage; it travels only as the x-api-key header, never in a URL.
'use strict';

(() => {
  const POLL_MS = 1000;
  const HISTORY = 60;  // polls the sparkline shows
  const KEY_SLOT = 'freetoken.apiKey';
  const DASH = '—';

  let apiKey = sessionStorage.getItem(KEY_SLOT) || '';
  let previous = null;  // the last poll's counters, for rates
  const generateHistory = [];

  const $ = (id) => document.getElementById(id);
  const show = (id, text) => { $(id).textContent = text; };
  const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);

  const count = (v) => (isNumber(v) ? Math.round(v).toLocaleString('en-US') : DASH);
  const rate = (v) => (isNumber(v) ? v.toLocaleString('en-US', { maximumFractionDigits: v < 100 ? 1 : 0 }) : DASH);
  const percent = (part, whole) => (isNumber(part) && isNumber(whole) && whole > 0
    ? `${(100 * part / whole).toFixed(part === whole || part === 0 ? 0 : 1)}%` : DASH);

  function bytes(v) {
    if (!isNumber(v)) return DASH;
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${v.toFixed(i === 0 || v >= 100 ? 0 : 1)} ${units[i]}`;
  }

  function duration(seconds) {
    if (!isNumber(seconds)) return DASH;
    const s = Math.floor(seconds);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor(s % 3600 / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor(s % 86400 / 3600)} h`;
  }

  function setState(text, kind) {
    const el = $('state');
    el.textContent = text;
    el.className = `state ${kind}`;
  }

  // ---- the key prompt ----------------------------------------------------------------------

  function askForKey(refused) {
    $('key-prompt').hidden = false;
    $('key-refused').hidden = !refused;
    setState('needs the API key', 'down');
    $('key-input').focus();
  }

  $('key-form').addEventListener('submit', (event) => {
    event.preventDefault();  // never a navigation: the key must not end up in a URL
    const typed = $('key-input').value.trim();
    $('key-input').value = '';
    // A header carries printable ASCII only (fetch would throw on anything else): no key has more.
    if (!/^[\x21-\x7e]+$/.test(typed)) {
      askForKey(true);
      return;
    }
    apiKey = typed;
    sessionStorage.setItem(KEY_SLOT, apiKey);
    $('key-prompt').hidden = true;
    poll();
  });

  // ---- polling -----------------------------------------------------------------------------

  async function poll() {
    let response;
    try {
      response = await fetch('/v1/stats', {
        headers: apiKey ? { 'x-api-key': apiKey } : {},
        cache: 'no-store',
        credentials: 'omit',
      });
    } catch {
      setState('proxy unreachable', 'down');
      setTimeout(poll, POLL_MS);
      return;
    }
    if (response.status === 401) {
      // Polling waits for a key: asking again every second would only repeat the refusal.
      sessionStorage.removeItem(KEY_SLOT);
      askForKey(apiKey !== '');
      apiKey = '';
      return;
    }
    setTimeout(poll, POLL_MS);  // first: a page that fails to render one answer still shows the next
    if (!response.ok) {
      setState(`HTTP ${response.status}`, 'down');
      return;
    }
    let stats = null;
    try {
      stats = await response.json();
    } catch {
      setState('unreadable answer from /v1/stats', 'down');
    }
    if (stats) render(stats);
  }

  // ---- rendering ---------------------------------------------------------------------------

  function render(stats) {
    const engine = stats.engine || {};
    const scheduler = engine.scheduler || {};
    const model = engine.model || {};
    const placement = engine.placement || {};

    show('model', stats.model || DASH);
    show('family', model.family || DASH);
    show('device', placement.device || DASH);
    show('context-length', isNumber(model.context_length) ? `${count(model.context_length)} tokens` : DASH);
    show('uptime', duration(stats.uptime_seconds));
    if (engine.error) setState(`engine: ${engine.error}`, 'down');
    else setState('live', 'live');
    show('updated', `updated ${new Date().toLocaleTimeString('en-GB')}`);

    renderThroughput(stats, scheduler);
    renderPrompt(stats, scheduler);
    renderCheckpoints(engine, scheduler);
    renderMemory(stats.memory || {}, placement);
    renderExperts(placement);
    renderClients(stats.clients || [], stats.memory || {});
  }

  function renderThroughput(stats, s) {
    const computed = isNumber(s.prompt_tokens) && isNumber(s.cached_tokens) ? s.prompt_tokens - s.cached_tokens : NaN;
    const now = { t: stats.uptime_seconds, generated: s.generated_tokens, computed };
    let generateRate = NaN;
    let prefillRate = NaN;
    // A restarted engine starts its counters again: no rate across that poll.
    if (previous && now.t > previous.t && now.generated >= previous.generated && now.computed >= previous.computed) {
      const dt = now.t - previous.t;
      generateRate = (now.generated - previous.generated) / dt;
      prefillRate = (now.computed - previous.computed) / dt;
    }
    previous = isNumber(now.generated) && isNumber(now.computed) ? now : null;
    if (isNumber(generateRate)) {
      generateHistory.push(generateRate);
      if (generateHistory.length > HISTORY) generateHistory.shift();
    }
    show('generate-rate', rate(generateRate));
    show('prefill-rate', rate(prefillRate));
    show('decode-average', s.decode_seconds > 0 ? rate(s.generated_tokens / s.decode_seconds) : DASH);
    show('prefill-average', s.prefill_seconds > 0 ? rate(s.prefill_rows / s.prefill_seconds) : DASH);
    show('generated-tokens', count(s.generated_tokens));
    show('requests-total', count(stats.requests_total));
    show('errors-total', count(stats.errors_total));
    show('running', count(s.running));
    show('waiting', count(s.waiting));
    show('streams-active', count(stats.streams_active));
    drawSparkline();
  }

  function drawSparkline() {
    const top = Math.max(1, ...generateHistory);
    const step = 120 / (HISTORY - 1);
    const start = HISTORY - generateHistory.length;
    const points = generateHistory.map((v, i) => {
      const x = (start + i) * step;
      const y = 23 - 22 * v / top;  // 1 (the highest rate shown) .. 23 (nothing)
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    $('generate-sparkline').firstElementChild.setAttribute('points', points.join(' '));
  }

  function renderPrompt(stats, s) {
    const received = s.prompt_tokens;
    const restored = s.cached_tokens;
    const computed = isNumber(received) && isNumber(restored) ? received - restored : NaN;
    show('restored-share', percent(restored, received));
    show('restored-tokens', count(restored));
    show('computed-tokens', count(computed));
    show('prompt-tokens', count(received));
    show('prefix-cache', stats.prefix_cache === undefined ? DASH : stats.prefix_cache ? 'on' : 'off');
    const share = received > 0 ? restored / received : 0;
    $('bar-restored').style.width = `${100 * share}%`;
    $('bar-computed').style.width = received > 0 ? `${100 * (1 - share)}%` : '0';
  }

  function renderCheckpoints(engine, s) {
    const store = engine.store && engine.store.stats ? engine.store.stats : {};
    show('checkpoint-hits', count(s.restores));
    show('restore-misses', count(s.restore_misses));
    show('checkpoints-saved', count(s.checkpoints_saved));
    show('store-hits', count(store.hits));
    show('store-misses', count(store.misses));
    show('store-entries', count(store.entries));
    show('store-bytes', bytes(store.bytes));
    show('store-evictions', count(store.evictions));
    show('store-tier', engine.store ? engine.store.tier + (store.degraded ? ' (degraded: not persisting)' : '')
      : engine.store === null ? 'none' : DASH);
  }

  // Fills `bar` with a segment per [title, value, kind] part: its share of `whole`.
  function fillBar(bar, whole, parts) {
    bar.replaceChildren();
    for (const [title, value, kind] of parts) {
      if (!(whole > 0 && value > 0)) continue;
      const segment = document.createElement('span');
      segment.className = `segment ${kind}`;
      segment.style.width = `${Math.min(100, 100 * value / whole)}%`;
      segment.title = title;
      bar.append(segment);
    }
  }

  // The placement plan: what the model's device holds, by use, against its budget. With the routed
  // experts in host RAM the device holds a cache of them instead.
  function renderMemory(memory, p) {
    const weights = p.weights || {};
    const kv = p.kv || {};
    const experts = p.experts;
    const kvBytes = isNumber(kv.pages) && isNumber(kv.page_bytes) ? kv.pages * kv.page_bytes : NaN;
    const kvUsed = kv.stats && isNumber(kv.stats.pages_used) ? kv.stats.pages_used * kv.page_bytes : NaN;
    const uses = [
      ['embedding + head', weights.embedding_bytes, 'embedding'],
      ['attention + dense', weights.dense_bytes, 'weights'],
      experts ? ['expert cache', experts.cache_bytes, 'experts']
        : ['routed experts', weights.routed_expert_bytes, 'experts'],
      ['KV cache pool', kvBytes, 'kv'],
      ['KV cache in use', kvUsed, null],
      ['workspace', p.workspace_bytes, 'other'],
    ];
    // Linear-attention models on a GPU: the room kept for the running sequences' recurrent state.
    if (p.linear_state_bytes > 0) uses.splice(uses.length - 1, 0, ['linear state', p.linear_state_bytes, 'kv']);
    if (p.reserved_bytes > 0) uses.push(['GPU checkpoints', p.reserved_bytes, 'other']);

    const onHost = typeof p.device === 'string' && p.device.startsWith('cpu');
    const title = onHost ? 'Memory · host RAM' : 'Memory · VRAM';
    show('device-memory-title', p.device ? title : 'Device memory');
    show('device-total', bytes(p.total_bytes));
    show('device-budget', p.budget_bytes > 0 ? `planned of ${bytes(p.budget_bytes)} budget` : 'planned');

    const list = $('device-memory');
    list.replaceChildren();
    for (const [label, value, kind] of uses) {
      const dt = document.createElement('dt');
      const swatch = document.createElement('i');
      swatch.className = `swatch ${kind || 'none'}`;
      dt.append(swatch, label);
      const dd = document.createElement('dd');
      dd.textContent = bytes(value);
      list.append(dt, dd);
    }
    const inBar = uses.filter(([, , kind]) => kind);  // a part of the row above: not in the bar
    fillBar($('device-bar'), Math.max(p.budget_bytes || 0, p.total_bytes || 0),
      inBar.map(([label, value, kind]) => [`${label}: ${bytes(value)}`, value, kind]));
    $('host-experts-row').hidden = !experts;
    show('host-experts', bytes(experts ? weights.routed_expert_bytes : NaN));
    show('engine-resident', bytes(memory.resident_bytes));
  }

  // Routed experts in host RAM (GPU expert offload): the VRAM cache of them, how its misses were
  // served, per layer, and the elastic budget the cache gives back when another process needs the
  // GPU. The engine reports none of it otherwise, and these cards stay hidden.
  function renderExperts(p) {
    const e = p.experts;
    const s = (e && e.stats) || {};
    $('experts').hidden = !e;
    $('elastic').hidden = !(e && e.elastic);
    $('expert-layers').hidden = !(e && Array.isArray(s.layer_hit_rate) && s.layer_hit_rate.length > 0);
    if (!e) return;

    const lookups = s.hits + s.misses;
    show('expert-hit-rate', percent(s.hits, lookups));
    fillBar($('expert-bar'), lookups, [[`hits: ${count(s.hits)}`, s.hits, 'hits'],
      [`fetched: ${count(s.fetched)}`, s.fetched, 'fetched'],
      [`computed on the CPU: ${count(s.cpu_computed)}`, s.cpu_computed, 'computed']]);
    show('expert-hits', count(s.hits));
    show('expert-fetched', count(s.fetched));
    show('expert-cpu-computed', count(s.cpu_computed));
    // A slot holds one expert, aligned: the routed experts' bytes over a slot's give their number.
    const expertCount = e.slot_bytes > 0 ? Math.round((p.weights || {}).routed_expert_bytes / e.slot_bytes) : NaN;
    show('expert-slots', count(e.slots));
    show('expert-slot-size', bytes(e.slot_bytes));
    show('expert-count', count(expertCount));
    show('expert-share', expertCount > 0 ? percent(Math.min(e.slots, expertCount), expertCount) : DASH);
    show('expert-resident', count(s.resident));
    show('expert-policy', e.policy || DASH);

    // Measured over the misses served so far; the split's figures are what it plans each miss with.
    show('expert-pcie', s.fetched > 0 ? rate(s.fetch_gbps) : DASH);
    show('expert-cpu', s.cpu_computed > 0 ? rate(s.cpu_gbps) : DASH);
    show('expert-split-pcie', rate((s.split || {}).pcie_gbps));
    show('expert-split-cpu', rate((s.split || {}).cpu_gbps));
    show('expert-calibrated-pcie', rate((s.calibrated || {}).pcie_gbps));
    show('expert-calibrated-cpu', rate((s.calibrated || {}).cpu_gbps));

    if (e.elastic) renderElastic(p, e, e.elastic);
    renderLayers(s);
  }

  function renderElastic(p, e, el) {
    const fixed = p.total_bytes - e.cache_bytes;
    show('elastic-budget', bytes(p.budget_bytes));
    show('elastic-ceiling', `budget, of ${bytes(el.ceiling_bytes)} ceiling`);
    fillBar($('elastic-bar'), Math.max(el.ceiling_bytes || 0, p.total_bytes || 0), [
      [`rest of the plan (weights, KV pool, workspace): ${bytes(fixed)}`, fixed, 'other'],
      [`expert cache: ${bytes(e.cache_bytes)}`, e.cache_bytes, 'experts']]);
    show('elastic-fixed', bytes(fixed));
    show('elastic-cache', bytes(e.cache_bytes));
    show('elastic-min-slots', count(e.min_slots));
    show('elastic-free', bytes(el.device_free_bytes));
    show('elastic-headroom', bytes(el.headroom_bytes));
    show('elastic-shrinks', count(el.shrinks));
    show('elastic-grows', count(el.grows));
    show('elastic-error', el.last_error || 'none');
    $('elastic-error').className = el.last_error ? 'bad' : '';
  }

  // One row per MoE layer: its hit rate, and its misses fetched vs computed on the CPU, to the scale
  // of the layer with the most.
  function renderLayers(s) {
    const hitRates = s.layer_hit_rate || [];
    const fetched = s.layer_fetched || [];
    const cpu = s.layer_cpu_computed || [];
    const misses = hitRates.map((_, i) => (fetched[i] || 0) + (cpu[i] || 0));
    const most = Math.max(1, ...misses);
    const span = (className, text) => {
      const el = document.createElement('span');
      el.className = className;
      el.textContent = text;
      return el;
    };
    const list = $('layers');
    list.replaceChildren();
    hitRates.forEach((hitRate, i) => {
      const used = hitRate > 0 || misses[i] > 0;  // no token has reached the layer yet: no rate
      const share = used && isNumber(hitRate) ? `${(100 * hitRate).toFixed(1)}%` : DASH;
      const hitMeter = span('meter', '');
      fillBar(hitMeter, 1, [[`hit rate ${share}`, hitRate, 'hits']]);
      const missMeter = span('meter', '');
      fillBar(missMeter, most, [[`fetched: ${count(fetched[i])}`, fetched[i], 'fetched'],
        [`computed on the CPU: ${count(cpu[i])}`, cpu[i], 'computed']]);
      const row = document.createElement('li');
      row.append(span('layer', String(i)), hitMeter, span('value', share), missMeter,
        span('value', `${count(fetched[i])} / ${count(cpu[i])}`));
      list.append(row);
    });
  }

  function renderClients(clients, memory) {
    const held = new Map();
    for (const t of (memory.checkpoints && memory.checkpoints.tenants) || []) held.set(t.tenant, t.bytes);
    const body = $('clients');
    body.replaceChildren();
    for (const c of clients) {
      const row = document.createElement('tr');
      if (c.in_flight > 0) row.className = 'active';
      const cells = [c.agent, c.tenant, count(c.requests), count(c.in_flight), count(c.errors), count(c.prompt_tokens),
        percent(c.restored_tokens, c.prompt_tokens), held.has(c.tenant) ? bytes(held.get(c.tenant)) : DASH,
        c.in_flight > 0 ? 'now' : `${duration(c.idle_seconds)} ago`];
      for (const text of cells) {
        const cell = document.createElement('td');
        cell.textContent = text;  // text only: agent names come from clients' User-Agent headers
        row.append(cell);
      }
      body.append(row);
    }
    $('clients-empty').hidden = clients.length > 0;
  }

  poll();
})();
