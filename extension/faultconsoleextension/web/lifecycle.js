  // The repair loop of a quarantined node (docs/console.md, "The repair
  // loop"), in a row under the node: the loop's steps in order (the API's
  // steps) with the current one highlighted and the rma step an alarm,
  // the time in the current step, the repair and its attempt, the last
  // verification, each step's times on hover and the whole history on
  // expand. Every value goes in as text.
  function fmtDuration(sec) {
    const t = Math.max(0, Math.floor(Number(sec) || 0));
    const d = Math.floor(t / 86400), h = Math.floor((t % 86400) / 3600), m = Math.floor((t % 3600) / 60), s = t % 60;
    const two = (x) => String(x).padStart(2, "0");
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + two(m) + "m";
    if (m) return m + "m " + two(s) + "s";
    return s + "s";
  }

  // openLifecycles are the nodes whose history is expanded, kept across
  // a refresh.
  function openLifecycles(tbody) {
    return new Set([...tbody.querySelectorAll("details.lc-history[open]")].map((d) => d.dataset.node));
  }

  function lifecycleStrip(n, steps) {
    const lc = n.lifecycle, history = lc.history || [];
    const all = steps.includes(lc.step) ? steps : steps.concat([lc.step]);
    const cur = all.indexOf(lc.step);
    const strip = el("ol", { class: "lc-strip", "aria-label": "repair loop of " + n.node });
    all.forEach((s, i) => {
      const visits = history.filter((h) => h.step === s);
      let cls = "lc-step";
      if (s === "rma") cls += " lc-end";
      if (i === cur) cls += " lc-current" + (lc.alarm ? " lc-alarm" : "");
      else if (i < cur && visits.length) cls += " lc-done";
      const title = s + ": " + (visits.length ? visits.map((h) => fmtTime(h.at) + (h.detail ? " — " + h.detail : "")).join("; ") : "not reached");
      const li = el("li", { class: cls, "data-step": s, title: title, text: s });
      if (i === cur) li.setAttribute("aria-current", "step");
      strip.append(li);
    });
    return strip;
  }

  function lifecycleSummary(lc) {
    const out = el("div", { class: "lc-summary" });
    if (lc.alarm) out.append(el("span", { class: "lc-alarm-text", text: "RMA: every repair failed, the node waits for a human" }));
    out.append(el("span", { class: "lc-in-step", text: lc.step + " for " + fmtDuration(lc.in_step_seconds) + " (since " + fmtTime(lc.since) + ")" }));
    if (lc.repair) out.append(el("span", { class: "lc-repair", text: "repair " + lc.repair + " #" + lc.attempt }));
    const vs = lc.verifications || [];
    const last = vs[vs.length - 1];
    if (last) {
      out.append(el("span", { class: "lc-verify " + (last.passed ? "lc-passed" : "lc-failed"),
        text: "last verification " + (last.passed ? "passed" : "failed") + " " + fmtTime(last.at) + ": " + last.checks + (last.detail ? " — " + last.detail : "") }));
    } else {
      out.append(el("span", { class: "lc-verify muted", text: "not verified yet" }));
    }
    return out;
  }

  function lifecycleHistory(n, open) {
    const lc = n.lifecycle, history = lc.history || [], vs = lc.verifications || [];
    const d = el("details", { class: "lc-history", "data-node": n.node });
    if (open.has(n.node)) d.open = true;
    d.append(el("summary", { text: "history: " + history.length + " steps, " + vs.length + " verifications" }));
    const steps = el("tbody");
    for (const h of history) steps.append(el("tr", { "data-step": h.step }, el("td", { text: h.step }), el("td", { text: fmtTime(h.at) }), el("td", { text: h.detail || "" })));
    d.append(el("table", { class: "lc-history-steps" }, el("caption", { text: "Steps" }),
      el("thead", {}, el("tr", {}, el("th", { text: "Step" }), el("th", { text: "At" }), el("th", { text: "Detail" }))), steps));
    if (vs.length) {
      const rows = el("tbody");
      for (const v of vs) {
        rows.append(el("tr", {}, el("td", { text: fmtTime(v.at) }), el("td", { text: v.checks }),
          el("td", { class: v.passed ? "lc-passed" : "lc-failed", text: v.passed ? "passed" : "failed" }), el("td", { text: v.detail || "" })));
      }
      d.append(el("table", { class: "lc-history-verifications" }, el("caption", { text: "Verifications" }),
        el("thead", {}, el("tr", {}, el("th", { text: "At" }), el("th", { text: "Checks" }), el("th", { text: "Result" }), el("th", { text: "Detail" }))), rows));
    }
    return d;
  }

  // lifecycleRow is the row under node n (n.lifecycle set); steps the
  // API's order, open the nodes whose history was expanded.
  function lifecycleRow(n, steps, open, colspan) {
    const lc = n.lifecycle;
    return el("tr", { class: "lifecycle-row" + (lc.alarm ? " lc-alarm-row" : ""), "data-lifecycle-node": n.node, "data-step": lc.step },
      el("td", { colspan: String(colspan) }, lifecycleStrip(n, steps), lifecycleSummary(lc), lifecycleHistory(n, open)));
  }

