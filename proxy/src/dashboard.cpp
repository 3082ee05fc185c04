#include "dashboard.h"

#include <string_view>

#include "dashboard_assets.h"  // generated from proxy/dashboard/ (proxy/CMakeLists.txt)

namespace ft::proxy {
namespace {

// Script and style come from their own same-origin paths, so no 'unsafe-inline' is needed; a form
// may not submit anywhere (the key never lands in a URL), and no other site may frame the page.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void serve_asset(httplib::Server& http, const char* path, std::string_view body, const char* type) {
  http.Get(path, [body, type](const httplib::Request&, httplib::Response& r) {
    r.set_header("Content-Security-Policy", kContentSecurityPolicy);
    r.set_header("X-Content-Type-Options", "nosniff");
    r.set_header("X-Frame-Options", "DENY");
    r.set_header("Referrer-Policy", "no-referrer");
    r.set_header("Cache-Control", "no-cache");
    r.set_content(body.data(), body.size(), type);
  });
}

}  // namespace

void add_dashboard_routes(httplib::Server& http) {
  serve_asset(http, "/", dashboard_assets::kIndexHtml, "text/html; charset=utf-8");
  serve_asset(http, "/dashboard.js", dashboard_assets::kDashboardJs, "text/javascript; charset=utf-8");
  serve_asset(http, "/dashboard.css", dashboard_assets::kDashboardCss, "text/css; charset=utf-8");
  serve_asset(http, "/favicon.svg", dashboard_assets::kFaviconSvg, "image/svg+xml");
}

}  // namespace ft::proxy
