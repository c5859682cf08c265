// The session a controller's jobs share. Jobs run on the worker thread one at a time, in order,
// and each captures the slot's shared_ptr, so a job still queued when its controller dies finds
// the slot alive. The session is opened, used and closed by jobs on the worker thread; only a
// controller's destructor drops it on the GUI thread, after the worker has stopped.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "io/errors.h"

namespace mumoe::ui {

template <typename Session>
class SessionSlot {
 public:
  /// `what` names the session in get()'s error when none is open ("bias session").
  explicit SessionSlot(std::string what) : what_(std::move(what)) {}

  /// The open session; UsageError "no `what` is open" when there is none.
  Session& get() {
    if (!session_) throw UsageError("no " + what_ + " is open");
    return *session_;
  }
  void open(std::unique_ptr<Session> session) { session_ = std::move(session); }
  void reset() { session_.reset(); }

 private:
  std::string what_;
  std::unique_ptr<Session> session_;
};

}  // namespace mumoe::ui
