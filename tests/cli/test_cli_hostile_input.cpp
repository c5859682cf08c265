// The `mumoe` CLI on hostile and clumsy input — one test per defect of the 670-case probe (issue
// 19): every case must exit 2 (bad input) or 1 (usage error) with a message naming the file,
// never crash (exit 128 + signal), never touch an input file, and leave no temporary behind.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "analysis/content_hash.h"
#include "analysis_fixture.h"
#include "cli_runner.h"
#include "data/image_data.h"
#include "editing/edit_session_store.h"
#include "io/output_files.h"
#include "io/safetensors.h"
#include "model/manifest.h"
#include "temp_dir.h"

using namespace mumoe;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void sql(const std::string& path, const std::string& statement) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message << " in " << statement;
}

// Little-endian hex of one int64, for blob surgery in SQL.
std::string le_hex(int64_t v) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    const auto byte = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

// Every file in `dir` with its bytes, to show that a command changed none of them.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().string()] = testkit::read_bytes(e.path().string());
  return files;
}

// An image folder the demo model (ten classes of 28 × 28 grey images) reads: one image in each of
// `odd_names` (any bytes but a quote) and in c0, c1, … up to ten classes. Written by PIL; the
// run's code is not 0 where PIL is missing.
testkit::CliRun write_demo_class_folders(const std::string& folder, const std::vector<std::string>& odd_names) {
  std::string names;
  for (const auto& n : odd_names) names += " '" + n + "'";
  return testkit::run_shell(
      "/usr/bin/python3 -c \"import os, sys; from PIL import Image\n"
      "odd = [os.fsencode(a) for a in sys.argv[2:]]\n"
      "for c in [b'c%d' % i for i in range(10 - len(odd))] + odd:\n"
      "  d = os.path.join(os.fsencode(sys.argv[1]), c); os.makedirs(d)\n"
      "  Image.new('L', (28, 28), 100).save(os.fsdecode(os.path.join(d, b'1.png')))\" '" + folder + "'" + names + " 2>&1");
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = testkit::write_analysis_fixture(dir_.path().string(),
                                               testkit::head_config(nn::Factorization::CP, {12}, 4), 300, 21);
  }

  std::string cache() const { return dir_.file("cache.sqlite"); }
  std::string on(const std::string& features) const {
    return fixture_.model_path + " --data features:" + features + " --cache " + cache() + " --chunk-size 64 --quiet ";
  }
  std::string common() const { return on(fixture_.features_path); }

  // The fixture's features with other labels (and no class names, so classes are numbered).
  std::string features_with_labels(const torch::Tensor& labels, const std::string& name) const {
    const auto source = io::SafetensorsFile::open(fixture_.features_path);
    const auto path = dir_.file(name);
    auto features = source.read("features");
    io::write_safetensors(path, {{"features", features.slice(0, 0, labels.size(0))}, {"labels", labels}});
    return path;
  }

  static void expect_exit(const testkit::CliRun& run, int code, const std::string& phrase) {
    EXPECT_FALSE(run.killed) << run.out;
    EXPECT_EQ(run.code, code) << run.out;
    EXPECT_TRUE(contains(run.out, phrase)) << "expected '" << phrase << "' in: " << run.out;
  }

  nlohmann::json run_json(const std::string& args) {
    const auto run = testkit::run_cli(args);
    EXPECT_EQ(run.code, 0) << run.out;
    const auto brace = run.out.find('{');
    return brace == std::string::npos ? nlohmann::json() : nlohmann::json::parse(run.out.substr(brace));
  }

  testkit::TempDir dir_;
  testkit::AnalysisFixture fixture_;
};

// Probe 1 and 3: a label too large to be a class index, in a features file.
TEST_F(HostileInput, HugeLabelsInAFeatureFileAreBadInput) {
  for (int64_t huge : {std::numeric_limits<int64_t>::max(), int64_t{1} << 62}) {
    const auto f = features_with_labels(torch::tensor({int64_t{0}, huge, int64_t{1}}), "huge.safetensors");
    for (const char* command : {"stats ", "analyze ", "evaluate "}) {
      const std::string args = std::string(command) == "evaluate "
                                   ? "evaluate " + fixture_.model_path + " --data features:" + f
                                   : command + on(f);
      expect_exit(testkit::run_cli(args), 2, "at most 1000000 classes");
    }
  }
  // A label one past the head's outputs: bad data for this model, named.
  const auto f = features_with_labels(torch::tensor({int64_t{0}, int64_t{4}, int64_t{1}}), "four.safetensors");
  expect_exit(testkit::run_cli("stats " + on(f)), 2, "four.safetensors: has 5 classes (labels up to 4)");
}

// Probe 2: a features file with no samples crashed analyze, stats, gallery, ablate.
TEST_F(HostileInput, AFeatureFileWithoutSamplesIsBadInput) {
  const auto empty = dir_.file("empty.safetensors");
  io::write_safetensors(empty, {{"features", torch::zeros({0, 12})}, {"labels", torch::zeros({0}, torch::kLong)}});
  for (const std::string command : {"analyze ", "stats ", "gallery --expert 0 ", "ablate --experts 0 "})
    expect_exit(testkit::run_cli(command + on(empty)), 2, "empty.safetensors: holds no samples");
  expect_exit(testkit::run_cli("evaluate " + fixture_.model_path + " --data features:" + empty), 2, "holds no samples");
}

// Probe 1 and 10: labels tampered with in the cache (−1, 2^31 + 5, 10^15, and 4 for a 4-class
// head) used to write out of bounds; now they are named as damage, with the remedy, and
// --recompute rebuilds exactly that chunk.
TEST_F(HostileInput, TamperedCacheLabelsAreNamedAndRecomputed) {
  const auto clean = run_json("stats " + common() + "--json");
  for (int64_t bad : {int64_t{-1}, (int64_t{1} << 31) + 5, int64_t{1000000000000000}, int64_t{4}}) {
    sql(cache(), "DELETE FROM results; UPDATE chunks SET labels = x'" + le_hex(bad) +
                     "' || substr(labels, 9) WHERE chunk_index = 0");
    for (const std::string command : {"stats ", "ablate --experts 1 ", "gallery --expert 2 "}) {
      const auto run = testkit::run_cli(command + common());
      expect_exit(run, 2, cache());
      EXPECT_TRUE(contains(run.out, "sample 0: label " + std::to_string(bad) + " outside the model's 4 classes"))
          << run.out;
      EXPECT_TRUE(contains(run.out, "mumoe cache repair")) << run.out;
    }
    const auto repaired = run_json("stats " + common() + "--recompute --json");
    EXPECT_EQ(repaired["experts"], clean["experts"]) << "label " << bad;
  }
}

// Probe 9: a garbage result row is recomputed; a complete run missing a chunk and a bad blob are
// named with the remedy, found by `cache check`, and dropped by `cache repair` or --recompute —
// after which the answers equal those of a clean cache.
TEST_F(HostileInput, DamagedCacheRowsAreRepairedWithoutDiscardingTheRest) {
  const auto clean_stats = run_json("stats " + common() + "--json");
  const auto clean_gallery = run_json("gallery " + common() + "--expert 3 --order top --count 5 --json");

  sql(cache(), "UPDATE results SET json = '{garbage' WHERE kind = 'statistics'");
  EXPECT_EQ(run_json("stats " + common() + "--json")["experts"], clean_stats["experts"]);

  sql(cache(), "DELETE FROM results; DELETE FROM chunks WHERE chunk_index = 2");
  const auto missing = testkit::run_cli("gallery " + common() + "--expert 3 --order top --count 5");
  expect_exit(missing, 2, cache() + ": run 1, chunk 2: not in the cache");
  EXPECT_TRUE(contains(missing.out, "mumoe cache repair --cache " + cache())) << missing.out;
  const auto check = testkit::run_cli("cache check --cache " + cache());
  expect_exit(check, 2, "marked complete but 1 of 5 chunks are missing");
  expect_exit(testkit::run_cli("cache repair --cache " + cache()), 0, "repaired");
  expect_exit(testkit::run_cli("cache check --cache " + cache()), 0, "no damage found");
  EXPECT_EQ(run_json("gallery " + common() + "--expert 3 --order top --count 5 --json")["items"],
            clean_gallery["items"]);

  sql(cache(), "DELETE FROM results; UPDATE chunks SET coef_values = x'00' WHERE chunk_index = 1");
  expect_exit(testkit::run_cli("stats " + common()), 2, "chunk 1: coef_values");
  EXPECT_EQ(run_json("stats " + common() + "--recompute --json")["experts"], clean_stats["experts"]);
  // Checking a path where there is no cache must not create one.
  expect_exit(testkit::run_cli("cache check --cache " + dir_.file("typo.sqlite")), 2, "does not exist");
  EXPECT_FALSE(fs::exists(dir_.file("typo.sqlite")));
}

// A chunk may leave its layer inputs to the data only when they are the data's features (a head
// on features:FILE, extraction.h). A backbone model's chunk that lost them is damage: named with
// the remedy, and --recompute recomputes just that chunk.
TEST_F(HostileInput, ABackboneRunsChunkWithoutInputsIsNamedAndRecomputed) {
  if (!std::filesystem::exists(data::kFashionMnistDir)) GTEST_SKIP() << data::kFashionMnistDir << " is not installed";
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  const auto args = demo + " --data fashion-mnist:test --cache " + cache() + " --quiet ";
  run_json("analyze " + args + "--json");
  const auto clean = run_json("ablate " + args + "--experts 3 --json");
  sql(cache(), "DELETE FROM results; UPDATE chunks SET inputs = x'' WHERE chunk_index = 3");
  const auto damaged = testkit::run_cli("ablate " + args + "--experts 3");
  expect_exit(damaged, 2, "chunk 3 stores no layer inputs");
  EXPECT_TRUE(contains(damaged.out, "--recompute")) << damaged.out;
  const auto mended = run_json("ablate " + args + "--experts 3 --recompute --json");
  ASSERT_EQ(mended["experts"].size(), 1u);
  ASSERT_EQ(clean["experts"].size(), 1u);
  for (const char* field : {"accuracy_after", "accuracy_drop", "changed_predictions", "affected_samples"})
    EXPECT_EQ(mended["experts"][0][field], clean["experts"][0][field]) << field;
  EXPECT_GT(clean["experts"][0]["affected_samples"].get<int64_t>(), 0);
}

// Probe 4: an output path that is one of the command's inputs (also through a link) is refused
// and the input keeps its bytes.
TEST_F(HostileInput, NoOutputOverwritesAnInputOfTheSameCommand) {
  const auto model = fixture_.model_path;
  const auto features = fixture_.features_path;
  const auto link = dir_.file("link-to-model.safetensors");
  fs::create_symlink(model, link);
  const auto hard = dir_.file("hard-link-to-features.safetensors");
  fs::create_hard_link(features, hard);
  const auto demo = dir_.file("demo.safetensors");
  fs::copy_file(std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors", demo);
  const auto edits = dir_.file("edits.json");
  testkit::write_bytes(edits, "[]");
  const auto backbone = dir_.file("backbone.pt");
  testkit::write_bytes(backbone, "not really TorchScript");
  run_json("analyze " + common() + "--json");
  const auto before = snapshot(dir_.path());
  const auto export_to = [&](const std::string& output) {
    return "export " + model + " --backbone " + backbone + " --edits " + edits + " --output " + output;
  };

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"features " + demo + " --output " + demo + " --limit 5", "is the model"},
      {"forward " + model + " --input " + features + " --tensor features --output " + model, "is the model"},
      {"forward " + model + " --input " + features + " --tensor features --output " + link, "is the model"},
      {"forward " + model + " --input " + features + " --tensor features --output " + features, "is the --input file"},
      {"forward " + model + " --input " + features + " --tensor features --output " + hard, "is the --input file"},
      {"gallery " + common() + "--expert 0 --output " + model, "is the model"},
      {"gallery " + common() + "--expert 0 --output " + cache(), "is the analysis cache"},
      {"gallery " + common() + "--expert 0 --output " + features, "is a data file"},
      {export_to(edits) + " --overwrite", "is --edits"},
      {export_to(backbone) + " --overwrite", "is the TorchScript backbone"},
  };
  for (const auto& [args, phrase] : cases) expect_exit(testkit::run_cli(args), 1, phrase);
  EXPECT_EQ(snapshot(dir_.path()), before);
}

// Probe 5: --cache naming a file that is not a cache (the model, an edit-session database) used
// to move it aside; now it is refused and left where it is.
TEST_F(HostileInput, CacheOptionNeverMovesAForeignFile) {
  const auto session = dir_.file("edits.sqlite");
  editing::EditSessionStore::open(session);
  const auto before = snapshot(dir_.path());
  for (const auto& target : {fixture_.model_path, session}) {
    const auto run = testkit::run_cli("analyze " + fixture_.model_path + " --data features:" + fixture_.features_path +
                                      " --cache " + target + " --quiet");
    expect_exit(run, 2, target + ": is not a mumoe analysis cache");
    EXPECT_FALSE(contains(run.out, "moved")) << run.out;
  }
  EXPECT_EQ(snapshot(dir_.path()), before);
}

// Probe 7: past `ulimit -f` the CLI used to die of SIGXFSZ with temporaries left behind.
TEST_F(HostileInput, AFileSizeLimitIsAReportedWriteErrorWithoutTemporaries) {
  const auto big = dir_.file("big.safetensors");
  torch::manual_seed(3);
  io::write_safetensors(big, {{"input", torch::randn({5000, 12})}});
  const auto out = dir_.file("out.safetensors");
  // The limit applies to the child shell only (sh's ulimit -f counts 512-byte blocks: 32 KiB).
  const auto run = testkit::run_shell("ulimit -f 64; exec " + std::string(MUMOE_CLI_PATH) + " forward " + fixture_.model_path +
                             " --input " + big + " --output " + out);
  expect_exit(run, 2, out + ": write failed: File too large");
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir_.path()))
    EXPECT_FALSE(contains(e.path().filename().string(), "-tmp-")) << e.path();
}

// Probe 8: a FIFO as the model used to hang forever; names with escape sequences reached the
// terminal raw; a mistyped --session silently created an empty database.
TEST_F(HostileInput, FifosEscapeSequencesAndMistypedSessions) {
  const auto fifo = dir_.file("model.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string data = " --data features:" + fixture_.features_path;
  for (const std::string& args : {"info " + fifo, "evaluate " + fifo + data, "analyze " + fifo + data + " --cache " + cache(),
                                 "analyze " + fixture_.model_path + data + " --cache " + fifo})
    // timeout: a hang fails the test instead of blocking it
    expect_exit(testkit::run_shell("timeout 60 " + std::string(MUMOE_CLI_PATH) + " " + args), 2,
                "is a FIFO (named pipe), not a regular file");

  const auto hostile = dir_.file("hostile.safetensors");
  testkit::write_bytes(hostile, [] {
    const std::string header = R"({"\u001b]0;owned\u0007\u001b[2J":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string le(8, '\0');
    for (size_t i = 0; i < 8; ++i) le[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return le + header + std::string(4, '\0');
  }());
  for (const std::string command : {"info ", "forward "}) {
    const auto run = testkit::run_cli(command + hostile + (command == "forward " ? " --input x --output y" : ""));
    EXPECT_NE(run.code, 0) << run.out;
    EXPECT_FALSE(run.killed);
    EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << run.out;
  }

  const auto typo = dir_.file("edtis.sqlite");
  expect_exit(testkit::run_cli("edits " + fixture_.model_path + " --session " + typo), 2, "does not exist");
  expect_exit(testkit::run_cli("export " + fixture_.model_path + " --session " + typo + " --output " +
                               dir_.file("o.safetensors")),
              2, "does not exist");
  EXPECT_FALSE(fs::exists(typo));
}

// Probe 10: input faults that exited 1 (usage) now exit 2, and misleading messages are fixed.
TEST_F(HostileInput, InputFaultsAreBadInputWithMessagesThatFit) {
  // A manifest without layers.
  const auto empty_manifest = dir_.file("no-layers.safetensors");
  io::write_safetensors(
      empty_manifest, {{"x", torch::zeros({1})}},
      {{"mumoe.manifest", R"({"format":"mumoe-studio-model","format_version":1,"architecture":"mumoe-layers","layers":[]})"}});
  expect_exit(testkit::run_cli("info " + empty_manifest), 2, "layers is empty");

  // An IDX label of 200 for the 10-class demo model.
  const auto idx = dir_.path() / "idx";
  fs::create_directory(idx);
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  testkit::write_bytes((idx / "t10k-images-idx3-ubyte").string(),
                       std::string("\0\0\x08\x03", 4) + be32(2) + be32(28) + be32(28) + std::string(2 * 784, '\x10'));
  testkit::write_bytes((idx / "t10k-labels-idx1-ubyte").string(),
                       std::string("\0\0\x08\x01", 4) + be32(2) + std::string("\x00\xc8", 2));
  const std::string demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  expect_exit(testkit::run_cli("evaluate " + demo + " --data idx:" + idx.string() + ":test"), 2,
              "has 201 classes (labels up to 200)");

  // The demo GPT given to a classifier command is called what it is.
  const std::string gpt = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  const auto run = testkit::run_cli("evaluate " + gpt + " --data features:" + fixture_.features_path);
  expect_exit(run, 1, "is a μMoE GPT (a language model), not a classifier");
  EXPECT_FALSE(contains(run.out, "bare μMoE layer")) << run.out;

  // A TorchScript backbone that is not one (here: half a zip) is bad input naming it.
  const auto backbone = dir_.file("backbone.pt");
  testkit::write_bytes(backbone, std::string("PK\x03\x04", 4) + std::string(300, '\x01'));
  expect_exit(testkit::run_cli("evaluate " + fixture_.model_path + " --backbone " + backbone +
                               " --data features:" + fixture_.features_path),
              2, backbone + ": is not a readable TorchScript archive");
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --preset vit_huge"), 1, "unknown preset 'vit_huge'");

  // An edit that does not fit the model is a fault of the edits file.
  const auto edits = dir_.file("edits.json");
  testkit::write_bytes(edits, R"([{"layer":"head","target":"class0","output":99,"lambda":1.0,)"
                              R"("mean_coefficients":[0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1]}])");
  expect_exit(testkit::run_cli("export " + fixture_.model_path + " --edits " + edits + " --output " +
                               dir_.file("edited.safetensors") + " --data features:" + fixture_.features_path),
              2, edits + ": edit of 'class0' targets output 99");
  EXPECT_FALSE(fs::exists(dir_.file("edited.safetensors")));
}

// --class-names FILE: one name per line, a JSON list, or imagenet_class_index.json's object.
TEST_F(HostileInput, ClassNamesComeFromAFileInEveryCommonFormat) {
  auto names_of = [&](const std::string& file) {
    return run_json("info " + fixture_.model_path + " --class-names " + file + " --json").at("label_names");
  };
  const auto lines = dir_.file("classes.txt");
  testkit::write_bytes(lines, "tench\r\ngoldfish\nwhite shark\n\n");
  EXPECT_EQ(names_of(lines), nlohmann::json({"tench", "goldfish", "white shark"}));
  const auto list = dir_.file("classes.json");
  testkit::write_bytes(list, R"(["a", "b"])");
  EXPECT_EQ(names_of(list), nlohmann::json({"a", "b"}));
  const auto index = dir_.file("imagenet_class_index.json");
  testkit::write_bytes(index, R"({"1": ["n01443537", "goldfish"], "0": ["n01440764", "tench"]})");
  EXPECT_EQ(names_of(index), nlohmann::json({"tench", "goldfish"}));

  const auto gap = dir_.file("gap.json");
  testkit::write_bytes(gap, R"({"0": "tench", "2": "shark"})");
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --class-names " + gap), 2,
              "key '2' is not an index from 0 to 1");
  const auto empty = dir_.file("empty.txt");
  testkit::write_bytes(empty, "\n\n");
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --class-names " + empty), 2, "holds no class names");
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --class-names " + dir_.file("missing.txt")), 2,
              "does not exist");
}

// ---- Issue 45: files destroyed or replaced, crashes ----------------------------------------------

// A FIFO, a device node and a directory at an output path used to be replaced by a regular file
// (as root, `--output /dev/null` replaced the system's /dev/null). Every command refuses them and
// leaves the node as it was. The device is made here (root only), never the system's.
TEST_F(HostileInput, AnOutputThatIsNotARegularFileIsRefusedAndKept) {
  run_json("analyze " + common() + "--json");
  const auto fifo = dir_.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<std::string> nodes = {fifo, dir_.path().string()};
  const auto device = dir_.file("null-device");
  if (::geteuid() == 0 && ::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) nodes.push_back(device);
  const auto edits = dir_.file("edits.json");
  testkit::write_bytes(edits, "[]");
  for (const auto& node : nodes) {
    const std::vector<std::string> commands = {
        "forward " + fixture_.model_path + " --input " + fixture_.features_path + " --tensor features --output " + node,
        "gallery " + common() + "--expert 0 --output " + node,
        "init --variant cp --input-dim 4 --experts 3 --rank 2 --output-dim 2 --overwrite --output " + node,
        "export " + fixture_.model_path + " --edits " + edits + " --data features:" + fixture_.features_path +
            " --overwrite --output " + node,
        "rewrite " + fixture_.model_path + " --data features:" + fixture_.features_path +
            " --target a --subpop 'a=1' --edits-out " + node,
        "train --data features:" + fixture_.features_path + " --test-data '' --experts 4 --rank 2 --epochs 1 "
            "--overwrite --quiet --output " + node,
    };
    for (const auto& command : commands) {
      const auto run = testkit::run_cli(command);
      EXPECT_FALSE(run.killed) << run.out;
      EXPECT_NE(run.code, 0) << command << "\n" << run.out;
      EXPECT_TRUE(contains(run.out, node)) << command << "\n" << run.out;
      EXPECT_TRUE(contains(run.out, "not a regular file")) << command << "\n" << run.out;
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  if (nodes.size() == 3) {
    ASSERT_EQ(::stat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
}

// `rewrite --edits-out` was checked against nothing (it replaced the model, the cache, or the
// --output written a moment before); `train` wrote its optimizer state over its training data.
TEST_F(HostileInput, NoOutputReplacesAnInputOrAnotherOutput) {
  run_json("analyze " + common() + "--json");
  const auto before = snapshot(dir_.path());
  const auto rewrite = "rewrite " + fixture_.model_path + " --data features:" + fixture_.features_path + " --cache " +
                       cache() + " --target a --subpop 'a=1' ";
  const auto out = dir_.file("edited.safetensors");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {rewrite + "--edits-out " + fixture_.model_path, "is the model"},
      {rewrite + "--edits-out " + cache(), "is the analysis cache"},
      {rewrite + "--edits-out " + fixture_.features_path, "is a data file"},
      {rewrite + "--output " + out + " --edits-out " + out, "is also --output"},
      {"train --data features:" + out + ".optim.pt --test-data '' --experts 4 --rank 2 --output " + out,
       "is a data file"},
  };
  testkit::write_bytes(out + ".optim.pt", "training data, not an optimizer");
  for (const auto& [args, phrase] : cases) expect_exit(testkit::run_cli(args), 1, phrase);
  EXPECT_EQ(testkit::read_bytes(out + ".optim.pt"), "training data, not an optimizer");
  fs::remove(out + ".optim.pt");
  EXPECT_EQ(snapshot(dir_.path()), before);
}

// `export` staged into the fixed path OUT.unverified: a file of that name was consumed or
// overwritten. Now the staging file has a unique name; a staging file that a killed export left
// (its process is gone) is swept by the next run, a file of the user's is never touched.
TEST_F(HostileInput, ExportStagesUnderAUniqueNameAndSweepsWhatAKilledRunLeft) {
  const auto edits = dir_.file("edits.json");
  testkit::write_bytes(edits, R"([{"layer": "head", "target": "class1", "output": 1, "lambda": 0.5,
                                    "mean_coefficients": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}])");
  const auto out = dir_.file("exported.safetensors");
  testkit::write_bytes(out + ".unverified", "the user's own file");
  // A pid that no longer runs: the shell's, once it has exited.
  const auto dead = testkit::run_shell("echo $$");
  const auto pid = std::to_string(std::stoll(dead.out));
  const auto stale = out + io::kTemporaryInfix + pid + "-AbC123";
  testkit::write_bytes(stale, "left by a killed export");
  const auto run = testkit::run_cli("export " + fixture_.model_path + " --edits " + edits + " --data features:" +
                                    fixture_.features_path + " --output " + out);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(testkit::read_bytes(out + ".unverified"), "the user's own file");
  EXPECT_FALSE(fs::exists(stale)) << run.out;
  for (const auto& e : fs::directory_iterator(dir_.path()))
    EXPECT_FALSE(contains(e.path().filename().string(), io::kTemporaryInfix)) << e.path();
}

// Atomic writes created every file 0644: replacing a 0600 file made it world-readable, and the
// umask was ignored.
TEST_F(HostileInput, AReplacedFileKeepsItsPermissionsAndANewOneFollowsTheUmask) {
  const auto forward = "forward " + fixture_.model_path + " --input " + fixture_.features_path +
                       " --tensor features --output ";
  const auto kept = dir_.file("private.safetensors");
  testkit::write_bytes(kept, "old");
  ::chmod(kept.c_str(), 0600);
  ASSERT_EQ(testkit::run_cli(forward + kept).code, 0);
  struct stat st {};
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const auto fresh = dir_.file("fresh.safetensors");
  ASSERT_EQ(testkit::run_shell("umask 077; exec " + std::string(MUMOE_CLI_PATH) + " " + forward + fresh).code, 0);
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const auto shared = dir_.file("shared.safetensors");
  ASSERT_EQ(testkit::run_shell("umask 002; exec " + std::string(MUMOE_CLI_PATH) + " " + forward + shared).code, 0);
  ASSERT_EQ(::stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0664u);
}

// JSON nested 100,000 deep in a model's manifest overflowed the stack (SIGSEGV) in `info`; a
// class-names file {"0": []} called back() on an empty array.
TEST_F(HostileInput, DeeplyNestedJsonAndEmptyClassNameListsAreBadInputNotACrash) {
  const auto source = io::SafetensorsFile::open(fixture_.model_path);
  auto manifest = nlohmann::json::parse(source.metadata().at(model::kManifestMetadataKey));
  manifest["provenance"]["note"] = "DEEP";
  auto text = manifest.dump();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("\"DEEP\""), 6, deep);
  std::vector<io::NamedTensor> tensors;
  for (const auto& entry : source.entries()) tensors.push_back({entry.name, source.read(entry.name)});
  const auto bomb = dir_.file("deep-manifest.safetensors");
  io::write_safetensors(bomb, tensors, {{model::kManifestMetadataKey, text}});
  expect_exit(testkit::run_cli("info " + bomb), 2, "nested more than");

  const auto sidecar_model = dir_.file("copy.safetensors");
  fs::copy_file(fixture_.model_path, sidecar_model);
  testkit::write_bytes(sidecar_model + ".mumoe.json", "{\"manifest\": " + deep + ", \"model_file_bytes\": 1}");
  const auto sidecar_run = testkit::run_cli("info " + sidecar_model);
  EXPECT_FALSE(sidecar_run.killed) << sidecar_run.out;
  EXPECT_TRUE(sidecar_run.code == 0 || sidecar_run.code == 2) << sidecar_run.out;

  const auto names = dir_.file("names.json");
  testkit::write_bytes(names, R"({"0": [], "1": "b"})");
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --class-names " + names), 2,
              "class 0 has an empty list instead of a name");
  testkit::write_bytes(names, deep);
  expect_exit(testkit::run_cli("info " + fixture_.model_path + " --class-names " + names), 2, "nested more than");
}

// `rewrite --lambda nan` exited 0 and stored an edit no command could read back;
// `export --verify-samples 0` or -1 answered with LibTorch's internals and exit 2.
TEST_F(HostileInput, NonFiniteLambdaAndNoVerifiedSamplesAreUsageErrors) {
  const auto rewrite = "rewrite " + fixture_.model_path + " --data features:" + fixture_.features_path +
                       " --target a --subpop 'a=1' --lambda ";
  for (const auto* lambda : {"nan", "inf", "-inf"}) expect_exit(testkit::run_cli(rewrite + lambda), 1, "finite");
  const auto edits = dir_.file("edits.json");
  testkit::write_bytes(edits, "[]");
  for (const auto* n : {"0", "-1"})
    expect_exit(testkit::run_cli("export " + fixture_.model_path + " --edits " + edits + " --output " +
                                 dir_.file("out.safetensors") + " --verify-samples " + n),
                1, "--verify-samples");
}

// Issue 45, silent wrong answers and messages: a negative BatchNorm variance made every output NaN
// with exit 0; a legacy (pre-1.6) checkpoint was "not a safetensors file"; a class folder whose
// name is not UTF-8 made every --json output fail.
TEST_F(HostileInput, NegativeVariancesLegacyCheckpointsAndNonUtf8NamesAreHandledByName) {
  const auto source = io::SafetensorsFile::open(fixture_.model_path);
  std::vector<io::NamedTensor> tensors;
  std::string variance;
  for (const auto& entry : source.entries()) {
    auto t = source.read(entry.name);
    if (entry.name.size() > 11 && entry.name.compare(entry.name.size() - 11, 11, "running_var") == 0) {
      t = t.clone();
      t[0] = -0.5;
      variance = entry.name;
    }
    tensors.push_back({entry.name, t});
  }
  ASSERT_FALSE(variance.empty()) << "the fixture's head has BatchNorm gating";
  const auto bad = dir_.file("negative-variance.safetensors");
  io::write_safetensors(bad, tensors, source.metadata());
  expect_exit(testkit::run_cli("forward " + bad + " --input " + fixture_.features_path + " --tensor features --output " +
                               dir_.file("out.safetensors")),
              2, "tensor '" + variance + "' holds a negative variance");

  // torch.save's legacy format, as PyTorch < 1.6 wrote it (and still does on request).
  const auto legacy = dir_.file("legacy.pth");
  const auto python = testkit::run_shell(
      "/usr/bin/python3 -c \"import torch; torch.save({'w': torch.zeros(2)}, '" + legacy +
      "', _use_new_zipfile_serialization=False)\" 2>&1");
  if (python.code == 0) expect_exit(testkit::run_cli("info " + legacy), 2, "legacy format of PyTorch < 1.6");

  // A class folder named with a byte that is not UTF-8 (among the demo's ten classes): the JSON
  // says U+FFFD, nothing fails.
  const auto folder = dir_.file("images");
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  const auto images = write_demo_class_folders(folder, {"bad\xff" "name"});
  if (images.code != 0) GTEST_SKIP() << "no PIL to write the images: " << images.out;
  const auto evaluated = testkit::run_cli("evaluate " + demo + " --data folder:" + folder + " --json");
  EXPECT_EQ(evaluated.code, 0) << evaluated.out;
  const auto brace = evaluated.out.find('{');
  ASSERT_NE(brace, std::string::npos) << evaluated.out;
  const auto j = nlohmann::json::parse(evaluated.out.substr(brace));
  EXPECT_EQ(j.at("class_names").at(0), "bad\xef\xbf\xbdname") << j.dump();  // U+FFFD for the byte 0xFF
}

// Issue 45, the memory ceiling: no input makes mumoe use more than 4 GiB of address space. The
// bombs of the other tests run here under `ulimit -v` at that ceiling: each is refused by name,
// none runs out of memory.
TEST_F(HostileInput, BombsAreRefusedUnderTheMemoryCeiling) {
  const std::string ceiling = "ulimit -v " + std::to_string(4ull << 20) + "; exec " + MUMOE_CLI_PATH + " ";
  // An image whose header claims 20000 × 20000 pixels (decoded: 10.5 GB), among the demo's classes.
  auto be32 = [](uint32_t n) {
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)};
  };
  const auto folder = dir_.file("bomb-images");
  for (int c = 0; c < 10; ++c) fs::create_directories(folder + "/c" + std::to_string(c));
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(20000) + be32(20000) +
                          std::string("\x08\x02\x00\x00\x00", 5) + be32(0);
  for (int c = 0; c < 10; ++c) testkit::write_bytes(folder + "/c" + std::to_string(c) + "/1.png", png);
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  expect_exit(testkit::run_shell(ceiling + "evaluate " + demo + " --data folder:" + folder), 2, "pixel limit");

  // A text file of 500 MB (sparse: it takes no disk) as a GPT's text: data (read whole: 3.8 GB).
  const auto big = dir_.file("big.txt");
  { std::ofstream(big, std::ios::binary).put('a'); }
  fs::resize_file(big, 500u << 20);
  const auto gpt = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  expect_exit(testkit::run_shell(ceiling + "evaluate " + gpt + " --data text:" + big), 2, "limit of text: data");

  // A manifest nested 100,000 deep.
  const auto source = io::SafetensorsFile::open(fixture_.model_path);
  std::vector<io::NamedTensor> tensors;
  for (const auto& entry : source.entries()) tensors.push_back({entry.name, source.read(entry.name)});
  const auto deep = dir_.file("deep.safetensors");
  io::write_safetensors(deep, tensors, {{"mumoe.manifest", std::string(100000, '[') + std::string(100000, ']')}});
  expect_exit(testkit::run_shell(ceiling + "info " + deep), 2, "nested more than");

  // Checkpoints that inflate (written by PyTorch, then rezipped with a deflated bomb).
  const auto python = testkit::run_shell(
      "cd " + dir_.path().string() + " && /usr/bin/python3 -c \"\n"
      "import torch, zipfile\n"
      "torch.save({'w': torch.ones(4)}, 'good.pth')\n"
      "torch.save({'w': torch.zeros(1).expand(100000000)}, 'stride0.pth')\n"
      "with zipfile.ZipFile('good.pth') as z, zipfile.ZipFile('dups.pth', 'w', zipfile.ZIP_DEFLATED) as out:\n"
      "  for i in z.infolist(): out.writestr(i.filename, b'\\\\x80\\\\x02]' + b'2' * (1 << 30) if i.filename.endswith('data.pkl') else z.read(i.filename))\n"
      "\" 2>&1");
  if (python.code != 0) GTEST_SKIP() << "no PyTorch to write the checkpoints: " << python.out;
  expect_exit(testkit::run_shell(ceiling + "info " + dir_.file("stride0.pth")), 2, "views 100000000 elements");
  expect_exit(testkit::run_shell(ceiling + "info " + dir_.file("dups.pth")), 2, "more than the 268435456-byte limit");
}

// Issue 45: one edit stored with a λ that is not a number (written by an older version) made the
// whole session unreadable — listing, undo, clear and export all failed. It is now listed as
// damaged, the others stay usable, --drop-damaged removes it, and export refuses until then.
TEST_F(HostileInput, ADamagedEditIsListedAndRemovedWithoutLosingTheOthers) {
  const auto session = dir_.file("edits.sqlite");
  {
    auto store = editing::EditSessionStore::open(session);
    editing::EditStack stack;
    for (double lambda : {0.5, 1.5, 2.5}) {
      editing::LogitEdit e;
      e.layer = "head";
      e.target = "class1";
      e.output = 1;
      e.lambda = lambda;
      e.mean_coefficients = std::vector<double>(12, 0.1);
      stack.push(e);
    }
    store->save(analysis::hash_file(fixture_.model_path), fixture_.model_path, stack);
  }
  // The second edit's λ as null, as `rewrite --lambda nan` used to store it.
  sql(session, "UPDATE edit_sessions SET stack_json = json_set(stack_json, '$.edits[1].lambda', json('null'))");
  const auto edits = "edits " + fixture_.model_path + " --session " + session;
  const auto listed = testkit::run_cli(edits);
  EXPECT_EQ(listed.code, 0) << listed.out;
  EXPECT_TRUE(contains(listed.out, "damaged  edit 2")) << listed.out;
  EXPECT_TRUE(contains(listed.out, "λ = 0.5") || contains(listed.out, "0.5")) << listed.out;
  const auto exported = testkit::run_cli("export " + fixture_.model_path + " --session " + session + " --data features:" +
                                         fixture_.features_path + " --output " + dir_.file("out.safetensors"));
  expect_exit(exported, 1, "--drop-damaged");
  EXPECT_FALSE(fs::exists(dir_.file("out.safetensors")));
  ASSERT_EQ(testkit::run_cli(edits + " --drop-damaged").code, 0);
  const auto after = run_json(edits + " --json");
  EXPECT_EQ(after.at("edits").size(), 2u);
  EXPECT_TRUE(after.at("damaged").empty());
  EXPECT_EQ(after.at("edits").at(1).at("lambda"), 2.5);
}

// Issue 45: class-folder names reached the terminal raw in text output (newlines, ESC sequences).
TEST_F(HostileInput, ClassFolderNamesAreEscapedInTextOutput) {
  const auto folder = dir_.file("escapes");
  const auto images = write_demo_class_folders(folder, {"esc\x1b[31mred", "new\nline"});
  if (images.code != 0) GTEST_SKIP() << "no PIL to write the images: " << images.out;
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  const auto run = testkit::run_cli("evaluate " + demo + " --data folder:" + folder);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_FALSE(contains(run.out, "\x1b")) << run.out;
  EXPECT_TRUE(contains(run.out, "esc\\x1b[31mred")) << run.out;
  EXPECT_TRUE(contains(run.out, "new\\nline")) << run.out;
}

}  // namespace
