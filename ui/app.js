// coreserve reservation timeline: reads /v1 with the caller's token and draws, with d3 (SVG),
// the bookings of every site (CPUs, and GPUs per pool) and link over a time window, and a
// chosen plan as a Gantt chart and as a path on the topology. Follows the plans' events
// (GET /v1/events, Server-Sent Events read through fetch, since EventSource cannot send the
// token) and reloads, debounced, on each one; polls every FALLBACK_MS besides, for what has no
// event (holds, others' plans in a user's view) and while the stream is down. Redraws when
// something changed.
//
// The URL fragment may carry `token` (stored in sessionStorage, then removed from the URL),
// `plan`, `site`, `booked` (1: only sites with bookings), `user`, `from` and `to` (RFC 3339).
//
// Two windows: the one loaded (by hand: from/to; else the live one, now - 1 h .. now + 48 h)
// and the one shown: the loaded one when set by hand last, else fitted to the chosen plan's
// span or to the bookings in view, then zoomed and panned with d3.zoom (wheel, drag) on the
// site and link lanes together. Every time shown is UTC, 24-hour.
"use strict";

(function () {
  const FALLBACK_MS = 60 * 1000; // the slow poll, beside the event stream
  const DEBOUNCE_MS = 150; // a burst of events is one reload
  const STREAM_IDLE_MS = 45 * 1000; // three missed heartbeats (15 s): the connection is dead
  const RETRY_MAX_MS = 30 * 1000; // the longest wait before a reconnection
  const TOKEN_KEY = "coreserve.token";
  const HOUR = 3600 * 1000;
  const MINUTE = 60 * 1000;
  const fmt = d3.utcFormat("%Y-%m-%d %H:%M");
  const fmtInput = d3.utcFormat("%Y-%m-%d %H:%M");
  const parseInput = d3.utcParse("%Y-%m-%d %H:%M");
  const fmtDay = d3.utcFormat("%Y-%m-%d"), fmtHM = d3.utcFormat("%H:%M"), fmtHMS = d3.utcFormat("%H:%M:%S");
  /** An axis tick in UTC, 24-hour: the date at midnight, else the time (seconds if any). */
  const tickFormat = (d) => (d3.utcMinute(d) < d ? fmtHMS(d) : d3.utcDay(d) < d ? fmtHM(d) : fmtDay(d));
  // One colour per user in an admin's view (no orange: the chosen plan; no grey: the others).
  const USER_COLOURS = d3.schemeTableau10.filter((_, i) => i !== 1 && i !== 9);

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY),
    me: null,
    sites: [],
    network: { nodes: [], links: [] },
    plans: [], // committed plans starting before the window's end (an admin: everyone's)
    selected: null, // the chosen plan (also a cancelled one chosen by id)
    siteRes: new Map(), // site id -> bookings
    linkRes: [],
    window: null, // {from, to} chosen by hand, or null: now - 1 h .. now + 48 h
    focus: null, // what was chosen last: "window" (by hand) or "plan"; the view fits it
    view: null, // [from, to] zoomed or panned to, or null: the fitted window
    base: null, // the fitted window {from, to, by} of the last drawing
    charts: [], // the lane charts drawn: {svg, draw(x)}
    zoom: null,
    syncing: false,
    fitQuery: null, // "where does it fit": {site, cpus, duration_s}
    fit: null, // its answer: the availability, or {error}
    site: "",
    bookedOnly: null, // only sites with bookings in the window (default: when over 12 sites)
    user: "",
    plan: "",
    live: true,
    refreshes: 0,
    signature: "",
    error: null,
    refused: false, // the token was refused (401)
    timer: null,
    debounce: null,
    running: false,
    again: false,
    // The event stream: its state ("off", "connecting", "live", "reconnecting", "paused"),
    // the last event id seen (sent as Last-Event-ID on reconnection), the server's retry
    // delay, failures in a row (the backoff), and the connection's generation (a stale
    // connection's end is ignored).
    stream: {
      state: "off", token: null, ctl: null, gen: 0, lastId: null, retry: 2000, failures: 0, timer: null, idle: null, events: 0,
    },
  };

  // ---- the URL fragment ----

  function readFragment() {
    const h = new URLSearchParams(location.hash.replace(/^#/, ""));
    const token = h.get("token");
    if (token) {
      state.token = token;
      state.refused = false;
      sessionStorage.setItem(TOKEN_KEY, token);
      state.me = null;
    }
    for (const k of ["plan", "site", "user"]) {
      if (h.has(k)) state[k] = h.get(k);
    }
    if (h.has("booked")) state.bookedOnly = h.get("booked") === "1";
    const from = Date.parse(h.get("from") || ""), to = Date.parse(h.get("to") || "");
    if (from < to) {
      state.window = { from: new Date(from), to: new Date(to) };
      state.focus = "window";
    } else if (h.has("plan")) {
      state.focus = "plan";
    }
    state.view = null;
    writeFragment();
  }

  /** The fragment without the token (it is not left in the address bar or the history). */
  function writeFragment() {
    const h = new URLSearchParams();
    for (const k of ["plan", "site", "user"]) {
      if (state[k]) h.set(k, state[k]);
    }
    if (state.bookedOnly !== null) h.set("booked", state.bookedOnly ? "1" : "0");
    if (state.window) {
      h.set("from", state.window.from.toISOString());
      h.set("to", state.window.to.toISOString());
    }
    const frag = h.toString();
    history.replaceState(null, "", location.pathname + location.search + (frag ? "#" + frag : ""));
  }

  // ---- data ----

  /** The window loaded: the chosen one, or now - 1 h .. now + 48 h (to the minute). */
  function currentWindow() {
    if (state.window) return state.window;
    const now = Math.floor(Date.now() / 60000) * 60000;
    return { from: new Date(now - HOUR), to: new Date(now + 48 * HOUR) };
  }

  async function api(path) {
    const r = await fetch(path, {
      headers: { Authorization: "Bearer " + state.token, Accept: "application/json" },
      cache: "no-store",
    });
    if (!r.ok) {
      let detail = r.statusText;
      try {
        const p = await r.json();
        detail = p.detail || p.title || detail;
      } catch (_) {
        // not a problem body
      }
      const e = new Error(`${r.status} on ${path.split("?")[0]}: ${detail}`);
      e.status = r.status;
      throw e;
    }
    return r.json();
  }

  const byName = (a, b) => a.localeCompare(b, "en", { numeric: true });
  const times = (x) => Object.assign(x, { s: Date.parse(x.start), e: Date.parse(x.end) });

  async function load() {
    const w = currentWindow();
    const q = `from=${encodeURIComponent(w.from.toISOString())}&to=${encodeURIComponent(w.to.toISOString())}`;
    const [me, sites, network, plans, linkRes] = await Promise.all([
      state.me ? Promise.resolve(state.me) : api("/v1/whoami"),
      api("/v1/sites").then((l) => l.sort((a, b) => byName(a.id, b.id))),
      api("/v1/network"),
      // Booked plans: committed, active (running), completed (ended), and broken (a site no
      // longer honours a reservation of it).
      Promise.all(["committed", "active", "completed", "broken"].map((st) =>
        api(`/v1/plans?status=${st}&to=${encodeURIComponent(w.to.toISOString())}`))).then((l) => l.flat()),
      api(`/v1/network/reservations?${q}`),
    ]);
    const shown = sites.filter((s) => !state.site || s.id === state.site);
    const lists = await Promise.all(
      shown.map((s) => api(`/v1/sites/${encodeURIComponent(s.id)}/reservations?${q}`)),
    );
    const f = state.fitQuery;
    const fit = f
      ? api(`/v1/sites/${encodeURIComponent(f.site)}/availability?${q}&cpus=${f.cpus}&duration_s=${f.duration_s}`)
        .then((a) => Object.assign(a, f, { from: w.from.toISOString(), to: w.to.toISOString() }),
          (e) => {
            if (e.status === 401) throw e;
            return Object.assign({ error: e.message }, f, { from: w.from.toISOString(), to: w.to.toISOString() });
          })
      : Promise.resolve(null);
    let selected = plans.find((p) => p.id === state.plan) || null;
    if (state.plan && !selected) {
      try {
        selected = await api(`/v1/plans/${encodeURIComponent(state.plan)}`);
      } catch (e) {
        if (e.status !== 404 && e.status !== 403) throw e;
        selected = { missing: true, id: state.plan, detail: e.message };
      }
    }
    return {
      me, sites, network, plans, linkRes, siteRes: new Map(shown.map((s, i) => [s.id, lists[i]])), selected,
      fit: await fit,
    };
  }

  /** Loads everything and redraws if anything changed (or `force`). One at a time. */
  async function refresh(force) {
    if (state.running) {
      state.again = true;
      return;
    }
    state.running = true;
    clearTimeout(state.timer);
    try {
      if (!state.token) {
        Object.assign(state, { me: null, error: null, plans: [], selected: null, siteRes: new Map(), linkRes: [], fit: null });
        render("Enter an API token (admin or user) to see the bookings.");
        setStatus("no token", false);
        return;
      }
      let data;
      try {
        data = await load();
        state.error = null;
      } catch (e) {
        state.error = e;
        if (e.status === 401) {
          state.refused = true; // no more polling nor stream until another token is given
          stopStream("off");
          Object.assign(state, { me: null, plans: [], selected: null, siteRes: new Map(), linkRes: [] });
          render("The token was refused (401). Enter another one.");
        }
        setStatus(e.message, true);
        return;
      }
      Object.assign(state, data);
      state.refreshes += 1;
      document.body.dataset.refreshes = String(state.refreshes);
      const w = currentWindow();
      const signature = JSON.stringify([
        state.me, state.sites, state.network.links.length, state.plans.map((p) => p.id), state.selected,
        [...state.siteRes], state.linkRes, w, state.site, state.bookedOnly, state.user, state.plan, state.fit,
      ]);
      if (force || signature !== state.signature) {
        state.signature = signature;
        render();
      }
      const n = [...state.siteRes.values()].reduce((a, l) => a + l.length, 0);
      setStatus(`${n} site bookings, ${state.linkRes.length} link bookings · updated ${d3.utcFormat("%H:%M:%S")(new Date())} UTC`, false);
    } finally {
      state.running = false;
      if (state.again) {
        state.again = false;
        refresh(true);
      } else if (state.live && state.token && !state.refused) {
        state.timer = setTimeout(() => refresh(false), FALLBACK_MS);
      }
    }
  }

  /** A reload soon: events come in bursts (a plan's commit, then its activation...). */
  function refreshSoon() {
    clearTimeout(state.debounce);
    state.debounce = setTimeout(() => refresh(false), DEBOUNCE_MS);
  }

  function setStatus(text, error) {
    d3.select("#status").text(text).classed("error", error);
  }

  // ---- the event stream (GET /v1/events) ----
  //
  // EventSource cannot send an Authorization header, so the stream is read with fetch: the
  // body's bytes decoded as UTF-8 and cut into Server-Sent Events lines (`id:`, `event:`,
  // `data:`, `retry:`, `:` comments). Every `plan.*`, `job.*` and `transfer.*` event reloads (debounced). After a drop
  // (an error, the end of the body, or nothing heard for STREAM_IDLE_MS, heartbeats included)
  // it reconnects with `Last-Event-ID` after a backoff: the server's `retry:` delay, doubled
  // per failure in a row up to RETRY_MAX_MS, with jitter. A 401 stops it (as it stops polling).

  /** (Re)starts the stream if it should run and does not (or runs with another token). */
  function ensureStream() {
    const s = state.stream;
    const want = !!state.token && !state.refused && state.live;
    if (!want) {
      stopStream(state.token && !state.refused ? "paused" : "off");
    } else if (s.token !== state.token || s.state === "off" || s.state === "paused") {
      if (s.token !== state.token) {
        s.lastId = null; // another principal: its own events, from now on
        s.failures = 0;
      }
      connect();
    }
  }

  function stopStream(why) {
    const s = state.stream;
    s.gen += 1; // whatever the current connection does next is ignored
    if (s.ctl) s.ctl.abort();
    s.ctl = null;
    clearTimeout(s.timer);
    clearTimeout(s.idle);
    setStream(why);
  }

  function connect() {
    const s = state.stream;
    stopStream(s.failures ? "reconnecting" : "connecting");
    const gen = s.gen;
    const ctl = new AbortController();
    s.ctl = ctl;
    s.token = state.token;
    follow(gen, ctl).then(() => dropped(gen, null), (e) => dropped(gen, e));
  }

  /** Nothing heard for STREAM_IDLE_MS: the connection is taken for dead. */
  function watch(gen, ctl) {
    const s = state.stream;
    clearTimeout(s.idle);
    s.idle = setTimeout(() => {
      if (gen === s.gen) ctl.abort();
    }, STREAM_IDLE_MS);
  }

  async function follow(gen, ctl) {
    const s = state.stream;
    const headers = { Authorization: "Bearer " + s.token, Accept: "text/event-stream" };
    if (s.lastId !== null) headers["Last-Event-ID"] = s.lastId;
    watch(gen, ctl);
    const r = await fetch("/v1/events", { headers, cache: "no-store", signal: ctl.signal });
    if (!r.ok || !r.body) {
      const e = new Error(`${r.status} on /v1/events`);
      e.status = r.status;
      throw e;
    }
    if (gen !== s.gen) return;
    // Heard: live. Reload once, for what happened while it was not (before the first
    // connection, or what a resumption cannot replay).
    s.failures = 0;
    setStream("live");
    refreshSoon();
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    const ev = { id: null, type: "", data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (gen !== s.gen) return;
      if (done) return;
      watch(gen, ctl);
      buf += decoder.decode(value, { stream: true });
      // A line ends at CRLF, LF or CR (a CR last in the buffer may be half of a CRLF).
      const eol = /\r\n|\n|\r(?!$)/g;
      let at = 0, m;
      while ((m = eol.exec(buf))) {
        line(ev, buf.slice(at, m.index));
        at = eol.lastIndex;
      }
      buf = buf.slice(at);
    }
  }

  /** One line of the stream, as the Server-Sent Events format reads it. */
  function line(ev, text) {
    const s = state.stream;
    if (text === "") {
      // The end of an event: dispatch it (if it has data).
      if (ev.id !== null) s.lastId = ev.id;
      if (ev.data.length) onEvent(ev.type || "message", ev.data.join("\n"));
      ev.type = "";
      ev.data = [];
      return;
    }
    if (text.startsWith(":")) return; // a comment: `: heartbeat`, `: connected`
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") ev.type = value;
    else if (field === "data") ev.data.push(value);
    else if (field === "id" && !value.includes("\0")) ev.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) s.retry = Number(value);
  }

  function onEvent(type, data) {
    const s = state.stream;
    s.events += 1;
    let e = {};
    try {
      e = JSON.parse(data);
    } catch (_) {
      // not JSON: still counted
    }
    d3.select("#stream").attr("data-events", s.events).attr("data-last-id", s.lastId)
      .attr("data-last-type", type).attr("data-last-plan", e.plan_id || null);
    if (/^(plan|job|transfer)\./.test(type)) refreshSoon();
  }

  /** The connection `gen` ended: `e` why (null: the body ended). Reconnects after a backoff. */
  function dropped(gen, e) {
    const s = state.stream;
    if (gen !== s.gen) return; // stopped on purpose, or replaced
    clearTimeout(s.idle);
    s.ctl = null;
    if (e && e.status === 401) {
      // The token was refused: as for a poll, nothing more until another one is given.
      state.refused = true;
      stopStream("off");
      refresh(true);
      return;
    }
    if (e && e.status === 400) s.lastId = null; // not an event id the server knows: from now on
    s.failures += 1;
    const delay = Math.min(RETRY_MAX_MS, s.retry * 2 ** (s.failures - 1)) * (0.75 + Math.random() * 0.5);
    setStream("reconnecting", delay);
    s.timer = setTimeout(() => {
      if (gen === s.gen) connect();
    }, delay);
  }

  /** The stream's state in the page (`#stream`: data-state, a word and why). */
  function setStream(st, delay) {
    const s = state.stream;
    s.state = st;
    const text = {
      off: "stream off", paused: "paused", connecting: "connecting…", live: "live",
      reconnecting: `reconnecting${delay ? ` in ${Math.max(1, Math.round(delay / 1000))} s` : ""}…`,
    }[st];
    const title = {
      off: "no event stream (no token)",
      paused: "not following: live is off",
      connecting: "connecting to the event stream (GET /v1/events)",
      live: "following the plans' events (GET /v1/events); a poll every minute besides",
      reconnecting: `the event stream dropped (${s.failures} failure${s.failures === 1 ? "" : "s"} in a row); ` +
        "it resumes after the last event seen; a poll every minute meanwhile",
    }[st];
    d3.select("#stream").attr("data-state", st).attr("title", title).text(text);
  }

  // ---- which booking belongs to which plan ----

  // Plans do not carry hold ids: a booking is matched to a plan's job (or transfer link) by
  // where, when and how much. Each job matches one booking at most.
  function match() {
    const pool = new Map();
    const add = (k, v) => (pool.has(k) ? pool.get(k).push(v) : pool.set(k, [v]));
    const key = (where, start, end, amount) => `${where}|${Date.parse(start)}|${Date.parse(end)}|${amount}`;
    for (const p of state.plans) {
      for (const j of p.jobs) add("s|" + key(j.site, j.start, j.end, j.cpus), { plan: p, job: j });
      for (const t of p.transfers) {
        for (const l of t.path) add("l|" + key(l, t.start, t.end, t.bandwidth_mbps), { plan: p, transfer: t });
      }
    }
    const take = (k) => (pool.get(k) || []).shift() || null;
    for (const [site, list] of state.siteRes) {
      for (const r of list) {
        times(r);
        r.match = r.state === "committed" ? take("s|" + key(site, r.start, r.end, r.cpus)) : null;
      }
    }
    for (const r of state.linkRes) {
      times(r);
      r.match = r.state === "committed" ? take("l|" + key(r.link, r.start, r.end, r.bandwidth_mbps)) : null;
    }
  }

  /** GPU model names compare case-insensitively (as the sites compare them). */
  const sameModel = (a, b) => String(a).toLowerCase() === String(b).toLowerCase();

  /** Is this plan shown in detail (the user filter)? */
  const highlighted = (p) => !!p && (!state.user || p.user === state.user);

  // ---- drawing ----

  function render(message) {
    renderControls();
    match();
    const bookedOnly = state.bookedOnly === null ? state.sites.length > 12 : state.bookedOnly;
    d3.select("#booked-only").property("checked", bookedOnly);
    const fitSite = state.fit && !state.fit.error ? state.fit.site : null;
    const sites = state.sites.filter((s) => !state.site || s.id === state.site)
      .filter((s) => !bookedOnly || (state.siteRes.get(s.id) || []).length || s.id === fitSite);
    const label = nodeLabels();
    const siteName = siteNames();
    // A site's CPU lane, then a lane per GPU pool of it: the GPUs its bookings hold of that
    // pool over time, scaled to the pool's size.
    const siteLanes = sites.flatMap((s) => {
      const items = state.siteRes.get(s.id) || [];
      const cpu = {
        id: s.id, title: siteName(s.id), sub: `${s.id} · ${s.cpus} CPUs · ${s.os}`, capacity: s.cpus, unit: "CPUs",
        hint: `site ${s.id} at ${label(s.node)} [${s.node}]`, items,
      };
      const gpus = (s.gpus || []).map((pool) => ({
        id: s.id, pool: pool.model, kind: "gpu", cls: "gpu-reservation", laneH: 26, capacity: pool.count, unit: "GPUs",
        amount: (r) => r.gpus.count, title: `${pool.count} × ${pool.model}`,
        sub: `GPUs · cc ${pool.compute_capability} · ${pool.memory_gib} GiB`,
        hint: `GPU pool ${pool.model} of site ${s.id}: ${pool.count} GPUs, compute capability ` +
          `${pool.compute_capability}, ${pool.memory_gib} GiB each`,
        items: items.filter((r) => r.gpus && r.gpus.count > 0 && sameModel(r.gpus.model, pool.model)),
      }));
      return [cpu, ...gpus];
    });
    const byLink = d3.group(state.linkRes, (r) => r.link);
    const linkLanes = state.network.links.filter((l) => byLink.has(l.id)).map((l) => ({
      id: l.id, title: `${label(l.a)} – ${label(l.b)}`, sub: `${l.id} · ${l.capacity_mbps} Mb/s`,
      hint: `link ${l.id}: ${label(l.a)} [${l.a}] – ${label(l.b)} [${l.b}]`,
      capacity: l.capacity_mbps, unit: "Mb/s", items: byLink.get(l.id),
    }));
    state.base = message ? null : fitted([...siteLanes, ...linkLanes].flatMap((l) => l.items));
    const asked = state.fitPending, f = state.fit;
    if (asked && f && f.site === asked.site && f.cpus === asked.cpus && f.duration_s === asked.duration_s) {
      state.fitPending = null;
      reveal(f);
    }
    state.charts = [];
    renderLanes({
      el: "#sites", lanes: siteLanes, cls: "reservation", key: "site", amount: (r) => r.cpus, message, laneH: 38,
      empty: bookedOnly ? "No site is booked in this window." : "No site matches the filter.",
    });
    renderLanes({
      el: "#links", lanes: linkLanes, cls: "link-reservation", key: "link", amount: (r) => r.bandwidth_mbps,
      message, laneH: 28, empty: "No link is booked in this window.",
    });
    attachZoom();
    renderUserLegend(message);
    renderFitResult();
    renderPlan(message);
  }

  /**
   * The window to show before any zoom: the loaded one when it was set by hand last; else the
   * chosen plan's span; else the span of `items` (the bookings in view) within the loaded
   * window; each with a margin of 5 % (at least 5 minutes). Without any: the loaded window.
   */
  function fitted(items) {
    const w = currentWindow();
    const p = state.selected && !state.selected.missing ? state.selected : null;
    const spans = (list) => list.map((x) => [Date.parse(x.start), Date.parse(x.end)]);
    let by, span;
    if (state.window && state.focus === "window") {
      return { from: w.from, to: w.to, by: "window" };
    } else if (p && p.jobs.length) {
      by = "plan";
      span = spans([...p.jobs, ...p.transfers]);
    } else if (state.window) {
      return { from: w.from, to: w.to, by: "window" };
    } else {
      by = "bookings";
      span = spans(items).map(([s, e]) => [Math.max(s, w.from.getTime()), Math.min(e, w.to.getTime())])
        .filter(([s, e]) => s < e);
    }
    if (!span.length) return { from: w.from, to: w.to, by: "window" };
    const lo = d3.min(span, (d) => d[0]), hi = d3.max(span, (d) => d[1]);
    const pad = Math.max((hi - lo) * 0.05, 5 * MINUTE);
    return { from: new Date(lo - pad), to: new Date(hi + pad), by };
  }

  /** Widens the window shown to the slot of a "where does it fit" answer, if it lies outside. */
  function reveal(f) {
    if (!f.earliest_start || !state.base) return;
    const s = Date.parse(f.earliest_start), e = s + f.duration_s * 1000;
    const v = shown();
    if (s >= v.from.getTime() && e <= v.to.getTime()) return;
    const lo = Math.min(v.from.getTime(), s), hi = Math.max(v.to.getTime(), e);
    const pad = Math.max((hi - lo) * 0.03, 5 * MINUTE);
    state.view = [new Date(lo - pad), new Date(hi + pad)];
  }

  /** The window shown: the zoomed one, else the fitted one. */
  function shown() {
    if (state.view) return { from: state.view[0], to: state.view[1], by: "zoom" };
    return state.base || Object.assign(currentWindow(), { by: "window" });
  }

  function siteNames() {
    const label = nodeLabels();
    const perNode = d3.rollup(state.sites, (l) => l.length, (s) => s.node);
    const m = new Map(state.sites.map((s) => [s.id, perNode.get(s.node) > 1 ? `${label(s.node)} · ${s.id}` : label(s.node)]));
    return (id) => m.get(id) || id;
  }

  function nodeLabels() {
    const m = new Map(state.network.nodes.map((n) => [n.id, n.label || n.id]));
    return (id) => m.get(id) || id;
  }

  function renderControls() {
    const me = state.me;
    const who = d3.select("#whoami").text("");
    if (me) {
      who.append("b").text(me.user);
      who.append("span").text(me.admin ? " · admin: every plan and booking" : " · user: your plans in detail, others' bookings anonymous");
    }
    const w = currentWindow();
    for (const [id, t] of [["#from", w.from], ["#to", w.to]]) {
      const input = document.querySelector(id);
      if (document.activeElement !== input) {
        input.value = fmtInput(t);
        input.setAttribute("value", input.value);
      }
    }
    const siteName = siteNames();
    const siteOptions = state.sites.map((s) => [s.id, `${siteName(s.id)} · ${s.id} (${s.cpus} CPUs)`]);
    fill("#site-filter", "all sites", siteOptions, state.site);
    const fitSite = document.querySelector("#fit-site");
    const fitValue = fitSite.value || (state.fitQuery && state.fitQuery.site) || (state.sites[0] || {}).id || "";
    d3.select(fitSite).selectAll("option").data(siteOptions).join("option")
      .attr("value", (d) => d[0]).text((d) => d[1]);
    fitSite.value = fitValue;
    d3.select("#user-filter-label").property("hidden", !(me && me.admin));
    const users = [...new Set(state.plans.map((p) => p.user))].sort();
    state.colour = me && me.admin ? d3.scaleOrdinal(USER_COLOURS).domain(users) : null;
    fill("#user-filter", "all users", users.map((u) => [u, u]), state.user);
    const plans = state.plans.filter((p) => highlighted(p) && planEnd(p) > w.from.getTime());
    if (state.selected && !state.selected.missing && !plans.some((p) => p.id === state.selected.id)) {
      plans.push(state.selected);
    }
    plans.sort((a, b) => planStart(a) - planStart(b));
    fill("#plan-select", "— choose a plan —", plans.map((p) => [p.id, planLabel(p)]), state.plan);
  }

  function fill(sel, none, options, value) {
    const s = d3.select(sel);
    const all = [["", none], ...options];
    if (value && !options.some(([v]) => v === value)) all.push([value, value]);
    s.selectAll("option").data(all).join("option").attr("value", (d) => d[0]).text((d) => d[1]);
    s.property("value", value);
  }

  const planStart = (p) => d3.min(p.jobs, (j) => Date.parse(j.start)) || Date.parse(p.created_at);
  const planEnd = (p) => d3.max([...p.jobs, ...p.transfers], (x) => Date.parse(x.end)) || 0;
  const planLabel = (p) =>
    `${fmt(new Date(planStart(p)))} · ${p.request_id}` + (state.me && state.me.admin ? ` · ${p.user}` : "") +
    (p.status === "committed" ? "" : ` (${p.status})`);

  /** First-fit stacking: each booking gets the lowest offset free over its interval. */
  function pack(items, amount) {
    const sorted = items.slice().sort((a, b) => a.s - b.s || amount(b) - amount(a));
    const placed = [];
    for (const r of sorted) {
      const busy = placed
        .filter((p) => p.r.s < r.e && p.r.e > r.s)
        .map((p) => [p.off, p.off + amount(p.r)])
        .sort((a, b) => a[0] - b[0]);
      let off = 0;
      for (const [a, b] of busy) {
        if (a - off >= amount(r)) break;
        off = Math.max(off, b);
      }
      placed.push({ r, off });
    }
    return placed;
  }

  /** `text` cut to `n` characters (with an ellipsis). */
  const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

  function width(el) {
    return Math.max(640, Math.floor(el.getBoundingClientRect().width) || 1200);
  }

  function tooltip(r, amountText, where) {
    const when = `${fmt(new Date(r.s))} – ${fmt(new Date(r.e))} UTC`;
    const m = r.match;
    if (m && highlighted(m.plan)) {
      const what = m.job ? `job ${m.job.name}` : `transfer ${m.transfer.from} → ${m.transfer.to}`;
      return `plan ${m.plan.request_id} (${m.plan.id})\n${what} · user ${m.plan.user}\n${amountText} on ${where}\n${when}\n${r.state}`;
    }
    return `booked: ${amountText} on ${where}\n${when}\n${r.state}` + (r.hold ? `\nhold ${r.hold}` : "");
  }

  /** The fill of a plan's bar in an admin's view: its user's colour (the chosen plan: orange). */
  function userFill(r) {
    const m = r.match;
    if (!state.colour || !m || !highlighted(m.plan) || m.plan.id === state.plan) return null;
    return state.colour(m.plan.user);
  }

  function renderUserLegend(message) {
    const box = d3.select("#user-legend");
    const users = state.colour && !message ? state.colour.domain().filter((u) => !state.user || u === state.user) : [];
    box.property("hidden", !users.length);
    box.selectAll("*").remove();
    if (!users.length) return;
    box.append("span").text("users:");
    const item = box.selectAll("span.user-key").data(users).join("span").attr("class", "user-key")
      .attr("data-user", (u) => u);
    item.append("span").attr("class", "swatch").style("background", (u) => state.colour(u));
    item.append("span").text((u) => u);
  }

  /**
   * One lane per resource: bookings stacked over time, the capacity as a dashed line. The
   * static parts are drawn here; what depends on time by `draw(x)` (again on every zoom).
   */
  function renderLanes({ el, lanes, cls: barCls, key, amount: amountOf, message, empty, laneH }) {
    const box = d3.select(el);
    box.selectAll("*").remove();
    if (message || !lanes.length) {
      box.append("div").attr("class", "empty").text(message || empty);
      return;
    }
    const W = width(box.node());
    const m = { left: 170, right: 40, top: 22, bottom: 4 };
    const gap = 6;
    // A lane may have its own height, bars and amount (a GPU pool's under its site's CPUs).
    const heights = lanes.map((l) => l.laneH || laneH);
    const tops = heights.map((_, i) => m.top + gap / 2 + d3.sum(heights.slice(0, i)) + i * gap);
    const H = m.top + d3.sum(heights) + lanes.length * gap + m.bottom;
    const svg = box.append("svg").attr("viewBox", `0 0 ${W} ${H}`).attr("width", W).attr("height", H)
      .attr("class", "lanes").attr("role", "img").attr("aria-label", `${key} bookings over time`);
    svg.append("defs").append("clipPath").attr("id", `clip-${key}`)
      .append("rect").attr("x", m.left).attr("y", 0).attr("width", W - m.left - m.right).attr("height", H);
    // Catches the wheel and drags between the bars.
    svg.append("rect").attr("class", "zoom-area").attr("x", m.left).attr("y", 0)
      .attr("width", W - m.left - m.right).attr("height", H);
    const axis = svg.append("g").attr("class", "axis").attr("transform", `translate(0,${m.top})`);
    const grid = svg.append("g").attr("class", "grid").attr("transform", `translate(0,${H - m.bottom})`);
    const ticks = Math.max(4, Math.floor(W / 120));
    const fit = key === "site" && state.fit && !state.fit.error ? state.fit : null;
    const drawers = [];
    lanes.forEach((lane, i) => {
      const laneH = heights[i], amount = lane.amount || amountOf, cls = lane.cls || barCls;
      const gpu = lane.kind === "gpu";
      const g = svg.append("g").attr("class", gpu ? "lane gpu-lane" : "lane").attr(`data-${key}`, lane.id)
        .attr("data-pool", gpu ? lane.pool : null).attr("data-capacity", gpu ? lane.capacity : null)
        .attr("transform", `translate(0,${tops[i]})`);
      g.append("rect").attr("class", "lane-bg").attr("x", m.left).attr("width", W - m.left - m.right)
        .attr("height", laneH);
      const lx = gpu ? 16 : 4;
      g.append("text").attr("class", "lane-label").attr("x", lx).attr("y", laneH / 2 - (gpu ? 1 : 3))
        .text(clip(lane.title, gpu ? 22 : 24))
        .append("title").text(`${lane.title}\n${lane.hint}`);
      g.append("text").attr("class", "lane-sub").attr("x", lx).attr("y", laneH / 2 + (gpu ? 10 : 11))
        .text(clip(lane.sub, gpu ? 28 : 30))
        .append("title").text(lane.sub);
      const placed = pack(lane.items, amount);
      const top = Math.max(lane.capacity, d3.max(placed, (d) => d.off + amount(d.r)) || 0);
      const y = d3.scaleLinear([0, top], [laneH - 1, 3]);
      const body = g.append("g").attr("clip-path", `url(#clip-${key})`);
      const bars = body.selectAll(`rect.${cls}`).data(placed).join("rect")
        .attr("class", cls)
        .attr(`data-${key}`, lane.id)
        .attr("data-pool", gpu ? lane.pool : null)
        .attr("data-state", (d) => d.r.state)
        .attr("data-start", (d) => d.r.start)
        .attr("data-end", (d) => d.r.end)
        .attr("data-amount", (d) => amount(d.r))
        .attr("data-plan", (d) => (d.r.match && highlighted(d.r.match.plan) ? d.r.match.plan.id : null))
        .attr("data-user", (d) => (d.r.match && highlighted(d.r.match.plan) ? d.r.match.plan.user : null))
        .attr("data-job", (d) => (d.r.match && d.r.match.job && highlighted(d.r.match.plan) ? d.r.match.job.name : null))
        .attr("data-selected", (d) => (d.r.match && d.r.match.plan.id === state.plan && highlighted(d.r.match.plan) ? "" : null))
        .style("fill", (d) => userFill(d.r))
        .attr("y", (d) => y(d.off + amount(d.r)))
        .attr("height", (d) => Math.max(1, y(d.off) - y(d.off + amount(d.r))))
        .on("click", (_, d) => {
          if (d.r.match && highlighted(d.r.match.plan)) choosePlan(d.r.match.plan.id);
        });
      bars.append("title").text((d) => tooltip(d.r, gpu ? `${amount(d.r)} GPUs (${lane.pool})` : `${amount(d.r)} ${lane.unit}`,
        gpu ? `${lane.id}'s GPU pool ${lane.pool}` : `${lane.title} (${lane.id})`));
      g.append("line").attr("class", "capacity").attr("x1", m.left).attr("x2", W - m.right)
        .attr("y1", y(lane.capacity)).attr("y2", y(lane.capacity));
      g.append("text").attr("class", "capacity-label").attr("x", W - m.right + 4).attr("y", y(lane.capacity) + 3)
        .text(lane.capacity);
      let slot = null;
      if (fit && !gpu && fit.site === lane.id && fit.earliest_start) {
        const s = Date.parse(fit.earliest_start), e = s + fit.duration_s * 1000;
        slot = body.append("rect").attr("class", "fit-slot").attr("data-site", lane.id)
          .attr("data-start", fit.earliest_start).attr("data-end", new Date(e).toISOString())
          .attr("data-cpus", fit.cpus).attr("data-from", fit.from).attr("data-to", fit.to)
          .attr("y", y(fit.cpus)).attr("height", Math.max(2, y(0) - y(fit.cpus)));
        slot.append("title").text(`${fit.cpus} CPUs for ${hours(fit.duration_s)} fit from ${fmt(new Date(s))} UTC`);
        slot.datum([s, e]);
      }
      drawers.push((x, d0, d1) => {
        bars.attr("x", (d) => x(Math.max(d.r.s, d0)))
          .attr("width", (d) => Math.max(1.5, x(Math.min(d.r.e, d1)) - x(Math.max(d.r.s, d0))))
          .attr("visibility", (d) => (d.r.e <= d0 || d.r.s >= d1 ? "hidden" : null));
        if (slot) {
          const [s, e] = slot.datum();
          slot.attr("x", x(Math.max(s, d0))).attr("width", Math.max(2, x(Math.min(e, d1)) - x(Math.max(s, d0))))
            .attr("visibility", e <= d0 || s >= d1 ? "hidden" : null);
        }
      });
    });
    const nowLine = svg.append("line").attr("class", "now-line").attr("y1", m.top).attr("y2", H - m.bottom);
    const draw = (x) => {
      const [d0, d1] = x.domain().map((d) => d.getTime());
      axis.call(d3.axisTop(x).ticks(ticks).tickFormat(tickFormat));
      axis.selectAll(".tick").attr("data-t", (d) => d.toISOString());
      grid.call(d3.axisBottom(x).ticks(ticks).tickSize(-(H - m.top - m.bottom)).tickFormat(""));
      for (const f of drawers) f(x, d0, d1);
      const now = Date.now();
      nowLine.attr("x1", x(now)).attr("x2", x(now)).attr("visibility", now >= d0 && now <= d1 ? null : "hidden");
      svg.attr("data-from", new Date(d0).toISOString()).attr("data-to", new Date(d1).toISOString());
    };
    state.charts.push({ svg, draw, range: [m.left, W - m.right] });
  }

  /** The scale of the window shown, over `range`. */
  function shownScale(range) {
    const v = shown();
    return d3.scaleUtc([v.from, v.to], range);
  }

  /** Draws every lane chart over the window shown, and says which window that is. */
  function drawCharts() {
    for (const c of state.charts) c.draw(shownScale(c.range));
    const v = shown();
    const why = { zoom: "zoomed", plan: "fits the chosen plan", bookings: "fits the bookings in view", window: "the window" };
    d3.select("#view-range").attr("data-by", v.by)
      .text(state.base ? `showing ${fmt(v.from)} – ${fmt(v.to)} UTC (${why[v.by]})` : "");
    d3.select("#zoom-reset").property("disabled", !state.view);
  }

  /**
   * d3.zoom on the lane charts, which move together: a zoom or pan of one sets `state.view`
   * and redraws all. The transforms are relative to the fitted window (scale 1), so a redraw
   * (polling) keeps the view.
   */
  function attachZoom() {
    if (!state.charts.length || !state.base) {
      drawCharts();
      return;
    }
    const range = state.charts[0].range;
    const baseX = d3.scaleUtc([state.base.from, state.base.to], range);
    const w = currentWindow();
    const lo = Math.min(w.from.getTime(), state.base.from.getTime());
    const hi = Math.max(w.to.getTime(), state.base.to.getTime());
    const baseSpan = state.base.to - state.base.from;
    const zoom = d3.zoom()
      .scaleExtent([Math.min(1, baseSpan / (hi - lo)), Math.max(1, baseSpan / (10 * MINUTE))])
      .translateExtent([[baseX(lo), -1e7], [baseX(hi), 1e7]])
      .on("zoom", function (ev) {
        if (state.syncing) return;
        const x = ev.transform.rescaleX(baseX);
        const [a, b] = x.domain();
        const k = ev.transform.k, still = Math.abs(k - 1) < 1e-9 && Math.abs(ev.transform.x) < 0.5;
        state.view = still ? null : [a, b];
        sync(ev.transform, this);
        drawCharts();
      });
    state.zoom = zoom;
    for (const c of state.charts) c.svg.call(zoom);
    let t = d3.zoomIdentity;
    if (state.view) {
      const [a, b] = state.view.map(baseX);
      const k = (range[1] - range[0]) / Math.max(b - a, 1e-9);
      t = d3.zoomIdentity.translate(range[0] - k * a, 0).scale(k);
    }
    sync(t, null);
    drawCharts();
  }

  /** Sets the zoom transform of every lane chart but `except` (without a zoom event). */
  function sync(t, except) {
    state.syncing = true;
    try {
      for (const c of state.charts) {
        if (c.svg.node() !== except) c.svg.call(state.zoom.transform, t);
      }
    } finally {
      state.syncing = false;
    }
  }

  const hours = (s) => (s % 3600 ? `${+(s / 3600).toFixed(2)} h` : `${s / 3600} h`);

  /** The answer of "where does it fit" beside its form. */
  function renderFitResult() {
    const out = d3.select("#fit-result").text("").attr("data-state", null).classed("error", false);
    const f = state.fit;
    if (!f) return;
    const name = siteNames()(f.site);
    const what = `${f.cpus} CPUs for ${hours(f.duration_s)} at ${name} (${f.site})`;
    if (f.error) {
      out.attr("data-state", "error").classed("error", true).text(`${what}: ${f.error}`);
    } else if (f.earliest_start) {
      out.attr("data-state", "fits").attr("data-start", f.earliest_start)
        .text(`${what}: earliest start ${fmt(new Date(f.earliest_start))} UTC` +
          ` (utilisation over the window ${Math.round(f.utilisation * 100)} %)`);
    } else {
      out.attr("data-state", "none").classed("error", true)
        .text(`${what}: does not fit between ${fmt(new Date(f.from))} and ${fmt(new Date(f.to))} UTC` +
          ` (the site is ${Math.round(f.utilisation * 100)} % booked over the window; try a longer window or fewer CPUs)`);
    }
  }

  // ---- the chosen plan ----

  function renderPlan(message) {
    const gantt = d3.select("#gantt");
    gantt.selectAll("*").remove();
    const p = message ? null : state.selected;
    const title = d3.select("#plan-title");
    if (p && p.missing) {
      title.text(`plan ${p.id}: ${p.detail}`);
    } else if (p) {
      title.text(`${p.request_id} · ${p.id} · user ${p.user} · ${p.status} · cost ${p.cost.toFixed(2)} · ` +
        `${p.jobs.length} jobs, ${p.transfers.length} transfers`);
    } else {
      title.text("choose a plan above, or click one of its bookings");
    }
    const plan = p && !p.missing ? p : null;
    if (plan) renderGantt(gantt, plan);
    else gantt.append("div").attr("class", "empty").text(message || "No plan chosen.");
    renderTopology(plan, message);
  }

  function renderGantt(box, p) {
    const jobs = p.jobs.map(times), transfers = p.transfers.map(times);
    if (!jobs.length) {
      box.append("div").attr("class", "empty").text(`Nothing booked (${p.status}${p.reason ? ": " + p.reason : ""}).`);
      return;
    }
    const W = width(box.node());
    const m = { left: 190, right: 20, top: 8, bottom: 26 };
    const rowH = 32;
    const rows = jobs.length + transfers.length;
    const H = m.top + rows * rowH + m.bottom;
    const all = [...jobs, ...transfers];
    const lo = d3.min(all, (d) => d.s), hi = d3.max(all, (d) => d.e);
    const pad = Math.max((hi - lo) * 0.04, 60000);
    const x = d3.scaleUtc([lo - pad, hi + pad], [m.left, W - m.right]);
    const svg = box.append("svg").attr("viewBox", `0 0 ${W} ${H}`).attr("width", W).attr("height", H)
      .attr("class", ["committed", "active", "completed"].includes(p.status) ? "plan"
        : p.status === "broken" ? "plan plan-broken" : "plan plan-cancelled")
      .attr("data-plan", p.id).attr("role", "img").attr("aria-label", "the plan's jobs and transfers");
    svg.append("g").attr("class", "axis").attr("transform", `translate(0,${H - m.bottom})`)
      .call(d3.axisBottom(x).ticks(Math.max(3, Math.floor((W - m.left) / 110))).tickFormat(tickFormat))
      .selectAll(".tick").attr("data-t", (d) => d.toISOString());
    const rowY = (i) => m.top + i * rowH;
    const jobRow = new Map(jobs.map((j, i) => [j.name, i]));
    const siteName = siteNames();
    transfers.forEach((t, k) => {
      const i = jobs.length + k;
      const yt = rowY(i) + rowH / 2;
      for (const [name, at] of [[t.from, t.s], [t.to, t.e]]) {
        if (!jobRow.has(name)) continue;
        svg.append("path").attr("class", "gantt-edge")
          .attr("d", `M${x(at)},${rowY(jobRow.get(name)) + rowH - 6}V${yt}`);
      }
    });
    // Dependencies: an arrow from the end of each job a job is `after` to that job's start.
    const defs = svg.append("defs");
    defs.append("marker").attr("id", "dep-arrow").attr("viewBox", "0 0 8 8").attr("refX", 7).attr("refY", 4)
      .attr("markerWidth", 7).attr("markerHeight", 7).attr("orient", "auto")
      .append("path").attr("d", "M0,0L8,4L0,8z").attr("class", "gantt-dep-head");
    const jobAt = new Map(jobs.map((j) => [j.name, j]));
    jobs.forEach((j, i) => {
      for (const before of j.after || []) {
        const b = jobAt.get(before);
        if (!b) continue;
        const [x0, y0, x1, y1] = [x(b.e), rowY(jobRow.get(before)) + rowH / 2, x(j.s), rowY(i) + rowH / 2];
        const bend = Math.max(x0, x1 - 8);
        svg.append("path").attr("class", "gantt-dep").attr("data-from", before).attr("data-to", j.name)
          .attr("marker-end", "url(#dep-arrow)").attr("d", `M${x0},${y0}H${bend}V${y1}H${x1}`)
          .append("title").text(`${j.name} starts after ${before} ends`);
      }
    });
    const label = (i, main, sub) => {
      svg.append("text").attr("class", "row-label").attr("x", 4).attr("y", rowY(i) + 13).text(clip(main, 28));
      svg.append("text").attr("class", "row-sub").attr("x", 4).attr("y", rowY(i) + 26).text(clip(sub, 30))
        .append("title").text(sub);
    };
    jobs.forEach((j, i) => {
      const local = j.reservation_name ? ` · ${j.reservation_name}` : "";
      const g = j.gpus && j.gpus.count > 0 ? j.gpus : null;
      const gpus = g ? ` + ${g.count} GPU${g.count === 1 ? "" : "s"} ${g.model}` : "";
      label(i, `job ${j.name}`, j.broken ? `BROKEN: ${j.broken}` : `${siteName(j.site)} (${j.site}) · ${j.cpus} CPUs${gpus}${local}`);
      svg.append("rect").attr("class", j.broken ? "gantt-job gantt-broken" : "gantt-job").attr("data-plan", p.id)
        .attr("data-job", j.name).attr("data-gpus", g ? g.count : null).attr("data-gpu-model", g ? g.model : null)
        .attr("data-site", j.site).attr("x", x(j.s)).attr("width", Math.max(2, x(j.e) - x(j.s)))
        .attr("y", rowY(i) + 6).attr("height", rowH - 12).attr("rx", 3)
        .append("title").text(`job ${j.name}: ${j.cpus} CPUs${gpus} at ${siteName(j.site)} (${j.site})${local}\n` +
          `${fmt(new Date(j.s))} – ${fmt(new Date(j.e))} UTC` + (j.broken ? `\nbroken: ${j.broken}` : ""));
      if (g) {
        // The GPU count on the bar itself.
        svg.append("text").attr("class", "gantt-gpus").attr("data-job", j.name).attr("x", x(j.s) + 4)
          .attr("y", rowY(i) + rowH / 2 + 4).text(`${g.count} GPU${g.count === 1 ? "" : "s"}`);
      }
    });
    transfers.forEach((t, k) => {
      const i = jobs.length + k;
      const via = t.path.length ? t.path.join(", ") : "same node, no link";
      const staged = t.mode === "staged" ? "staged · " : "";
      label(i, `${t.from} → ${t.to}`, `${staged}${t.bandwidth_mbps} Mb/s · ${via}`);
      svg.append("rect").attr("class", staged ? "gantt-transfer gantt-staged" : "gantt-transfer")
        .attr("data-mode", t.mode || "concurrent").attr("data-plan", p.id).attr("data-from", t.from)
        .attr("data-to", t.to).attr("data-links", t.path.join(" ")).attr("x", x(t.s))
        .attr("width", Math.max(2, x(t.e) - x(t.s))).attr("y", rowY(i) + 9).attr("height", rowH - 18).attr("rx", 2)
        .append("title").text(`transfer ${t.from} → ${t.to}: ${t.bandwidth_mbps} Mb/s over ${via}\n` +
          `${fmt(new Date(t.s))} – ${fmt(new Date(t.e))} UTC`);
    });
  }

  // Node positions, computed once per topology: by latitude/longitude where known (an
  // equirectangular projection), the other nodes by a force layout around them (or every
  // node when fewer than two have coordinates).
  const layoutCache = { key: "", pos: null };

  function layout(nodes, links, W, H) {
    const key = JSON.stringify([nodes, links.map((l) => [l.id, l.a, l.b]), W, H]);
    if (layoutCache.key === key) return layoutCache.pos;
    const geo = nodes.filter((n) => Number.isFinite(n.latitude) && Number.isFinite(n.longitude));
    const sim = nodes.map((n) => ({ id: n.id }));
    const byId = new Map(sim.map((d) => [d.id, d]));
    let projected = false;
    if (geo.length >= 2) {
      projected = true;
      const k = Math.cos((d3.mean(geo, (n) => n.latitude) * Math.PI) / 180);
      for (const n of geo) {
        const d = byId.get(n.id);
        d.fx = d.x = n.longitude * k;
        d.fy = d.y = -n.latitude;
      }
      const xs = d3.extent(geo, (n) => n.longitude * k), ys = d3.extent(geo, (n) => -n.latitude);
      const span = Math.max(xs[1] - xs[0], ys[1] - ys[0], 1e-6);
      // The others start beside a placed neighbour, then settle among them.
      const adj = d3.group(links.flatMap((l) => [[l.a, l.b], [l.b, l.a]]), (e) => e[0]);
      let todo = sim.filter((d) => d.x === undefined);
      for (let pass = 0; pass < 3 && todo.length; pass++) {
        for (const d of todo) {
          const placed = (adj.get(d.id) || []).map((e) => byId.get(e[1])).filter((o) => o.x !== undefined);
          if (placed.length) {
            d.x = d3.mean(placed, (o) => o.x) + span * 0.03;
            d.y = d3.mean(placed, (o) => o.y) + span * 0.03;
          }
        }
        todo = todo.filter((d) => d.x === undefined);
      }
      for (const d of todo) {
        d.x = xs[1] + span * 0.1;
        d.y = ys[0] + span * 0.1 * (1 + todo.indexOf(d));
      }
      const free = sim.filter((d) => d.fx === undefined);
      if (free.length) {
        const force = d3.forceSimulation(sim)
          .force("link", d3.forceLink(links.map((l) => ({ source: l.a, target: l.b }))).id((d) => d.id)
            .distance(span * 0.06).strength(0.4))
          .force("charge", d3.forceManyBody().strength(-span * 0.02).distanceMax(span * 0.2))
          .stop();
        for (let i = 0; i < 300; i++) force.tick();
      }
    } else {
      const force = d3.forceSimulation(sim)
        .force("link", d3.forceLink(links.map((l) => ({ source: l.a, target: l.b }))).id((d) => d.id).distance(40))
        .force("charge", d3.forceManyBody().strength(-120))
        .force("x", d3.forceX(0).strength(0.05))
        .force("y", d3.forceY(0).strength(0.05))
        .stop();
      for (let i = 0; i < 300; i++) force.tick();
    }
    // Fit into the box, keeping the aspect ratio.
    const pad = 28;
    const xs = d3.extent(sim, (d) => d.x), ys = d3.extent(sim, (d) => d.y);
    const s = Math.min((W - 2 * pad) / Math.max(xs[1] - xs[0], 1e-6), (H - 2 * pad) / Math.max(ys[1] - ys[0], 1e-6));
    const ox = (W - s * (xs[1] - xs[0])) / 2, oy = (H - s * (ys[1] - ys[0])) / 2;
    const pos = new Map(sim.map((d) => [d.id, [ox + (d.x - xs[0]) * s, oy + (d.y - ys[0]) * s]]));
    pos.projected = projected;
    layoutCache.key = key;
    layoutCache.pos = pos;
    return pos;
  }

  function renderTopology(plan, message) {
    const box = d3.select("#topology");
    box.selectAll("*").remove();
    const { nodes, links } = state.network;
    if (message || !nodes.length) {
      box.append("div").attr("class", "empty").text(message ? "" : "No topology.");
      return;
    }
    const W = 560, H = 340;
    const pos = layout(nodes, links, W, H);
    const svg = box.append("svg").attr("viewBox", `0 0 ${W} ${H}`).attr("role", "img")
      .attr("aria-label", "the topology, with the chosen plan's path");
    svg.append("rect").attr("class", "topo-bg").attr("width", W).attr("height", H).attr("rx", 4);
    const onPath = new Set(plan ? plan.transfers.flatMap((t) => t.path) : []);
    // Parallel links side by side.
    const pairs = d3.group(links, (l) => [l.a, l.b].sort().join("\u0000"));
    const offset = (l) => {
      const group = pairs.get([l.a, l.b].sort().join("\u0000"));
      return (group.indexOf(l) - (group.length - 1) / 2) * 5;
    };
    const label = nodeLabels();
    const ordered = [...links.filter((l) => !onPath.has(l.id)), ...links.filter((l) => onPath.has(l.id))];
    svg.append("g").selectAll("line").data(ordered).join("line")
      .attr("class", (l) => (onPath.has(l.id) ? "path-link" : "link"))
      .attr("data-link", (l) => l.id)
      .each(function (l) {
        const [x1, y1] = pos.get(l.a), [x2, y2] = pos.get(l.b);
        const len = Math.hypot(x2 - x1, y2 - y1) || 1, o = offset(l);
        const dx = (-(y2 - y1) / len) * o, dy = ((x2 - x1) / len) * o;
        d3.select(this).attr("x1", x1 + dx).attr("y1", y1 + dy).attr("x2", x2 + dx).attr("y2", y2 + dy);
      })
      .append("title").text((l) => `${l.id}: ${label(l.a)} – ${label(l.b)}, ${l.capacity_mbps} Mb/s`);
    const sitesAt = d3.group(state.sites, (s) => s.node);
    const jobsAt = new Map();
    for (const j of plan ? plan.jobs : []) {
      const site = state.sites.find((s) => s.id === j.site);
      if (!site) continue;
      if (!jobsAt.has(site.node)) jobsAt.set(site.node, []);
      jobsAt.get(site.node).push(j);
    }
    const g = svg.append("g");
    const circles = g.selectAll("circle").data(nodes).join("circle")
      .attr("class", (n) => (jobsAt.has(n.id) ? "plan-site" : sitesAt.has(n.id) ? "node has-site" : "node"))
      .attr("data-node", (n) => n.id)
      .attr("data-sites", (n) => (jobsAt.has(n.id) ? [...new Set(jobsAt.get(n.id).map((j) => j.site))].join(" ") : null))
      .attr("cx", (n) => pos.get(n.id)[0]).attr("cy", (n) => pos.get(n.id)[1])
      .attr("r", (n) => (jobsAt.has(n.id) ? 7 : 4))
      .append("title").text((n) => {
        const sites = (sitesAt.get(n.id) || []).map((s) => `${s.id} (${s.cpus} CPUs, ${s.os})`);
        return `${label(n.id)} [${n.id}]` + (sites.length ? `\nsites: ${sites.join(", ")}` : "");
      });
    // Labels: the plan's sites first, then nodes with sites, then the others (up to 40 nodes);
    // each where it overlaps no other label nor node, else hidden until its node is hovered.
    const labels = [...jobsAt].map(([id, jobs]) => ({
      node: id, cls: "site-label", r: 7, text: `${label(id)}: ${jobs.map((j) => `${j.name}@${j.site}`).join(", ")}`,
    }));
    if (nodes.length <= 40) {
      const rest = nodes.filter((n) => !jobsAt.has(n.id));
      rest.sort((a, b) => (sitesAt.has(b.id) ? 1 : 0) - (sitesAt.has(a.id) ? 1 : 0));
      labels.push(...rest.map((n) => ({ node: n.id, cls: "node-label", r: 4, text: label(n.id) })));
    }
    placeLabels(g.append("g").attr("class", "labels"), labels, nodes, pos, W, H - 16);
    circles.on("mouseenter", (_, n) => {
      g.selectAll("text[data-hidden]").filter((l) => l.node === n.id).attr("display", null).raise();
    }).on("mouseleave", (_, n) => {
      g.selectAll("text[data-hidden]").filter((l) => l.node === n.id).attr("display", "none");
    });
    svg.append("text").attr("class", "topo-note").attr("x", 8).attr("y", H - 8)
      .text((pos.projected ? "nodes by latitude/longitude" : "force layout (no coordinates)") +
        (plan ? ` · path: ${onPath.size ? [...onPath].join(", ") : "no link"}` : ""));
  }

  /** Where a label may go around its node: [dx, dy, text-anchor] for a node of radius `r`. */
  const spots = (r) => [
    [r + 2, -r, "start"], [r + 2, r + 9, "start"], [-r - 2, -r, "end"], [-r - 2, r + 9, "end"],
    [0, -r - 4, "middle"], [0, r + 13, "middle"], [r + 3, 4, "start"], [-r - 3, 4, "end"],
  ];

  /**
   * Draws `labels` ({node, cls, r, text}) in `g`, in order, each at the first spot around its
   * node where it stays inside W × H and overlaps no label placed before nor another node;
   * a label without such a spot is hidden (`data-hidden`), shown while its node is hovered.
   */
  function placeLabels(g, labels, nodes, pos, W, H) {
    const boxes = [];
    const dots = nodes.map((n) => {
      const [x, y] = pos.get(n.id);
      return { node: n.id, x0: x - 4, y0: y - 4, x1: x + 4, y1: y + 4 };
    });
    const hit = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
    g.selectAll("text").data(labels).join("text")
      .attr("class", (l) => l.cls).attr("data-node", (l) => l.node).text((l) => l.text)
      .each(function (l) {
        const t = d3.select(this);
        const [px, py] = pos.get(l.node);
        for (const [dx, dy, anchor] of spots(l.r)) {
          t.attr("x", px + dx).attr("y", py + dy).attr("text-anchor", anchor);
          const b = this.getBBox();
          const box = { x0: b.x - 1, y0: b.y - 1, x1: b.x + b.width + 1, y1: b.y + b.height + 1 };
          const inside = box.x0 >= 0 && box.y0 >= 0 && box.x1 <= W && box.y1 <= H;
          if (inside && !boxes.some((o) => hit(o, box)) && !dots.some((d) => d.node !== l.node && hit(d, box))) {
            boxes.push(box);
            return;
          }
        }
        t.attr("x", px + l.r + 2).attr("y", py - l.r).attr("text-anchor", "start")
          .attr("display", "none").attr("data-hidden", "");
      });
  }

  // ---- controls ----

  function choosePlan(id) {
    state.plan = id;
    state.focus = id ? "plan" : state.window ? "window" : null;
    state.view = null;
    writeFragment();
    refresh(true);
  }

  /** A time typed as UTC, 24-hour: `YYYY-MM-DD HH:MM` (or with a `T`); null if it is not one. */
  function readTime(sel) {
    const t = parseInput(document.querySelector(sel).value.trim().replace("T", " "));
    return t ? t.getTime() : NaN;
  }

  function readWindowInputs() {
    const from = readTime("#from"), to = readTime("#to");
    if (Number.isNaN(from) || Number.isNaN(to)) {
      setStatus("a time is YYYY-MM-DD HH:MM, UTC, 24-hour", true);
    } else if (from < to) {
      state.window = { from: new Date(from), to: new Date(to) };
      state.focus = "window";
      state.view = null;
      writeFragment();
      refresh(true);
    } else {
      setStatus("the window's start must be before its end", true);
    }
  }

  function init() {
    readFragment();
    d3.select("#token-form").on("submit", (ev) => {
      ev.preventDefault();
      const input = document.querySelector("#token");
      const t = input.value.trim();
      if (!t) return;
      state.token = t;
      state.me = null;
      state.refused = false;
      sessionStorage.setItem(TOKEN_KEY, t);
      input.value = "";
      refresh(true);
      ensureStream();
    });
    d3.select("#forget").on("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = null;
      state.me = null;
      refresh(true);
      ensureStream();
    });
    d3.select("#filters").on("submit", (ev) => ev.preventDefault());
    d3.select("#from").on("change", readWindowInputs);
    d3.select("#to").on("change", readWindowInputs);
    d3.select("#reset-window").on("click", () => {
      state.window = null;
      state.focus = state.plan ? "plan" : null;
      state.view = null;
      writeFragment();
      refresh(true);
    });
    d3.select("#zoom-reset").on("click", () => {
      state.view = null;
      attachZoom();
    });
    d3.select("#fit-form").on("submit", (ev) => {
      ev.preventDefault();
      const cpus = Number(document.querySelector("#fit-cpus").value);
      const duration = Math.round(Number(document.querySelector("#fit-hours").value) * 3600);
      const site = document.querySelector("#fit-site").value;
      if (!site || !(cpus >= 1) || !Number.isInteger(cpus) || !(duration >= 1)) {
        d3.select("#fit-result").attr("data-state", "error").classed("error", true)
          .text("choose a site, a whole number of CPUs (at least 1) and a duration");
        return;
      }
      state.fitQuery = { site, cpus, duration_s: duration };
      state.fitPending = state.fitQuery;
      refresh(true);
    });
    d3.select("#fit-clear").on("click", () => {
      state.fitQuery = null;
      state.fit = null;
      refresh(true);
    });
    d3.select("#site-filter").on("change", (ev) => {
      state.site = ev.target.value;
      writeFragment();
      refresh(true);
    });
    d3.select("#booked-only").on("change", (ev) => {
      state.bookedOnly = ev.target.checked;
      writeFragment();
      refresh(true);
    });
    d3.select("#user-filter").on("change", (ev) => {
      state.user = ev.target.value;
      writeFragment();
      refresh(true);
    });
    d3.select("#plan-select").on("change", (ev) => choosePlan(ev.target.value));
    d3.select("#live").on("change", (ev) => {
      state.live = ev.target.checked;
      clearTimeout(state.timer);
      if (state.live) refresh(true);
      ensureStream();
    });
    window.addEventListener("hashchange", () => {
      readFragment();
      refresh(true);
      ensureStream();
    });
    let resize = null;
    window.addEventListener("resize", () => {
      clearTimeout(resize);
      resize = setTimeout(() => render(state.token ? undefined : "Enter an API token (admin or user) to see the bookings."), 150);
    });
    refresh(true);
    ensureStream();
  }

  init();
})();
