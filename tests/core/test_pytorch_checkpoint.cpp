// PyTorch checkpoints (.pth/.pt written by torch.save) against the real writer: each test has
// Debian's python3-torch (run as /usr/bin/python3, or $MUMOE_TEST_PYTHON) write the file at test
// time, and compares what
// the reader returns with what Python put in — bit for bit — and a μMoE head loaded from a .pth
// with the same head loaded from safetensors. Refusals: classes other than tensors and
// containers, TorchScript archives, the legacy format, truncated files, ambiguous state dicts.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>

#include "io/errors.h"
#include "io/pickle_reader.h"
#include "io/pytorch_checkpoint.h"
#include "io/safetensors.h"
#include "model/model_file.h"
#include "python_fixture.h"
#include "reference_math.h"
#include "temp_dir.h"

using namespace mumoe;
using mumoe::testkit::TempDir;

namespace {

using testkit::run_python;

#define REQUIRE_PYTHON_TORCH() REQUIRE_PYTHON("torch")

// The raw little-endian bytes Python wrote for one tensor (`t.contiguous()` as int bytes).
std::string raw(const TempDir& dir, const std::string& name) { return testkit::read_bytes(dir.file(name + ".bin")); }

std::string bytes_of(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

void expect_file_error(const std::function<void()>& call, const std::string& phrase) {
  try {
    call();
    ADD_FAILURE() << "no error; expected '" << phrase << "'";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(PytorchCheckpoint, ReadsAStateDictOfEveryDtypeAndLayoutBitForBit) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  run_python(dir, R"py(
base = torch.randn(6, 4)
sd = collections.OrderedDict()
sd["f32"] = torch.randn(3, 5)
sd["f64"] = torch.randn(2, 3, dtype=torch.float64)
sd["f16"] = torch.randn(7).half()
sd["bf16"] = torch.randn(2, 2).bfloat16()
sd["i64"] = torch.tensor([3, -4, 5])
sd["scalar"] = torch.tensor(2.5)
sd["empty"] = torch.zeros(0, 3)
sd["transposed"] = base.t()              # strides (1, 4): the storage is saved whole
sd["row_view"] = base[2:5]               # shares base's storage at an offset
sd["base"] = base
lin = torch.nn.Linear(4, 2)
sd["param"] = lin.weight                  # an nn.Parameter is saved through _rebuild_parameter
torch.save(sd, "sd.pth")
for k, v in sd.items():
    t = v.detach().contiguous()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        t = t.view(torch.int16)
    open(k + ".bin", "wb").write(t.numpy().tobytes())
)py");
  const auto f = io::PytorchCheckpoint::open(dir.file("sd.pth"));
  EXPECT_EQ(f->state_dict_key(), "");
  ASSERT_EQ(f->entries().size(), 11u);
  const std::map<std::string, std::pair<std::string, std::vector<int64_t>>> expected = {
      {"f32", {"F32", {3, 5}}},  {"f64", {"F64", {2, 3}}},     {"f16", {"F16", {7}}},
      {"bf16", {"BF16", {2, 2}}}, {"i64", {"I64", {3}}},        {"scalar", {"F32", {}}},
      {"empty", {"F32", {0, 3}}}, {"transposed", {"F32", {4, 6}}}, {"row_view", {"F32", {3, 4}}},
      {"base", {"F32", {6, 4}}},  {"param", {"F32", {2, 4}}}};
  for (const auto& [name, want] : expected) {
    const auto& e = f->entry(name);
    EXPECT_EQ(e.dtype, want.first) << name;
    EXPECT_EQ(e.shape, want.second) << name;
    const auto t = f->read(name);
    EXPECT_EQ(t.sizes().vec(), want.second) << name;
    EXPECT_EQ(bytes_of(t), raw(dir, name)) << name;
  }
}

TEST(PytorchCheckpoint, FindsTheStateDictInsideATrainingCheckpointOrByKey) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  run_python(dir, R"py(
sd = torch.nn.Linear(3, 2).state_dict()
opt = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters())
# nanoGPT's ckpt.pt: the model's state dict beside everything a training run keeps.
torch.save({"model": sd, "optimizer": opt.state_dict(), "model_args": {"n_layer": 2, "bias": False},
            "iter_num": 5, "best_val_loss": torch.tensor(1.25), "config": {"lr": 1e-3, "name": "x", "none": None}},
           "ckpt.pt")
torch.save({"model": sd, "ema": torch.nn.Linear(3, 2).state_dict(), "epoch": 3}, "two.pth")
open("weight.bin", "wb").write(sd["weight"].numpy().tobytes())
)py");
  const auto ckpt = io::PytorchCheckpoint::open(dir.file("ckpt.pt"));
  EXPECT_EQ(ckpt->state_dict_key(), "model");
  ASSERT_EQ(ckpt->entries().size(), 2u);
  EXPECT_EQ(bytes_of(ckpt->read("weight")), raw(dir, "weight"));

  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("two.pth")); },
                    "holds several state dicts ('model', 'ema'): choose one with --key");
  EXPECT_EQ(bytes_of(io::PytorchCheckpoint::open(dir.file("two.pth"), "model")->read("weight")), raw(dir, "weight"));
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("two.pth"), "modle"); },
                    "no state dict under the key 'modle' (state dicts are under 'model', 'ema')");
}

TEST(PytorchCheckpoint, RefusesEverythingButTensorsAndContainers) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  run_python(dir, R"py(
import argparse
torch.save({"model": torch.nn.Linear(2, 2).state_dict(), "args": argparse.Namespace(lr=1)}, "namespace.pth")
torch.save(torch.nn.Linear(2, 2), "whole-model.pth")
torch.jit.save(torch.jit.trace(torch.nn.Linear(2, 2), torch.randn(1, 2)), "scripted.pt")
torch.save(torch.nn.Linear(2, 2).state_dict(), "legacy.pth", _use_new_zipfile_serialization=False)
torch.save(torch.nn.Linear(64, 64).state_dict(), "good.pth")
torch.save([1, 2, 3], "list.pth")
)py");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("namespace.pth")); }, "refers to 'argparse.Namespace'");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("whole-model.pth")); },
                    "refers to 'torch.nn.modules.linear.Linear'");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("scripted.pt")); }, "is a TorchScript archive");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("legacy.pth")); }, "is not a zip archive");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("list.pth")); }, "holds no state dict");
  const auto good = testkit::read_bytes(dir.file("good.pth"));
  for (const size_t keep : {good.size() / 2, good.size() - 30, size_t{100}}) {
    testkit::write_bytes(dir.file("truncated.pth"), good.substr(0, keep));
    expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("truncated.pth"))->read("weight"); },
                      "truncated.pth");
  }
}

// The whole path a user takes: a μMoE head's state dict saved by torch.save opens as a model
// whose layer computes exactly what the same tensors give from a safetensors file.
TEST(PytorchCheckpoint, AMuMoEHeadSavedByTorchSaveOpensAsAModel) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  torch::manual_seed(4);
  // CP, BatchNorm gating, I=6, N=5, R=3, O=4 with bias: MuMoE(...).state_dict() of the reference.
  const std::vector<io::NamedTensor> tensors = {
      {"1.projs.0", torch::randn({6, 5})},
      {"1.bn.0.running_mean", torch::randn({5}) * 0.1},
      {"1.bn.0.running_var", torch::rand({5}) + 0.5},
      {"1.bn.0.num_batches_tracked", torch::tensor(int64_t{1234})},
      {"1.MuMoE.factors.0", torch::randn({5, 3})},
      {"1.MuMoE.factors.1", torch::randn({7, 3})},
      {"1.MuMoE.factors.2", torch::randn({4, 3})}};
  io::write_safetensors(dir.file("head.safetensors"), tensors);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : tensors) {
    testkit::write_bytes(dir.file(t.name + ".in"), bytes_of(t.tensor));
    list.push_back({{"name", t.name}, {"shape", t.tensor.sizes().vec()},
                    {"dtype", t.tensor.scalar_type() == torch::kLong ? "int64" : "float32"}});
  }
  testkit::write_bytes(dir.file("tensors.json"), list.dump());
  // The finetune layout of the paper's code: nn.Sequential(backbone, MuMoE) saved as a state dict.
  run_python(dir, R"py(
import json
sd = collections.OrderedDict()
for t in json.load(open("tensors.json")):
    data = bytearray(open(t["name"] + ".in", "rb").read())
    sd[t["name"]] = torch.frombuffer(data, dtype=getattr(torch, t["dtype"])).reshape(t["shape"]).clone()
torch.save(sd, "model-0.pth")
)py");
  const auto from_pth = model::ModelFile::load(dir.file("model-0.pth"));
  const auto from_st = model::ModelFile::load(dir.file("head.safetensors"));
  EXPECT_EQ(from_pth.format_name(), "PyTorch checkpoint");
  ASSERT_EQ(from_pth.manifest().layers.size(), 1u);
  EXPECT_EQ(from_pth.manifest().layers[0].prefix, "1.");
  auto a = from_pth.build_layer(from_pth.manifest().layers[0].name, torch::kFloat64);
  auto b = from_st.build_layer(from_st.manifest().layers[0].name, torch::kFloat64);
  const auto x = torch::randn({9, 6}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(a->forward(x).output, b->forward(x).output));
  std::vector<torch::Tensor> coefficients;
  EXPECT_LE(testkit::relative_error(a->forward(x).output, testkit::reference_block(a, x, coefficients)), 1e-10);
}

}  // namespace

namespace {

void expect_pickle_error(const std::string& bytes, const std::string& phrase) {
  try {
    io::read_pickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ADD_FAILURE() << "no error; expected '" << phrase << "'";
  } catch (const io::PickleError& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

// Hostile pickles written opcode by opcode (pickletools' names in the comments).
TEST(PickleReader, RefusesCodeAndDamageAndSurvivesCyclesAndDepth) {
  // GLOBAL os system, MARK, SHORT_BINSTRING 'ls', TUPLE, REDUCE, STOP: `os.system("ls")`.
  expect_pickle_error(std::string("cos\nsystem\n(U\x02lst") + "R.", "refers to 'os.system'");
  expect_pickle_error("cbuiltins\neval\n.", "refers to 'builtins.eval'");
  // PROTO 2, EMPTY_DICT, BINPUT 0, MARK, BINUNICODE 'a' — and then nothing: truncated.
  expect_pickle_error(std::string("\x80\x02}q\x00(X\x01\x00\x00\x00" "a", 12), "ends early");
  expect_pickle_error("h\x05.", "memo index 5 was never stored");
  expect_pickle_error("a.", "stack underflow");
  expect_pickle_error(std::string("\x8a\x09") + std::string(9, '\x01') + ".", "does not fit 64 bits");
  expect_pickle_error("\xff.", "opcode 0xff is not supported");
  expect_pickle_error("X\xff\xff\xff\x7f", "a string of 2147483647 bytes");  // 2 GiB announced in 5 bytes
  expect_pickle_error("\x80\x09.", "protocol 9");

  // EMPTY_LIST, BINPUT 0, BINGET 0, APPEND: a list that contains itself. Reading and freeing it
  // must not loop or leak.
  const std::string cycle("]q\x00h\x00" "a.", 7);
  auto v = io::read_pickle(reinterpret_cast<const uint8_t*>(cycle.data()), cycle.size());
  ASSERT_EQ(v.at(v.root).items.size(), 1u);
  EXPECT_EQ(v.at(v.root).items[0], v.root);
  // A million nested lists: MARK × n, LIST × n. Freed without recursion.
  const size_t n = 1'000'000;
  const std::string deep = std::string(n, '(') + std::string(n, 'l') + ".";
  v = io::read_pickle(reinterpret_cast<const uint8_t*>(deep.data()), deep.size());
  EXPECT_EQ(v.nodes.size(), n);
  // Values (and the open MARKs that make them) are bounded before they are allocated.
  io::PickleLimits small;
  small.max_values = 100;
  try {
    io::read_pickle(reinterpret_cast<const uint8_t*>(deep.data()), deep.size(), small);
    ADD_FAILURE() << "no error for more values than the limit";
  } catch (const io::PickleError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100 "), std::string::npos) << e.what();
  }
}

// The values beside the state dict (nanoGPT's model_args) come back as JSON, tensors left out.
TEST(PytorchCheckpoint, SideValuesAreThePlainEntriesBesideTheStateDict) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  run_python(dir, R"py(
sd = torch.nn.Linear(3, 2).state_dict()
# A list shared at every level through the memo: expanded it would hold 2^40 values.
shared = [1]
for _ in range(40): shared = [shared, shared]
torch.save({"model": sd, "model_args": {"n_layer": 2, "n_head": 3, "bias": False, "layer_type": "CPMuMoE"},
            "iter_num": 5, "best_val_loss": torch.tensor(1.25), "bomb": shared}, "ckpt.pt")
)py");
  const auto side = io::PytorchCheckpoint::open(dir.file("ckpt.pt"))->side_values();
  EXPECT_EQ(side.at("model_args"),
            nlohmann::json({{"n_layer", 2}, {"n_head", 3}, {"bias", false}, {"layer_type", "CPMuMoE"}}));
  EXPECT_EQ(side.at("iter_num"), 5);
  EXPECT_FALSE(side.contains("best_val_loss"));  // a tensor
  EXPECT_FALSE(side.contains("bomb"));           // past the budget of values kept
}

// Issue 45, checkpoints that amplify: a pickle that inflates past its limit, views of more elements
// than their storage holds, a storage record of other bytes than its pickle announces — each is
// refused from the zip's directory and the pickle's announcements, before anything is allocated.
TEST(PytorchCheckpoint, AmplifyingCheckpointsAreRefusedBeforeTheyAllocate) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  run_python(dir, R"py(
import zipfile
torch.save({"w": torch.zeros(1).expand(1000000)}, "stride0.pth")   # one element seen a million times
torch.save({"w": torch.ones(4)}, "good.pth")
def rewrite(source, target, replace):
    with zipfile.ZipFile(source) as z, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in z.infolist():
            data = z.read(info.filename)
            out.writestr(info.filename, replace(info.filename, data))
# The storage record replaced by 64 MiB of zeros, deflated to a few hundred KB.
rewrite("good.pth", "inflating.pth", lambda n, d: bytes(64 << 20) if n.endswith("data/0") else d)
# data.pkl replaced by 300 MB of DUP opcodes, deflated.
rewrite("good.pth", "dups.pth", lambda n, d: b"\x80\x02]" + b"2" * (300 << 20) if n.endswith("data.pkl") else d)
)py");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("stride0.pth")); },
                    "tensor 'w' views 1000000 elements of a storage of 1");
  const auto inflating = io::PytorchCheckpoint::open(dir.file("inflating.pth"));
  expect_file_error([&] { inflating->read("w"); }, "holds 67108864 bytes, but the pickle announces 4 elements of 4 bytes");
  expect_file_error([&] { io::PytorchCheckpoint::open(dir.file("dups.pth")); },
                    "data.pkl inflates to 314572803 bytes, more than the 268435456-byte limit");
  EXPECT_EQ(io::PytorchCheckpoint::open(dir.file("good.pth"))->read("w").sum().item<float>(), 4.0f);
}

// A pickle's stack counts against its limit: DUP and MARK used to grow it without bound.
TEST(PickleReader, TheStackAndTheMarksAreBounded) {
  std::string dups = std::string("\x80\x02]", 3) + std::string(1000, '2') + ".";
  io::PickleLimits limits;
  limits.max_values = 100;
  EXPECT_THROW(io::read_pickle(reinterpret_cast<const uint8_t*>(dups.data()), dups.size(), limits), io::PickleError);
  std::string marks = std::string("\x80\x02", 2) + std::string(1000, '(') + ".";
  EXPECT_THROW(io::read_pickle(reinterpret_cast<const uint8_t*>(marks.data()), marks.size(), limits), io::PickleError);
}

}  // namespace
