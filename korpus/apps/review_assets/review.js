// korpus review page: keyboard shortcuts and "select all". Everything works without it; nothing is loaded from outside.
(function () {
  "use strict";
  const typing = (e) => ["INPUT", "TEXTAREA", "SELECT"].includes(e.target.tagName);
  const click = (id) => { const el = document.getElementById(id); if (el) { el.click(); return true; } return false; };
  const all = document.getElementById("select-all");
  if (all) all.addEventListener("change", () => document.querySelectorAll("input.pick").forEach((b) => { b.checked = all.checked; }));
  const rows = Array.from(document.querySelectorAll("#queue tr.row"));
  let cursor = -1;
  const move = (step) => {
    if (!rows.length) return;
    if (cursor >= 0) rows[cursor].classList.remove("cursor");
    cursor = Math.min(rows.length - 1, Math.max(0, cursor + step));
    rows[cursor].classList.add("cursor");
    rows[cursor].scrollIntoView({ block: "nearest" });
  };
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (typing(e)) { if (e.key === "Escape") e.target.blur(); return; }
    const code = e.code;
    if (rows.length) {  // the queue
      if (code === "KeyJ") { move(1); } else if (code === "KeyK") { move(-1); }
      else if (code === "KeyX" && cursor >= 0) { const b = rows[cursor].querySelector("input.pick"); b.checked = !b.checked; }
      else if (code === "Enter" && cursor >= 0) { rows[cursor].querySelector("a.open").click(); }
      else return;
      e.preventDefault();
      return;
    }
    const done = { KeyR: "release", KeyX: "reject", KeyO: "reocr", KeyN: "next-item", KeyU: "back" }[code];
    if (done && click(done)) { e.preventDefault(); return; }
    if (code === "KeyE") { const t = document.getElementById("text"); if (t) { t.focus(); e.preventDefault(); } }
  });
})();
