// The lineage page: the model graph of /api/v1/lineage drawn by Cytoscape.js on a canvas
// and laid out by dagre (static/vendor/), a model's columns and a column's lineage from
// /api/v1/lineage/columns. Every name is data a pull request wrote: it is drawn on the
// canvas or set as textContent / a property, never parsed as HTML.
//
// The view: the whole graph, or a focus (a model, the models up to N steps upstream and
// downstream of it). In a focus, a model's hidden neighbours are counted on its label;
// "expand" shows them, "collapse upstream/downstream" hides what is shown only through it.
"use strict";
(function () {
  const box = document.getElementById("lineage-graph");
  const panel = document.getElementById("lineage-panel");
  const state = document.getElementById("lineage-state");
  const search = document.getElementById("lineage-search");
  const names = document.getElementById("lineage-names");
  const upInput = document.getElementById("lineage-up");
  const downInput = document.getElementById("lineage-down");
  if (!box || !panel || !state || typeof cytoscape !== "function") return;
  const coloured = box.dataset.coloured === "true";
  const BIG = 300; // from this many models shown, laid out on the skeleton (see draw)

  const nodes = new Map(); // name -> node of the API
  const parents = new Map();
  const children = new Map();
  let focus = null;
  let selected = null;
  const expanded = new Set();
  const collapsedUp = new Set();
  const collapsedDown = new Set();
  const pinned = new Set(); // a column lineage's models, shown with the focus
  let marks = { source: new Set(), reach: new Set(), rows: new Set() };

  const cy = cytoscape({
    container: box,
    minZoom: 0.05,
    maxZoom: 3,
    hideEdgesOnViewport: true,
    textureOnViewport: true,
    style: [
      { selector: "node", style: {
        shape: "round-rectangle", width: "data(w)", height: "data(h)",
        label: "data(label)", "text-wrap": "wrap", "text-valign": "center",
        "font-size": 11, "font-family": "ui-monospace, monospace", "min-zoomed-font-size": 6,
        "background-color": "#ddf4ff", "border-width": 1, "border-color": "#54aeff" } },
      { selector: "edge", style: {
        width: 1, "line-color": "#8c959f", "target-arrow-color": "#8c959f",
        "target-arrow-shape": "triangle", "curve-style": "bezier", "arrow-scale": 0.7 } },
      { selector: "node.impact-breaking", style: { "background-color": "#ffcecb", "border-color": "#cf222e" } },
      { selector: "node.impact-non-breaking", style: { "background-color": "#fff1b3", "border-color": "#bf8700" } },
      { selector: "node.impact-forward-only", style: { "background-color": "#e8dbff", "border-color": "#8250df" } },
      { selector: "node.impact-metadata", style: { "background-color": "#eaeef2", "border-color": "#6e7781" } },
      { selector: "node.impact-indirect", style: { "background-color": "#ffe2cc", "border-color": "#fb8f44" } },
      { selector: "node.impact-added", style: { "background-color": "#d1f7d9", "border-color": "#1a7f37" } },
      { selector: "node.impact-unchanged", style: { "background-color": "#f6f8fa", "border-color": "#d0d7de", color: "#59636e" } },
      { selector: "node.match", style: { "border-width": 3, "border-color": "#0969da" } },
      { selector: "node.col-source", style: { "border-width": 3, "border-color": "#0550ae", "border-style": "dashed" } },
      { selector: "node.col-reach", style: { "border-width": 3, "border-color": "#953800", "border-style": "dashed" } },
      { selector: "node.col-rows", style: { "border-width": 3, "border-color": "#953800", "border-style": "dotted" } },
      { selector: "node.focus", style: { "border-width": 4, "border-color": "#1f2328" } },
      { selector: "node:selected", style: { "overlay-color": "#0969da", "overlay-opacity": 0.15 } },
    ],
  });

  function say(text) { state.textContent = text; }

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function button(text, action, testid) {
    const b = el("button", text);
    b.type = "button";
    if (testid) b.dataset.testid = testid;
    b.addEventListener("click", action);
    return b;
  }

  // -- what is shown ---------------------------------------------------------------------

  function shown() {
    if (focus === null) return new Set(nodes.keys());
    const up = Math.max(0, Number(upInput.value) || 0);
    const down = Math.max(0, Number(downInput.value) || 0);
    const best = { up: new Map(), down: new Map() };
    const seen = new Set([focus]);
    const queue = [[focus, "up", up], [focus, "down", down]];
    const visit = function (name, dir, left) {
      const known = best[dir].get(name);
      if (known !== undefined && known >= left) return;
      best[dir].set(name, left);
      queue.push([name, dir, left]);
    };
    while (queue.length) {
      const [name, dir, left] = queue.shift();
      if ((dir === "up" ? collapsedUp : collapsedDown).has(name)) continue;
      if (left <= 0 && !expanded.has(name)) continue;
      for (const next of (dir === "up" ? parents : children).get(name) || []) {
        seen.add(next);
        visit(next, dir, Math.max(left - 1, 0));
        visit(next, dir === "up" ? "down" : "up", 0); // its own expansion, if any
      }
    }
    for (const name of pinned) seen.add(name);
    return seen;
  }

  // Each model's deepest parent among ``visible`` (rank by longest path, Kahn's order).
  function skeleton(visible) {
    const rank = new Map();
    const waiting = new Map();
    const ready = [];
    for (const name of visible) {
      let n = 0;
      for (const p of parents.get(name) || []) if (visible.has(p)) n += 1;
      waiting.set(name, n);
      if (n === 0) ready.push(name);
    }
    const deepest = new Map();
    while (ready.length) {
      const name = ready.pop();
      const mine = rank.get(name) || 0;
      for (const child of children.get(name) || []) {
        if (!visible.has(child)) continue;
        if (!rank.has(child) || rank.get(child) < mine + 1) {
          rank.set(child, mine + 1);
          deepest.set(child, name);
        }
        waiting.set(child, waiting.get(child) - 1);
        if (waiting.get(child) === 0) ready.push(child);
      }
    }
    return deepest;
  }

  function hiddenCount(name, visible, links) {
    let n = 0;
    for (const other of links.get(name) || []) if (!visible.has(other)) n += 1;
    return n;
  }

  function draw(fit) {
    const visible = shown();
    const elements = [];
    for (const name of visible) {
      const node = nodes.get(name);
      let label = name;
      if (focus !== null) {
        const up = hiddenCount(name, visible, parents);
        const down = hiddenCount(name, visible, children);
        if (up || down) label += "\n" + (up ? "+" + up + " up " : "") + (down ? "+" + down + " down" : "");
      }
      const classes = [];
      if (coloured && node.impact) classes.push("impact-" + node.impact);
      if (name === focus) classes.push("focus");
      if (marks.source.has(name)) classes.push("col-source");
      if (marks.reach.has(name)) classes.push("col-reach");
      if (marks.rows.has(name)) classes.push("col-rows");
      const longest = Math.max.apply(null, label.split("\n").map((l) => l.length));
      elements.push({ group: "nodes", classes: classes,
        data: { id: name, label: label, w: 7 * longest + 18, h: label.includes("\n") ? 34 : 22 } });
    }
    const big = visible.size >= BIG;
    const tight = big ? skeleton(visible) : null;
    let edges = 0;
    for (const name of visible) {
      for (const child of children.get(name) || []) {
        if (!visible.has(child)) continue;
        const classes = tight && tight.get(child) === name ? ["tight"] : [];
        elements.push({ group: "edges", classes: classes, data: { id: "e" + edges, source: name, target: child } });
        edges += 1;
      }
    }
    const began = performance.now();
    cy.batch(function () {
      cy.elements().remove();
      cy.add(elements);
    });
    // A large view is laid out on its skeleton (each model's edge from its deepest parent:
    // one step each), the other edges drawn after: dagre's crossing reduction over every
    // long edge's chain of dummy nodes takes seconds at 1,000 models, this one a second.
    const laid = big ? cy.elements("node, edge.tight") : cy.elements();
    const layout = laid.layout({
      name: "dagre", rankDir: "LR", nodeSep: 8, rankSep: 60, edgeSep: 4,
      fit: fit !== false, padding: 20, animate: false,
    });
    layout.one("layoutstop", function () {
      if (selected && visible.has(selected)) cy.getElementById(selected).select();
      const ms = Math.round(performance.now() - began);
      say(visible.size + " of " + nodes.size + " models" + (focus ? " around " + focus : "") + " (" + ms + " ms)");
      box.dataset.shown = String(visible.size);
      // ready once painted: the frame after the layout's, then the task after that frame
      requestAnimationFrame(function () {
        setTimeout(function () {
          box.dataset.readyMs = String(Math.round(performance.now())); // since navigation
          box.dataset.ready = "true";
        }, 0);
      });
    });
    box.dataset.ready = "false";
    layout.run();
  }

  // -- actions ---------------------------------------------------------------------------

  function setFocus(name) {
    focus = name;
    expanded.clear(); collapsedUp.clear(); collapsedDown.clear(); pinned.clear();
    marks = { source: new Set(), reach: new Set(), rows: new Set() };
    selected = name;
    draw();
    showModel(name);
  }

  function find() {
    const text = search.value.trim();
    if (!text) return;
    if (nodes.has(text)) { setFocus(text); return; }
    const lower = text.toLowerCase();
    const matches = [];
    for (const name of nodes.keys()) if (name.toLowerCase().includes(lower)) matches.push(name);
    panel.replaceChildren(el("h2", matches.length ? "Models named like that" : "No model is named like that"));
    const list = el("ul", undefined, "matches");
    list.dataset.testid = "lineage-matches";
    for (const name of matches.slice(0, 50)) {
      const item = el("li");
      item.append(button(name, function () { search.value = name; setFocus(name); }));
      list.append(item);
    }
    panel.append(list);
    if (matches.length > 50) panel.append(el("p", "and " + (matches.length - 50) + " more: type more of the name", "meta"));
    cy.nodes().removeClass("match");
    cy.nodes().filter((n) => n.id().toLowerCase().includes(lower)).addClass("match");
  }

  async function getJson(url) {
    const answer = await fetch(url, { headers: { Accept: "application/json" } });
    if (!answer.ok) throw new Error(url.split("?")[0] + ": HTTP " + answer.status);
    return answer.json();
  }

  function columnsUrl(model, column) {
    const url = new URL(box.dataset.columns, window.location.origin);
    url.searchParams.set("model", model);
    if (column !== undefined) url.searchParams.set("column", column);
    return url.pathname + url.search;
  }

  async function showModel(name) {
    selected = name;
    const node = nodes.get(name);
    panel.replaceChildren(el("h2", name));
    const facts = [node.kind];
    if (coloured && node.impact) facts.push(node.category ? node.impact + " (" + node.category + ")" : node.impact);
    panel.append(el("p", facts.join(", "), "meta"));
    if (node.why && node.why.length) panel.append(el("p", "reached by " + node.why.join(", "), "meta"));
    const tools = el("p", undefined, "actions");
    tools.append(button("Focus", function () { setFocus(name); }, "lineage-focus-here"));
    if (focus !== null) {
      tools.append(button("Expand", function () {
        expanded.add(name); collapsedUp.delete(name); collapsedDown.delete(name); draw(false);
      }, "lineage-expand"));
      tools.append(button("Collapse upstream", function () { expanded.delete(name); collapsedUp.add(name); draw(false); }, "lineage-collapse-up"));
      tools.append(button("Collapse downstream", function () { expanded.delete(name); collapsedDown.add(name); draw(false); }, "lineage-collapse-down"));
    }
    panel.append(tools);
    const holder = el("div");
    holder.append(el("p", "reading its columns…", "meta"));
    panel.append(holder);
    try {
      const view = await getJson(columnsUrl(name));
      if (selected !== name) return;
      holder.replaceChildren(el("h3", "Columns"));
      if (!view.columns.length) holder.append(el("p", "Its columns are not known (a star over a table nobody declares, or no query).", "meta"));
      const list = el("ul", undefined, "columns");
      list.dataset.testid = "lineage-columns";
      for (const column of view.columns) {
        const item = el("li");
        item.append(button(column.name, function () { showColumn(name, column.name, holder); }));
        if (column.type) item.append(el("span", " " + column.type, "meta"));
        list.append(item);
      }
      holder.append(list);
    } catch (error) {
      holder.replaceChildren(el("p", String(error.message), "problem"));
    }
  }

  function refList(title, refs, testid) {
    const section = el("section");
    section.append(el("h3", title + " (" + refs.length + ")"));
    const list = el("ul", undefined, "refs");
    list.dataset.testid = testid;
    for (const ref of refs) {
      const item = el("li");
      const code = el("code", ref.model + "." + ref.column);
      if (nodes.has(ref.model)) {
        item.append(button(ref.model, function () { search.value = ref.model; setFocus(ref.model); }));
        item.append(el("span", " ." + ref.column));
      } else {
        item.append(code, el("span", " (not a model)", "meta"));
      }
      list.append(item);
    }
    if (!refs.length) list.append(el("li", "none", "meta"));
    section.append(list);
    return section;
  }

  async function showColumn(model, column, holder) {
    const out = el("div", undefined, "column-lineage");
    out.dataset.testid = "lineage-column";
    out.append(el("p", "following " + column + "…", "meta"));
    holder.querySelectorAll(".column-lineage").forEach((n) => n.remove());
    holder.append(out);
    try {
      const view = await getJson(columnsUrl(model, column));
      out.replaceChildren(el("h3", "Column " + view.column));
      out.append(refList("Comes from", view.upstream, "lineage-upstream"));
      out.append(refList("Reaches", view.downstream, "lineage-downstream"));
      if (view.rows.length) out.append(el("p", "Decides the rows of " + view.rows.join(", "), "meta"));
      for (const [name, why] of Object.entries(view.unknown)) {
        out.append(el("p", name + ": not followed (" + why + ")", "meta"));
      }
      if (view.truncated) out.append(el("p", "Only part of it: the analysis budget was spent.", "meta"));
      marks = {
        source: new Set(view.upstream.map((r) => r.model)),
        reach: new Set(view.downstream.map((r) => r.model)),
        rows: new Set(view.rows),
      };
      if (focus !== null) {
        for (const set of [marks.source, marks.reach, marks.rows]) {
          for (const name of set) if (nodes.has(name)) pinned.add(name);
        }
      }
      draw(false);
      out.dataset.ready = "true";
    } catch (error) {
      out.replaceChildren(el("p", String(error.message), "problem"));
    }
  }

  // -- start -----------------------------------------------------------------------------

  cy.on("tap", "node", function (event) { showModel(event.target.id()); });
  cy.on("dbltap", "node", function (event) { search.value = event.target.id(); setFocus(event.target.id()); });
  document.getElementById("lineage-focus").addEventListener("click", find);
  document.getElementById("lineage-all").addEventListener("click", function () {
    focus = null; pinned.clear(); draw();
  });
  search.addEventListener("keydown", function (event) { if (event.key === "Enter") find(); });
  for (const input of [upInput, downInput]) {
    input.addEventListener("change", function () { if (focus !== null) draw(); });
  }

  getJson(box.dataset.graph).then(function (graph) {
    for (const node of graph.nodes) {
      nodes.set(node.name, node);
      parents.set(node.name, []);
      children.set(node.name, []);
    }
    for (const edge of graph.edges) {
      parents.get(edge.target).push(edge.source);
      children.get(edge.source).push(edge.target);
    }
    const options = document.createDocumentFragment();
    for (const name of nodes.keys()) {
      const option = document.createElement("option");
      option.value = name;
      options.append(option);
    }
    names.replaceChildren(options);
    if (graph.removed.length) {
      panel.append(el("p", "The plan removes " + graph.removed.join(", ") + " (not drawn: its environment has them no more).", "meta"));
    }
    const wanted = box.dataset.focus;
    if (wanted && nodes.has(wanted)) { search.value = wanted; setFocus(wanted); } else draw();
  }).catch(function (error) { say(String(error.message)); });
})();
