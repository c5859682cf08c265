// `mumoe report`: the demo head's report holds one table row per expert with the numbers of
// `mumoe stats --json` and `mumoe ablate --json`, one section per requested expert with its
// gallery's images embedded, and fetches nothing; in a real browser (Debian's chromium, headless)
// the page renders and sorting the table by a column works.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "temp_dir.h"

namespace cli_report_test {

using mumoe::testkit::json_output;
using mumoe::testkit::read_bytes;
using mumoe::testkit::run_cli;
using mumoe::testkit::run_shell;
using mumoe::testkit::TempDir;
using mumoe::testkit::write_bytes;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The data-value of cell `key` in expert `e`'s table row.
std::string cell(const std::string& html, int64_t e, const std::string& key) {
  const auto row = html.find("<tr data-expert=\"" + std::to_string(e) + "\">");
  if (row == std::string::npos) return "";
  const auto at = html.find("data-key=\"" + key + "\" data-value=\"", row);
  if (at == std::string::npos) return "";
  const auto begin = html.find("data-value=\"", at) + 12;
  return html.substr(begin, html.find('"', begin) - begin);
}

// The data-value of variant `variant`'s cell in the bias table's row that starts with `label`.
std::string bias_cell(const std::string& html, const std::string& label, const std::string& variant) {
  const auto row = html.find(label + "</th>");
  if (row == std::string::npos) return "";
  const auto end = html.find("</tr>", row);
  const auto at = html.find("data-variant=\"" + variant + "\" data-value=\"", row);
  if (at == std::string::npos || at > end) return "";
  const auto begin = html.find("data-value=\"", at) + 12;
  return html.substr(begin, html.find('"', begin) - begin);
}

class CliReport : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string model_ = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  std::string args_ = model_ + " --data fashion-mnist:test --cache " + dir_.file("cache.sqlite") + " --quiet";
};

TEST_F(CliReport, HoldsTheNumbersOfStatsAndAblateAndEmbedsEverything) {
  const auto output = dir_.file("report.html");
  const auto made = json_output(run_cli("report " + args_ + " --experts top-4 --images 6 --output " + output + " --json"));
  ASSERT_EQ(made.at("sections"), 4) << made.dump();
  const auto html = read_bytes(output);
  EXPECT_EQ(count(html, "<tr data-expert="), 128u);
  EXPECT_EQ(count(html, "<section class=\"expert\""), 4u);
  EXPECT_EQ(count(html, "<img alt="), 24u);
  EXPECT_EQ(count(html, "src=\"data:image/png;base64,"), 24u);

  const auto stats = json_output(run_cli("stats " + args_ + " --json"));
  std::vector<std::pair<int64_t, int64_t>> by_load;
  for (const auto& e : stats.at("experts")) {
    const auto n = e.at("expert").get<int64_t>();
    EXPECT_EQ(cell(html, n, "load"), std::to_string(e.at("load").get<int64_t>())) << n;
    EXPECT_EQ(cell(html, n, "support"), std::to_string(e.at("support").get<int64_t>())) << n;
    by_load.push_back({-e.at("load").get<int64_t>(), n});
  }
  std::stable_sort(by_load.begin(), by_load.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (int i = 0; i < 4; ++i) {  // the four most loaded have sections, and their ablation's numbers
    const auto n = by_load[i].second;
    EXPECT_NE(html.find("<section class=\"expert\" id=\"expert-" + std::to_string(n) + "\">"), std::string::npos) << n;
    const auto ablated = json_output(run_cli("ablate " + args_ + " --experts " + std::to_string(n) + " --json"));
    const auto& outcome = ablated.at("experts").at(0);
    const double delta = outcome.at("accuracy_after").get<double>() - ablated.at("accuracy_before").get<double>();
    EXPECT_NEAR(std::stod(cell(html, n, "delta_accuracy")), delta, 1e-12) << n;
    if (outcome.at("has_effect").get<bool>()) {
      EXPECT_NEAR(std::stod(cell(html, n, "polysemanticity")), outcome.at("polysemanticity").get<double>(), 1e-12) << n;
    }
  }
  // Nothing leaves the page.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST_F(CliReport, RefusesBadSelectionsAndOutputsOverInputs) {
  EXPECT_EQ(run_cli("report " + args_ + " --experts top-0 --output " + dir_.file("r.html")).code, 1);
  EXPECT_EQ(run_cli("report " + args_ + " --experts 3,999 --no-sweep --output " + dir_.file("r.html")).code, 1);
  EXPECT_EQ(run_cli("report " + args_ + " --output " + model_).code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("r.html")));
}

// A GPT block's report: every expert in the table with the next-token accuracy and loss that
// `mumoe ablate --json` gives, and the experts shown with their tokens in context as `mumoe gallery`.
TEST_F(CliReport, AGptBlocksReportHasTheAblationsAndTokenGalleriesOfTheCli) {
  const auto gpt = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  const auto args = gpt + " --layer 3 --max-sequences 16 --cache " + dir_.file("gpt.sqlite") + " --quiet";
  const auto output = dir_.file("gpt.html");
  ASSERT_EQ(run_cli("report " + args + " --experts 5,23 --images 4 --output " + output).code, 0);
  const auto html = read_bytes(output);
  EXPECT_EQ(count(html, "<tr data-expert="), 32u);
  EXPECT_EQ(count(html, "<section class=\"expert\""), 2u);
  for (const int expert : {5, 23}) {
    const auto ablated = json_output(run_cli("ablate " + args + " --experts " + std::to_string(expert) + " --json"));
    const auto& outcome = ablated.at("experts").at(0);
    EXPECT_NEAR(std::stod(cell(html, expert, "delta_loss")),
                outcome.at("loss_after").get<double>() - ablated.at("loss_before").get<double>(), 1e-12);
    EXPECT_NEAR(std::stod(cell(html, expert, "delta_accuracy")),
                outcome.at("accuracy_after").get<double>() - ablated.at("accuracy_before").get<double>(), 1e-12);
    const auto gallery = json_output(run_cli("gallery " + args + " --expert " + std::to_string(expert) +
                                             " --count 4 --json"));
    const auto section = html.substr(html.find("id=\"expert-" + std::to_string(expert) + "\""));
    for (const auto& item : gallery.at("items")) {
      const auto token = item.at("token").get<std::string>();
      if (token.find_first_of("<>&\"'") != std::string::npos) continue;  // escaped in the page
      EXPECT_NE(section.find("<mark>" + token + "</mark>"), std::string::npos) << token;
    }
  }
}

// Debian's chromium renders the report from disk, headless: a screenshot, and a click on the
// table's "load" header sorts the rows by load, most first after a second click.
TEST_F(CliReport, OpensInChromiumAndSortsTheTable) {
  const char* browsers[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser"};
  std::string browser;
  for (const auto* b : browsers)
    if (std::filesystem::exists(b)) browser = b;
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const auto output = dir_.file("report.html");
  ASSERT_EQ(run_cli("report " + args_ + " --experts 0,1 --images 4 --no-sweep --output " + output).code, 0);
  const std::string flags = " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                            dir_.file("profile") + " --virtual-time-budget=3000 ";
  const auto shot = dir_.file("shot.png");
  const auto screenshot = run_shell(browser + flags + "--window-size=1200,1600 --screenshot=" + shot + " file://" +
                                    output + " 2>&1");
  ASSERT_TRUE(std::filesystem::exists(shot)) << screenshot.out;
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  if (const char* keep = std::getenv("MUMOE_REPORT_SCREENSHOT")) std::filesystem::copy_file(
      shot, keep, std::filesystem::copy_options::overwrite_existing);

  // Two clicks on "load": descending. The page's own script does the sorting.
  auto html = read_bytes(output);
  const std::string click =
      "<script>var th = document.querySelector('th[data-key=load]'); th.click(); th.click();</script>";
  html.insert(html.rfind("</body>"), click);
  const auto clicked = dir_.file("clicked.html");
  write_bytes(clicked, html);
  const auto dom = run_shell(browser + flags + "--dump-dom file://" + clicked + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0);
  std::vector<long> loads;
  const std::regex load_cell("data-key=\"load\" data-value=\"([0-9]+)\"");
  for (std::sregex_iterator it(dom.out.begin(), dom.out.end(), load_cell), end; it != end; ++it)
    loads.push_back(std::stol((*it)[1]));
  ASSERT_EQ(loads.size(), 128u) << dom.out.substr(0, 2000);
  EXPECT_TRUE(std::is_sorted(loads.rbegin(), loads.rend())) << "not sorted by load, most first";
  EXPECT_NE(dom.out.find("class=\"sorted-desc\""), std::string::npos);
}


// The data-value of cell `key` in model `model`'s row of the comparison table.
std::string comparison_cell(const std::string& html, const std::string& model, const std::string& key) {
  const auto row = html.find("<tr data-model=\"" + model + "\">");
  if (row == std::string::npos) return "";
  const auto at = html.find("data-key=\"" + key + "\" data-value=\"", row);
  if (at == std::string::npos || at > html.find("</tr>", row)) return "";
  const auto begin = html.find("data-value=\"", at) + 12;
  return html.substr(begin, html.find('"', begin) - begin);
}

// --compare: `mumoe compare`'s rows of the demo's head and another model's layer on the same data
// (the figures of `compare --json`), sortable in Chromium, and their chart; refused for a GPT.
TEST_F(CliReport, ComparesLayersAsCompareDoesAndSortsThem) {
  const auto other = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/vit-blocks-fmnist.mumoe.safetensors";
  const auto output = dir_.file("compare.html");
  const auto made = json_output(run_cli("report " + args_ + " --experts 3 --images 2 --compare " + other +
                                        " --output " + output + " --json"));
  EXPECT_EQ(made.at("compared"), 2) << made.dump();
  const auto html = read_bytes(output);
  EXPECT_EQ(count(html, "<tr data-model="), 2u);
  EXPECT_EQ(count(html, "<svg class=\"chart comparison\""), 1u);
  const auto rows = nlohmann::json::parse(
      run_cli("compare " + model_ + " " + other + " --data fashion-mnist:test --cache " + dir_.file("cache.sqlite") +
              " --json --quiet").out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const auto name = std::filesystem::path(row.at("model").get<std::string>()).filename().string();
    EXPECT_EQ(comparison_cell(html, name, "experts"), std::to_string(row.at("experts").get<int64_t>())) << name;
    EXPECT_EQ(std::stod(comparison_cell(html, name, "accuracy")), row.at("accuracy").get<double>()) << name;
    EXPECT_EQ(std::stod(comparison_cell(html, name, "mean_polysemanticity")),
              row.at("mean_polysemanticity").get<double>()) << name;
    EXPECT_EQ(std::stod(comparison_cell(html, name, "class_purity")), row.at("mean_class_purity").get<double>()) << name;
    EXPECT_EQ(comparison_cell(html, name, "dead_experts"), std::to_string(row.at("dead_experts").get<int64_t>())) << name;
  }

  // Clicks on the "accuracy" header sort the rows by it, one click ascending, two descending (the
  // page's own script, in Chromium): one of the two orders is not the table's own.
  if (std::filesystem::exists("/usr/bin/chromium")) {
    for (const int clicks : {1, 2}) {
      auto page = html;
      std::string script = "<script>var th = document.querySelector('#comparison th:nth-child(5)');";
      for (int i = 0; i < clicks; ++i) script += " th.click();";
      page.insert(page.rfind("</body>"), script + "</script>");
      const auto clicked = dir_.file("compare-clicked.html");
      write_bytes(clicked, page);
      const auto dom = run_shell("/usr/bin/chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                                 dir_.file("profile") + " --virtual-time-budget=3000 --dump-dom file://" + clicked +
                                 " 2>/dev/null");
      ASSERT_EQ(dom.code, 0);
      std::vector<double> accuracies;
      const std::regex cell("<tr data-model=\"[^\"]*\">.*?data-key=\"accuracy\" data-value=\"([0-9.e-]+)\"");
      for (std::sregex_iterator it(dom.out.begin(), dom.out.end(), cell), end; it != end; ++it)
        accuracies.push_back(std::stod((*it)[1]));
      ASSERT_EQ(accuracies.size(), 2u) << dom.out.substr(0, 2000);
      ASSERT_NE(accuracies[0], accuracies[1]);
      EXPECT_EQ(accuracies[0] < accuracies[1], clicks == 1) << clicks << " click(s)";
    }
  }

  const auto gpt = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  EXPECT_EQ(run_cli("report " + gpt + " --compare " + model_ + " --output " + dir_.file("g.html")).code, 1);
  EXPECT_EQ(run_cli("report " + args_ + " --compare " + dir_.file("absent.pth") + " --output " + dir_.file("a.html")).code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("a.html")));
}

}  // namespace cli_report_test

namespace cli_report_test {

// A multi-label model's report is its bias table: the model as opened and with a session's edit,
// with the numbers `mumoe fairness --json` and `mumoe rewrite --json` print, the target cell marked.
TEST_F(CliReport, AMultiLabelModelsReportIsTheBiasTableOfFairnessAndRewrite) {
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/biased-fmnist.mumoe.safetensors";
  const auto common = model + " --target long_sleeves --cache " + dir_.file("bias.sqlite") + " --quiet";
  const auto session = " --session " + dir_.file("session.sqlite");
  const auto rewrite = json_output(run_cli("rewrite " + common + " --subpop 'long_sleeves=1&frame=1'" + session + " --json"));
  const auto fairness = json_output(run_cli("fairness " + common + " --sensitive frame --json"));
  const auto output = dir_.file("bias.html");
  const auto made =
      json_output(run_cli("report " + common + " --sensitive frame" + session + " --output " + output + " --json"));
  EXPECT_TRUE(made.at("bias_table").get<bool>()) << made.dump();
  const auto html = read_bytes(output);
  EXPECT_EQ(count(html, "<table id=\"bias\">"), 1u);
  EXPECT_EQ(count(html, "<table id=\"experts\""), 0u);
  EXPECT_NE(html.find("<tr class=\"target\"><th class=\"text\">* long_sleeves=1 &amp; frame=1 (1500)"), std::string::npos);
  // The unedited column holds fairness's numbers, the edited one rewrite's "after" (the same edit).
  const auto number = [](const std::string& text) { return text.empty() ? -1.0 : std::stod(text); };
  for (const auto& [label, key] : {std::pair{std::string("equality of opportunity"), std::string("equality_of_opportunity")},
                                   std::pair{std::string("STD bias"), std::string("std_bias")},
                                   std::pair{std::string("Max-Min (lowest cell)"), std::string("max_min")},
                                   std::pair{std::string("test accuracy (all outputs)"), std::string("test_accuracy")}}) {
    EXPECT_DOUBLE_EQ(number(bias_cell(html, label, "model")), fairness.at(key).get<double>()) << label;
    EXPECT_DOUBLE_EQ(number(bias_cell(html, label, "model + 1 edit")), rewrite.at("after").at(key).get<double>()) << label;
  }
  EXPECT_DOUBLE_EQ(number(bias_cell(html, "MRS", "model + 1 edit")), rewrite.at("after").at("mrs").get<double>());
  EXPECT_EQ(bias_cell(html, "MRS", "model"), "NaN");  // the reference has none
  // The edit changes the target cell: the columns differ (the comparison can fail).
  EXPECT_NE(bias_cell(html, "* long_sleeves=1 &amp; frame=1 (1500)", "model"),
            bias_cell(html, "* long_sleeves=1 &amp; frame=1 (1500)", "model + 1 edit"));
  // Without --target the user is told what a multi-label report needs; a multi-class model refuses --target.
  const auto refused = run_cli("report " + model + " --quiet --output " + dir_.file("x.html"));
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.out.find("--target"), std::string::npos) << refused.out;
  EXPECT_EQ(run_cli("report " + args_ + " --target x --output " + dir_.file("y.html")).code, 1);
  // The session is an input: writing the page over it is refused, and it is kept.
  const auto kept = read_bytes(dir_.file("session.sqlite"));
  const auto over = run_cli("report " + common + " --sensitive frame" + session + " --output " + dir_.file("session.sqlite"));
  EXPECT_EQ(over.code, 1) << over.out;
  EXPECT_NE(over.out.find("--session"), std::string::npos) << over.out;
  EXPECT_EQ(read_bytes(dir_.file("session.sqlite")), kept);
}

}  // namespace cli_report_test
