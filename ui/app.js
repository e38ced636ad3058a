// coreserve reservation timeline: reads /v1 with the caller's token and draws, with d3 (SVG),
// the bookings of every site and link over a time window, and a chosen plan as a Gantt chart
// and as a path on the topology. Polls every POLL_MS and redraws when something changed.
//
// The URL fragment may carry `token` (stored in sessionStorage, then removed from the URL),
// `plan`, `site`, `booked` (1: only sites with bookings), `user`, `from` and `to` (RFC 3339).
"use strict";

(function () {
  const POLL_MS = 2500;
  const TOKEN_KEY = "coreserve.token";
  const HOUR = 3600 * 1000;
  const fmt = d3.utcFormat("%Y-%m-%d %H:%M");
  const fmtInput = d3.utcFormat("%Y-%m-%dT%H:%M");

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
    running: false,
    again: false,
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
    if (from < to) state.window = { from: new Date(from), to: new Date(to) };
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

  /** The window shown: the chosen one, or now - 1 h .. now + 48 h (to the minute). */
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
    let selected = plans.find((p) => p.id === state.plan) || null;
    if (state.plan && !selected) {
      try {
        selected = await api(`/v1/plans/${encodeURIComponent(state.plan)}`);
      } catch (e) {
        if (e.status !== 404 && e.status !== 403) throw e;
        selected = { missing: true, id: state.plan, detail: e.message };
      }
    }
    return { me, sites, network, plans, linkRes, siteRes: new Map(shown.map((s, i) => [s.id, lists[i]])), selected };
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
        Object.assign(state, { me: null, error: null, plans: [], selected: null, siteRes: new Map(), linkRes: [] });
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
          state.refused = true; // no more polling until another token is given
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
        [...state.siteRes], state.linkRes, w, state.site, state.bookedOnly, state.user, state.plan,
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
        state.timer = setTimeout(() => refresh(false), POLL_MS);
      }
    }
  }

  function setStatus(text, error) {
    d3.select("#status").text(text).classed("error", error);
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

  /** Is this plan shown in detail (the user filter)? */
  const highlighted = (p) => !!p && (!state.user || p.user === state.user);

  // ---- drawing ----

  function render(message) {
    renderControls();
    match();
    const bookedOnly = state.bookedOnly === null ? state.sites.length > 12 : state.bookedOnly;
    d3.select("#booked-only").property("checked", bookedOnly);
    const sites = state.sites.filter((s) => !state.site || s.id === state.site)
      .filter((s) => !bookedOnly || (state.siteRes.get(s.id) || []).length);
    renderLanes({
      el: "#sites",
      lanes: sites.map((s) => ({
        id: s.id, title: s.id, sub: `${s.cpus} CPUs · ${s.os}`, capacity: s.cpus, unit: "CPUs",
        items: state.siteRes.get(s.id) || [],
      })),
      cls: "reservation", key: "site", amount: (r) => r.cpus, message, laneH: 38,
      empty: bookedOnly ? "No site is booked in this window." : "No site matches the filter.",
    });
    const byLink = d3.group(state.linkRes, (r) => r.link);
    const label = nodeLabels();
    renderLanes({
      el: "#links",
      lanes: state.network.links.filter((l) => byLink.has(l.id)).map((l) => ({
        id: l.id, title: l.id, sub: `${label(l.a)} – ${label(l.b)} · ${l.capacity_mbps} Mb/s`,
        capacity: l.capacity_mbps, unit: "Mb/s", items: byLink.get(l.id),
      })),
      cls: "link-reservation", key: "link", amount: (r) => r.bandwidth_mbps, message, laneH: 28,
      empty: "No link is booked in this window.",
    });
    renderPlan(message);
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
      if (document.activeElement !== input) input.value = fmtInput(t);
    }
    fill("#site-filter", "all sites", state.sites.map((s) => [s.id, `${s.id} (${s.cpus} CPUs)`]), state.site);
    d3.select("#user-filter-label").property("hidden", !(me && me.admin));
    const users = [...new Set(state.plans.map((p) => p.user))].sort();
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

  /** One lane per resource: bookings stacked over time, the capacity as a dashed line. */
  function renderLanes({ el, lanes, cls, key, amount, message, empty, laneH }) {
    const box = d3.select(el);
    box.selectAll("*").remove();
    if (message || !lanes.length) {
      box.append("div").attr("class", "empty").text(message || empty);
      return;
    }
    const w = currentWindow();
    const W = width(box.node());
    const m = { left: 170, right: 40, top: 22, bottom: 4 };
    const gap = 6;
    const H = m.top + lanes.length * (laneH + gap) + m.bottom;
    const x = d3.scaleUtc([w.from, w.to], [m.left, W - m.right]);
    const svg = box.append("svg").attr("viewBox", `0 0 ${W} ${H}`).attr("width", W).attr("height", H)
      .attr("role", "img").attr("aria-label", `${key} bookings over time`);
    svg.append("g").attr("class", "axis").attr("transform", `translate(0,${m.top})`)
      .call(d3.axisTop(x).ticks(Math.max(4, Math.floor(W / 120))));
    svg.append("g").attr("class", "grid").attr("transform", `translate(0,${H - m.bottom})`)
      .call(d3.axisBottom(x).ticks(Math.max(4, Math.floor(W / 120))).tickSize(-(H - m.top - m.bottom)).tickFormat(""));
    lanes.forEach((lane, i) => {
      const g = svg.append("g").attr("class", "lane").attr(`data-${key}`, lane.id)
        .attr("transform", `translate(0,${m.top + gap / 2 + i * (laneH + gap)})`);
      g.append("rect").attr("class", "lane-bg").attr("x", m.left).attr("width", W - m.left - m.right)
        .attr("height", laneH);
      g.append("text").attr("class", "lane-label").attr("x", 4).attr("y", laneH / 2 - 3).text(lane.title);
      g.append("text").attr("class", "lane-sub").attr("x", 4).attr("y", laneH / 2 + 11).text(clip(lane.sub, 30))
        .append("title").text(lane.sub);
      const placed = pack(lane.items, amount);
      const top = Math.max(lane.capacity, d3.max(placed, (d) => d.off + amount(d.r)) || 0);
      const y = d3.scaleLinear([0, top], [laneH - 1, 3]);
      g.selectAll(`rect.${cls}`).data(placed).join("rect")
        .attr("class", cls)
        .attr(`data-${key}`, lane.id)
        .attr("data-state", (d) => d.r.state)
        .attr("data-start", (d) => d.r.start)
        .attr("data-end", (d) => d.r.end)
        .attr("data-amount", (d) => amount(d.r))
        .attr("data-plan", (d) => (d.r.match && highlighted(d.r.match.plan) ? d.r.match.plan.id : null))
        .attr("data-user", (d) => (d.r.match && highlighted(d.r.match.plan) ? d.r.match.plan.user : null))
        .attr("data-job", (d) => (d.r.match && d.r.match.job && highlighted(d.r.match.plan) ? d.r.match.job.name : null))
        .attr("data-selected", (d) => (d.r.match && d.r.match.plan.id === state.plan && highlighted(d.r.match.plan) ? "" : null))
        .attr("x", (d) => x(Math.max(d.r.s, w.from.getTime())))
        .attr("width", (d) => Math.max(1.5, x(Math.min(d.r.e, w.to.getTime())) - x(Math.max(d.r.s, w.from.getTime()))))
        .attr("y", (d) => y(d.off + amount(d.r)))
        .attr("height", (d) => Math.max(1, y(d.off) - y(d.off + amount(d.r))))
        .on("click", (_, d) => {
          if (d.r.match && highlighted(d.r.match.plan)) choosePlan(d.r.match.plan.id);
        })
        .append("title").text((d) => tooltip(d.r, `${amount(d.r)} ${lane.unit}`, lane.id));
      g.append("line").attr("class", "capacity").attr("x1", m.left).attr("x2", W - m.right)
        .attr("y1", y(lane.capacity)).attr("y2", y(lane.capacity));
      g.append("text").attr("class", "capacity-label").attr("x", W - m.right + 4).attr("y", y(lane.capacity) + 3)
        .text(lane.capacity);
    });
    const now = Date.now();
    if (now >= w.from.getTime() && now <= w.to.getTime()) {
      svg.append("line").attr("class", "now-line").attr("x1", x(now)).attr("x2", x(now))
        .attr("y1", m.top).attr("y2", H - m.bottom);
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
      .call(d3.axisBottom(x).ticks(Math.max(3, Math.floor((W - m.left) / 110))));
    const rowY = (i) => m.top + i * rowH;
    const jobRow = new Map(jobs.map((j, i) => [j.name, i]));
    transfers.forEach((t, k) => {
      const i = jobs.length + k;
      const yt = rowY(i) + rowH / 2;
      for (const [name, at] of [[t.from, t.s], [t.to, t.e]]) {
        if (!jobRow.has(name)) continue;
        svg.append("path").attr("class", "gantt-edge")
          .attr("d", `M${x(at)},${rowY(jobRow.get(name)) + rowH - 6}V${yt}`);
      }
    });
    const label = (i, main, sub) => {
      svg.append("text").attr("class", "row-label").attr("x", 4).attr("y", rowY(i) + 13).text(clip(main, 28));
      svg.append("text").attr("class", "row-sub").attr("x", 4).attr("y", rowY(i) + 26).text(clip(sub, 30))
        .append("title").text(sub);
    };
    jobs.forEach((j, i) => {
      const local = j.reservation_name ? ` · ${j.reservation_name}` : "";
      label(i, `job ${j.name}`, j.broken ? `BROKEN: ${j.broken}` : `${j.site} · ${j.cpus} CPUs${local}`);
      svg.append("rect").attr("class", j.broken ? "gantt-job gantt-broken" : "gantt-job").attr("data-plan", p.id)
        .attr("data-job", j.name)
        .attr("data-site", j.site).attr("x", x(j.s)).attr("width", Math.max(2, x(j.e) - x(j.s)))
        .attr("y", rowY(i) + 6).attr("height", rowH - 12).attr("rx", 3)
        .append("title").text(`job ${j.name}: ${j.cpus} CPUs at ${j.site}${local}\n${fmt(new Date(j.s))} – ${fmt(new Date(j.e))} UTC` +
          (j.broken ? `\nbroken: ${j.broken}` : ""));
    });
    transfers.forEach((t, k) => {
      const i = jobs.length + k;
      const via = t.path.length ? t.path.join(", ") : "same node, no link";
      label(i, `${t.from} → ${t.to}`, `${t.bandwidth_mbps} Mb/s · ${via}`);
      svg.append("rect").attr("class", "gantt-transfer").attr("data-plan", p.id).attr("data-from", t.from)
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
    g.selectAll("circle").data(nodes).join("circle")
      .attr("class", (n) => (jobsAt.has(n.id) ? "plan-site" : sitesAt.has(n.id) ? "node has-site" : "node"))
      .attr("data-node", (n) => n.id)
      .attr("data-sites", (n) => (jobsAt.has(n.id) ? [...new Set(jobsAt.get(n.id).map((j) => j.site))].join(" ") : null))
      .attr("cx", (n) => pos.get(n.id)[0]).attr("cy", (n) => pos.get(n.id)[1])
      .attr("r", (n) => (jobsAt.has(n.id) ? 7 : 4))
      .append("title").text((n) => {
        const sites = (sitesAt.get(n.id) || []).map((s) => `${s.id} (${s.cpus} CPUs, ${s.os})`);
        return `${label(n.id)} [${n.id}]` + (sites.length ? `\nsites: ${sites.join(", ")}` : "");
      });
    if (nodes.length <= 40) {
      g.selectAll("text.node-label").data(nodes.filter((n) => !jobsAt.has(n.id))).join("text")
        .attr("class", "node-label").attr("x", (n) => pos.get(n.id)[0] + 6).attr("y", (n) => pos.get(n.id)[1] - 5)
        .text((n) => label(n.id));
    }
    g.selectAll("text.site-label").data([...jobsAt]).join("text")
      .attr("class", "site-label").attr("x", ([id]) => pos.get(id)[0] + 9).attr("y", ([id]) => pos.get(id)[1] - 8)
      .text(([id, jobs]) => `${label(id)}: ${jobs.map((j) => `${j.name}@${j.site}`).join(", ")}`);
    svg.append("text").attr("class", "topo-note").attr("x", 8).attr("y", H - 8)
      .text((pos.projected ? "nodes by latitude/longitude" : "force layout (no coordinates)") +
        (plan ? ` · path: ${onPath.size ? [...onPath].join(", ") : "no link"}` : ""));
  }

  // ---- controls ----

  function choosePlan(id) {
    state.plan = id;
    writeFragment();
    refresh(true);
  }

  function readWindowInputs() {
    const from = Date.parse(document.querySelector("#from").value + ":00Z");
    const to = Date.parse(document.querySelector("#to").value + ":00Z");
    if (from < to) {
      state.window = { from: new Date(from), to: new Date(to) };
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
    });
    d3.select("#forget").on("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = null;
      state.me = null;
      refresh(true);
    });
    d3.select("#filters").on("submit", (ev) => ev.preventDefault());
    d3.select("#from").on("change", readWindowInputs);
    d3.select("#to").on("change", readWindowInputs);
    d3.select("#reset-window").on("click", () => {
      state.window = null;
      writeFragment();
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
    });
    window.addEventListener("hashchange", () => {
      readFragment();
      refresh(true);
    });
    let resize = null;
    window.addEventListener("resize", () => {
      clearTimeout(resize);
      resize = setTimeout(() => render(state.token ? undefined : "Enter an API token (admin or user) to see the bookings."), 150);
    });
    refresh(true);
  }

  init();
})();
