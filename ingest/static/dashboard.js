// Live refresh without inline script: every element with data-refresh fetches its URL every 2 s and
// takes the HTML fragment it returns (the dashboard's own server-rendered rows).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const target of document.querySelectorAll("[data-refresh]")) {
    const url = target.getAttribute("data-refresh");
    const refresh = async () => {
      try {
        const answer = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
        if (answer.ok) {
          target.innerHTML = await answer.text();
        }
      } catch (error) {
        // The next tick tries again; a dropped connection must not stop the refresh.
      }
    };
    setInterval(refresh, 2000);
  }
});
