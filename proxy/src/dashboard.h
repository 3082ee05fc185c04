// The live dashboard at GET /: a page, its script, style and icon, served from this binary (edited
// as plain files in proxy/dashboard/, embedded at build time: no build step, no external assets,
// works offline). The page itself needs no key; all it shows comes from /v1/stats, which does.
#pragma once

#include <httplib.h>

namespace ft::proxy {

// GET /, /dashboard.js, /dashboard.css, /favicon.svg, each under a Content-Security-Policy that
// admits only this origin's own script, style and fetches (no inline code, no framing).
void add_dashboard_routes(httplib::Server& http);

}  // namespace ft::proxy
