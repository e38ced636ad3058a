// The API reference (/docs): Redoc, vendored under /docs/vendor/, renders the service's own
// OpenAPI document (/openapi.json, the same as openapi/coreserve.yaml in the repository).
// A file rather than an inline script: the page's Content-Security-Policy allows scripts of
// this origin only.
"use strict";
Redoc.init(
  "/openapi.json",
  {
    // Fonts are the browser's: the page loads nothing from outside.
    theme: { typography: { fontFamily: "system-ui, sans-serif", headings: { fontFamily: "system-ui, sans-serif" } } },
    hideDownloadButton: false,
    expandResponses: "200,201",
    pathInMiddlePanel: true,
  },
  document.getElementById("redoc"),
  () => document.body.setAttribute("data-rendered", "true"),
);
