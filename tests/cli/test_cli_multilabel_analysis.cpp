// The expert analysis of a multi-label model (stats, gallery with a subpopulation, per-output
// ablation) against real PyTorch: the test's Python reads the trained head's safetensors file and
// the test features byte by byte, rebuilds the layer as the reference implementation writes it
// (tests/support/reference_models.py: projs, bn, MuMoE.factors, entmax15), and computes every
// expected number itself — per-output accuracy with each expert's coefficient forced to 0, the
// loads, the positive outputs among an expert's samples, and the subpopulation's top samples.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "biased_head.h"
#include "cli_runner.h"
#include "python_fixture.h"
#include "python_reference.h"
#include "temp_dir.h"

namespace mumoe {
namespace multilabel_analysis_test {

using testkit::run_cli;

nlohmann::json json_after_brace(const testkit::CliRun& run) {
  const auto start = run.out.find('{');
  EXPECT_NE(start, std::string::npos) << run.out;
  return nlohmann::json::parse(run.out.substr(start == std::string::npos ? 0 : start));
}

// The reference's view of the files (no code of ours): safetensors parsed by hand, the layer in
// float32 for its gates (as the model computes them), its expert arithmetic in float64.
const char* const kOracle = R"PY(
import struct, json
def read_safetensors(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    header = json.loads(b[8:8 + n])
    types = {'F32': torch.float32, 'F64': torch.float64, 'I64': torch.int64, 'U8': torch.uint8}
    out = {}
    for k, v in header.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']
        out[k] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + e]), dtype=types[v['dtype']]).reshape(v['shape'])
    return out
m = read_safetensors('head.safetensors')
d = read_safetensors('test.safetensors')
N, R = m['head.MuMoE.factors.0'].shape
I = m['head.projs.0'].shape[0]
O = m['head.MuMoE.factors.2'].shape[0]
layer = MuMoE(I, O, N, R)
layer.projs[0].data = m['head.projs.0']
layer.bn[0].running_mean.copy_(m['head.bn.0.running_mean'])
layer.bn[0].running_var.copy_(m['head.bn.0.running_var'])
for k in range(3): layer.MuMoE.factors[k].data = m['head.MuMoE.factors.%d' % k]
layer.eval()
x = d['features'].float()
targets = d['attributes'][:, [0, 2]]          # the outputs t, u are attributes 0 and 2 (t, s, u)
with torch.no_grad():
    a = layer.coefficients(x)
    z1 = torch.cat([x, torch.ones(x.shape[0], 1)], 1).double()
    u1, u2, u3 = [f.double() for f in layer.MuMoE.factors]
    logits = lambda c: ((c.double() @ u1) * (z1 @ u2)) @ u3.T
    accuracy = lambda c: ((logits(c) > 0).long() == targets).double().mean(0)
    after = []
    for n in range(N):
        c = a.clone(); c[:, n] = 0; after.append(accuracy(c))
    c = a.clone(); c[:, [0, 3]] = 0
    pair = accuracy(c)
members = (d['attributes'][:, 0] == 1) & (d['attributes'][:, 1] == 0)   # t=1 & s=0
support = ((a > 0) & members.unsqueeze(1)).sum(0)
expert = int(support.argmax())
column = a[:, expert].double()
eligible = torch.nonzero((column > 0) & members).flatten()
order = eligible[torch.argsort(column[eligible], descending=True)]
load = (a >= 0.5).sum(0)
positives = torch.stack([((a[:, n] >= 0.5).unsqueeze(1) & (targets == 1)).sum(0) for n in range(N)])
torch.save({'before': accuracy(a), 'after': torch.stack(after), 'pair': pair, 'expert': torch.tensor(expert),
            'eligible': torch.tensor(len(eligible)), 'top': order[:5].clone(), 'load': load, 'positives': positives,
            'targets': targets.clone()}, 'expected.pt')
)PY";

class CliMultilabelAnalysis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new testkit::TempDir();
    ::setenv("MUMOE_CACHE", dir->file("cache.sqlite").c_str(), 1);
    testkit::train_biased_head(*dir);
  }
  static void TearDownTestSuite() { delete dir; }
  static std::string f(const std::string& name) { return dir->file(name); }
  static std::string model_and_data() { return f("head.safetensors") + " --data features:" + f("test.safetensors"); }
  static std::map<std::string, torch::Tensor> expected() {
    if (!std::filesystem::exists(f("expected.pt"))) {
      testkit::run_python(*dir, testkit::reference_models() + kOracle);
    }
    return testkit::read_expected(f("expected.pt"));
  }
  static testkit::TempDir* dir;
};
testkit::TempDir* CliMultilabelAnalysis::dir = nullptr;

TEST_F(CliMultilabelAnalysis, EachExpertsRemovalCostsEachOutputWhatPyTorchComputes) {
  REQUIRE_PYTHON("torch");
  const auto e = expected();
  const auto run = run_cli("ablate " + model_and_data() + " --all --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_after_brace(run);
  EXPECT_EQ(j["class_names"], nlohmann::json({"t", "u"}));
  const auto before = e.at("before");
  for (int64_t o = 0; o < 2; ++o)
    EXPECT_DOUBLE_EQ(j["per_class_accuracy_before"][o].get<double>(), before[o].item<double>()) << "output " << o;
  const auto after = e.at("after");
  ASSERT_EQ(static_cast<int64_t>(j["experts"].size()), after.size(0));
  int64_t with_effect = 0;
  for (int64_t n = 0; n < after.size(0); ++n) {
    const auto& x = j["experts"][n];
    bool changed = false;
    for (int64_t o = 0; o < 2; ++o) {
      EXPECT_DOUBLE_EQ(x["per_class_accuracy_after"][o].get<double>(), after[n][o].item<double>())
          << "expert " << n << ", output " << o;
      changed = changed || after[n][o].item<double>() != before[o].item<double>();
    }
    with_effect += changed;
  }
  EXPECT_GT(with_effect, 0) << "no expert's removal changed anything: the check would be empty";
  // The naive oracle (factor slices zeroed, the whole layer re-run) answers a set alike.
  for (const std::string method : {"sparse", "naive"}) {
    const auto pair = run_cli("ablate " + model_and_data() + " --experts 0,3 --method " + method + " --json");
    ASSERT_EQ(pair.code, 0) << pair.out;
    const auto p = json_after_brace(pair)["experts"][0];
    for (int64_t o = 0; o < 2; ++o)
      EXPECT_DOUBLE_EQ(p["per_class_accuracy_after"][o].get<double>(), e.at("pair")[o].item<double>()) << method;
  }
}

TEST_F(CliMultilabelAnalysis, StatisticsCountEachExpertsPositiveOutputs) {
  REQUIRE_PYTHON("torch");
  const auto e = expected();
  const auto run = run_cli("stats " + model_and_data() + " --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_after_brace(run);
  EXPECT_TRUE(j.value("multilabel", false));
  const auto load = e.at("load");
  const auto positives = e.at("positives");
  for (const auto& x : j["experts"]) {
    const auto n = x["expert"].get<int64_t>();
    EXPECT_EQ(x["load"].get<int64_t>(), load[n].item<int64_t>()) << "expert " << n;
    std::map<int64_t, int64_t> top;
    for (const auto& t : x["top_classes"]) top[t["class"].get<int64_t>()] = t["samples"].get<int64_t>();
    for (int64_t o = 0; o < 2; ++o) {
      const auto p = positives[n][o].item<int64_t>();
      EXPECT_EQ(top.count(o) ? top[o] : 0, p) << "expert " << n << ", output " << o;
    }
  }
}

TEST_F(CliMultilabelAnalysis, AGalleryOfASubpopulationHoldsOnlyItsSamples) {
  REQUIRE_PYTHON("torch");
  const auto e = expected();
  const auto expert = e.at("expert").item<int64_t>();
  const auto run = run_cli("gallery " + model_and_data() + " --expert " + std::to_string(expert) +
                           " --order top --count 5 --subpop ' s = 0 & t=1' --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_after_brace(run);
  EXPECT_EQ(j["subpopulation"], "s=0&t=1");
  EXPECT_EQ(j["eligible"].get<int64_t>(), e.at("eligible").item<int64_t>());
  std::set<int64_t> shown, reference;
  const auto top = e.at("top");
  for (int64_t i = 0; i < top.size(0); ++i) reference.insert(top[i].item<int64_t>());
  const auto targets = e.at("targets");
  for (const auto& item : j["items"]) {
    const auto s = item["sample"].get<int64_t>();
    shown.insert(s);
    // The label is the sample's truths as an output bitmask, spelled out by name.
    const int64_t bits = targets[s][0].item<int64_t>() | (targets[s][1].item<int64_t>() << 1);
    EXPECT_EQ(item["label"].get<int64_t>(), bits) << "sample " << s;
    EXPECT_EQ(item["positive_outputs"], bits == 0 ? "none" : bits == 1 ? "t" : bits == 2 ? "u" : "t+u");
  }
  EXPECT_EQ(shown, reference);

  // A filter is never ignored: an attribute the data lacks, and a malformed one, are refused.
  const auto missing = run_cli("gallery " + model_and_data() + " --expert 0 --subpop 'w=1'");
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("no attribute 'w'"), std::string::npos) << missing.out;
  const auto malformed = run_cli("gallery " + model_and_data() + " --expert 0 --subpop 't=2'");
  EXPECT_EQ(malformed.code, 1) << malformed.out;
}

// Without --data a multi-label model reads the bias workflow's test data (the bias demo:
// biased-fmnist:test, whose attributes its outputs are); --data given is kept even when it names
// the image default; compare, which measures class specialisation, refuses it from its header.
TEST_F(CliMultilabelAnalysis, DefaultDataIsTheBiasTestDataAndCompareRefuses) {
  const std::string demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/biased-fmnist.mumoe.safetensors";
  const auto stats = run_cli("stats " + demo + " --quiet --json");
  ASSERT_EQ(stats.code, 0) << stats.out;
  const auto j = json_after_brace(stats);
  EXPECT_TRUE(j.value("multilabel", false));
  EXPECT_EQ(j["class_names"].size(), 5u);
  EXPECT_EQ(j["samples"], 10000);
  const auto image_data = run_cli("stats " + demo + " --data fashion-mnist:test --quiet");
  EXPECT_EQ(image_data.code, 1) << image_data.out;
  EXPECT_NE(image_data.out.find("fashion-mnist:test has no attribute 'footwear'"), std::string::npos) << image_data.out;
  const auto compare = run_cli("compare " + model_and_data() + " --quiet");
  EXPECT_NE(compare.code, 0) << compare.out;  // compare: exit 2, the row of a model it cannot compare
  EXPECT_NE(compare.out.find("is a multi-label model"), std::string::npos) << compare.out;
}

}  // namespace multilabel_analysis_test
}  // namespace mumoe
