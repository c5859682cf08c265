// The JSON that comes from users' files (issue 45): class names, a model's options sidecar, an
// edits file, a training configuration's parser — read or refused with a FileError or UsageError,
// never a crash (JSON nested 100,000 deep used to overflow the stack).
#include "editing/logit_edit.h"
#include "fuzz_input.h"
#include "io/errors.h"
#include "io/json_file.h"
#include "model/open_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size, ".json");
  try {
    mumoe::model::read_class_names(path);
  } catch (const mumoe::Error&) {
  }
  try {
    mumoe::editing::read_edits_file(path);
  } catch (const mumoe::Error&) {
  }
  try {
    (void)mumoe::io::parse_bounded_json(std::string(reinterpret_cast<const char*>(data), size), path);
  } catch (const mumoe::Error&) {
  }
  // The same bytes as the options sidecar of a model file beside them.
  const auto model = mumoe::fuzz::write_input(data, size, ".model");
  const auto sidecar = mumoe::fuzz::write_input(data, size, ".model.mumoe.json");
  (void)sidecar;
  try {
    mumoe::model::read_remembered_options(model);
  } catch (const mumoe::Error&) {
  }
  return 0;
}
