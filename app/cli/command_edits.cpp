// mumoe edits MODEL --session DB [--undo | --redo | --clear] [--json]: the model's edit stack in
// an edit-session database — list it, or undo / redo / clear like the GUI's Edit menu. Every
// change is saved at once (one transaction); `mumoe export --session DB` folds the applied edits.
#include <iostream>

#include "analysis/content_hash.h"
#include "cli_support.h"
#include "editing/edit_session_store.h"
#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::cli {
namespace {

struct EditsOptions {
  std::string model, session;
  bool undo = false, redo = false, clear = false, drop_damaged = false, json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    app->add_option("MODEL", model, "Model file (edits are keyed by its content)")->required();
    app->add_option("--session", session, "Edit-session database (SQLite)")->required();
    app->add_flag("--undo", undo, "Undo the last applied edit");
    app->add_flag("--redo", redo, "Redo the last undone edit");
    app->add_flag("--clear", clear, "Remove every edit of this model");
    app->add_flag("--drop-damaged", drop_damaged, "Remove the stored edits that cannot be read, keeping the others");
    add_json_flag(app, json);
  }
};

int run_edits(const EditsOptions& o) {
  if (o.undo + o.redo + o.clear > 1) throw UsageError("give at most one of --undo, --redo and --clear");
  // A mistyped path must not silently become an empty database.
  auto store = editing::EditSessionStore::open(o.session, editing::EditSessionStore::kMustExist);
  const auto hash = analysis::hash_file(o.model);
  const auto stored = store->load(hash).value_or(editing::StoredSession{});
  auto stack = stored.stack;
  if (o.undo) stack.undo();  // throws UsageError when there is nothing to undo
  if (o.redo) stack.redo();
  if (o.clear) stack.clear();
  // Any change saves the stack as read: without the damaged edits, which are then gone.
  const bool changed = o.undo || o.redo || o.clear || (o.drop_damaged && !stored.damaged.empty());
  if (changed) store->save(hash, o.model, stack);
  const auto damaged = changed ? std::vector<std::string>{} : stored.damaged;
  if (o.json) {
    auto j = stack.to_json();
    j["model"] = o.model;
    j["session"] = o.session;
    j["damaged"] = damaged;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  if (stack.all().empty() && damaged.empty()) std::cout << "no edits for " << o.model << " in " << o.session << "\n";
  for (const auto& d : damaged)
    std::cout << "  damaged  " << io::printable(d) << " (left out; --drop-damaged removes it)\n";
  for (size_t i = 0; i < stack.all().size(); ++i)
    std::cout << (i < stack.applied_count() ? "  applied  " : "  undone   ") << i + 1 << ". "
              << stack.all()[i].describe() << "\n";
  return kSuccess;
}

}  // namespace

Command add_edits_command(CLI::App& parent) {
  return make_command<EditsOptions>(parent, "edits",
                                    "List, undo or redo a model's edits in an edit-session database",
                                    run_edits);
}

}  // namespace mumoe::cli
