// Issue 44: a nanoGPT GPT-2 with μMoE MLPs opens as what it is. A GPT is built in the test's own
// PyTorch after the reference's structure (experiments/nanoGPT: blocks x + attn(ln_1(x)),
// x + mlp(x); the MLP a two-layer μMoE under mlp.MuMoE_layer with the reference's keys), with a
// head width of 16 (so GPT-2's guess of 64 would compute another attention) and GPT-2's padded
// vocabulary of 50,304, and saved as train.py saves ckpt.pt — the state dict under "model" beside
// "model_args", "optimizer", "iter_num", "best_val_loss" and "config". `mumoe generate` must read
// the head count from model_args, choose GPT-2's tokenizer by itself, and continue a prompt
// token for token as the PyTorch model does (greedy, among GPT-2's 50,257 real tokens).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "io/safetensors.h"
#include "python_fixture.h"
#include "python_reference.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

const char* kNanoGptScript = R"PY(
import json, math
sys.path.insert(0, sys.argv[2])
import torch.nn as nn
from reference_models import NanoGpt
C, H, L, V, T, N, R = 48, 3, 2, 50304, 32, 4, 8
BIAS = sys.argv[3] != 'no-bias'
MIXED = sys.argv[3] == 'mixed'  # block 0's MLP the reference's plain one (layer_type linear)
DENSE = sys.argv[3] == 'dense'  # every MLP the plain one: nanoGPT's GPT-2 itself, no experts

model = NanoGpt(C, H, L, V, T, N, R, bias=BIAS, plain=range(L) if DENSE else (0,) if MIXED else ())
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith('.bias') or 'ln' in name: p.normal_(0, 0.2) if name.endswith('.bias') else p.normal_(1, 0.2)
    model.transformer.wte.weight.normal_(0, 0.3)
    for b in model.transformer.h:  # attention strong enough that its head count shows in the text
        b.attn.c_attn.weight.normal_(0, 0.6)
        b.attn.c_proj.weight.normal_(0, 0.4)
model.eval()
args = dict(n_layer=L, n_head=H, n_embd=C, block_size=T, bias=BIAS, vocab_size=V, dropout=0.0,
            layer_type='linear' if DENSE else 'mixed' if MIXED else 'CPMuMoE', n_experts=N)
torch.save({'model': model.state_dict(), 'optimizer': torch.optim.AdamW(model.parameters()).state_dict(),
            'model_args': args, 'iter_num': 5000, 'best_val_loss': torch.tensor(3.25),
            'config': {'dataset': 'openwebtext', 'learning_rate': 6e-4, 'compile': True}}, 'ckpt.pt')
torch.save(model.state_dict(), 'bare.pth')  # no model_args: the head count must be guessed
# "Hello, world" in GPT-2's own encoding (OpenAI's encoder: "Hello" 15496, "," 11, " world" 995).
ids = [15496, 11, 995]
with torch.no_grad():
    for _ in range(12):
        logits = model(torch.tensor([ids[-T:]]))[0, -1, :50257]
        ids.append(int(logits.argmax()))
# nanoGPT's val.bin (uint16, little-endian) and the loss over consecutive windows of T tokens, the
# last one shorter, as nanoGPT-style evaluation cuts a stream.
import array
stream = torch.randint(0, 50257, (300,)).tolist()
array.array('H', stream).tofile(open('val.bin', 'wb'))
loss, count = 0.0, 0
with torch.no_grad():
    for start in range(0, len(stream) - 1, T):
        window = stream[start:start + T + 1]
        logits = model(torch.tensor([window[:-1]]))[0].double()
        loss += float(nn.functional.cross_entropy(logits, torch.tensor(window[1:]), reduction='sum'))
        count += len(window) - 1
# What `mumoe predict` writes for the stream: its full windows of T tokens, their logits and every
# μMoE block's coefficients.
windows = torch.tensor(stream[:(len(stream) - 1) // T * T]).view(-1, T)
with torch.no_grad():
    expected = {'tokens': windows, 'logits': model(windows)}
for name, layer in model.mumoe_layers().items(): expected[name] = layer.last
torch.save(expected, 'expected.pth')
json.dump({'continuation': ids[3:], 'val_loss': loss / count, 'val_tokens': count}, open('expected.json', 'w'))
)PY";

class NanoGpt : public ::testing::TestWithParam<const char*> {};

TEST_P(NanoGpt, AGpt2CheckpointOpensWithItsModelArgsAndItsTokenizer) {
  REQUIRE_PYTHON("torch");
  testkit::TempDir dir;
  {
    const auto path = dir.file("nanogpt.py");
    testkit::write_bytes(path, std::string("import sys, os, torch\nos.chdir(sys.argv[1])\ntorch.manual_seed(0)\n") +
                                   kNanoGptScript);
    const auto command = "'" + testkit::python_interpreter() + "' " + path + " " + dir.path().string() + " " +
                         MUMOE_SOURCE_DIR + "/tests/support " + GetParam() + " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  const bool dense = std::string(GetParam()) == "dense";
  std::ifstream in(dir.file("expected.json"));
  const auto reference = nlohmann::json::parse(in);
  const auto expected = reference.at("continuation").get<std::vector<int32_t>>();

  const auto ckpt = dir.file("ckpt.pt");
  const auto run = testkit::run_cli("generate " + ckpt + " --prompt 'Hello, world' --tokens 12 --temperature 0 --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out.substr(run.out.find('{')));
  EXPECT_EQ(j.at("tokens").get<std::vector<int32_t>>(), expected) << run.out;

  // Without model_args the head count would be GPT-2's guess (48 / 64 → 1 head): another
  // attention, another continuation — which --heads 3 corrects.
  const auto guessed = testkit::run_cli("generate " + ckpt + " --prompt 'Hello, world' --tokens 12 --temperature 0 "
                                        "--json --heads 1");
  ASSERT_EQ(guessed.code, 0) << guessed.out;
  EXPECT_NE(nlohmann::json::parse(guessed.out.substr(guessed.out.find('{'))).at("tokens").get<std::vector<int32_t>>(),
            expected);
  // nanoGPT's own token stream, read as it is (tokens:FILE): the loss PyTorch computes.
  const auto val = "tokens:" + dir.file("val.bin");
  const auto evaluated = testkit::run_cli("evaluate " + ckpt + " --data " + val + " --json");
  ASSERT_EQ(evaluated.code, 0) << evaluated.out;
  const auto e = nlohmann::json::parse(evaluated.out.substr(evaluated.out.find('{')));
  EXPECT_EQ(e.at("tokens").get<int64_t>(), reference.at("val_tokens").get<int64_t>());
  EXPECT_NEAR(e.at("mean_loss").get<double>(), reference.at("val_loss").get<double>(),
              1e-5 * reference.at("val_loss").get<double>());
  const auto gallery = testkit::run_cli("gallery " + ckpt + " --data " + val + " --layer 1 --expert 0 --max-sequences 4 "
                                        "--cache " + dir.file("cache.sqlite") + " --quiet --json");
  if (dense) {  // nothing to analyse, said as such
    EXPECT_EQ(gallery.code, 1) << gallery.out;
    EXPECT_NE(gallery.out.find("plain MLP"), std::string::npos) << gallery.out;
  } else {
    EXPECT_EQ(gallery.code, 0) << gallery.out;
  }

  // predict: the logits of the stream's windows and each μMoE block's coefficients, as PyTorch's.
  const auto predictions = dir.file("predictions.safetensors");
  const auto predicted = testkit::run_cli("predict " + ckpt + " --data " + val + " --coefficients --json --output " +
                                          predictions);
  ASSERT_EQ(predicted.code, 0) << predicted.out;
  // The output may not be the token file read (nor the model): refused, and the file kept.
  const auto stream_bytes = testkit::read_bytes(dir.file("val.bin"));
  EXPECT_EQ(testkit::run_cli("predict " + ckpt + " --data " + val + " --output " + dir.file("val.bin")).code, 1);
  EXPECT_EQ(testkit::run_cli("predict " + ckpt + " --data " + val + " --output " + ckpt).code, 1);
  EXPECT_EQ(testkit::read_bytes(dir.file("val.bin")), stream_bytes);
  const auto wanted = testkit::read_expected(dir.file("expected.pth"));
  const auto written = io::SafetensorsFile::open(predictions);
  EXPECT_TRUE(torch::equal(written.read("tokens"), wanted.at("tokens")));
  testkit::expect_close(written.read("logits"), wanted.at("logits"), "logits");
  size_t layers = 0;
  for (const auto& entry : written.entries())
    if (entry.name != "logits" && entry.name != "tokens") {
      ++layers;
      ASSERT_TRUE(wanted.count(entry.name)) << entry.name;
      testkit::expect_close(written.read(entry.name), wanted.at(entry.name), entry.name);
    }
  EXPECT_EQ(layers, wanted.size() - 2);

  // `info` says where the head count comes from — and that it is a guess without model_args.
  const auto info = [&](const std::string& file) {
    const auto run = testkit::run_cli("info " + file + " --json");
    EXPECT_EQ(run.code, 0) << run.out;
    return nlohmann::json::parse(run.out.substr(run.out.find('{'))).at("gpt");
  };
  EXPECT_EQ(info(ckpt).at("heads_from"), "model_args");
  EXPECT_EQ(info(ckpt).at("config").at("n_head"), 3);
  EXPECT_EQ(info(dir.file("bare.pth")).at("heads_from"), "guessed");
  EXPECT_EQ(info(dir.file("bare.pth")).at("config").at("n_head"), 1);

  const auto unknown = testkit::run_cli("generate " + ckpt + " --prompt 'Hello' --tokens 2 --tokenizer sentencepiece");
  EXPECT_EQ(unknown.code, 1) << unknown.out;
  // A damaged tokenizer file of the user's is bad input, named.
  const auto tokenizer_dir = dir.file("tokenizer");
  std::filesystem::create_directory(tokenizer_dir);
  testkit::write_bytes(tokenizer_dir + "/vocab.json", "{\"!\": 0, \"a\": ");
  testkit::write_bytes(tokenizer_dir + "/merges.txt", "#version: 0.2\n");
  const auto damaged = testkit::run_cli("generate " + ckpt + " --prompt 'Hello' --tokens 2 --tokenizer " + tokenizer_dir);
  EXPECT_EQ(damaged.code, 2) << damaged.out;
  EXPECT_NE(damaged.out.find(tokenizer_dir + "/vocab.json"), std::string::npos) << damaged.out;
}

// nanoGPT's own bias option: with biases, and without (train.py's default); a GPT whose first
// block has the reference's plain MLP beside μMoE ones; and nanoGPT's GPT-2 with no μMoE at all.
INSTANTIATE_TEST_SUITE_P(Variants, NanoGpt, ::testing::Values("bias", "no-bias", "mixed", "dense"));

}  // namespace
