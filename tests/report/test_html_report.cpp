// The HTML report's page (report/html_report.h): base64 against RFC 4648's test vectors, escaping,
// and the structure scripts and tests rely on — one table row per expert with its numbers, one
// section per detailed expert with its tiles and charts, nothing fetched from anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "report/html_report.h"

namespace html_report_test {

using namespace mumoe::report;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

TEST(HtmlReport, Base64FollowsRfc4648) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

TEST(HtmlReport, EscapesTextEverywhere) {
  EXPECT_EQ(escape_html("<a href=\"x\">T&'s</a>"), "&lt;a href=&quot;x&quot;&gt;T&amp;&#39;s&lt;/a&gt;");
  ExpertReport r;
  r.title = "<script>alert(1)</script>";
  r.class_names = {"<b>", "ok"};
  r.card = {{"model", "a&b"}};
  r.experts = {{0, 1, 1, 0.5, true, -0.25, 0.5, {{"<b>", 1}}}};
  const auto html = render_html(r);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("a&amp;b"), std::string::npos);
}

TEST(HtmlReport, HasARowPerExpertAndASectionPerDetail) {
  ExpertReport r;
  r.title = "demo";
  r.class_names = {"cat", "dog"};
  r.class_accuracy = {0.5, 0.75};
  for (int64_t e = 0; e < 5; ++e)
    r.experts.push_back({e, 10 * e, 20 * e, 0.125 * static_cast<double>(e), true, -0.01 * static_cast<double>(e),
                         e ? 0.3 : std::nan(""), {{"dog", e}}});
  r.has_sweep = true;
  ExpertDetail d;
  d.expert = 3;
  d.gallery_title = "2 random";
  d.tiles = {{"\x89PNG", "cat", "cat", 0.9, false}, {"\x89PNG", "dog", "cat", 0.6, true}};
  d.class_histogram = {4, 2};
  d.accuracy_change = {-0.1, 0.0};
  r.details = {d};
  const auto html = render_html(r);
  EXPECT_EQ(count(html, "<tr data-expert="), 5u);
  EXPECT_NE(html.find("<td data-key=\"load\" data-value=\"40\">40</td>"), std::string::npos);
  EXPECT_NE(html.find("data-key=\"delta_accuracy\" data-value=\"-0.04\""), std::string::npos);
  EXPECT_NE(html.find("data-key=\"polysemanticity\" data-value=\"NaN\""), std::string::npos);
  EXPECT_EQ(count(html, "<section class=\"expert\""), 1u);
  EXPECT_NE(html.find("id=\"expert-3\""), std::string::npos);
  EXPECT_EQ(count(html, "<img alt="), 2u);
  EXPECT_EQ(count(html, "src=\"data:image/png;base64,iVBORw==\""), 2u);  // "\x89PNG"
  EXPECT_EQ(count(html, "figure class=\"tile wrong\""), 1u);             // dog predicted as cat
  EXPECT_GE(count(html, "<svg class=\"chart"), 4u);  // accuracy, sweep, histogram, ablation
  // Nothing is fetched: no src or href leaves the page (the SVG namespace is a name, not a request).
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

// A language model's report: a Δ loss column, and tokens in their context, the token marked.
TEST(HtmlReport, ALanguageModelsTokensAreShownInTheirContext) {
  ExpertReport r;
  r.title = "gpt";
  ExpertRow row{0, 3, 9, 0.1, true, -0.002, 0.9, {{" the", 3}}};
  row.has_loss = true;
  row.delta_loss = 0.0125;
  r.experts = {row};
  ExpertDetail d;
  d.expert = 0;
  d.contexts = {{"Once upon", " a", " time", " time", " day", 0.75}};
  d.ablation_summary = "next-token accuracy 20.1 % → 19.9 %";
  r.details = {d};
  const auto html = render_html(r);
  EXPECT_NE(html.find("<th data-key=\"delta_loss\">"), std::string::npos);
  EXPECT_NE(html.find("data-key=\"delta_loss\" data-value=\"0.0125\""), std::string::npos);
  EXPECT_NE(html.find("Once upon<mark> a</mark> time"), std::string::npos);
  EXPECT_NE(html.find("next  time, predicted  day"), std::string::npos);
  EXPECT_NE(html.find("next-token accuracy 20.1 % → 19.9 %"), std::string::npos);
  EXPECT_EQ(count(html, "<div class=\"context\">"), 1u);
}

}  // namespace html_report_test
