#include "report/html_report.h"
#include "io/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace mumoe::report {
namespace {

// Shortest round-trip form (17 significant digits at most) — what the CLI's JSON prints.
std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  char text[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::string fixed(double value, int decimals) { return std::isnan(value) ? "–" : io::fixed_text(value, decimals); }

std::string class_name(const ExpertReport& r, int64_t c) {
  return c >= 0 && c < static_cast<int64_t>(r.class_names.size()) ? r.class_names[c] : "class " + std::to_string(c);
}

// A horizontal bar chart, one bar per class: values ≥ 0 to the right of the axis, < 0 to the left.
std::string bar_chart(const ExpertReport& r, const std::vector<double>& values, const std::string& caption,
                      bool percent) {
  const int row = 18, label_width = 120, half = 150, width = label_width + 2 * half + 70;
  double scale = 0;
  for (const double v : values) scale = std::max(scale, std::abs(v));
  if (scale == 0) scale = 1;
  const int height = row * static_cast<int>(values.size()) + 24;
  std::ostringstream s;
  s << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" role=\"img\" aria-label=\"" << escape_html(caption) << "\"><title>" << escape_html(caption) << "</title>";
  const int axis = label_width + half;
  s << "<line x1=\"" << axis << "\" y1=\"0\" x2=\"" << axis << "\" y2=\"" << height - 20
    << "\" stroke=\"#888\"/>";
  for (size_t c = 0; c < values.size(); ++c) {
    const int y = static_cast<int>(c) * row;
    const double v = values[c];
    const int length = static_cast<int>(std::round(std::abs(v) / scale * half));
    const int x = v >= 0 ? axis : axis - length;
    s << "<text x=\"" << label_width - 6 << "\" y=\"" << y + 13 << "\" text-anchor=\"end\">"
      << escape_html(class_name(r, static_cast<int64_t>(c))) << "</text>"
      << "<rect x=\"" << x << "\" y=\"" << y + 3 << "\" width=\"" << std::max(length, v != 0 ? 1 : 0)
      << "\" height=\"" << row - 6 << "\" fill=\"" << (v < 0 ? "#c0392b" : "#2e86c1") << "\"><title>"
      << escape_html(class_name(r, static_cast<int64_t>(c))) << ": " << (percent ? fixed(100 * v, 2) + " pp" : number(v))
      << "</title></rect>"
      << "<text x=\"" << (v >= 0 ? x + length + 4 : x - 4) << "\" y=\"" << y + 13 << "\" text-anchor=\""
      << (v >= 0 ? "start" : "end") << "\" class=\"value\">"
      << (percent ? fixed(100 * v, 2) : v == std::round(v) ? fixed(v, 0) : fixed(v, 3)) << "</text>";
  }
  s << "<text x=\"" << axis << "\" y=\"" << height - 4 << "\" text-anchor=\"middle\" class=\"axis\">"
    << escape_html(caption) << "</text></svg>";
  return s.str();
}

// The sweep: Δ accuracy of every expert, one thin bar each, in expert order.
std::string sweep_chart(const ExpertReport& r) {
  const int bar = 4, height = 160, middle = 80;
  double scale = 0;
  for (const auto& e : r.experts) scale = std::max(scale, std::abs(e.delta_accuracy));
  if (scale == 0) scale = 1;
  const int width = std::max<int>(300, bar * static_cast<int>(r.experts.size()) + 20);
  std::ostringstream s;
  s << "<svg class=\"chart sweep\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
    << height + 20 << "\" role=\"img\" aria-label=\"accuracy change per ablated expert\">"
    << "<title>Accuracy change when each expert is ablated</title>"
    << "<line x1=\"10\" y1=\"" << middle << "\" x2=\"" << width - 10 << "\" y2=\"" << middle << "\" stroke=\"#888\"/>";
  for (size_t i = 0; i < r.experts.size(); ++i) {
    const auto& e = r.experts[i];
    const int length = static_cast<int>(std::round(std::abs(e.delta_accuracy) / scale * (middle - 10)));
    const int y = e.delta_accuracy >= 0 ? middle - length : middle;
    s << "<a href=\"#expert-" << e.expert << "\"><rect x=\"" << 10 + bar * static_cast<int>(i) << "\" y=\"" << y
      << "\" width=\"" << bar - 1 << "\" height=\"" << std::max(length, 1) << "\" fill=\""
      << (e.delta_accuracy < 0 ? "#c0392b" : "#2e86c1") << "\"><title>expert " << e.expert << ": "
      << fixed(100 * e.delta_accuracy, 2) << " pp</title></rect></a>";
  }
  s << "<text x=\"10\" y=\"" << height + 14 << "\" class=\"axis\">experts 0–" << r.experts.size() - 1
    << " (bars: accuracy change when ablated; largest " << fixed(100 * scale, 2) << " pp)</text></svg>";
  return s.str();
}

std::string bias_table(const BiasSection& b) {
  std::ostringstream h;
  h << "<h2>Bias correction</h2><p>" << escape_html(b.title) << "</p><table id=\"bias\"><thead><tr><th></th>";
  for (const auto& c : b.columns) h << "<th>" << escape_html(c) << "</th>";
  h << "</tr></thead><tbody>\n";
  for (const auto& row : b.rows) {
    h << "<tr" << (row.highlighted ? " class=\"target\"" : "") << "><th class=\"text\">" << escape_html(row.label)
      << "</th>";
    for (size_t c = 0; c < row.values.size() && c < b.columns.size(); ++c) {
      const double v = row.values[c];
      h << "<td data-variant=\"" << escape_html(b.columns[c]) << "\" data-value=\"" << number(v) << "\">"
        << (std::isnan(v) ? "—" : row.percent ? fixed(100 * v, 2) + " %" : fixed(v, 4)) << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</tbody></table>";
  if (!b.note.empty()) h << "<p class=\"note\">" << escape_html(b.note) << "</p>";
  return h.str() + "\n";
}

// The comparison's chart: mean polysemanticity (y) against the number of experts (x, log2), a
// labelled point per model.
std::string comparison_chart(const ComparisonSection& c) {
  const int width = 560, height = 300, left = 50, right = 20, top = 20, bottom = 40;
  double x_min = 1e300, x_max = -1e300, y_max = 0;
  for (const auto& r : c.rows) {
    if (r.experts <= 0 || std::isnan(r.mean_polysemanticity)) continue;
    x_min = std::min(x_min, std::log2(static_cast<double>(r.experts)));
    x_max = std::max(x_max, std::log2(static_cast<double>(r.experts)));
    y_max = std::max(y_max, r.mean_polysemanticity);
  }
  if (x_min > x_max) x_min = x_max = 0;
  if (x_max - x_min < 1) {  // one N (or none): centred, a power of two on either side
    const double middle = (x_min + x_max) / 2;
    x_min = middle - 1;
    x_max = middle + 1;
  }
  y_max = y_max > 0 ? y_max * 1.1 : 1;
  const auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * (width - left - right); };
  const auto py = [&](double y) { return top + (1 - y / y_max) * (height - top - bottom); };
  std::ostringstream s;
  s << "<svg class=\"chart comparison\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
    << height << "\" role=\"img\" aria-label=\"mean polysemanticity against the number of experts\">"
    << "<title>Mean polysemanticity against the number of experts</title>"
    << "<line x1=\"" << left << "\" y1=\"" << height - bottom << "\" x2=\"" << width - right << "\" y2=\""
    << height - bottom << "\" stroke=\"#888\"/><line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left
    << "\" y2=\"" << height - bottom << "\" stroke=\"#888\"/>";
  for (int e = static_cast<int>(std::ceil(x_min)); e <= static_cast<int>(std::floor(x_max)); ++e)
    s << "<text x=\"" << px(e) << "\" y=\"" << height - bottom + 14 << "\" text-anchor=\"middle\" class=\"axis\">"
      << (int64_t{1} << e) << "</text>";
  for (int i = 0; i <= 4; ++i)
    s << "<text x=\"" << left - 6 << "\" y=\"" << py(y_max * i / 4) + 4 << "\" text-anchor=\"end\" class=\"axis\">"
      << fixed(y_max * i / 4, 2) << "</text>";
  std::vector<std::pair<double, double>> labels;  // where labels went: one below another when they would overlap
  for (const auto& r : c.rows) {
    if (r.experts <= 0 || std::isnan(r.mean_polysemanticity)) continue;
    const double x = px(std::log2(static_cast<double>(r.experts))), y = py(r.mean_polysemanticity);
    double label_y = y - 6;
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& [lx, ly] : labels)
        if (std::abs(lx - x) < 160 && std::abs(ly - label_y) < 13) {
          label_y = ly + 13;
          moved = true;
        }
    }
    labels.push_back({x, label_y});
    s << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"4\" fill=\"#2e86c1\"><title>" << escape_html(r.model)
      << ": " << r.experts << " experts, mean polysemanticity " << fixed(r.mean_polysemanticity, 3)
      << "</title></circle><text x=\"" << x + 6 << "\" y=\"" << label_y << "\">" << escape_html(r.model) << "</text>";
  }
  s << "<text x=\"" << (left + width - right) / 2 << "\" y=\"" << height - 6
    << "\" text-anchor=\"middle\" class=\"axis\">experts (N, log scale); y: mean polysemanticity</text></svg>";
  return s.str();
}

std::string comparison_table(const ComparisonSection& c) {
  std::ostringstream h;
  h << "<h2>Comparison</h2><p>Each model's layer on " << escape_html(c.data)
    << ": accuracy, mean polysemanticity over the experts whose removal changed a class accuracy, class purity, "
       "I(E;Y)/H(Y), load balance (CV), dead experts, dropped tokens — as <code>mumoe compare</code> computes them.</p>"
    << "<table id=\"comparison\" class=\"sortable\"><thead><tr><th class=\"text\">model</th><th class=\"text\">layer</th>"
    << "<th class=\"text\">kind</th><th>experts</th><th>accuracy (%)</th><th>mean polysemanticity</th>"
    << "<th>with effect</th><th>class purity</th><th>I(E;Y)/H(Y)</th><th>load CV</th><th>dead</th><th>dropped</th>"
    << "</tr></thead><tbody>\n";
  const auto figure = [](const char* key, double v, int decimals, double scale = 1) {
    return std::string("<td data-key=\"") + key + "\" data-value=\"" + number(v) + "\">" +
           (std::isnan(v) ? std::string("—") : fixed(scale * v, decimals)) + "</td>";
  };
  for (const auto& r : c.rows) {
    h << "<tr data-model=\"" << escape_html(r.model) << "\"><td class=\"text\" data-value=\"" << escape_html(r.model)
      << "\">" << escape_html(r.model) << "</td><td class=\"text\" data-value=\"" << escape_html(r.layer) << "\">"
      << escape_html(r.layer) << "</td><td class=\"text\" data-value=\"" << escape_html(r.kind) << "\">"
      << escape_html(r.kind) << "</td><td data-key=\"experts\" data-value=\"" << r.experts << "\">" << r.experts
      << "</td>" << figure("accuracy", r.accuracy, 2, 100) << figure("mean_polysemanticity", r.mean_polysemanticity, 3)
      << "<td data-key=\"experts_with_effect\" data-value=\"" << r.experts_with_effect << "\">" << r.experts_with_effect
      << "</td>" << figure("class_purity", r.class_purity, 3) << figure("information_ratio", r.information_ratio, 3)
      << figure("load_cv", r.load_cv, 2) << "<td data-key=\"dead_experts\" data-value=\"" << r.dead_experts << "\">"
      << r.dead_experts << "</td><td data-key=\"dropped_tokens\" data-value=\"" << r.dropped_tokens << "\">"
      << r.dropped_tokens << "</td></tr>\n";
  }
  h << "</tbody></table>\n" << comparison_chart(c) << "\n";
  return h.str();
}

const char* kStyle = R"CSS(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; } h3 { font-size: 16px; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th { cursor: pointer; background: #f3f3f3; user-select: none; } th.sorted-asc::after { content: " ▲"; }
th.sorted-desc::after { content: " ▼"; } td.text, th.text { text-align: left; }
dl.card { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; } dl.card dt { color: #666; }
dl.card dd { margin: 0; word-break: break-all; }
section.expert { border-top: 2px solid #ccc; margin-top: 24px; }
.gallery { display: flex; flex-wrap: wrap; gap: 6px; } figure.tile { margin: 0; width: 84px; font-size: 11px; text-align: center; }
figure.tile img { width: 84px; height: 84px; image-rendering: pixelated; border: 1px solid #ccc; display: block; }
figure.tile.wrong figcaption .pred { color: #c0392b; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; } svg.chart text { font: 11px system-ui, sans-serif; }
svg.chart text.axis { fill: #666; } #filter { margin: 8px 0; padding: 4px; width: 280px; }
.gallery:has(div.context) { display: block; } div.context { font: 12px/1.6 ui-monospace, monospace; white-space: pre-wrap;
  border-bottom: 1px solid #eee; } div.context mark { background: #ffd54f; font-weight: bold; }
table#bias tr.target th, table#bias tr.target td { background: #fff3cd; } p.note { color: #666; }
div.context .a { color: #2e7d32; } div.context .next { color: #666; } div.context .next.wrong { color: #c0392b; }
)CSS";

// Sorting by a column's data-value (numbers, NaN last) and filtering rows by their text.
// Sorting every table.sortable by a column's data-value (numbers, NaN last) and filtering the
// expert table's rows by their text.
const char* kScript = R"JS(
(function () {
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    var body = table.tBodies[0];
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      th.addEventListener('click', function () {
        var ascending = !th.classList.contains('sorted-asc');
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(ascending ? 'sorted-asc' : 'sorted-desc');
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column].getAttribute('data-value'), y = b.cells[column].getAttribute('data-value');
          var p = parseFloat(x), q = parseFloat(y);
          if (isNaN(p) || isNaN(q)) {
            if (isNaN(p) && isNaN(q)) return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
            return isNaN(p) ? 1 : -1;
          }
          return ascending ? p - q : q - p;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  var filter = document.getElementById('filter');
  if (filter) filter.addEventListener('input', function (event) {
    var words = event.target.value.toLowerCase().split(/\s+/).filter(Boolean);
    Array.prototype.forEach.call(document.getElementById('experts').tBodies[0].rows, function (row) {
      var text = row.textContent.toLowerCase();
      row.style.display = words.every(function (w) { return text.indexOf(w) >= 0; }) ? '' : 'none';
    });
  });
})();
)JS";

}  // namespace

std::string utc_now_text() {
  const auto now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

std::string file_name(const std::string& path) {
  const auto file = path.substr(path.find_last_of('/') + 1);
  return file.empty() ? path : file;
}

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (const int shift : {18, 12, 6, 0}) out += alphabet[(v >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const ExpertReport& r) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    // Nothing may leave the page: no scripts, styles, images or frames from anywhere but itself.
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
       "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
    << "<title>" << escape_html(r.title) << " — experts</title><style>" << kStyle << "</style></head><body>\n";
  h << "<h1>" << escape_html(r.title) << "</h1>\n<dl class=\"card\">";
  for (const auto& [field, value] : r.card) h << "<dt>" << escape_html(field) << "</dt><dd>" << escape_html(value) << "</dd>";
  h << "</dl>\n";
  if (!r.class_accuracy.empty())
    h << "<h2>Accuracy per class</h2>" << bar_chart(r, r.class_accuracy, "accuracy per class", false) << "\n";
  if (r.has_sweep && !r.experts.empty()) h << "<h2>Ablation sweep</h2>" << sweep_chart(r) << "\n";

  if (r.bias) h << bias_table(*r.bias);
  if (r.comparison) h << comparison_table(*r.comparison);
  if (r.experts.empty()) {  // a multi-label model's report: the bias table (and comparison) only
    if (r.comparison) h << "<script>" << kScript << "</script>";
    h << "</body></html>\n";
    return h.str();
  }

  const bool with_loss = std::any_of(r.experts.begin(), r.experts.end(), [](const ExpertRow& e) { return e.has_loss; });
  h << "<h2>Experts</h2><input id=\"filter\" type=\"search\" placeholder=\"Filter rows (e.g. a class name)\">"
    << "<table id=\"experts\" class=\"sortable\"><thead><tr><th data-key=\"expert\">expert</th><th data-key=\"load\">load</th>"
    << "<th data-key=\"support\">support</th><th data-key=\"mean_coefficient\">mean a</th>"
    << "<th data-key=\"delta_accuracy\">Δ accuracy (pp)</th>"
    << (with_loss ? "<th data-key=\"delta_loss\">Δ loss (nats/token)</th>" : "")
    << "<th data-key=\"polysemanticity\">polysemanticity</th>"
    << "<th class=\"text\" data-key=\"top_classes\">" << (with_loss ? "top next tokens" : "top classes")
    << " (samples)</th></tr></thead><tbody>\n";
  std::vector<bool> detailed(r.experts.size() + 1, false);
  for (const auto& d : r.details)
    if (d.expert >= 0 && d.expert < static_cast<int64_t>(detailed.size())) detailed[d.expert] = true;
  for (const auto& e : r.experts) {
    std::string top;
    for (const auto& [name, n] : e.top_classes) top += (top.empty() ? "" : ", ") + name + " (" + std::to_string(n) + ")";
    const bool linked = e.expert >= 0 && e.expert < static_cast<int64_t>(detailed.size()) && detailed[e.expert];
    h << "<tr data-expert=\"" << e.expert << "\"><td data-key=\"expert\" data-value=\"" << e.expert << "\">"
      << (linked ? "<a href=\"#expert-" + std::to_string(e.expert) + "\">" + std::to_string(e.expert) + "</a>"
                 : std::to_string(e.expert))
      << "</td><td data-key=\"load\" data-value=\"" << e.load << "\">" << e.load << "</td>"
      << "<td data-key=\"support\" data-value=\"" << e.support << "\">" << e.support << "</td>"
      << "<td data-key=\"mean_coefficient\" data-value=\"" << number(e.mean_coefficient) << "\">"
      << fixed(e.mean_coefficient, 4) << "</td>";
    if (e.has_ablation)
      h << "<td data-key=\"delta_accuracy\" data-value=\"" << number(e.delta_accuracy) << "\">"
        << fixed(100 * e.delta_accuracy, 2) << "</td>";
    else
      h << "<td data-key=\"delta_accuracy\" data-value=\"NaN\">–</td>";
    if (with_loss)
      h << "<td data-key=\"delta_loss\" data-value=\"" << (e.has_loss ? number(e.delta_loss) : "NaN") << "\">"
        << (e.has_loss ? fixed(e.delta_loss, 4) : "–") << "</td>";
    h << "<td data-key=\"polysemanticity\" data-value=\"" << (e.has_ablation ? number(e.polysemanticity) : "NaN")
      << "\">" << (e.has_ablation ? fixed(e.polysemanticity, 3) : "–") << "</td>";
    h << "<td class=\"text\" data-key=\"top_classes\" data-value=\"" << escape_html(top) << "\">" << escape_html(top)
      << "</td></tr>\n";
  }
  h << "</tbody></table>\n";

  for (const auto& d : r.details) {
    h << "<section class=\"expert\" id=\"expert-" << d.expert << "\"><h2>Expert " << d.expert << "</h2>";
    h << "<h3>Gallery</h3><p>" << escape_html(d.gallery_title) << "</p><div class=\"gallery\">";
    for (const auto& t : d.tiles) {
      const bool wrong = t.label != t.prediction;
      h << "<figure class=\"tile" << (wrong ? " wrong" : "") << "\">";
      if (!t.png.empty())
        h << "<img alt=\"" << escape_html(t.label) << "\" src=\"data:image/png;base64," << base64(t.png) << "\">";
      h << "<figcaption>" << escape_html(t.label) << "<br>a = " << fixed(t.coefficient, 2);
      if (wrong) h << "<br><span class=\"pred\">→ " << escape_html(t.prediction) << "</span>";
      h << "</figcaption></figure>";
    }
    for (const auto& c : d.contexts) {
      const bool wrong = c.target != c.prediction;
      h << "<div class=\"context\"><span class=\"a\">a = " << fixed(c.coefficient, 2) << "</span> <span class=\"text\">"
        << escape_html(c.before) << "<mark>" << escape_html(c.token) << "</mark>" << escape_html(c.after)
        << "</span> <span class=\"next" << (wrong ? " wrong" : "") << "\">next " << escape_html(c.target)
        << (wrong ? ", predicted " + escape_html(c.prediction) : std::string(", predicted")) << "</span></div>";
    }
    if (d.tiles.empty() && d.contexts.empty()) h << "<p>No sample reaches the gallery's threshold.</p>";
    h << "</div>";
    if (!d.ablation_summary.empty()) h << "<p class=\"ablation\">" << escape_html(d.ablation_summary) << "</p>";
    h << "<div class=\"charts\">";
    if (!d.class_histogram.empty()) {
      std::vector<double> counts(d.class_histogram.begin(), d.class_histogram.end());
      h << "<div><h3>Samples routed mainly to it, per class</h3>"
        << bar_chart(r, counts, "samples whose largest coefficient is this expert's", false) << "</div>";
    }
    if (!d.accuracy_change.empty())
      h << "<div><h3>Accuracy change per class when ablated (pp)</h3>"
        << bar_chart(r, d.accuracy_change, "accuracy after ablation − before, percentage points", true) << "</div>";
    h << "</div></section>\n";
  }
  h << "<script>" << kScript << "</script></body></html>\n";
  return h.str();
}

}  // namespace mumoe::report
