#include "model/open_options.h"
#include "io/json_file.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "io/errors.h"
#include "io/file_checks.h"
#include "model/manifest.h"
#include "model/model_file.h"

namespace mumoe::model {

bool chooses_layout(const LayoutOverrides& o) {
  return o.gate_activation || o.gate_norm_without_bn || !o.checkpoint_key.empty() || !o.backbone_preset.empty() ||
         o.vit_heads > 0 || o.image_size > 0;
}

std::optional<RememberedOptions> read_remembered_options(const std::string& path) {
  const auto sidecar = manifest_sidecar_path(path);
  if (!io::regular_file_exists(sidecar)) return std::nullopt;
  std::ifstream in(sidecar, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw FileError(sidecar, "cannot be read");
  const auto json = io::parse_bounded_json(text, sidecar, "manifest");
  if (!json.is_object() || !json.contains("manifest") || !json.contains("model_file_bytes"))
    throw FileError(sidecar, "is not a mumoe manifest sidecar (needs 'manifest' and 'model_file_bytes')");
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec || !json.at("model_file_bytes").is_number_unsigned() || json.at("model_file_bytes").get<uint64_t>() != bytes)
    return std::nullopt;  // stale: the checkpoint was written again since
  RememberedOptions out{json.at("manifest"), ""};
  if (json.contains("checkpoint_key")) {
    if (!json.at("checkpoint_key").is_string()) throw FileError(sidecar, "'checkpoint_key' is not a string");
    out.checkpoint_key = json.at("checkpoint_key").get<std::string>();
  }
  return out;
}

std::string remember_open_options(const std::string& path, const LayoutOverrides& overrides) {
  auto chosen = overrides;
  // Choosing other options again keeps the state dict chosen before.
  if (chosen.checkpoint_key.empty()) {
    try {
      if (const auto before = read_remembered_options(path)) chosen.checkpoint_key = before->checkpoint_key;
    } catch (const FileError&) {
      // A sidecar that is not one has nothing to keep; it is replaced below (or refused).
    }
  }
  if (!chosen.torchscript_backbone.empty())
    chosen.torchscript_backbone = std::filesystem::absolute(chosen.torchscript_backbone).lexically_normal().string();
  // A file that opens without choices and without a sidecar, and is not inferred, carries its
  // own manifest (a mumoe model file): ModelFile::load never reads a sidecar for it.
  bool own_manifest = false;
  if (!io::regular_file_exists(manifest_sidecar_path(path))) {
    try {
      own_manifest = !ModelFile::load(path).inferred();
    } catch (const Error&) {
      // It needs choices to open at all: not self-describing.
    }
  }
  if (own_manifest)
    throw UsageError(path + " is a mumoe model file with its own manifest: it opens the same way everywhere, so "
                     "there is nothing to remember (give a TorchScript backbone on the command line)");
  // The sidecar is this call's only output: it may not be one of its inputs.
  io::refuse_output_over_inputs(manifest_sidecar_path(path), "the remembered options",
                                {{path, "the model"}, {chosen.torchscript_backbone, "the TorchScript backbone"}});
  const auto file = ModelFile::load(path, chosen);
  write_manifest_sidecar(path, file.manifest(), chosen.checkpoint_key);
  return manifest_sidecar_path(path);
}

std::string forget_open_options(const std::string& path) {
  const auto sidecar = manifest_sidecar_path(path);
  std::error_code ec;
  const bool removed = std::filesystem::remove(sidecar, ec);
  if (ec) throw WriteError(sidecar, "cannot be removed (" + ec.message() + ")");
  return removed ? sidecar : "";
}

std::vector<std::string> read_class_names(const std::string& path) {
  io::require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw FileError(path, "cannot be read");
  std::vector<std::string> names;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    try {
      const auto json = io::parse_bounded_json(text, path);
      if (json.is_array()) {
        for (const auto& n : json) names.push_back(n.get<std::string>());
      } else {
        // {"0": "tench", …} or {"0": ["n01440764", "tench"], …}: ordered by the integer index.
        names.resize(json.size());
        for (const auto& [key, value] : json.items()) {
          size_t used = 0;
          const auto index = std::stoll(key, &used);
          if (used != key.size() || index < 0 || static_cast<size_t>(index) >= names.size())
            throw FileError(path, "key '" + key + "' is not an index from 0 to " + std::to_string(names.size() - 1));
          // {"0": ["n01440764", "tench"]}: the last entry is the readable name.
          if (value.is_array() && value.empty())
            throw FileError(path, "class " + key + " has an empty list instead of a name");
          names[static_cast<size_t>(index)] = value.is_array() ? value.back().get<std::string>() : value.get<std::string>();
        }
      }
    } catch (const nlohmann::json::exception& e) {
      throw FileError(path, std::string("is not a list of class names: ") + e.what());
    } catch (const std::logic_error&) {  // std::stoll
      throw FileError(path, "has a key that is not a class index");
    }
  } else {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      names.push_back(line);
    }
    while (!names.empty() && names.back().empty()) names.pop_back();
  }
  if (names.empty()) throw FileError(path, "holds no class names");
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) throw FileError(path, "class " + std::to_string(i) + " has an empty name");
  return names;
}


}  // namespace mumoe::model
